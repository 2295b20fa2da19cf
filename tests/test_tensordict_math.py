"""TensorDict arithmetic, elementwise math, reductions, and the top-level functions that dispatch on
TensorDicts through ``__torch_function__``.

Expected values are computed by hand or with NumPy on the leaves; values marked "tensordict 0.14.3"
were printed by the peer on the same inputs.
"""
import math

import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.tensordict import _math

from td_helpers import arr, leaves


def make():
    """batch [2, 3]: a float leaf, an int leaf and a nested float leaf with a feature dim."""
    return TensorDict({"a": rlpipe.arange(6.).reshape(2, 3), "b": {"c": rlpipe.arange(12.).reshape(2, 3, 2)},
                       "i": rlpipe.arange(6).reshape(2, 3)}, batch_size=[2, 3])


def np_leaves(td):
    return {k: arr(v) for k, v in leaves(td).items()}


def assert_leaves(td, expected, batch_size=None):
    got = np_leaves(td)
    assert set(got) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-6, err_msg=str(key))
        assert got[key].shape == np.shape(value), key
    if batch_size is not None:
        assert td.batch_size == rlpipe.Size(batch_size)


A = np.arange(6.).reshape(2, 3)
C = np.arange(12.).reshape(2, 3, 2)


# ---- arithmetic ---------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, fa, fc", [
    (lambda td: td + td, lambda x: x + x, lambda x: x + x),
    (lambda td: td + 1, lambda x: x + 1, lambda x: x + 1),
    (lambda td: 1 + td, lambda x: 1 + x, lambda x: 1 + x),
    (lambda td: 1 - td, lambda x: 1 - x, lambda x: 1 - x),
    (lambda td: td - td * 2, lambda x: -x, lambda x: -x),
    (lambda td: td * 3, lambda x: 3 * x, lambda x: 3 * x),
    (lambda td: 3 * td, lambda x: 3 * x, lambda x: 3 * x),
    (lambda td: td / 2, lambda x: x / 2, lambda x: x / 2),
    (lambda td: td ** 2, lambda x: x ** 2, lambda x: x ** 2),
    (lambda td: 2 ** td, lambda x: 2 ** x, lambda x: 2 ** x),
    (lambda td: td % 4, lambda x: x % 4, lambda x: x % 4),
    (lambda td: -td, lambda x: -x, lambda x: -x),
    (lambda td: abs(td - 3), lambda x: abs(x - 3), lambda x: abs(x - 3)),
])
def test_operators_apply_leaf_by_leaf(expr, fa, fc):
    out = expr(make())
    assert isinstance(out, TensorDict) and out.batch_size == rlpipe.Size([2, 3])
    np.testing.assert_allclose(arr(out["a"]), fa(A))
    np.testing.assert_allclose(arr(out["b", "c"]), fc(C))
    assert out["b"].batch_size == rlpipe.Size([2, 3])


def test_dtypes_follow_torch_promotion():
    td = make()
    assert (td + 1)["i"].dtype == rlpipe.int64          # tensordict 0.14.3: int stays int
    assert (td / 2)["i"].dtype == rlpipe.float32        # true division gives the default float
    assert (2 / td)["i"].dtype == rlpipe.float32
    assert (td + rlpipe.ones(2, 3))["i"].dtype == rlpipe.float32
    np.testing.assert_array_equal(arr((2 / td)["a"])[0, 1:], [2.0, 1.0])


def test_rtruediv_is_reciprocal_times_other():
    td = TensorDict({"x": rlpipe.tensor([0.5, 4.0, 3.0])}, [3])
    np.testing.assert_array_equal(arr((6 / td)["x"]), (1 / np.float32([0.5, 4.0, 3.0])) * np.float32(6))


def test_tensor_operand_lines_up_with_batch_dims():
    td = make()
    row = rlpipe.tensor([10., 20., 30.])               # shape [3] broadcasts against batch [2, 3]
    out = td + row
    np.testing.assert_array_equal(arr(out["a"]), A + [10, 20, 30])
    np.testing.assert_array_equal(arr(out["b", "c"]), C + np.array([10, 20, 30])[None, :, None])
    out = row * td                                     # Tensor.__mul__ defers to the TensorDict
    assert isinstance(out, TensorDict)
    np.testing.assert_array_equal(arr(out["b", "c"]), C * np.array([10, 20, 30])[None, :, None])
    col = TensorDict({"x": rlpipe.zeros(2, 3)}, [2]) + rlpipe.tensor([1., 2.])
    np.testing.assert_array_equal(arr(col["x"]), [[1, 1, 1], [2, 2, 2]])
    assert arr((td + rlpipe.tensor(2.))["a"])[0, 0] == 2.0


def test_tensordicts_of_broadcastable_batch_sizes():
    out = TensorDict({"a": rlpipe.zeros(1, 3)}, [1]) + TensorDict({"a": rlpipe.ones(4, 3)}, [4])
    assert out.batch_size == rlpipe.Size([4])
    np.testing.assert_array_equal(arr(out["a"]), np.ones((4, 3)))


def test_operand_that_does_not_broadcast_raises():
    td = make()
    with pytest.raises(RuntimeError, match=r"batch size rlpipe.Size\(\[2, 3\]\) cannot be broadcast .*\[\[2\]\]"):
        td + rlpipe.ones(2)
    with pytest.raises(RuntimeError, match=r"cannot be broadcast .*\[\[4\]\]"):
        td * TensorDict({"a": rlpipe.zeros(4)}, [4])


def test_different_keys_raise_keyerror_naming_them():
    td, other = make(), make()
    del other["a"]
    with pytest.raises(KeyError, match=r"missing from the other: \['a'\]"):
        td + other
    with pytest.raises(KeyError, match=r"only in the other: \['a'\]"):
        other.mul(td)
    other = make()
    other["b", "z"] = rlpipe.zeros(2, 3)
    with pytest.raises(KeyError, match=r"only in the other: \['z'\]"):
        td - other


