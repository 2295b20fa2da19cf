"""Regression tests for discrepancies found by a differential check against torch 2.13.

Each expectation is torch's observed or documented behaviour, written by hand (``torch.``
spelled ``rlpipe.``); rlpipe is never checked against itself. Error cases check both the
exception class and (part of) torch's message.
"""
import math
import warnings

import numpy as np
import pytest

import rlpipe as r

nan, inf = math.nan, math.inf


def check(t, expected, dtype):
    """``t`` holds exactly ``expected`` (nan equal to nan) and has dtype ``dtype``."""
    assert isinstance(t, r.Tensor)
    assert t.dtype is dtype, f"dtype {t.dtype}, expected {dtype}"
    np.testing.assert_array_equal(t.detach().numpy(), np.array(expected))


def grad_of(fn, values, dtype=r.float32):
    """The gradient of ``fn(x).sum()`` with respect to a leaf built from ``values``."""
    x = r.tensor(values, dtype=dtype, requires_grad=True)
    fn(x).sum().backward()
    return x.grad


# ---------------------------------------------------------------------------------------------
# Arithmetic with Python numbers
# ---------------------------------------------------------------------------------------------

def test_number_minus_int_tensor():
    """A Python int on the left of '-' keeps the tensor's int64 dtype."""
    check(5 - r.tensor([1, 2]), [4, 3], r.int64)


@pytest.mark.parametrize("fn, expected", [
    (lambda x: r.add(x, 3, alpha=2), [7., 8.]),
    (lambda x: r.sub(x, 1, alpha=2), [-1., 0.]),
])
def test_alpha_scales_a_number_operand(fn, expected):
    """add/sub accept a Python number as ``other`` together with ``alpha``."""
    check(fn(r.tensor([1., 2.])), expected, r.float32)


@pytest.mark.parametrize("dtype, number, expected", [
    (r.uint8, -3, [254, 255]),   # 1 - 3 = -2 -> 254, 2 - 3 = -1 -> 255
    (r.int8, 300, [45, 46]),     # 301 - 256, 302 - 256
])
def test_out_of_range_python_int_wraps(dtype, number, expected):
    """A Python int outside a small int dtype's range wraps instead of promoting or raising."""
    check(r.tensor([1, 2], dtype=dtype) + number, expected, dtype)


# ---------------------------------------------------------------------------------------------
# Integer division and powers
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda a, b: a // b,
    lambda a, b: a % b,
], ids=["floordiv", "mod"])
@pytest.mark.parametrize("divisor", [0, r.tensor([1, 0])], ids=["number", "tensor"])
def test_integer_division_by_zero_raises(fn, divisor):
    """torch raises instead of returning NumPy's 0 with a warning."""
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(r.tensor([1, 2]), divisor)


@pytest.mark.parametrize("fn, expected", [
    (lambda: 2 ** r.tensor([-1, 2]), [0, 4]),
    (lambda: r.tensor([2, 3]) ** r.tensor([-1, 2]), [0, 9]),
    (lambda: r.tensor([1, -1, 2]) ** r.tensor([-3, -3, -1]), [1, -1, 0]),
])
def test_integer_negative_tensor_powers(fn, expected):
    """With a tensor exponent, 1 ** -n == 1, (-1) ** -n == +-1 and other bases give 0."""
    check(fn(), expected, r.int64)


def test_integer_tensor_to_negative_number_power_raises():
    with pytest.raises(RuntimeError, match=r"^Integers to negative integer powers are not allowed\.$"):
        r.tensor([2]) ** -1


# ---------------------------------------------------------------------------------------------
# nan handling in sign, abs and relu
# ---------------------------------------------------------------------------------------------

def test_sign_of_nan_is_zero():
    check(r.tensor([nan, -2., 0.]).sign(), [0., -1., 0.], r.float32)


@pytest.mark.parametrize("fn, expected", [
    (r.abs, [0.]),   # sgn(nan) == 0
    (r.relu, [1.]),  # threshold_backward passes the gradient where not (x <= 0)
])
def test_gradient_at_nan(fn, expected):
    check(grad_of(fn, [nan]), expected, r.float32)


# ---------------------------------------------------------------------------------------------
# Memory sharing
# ---------------------------------------------------------------------------------------------

def test_flip_copies():
    """flip returns a copy: writing to it leaves the input alone."""
    t = r.tensor([1, 2, 3])
    f = t.flip(0)
    f[0] = 10
    check(t, [1, 2, 3], r.int64)
    check(f, [10, 2, 1], r.int64)


# ---------------------------------------------------------------------------------------------
# einsum broadcasting
# ---------------------------------------------------------------------------------------------

