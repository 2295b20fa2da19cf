"""The tensor core's small gaps that real PyTorch code hits; expected values recorded from torch 2.13."""
import math
from collections import deque

import numpy as np
import pytest

import rlpipe


def test_constants_are_torchs_python_floats():
    assert (rlpipe.pi, rlpipe.e) == (3.141592653589793, 2.718281828459045)
    assert rlpipe.inf == float("inf") and math.isnan(rlpipe.nan)
    assert all(type(c) is float for c in (rlpipe.pi, rlpipe.e, rlpipe.inf, rlpipe.nan))


# torch.tensor on sequences: (data, dtype, shape, values) recorded from torch 2.13
_SEQUENCES = [
    (lambda: deque([1, 2, 3]), "int64", [3], [1, 2, 3]),
    (lambda: deque([1.0, 2]), "float32", [2], [1.0, 2.0]),
    (lambda: deque(), "float32", [0], []),
    (lambda: range(4), "int64", [4], [0, 1, 2, 3]),
    (lambda: (1, 2.5), "float32", [2], [1.0, 2.5]),
    (lambda: [deque([1, 2]), (3, 4)], "int64", [2, 2], [[1, 2], [3, 4]]),
    (lambda: [range(2), range(2)], "int64", [2, 2], [[0, 1], [0, 1]]),
    (lambda: [rlpipe.tensor([0.5]), rlpipe.tensor([0.75])], "float32", [2], [0.5, 0.75]),
    (lambda: [rlpipe.tensor(0.5), rlpipe.tensor(0.75)], "float32", [2], [0.5, 0.75]),
    (lambda: [rlpipe.tensor([[0.5]]), rlpipe.tensor([[0.75]])], "float32", [2], [0.5, 0.75]),
    (lambda: [1, rlpipe.tensor(2.5), rlpipe.tensor([3])], "float32", [3], [1.0, 2.5, 3.0]),
    (lambda: [1, rlpipe.tensor(2), rlpipe.tensor([3])], "int64", [3], [1, 2, 3]),
    (lambda: [1, rlpipe.tensor(2.0, dtype=rlpipe.float64)], "float64", [2], [1.0, 2.0]),
    (lambda: [rlpipe.tensor([1.0], dtype=rlpipe.float64), 2], "float64", [2], [1.0, 2.0]),
    (lambda: [rlpipe.tensor([1]), 2.5], "float32", [2], [1.0, 2.5]),
    (lambda: [[rlpipe.tensor([1]), 2], [3, 4]], "int64", [2, 2], [[1, 2], [3, 4]]),
    (lambda: (rlpipe.tensor([1]), rlpipe.tensor([2])), "int64", [2], [1, 2]),
    (lambda: np.float32(1.5), "float32", [], 1.5),
    (lambda: np.float64(1.5), "float64", [], 1.5),
    (lambda: [np.float64(1.5), 2], "float64", [2], [1.5, 2.0]),
    (lambda: [np.int32(1), 2], "int64", [2], [1, 2]),
    (lambda: np.bool_(True), "bool", [], True),
    (lambda: [True, False], "bool", [2], [True, False]),
    (lambda: [True, 2], "int64", [2], [1, 2]),
]


@pytest.mark.parametrize("make", [rlpipe.tensor, rlpipe.as_tensor], ids=["tensor", "as_tensor"])
@pytest.mark.parametrize("data, dtype, shape, values", _SEQUENCES)
def test_tensor_from_any_sequence_as_torch(make, data, dtype, shape, values):
    t = make(data())
    assert (t.dtype, list(t.shape), t.tolist()) == (getattr(rlpipe, dtype), shape, values)


@pytest.mark.parametrize("data", [
    lambda: [rlpipe.tensor([1.0, 2.0]), rlpipe.tensor([3.0, 4.0])],
    lambda: [rlpipe.tensor([1.0, 2.0]), 3],
    lambda: [rlpipe.tensor([1.0, 2.0])],
])
@pytest.mark.parametrize("make", [rlpipe.tensor, rlpipe.as_tensor], ids=["tensor", "as_tensor"])
def test_multi_element_tensor_inside_a_list_raises_as_torch(make, data):
    with pytest.raises(ValueError, match="^only one element tensors can be converted to Python scalars$"):
        make(data())