def test_operands_of_other_types_are_refused():
    td = make()
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'TensorDict' and 'str'"):
        td + "s"
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for -: 'TensorDict' and 'list'"):
        td - [1.0, 2.0]
    with pytest.raises(TypeError, match="'<' not supported between instances of 'TensorDict' and 'NoneType'"):
        td < None  # noqa: B015 - the comparison is under test
    with pytest.raises(TypeError, match="TensorDict math takes a TensorDict, a Tensor or a number as operand, got str"):
        td.add("s")
    before = arr(td["a"])
    with pytest.raises(TypeError, match="as operand, got list"):
        td.mul_([1, 2, 3])
    np.testing.assert_array_equal(arr(td["a"]), before)
    other = make()
    other["b"] = rlpipe.zeros(2, 3)  # a tensor where td has a nested TensorDict
    with pytest.raises(TypeError, match="entry 'b' is a TensorDict on one side and a tensor on the other"):
        td.add(other, default=0)
    assert_leaves(td + np.float32(2), {("a",): A + 2, ("b", "c"): C + 2, ("i",): A + 2})


def test_default_fills_missing_keys():
    td, other = make(), make()
    del other["a"]
    out = td.add(other, default=100)
    np.testing.assert_array_equal(arr(out["a"]), A + 100)
    np.testing.assert_array_equal(arr(out["i"]), 2 * np.arange(6).reshape(2, 3))
    out = other.sub(td, default=0)
    np.testing.assert_array_equal(arr(out["a"]), -A)


def test_alpha_forms():
    td = make()
    np.testing.assert_array_equal(arr(td.add(td, alpha=2)["a"]), 3 * A)
    np.testing.assert_array_equal(arr(td.sub(td, alpha=2)["a"]), -A)
    np.testing.assert_array_equal(arr(td.rsub(1, alpha=2)["a"]), 1 - 2 * A)
    np.testing.assert_array_equal(arr(td.rsub(1)["i"]), 1 - np.arange(6).reshape(2, 3))
    out = make().add_(td, alpha=-1)
    assert_leaves(out, {("a",): 0 * A, ("b", "c"): 0 * C, ("i",): np.zeros((2, 3))})


def test_maximum_minimum_clamp_lerp_addc():
    td = make()
    np.testing.assert_array_equal(arr(td.maximum(2.)["a"]), np.maximum(A, 2))
    np.testing.assert_array_equal(arr(td.minimum(td * 0 + 2)["b", "c"]), np.minimum(C, 2))
    np.testing.assert_array_equal(arr(td.clamp(1, 3)["b", "c"]), np.clip(C, 1, 3))
    np.testing.assert_array_equal(arr(td.clamp(min=4)["a"]), np.maximum(A, 4))
    np.testing.assert_array_equal(arr(td.clamp(max=1)["i"]), np.minimum(np.arange(6).reshape(2, 3), 1))
    np.testing.assert_array_equal(arr(td.clamp(td - 1, td * 0 + 2)["a"]), np.minimum(A, 2))
    np.testing.assert_array_equal(arr(td.clamp_min(3)["a"]), np.maximum(A, 3))
    np.testing.assert_array_equal(arr(td.clamp_max(3)["a"]), np.minimum(A, 3))
    f = td.float()
    np.testing.assert_allclose(arr(f.lerp(f * 3, 0.5)["a"]), 2 * A)
    np.testing.assert_allclose(arr(f.lerp(f * 3, f * 0 + 0.25)["b", "c"]), 1.5 * C)
    np.testing.assert_allclose(arr(f.addcmul(f, f, value=2)["a"]), A + 2 * A * A)
    np.testing.assert_allclose(arr(f.addcdiv(f, f + 1, value=2)["a"]), A + 2 * A / (A + 1), rtol=1e-6)


def test_clamp_errors():
    td = make()
    with pytest.raises(ValueError, match="Mixed tensordict and non-tensordict min/max"):
        td.clamp(td, 2)
    with pytest.raises(ValueError, match="at least one of min and max"):
        td.clamp()
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        td.addcdiv(td["i"], td["i"])


def test_comparisons_and_logic():
    td = make()
    assert_leaves(td >= 2, {("a",): A >= 2, ("b", "c"): C >= 2, ("i",): A >= 2})
    assert_leaves(td < td * 0 + 3, {("a",): A < 3, ("b", "c"): C < 3, ("i",): A < 3})
    assert_leaves(td == td * 1, {("a",): A == A, ("b", "c"): C == C, ("i",): A == A})
    assert_leaves(td != 2, {("a",): A != 2, ("b", "c"): C != 2, ("i",): A != 2})
    b = td.bool()
    assert_leaves(b & (td > 2), {("a",): A > 2, ("b", "c"): C > 2, ("i",): A > 2})
    assert_leaves(~b, {("a",): A == 0, ("b", "c"): C == 0, ("i",): A == 0})
    assert_leaves(b ^ True, {("a",): A == 0, ("b", "c"): C == 0, ("i",): A == 0})
    assert_leaves(b.logical_and(td > 4), {("a",): A > 4, ("b", "c"): C > 4, ("i",): A > 4})


# ---- in place ----------------------------------------------------------------------------------

def test_inplace_forms_write_into_the_same_leaves():
    td = make().float()
    a, view = td["a"], td["a"][0]
    assert td.mul_(2) is td
    td += 1
    td.sub_(td * 0 + 1, alpha=0.5)
    td **= 2
    td.clamp_(0, 50)
    td.maximum_(4)
    assert td["a"] is a
    expected = np.maximum(np.clip((2 * A + 0.5) ** 2, 0, 50), 4)
    np.testing.assert_allclose(arr(td["a"]), expected)
    np.testing.assert_allclose(arr(view), expected[0])  # a view of a leaf sees the writes
    f = make().float()
    f.lerp_(f * 3, 0.5)
    np.testing.assert_allclose(arr(f["b", "c"]), 2 * C)
    f.exp_().log_()
    np.testing.assert_allclose(arr(f["b", "c"]), 2 * C, rtol=1e-5)
    f.addcmul_(f, f, value=1)
    np.testing.assert_allclose(arr(f["a"]), 2 * A + 4 * A * A, rtol=1e-5)