def test_einsum_gradients_of_size_one_broadcast_operand():
    """'ab,b->a' with A of shape (2, 1) against b of shape (3,): out[a] = A[a, 0] * sum(b)."""
    A = r.tensor([[1.], [2.]], requires_grad=True)
    b = r.tensor([1., 2., 3.], requires_grad=True)
    out = r.einsum("ab,b->a", A, b)
    check(out, [6., 12.], r.float32)
    out.sum().backward()
    assert A.grad.shape == (2, 1) and b.grad.shape == (3,)
    check(A.grad, [[6.], [6.]], r.float32)  # sum(b) on each row
    check(b.grad, [3., 3., 3.], r.float32)  # sum(A) for each element


def test_einsum_ellipsis_aligns_from_the_right():
    """Batch dims (2, 3) and (3,) broadcast to (2, 3); contracting j of size 2 gives 2."""
    out = r.einsum("...ij,...jk->...ik", r.ones(2, 3, 1, 2), r.ones(3, 2, 1))
    assert out.shape == (2, 3, 1, 1)
    check(out, np.full((2, 3, 1, 1), 2.), r.float32)


# ---------------------------------------------------------------------------------------------
# Gradients where the plain formula gives nan
# ---------------------------------------------------------------------------------------------

def test_std_of_constant_has_zero_gradient():
    check(grad_of(lambda x: x.std(), [1., 1., 1.]), [0., 0., 0.], r.float32)


def test_normalizing_a_constant_row_has_finite_gradients():
    """(x - mean) / (std + eps): the std term contributes 0, so grads are (w - mean(w)) / eps."""
    x = r.ones(4, requires_grad=True)
    y = (x - x.mean()) / (x.std() + 1e-8)
    (y * r.tensor([1., 2., 3., 4.])).sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, [-1.5e8, -0.5e8, 0.5e8, 1.5e8], rtol=1e-5)


@pytest.mark.parametrize("values, p, expected", [
    ([0., 0.], 3, [0., 0.]),     # zero vector
    ([0., 1.], 0.5, [0., 1.]),   # p < 1: 0 at the zero entry; d/dx1 = |x1|^-0.5 * norm^0.5 = 1
    ([2., -3.], 0, [0., 0.]),    # counting "norm": piecewise constant
])
def test_p_norm_gradients(values, p, expected):
    check(grad_of(lambda x: x.norm(p=p), values), expected, r.float32)


def test_zero_norm_requires_grad():
    out = r.tensor([2., 0., -3.], requires_grad=True).norm(p=0)
    check(out, 2., r.float32)
    assert out.requires_grad


def test_trunc_division_has_zero_gradients_even_at_zero_divisor():
    x = r.tensor([1., 2.], requires_grad=True)
    y = r.tensor([0., 2.], requires_grad=True)
    r.div(x, y, rounding_mode="trunc").sum().backward()
    check(x.grad, [0., 0.], r.float32)
    check(y.grad, [0., 0.], r.float32)


# ---------------------------------------------------------------------------------------------
# Leaf gradients keep the leaf's dtype
# ---------------------------------------------------------------------------------------------

def test_amax_gradient_of_half_leaf_is_half():
    x = r.tensor([1., 2.], dtype=r.float16, requires_grad=True)
    x.amax().backward()
    check(x.grad, [0., 1.], r.float16)


@pytest.mark.parametrize("run", [
    lambda x: x.sum(dtype=r.float64).backward(),
    lambda x: (x * 2).backward(r.ones(2, dtype=r.float64)),
], ids=["sum-dtype", "float64-gradient"])
def test_float64_gradient_reaches_float32_leaf_as_float32(run):
    x = r.tensor([1., 2.], requires_grad=True)
    run(x)
    assert x.grad.dtype is r.float32
    assert x.grad.shape == (2,)


# ---------------------------------------------------------------------------------------------
# clamp promotion
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, expected, dtype", [
    (lambda: r.clamp(r.tensor([1, 5]), min=r.tensor([1.5, .5])), [1.5, 5.], r.float32),
    (lambda: r.clamp(r.tensor([1., 5.]), min=r.tensor([1.5, .5], dtype=r.float64),
                     max=r.tensor([4., 4.], dtype=r.float64)), [1.5, 4.], r.float64),
    (lambda: r.clamp(r.tensor([True, False]), 0), [1, 0], r.int64),
])
def test_clamp_promotes_with_its_bounds(fn, expected, dtype):
    check(fn(), expected, dtype)


def test_inplace_clamp_of_int_tensor_with_float_bound_raises():
    t = r.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        t.clamp_(min=r.tensor([1.5, .5]))


# ---------------------------------------------------------------------------------------------
# tensor() / full() dtype inference and overflow
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, dtype", [
    (lambda: r.tensor([np.float64(1.), 2.]), r.float64),         # NumPy scalars keep their dtype
    (lambda: r.tensor([np.int32(1), np.int32(2)]), r.int32),
    (lambda: r.tensor([1], dtype=float), r.float64),             # Python float means float64
    (lambda: r.full((2,), np.int32(1)), r.int64),                # fill value read as a number
])
def test_creation_dtype_inference(make, dtype):
    assert make().dtype is dtype