@pytest.mark.parametrize("data", [1 + 2j, [1, 2j]])
def test_complex_data_is_refused_clearly(data):
    with pytest.raises(TypeError, match="no complex dtypes"):
        rlpipe.tensor(data)


# ---- out= (torch 2.13's results, errors and warnings) ---------------------------------------------

A, B = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
M = [[1.0, 5.0, 3.0], [4.0, 2.0, 0.0]]
RESIZED = r"An output with one or more elements was resized since it had shape \[2\], which does not match the " \
          r"required output shape \[3\]\. This behavior is deprecated"
T = rlpipe.tensor

_OUT_CASES = {  # name: (call with out, the out tensor's shape, torch's values)
    "add": (lambda o: rlpipe.add(T(A), T(B), out=o), [3], [5.0, 7.0, 9.0]),
    "sub": (lambda o: rlpipe.sub(T(A), T(B), alpha=2, out=o), [3], [-7.0, -8.0, -9.0]),
    "mul": (lambda o: rlpipe.mul(T(A), 2, out=o), [3], [2.0, 4.0, 6.0]),
    "div": (lambda o: rlpipe.div(T([1, 2]), 2, out=o), [2], [0.5, 1.0]),
    "matmul": (lambda o: rlpipe.matmul(T(M), T(M).T, out=o), [2, 2], [[35.0, 14.0], [14.0, 20.0]]),
    "mm": (lambda o: rlpipe.mm(T(M), T(M).T, out=o), [2, 2], [[35.0, 14.0], [14.0, 20.0]]),
    "cat": (lambda o: rlpipe.cat([T(A), T(B)], out=o), [6], A + B),
    "stack": (lambda o: rlpipe.stack([T(A), T(B)], out=o), [2, 3], [A, B]),
    "sum": (lambda o: rlpipe.sum(rlpipe.ones(2, 3), 1, out=o), [2], [3.0, 3.0]),
    "mean": (lambda o: rlpipe.mean(rlpipe.ones(2, 3), 1, out=o), [2], [1.0, 1.0]),
    "clamp": (lambda o: rlpipe.clamp(T(M), 1, 3, out=o), [2, 3], [[1.0, 3.0, 3.0], [3.0, 2.0, 1.0]]),
    "where": (lambda o: rlpipe.where(T(M) > 2, T(M), T(0.0), out=o), [2, 3], [[0.0, 5.0, 3.0], [4.0, 0.0, 0.0]]),
    "exp": (lambda o: rlpipe.exp(T([0.0]), out=o), [1], [1.0]),
    "log": (lambda o: rlpipe.log(T([1.0]), out=o), [1], [0.0]),
    "sqrt": (lambda o: rlpipe.sqrt(T([4.0, 9.0]), out=o), [2], [2.0, 3.0]),
    "abs": (lambda o: rlpipe.abs(T([-1.5, 2.0]), out=o), [2], [1.5, 2.0]),
    "neg": (lambda o: rlpipe.neg(T([-1.5, 2.0]), out=o), [2], [1.5, -2.0]),
    "tanh": (lambda o: rlpipe.tanh(T([0.0]), out=o), [1], [0.0]),
    "sigmoid": (lambda o: rlpipe.sigmoid(T([0.0]), out=o), [1], [0.5]),
    "max": (lambda o: rlpipe.max(T(M), out=o), [], 5.0),
}


@pytest.mark.parametrize("name", sorted(_OUT_CASES))
def test_out_receives_the_result_and_is_returned(name):
    call, shape, values = _OUT_CASES[name]
    out = rlpipe.zeros(shape)
    assert call(out) is out and out.tolist() == values


@pytest.mark.parametrize("name", sorted(_OUT_CASES))
def test_an_empty_out_is_resized_silently(name, recwarn):
    call, shape, values = _OUT_CASES[name]
    out = rlpipe.zeros(0)
    assert call(out) is out and (list(out.shape), out.tolist()) == (shape, values)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]