def test_failed_inplace_op_leaves_every_leaf_unchanged():
    td = make()
    before = np_leaves(td)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        td.div_(2)  # the float leaves come before the int leaf in insertion order
    with pytest.raises(RuntimeError, match="can't be cast"):
        td.exp_()
    with pytest.raises(RuntimeError, match="doesn't match the broadcast batch size"):
        TensorDict({"a": rlpipe.zeros(1, 3)}, [1]).add_(TensorDict({"a": rlpipe.ones(4, 3)}, [4]))
    other = make()
    del other["i"]
    with pytest.raises(KeyError, match="missing from the other"):
        td.add_(other)
    for key, value in np_leaves(td).items():
        np.testing.assert_array_equal(value, before[key])


def test_inplace_refusals_happen_before_any_write():
    w = rlpipe.ones(3, requires_grad=True)
    td = TensorDict({"a": rlpipe.zeros(3), "w": w}, [3])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        td.add_(1)
    assert arr(td["a"]).tolist() == [0, 0, 0]
    with rlpipe.no_grad():
        td.add_(1)  # allowed without grad, as for tensors
    np.testing.assert_array_equal(arr(w), [2, 2, 2])
    expanded = TensorDict({"a": rlpipe.zeros(3), "e": rlpipe.zeros(1).expand(3)}, [3])
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        expanded.add_(1)
    assert arr(expanded["a"]).tolist() == [0, 0, 0]


def test_inplace_on_locked_tensordict_is_allowed():
    td = make().lock_()
    td.add_(1)
    np.testing.assert_array_equal(arr(td["a"]), A + 1)


def test_inplace_keeps_autograd_history():
    x = rlpipe.arange(3.).requires_grad_()
    td = TensorDict({"y": x * 1}, [3])
    td.mul_(3).add_(1)
    td["y"].sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [3, 3, 3])


def test_math_is_differentiable():
    x = rlpipe.tensor([1., 2., 3.], requires_grad=True)
    td = TensorDict({"x": x, "n": {"y": x * 2}}, [3])
    (td.exp() * td).sum(reduce=True).backward()
    e = np.exp([1., 2., 3.])
    expected = e * (1 + np.arange(1, 4)) + 2 * np.exp(2 * np.arange(1, 4)) * (1 + 2 * np.arange(1, 4))
    np.testing.assert_allclose(arr(x.grad), expected, rtol=1e-5)


# ---- unary ops, tests and casts ---------------------------------------------------------------------

@pytest.mark.parametrize("name", _math._UNARY)
def test_unary_ops_match_the_tensor_op(name):
    values = np.array([[0.1, 0.5, 0.9], [-0.3, 0.7, 0.25]], np.float32)
    td = TensorDict({"x": rlpipe.tensor(values), "n": {"y": rlpipe.tensor(values * 0.5)}}, [2, 3])
    out = getattr(td, name)()
    np.testing.assert_allclose(arr(out["x"]), arr(getattr(rlpipe, name)(rlpipe.tensor(values))), rtol=1e-6)
    np.testing.assert_allclose(arr(out["n", "y"]), arr(getattr(rlpipe, name)(rlpipe.tensor(values * 0.5))),
                               rtol=1e-6)
    x = td["x"]
    assert getattr(td, name + "_")() is td and td["x"] is x
    np.testing.assert_allclose(arr(td["x"]), arr(out["x"]), rtol=1e-6)