@pytest.mark.parametrize("make", [
    lambda: r.tensor(2 ** 63),
    lambda: r.tensor([200], dtype=r.int8),
], ids=["int64", "int8"])
def test_creation_overflow_raises(make):
    with pytest.raises(RuntimeError, match="without overflow"):
        make()


# ---------------------------------------------------------------------------------------------
# Accumulation precision
# ---------------------------------------------------------------------------------------------

def test_half_cumsum_accumulates_in_float32():
    """float16(0.1) * 4096 = 409.5; a float16 accumulator stalls at 256 (spacing 0.25 > 0.1 / 2)."""
    out = r.full((4096,), 0.1, dtype=r.float16).cumsum(0)
    assert out.dtype is r.float16
    assert abs(float(out[-1]) - 409.5) < 1.0


# ---------------------------------------------------------------------------------------------
# Empty tensors
# ---------------------------------------------------------------------------------------------

def test_logsumexp_of_empty_is_minus_inf():
    check(r.zeros(0, 3).logsumexp(0), [-inf, -inf, -inf], r.float32)


def test_softmax_of_empty_keeps_shape():
    assert r.zeros(0, 3).softmax(0).shape == (0, 3)


def test_tensor_split_with_unsorted_indices():
    """Pieces are t[:5], t[5:2] (empty) and t[2:]."""
    pieces = r.arange(7.).tensor_split([5, 2])
    assert len(pieces) == 3
    check(pieces[0], [0., 1., 2., 3., 4.], r.float32)
    assert pieces[1].shape == (0,)
    check(pieces[2], [2., 3., 4., 5., 6.], r.float32)


# ---------------------------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------------------------

def test_uint8_index_tensor_is_a_mask():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates uint8 masks with a warning
        out = r.tensor([10., 20., 30.])[r.tensor([1, 0, 1], dtype=r.uint8)]
    check(out, [10., 30.], r.float32)


# ---------------------------------------------------------------------------------------------
# Result dtypes of reductions and elementwise ops
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, expected, dtype", [
    (lambda: r.tensor([1, 2]).nansum(), 3, r.int64),
    (lambda: r.tensor([1, 0], dtype=r.uint8).all(), 0, r.uint8),
    (lambda: r.tensor([1, 0], dtype=r.uint8).any(), 1, r.uint8),
    (lambda: r.tensor([True, False]).square(), [1, 0], r.int64),
    (lambda: r.tensor(True).cumsum(0), 1, r.int64),
], ids=["nansum-int", "all-uint8", "any-uint8", "square-bool", "cumsum-0d-bool"])
def test_result_dtypes(fn, expected, dtype):
    check(fn(), expected, dtype)