def test_an_out_with_elements_is_resized_with_torchs_warning():
    out = rlpipe.zeros(2)
    with pytest.warns(UserWarning, match=RESIZED):
        assert rlpipe.add(T(A), T(B), out=out) is out
    assert out.tolist() == [5.0, 7.0, 9.0]
    with pytest.warns(UserWarning, match=r"shape \[2\], which does not match the required output shape \[2, 1\]"):
        rlpipe.mean(rlpipe.ones(2, 3), 1, keepdim=True, out=rlpipe.zeros(2))


def test_out_dtype_rules_as_torch():
    with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
        rlpipe.add(T(A), T(B), out=rlpipe.zeros(3, dtype=rlpipe.long))
    with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
        rlpipe.exp(T([1, 2]), out=rlpipe.zeros(2, dtype=rlpipe.long))
    with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
        rlpipe.div(T([1, 2]), 2, out=rlpipe.zeros(2, dtype=rlpipe.long))
    double = rlpipe.add(T(A), T(B), out=rlpipe.zeros(3, dtype=rlpipe.double))
    assert double.dtype is rlpipe.float64 and double.tolist() == [5.0, 7.0, 9.0]
    assert rlpipe.add(T([1, 2]), 1, out=rlpipe.zeros(2)).tolist() == [2.0, 3.0]
    floor = rlpipe.div(T([1, 2]), 2, rounding_mode="floor", out=rlpipe.zeros(2, dtype=rlpipe.long))
    assert floor.dtype is rlpipe.int64 and floor.tolist() == [0, 1]
    # sum computes in out's dtype (torch: int64 [3, 3]); an explicit other dtype is refused
    summed = rlpipe.sum(rlpipe.ones(2, 3), 1, out=rlpipe.zeros(2, dtype=rlpipe.long))
    assert summed.dtype is rlpipe.int64 and summed.tolist() == [3, 3]
    with pytest.raises(RuntimeError, match="^Expected out tensor to have dtype float, but got double instead$"):
        rlpipe.sum(rlpipe.ones(2, 3), 1, dtype=rlpipe.float32, out=rlpipe.zeros(2, dtype=rlpipe.double))
    with pytest.raises(TypeError, match=r"^add\(\): argument 'out' must be Tensor, not list$"):
        rlpipe.add(T(A), T(B), out=[1, 2, 3])


@pytest.mark.parametrize("call, name", [
    (lambda x: rlpipe.add(x, 1, out=rlpipe.zeros(2)), "add"),
    (lambda x: rlpipe.exp(x, out=rlpipe.zeros(2)), "exp"),
    (lambda x: rlpipe.cat([x, x], out=rlpipe.zeros(4)), "cat"),
    (lambda x: rlpipe.add(x.detach(), 1, out=rlpipe.zeros(2, requires_grad=True)), "add"),
])
def test_out_refuses_autograd_as_torch(call, name):
    x = rlpipe.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=f"^{name}\\(\\): functions with out=\\.\\.\\. arguments don't support "
                                           "automatic differentiation, but one of the arguments requires grad\\.$"):
        call(x)
    with rlpipe.no_grad():
        assert call(x).tolist() == ([2.0, 3.0] if name == "add" else
                                    [1.0, 2.0, 1.0, 2.0] if name == "cat" else pytest.approx([2.7182817, 7.3890562]))


@pytest.mark.parametrize("fn, values, indices", [(rlpipe.max, [5.0, 4.0], [1, 0]), (rlpipe.min, [1.0, 0.0], [0, 2])])
def test_max_min_along_a_dim_fill_an_out_pair(fn, values, indices):
    v, i = rlpipe.zeros(2), rlpipe.zeros(2, dtype=rlpipe.long)
    result = fn(T(M), 1, out=(v, i))
    assert result[0] is v and result[1] is i and result.values is v
    assert (v.tolist(), i.tolist()) == (values, indices)
    v, i = rlpipe.zeros(0), rlpipe.zeros(0, dtype=rlpipe.long)
    assert fn(T(M), 1, out=(v, i)).values.tolist() == values and i.tolist() == indices
    with pytest.raises(RuntimeError, match="^Expected out tensor to have dtype long int, but got float instead$"):
        fn(T(M), 1, out=(rlpipe.zeros(2), rlpipe.zeros(2)))
    with pytest.raises(RuntimeError, match="^Expected out tensor to have dtype float, but got double instead$"):
        fn(T(M), 1, out=(rlpipe.zeros(2, dtype=rlpipe.double), rlpipe.zeros(2, dtype=rlpipe.long)))


