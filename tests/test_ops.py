"""Every op case of ``op_cases.py`` against its NumPy reference (values and torch's dtypes, in float64
and float32) and through ``gradcheck`` in float64; then torch's dtypes for integer and bool ops."""
import math

import numpy as np
import pytest

import rlpipe as r
from op_cases import CASES, as_tuple, assert_close, make_inputs

PRECISIONS = ["float64", "float32"]
T = r.tensor


def _params(cases):
    return [pytest.param(c, id=c.name) for c in cases]


def _expected_dtypes(case, expected, precision):
    """torch's output dtypes for inputs of one float dtype: that dtype, int64 for indices, bool for masks."""
    if case.out_dtypes is not None:
        return list(case.out_dtypes)
    return [{"f": precision, "b": "bool"}.get(np.asarray(e).dtype.kind, "int64") for e in expected]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", _params(CASES))
def test_forward_matches_numpy(case, precision):
    arrays = make_inputs(case, precision)
    inputs = [r.tensor(a, requires_grad=True) for a in arrays]
    actual = as_tuple(case.fn(*inputs))
    expected = as_tuple(case.ref(*[a.astype(np.float64) for a in arrays]))
    assert_close(actual, expected, precision)
    assert [t.dtype.name for t in actual] == _expected_dtypes(case, expected, precision)
    assert_close(inputs, arrays, precision, what="input (left unchanged)")


@pytest.mark.parametrize("case", _params([c for c in CASES if c.grad]))
def test_gradcheck(case):
    inputs = [r.tensor(a, requires_grad=True) for a in make_inputs(case)]
    assert r.autograd.gradcheck(case.fn, inputs)