@pytest.mark.parametrize("name, fn", [
    ("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan), ("tan", np.tan), ("sinh", np.sinh),
    ("cosh", np.cosh), ("erfc", lambda v: np.array([math.erfc(x) for x in v.ravel()]).reshape(v.shape)),
    ("frac", lambda v: v - np.trunc(v)), ("log2", np.log2), ("log10", np.log10),
])
def test_new_tensor_math_values(name, fn):
    values = np.array([0.1, -0.5, 0.9, 0.25], np.float64)
    np.testing.assert_allclose(arr(getattr(rlpipe.tensor(values), name)()), fn(values), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["asin", "acos", "atan", "tan", "sinh", "cosh", "erfc", "frac"])
def test_new_tensor_math_gradients(name):
    x = rlpipe.tensor([0.1, -0.5, 0.7, 0.25], dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda t: getattr(t, name)(), (x,))


def test_frac_rejects_integers():
    with pytest.raises(RuntimeError, match="\"frac_cpu\" not implemented for 'Long'"):
        rlpipe.arange(3).frac()


def test_tests_give_bool_tensordicts():
    values = rlpipe.tensor([1.0, math.nan, math.inf, -math.inf])
    td = TensorDict({"x": values}, [4])
    expected = {"isnan": [0, 1, 0, 0], "isfinite": [1, 0, 0, 0], "isinf": [0, 0, 1, 1], "isposinf": [0, 0, 1, 0],
                "isneginf": [0, 0, 0, 1], "isreal": [1, 1, 1, 1]}
    for name, want in expected.items():
        out = getattr(td, name)()
        assert out["x"].dtype == rlpipe.bool
        np.testing.assert_array_equal(arr(out["x"]), np.array(want, bool), err_msg=name)


@pytest.mark.parametrize("name, dtype", [("float", rlpipe.float32), ("double", rlpipe.float64),
                                         ("half", rlpipe.float16), ("bfloat16", rlpipe.bfloat16),
                                         ("int", rlpipe.int32), ("long", rlpipe.int64), ("bool", rlpipe.bool)])
def test_casts(name, dtype):
    out = getattr(make(), name)()
    assert all(v.dtype == dtype for v in leaves(out).values())
    assert out.type(rlpipe.float64)["i"].dtype == rlpipe.float64


# ---- reductions -----------------------------------------------------------------------------------

def test_reduction_without_dim_reduces_each_leaf_to_a_scalar():
    td = make().float()
    assert_leaves(td.sum(), {("a",): 15.0, ("b", "c"): 66.0, ("i",): 15.0}, [])
    assert td.sum()["b"].batch_size == rlpipe.Size([])
    assert_leaves(td.mean(), {("a",): 2.5, ("b", "c"): 5.5, ("i",): 2.5}, [])
    assert_leaves(td.std(), {("a",): np.std(A, ddof=1), ("b", "c"): np.std(C, ddof=1), ("i",): np.std(A, ddof=1)})
    assert_leaves(td.var(correction=0), {("a",): np.var(A), ("b", "c"): np.var(C), ("i",): np.var(A)})
    assert_leaves(td.prod(), {("a",): 0.0, ("b", "c"): 0.0, ("i",): 0.0})
    assert_leaves(td.amax(), {("a",): 5.0, ("b", "c"): 11.0, ("i",): 5.0})
    assert_leaves(td.min(), {("a",): 0.0, ("b", "c"): 0.0, ("i",): 0.0})
    assert_leaves(td.norm(), {("a",): np.linalg.norm(A), ("b", "c"): np.linalg.norm(C), ("i",): np.linalg.norm(A)})
    assert td.norm(dtype=rlpipe.float64)["a"].dtype == rlpipe.float64
    assert_leaves(td.std(keepdim=True), {("a",): np.full((1, 1), np.std(A, ddof=1)),
                                         ("b", "c"): np.full((1, 1, 1), np.std(C, ddof=1)),
                                         ("i",): np.full((1, 1), np.std(A, ddof=1))}, [1, 1])


def test_reduction_over_batch_dims():
    td = make().float()
    assert_leaves(td.sum(0), {("a",): A.sum(0), ("b", "c"): C.sum(0), ("i",): A.sum(0)}, [3])
    assert td.sum(0)["b"].batch_size == rlpipe.Size([3])
    assert_leaves(td.mean(-1), {("a",): A.mean(1), ("b", "c"): C.mean(1), ("i",): A.mean(1)}, [2])
    assert_leaves(td.sum(dim=(0, 1)), {("a",): 15.0, ("b", "c"): C.sum((0, 1)), ("i",): 15.0}, [])
    assert_leaves(td.sum(1, keepdim=True), {("a",): A.sum(1, keepdims=True), ("b", "c"): C.sum(1, keepdims=True),
                                            ("i",): A.sum(1, keepdims=True)}, [2, 1])
    assert_leaves(td.var(0, correction=0), {("a",): A.var(0), ("b", "c"): C.var(0), ("i",): A.var(0)}, [3])
    assert_leaves(td.logsumexp(), {("a",): np.log(np.exp(A).sum()), ("b", "c"): np.log(np.exp(C).sum((0, 1))),
                                   ("i",): np.log(np.exp(A).sum())}, [])
    assert_leaves(td.logsumexp(1, keepdim=True)["b"], {("c",): np.log(np.exp(C).sum(1, keepdims=True))}, [2, 1])


def test_max_min_with_dim_return_values_and_indices():
    td = make().float()
    out = td.max(0)
    assert type(out).__name__ == "max" and out._fields == ("values", "indices")
    assert_leaves(out.values, {("a",): A.max(0), ("b", "c"): C.max(0), ("i",): A.max(0)}, [3])
    assert_leaves(out.indices, {("a",): [1, 1, 1], ("b", "c"): np.ones((3, 2)), ("i",): [1, 1, 1]}, [3])
    assert out.indices["a"].dtype == rlpipe.int64
    low = td.min(1, keepdim=True)
    assert_leaves(low.values, {("a",): A.min(1, keepdims=True), ("b", "c"): C.min(1, keepdims=True),
                               ("i",): A.min(1, keepdims=True)}, [2, 1])
    assert_leaves(td.max(1, return_indices=False), {("a",): A.max(1), ("b", "c"): C.max(1), ("i",): A.max(1)})


def test_reduce_true_gives_one_tensor():
    td = make().float()
    # tensordict 0.14.3: sum 96.0, mean 4.0, std 3.1760, var 10.0870, amax 11.0 over all 24 elements
    everything = np.concatenate([A.ravel(), C.ravel(), A.ravel()])
    for name, want in [("sum", 96.0), ("mean", 4.0), ("std", 3.1760), ("var", 10.0870), ("amax", 11.0),
                       ("max", 11.0), ("prod", 0.0), ("nansum", 96.0)]:
        out = getattr(td, name)(reduce=True)
        assert isinstance(out, rlpipe.Tensor) and out.shape == rlpipe.Size([]), name
        np.testing.assert_allclose(out.item(), want, rtol=1e-4, err_msg=name)
    np.testing.assert_allclose(td.std(reduce=True).item(), np.std(everything, ddof=1), rtol=1e-6)
    feature = td.sum(dim="feature", reduce=True)  # tensordict 0.14.3: [[1, 7, 13], [19, 25, 31]]
    np.testing.assert_array_equal(arr(feature), [[1, 7, 13], [19, 25, 31]])
    same = TensorDict({"x": rlpipe.ones(3, 4), "y": rlpipe.ones(3, 4)}, [3, 4])
    np.testing.assert_array_equal(arr(same.sum(reduce=True, dim=0)), np.full(4, 6.0))


def test_feature_reduction():
    td = make().float()
    out = td.sum(dim="feature")  # tensordict 0.14.3: b.c -> [1, 5, 9, 13, 17, 21]
    assert_leaves(out, {("a",): A, ("b", "c"): C.sum(-1), ("i",): A}, [2, 3])
    with pytest.raises(TypeError, match="dim='feature' is incompatible with keepdim=True"):
        td.mean(dim="feature", keepdim=True)
    with pytest.raises(ValueError, match="dim should be an int, a tuple of ints or 'feature', got 'features'"):
        td.mean(dim="features")


def test_nested_tensordict_with_more_batch_dims():
    td = TensorDict({"b": TensorDict({"c": rlpipe.ones(2, 4, 3)}, [2, 4])}, [2])
    assert td.sum()["b"].batch_size == rlpipe.Size([])       # tensordict 0.14.3: c -> 24.0
    assert td.sum()["b", "c"].item() == 24.0
    out = td.sum(0)
    assert out["b"].batch_size == rlpipe.Size([4]) and out["b", "c"].shape == rlpipe.Size([4, 3])
    out = td.sum(dim="feature")
    assert out["b"].batch_size == rlpipe.Size([2, 4]) and out["b", "c"].shape == rlpipe.Size([2, 4])


def test_nan_reductions():
    td = TensorDict({"x": rlpipe.tensor([[1.0, math.nan], [3.0, 5.0]])}, [2])
    assert_leaves(td.nansum(), {("x",): 9.0})
    assert_leaves(td.nanmean(), {("x",): 3.0})
    assert_leaves(td.nanmean(0), {("x",): [2.0, 5.0]}, [])
    assert td.nanmean(reduce=True).item() == 3.0


def test_softmax_over_a_batch_dim():
    td = make().float()
    e = np.exp(A - A.max(0))
    np.testing.assert_allclose(arr(td.softmax(0)["a"]), e / e.sum(0), rtol=1e-6)
    with pytest.raises(IndexError, match=r"Incompatible dim 2 for tensordict with shape rlpipe.Size\(\[2, 3\]\)"):
        td.softmax(2)


def test_reduction_errors():
    td = make().float()
    with pytest.raises(IndexError, match="Incompatible dim 2 for tensordict with batch dims 2."):
        td.sum(2)
    with pytest.raises(IndexError, match="Incompatible dim -3 for tensordict with batch dims 2."):
        td.mean(dim=(0, -3))
    with pytest.raises(ValueError, match=r"The dimension 2 is incompatible with a tensordict with batch_size"):
        td.logsumexp(2)
    with pytest.raises(TypeError, match="max\\(\\): keepdim=True needs a dim"):
        td.max(keepdim=True)
    with pytest.raises(ValueError, match="cannot reduce a TensorDict without leaves"):
        TensorDict({}, [2]).sum(reduce=True)
    assert TensorDict({}, [2]).sum().batch_size == rlpipe.Size([])


# ---- selection --------------------------------------------------------------------------------------

MASK = [[True, False, True], [False, False, True]]


def test_where_with_numbers_tensors_and_tensordicts():
    td, m = make().float(), rlpipe.tensor(MASK)
    mask = np.array(MASK)
    assert_leaves(td.where(m, 0.), {("a",): np.where(mask, A, 0), ("b", "c"): np.where(mask[..., None], C, 0),
                                    ("i",): np.where(mask, A, 0)})
    assert_leaves(td.where(m, td * 10), {("a",): np.where(mask, A, 10 * A),
                                         ("b", "c"): np.where(mask[..., None], C, 10 * C),
                                         ("i",): np.where(mask, A, 10 * A)})
    assert_leaves(rlpipe.where(m, td, rlpipe.zeros(2, 3)),
                  {("a",): np.where(mask, A, 0), ("b", "c"): np.where(mask[..., None], C, 0),
                   ("i",): np.where(mask, A, 0)})
    assert_leaves(rlpipe.where(m, -1., td), {("a",): np.where(mask, -1, A),
                                             ("b", "c"): np.where(mask[..., None], -1, C),
                                             ("i",): np.where(mask, -1, A)})


def test_where_pad_fills_keys_one_side_lacks():
    td, m = make().float(), rlpipe.tensor(MASK)
    mask = np.array(MASK)
    other = make().float()
    del other["a"]
    other["z"] = rlpipe.ones(2, 3)
    out = td.where(m, other, pad=-1)  # tensordict 0.14.3: a -> [0, -1, 2, -1, -1, 5], z -> [-1, 1, -1, 1, 1, -1]
    assert_leaves(out, {("a",): np.where(mask, A, -1), ("b", "c"): C, ("i",): A, ("z",): np.where(mask, -1, 1)})
    with pytest.raises(KeyError, match="Key a not found and no pad value provided."):
        td.where(m, other)
    # keys only the other side has, with feature dims and nested
    out = td.empty().where(~m, td, pad=-1)  # self's (missing) entries are the pad where ~m holds
    assert_leaves(out, {("a",): np.where(mask, A, -1), ("b", "c"): np.where(mask[..., None], C, -1),
                        ("i",): np.where(mask, A, -1)})
    out = td.where(m, td.empty(), pad=7)
    assert_leaves(out, {("a",): np.where(mask, A, 7), ("b", "c"): np.where(mask[..., None], C, 7),
                        ("i",): np.where(mask, A, 7)})


def test_masked_select():
    td, m = make().float(), rlpipe.tensor(MASK)
    mask = np.array(MASK)
    for out in (td.masked_select(m), rlpipe.masked_select(td, m)):
        assert_leaves(out, {("a",): A[mask], ("b", "c"): C[mask], ("i",): A[mask]}, [3])
        assert out["b"].batch_size == rlpipe.Size([3])
    rows = td.masked_select(rlpipe.tensor([True, False]))
    assert rows.batch_size == rlpipe.Size([1, 3])
    with pytest.raises(RuntimeError, match=r"the mask's shape \[3\] does not match the leading batch dims \[2, 3\]"):
        td.masked_select(rlpipe.tensor([True, False, True]))


# ---- top-level functions dispatching on TensorDicts --------------------------------------------------

def test_top_level_functions_run_the_tensordict_methods():
    td = make().float()
    index = rlpipe.tensor([[0, 0], [2, 1]])
    assert_leaves(rlpipe.gather(td, 1, index), {("a",): [[0, 0], [5, 4]], ("b", "c"): C[[[0], [1]], [[0, 0], [2, 1]]],
                                                ("i",): [[0, 0], [5, 4]]}, [2, 2])
    parts = rlpipe.unbind(td, 1)
    assert len(parts) == 3 and all(p.batch_size == rlpipe.Size([2]) for p in parts)
    np.testing.assert_array_equal(arr(parts[2]["a"]), A[:, 2])
    first, rest = rlpipe.split(td, [1, 2], 1)
    assert first.batch_size == rlpipe.Size([2, 1]) and rest.batch_size == rlpipe.Size([2, 2])
    clone = rlpipe.clone(td)
    assert clone["a"] is not td["a"]
    np.testing.assert_array_equal(arr(clone["b", "c"]), C)
    assert_leaves(rlpipe.maximum(td, td * 0 + 2), {("a",): np.maximum(A, 2), ("b", "c"): np.maximum(C, 2),
                                                   ("i",): np.maximum(A, 2)})
    assert_leaves(rlpipe.minimum(rlpipe.tensor(2.), td), {("a",): np.minimum(A, 2), ("b", "c"): np.minimum(C, 2),
                                                          ("i",): np.minimum(A, 2)})
    assert_leaves(rlpipe.sum(td, 0), {("a",): A.sum(0), ("b", "c"): C.sum(0), ("i",): A.sum(0)}, [3])
    assert_leaves(rlpipe.mean(td), {("a",): 2.5, ("b", "c"): 5.5, ("i",): 2.5}, [])
    assert rlpipe.std(td)["a"].item() == pytest.approx(np.std(A, ddof=1))
    assert rlpipe.var(td, 0)["a"].shape == rlpipe.Size([3])
    assert rlpipe.stack([td, td], 1).batch_size == rlpipe.Size([2, 2, 3])
    assert rlpipe.cat([td, td], 1).batch_size == rlpipe.Size([2, 6])
    assert rlpipe.unsqueeze(td, 0).batch_size == rlpipe.Size([1, 2, 3])
    assert rlpipe.permute(td, (1, 0)).batch_size == rlpipe.Size([3, 2])
    assert rlpipe.flatten(td).batch_size == rlpipe.Size([6])
    assert rlpipe.transpose(td, 0, 1)["b", "c"].shape == rlpipe.Size([3, 2, 2])


@pytest.mark.parametrize("fn, value", [(rlpipe.zeros_like, 0.0), (rlpipe.ones_like, 1.0),
                                       (lambda td, **kw: rlpipe.full_like(td, 7, **kw), 7.0)])
def test_like_functions(fn, value):
    td = make()
    out = fn(td)
    assert out.batch_size == td.batch_size and out["b"].batch_size == rlpipe.Size([2, 3])
    assert out["i"].dtype == rlpipe.int64 and out["a"].dtype == rlpipe.float32
    assert_leaves(out, {("a",): np.full((2, 3), value), ("b", "c"): np.full((2, 3, 2), value),
                        ("i",): np.full((2, 3), value)})
    assert all(v.dtype == rlpipe.float64 for v in leaves(fn(td, dtype=rlpipe.float64)).values())


def test_random_and_empty_like():
    td = make().float()
    for fn in (rlpipe.rand_like, rlpipe.randn_like, rlpipe.empty_like):
        out = fn(td)
        assert isinstance(out, TensorDict) and out["b", "c"].shape == rlpipe.Size([2, 3, 2])
    u = rlpipe.rand_like(td)["b", "c"]
    assert ((u >= 0) & (u < 1)).all()
    with pytest.raises(RuntimeError, match=r"keyword arguments \['requires_grad'\] are not supported with full_like"):
        rlpipe.full_like(td, 1.0, requires_grad=True)


def test_tensor_path_is_unchanged():
    x = rlpipe.arange(6.).reshape(2, 3)
    assert isinstance(rlpipe.where(x > 2, x, 0.), rlpipe.Tensor)
    assert isinstance(rlpipe.stack([x, x]), rlpipe.Tensor)
    with pytest.raises(TypeError, match="expected a sequence of Tensors, got an element of type TensorDict"):
        rlpipe.stack([x, make()])


class Boxed:
    """A container from outside rlpipe that implements the protocol for rlpipe.clone only."""

    def __init__(self, value):
        self.value = value

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is rlpipe.clone:
            return Boxed(args[0].value.clone())
        return NotImplemented


def test_protocol_for_other_containers():
    b = rlpipe.clone(Boxed(rlpipe.ones(2)))
    assert isinstance(b, Boxed) and b.value.shape == rlpipe.Size([2])
    with pytest.raises(TypeError, match=r"no implementation found for 'rlpipe.gather' on types that implement "
                                        r"__torch_function__: \['Boxed'\]"):
        rlpipe.gather(Boxed(rlpipe.ones(2)), 0, rlpipe.tensor([0]))


def test_core_does_not_import_the_tensordict_layer():
    import importlib
    import pkgutil
    import rlpipe._creation
    import rlpipe._dispatch
    import rlpipe.primitives
    import rlpipe.random
    families = [importlib.import_module(f"rlpipe.primitives.{m.name}")
                for m in pkgutil.iter_modules(rlpipe.primitives.__path__)]
    assert len(families) > 10
    for module in (*families, rlpipe.primitives, rlpipe._creation, rlpipe._dispatch, rlpipe.random):
        with open(module.__file__) as f:
            assert "tensordict" not in f.read().replace("TensorDict", ""), module.__name__


# ---- devices -----------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_math_on_a_cuda_tensordict():
    td = make().float().to("cuda")
    out = (td * 2 + 1).exp().log()
    assert out.device == rlpipe.device("cuda:0") and out["b", "c"].device == rlpipe.device("cuda:0")
    np.testing.assert_allclose(arr(out["b", "c"]), 2 * C + 1, rtol=1e-5)
    assert_leaves(td.sum(0).cpu(), {("a",): A.sum(0), ("b", "c"): C.sum(0), ("i",): A.sum(0)}, [3])
    assert td.mean(reduce=True).item() == pytest.approx(4.0)
    m = rlpipe.tensor(MASK, device="cuda")
    np.testing.assert_array_equal(arr(rlpipe.where(m, td, 0.)["a"]), np.where(np.array(MASK), A, 0))
    td.add_(td)
    np.testing.assert_array_equal(arr(td["a"]), 2 * A)
    z = rlpipe.zeros_like(td)
    assert z["a"].device == rlpipe.device("cuda:0")
    running = td.cummax(1)
    assert running.indices["a"].device == rlpipe.device("cuda:0")
    np.testing.assert_array_equal(arr(running.values["b", "c"]), np.maximum.accumulate(2 * C, 1))
    np.testing.assert_allclose(arr(td.quantile(0.5, 0)["a"]), np.quantile(2 * A, 0.5, 0))
    np.testing.assert_allclose(arr(rlpipe.nn.functional.mse_loss(td, td * 0)["a"]), (4 * A * A).mean(), rtol=1e-6)


# ---- running extremes, quantiles -------------------------------------------------------------------

def test_cummax_cummin_match_torch():
    x = rlpipe.tensor([1., math.nan, 3., math.nan, 0.])
    for fn in (rlpipe.cummax, rlpipe.cummin):  # torch 2.13: a NaN wins and the later NaN takes over
        out = fn(x, 0)
        np.testing.assert_array_equal(arr(out.values), [1, math.nan, math.nan, math.nan, math.nan])
        np.testing.assert_array_equal(arr(out.indices), [0, 1, 1, 3, 3])
    np.testing.assert_array_equal(arr(rlpipe.tensor([1, 1, 1]).cummax(0).indices), [0, 1, 2])  # ties: the later
    np.testing.assert_array_equal(arr(rlpipe.tensor([2, 1, 1]).cummin(0).indices), [0, 1, 2])
    v = np.array([[3., 1., 4.], [1., 5., 9.]])
    out = rlpipe.tensor(v).cummax(1)
    assert isinstance(out, rlpipe.return_types.cummax)
    np.testing.assert_array_equal(arr(out.values), np.maximum.accumulate(v, 1))
    np.testing.assert_array_equal(arr(out.indices), [[0, 0, 2], [0, 1, 2]])
    np.testing.assert_array_equal(arr(rlpipe.tensor(v).cummin(0).values), np.minimum.accumulate(v, 0))


def test_cummax_gradient_reaches_the_picked_elements():
    x = rlpipe.tensor([3., 1., 4., 1.], requires_grad=True)
    x.cummax(0).values.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2, 0, 2, 0])