# ---------------------------------------------------------------------------------------------
# Exception classes and messages
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, exc, match", [
    (lambda: r.ones(2) + r.ones(3), RuntimeError,
     r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton dimension 0"),
    (lambda: r.zeros(0).amax(), RuntimeError,
     r"amax\(\): Expected reduction dim to be specified for input\.numel\(\) == 0"),
    (lambda: r.ones(2, 3) @ r.ones(2, 3), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"),
    (lambda: r.ones(2, 2) @ r.ones(2, 2, dtype=r.float64), RuntimeError, "same dtype"),
    (lambda: r.gather(r.ones(3), 0, r.tensor([-1])), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 3"),
    (lambda: r.cat([r.tensor(1.), r.tensor(2.)]), RuntimeError,
     r"zero-dimensional tensor \(at position 0\) cannot be concatenated"),
    (lambda: r.tensor(1.).cumsum(3), IndexError,
     r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 3\)"),
    (lambda: r.tensor(1.).transpose(0, 1), IndexError,
     r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"),
    (lambda: r.tensor(1.).sum([0, -1]), RuntimeError, "dim 0 appears multiple times in the list of dims"),
    (lambda: r.div(r.ones(2), 2, rounding_mode="bad"), RuntimeError,
     "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'bad'"),
    (lambda: r.gelu(r.ones(2), approximate="bad"), RuntimeError,
     "approximate argument must be either none or tanh"),
    (lambda: r.index_select(r.ones(3), 0, r.tensor([5])), RuntimeError, "index out of range in self"),
    (lambda: r.ones(3)["a"], TypeError, r"only integers, slices .* are valid indices \(got str\)"),
], ids=["broadcast", "amax-empty", "matmul-shapes", "matmul-dtypes", "gather-negative", "cat-0d",
        "cumsum-dim", "transpose-dim", "sum-repeated-dim", "div-rounding-mode", "gelu-approximate",
        "index-select-range", "str-index"])
def test_exception_classes(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_numpy_array_matmul_tensor_gives_a_tensor():
    out = np.ones((2, 2), np.float32) @ r.ones(2, 2)
    check(out, [[2., 2.], [2., 2.]], r.float32)


def test_gather_accepts_int32_index():
    out = r.gather(r.tensor([10., 20., 30.]), 0, r.tensor([2, 0], dtype=r.int32))
    check(out, [30., 10.], r.float32)


# ---------------------------------------------------------------------------------------------
# What torch rejects
# ---------------------------------------------------------------------------------------------

_ONE_BOOL = r"^Subtraction, the `-` operator, with a bool tensor is not supported\. If you are trying to invert"
_TWO_BOOLS = r"^Subtraction, the `-` operator, with two bool tensors is not supported\. Use the `\^` or"


@pytest.mark.parametrize("fn, match", [
    (lambda: r.tensor([True]) - r.tensor([1]), _ONE_BOOL),
    (lambda: r.tensor([1]) - r.tensor([True]), _ONE_BOOL),
    (lambda: r.tensor([True]) - 1, _ONE_BOOL),
    (lambda: 1 - r.tensor([True]), _ONE_BOOL),
    (lambda: r.tensor([1]) - True, _ONE_BOOL),              # True becomes a 0-d bool tensor
    (lambda: r.tensor([True]) - r.tensor([False]), _TWO_BOOLS),
], ids=["bool-int", "int-bool", "bool-number", "number-bool", "int-True", "bool-bool"])
def test_subtraction_with_bool_raises(fn, match):
    with pytest.raises(RuntimeError, match=match):
        fn()


@pytest.mark.parametrize("fn, exc, match", [
    (lambda: r.tensor([1., 2.]) & r.tensor([1., 2.]), NotImplementedError,
     "\"bitwise_and_cpu\" not implemented for 'Float'"),
    (lambda: r.gelu(r.tensor([1, 2])), NotImplementedError, "not implemented for 'Long'"),
    (lambda: r.tensor([1, 2]).softmax(0), NotImplementedError, "not implemented for 'Long'"),
    (lambda: r.tensor([True]).argmax(), RuntimeError, r"argmax\(\): does not support bool"),
    (lambda: r.tensor([1, 2]).norm(), RuntimeError, "Expected a floating point or complex tensor as input"),
], ids=["bitwise-float", "gelu-int", "softmax-int", "argmax-bool", "norm-int"])
def test_rejected_dtypes(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_floor_divide_has_no_derivative():
    x = r.tensor([1., 2.], requires_grad=True)
    y = (x // 1.5).sum()
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        y.backward()


# ---------------------------------------------------------------------------------------------
# repr
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, expected", [
    # max / min >= 1000: scientific notation
    (lambda: r.tensor([1., 1e5]), "tensor([1.0000e+00, 1.0000e+05])"),
    # nan and inf do not size the columns; 1. is an integral value
    (lambda: r.tensor([nan, inf, 1.]), "tensor([nan, inf, 1.])"),
    # over 1000 elements: 3 edge items each side, width from the shown values
    (lambda: r.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    # last line "        [0.5000, 0.2500, 0.1250, 0.0625]]" is 41 long, counted as 43 by torch:
    # 43 + 2 + len("dtype=rlpipe.float64") = 65 <= 80 stays; 65 + 2 + len("grad_fn=<MulBackward0>")
    # = 89 > 80 wraps, indented by len("tensor(") = 7
    (lambda: r.tensor([[0.5, 0.25, 0.125, 0.0625]] * 3, dtype=r.float64, requires_grad=True) * 1,
     "tensor([[0.5000, 0.2500, 0.1250, 0.0625],\n"
     "        [0.5000, 0.2500, 0.1250, 0.0625],\n"
     "        [0.5000, 0.2500, 0.1250, 0.0625]], dtype=rlpipe.float64,\n"
     "       grad_fn=<MulBackward0>)"),
    (lambda: r.tensor([[1., 3.], [2., 0.]]).max(1),
     "rlpipe.return_types.max(\nvalues=tensor([3., 2.]),\nindices=tensor([1, 0]))"),
], ids=["sci", "nan-inf", "summarized", "suffix-wrap", "max-return-type"])
def test_repr(make, expected):
    assert repr(make()) == expected


@pytest.mark.parametrize("dtype, name", [
    (r.float32, "rlpipe.FloatTensor"),
    (r.float64, "rlpipe.DoubleTensor"),
    (r.int64, "rlpipe.LongTensor"),
    (r.uint8, "rlpipe.ByteTensor"),
    (r.bool, "rlpipe.BoolTensor"),
])
def test_type_names(dtype, name):
    assert r.ones(2, dtype=dtype).type() == name
