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