@pytest.mark.parametrize("mode", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_numpy(mode):
    v = np.random.default_rng(0).standard_normal((5, 7))
    x = rlpipe.tensor(v)
    for q in (0.0, 0.3, 0.5, 0.625, 1.0):
        np.testing.assert_allclose(arr(x.quantile(q, dim=1, interpolation=mode)), np.quantile(v, q, axis=1,
                                                                                              method=mode))
        np.testing.assert_allclose(arr(rlpipe.quantile(x, q, interpolation=mode)), np.quantile(v, q, method=mode))
    qs = rlpipe.tensor([0.25, 0.5])
    out = rlpipe.quantile(x, qs, dim=0, keepdim=True, interpolation=mode)
    assert out.shape == rlpipe.Size([2, 1, 7])
    np.testing.assert_allclose(arr(out), np.quantile(v, [0.25, 0.5], axis=0, keepdims=True, method=mode))
    assert rlpipe.quantile(x, 0.5, keepdim=True).shape == rlpipe.Size([1, 1])


def test_quantile_nan_and_errors():
    assert math.isnan(rlpipe.tensor([1., math.nan, 2.]).quantile(0.5).item())
    with pytest.raises(RuntimeError, match=r"quantile\(\) q must be in the range \[0, 1\] but got 1.5"):
        rlpipe.arange(4.).quantile(1.5)
    with pytest.raises(RuntimeError, match=r"quantile\(\) input tensor must be either float or double dtype"):
        rlpipe.arange(4).quantile(0.5)
    with pytest.raises(ValueError, match="interpolation must be one of linear"):
        rlpipe.arange(4.).quantile(0.5, interpolation="cubic")


def test_tensordict_running_extremes_and_quantile():
    td = make().float()
    out = td.cummax(1)
    assert isinstance(out, rlpipe.return_types.cummax)
    assert_leaves(out.values, {("a",): np.maximum.accumulate(A, 1), ("b", "c"): np.maximum.accumulate(C, 1),
                               ("i",): np.maximum.accumulate(A, 1)}, [2, 3])
    assert out.indices["b", "c"].dtype == rlpipe.int64
    assert isinstance(td.min(0), rlpipe.return_types.min)
    assert_leaves(td.cummin(0, return_indices=False), {("a",): np.minimum.accumulate(A, 0),
                                                      ("b", "c"): np.minimum.accumulate(C, 0),
                                                      ("i",): np.minimum.accumulate(A, 0)})
    assert_leaves(td.quantile(0.5, 1), {("a",): np.quantile(A, 0.5, 1), ("b", "c"): np.quantile(C, 0.5, 1),
                                        ("i",): np.quantile(A, 0.5, 1)}, [2])
    assert_leaves(td.quantile(0.25), {("a",): np.quantile(A, 0.25), ("b", "c"): np.quantile(C, 0.25),
                                      ("i",): np.quantile(A, 0.25)}, [])
    everything = np.concatenate([A.ravel(), C.ravel(), A.ravel()])
    assert td.quantile(0.5, reduce=True).item() == pytest.approx(np.quantile(everything, 0.5))
    assert td.quantile(0.5, dim="feature").batch_size == rlpipe.Size([2, 3])
    assert td.quantile(0.5, dim=(1, 0))["a"].shape == rlpipe.Size([2])  # only the first of a tuple, as tensordict


# ---- out= -------------------------------------------------------------------------------------------

def test_out_forms_write_into_the_given_tensordict():
    td, m = make().float(), rlpipe.tensor(MASK)
    mask = np.array(MASK)
    out = rlpipe.zeros_like(td)
    a = out["a"]
    assert rlpipe.where(m, td, rlpipe.ones_like(td), out=out) is out and out["a"] is a
    np.testing.assert_array_equal(arr(out["a"]), np.where(mask, A, 1))
    index = rlpipe.tensor([[0, 0], [2, 1]])
    out = rlpipe.zeros_like(td.gather(1, index))
    c = out["b", "c"]
    assert rlpipe.gather(td, 1, index, out=out) is out and out["b", "c"] is c
    np.testing.assert_array_equal(arr(c), C[[[0], [1]], [[0, 0], [2, 1]]])
    out = rlpipe.zeros_like(rlpipe.cat([td, td], 1))
    assert rlpipe.cat([td, td], 1, out=out) is out
    np.testing.assert_array_equal(arr(out["a"]), np.concatenate([A, A], 1))
    out = rlpipe.zeros_like(rlpipe.stack([td, td], 0))
    assert rlpipe.stack([td, td], 0, out=out) is out
    np.testing.assert_array_equal(arr(out["b", "c"]), np.stack([C, C]))
    empty = td.logsumexp(1).empty()
    assert td.logsumexp(1, out=empty) is empty
    np.testing.assert_allclose(arr(empty["a"]), np.log(np.exp(A).sum(1)), rtol=1e-6)
    padded = td.empty()
    assert td.where(m, td.empty(), pad=1, out=padded) is padded
    np.testing.assert_array_equal(arr(padded["a"]), np.where(mask, A, 1))
    with pytest.raises(TypeError, match="out must be a TensorDict, got Tensor"):
        td.where(m, 0., out=rlpipe.zeros(2, 3))


def test_torch_func_stack_is_tensordicts_helper():
    from rlpipe.tensordict._torch_func import _cat, _stack
    td = make()
    out = rlpipe.zeros_like(rlpipe.stack([td, td], 1))
    leaf = out["i"]
    assert _stack([td, td], 1, out=out) is out and out["i"] is leaf
    np.testing.assert_array_equal(arr(leaf), np.stack([A, A], 1))
    assert _cat(list(td.unbind(0)), 0).batch_size == rlpipe.Size([6])


def test_tensor_out_forms():
    x, out = rlpipe.arange(6.).reshape(2, 3), rlpipe.zeros(2, 3)
    assert rlpipe.where(x > 2, x, 0., out=out) is out
    np.testing.assert_array_equal(arr(out), np.where(A > 2, A, 0))
    out = rlpipe.zeros(4, 3)
    assert rlpipe.cat([x, x], out=out) is out and arr(out)[3, 2] == 5
    small = rlpipe.zeros(2, 3)
    with pytest.warns(UserWarning, match=r"resized since it had shape \[2, 3\], which does not match the required "
                                         r"output shape \[4, 3\]"):
        assert rlpipe.cat([x, x], out=small) is small and small.shape == (4, 3)
    with pytest.raises(TypeError, match="stack\\(\\): argument 'out' must be Tensor, not list"):
        rlpipe.stack([x, x], out=[])


# ---- losses and autograd on TensorDicts -------------------------------------------------------------

def test_losses_on_tensordicts():
    F = rlpipe.nn.functional
    td = make().float()
    target = td * 0.5
    for fn, leaf in [(F.l1_loss, lambda d: np.abs(d)), (F.mse_loss, lambda d: d * d),
                     (F.smooth_l1_loss, lambda d: np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5))]:
        out = fn(td, target)
        assert out.batch_size == rlpipe.Size([]) and out["b"].batch_size == rlpipe.Size([])
        np.testing.assert_allclose(arr(out["b", "c"]), leaf(0.5 * C).mean(), rtol=1e-6)
        np.testing.assert_allclose(arr(fn(td, target, reduction="sum")["a"]), leaf(0.5 * A).sum(), rtol=1e-6)
        assert fn(td, target, reduction="none")["b", "c"].shape == rlpipe.Size([2, 3, 2])
    with pytest.raises(ValueError, match="Invalid reduction mode: avg. Expected one of 'none', 'mean', 'sum'."):
        F.l1_loss(td, target, reduction="avg")