@pytest.mark.parametrize("fn, message", [
    (lambda x: x // 1.5, "derivative for aten::floor_divide is not implemented"),
    (lambda x: 1.5 // x, "derivative for aten::floor_divide is not implemented"),
    (lambda x: 1.5 % x, "derivative for aten::remainder is not implemented"),
], ids=["floordiv", "scalar_floordiv", "scalar_mod"])
def test_ops_without_a_derivative_raise_at_backward(fn, message):
    x = r.tensor([0.7, 2.0], dtype=r.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        fn(x).sum().backward()


# ---- gradients at the kinks, where torch picks a convention -------------------------------------

_KINKS = [  # name, function, input values, torch's gradient of the output's sum
    ("relu_at_zero", lambda x: x.relu(), [0.0, 1.0], [0.0, 1.0]),
    ("abs_at_zero", lambda x: x.abs(), [0.0, -2.0], [0.0, -1.0]),
    ("leaky_relu_at_zero", lambda x: r.leaky_relu(x, 0.2), [0.0, -1.0], [0.2, 0.2]),
    ("clamp_at_bounds", lambda x: x.clamp(0.0, 1.0), [0.0, 1.0, 2.0], [1.0, 1.0, 0.0]),
    ("clamp_tensor_min_tie", lambda x: x.clamp(min=T([1.0, 0.0], dtype=r.float64)), [1.0, -1.0], [1.0, 0.0]),
    ("maximum_tie", lambda x: r.maximum(x, T([1.0, 0.0], dtype=r.float64)), [1.0, 2.0], [0.5, 1.0]),
    ("minimum_tie", lambda x: r.minimum(x, T(1.0, dtype=r.float64)), [1.0, 2.0], [0.5, 0.0]),
    ("max_ties", lambda x: x.max(), [1.0, 3.0, 3.0], [0.0, 0.5, 0.5]),
    ("min_ties", lambda x: r.min(x), [2.0, 2.0], [0.5, 0.5]),
    ("amax_ties_dim", lambda x: x.amax(1), [[3.0, 3.0, 3.0], [1.0, 2.0, 2.0]], [[1 / 3] * 3, [0.0, 0.5, 0.5]]),
    ("norm_of_zeros", lambda x: x.norm(), [0.0, 0.0], [0.0, 0.0]),
    ("pow_zero_exponent_at_zero", lambda x: x ** 0, [0.0, 2.0], [0.0, 0.0]),
    ("pow_zero_base_exponent_grad", lambda y: T([0.0, 0.0], dtype=r.float64) ** y, [0.0, 2.0], [0.0, 0.0]),
    ("sqrt_at_zero", lambda x: x.sqrt(), [0.0], [math.inf]),
    ("sign_grad", lambda x: x.sign(), [0.0, -1.5], [0.0, 0.0]),
    ("round_grad", lambda x: x.round(), [0.5, 1.2], [0.0, 0.0]),
]


@pytest.mark.parametrize("fn, values, grad", [pytest.param(*k[1:], id=k[0]) for k in _KINKS])
def test_gradient_conventions_at_kinks(fn, values, grad):
    x = r.tensor(values, dtype=r.float64, requires_grad=True)
    fn(x).sum().backward()
    assert_close(x.grad, np.array(grad), "float64", what="gradient")


# ---- integer and bool dtypes -------------------------------------------------------------------

_PROMOTION = [  # name, op, torch's result dtype, torch's values
    ("int_div_int", lambda: T([1, -7, 4]) / T([2, 2, 8]), "float32", [0.5, -3.5, 0.5]),
    ("int_div_int_scalar", lambda: T([3], dtype=r.int16) / 2, "float32", [1.5]),
    ("int_div_trunc", lambda: T([-7, 7]).div(T([2]), rounding_mode="trunc"), "int64", [-3, 3]),
    ("int_div_floor", lambda: T([-7, 7]).div(T([2]), rounding_mode="floor"), "int64", [-4, 3]),
    ("int_floordiv_int", lambda: T([7, -7]) // T([2, 2]), "int64", [3, -4]),
    ("int_floordiv_float_scalar", lambda: T([7]) // 2.5, "float32", [2.0]),
    ("int_mod_int", lambda: T([7, -7]) % T([3, 3]), "int64", [1, 2]),
    ("int_mod_float_scalar", lambda: T([7]) % 2.5, "float32", [2.0]),
    ("int_mul_float_scalar", lambda: T([1, 2], dtype=r.int32) * 2.5, "float32", [2.5, 5.0]),
    ("int_mul_int_scalar", lambda: T([1, 2], dtype=r.int32) * 2, "int32", [2, 4]),
    ("int_add_alpha", lambda: T([1]).add(T([2]), alpha=3), "int64", [7]),
    ("int_mul_bool", lambda: T([2, 3]) * T([True, False]), "int64", [2, 0]),
    ("int32_add_int64_0d", lambda: T([1, 2], dtype=r.int32) + T(3), "int32", [4, 5]),
    ("int32_add_int64", lambda: T([1, 2], dtype=r.int32) + T([3, 3]), "int64", [4, 5]),
    ("uint8_add_int8", lambda: T([200], dtype=r.uint8) + T([-1], dtype=r.int8), "int16", [199]),
    ("uint8_add_int8_0d", lambda: T([1], dtype=r.uint8) + T(-1, dtype=r.int8), "uint8", [0]),
    ("int8_add_uint8_0d", lambda: T([1], dtype=r.int8) + T(200, dtype=r.uint8), "int8", [-55]),
    ("uint8_add_int_scalar", lambda: T([250], dtype=r.uint8) + 10, "uint8", [4]),
    ("bool_add_bool", lambda: T([True, False, False]) + T([True, True, False]), "bool", [True, True, False]),
    ("bool_mul_bool", lambda: T([True, False, True]) * T([True, True, False]), "bool", [True, False, False]),
    ("bool_add_int_scalar", lambda: T([True, False]) + 1, "int64", [2, 1]),
    ("bool_add_uint8_0d", lambda: T([True, False]) + T(2, dtype=r.uint8), "uint8", [3, 2]),
    ("bool_mul_float_scalar", lambda: T([True, False]) * 2.5, "float32", [2.5, 0.0]),
    ("float32_add_float64_0d", lambda: T([1.0]) + T(2.0, dtype=r.float64), "float32", [3.0]),
    ("float32_add_float64", lambda: T([1.0]) + T([2.0], dtype=r.float64), "float64", [3.0]),
    ("float16_add_float32_0d", lambda: T([1.0], dtype=r.float16) + T(2.0), "float16", [3.0]),
    ("int64_add_float64_0d", lambda: T([1, 2]) + T(0.5, dtype=r.float64), "float64", [1.5, 2.5]),
    ("int32_add_float16", lambda: T([1], dtype=r.int32) + T([0.5], dtype=r.float16), "float16", [1.5]),
    ("float32_add_numpy_float64", lambda: T([1.0]) + np.float64(0.5), "float32", [1.5]),
    ("int_sum", lambda: T([1, 2, 3], dtype=r.int32).sum(), "int64", 6),
    ("bool_sum", lambda: T([True, True, False]).sum(), "int64", 2),
    ("uint8_sum_dim", lambda: T([[200, 100]], dtype=r.uint8).sum(1), "int64", [300]),
    ("int_sum_dtype", lambda: T([1, 2]).sum(dtype=r.float64), "float64", 3.0),
    ("int_mean_dtype", lambda: T([1, 2]).mean(dtype=r.float64), "float64", 1.5),
    ("int8_prod", lambda: T([2, 3], dtype=r.int8).prod(), "int64", 6),
    ("int_cumsum", lambda: T([1, 2], dtype=r.int32).cumsum(0), "int64", [1, 3]),
    ("bool_cumsum", lambda: T([True, True]).cumsum(0), "int64", [1, 2]),
    ("int_cumprod", lambda: T([2, 3], dtype=r.int16).cumprod(0), "int64", [2, 6]),
    ("int32_max", lambda: T([1, 5, 2], dtype=r.int32).max(), "int32", 5),
    ("int16_max_dim", lambda: T([[1, 5, 2]], dtype=r.int16).max(1).values, "int16", [5]),
    ("int_argmax", lambda: T([1, 3, 2], dtype=r.int32).argmax(), "int64", 1),
    ("int_abs", lambda: T([-3, 2], dtype=r.int32).abs(), "int32", [3, 2]),
    ("int8_neg", lambda: -T([3], dtype=r.int8), "int8", [-3]),
    ("int_sign", lambda: T([-3, 0, 2]).sign(), "int64", [-1, 0, 1]),
    ("int_pow_int", lambda: T([2, 3]) ** 2, "int64", [4, 9]),
    ("int_pow_float", lambda: T([4, 9]) ** 0.5, "float32", [2.0, 3.0]),
    ("int_exp", lambda: T([0, 1]).exp(), "float32", [1.0, math.e]),
    ("int32_sqrt", lambda: T([4], dtype=r.int32).sqrt(), "float32", [2.0]),
    ("bool_sigmoid", lambda: T([True]).sigmoid(), "float32", [1 / (1 + math.exp(-1))]),
    ("int32_floor", lambda: T([3], dtype=r.int32).floor(), "int32", [3]),
    ("int_round", lambda: T([3]).round(), "int64", [3]),
    ("int_clamp_float_bound", lambda: T([1, 5]).clamp(min=2.5), "float32", [2.5, 5.0]),
    ("int16_clamp_int_bounds", lambda: T([1, 5], dtype=r.int16).clamp(0, 3), "int16", [1, 3]),
    ("where_int_float_scalar", lambda: r.where(T([True, False]), T([1, 2]), 2.5), "float32", [1.0, 2.5]),
    ("where_int_scalars", lambda: r.where(T([True, False]), 1, 0), "int64", [1, 0]),
    ("where_float_int_scalars", lambda: r.where(T([True, False]), 1.0, 0), "float32", [1.0, 0.0]),
    ("int_maximum_float", lambda: r.maximum(T([1, 4]), T([2.5, 0.5])), "float32", [2.5, 4.0]),
    ("int_matmul", lambda: T([[1, 2]]) @ T([[3], [4]]), "int64", [[11]]),
    ("int_lt_float_scalar", lambda: T([1, 2]) < 1.5, "bool", [True, False]),
    ("int_cat_float", lambda: r.cat([T([1]), T([0.5])]), "float32", [1.0, 0.5]),
    ("int_stack_int32", lambda: r.stack([T([1]), T([2], dtype=r.int32)]), "int64", [[1], [2]]),
    ("int_to_float64", lambda: T([1]).to(r.float64), "float64", [1.0]),
]


@pytest.mark.parametrize("op, dtype, values", [pytest.param(*p[1:], id=p[0]) for p in _PROMOTION])
def test_integer_and_bool_dtypes(op, dtype, values):
    out = op()
    assert out.dtype.name == dtype
    assert_close(out, np.array(values), "float64")


_RAISES = [  # name, op that torch rejects with a RuntimeError
    ("int_mean", lambda: T([1, 2]).mean()),
    ("int_var", lambda: T([1, 2, 4]).var()),
    ("int_pow_negative_int", lambda: T([2]) ** -1),
    ("bool_sub_bool", lambda: T([True]) - T([False])),
    ("bool_neg", lambda: -T([True])),
    ("int_requires_grad", lambda: T([1]).requires_grad_()),
]


@pytest.mark.parametrize("op", [pytest.param(p[1], id=p[0]) for p in _RAISES])
def test_integer_and_bool_errors(op):
    with pytest.raises(RuntimeError):
        op()