def test_creation_functions_write_into_out_in_its_dtype():
    out = rlpipe.ones(6)
    assert rlpipe.zeros(2, 3, out=out) is out and out.tolist() == [[0.0] * 3] * 2
    out = rlpipe.ones(0, dtype=rlpipe.long)
    assert rlpipe.zeros(2, 3, out=out) is out and out.dtype is rlpipe.int64 and out.tolist() == [[0] * 3] * 2
    assert rlpipe.ones(2, out=rlpipe.zeros(2, dtype=rlpipe.long)).tolist() == [1, 1]
    with pytest.raises(RuntimeError, match=r"^dtype Double does not match dtype of out parameter \(Float\)$"):
        rlpipe.ones(2, dtype=rlpipe.float64, out=rlpipe.zeros(2))
    assert rlpipe.arange(5, out=rlpipe.zeros(5)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert rlpipe.arange(0, 1, 0.25, out=rlpipe.zeros(0, dtype=rlpipe.double)).tolist() == [0.0, 0.25, 0.5, 0.75]
    full = rlpipe.full((2,), 7.5, out=rlpipe.zeros(2, dtype=rlpipe.long))
    assert full.dtype is rlpipe.int64 and full.tolist() == [7, 7]
    out = rlpipe.zeros(6)
    assert rlpipe.randn(2, 3, out=out) is out and list(out.shape) == [2, 3]
    double = rlpipe.zeros(2, dtype=rlpipe.double)
    assert rlpipe.rand(2, out=double) is double and double.dtype is rlpipe.float64
    assert 0 <= double.min().item() and double.max().item() < 1


# ---- GAE's value-network chunking and shifted single call (torchrl 0.14.1's values) ---------------

def _gae_batch():
    """2 rows of 6 steps: a truncation at row 0 step 2 and row 1 step 3 (their next observation is a
    real final one, not the following step's), a termination at row 1 step 1."""
    obs = np.sin(np.arange(2 * 7 * 3, dtype=np.float32).reshape(2, 7, 3) / np.float32(10))
    root, nxt = obs[:, :-1].copy(), obs[:, 1:].copy()
    done, terminated = np.zeros((2, 6, 1), bool), np.zeros((2, 6, 1), bool)
    done[0, 2], nxt[0, 2] = True, [2.0, -1.0, 0.5]
    done[1, 1], terminated[1, 1], nxt[1, 1] = True, True, [9.0, 9.0, 9.0]
    done[1, 3], nxt[1, 3] = True, [-3.0, 1.0, 0.25]
    reward = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 6, 1)
    return rlpipe.tensordict.TensorDict({
        "observation": rlpipe.tensor(root),
        "next": {"observation": rlpipe.tensor(nxt), "reward": rlpipe.tensor(reward), "done": rlpipe.tensor(done),
                 "terminated": rlpipe.tensor(terminated)}}, batch_size=[2, 6])


def _gae(estimator="GAE", **kwargs):
    from rlpipe.objectives import value
    from rlpipe.tensordict.nn import TensorDictModule
    linear = rlpipe.nn.Linear(3, 1)
    with rlpipe.no_grad():
        linear.weight.copy_(rlpipe.tensor([[0.5, -0.25, 1.0]]))
        linear.bias.fill_(0.1)
    net = TensorDictModule(linear, in_keys=["observation"], out_keys=["state_value"])
    if estimator != "TD0Estimator":
        kwargs["lmbda"] = 0.8
    return getattr(value, estimator)(gamma=0.9, value_network=net, **kwargs)(_gae_batch())