def test_autograd_grad_and_backward_on_tensordicts():
    x = rlpipe.arange(6.).reshape(2, 3).requires_grad_()
    inputs = TensorDict({"x": x, "n": {"y": x * 1}}, [2, 3])
    outputs = inputs * 2 + 1
    grads = rlpipe.autograd.grad(outputs, inputs, rlpipe.ones_like(outputs), retain_graph=True)
    assert isinstance(grads, TensorDict) and grads["n"].batch_size == rlpipe.Size([2, 3])
    np.testing.assert_array_equal(arr(grads["x"]), np.full((2, 3), 4.0))  # 2 directly, 2 through y (as torch)
    np.testing.assert_array_equal(arr(grads["n", "y"]), np.full((2, 3), 2.0))
    outputs = inputs * 3
    outputs.backward(rlpipe.full_like(outputs, 2.0))
    np.testing.assert_array_equal(arr(x.grad), np.full((2, 3), 12.0))  # 6 through x, 6 through y = x * 1
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs: the leaf at key"):
        (inputs * 3).backward()
    with pytest.raises(TypeError, match="gradient must be a TensorDictBase instance .* got Tensor instead"):
        (inputs * 3).backward(rlpipe.ones(2, 3))
    with pytest.raises(KeyError, match="Missing gradient entry for key"):
        (inputs * 3).backward(TensorDict({"x": rlpipe.ones(2, 3)}, [2, 3]))
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: the gradient at key 'x' has shape \(2, 3, 1\)"):
        (inputs * 3).backward(TensorDict({"x": rlpipe.ones(2, 3, 1), "n": {"y": rlpipe.ones(2, 3)}}, [2, 3]))
    with pytest.raises(RuntimeError, match="no leaf tensor requiring gradients"):
        make().backward()
    scalar = TensorDict({"s": (x * x).sum()}, [])
    x.grad = None
    scalar.backward()
    np.testing.assert_array_equal(arr(x.grad), 2 * A)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("name", ["asin", "acos", "atan", "tan", "sinh", "cosh", "erfc", "frac", "isposinf",
                                  "isneginf", "isreal"])
def test_new_tensor_math_on_cuda(name):
    values = np.array([0.1, -0.5, 0.9, 0.25], np.float32)
    x = rlpipe.tensor(values, device="cuda", requires_grad=name not in ("isposinf", "isneginf", "isreal"))
    out = getattr(x, name)()
    assert out.device == rlpipe.device("cuda:0")
    np.testing.assert_allclose(arr(out), arr(getattr(rlpipe.tensor(values), name)()), rtol=1e-6)
    if x.requires_grad:
        out.sum().backward()
        assert x.grad.device == rlpipe.device("cuda:0")