_GAE_PLAIN = {
    "advantage": [-1.094542, -0.538443, 0.090013, -0.873203, -0.591217, -0.297746, -0.643263, -0.530888, -0.445343,
                  -0.725427, 1.130156, 0.814995],
    "value_target": [-0.820831, 0.091388, 1.028636, 0.2993, 0.719362, 1.042773, 0.431923, 0.272727, 0.02385,
                     -0.623636, 0.864385, 0.214336],
    "state_value": [0.273711, 0.629831, 0.938623, 1.172503, 1.31058, 1.340519, 1.075186, 0.803615, 0.469192,
                    0.101791, -0.265771, -0.600659],
    ("next", "state_value"): [0.629831, 0.938623, 1.85, 1.31058, 1.340519, 1.259646, 0.803615, 11.35, 0.101791,
                              -1.4, -0.600659, -0.87296],
}
_GAE_SHIFTED = {  # budget 1: each row's last step is pushed out by its truncation
    "advantage": [-1.094542, -0.538443, 0.090013, -0.718852, -0.37684, 0.0, -0.643263, -0.530888, -0.445343,
                  -0.725427, 0.54336, 0.0],
    "value_target": [-0.820831, 0.091388, 1.028636, 0.453652, 0.93374, 0.0, 0.431923, 0.272727, 0.02385, -0.623636,
                     0.277589, 0.0],
    "state_value": _GAE_PLAIN["state_value"],
    ("next", "state_value"): [0.629831, 0.938623, 1.85, 1.31058, 1.340519, 1.340519, 0.803615, 0.469192, 0.101791,
                              -1.4, -0.600659, -0.600659],
}


def _check_gae(td, expected):
    for key, values in expected.items():
        np.testing.assert_allclose(np.asarray(td[key].tolist(), dtype=float).ravel(), values, atol=2e-6,
                                   err_msg=str(key))


@pytest.mark.parametrize("kwargs", [{}, {"num_chunks": 2}, {"num_chunk": 2}, {"value_chunk_size": 1},
                                    {"value_chunk_size": 4, "value_chunk_dim": 1},
                                    {"num_chunks": 3, "value_chunk_dim": -1}, {"num_chunks": 50}],
                         ids=str)
def test_gae_chunking_changes_no_result(kwargs):
    _check_gae(_gae(**kwargs), _GAE_PLAIN)


def test_gae_chunks_call_the_network_on_pieces():
    from rlpipe.objectives.value import GAE
    sizes = []

    def net(td):
        sizes.append(tuple(td.batch_size))
        td.set("state_value", td["observation"].sum(-1, keepdim=True))
        return td
    net.in_keys = ["observation"]
    GAE(gamma=0.9, lmbda=0.8, value_network=net, value_chunk_size=4, value_chunk_dim=1)(_gae_batch())
    assert sizes == [(2, 4), (2, 2), (2, 4), (2, 2)]


@pytest.mark.parametrize("kwargs", [{}, {"num_chunks": 2, "value_chunk_dim": 1}], ids=str)
def test_gae_shifted_single_call_as_torchrl(kwargs):
    td = _gae(shifted=True, **kwargs)
    _check_gae(td, _GAE_SHIFTED)
    assert td["shifted_valid"].tolist() == [[True] * 5 + [False]] * 2


def test_gae_shifted_with_budget_for_the_truncations_matches_the_two_calls():
    td = _gae(shifted=True, shifted_budget=2)
    # the terminal step's next value is the following step's (masked out by the termination)
    _check_gae(td, {**_GAE_PLAIN, ("next", "state_value"): [0.629831, 0.938623, 1.85, 1.31058, 1.340519, 1.259646,
                                                            0.803615, 0.469192, 0.101791, -1.4, -0.600659, -0.87296]})
    assert td["shifted_valid"].all().item()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"num_chunks": 2, "value_chunk_size": 2}, ValueError, "value_chunk_size and num_chunks cannot both be set. Use "
     "value_chunk_size to specify a chunk size or num_chunks to specify a number of chunks."),
    ({"num_chunks": 0}, ValueError, "num_chunks must be >= 1, got 0."),
    ({"value_chunk_size": 1.5}, TypeError, "value_chunk_size must be an integer or None, got <class 'float'>."),
    ({"num_chunks": True}, TypeError, "num_chunks must be an integer or None, got <class 'bool'>."),
    ({"num_chunks": 2, "num_chunk": 3}, ValueError, "num_chunks and num_chunk cannot both be set to different values."),
    ({"shifted_budget": 0}, ValueError, "shifted_budget must be >= 1, got 0."),
    ({"shifted": "yes"}, ValueError, "shifted must be a boolean, got 'yes'."),
], ids=str)
def test_gae_option_errors_as_torchrl(kwargs, error, message):
    from rlpipe.objectives.value import GAE
    with pytest.raises(error) as info:
        GAE(gamma=0.9, lmbda=0.8, value_network=None, **kwargs)
    assert str(info.value) == message


def test_gae_average_over_the_kept_samples_when_shifted():
    np.testing.assert_allclose(_gae(shifted=True, average_gae=True)["advantage"].flatten().tolist(), [
        -1.492911, -0.21669, 1.225586, -0.63072, 0.15418, 0.0, -0.457247, -0.199352, -0.00303, -0.64581, 2.265994,
        0.0], atol=5e-6)
    np.testing.assert_allclose(_gae(average_gae=True)["advantage"].flatten().tolist(), [
        -1.17562, -0.343651, 0.596571, -0.84448, -0.422606, 0.016451, -0.50047, -0.332348, -0.204365, -0.623394,
        2.152709, 1.681203], atol=5e-6)


@pytest.mark.parametrize("estimator, shifted, chunked", [
    ("TD0Estimator", [-0.433152, 0.026579, 1.028636, 0.724976, 0.93374, 0.0, 0.814162, 0.272727, 0.546157, -0.623636,
                      0.277589, 0.0],
     [-0.433152, 0.026579, 1.028636, 0.724976, 0.93374, 1.042773, 0.814162, 0.272727, 0.546157, -0.623636, 0.277589,
      0.214336]),
    ("TDLambdaEstimator", [-0.820831, 0.091388, 1.028636, 0.453652, 0.93374, 0.0, 0.431923, 0.272727, 0.02385,
                           -0.623636, 0.277589, 0.0], _GAE_PLAIN["value_target"]),
])
def test_the_td_estimators_take_the_same_options(estimator, shifted, chunked):
    td = _gae(estimator, shifted=True)
    np.testing.assert_allclose(td["value_target"].flatten().tolist(), shifted, atol=2e-6)
    assert td["shifted_valid"].tolist() == [[True] * 5 + [False]] * 2
    np.testing.assert_allclose(_gae(estimator, num_chunks=2)["value_target"].flatten().tolist(), chunked, atol=2e-6)


DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")])]


@pytest.mark.parametrize("device", DEVICES)
def test_out_and_creation_out_on_a_device(device):
    x = rlpipe.tensor(A, device=device)
    out = rlpipe.zeros(0, device=device)
    assert rlpipe.add(x, x, out=out) is out and out.device == x.device and out.tolist() == [2.0, 4.0, 6.0]
    values, indices = rlpipe.zeros(0, device=device), rlpipe.zeros(0, dtype=rlpipe.long, device=device)
    rlpipe.max(rlpipe.tensor(M, device=device), 1, out=(values, indices))
    assert (values.tolist(), indices.tolist()) == ([5.0, 4.0], [1, 0])
    made = rlpipe.zeros(1, device=device)
    assert rlpipe.arange(3, out=made) is made and made.device == x.device and made.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("device", DEVICES)
def test_gae_shifted_and_chunked_on_a_device(device):
    from rlpipe.objectives.value import GAE
    from rlpipe.tensordict.nn import TensorDictModule
    linear = rlpipe.nn.Linear(3, 1)
    with rlpipe.no_grad():
        linear.weight.copy_(rlpipe.tensor([[0.5, -0.25, 1.0]]))
        linear.bias.fill_(0.1)
    net = TensorDictModule(linear.to(device), in_keys=["observation"], out_keys=["state_value"])
    td = GAE(gamma=0.9, lmbda=0.8, value_network=net, shifted=True, num_chunks=2, value_chunk_dim=1)(
        _gae_batch().to(device))
    _check_gae(td, _GAE_SHIFTED)
