"""``rlpipe.nn.functional`` against references written here in plain NumPy (naive loops where that is
the clearest statement of torch's definition), through ``gradcheck`` in float64, and torch's errors.
"""
import math
import warnings

import numpy as np
import pytest
import scipy.special as sp

import rlpipe as r
import rlpipe.nn.functional as F

TOL = {"float64": dict(rtol=1e-7, atol=1e-10), "float32": dict(rtol=1e-4, atol=1e-5)}


def T(a, dtype="float64", requires_grad=False):
    return r.tensor(np.asarray(a), dtype=getattr(r, dtype), requires_grad=requires_grad)


def as_array(x):
    return np.asarray(x.detach().numpy() if isinstance(x, r.Tensor) else x)


def close(actual, expected, precision="float64"):
    a, e = as_array(actual), as_array(expected)
    assert a.shape == e.shape, f"shape {a.shape}, expected {e.shape}"
    np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), equal_nan=True, **TOL[precision])


def gradcheck(fn, *arrays):
    """gradcheck of fn over float64 leaves made from ``arrays`` (None entries pass through as None)."""
    inputs = [None if a is None else T(a, requires_grad=True) for a in arrays]
    assert r.autograd.gradcheck(fn, inputs)


RNG = np.random.default_rng(1234)


def randn(*shape):
    return RNG.standard_normal(shape)


# ---- activations -------------------------------------------------------------------------------

# values away from every kink used below (0, +-1, 0.5, 6, -0.25)
X = np.array([[-2.7, -1.3, -0.4, 0.35, 0.1], [0.8, 1.6, 2.9, 6.5, -0.05]])
_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)


def _np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


ACTIVATIONS = [  # name, rlpipe function, NumPy reference
    ("relu", F.relu, lambda x: np.maximum(x, 0)),
    ("relu6", F.relu6, lambda x: np.clip(x, 0, 6)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("elu", F.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    ("elu_alpha", lambda x: F.elu(x, alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    ("selu", F.selu, lambda x: _SELU[1] * np.where(x > 0, x, _SELU[0] * np.expm1(x))),
    ("celu", lambda x: F.celu(x, 2.0), lambda x: np.maximum(x, 0) + np.minimum(0, 2.0 * np.expm1(x / 2.0))),
    ("silu", F.silu, lambda x: x / (1 + np.exp(-x))),
    ("mish", F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ("gelu", F.gelu, lambda x: 0.5 * x * (1 + sp.erf(x / math.sqrt(2)))),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("sigmoid", F.sigmoid, sp.expit),
    ("tanh", F.tanh, np.tanh),
    ("softplus", F.softplus, _np_softplus),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=3.0), lambda x: _np_softplus(x, 2.0, 3.0)),
    ("logsigmoid", F.logsigmoid, lambda x: -np.log1p(np.exp(-x))),
    ("hardtanh", F.hardtanh, lambda x: np.clip(x, -1, 1)),
    ("hardtanh_bounds", lambda x: F.hardtanh(x, -0.25, 2.0), lambda x: np.clip(x, -0.25, 2.0)),
    ("threshold", lambda x: F.threshold(x, 0.5, -3.0), lambda x: np.where(x > 0.5, x, -3.0)),
    ("hardsigmoid", F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hardswish", F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hardshrink", F.hardshrink, lambda x: np.where(np.abs(x) > 0.5, x, 0.0)),
    ("softshrink", lambda x: F.softshrink(x, 0.2), lambda x: np.sign(x) * np.maximum(np.abs(x) - 0.2, 0)),
    ("softsign", F.softsign, lambda x: x / (1 + np.abs(x))),
    ("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x)),
    ("rrelu_eval", F.rrelu, lambda x: np.where(x > 0, x, x * (1 / 8 + 1 / 3) / 2)),
    ("glu", lambda x: F.glu(x, 0), lambda x: x[:1] * sp.expit(x[1:])),
    ("softmax", lambda x: F.softmax(x, dim=1), lambda x: sp.softmax(x, axis=1)),
    ("softmax_dim0", lambda x: F.softmax(x, 0), lambda x: sp.softmax(x, axis=0)),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1), lambda x: sp.log_softmax(x, axis=-1)),
    ("softmin", lambda x: F.softmin(x, dim=1), lambda x: sp.softmax(-x, axis=1)),
    ("normalize", F.normalize, lambda x: x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)),
    ("normalize_p1_dim0", lambda x: F.normalize(x, p=1, dim=0),
     lambda x: x / np.maximum(np.abs(x).sum(0, keepdims=True), 1e-12)),
]


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("fn, ref", [pytest.param(f, g, id=n) for n, f, g in ACTIVATIONS])
def test_activation_values(fn, ref, precision):
    close(fn(T(X, precision)), ref(X), precision)


@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f, _ in ACTIVATIONS])
def test_activation_gradcheck(fn):
    gradcheck(fn, X)


def test_logsigmoid_and_softplus_stay_finite_for_large_inputs():
    x = T([-800.0, 800.0], requires_grad=True)
    y = F.logsigmoid(x)
    close(y, [-800.0, 0.0])
    y.sum().backward()
    close(x.grad, [1.0, 0.0])


@pytest.mark.parametrize("fn, values, grad", [
    (F.relu6, [0.0, 6.0, 3.0], [0.0, 0.0, 1.0]),
    (F.hardtanh, [-1.0, 1.0, 0.5], [0.0, 0.0, 1.0]),
    (lambda x: F.threshold(x, 0.5, 9.0), [0.5, 0.6], [0.0, 1.0]),
    (lambda x: F.elu(x, alpha=0.5), [0.0], [0.5]),
    (F.silu, [0.0], [0.5]),
    (F.mish, [0.0], [math.tanh(math.log(2))]),
    (F.hardsigmoid, [-3.0, 3.0, 0.0], [0.0, 0.0, 1 / 6]),
    (F.hardswish, [-3.0, 3.0, 4.0, -4.0], [-0.5, 1.5, 1.0, 0.0]),
    (F.hardshrink, [0.5, -0.5, 0.6], [0.0, 0.0, 1.0]),
    (F.softshrink, [0.5, -0.5, -0.6], [0.0, 0.0, 1.0]),
], ids=["relu6", "hardtanh", "threshold", "elu", "silu", "mish", "hardsigmoid", "hardswish", "hardshrink",
        "softshrink"])
def test_gradient_conventions_at_kinks(fn, values, grad):
    x = T(values, requires_grad=True)
    fn(x).sum().backward()
    close(x.grad, grad)


def test_rrelu_in_training_draws_one_slope_per_negative_element():
    r.manual_seed(0)
    x = T(np.where(RNG.random((100, 50)) < 0.5, -1.0, 1.0) * RNG.uniform(0.5, 2, (100, 50)), requires_grad=True)
    out = F.rrelu(x, 0.1, 0.3, training=True)
    slope = out.detach().numpy() / x.detach().numpy()
    negative = x.detach().numpy() < 0
    np.testing.assert_array_equal(slope[~negative], 1.0)
    assert slope[negative].min() >= 0.1 and slope[negative].max() <= 0.3
    assert slope[negative].mean() == pytest.approx(0.2, abs=0.005)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slope)


def test_glu_and_softshrink_errors():
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 5"):
        F.glu(T(X))
    with pytest.raises(RuntimeError, match="glu does not support scalars because halving size must be even"):
        F.glu(T(1.0))
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0, but found to be -1.0."):
        F.softshrink(T(X), -1.0)


def test_threshold_value_at_the_threshold():
    close(F.threshold(T([0.5, 0.6]), 0.5, 9.0), [9.0, 0.6])


@pytest.mark.parametrize("name, fn", [
    ("relu_", F.relu_), ("leaky_relu_", lambda x: F.leaky_relu_(x, 0.2)), ("elu_", F.elu_),
    ("hardtanh_", F.hardtanh_), ("threshold_", lambda x: F.threshold_(x, 0.5, -3.0)),
    ("relu_inplace", lambda x: F.relu(x, inplace=True)), ("silu_inplace", lambda x: F.silu(x, inplace=True)),
    ("hardswish_inplace", lambda x: F.hardswish(x, inplace=True)),
])
def test_inplace_variants_write_into_the_input_and_keep_the_graph(name, fn):
    out_of_place = {"relu_": F.relu, "leaky_relu_": lambda x: F.leaky_relu(x, 0.2), "elu_": F.elu,
                    "hardtanh_": F.hardtanh, "threshold_": lambda x: F.threshold(x, 0.5, -3.0),
                    "relu_inplace": F.relu, "silu_inplace": F.silu, "hardswish_inplace": F.hardswish}[name]
    leaf = T(X, requires_grad=True)
    h = leaf * 2.0
    out = fn(h)
    assert out is h
    out.sum().backward()
    leaf2 = T(X, requires_grad=True)
    out_of_place(leaf2 * 2.0).sum().backward()
    close(h, out_of_place(T(X) * 2.0))
    close(leaf.grad, leaf2.grad)


def test_inplace_on_a_leaf_that_requires_grad_raises():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        F.relu_(T(X, requires_grad=True))


def test_prelu_single_and_per_channel_weights():
    x = randn(3, 4, 2)
    for w in (np.array([0.25]), np.array([0.1, -0.3, 0.5, 2.0])):
        expected = np.where(x > 0, x, w.reshape(-1, 1) * x if w.size > 1 else w[0] * x)
        close(F.prelu(T(x), T(w)), expected)
        gradcheck(F.prelu, x, w)


def test_prelu_errors():
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size. Found parameter "
                                           "numbers = 3 and channel size = 4."):
        F.prelu(T(randn(2, 4)), T(randn(3)))
    with pytest.raises(RuntimeError, match="Expected `weight` to be a scalar or 1D tensor, but got: ndim = 2"):
        F.prelu(T(randn(2, 4)), T(randn(1, 4)))


def test_hardtanh_rejects_min_above_max():
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(T(X), 2.0, 1.0)


def test_softmax_without_dim_warns_and_picks_torchs_dim():
    x3 = randn(2, 3, 4)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        close(F.softmax(T(x3)), sp.softmax(x3, axis=0))
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        close(F.log_softmax(T(X)), sp.log_softmax(X, axis=1))


@pytest.mark.parametrize("name", ["elu", "silu", "mish"])
def test_float_only_activations_reject_integers(name):
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        getattr(F, name)(r.tensor([1, 2]))


# ---- linear, bilinear, one_hot -----------------------------------------------------------------

def test_linear_and_bilinear():
    x1, x2, w, b = randn(4, 3), randn(4, 2), randn(5, 3, 2), randn(5)
    expected = np.array([[x1[n] @ w[o] @ x2[n] + b[o] for o in range(5)] for n in range(4)])
    close(F.bilinear(T(x1), T(x2), T(w), T(b)), expected)
    gradcheck(F.bilinear, x1, x2, w, b)
    lw, lb = randn(2, 3), randn(2)
    close(F.linear(T(x1), T(lw), T(lb)), x1 @ lw.T + lb)


@pytest.mark.parametrize("args, message", [
    ((randn(4, 3), randn(4, 4, 2), randn(5, 3, 2)), "input dimensions do not match: got 2 and 3"),
    ((randn(4, 3), randn(3, 2), randn(5, 3, 2)), "input batch dimensions do not match: got 4 and 3"),
    ((randn(4, 3), randn(4, 2), randn(5, 4, 2)), "input1 size does not match weight size: got 3 but expected 4"),
    ((randn(4, 3), randn(4, 2), randn(5, 3, 2), randn(4)), "bias size does not match weight size: got 4 but "
                                                           "expected 5"),
])
def test_bilinear_errors(args, message):
    with pytest.raises(RuntimeError, match=message):
        F.bilinear(*[T(a) for a in args])


def test_one_hot():
    out = F.one_hot(r.tensor([2, 0]), 4)
    assert out.dtype is r.int64
    np.testing.assert_array_equal(out.numpy(), [[0, 0, 1, 0], [1, 0, 0, 0]])


@pytest.mark.parametrize("n", [1, 3, 64, 65, 300])
@pytest.mark.parametrize("shape", [(), (5,), (2, 40)])  # 80 indices: past the list check too
def test_one_hot_against_a_brute_force_reference(n, shape):
    rng = np.random.default_rng(n)
    values = rng.integers(0, n, shape)
    out = F.one_hot(r.tensor(values), n)
    expected = np.zeros(shape + (n,), np.int64)
    for index in np.ndindex(*shape):
        expected[index + (values[index],)] = 1
    np.testing.assert_array_equal(out.numpy(), expected)
    out.numpy()[...] = 7  # the result owns its memory: a cached table must not change
    np.testing.assert_array_equal(F.one_hot(r.tensor(values), n).numpy(), expected)
    inferred = F.one_hot(r.tensor(values))
    assert inferred.shape[-1] == values.max() + 1


@pytest.mark.parametrize("shape", [(), (80,)])
def test_one_hot_out_of_range(shape):
    for bad, message in [(-1, "non-negative"), (3, "smaller than num_classes")]:
        values = np.zeros(shape, np.int64)
        values[...] = 1
        values.reshape(-1)[-1] = bad
        with pytest.raises(RuntimeError, match=message):
            F.one_hot(r.tensor(values), 3)
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(r.tensor([1, 0], dtype=r.int32), 3)
    with pytest.raises(RuntimeError, match="empty tensor"):
        F.one_hot(r.tensor([], dtype=r.int64))
    assert F.one_hot(r.tensor([], dtype=r.int64), 3).shape == (0, 3)


# ---- conv2d ------------------------------------------------------------------------------------

def np_conv2d(x, w, b, stride, pads, dilation, groups):
    """Direct definition: out[n, o, i, j] = b[o] + sum over the group's channels and the kernel."""
    n_, c, h, wd = x.shape
    o_, cg, kh, kw = w.shape
    top, bottom, left, right = pads
    xp = np.zeros((n_, c, h + top + bottom, wd + left + right))
    xp[:, :, top:top + h, left:left + wd] = x
    oh = (xp.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n_, o_, oh, ow))
    per_group = o_ // groups
    for n in range(n_):
        for o in range(o_):
            g = o // per_group
            for i in range(oh):
                for j in range(ow):
                    rows = i * stride[0] + dilation[0] * np.arange(kh)
                    cols = j * stride[1] + dilation[1] * np.arange(kw)
                    window = xp[n, g * cg:(g + 1) * cg][:, rows][:, :, cols]
                    out[n, o, i, j] = (window * w[o]).sum() + (0 if b is None else b[o])
    return out


CONVS = [  # id, x shape, w shape, bias, kwargs, (stride, pads, dilation) of the reference
    ("plain", (2, 3, 6, 5), (4, 3, 3, 3), True, {}, ((1, 1), (0, 0, 0, 0), (1, 1))),
    ("stride_pad", (2, 3, 7, 6), (4, 3, 3, 2), True, dict(stride=2, padding=1), ((2, 2), (1, 1, 1, 1), (1, 1))),
    ("tuple_args", (1, 2, 8, 7), (3, 2, 3, 3), False, dict(stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
     ((2, 1), (0, 0, 2, 2), (1, 2))),
    ("dilation", (2, 2, 9, 9), (2, 2, 3, 3), True, dict(dilation=2, padding=2), ((1, 1), (2, 2, 2, 2), (2, 2))),
    ("groups", (2, 4, 5, 5), (6, 2, 3, 3), True, dict(groups=2, padding=1), ((1, 1), (1, 1, 1, 1), (1, 1))),
    ("depthwise", (2, 3, 5, 6), (3, 1, 3, 3), True, dict(groups=3, stride=2), ((2, 2), (0, 0, 0, 0), (1, 1))),
    ("same_odd", (1, 2, 5, 6), (3, 2, 3, 3), True, dict(padding="same"), ((1, 1), (1, 1, 1, 1), (1, 1))),
    ("same_even", (1, 2, 5, 6), (3, 2, 4, 2), True, dict(padding="same"), ((1, 1), (1, 2, 0, 1), (1, 1))),
    ("same_dilated", (1, 2, 7, 7), (2, 2, 2, 3), False, dict(padding="same", dilation=3),
     ((1, 1), (1, 2, 3, 3), (3, 3))),
    ("valid", (2, 2, 5, 5), (2, 2, 2, 2), True, dict(padding="valid"), ((1, 1), (0, 0, 0, 0), (1, 1))),
    ("one_by_one", (3, 4, 3, 3), (5, 4, 1, 1), True, {}, ((1, 1), (0, 0, 0, 0), (1, 1))),
]


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("xs, ws, bias, kwargs, ref_args", [pytest.param(*c[1:], id=c[0]) for c in CONVS])
def test_conv2d_matches_direct_definition(xs, ws, bias, kwargs, ref_args, precision):
    x, w = randn(*xs), randn(*ws)
    b = randn(ws[0]) if bias else None
    groups = kwargs.get("groups", 1)
    expected = np_conv2d(x, w, b, *ref_args, groups)
    out = F.conv2d(T(x, precision), T(w, precision), None if b is None else T(b, precision), **kwargs)
    close(out, expected, precision)


@pytest.mark.parametrize("xs, ws, kwargs", [
    ((2, 2, 5, 4), (3, 2, 3, 2), dict(stride=(2, 1), padding=1)),
    ((1, 4, 5, 5), (4, 2, 2, 3), dict(groups=2, dilation=(2, 1), padding="same")),
], ids=["stride_pad", "groups_dilation_same"])
def test_conv2d_gradcheck(xs, ws, kwargs):
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, **kwargs), randn(*xs), randn(*ws), randn(ws[0]))


def test_conv2d_unbatched_input_and_partial_grads():
    x, w = randn(2, 5, 5), randn(3, 2, 3, 3)
    out = F.conv2d(T(x), T(w))
    close(out, np_conv2d(x[None], w, None, (1, 1), (0, 0, 0, 0), (1, 1), 1)[0])
    gradcheck(lambda a: F.conv2d(a, T(w), padding=1), x)  # input only
    gradcheck(lambda a: F.conv2d(T(x), a, stride=2), w)   # weight only


@pytest.mark.parametrize("call, message", [
    (lambda: F.conv2d(T(randn(1, 4, 5, 5)), T(randn(8, 3, 3, 3))),
     r"Given groups=1, weight of size \[8, 3, 3, 3\], expected input\[1, 4, 5, 5\] to have 3 channels, but got 4 "
     r"channels instead"),
    (lambda: F.conv2d(T(randn(1, 4, 5, 5)), T(randn(3, 2, 3, 3)), groups=2),
     r"Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size \[3, 2, 3, 3\]"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3)), T(randn(4))),
     r"expected bias to be 1-dimensional with 8 elements, but got bias of size \[4\] instead"),
    (lambda: F.conv2d(T(randn(3, 5)), T(randn(8, 3, 3, 3))),
     r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: \[3, 5\]"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3)), stride=2, padding="same"),
     "padding='same' is not supported for strided convolutions"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3)), padding="full"), "Invalid padding string: 'full'"),
    (lambda: F.conv2d(T(randn(1, 3, 2, 2)), T(randn(8, 3, 3, 3))),
     r"Calculated padded input size per channel: \(2 x 2\). Kernel size: \(3 x 3\). Kernel size can't be greater"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3)), padding=-1), "negative padding is not supported"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3)), stride=0), "non-positive stride is not supported"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3)), stride=(1, 1, 1)),
     r"expected stride to be a single integer value or a list of 2 values to match the convolution dimensions, "
     r"but got stride=\[1, 1, 1\]"),
    (lambda: F.conv2d(T(randn(1, 3, 5, 5)), T(randn(8, 3, 3, 3), "float32")),
     r"Input type \(rlpipe.DoubleTensor\) and weight type \(rlpipe.FloatTensor\) should be the same"),
], ids=["channels", "groups", "bias", "input_dims", "same_strided", "padding_string", "kernel_too_big",
        "negative_padding", "zero_stride", "stride_length", "dtype"])
def test_conv2d_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---- pooling -----------------------------------------------------------------------------------

def _pool_out(size, k, s, p, d, ceil_mode):
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window must start inside the input or left padding
        out -= 1
    return out


def np_max_pool2d(x, k, s, p, d, ceil_mode):
    """Each output: the max over its window's in-bounds positions, and the first such position's h * W + w."""
    n_, c, h, w = x.shape
    oh, ow = _pool_out(h, k[0], s[0], p[0], d[0], ceil_mode), _pool_out(w, k[1], s[1], p[1], d[1], ceil_mode)
    out, idx = np.zeros((n_, c, oh, ow)), np.zeros((n_, c, oh, ow), dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            pos = [(i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]) for a in range(k[0]) for b in range(k[1])]
            pos = [(u, v) for u, v in pos if 0 <= u < h and 0 <= v < w]
            vals = np.stack([x[:, :, u, v] for u, v in pos], -1)
            best = vals.argmax(-1)
            out[:, :, i, j] = vals.max(-1)
            idx[:, :, i, j] = np.array([u * w + v for u, v in pos])[best]
    return out, idx


def np_avg_pool2d(x, k, s, p, ceil_mode, count_include_pad, divisor_override=None):
    """Each output: the sum of its window's in-bounds values over the divisor torch documents."""
    n_, c, h, w = x.shape
    oh, ow = _pool_out(h, k[0], s[0], p[0], 1, ceil_mode), _pool_out(w, k[1], s[1], p[1], 1, ceil_mode)
    out = np.zeros((n_, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])  # clipped to the padded input
            inside = x[:, :, max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
            if divisor_override:
                divisor = divisor_override
            elif count_include_pad:
                divisor = (h1 - h0) * (w1 - w0)
            else:
                divisor = inside.shape[2] * inside.shape[3]
            out[:, :, i, j] = inside.sum((2, 3)) / divisor
    return out


def distinct(*shape):
    """Values with no ties (so max-pool gradients are well defined), shuffled."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) / n * 4 - 2).reshape(shape)


MAX_POOLS = [  # id, x shape, kwargs, (kernel, stride, padding, dilation, ceil_mode)
    ("k2", (2, 3, 6, 6), dict(kernel_size=2), ((2, 2), (2, 2), (0, 0), (1, 1), False)),
    ("k3_s2_p1", (1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1), ((3, 3), (2, 2), (1, 1), (1, 1), False)),
    ("ceil", (1, 2, 7, 7), dict(kernel_size=2, stride=2, ceil_mode=True), ((2, 2), (2, 2), (0, 0), (1, 1), True)),
    ("ceil_pad", (1, 1, 6, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
     ((3, 3), (2, 2), (1, 1), (1, 1), True)),
    ("ceil_drops_window_in_padding", (1, 2, 5, 9), dict(kernel_size=2, stride=4, padding=1, ceil_mode=True),
     ((2, 2), (4, 4), (1, 1), (1, 1), True)),
    ("dilation", (1, 2, 8, 7), dict(kernel_size=(2, 3), stride=1, dilation=(3, 2)),
     ((2, 3), (1, 1), (0, 0), (3, 2), False)),
    ("rect", (2, 1, 5, 9), dict(kernel_size=(3, 2), stride=(1, 3), padding=(1, 0)),
     ((3, 2), (1, 3), (1, 0), (1, 1), False)),
]


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("shape, kwargs, ref_args", [pytest.param(*c[1:], id=c[0]) for c in MAX_POOLS])
def test_max_pool2d_values_and_indices(shape, kwargs, ref_args, precision):
    x = distinct(*shape)
    expected, expected_idx = np_max_pool2d(x, *ref_args)
    out, idx = F.max_pool2d(T(x, precision), **kwargs, return_indices=True)
    close(out, expected, precision)
    assert idx.dtype is r.int64
    np.testing.assert_array_equal(idx.numpy(), expected_idx)
    close(F.max_pool2d(T(x, precision), **kwargs), expected, precision)


@pytest.mark.parametrize("shape, kwargs", [pytest.param(c[1], c[2], id=c[0]) for c in MAX_POOLS[1:6]])
def test_max_pool2d_gradcheck(shape, kwargs):
    gradcheck(lambda x: F.max_pool2d(x, **kwargs), distinct(*shape))


def test_max_pool2d_gradient_of_overlapping_windows_accumulates():
    x = T([[[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]], requires_grad=True)
    F.max_pool2d(x, 2, stride=1).sum().backward()  # the 1 is the max of both upper windows
    close(x.grad[0, 0, 0], [0.0, 2.0, 0.0])


def test_max_pool2d_unbatched_and_nan():
    x = distinct(2, 4, 4)
    out, idx = F.max_pool2d(T(x), 2, return_indices=True)
    ref, ref_idx = np_max_pool2d(x[None], (2, 2), (2, 2), (0, 0), (1, 1), False)
    close(out, ref[0])
    np.testing.assert_array_equal(idx.numpy(), ref_idx[0])
    x[0, 0, 1] = np.nan
    assert math.isnan(F.max_pool2d(T(x), 2)[0, 0, 0].item())  # nan propagates, as in torch


AVG_POOLS = [  # id, x shape, kwargs, reference args
    ("k2", (2, 3, 6, 6), dict(kernel_size=2), ((2, 2), (2, 2), (0, 0), False, True)),
    ("pad_include", (1, 2, 5, 6), dict(kernel_size=3, stride=2, padding=1), ((3, 3), (2, 2), (1, 1), False, True)),
    ("pad_exclude", (1, 2, 5, 6), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
     ((3, 3), (2, 2), (1, 1), False, False)),
    ("ceil_include", (1, 1, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
     ((3, 3), (2, 2), (1, 1), True, True)),
    ("ceil_exclude", (1, 1, 6, 7), dict(kernel_size=(2, 3), stride=2, ceil_mode=True, count_include_pad=False),
     ((2, 3), (2, 2), (0, 0), True, False)),
    ("ceil_drops_window_in_padding", (1, 2, 5, 9), dict(kernel_size=2, stride=4, padding=1, ceil_mode=True),
     ((2, 2), (4, 4), (1, 1), True, True)),
    ("divisor", (2, 1, 5, 5), dict(kernel_size=2, stride=1, padding=1, divisor_override=3),
     ((2, 2), (1, 1), (1, 1), False, True, 3)),
]


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("shape, kwargs, ref_args", [pytest.param(*c[1:], id=c[0]) for c in AVG_POOLS])
def test_avg_pool2d_matches_definition(shape, kwargs, ref_args, precision):
    x = randn(*shape)
    close(F.avg_pool2d(T(x, precision), **kwargs), np_avg_pool2d(x, *ref_args), precision)


@pytest.mark.parametrize("shape, kwargs", [pytest.param(c[1], c[2], id=c[0]) for c in AVG_POOLS[2:]])
def test_avg_pool2d_gradcheck(shape, kwargs):
    gradcheck(lambda x: F.avg_pool2d(x, **kwargs), randn(*shape))


def test_avg_pool2d_unbatched():
    x = randn(3, 4, 4)
    close(F.avg_pool2d(T(x), 2), np_avg_pool2d(x[None], (2, 2), (2, 2), (0, 0), False, True)[0])


@pytest.mark.parametrize("call, message", [
    (lambda: F.max_pool2d(T(randn(1, 1, 5, 5)), 3, padding=2),
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3 and dilation=1"),
    (lambda: F.max_pool2d(T(randn(1, 1, 8, 8)), 3, padding=2, dilation=2),
     "pad should be smaller than or equal to half of kernel size, but got padW = 2, padH = 2, kW = 3, kH = 3"),
    (lambda: F.max_pool2d(T(randn(1, 3, 2, 2)), 3),
     r"Given input size: \(3x2x2\). Calculated output size: \(3x0x0\). Output size is too small"),
    (lambda: F.max_pool2d(T(randn(1, 1, 4, 4)), 2, stride=0), "stride should not be zero"),
    (lambda: F.max_pool2d(T(randn(1, 1, 4, 4)), (2, 2, 2)),
     "max_pool2d: kernel_size must either be a single int, or a tuple of two ints"),
    (lambda: F.max_pool2d(T(randn(4, 4)), 2),
     r"Expected 3D or 4D \(batch mode\) tensor with optional 0 dim batch size for input"),
    (lambda: F.avg_pool2d(T(randn(1, 1, 4, 4)), 2, divisor_override=0), "divisor must be not zero"),
    (lambda: F.avg_pool2d(T(randn(1, 1, 4, 4)), 2, stride=(1, 1, 1)),
     "avg_pool2d: stride must either be omitted, a single int, or a tuple of two ints"),
], ids=["pad_half", "pad_half_dilated", "too_small", "stride_zero", "kernel_len", "dims", "divisor", "stride_len"])
def test_pool_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---- pad ---------------------------------------------------------------------------------------

def np_pad_args(pad, ndim):
    """torch's pad list (last dim first) as np.pad's per-dim pairs."""
    pairs = [(0, 0)] * ndim
    for i in range(len(pad) // 2):
        pairs[ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return pairs


PADS = [  # id, x shape, pad, mode, np.pad mode
    ("constant_last", (2, 3), (1, 2), "constant", "constant"),
    ("constant_3dims", (2, 3, 4), (1, 0, 2, 1, 0, 1), "constant", "constant"),
    ("reflect_1d", (2, 5), (2, 3), "reflect", "reflect"),
    ("reflect_2d", (1, 2, 4, 5), (1, 2, 3, 1), "reflect", "reflect"),
    ("replicate_2d", (1, 2, 3, 4), (2, 3, 4, 1), "replicate", "edge"),
    ("replicate_3d", (1, 1, 2, 3, 2), (1, 1, 2, 0, 1, 2), "replicate", "edge"),
    ("circular_2d", (1, 2, 3, 4), (2, 1, 3, 3), "circular", "wrap"),
]


@pytest.mark.parametrize("shape, pad, mode, np_mode", [pytest.param(*c[1:], id=c[0]) for c in PADS])
def test_pad_matches_numpy(shape, pad, mode, np_mode):
    x = randn(*shape)
    close(F.pad(T(x), pad, mode), np.pad(x, np_pad_args(pad, x.ndim), mode=np_mode))
    gradcheck(lambda a: F.pad(a, pad, mode), x)


def test_pad_constant_value_and_negative_padding_crops():
    x = randn(3, 4)
    close(F.pad(T(x), (1, 1), value=2.5), np.pad(x, [(0, 0), (1, 1)], constant_values=2.5))
    close(F.pad(T(x), (-1, 2, 0, -2)), np.pad(x[:1, 1:], [(0, 0), (0, 2)]))
    gradcheck(lambda a: F.pad(a, (-1, 2, 1, -1), value=-1.0), x)


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.pad(T(randn(2, 3)), (1, 2, 3)), RuntimeError, "Padding length must be divisible by 2"),
    (lambda: F.pad(T(randn(3)), (1, 1, 1, 1)), RuntimeError, "Padding length should be less than or equal to two "
                                                             "times the input dimension"),
    (lambda: F.pad(T(randn(1, 3)), (3, 0), "reflect"), RuntimeError,
     r"Padding size should be less than the corresponding input dimension, but got: padding \(3, 0\) at dimension 1"),
    (lambda: F.pad(T(randn(1, 3)), (1, 0), "reflect", 1.0), RuntimeError,
     "Padding mode \"reflect\" doesn't take in value argument"),
    (lambda: F.pad(T(randn(3)), (1, 0), "replicate"), NotImplementedError,
     "Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now"),
    (lambda: F.pad(T(randn(1, 3)), (4, 0), "circular"), RuntimeError,
     "Padding value causes wrapping around more than once."),
    (lambda: F.pad(T(randn(2, 3)), (-2, -2)), RuntimeError,
     "The input size 3, plus negative padding -2 and -2 resulted in a negative output size"),
], ids=["odd", "too_long", "reflect_size", "reflect_value", "dims", "circular", "negative"])
def test_pad_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---- normalization -----------------------------------------------------------------------------

def np_normalize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_layer_norm_values(precision):
    x, w, b = randn(3, 2, 4), randn(2, 4), randn(2, 4)
    close(F.layer_norm(T(x, precision), (2, 4), T(w, precision), T(b, precision), eps=1e-3),
          np_normalize(x, (1, 2), 1e-3) * w + b, precision)
    close(F.layer_norm(T(x, precision), 4), np_normalize(x, (2,), 1e-5), precision)


def test_layer_norm_gradcheck():
    gradcheck(lambda x, w, b: F.layer_norm(x, (3,), w, b), randn(4, 3), randn(3), randn(3))
    gradcheck(lambda x, w: F.layer_norm(x, (2, 3), w), randn(2, 2, 3), randn(2, 3))
    gradcheck(lambda x: F.layer_norm(x, 5), randn(2, 5))


def test_layer_norm_errors():
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but "
                                           r"got input of size\[2, 3\]"):
        F.layer_norm(T(randn(2, 3)), (4,))
    with pytest.raises(RuntimeError, match=r"Expected weight to be of same shape as normalized_shape, but got weight "
                                           r"of shape \[2\] and normalized_shape = \[3\]"):
        F.layer_norm(T(randn(2, 3)), (3,), T(randn(2)))


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 2, 2)])
def test_batch_norm_training_values_and_running_stats(shape):
    x, w, b = randn(*shape), randn(3), randn(3)
    axes = (0,) + tuple(range(2, len(shape)))
    view = (1, 3) + (1,) * (len(shape) - 2)
    rm, rv = randn(3), np.abs(randn(3)) + 0.5
    running_mean, running_var = T(rm), T(rv)
    out = F.batch_norm(T(x), running_mean, running_var, T(w), T(b), training=True, momentum=0.2, eps=1e-4)
    close(out, np_normalize(x, axes, 1e-4) * w.reshape(view) + b.reshape(view))
    close(running_mean, 0.8 * rm + 0.2 * x.mean(axis=axes))
    close(running_var, 0.8 * rv + 0.2 * x.var(axis=axes, ddof=1))  # the unbiased variance, as torch keeps


def test_batch_norm_eval_uses_running_stats():
    x, w, b, rm, rv = randn(4, 3, 2), randn(3), randn(3), randn(3), np.abs(randn(3)) + 0.5
    out = F.batch_norm(T(x), T(rm), T(rv), T(w), T(b), training=False, eps=1e-3)
    close(out, (x - rm[:, None]) / np.sqrt(rv[:, None] + 1e-3) * w[:, None] + b[:, None])
    gradcheck(lambda a, c, d: F.batch_norm(a, T(rm), T(rv), c, d), x, w, b)


def test_batch_norm_gradcheck_in_training():
    gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), randn(3, 2, 2), randn(2), randn(2))
    gradcheck(lambda x: F.batch_norm(x, None, None, training=True), randn(4, 3))


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size "
                                         r"rlpipe.Size\(\[1, 3\]\)"):
        F.batch_norm(T(randn(1, 3)), None, None, training=True)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(T(randn(2, 3)), T(randn(4)), T(randn(3)))
    with pytest.raises(RuntimeError, match="must be defined in evaluation mode"):
        F.batch_norm(T(randn(2, 3)), None, None, training=False)


# ---- dropout -----------------------------------------------------------------------------------

def test_dropout_zeroes_about_p_and_scales_the_rest():
    r.manual_seed(0)
    x = T(np.full((200, 100), 2.0), "float32", requires_grad=True)
    out = F.dropout(x, p=0.3)
    values = out.detach().numpy()
    kept = values != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(values[kept], 2.0 / 0.7, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.7, rtol=1e-6)


def test_dropout_identity_cases_and_p_one():
    x = T(randn(3, 4))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    close(F.dropout(x, 1.0), np.zeros((3, 4)))


def test_dropout_inplace():
    r.manual_seed(1)
    x = T(np.ones((50, 50)))
    out = F.dropout(x, 0.5, inplace=True)
    assert out is x
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_rejects_bad_probabilities(p):
    with pytest.raises(ValueError, match=f"dropout probability has to be between 0 and 1, but got {p}"):
        F.dropout(T(randn(2)), p)


# ---- embedding ---------------------------------------------------------------------------------

def test_embedding_rows_and_gradient():
    w = randn(5, 3)
    idx = r.tensor([[1, 3, 1], [0, 4, 1]])
    weight = T(w, requires_grad=True)
    out = F.embedding(idx, weight)
    close(out, w[idx.numpy()])
    out.sum().backward()
    close(weight.grad, np.array([1, 3, 0, 1, 1])[:, None] * np.ones((5, 3)))
    gradcheck(lambda a: F.embedding(idx, a), w)


@pytest.mark.parametrize("padding_idx, row", [(1, 1), (-1, 4)])
def test_embedding_padding_idx_gets_no_gradient(padding_idx, row):
    weight = T(randn(5, 2), requires_grad=True)
    F.embedding(r.tensor([1, 4, 2, 1]), weight, padding_idx=padding_idx).sum().backward()
    assert np.all(weight.grad.numpy()[row] == 0)
    assert np.all(weight.grad.numpy()[2] == 1)


def test_embedding_scale_grad_by_freq_and_max_norm():
    weight = T(randn(4, 2), requires_grad=True)
    F.embedding(r.tensor([1, 1, 1, 2]), weight, scale_grad_by_freq=True).sum().backward()
    close(weight.grad, [[0, 0], [1, 1], [1, 1], [0, 0]])
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    weight = T(w)
    out = F.embedding(r.tensor([0, 1]), weight, max_norm=1.0)
    close(weight[:2], [[0.6, 0.8], [0.3, 0.4]])  # only looked-up rows above max_norm are rescaled in place
    close(weight[2], [6.0, 8.0])
    close(out, [[0.6, 0.8], [0.3, 0.4]])


def test_embedding_errors():
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices' to have one of the following "
                                           "scalar types: Long, Int; but got rlpipe.FloatTensor instead"):
        F.embedding(r.tensor([1.0]), T(randn(3, 2)))
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(r.tensor([3]), T(randn(3, 2)))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(r.tensor([0]), T(randn(3, 2)), padding_idx=3)


# ---- regression losses -------------------------------------------------------------------------

def np_reduce(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def _smooth_l1(d, beta):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)


def _huber(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * a * a, delta * (a - 0.5 * delta))


REGRESSION = [  # id, rlpipe loss(input, target, reduction), NumPy elementwise loss(difference)
    ("mse", lambda x, t, red: F.mse_loss(x, t, reduction=red), lambda d: d * d),
    ("l1", lambda x, t, red: F.l1_loss(x, t, reduction=red), np.abs),
    ("smooth_l1", lambda x, t, red: F.smooth_l1_loss(x, t, reduction=red), lambda d: _smooth_l1(d, 1.0)),
    ("smooth_l1_beta", lambda x, t, red: F.smooth_l1_loss(x, t, reduction=red, beta=0.4), lambda d: _smooth_l1(d, 0.4)),
    ("smooth_l1_beta0", lambda x, t, red: F.smooth_l1_loss(x, t, reduction=red, beta=0.0), np.abs),
    ("huber", lambda x, t, red: F.huber_loss(x, t, reduction=red), lambda d: _huber(d, 1.0)),
    ("huber_delta", lambda x, t, red: F.huber_loss(x, t, reduction=red, delta=0.3), lambda d: _huber(d, 0.3)),
]
REDUCTIONS = ["none", "mean", "sum"]
XR, TR = randn(3, 4) * 1.5, randn(3, 4)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("loss, ref", [pytest.param(f, g, id=n) for n, f, g in REGRESSION])
def test_regression_losses(loss, ref, reduction):
    close(loss(T(XR), T(TR), reduction), np_reduce(ref(XR - TR), reduction))
    close(loss(T(XR, "float32"), T(TR, "float32"), reduction), np_reduce(ref(XR - TR), reduction), "float32")
    gradcheck(lambda x, t: loss(x, t, reduction), XR, TR)


def test_regression_loss_broadcasting_warns_and_mismatch_raises():
    with pytest.warns(UserWarning, match=r"Using a target size \(rlpipe.Size\(\[3, 1\]\)\) that is different to the "
                                         r"input size \(rlpipe.Size\(\[3\]\)\)"):
        out = F.mse_loss(T([1.0, 2.0, 3.0]), T([[1.0], [2.0], [3.0]]))
    close(out, np.mean((np.array([1.0, 2, 3]) - np.array([[1.0], [2], [3]])) ** 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            F.l1_loss(T(randn(3)), T(randn(2)))


def test_loss_argument_errors():
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        F.mse_loss(T(XR), T(TR), reduction="avg")
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta."):
        F.smooth_l1_loss(T(XR), T(TR), beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta."):
        F.huber_loss(T(XR), T(TR), delta=0.0)


def test_legacy_size_average_and_reduce():
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, please use "
                                         "reduction='sum' instead."):
        out = F.mse_loss(T(XR), T(TR), size_average=False)
    close(out, ((XR - TR) ** 2).sum())
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert F.l1_loss(T(XR), T(TR), reduce=False).shape == (3, 4)


# ---- binary cross-entropy ----------------------------------------------------------------------

P = sp.expit(randn(3, 4))
TB = RNG.uniform(0, 1, (3, 4))
WB = RNG.uniform(0.5, 2, (4,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    loss = -(TB * np.log(P) + (1 - TB) * np.log(1 - P))
    close(F.binary_cross_entropy(T(P), T(TB), reduction=reduction), np_reduce(loss, reduction))
    close(F.binary_cross_entropy(T(P), T(TB), T(WB), reduction=reduction), np_reduce(loss * WB, reduction))
    gradcheck(lambda p, t, w: F.binary_cross_entropy(p, t, w, reduction=reduction), P, TB, WB)


def test_binary_cross_entropy_clamps_logs_at_minus_100():
    p, t = T([0.0, 1.0, 0.0, 1.0], requires_grad=True), T([1.0, 0.0, 0.0, 1.0])
    loss = F.binary_cross_entropy(p, t, reduction="none")
    close(loss, [100.0, 100.0, 0.0, 0.0])
    loss.sum().backward()
    # torch's gradient w (p - t) / max(p (1 - p), 1e-12)
    close(p.grad, [-1e12, 1e12, 0.0, 0.0])


def test_binary_cross_entropy_errors():
    with pytest.raises(ValueError, match=r"Using a target size \(rlpipe.Size\(\[3, 1\]\)\) that is different to the "
                                         r"input size \(rlpipe.Size\(\[3\]\)\) is deprecated"):
        F.binary_cross_entropy(T([0.5, 0.5, 0.5]), T([[1.0], [0.0], [1.0]]))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(T([1.5, 0.5]), T([1.0, 0.0]))


LOGITS = randn(3, 4) * 3
POS_WEIGHT = RNG.uniform(0.5, 3, (4,))


def np_bce_logits(x, t, w=None, pw=None):
    """torch's stable form: (1 - t) x + (1 + (pw - 1) t) (log(1 + exp(-|x|)) + max(-x, 0))."""
    log_weight = 1 if pw is None else 1 + (pw - 1) * t
    loss = (1 - t) * x + log_weight * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))
    return loss if w is None else loss * w


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    close(F.binary_cross_entropy_with_logits(T(LOGITS), T(TB), reduction=reduction),
          np_reduce(np_bce_logits(LOGITS, TB), reduction))
    close(F.binary_cross_entropy_with_logits(T(LOGITS), T(TB), T(WB), reduction=reduction, pos_weight=T(POS_WEIGHT)),
          np_reduce(np_bce_logits(LOGITS, TB, WB, POS_WEIGHT), reduction))
    # the same loss as binary_cross_entropy on the probabilities
    close(F.binary_cross_entropy_with_logits(T(LOGITS), T(TB), reduction=reduction),
          F.binary_cross_entropy(T(sp.expit(LOGITS)), T(TB), reduction=reduction))
    gradcheck(lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction=reduction, pos_weight=pw),
              LOGITS, TB, WB, POS_WEIGHT)


def test_binary_cross_entropy_with_logits_is_stable_for_large_logits():
    x = T([-500.0, 500.0, 0.0], requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, T([1.0, 0.0, 1.0]), reduction="none")
    close(loss, [500.0, 500.0, math.log(2)])
    loss.sum().backward()
    close(x.grad, [-1.0, 1.0, -0.5])  # sigmoid(x) - t


def test_binary_cross_entropy_with_logits_shape_error():
    with pytest.raises(ValueError, match=r"Target size \(rlpipe.Size\(\[2, 1\]\)\) must be the same as input size "
                                         r"\(rlpipe.Size\(\[2\]\)\)"):
        F.binary_cross_entropy_with_logits(T([0.1, 0.2]), T([[1.0], [0.0]]))


# ---- cross-entropy and nll ---------------------------------------------------------------------

def np_cross_entropy(x, target, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0, logits=True):
    """torch's documented class-index loss, one sample at a time. x [N, C] (or [N, C, *]: the extra dims
    are moved into the batch), target [N] (or [N, *])."""
    c = x.shape[1]
    x = np.moveaxis(x, 1, -1).reshape(-1, c)
    target = target.reshape(-1)
    w = np.ones(c) if weight is None else weight
    logp = sp.log_softmax(x, axis=1) if logits else x
    losses, weights = [], []
    for row, t in zip(logp, target):
        if t == ignore_index:
            losses.append(0.0)
            weights.append(0.0)
            continue
        nll = -w[t] * row[t]
        smooth = -(w * row).sum()
        losses.append((1 - smoothing) * nll + smoothing / c * smooth)
        weights.append(w[t])
    losses, weights = np.array(losses), np.array(weights)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / weights.sum()


XC = randn(5, 4) * 2
TC = np.array([1, 0, 3, 3, 2])
TC_IGNORED = np.array([1, -100, 3, 7, 2])  # 7 is ignored below via ignore_index=7
WC = RNG.uniform(0.2, 2, 4)

CE_CASES = [  # id, kwargs, reference kwargs, target
    ("plain", {}, {}, TC),
    ("weight", dict(weight=WC), dict(weight=WC), TC),
    ("ignore_default", {}, {}, np.array([1, -100, 3, 0, -100])),
    ("ignore_index", dict(ignore_index=3, weight=WC), dict(ignore_index=3, weight=WC), TC),
    ("smoothing", dict(label_smoothing=0.2), dict(smoothing=0.2), TC),
    ("smoothing_weight_ignore", dict(label_smoothing=0.3, weight=WC, ignore_index=0),
     dict(smoothing=0.3, weight=WC, ignore_index=0), TC),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs, ref_kwargs, target", [pytest.param(*c[1:], id=c[0]) for c in CE_CASES])
def test_cross_entropy_class_indices(kwargs, ref_kwargs, target, reduction):
    kw = {k: T(v) if k == "weight" else v for k, v in kwargs.items()}
    expected = np_cross_entropy(XC, target, reduction=reduction, **ref_kwargs)
    close(F.cross_entropy(T(XC), r.tensor(target), reduction=reduction, **kw), expected)
    kw32 = {k: T(v, "float32") if k == "weight" else v for k, v in kwargs.items()}
    close(F.cross_entropy(T(XC, "float32"), r.tensor(target), reduction=reduction, **kw32), expected, "float32")
    gradcheck(lambda x: F.cross_entropy(x, r.tensor(target), reduction=reduction, **kw), XC)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial_and_unbatched(reduction):
    x = randn(2, 3, 2, 2)
    t = RNG.integers(0, 3, (2, 2, 2))
    t[0, 1, 0] = -100
    expected = np_cross_entropy(x, t, weight=WC[:3], reduction=reduction, smoothing=0.1)
    out = F.cross_entropy(T(x), r.tensor(t), T(WC[:3]), reduction=reduction, label_smoothing=0.1)
    close(out, expected.reshape(2, 2, 2) if reduction == "none" else expected)
    gradcheck(lambda a: F.cross_entropy(a, r.tensor(t), reduction=reduction), x)
    one = F.cross_entropy(T(XC[0]), r.tensor(2), reduction=reduction)
    assert one.shape == ()
    close(one, np_cross_entropy(XC[:1], np.array([2]), reduction="sum"))


def np_soft_cross_entropy(x, probs, weight=None, reduction="mean", smoothing=0.0):
    c = x.shape[1]
    probs = probs * (1 - smoothing) + smoothing / c
    w = np.ones(c) if weight is None else weight
    per_sample = -(sp.log_softmax(x, axis=1) * probs * w).sum(1)
    return {"none": per_sample, "sum": per_sample.sum(), "mean": per_sample.sum() / x.shape[0]}[reduction]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_class_probabilities(reduction):
    probs = sp.softmax(randn(5, 4), axis=1)
    close(F.cross_entropy(T(XC), T(probs), reduction=reduction), np_soft_cross_entropy(XC, probs, reduction=reduction))
    close(F.cross_entropy(T(XC), T(probs), T(WC), reduction=reduction, label_smoothing=0.25),
          np_soft_cross_entropy(XC, probs, WC, reduction, 0.25))
    gradcheck(lambda x, p: F.cross_entropy(x, p, T(WC), reduction=reduction, label_smoothing=0.1), XC, probs)


def test_cross_entropy_all_ignored_mean_is_nan():
    out = F.cross_entropy(T(XC[:2]), r.tensor([-100, -100]))
    assert math.isnan(out.item())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(reduction):
    logp = sp.log_softmax(XC, axis=1)
    for kwargs in ({}, dict(weight=WC), dict(weight=WC, ignore_index=3)):
        kw = {k: T(v) if k == "weight" else v for k, v in kwargs.items()}
        expected = np_cross_entropy(logp, TC, reduction=reduction, logits=False, **kwargs)
        close(F.nll_loss(T(logp), r.tensor(TC), reduction=reduction, **kw), expected)
        gradcheck(lambda x, kw=kw: F.nll_loss(x, r.tensor(TC), reduction=reduction, **kw), logp)
    # cross_entropy is log_softmax followed by nll_loss
    close(F.cross_entropy(T(XC), r.tensor(TC), reduction=reduction),
          F.nll_loss(F.log_softmax(T(XC), 1), r.tensor(TC), reduction=reduction))


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.cross_entropy(T(XC), r.tensor([1, 2])), ValueError,
     r"Expected input batch_size \(5\) to match target batch_size \(2\)."),
    (lambda: F.cross_entropy(T(XC), r.tensor([1, 2, 3, 4, 0])), IndexError, "Target 4 is out of bounds."),
    (lambda: F.nll_loss(T(XC), r.tensor([1, -1, 3, 0, 0])), IndexError, "Target -1 is out of bounds."),
    (lambda: F.cross_entropy(T(XC), r.tensor(TC), T(WC[:3])), RuntimeError,
     r"weight tensor should be defined either for all 4 classes or no classes but got weight tensor of shape: \[3\]"),
    (lambda: F.cross_entropy(T(XC), r.tensor(TC, dtype=r.int32)), RuntimeError,
     "expected scalar type Long but found Int"),
    (lambda: F.cross_entropy(T(XC), T(TC)), RuntimeError, "expected scalar type Long but found Double"),
    (lambda: F.cross_entropy(T(XC), r.tensor(np.zeros((5, 4), dtype=np.int64))), RuntimeError,
     "Expected floating point type for target with class probabilities, got Long"),
    (lambda: F.cross_entropy(T(XC), T(np.zeros((5, 4))), ignore_index=1), RuntimeError,
     "ignore_index is not supported for floating point target"),
    (lambda: F.cross_entropy(T(XC), r.tensor(TC), label_smoothing=1.5), RuntimeError,
     r"label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
    (lambda: F.nll_loss(T(XC), r.tensor(TC.reshape(5, 1))), RuntimeError,
     "0D or 1D target tensor expected, multi-target not supported"),
    (lambda: F.cross_entropy(T(randn(2, 3, 4)), r.tensor(np.zeros((2, 3), dtype=np.int64))), RuntimeError,
     r"Expected target size \[2, 4\], got \[2, 3\]"),
    (lambda: F.nll_loss(T(np.float64(1.0)), r.tensor(0)), ValueError, r"Expected 1 or more dimensions \(got 0\)"),
], ids=["batch", "bounds", "negative", "weight", "int32", "float_target", "long_probs", "ignore_probs", "smoothing",
        "multi_target", "spatial_target", "zero_dim"])
def test_class_loss_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("size", [0, 7, 4095, 4096, 65536, 65536 * 2 + 5], ids=str)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_relu_blocked_against_a_zero_block_is_numpys_maximum_bit_for_bit(size, dtype):
    """The CPU backend's relu compares large arrays with a block of zeros (the scalar loop is
    unvectorized): NaN, -0.0, infinities and every block boundary give NumPy's maximum(x, 0) exactly."""
    from rlpipe.backends import cpu
    x = np.random.default_rng(size).standard_normal(size).astype(dtype)
    x[::5], x[1::7], x[2::11], x[3::13] = np.nan, -0.0, -np.inf, np.inf
    for a in (x, x.reshape(-1, 1) if size else x, x[::-1]):
        got, want = cpu.relu(a), np.maximum(a, 0)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    assert not np.shares_memory(cpu.relu(x), x)
    out = F.relu(r.tensor(x))
    assert np.array_equal(out.numpy(), np.maximum(x, 0), equal_nan=True)


def test_relu_of_integers_and_scalars_keeps_numpys_types():
    from rlpipe.backends import cpu
    ints = np.arange(-5000, 5000)
    assert cpu.relu(ints).dtype == ints.dtype and (cpu.relu(ints) == np.maximum(ints, 0)).all()
    assert cpu.relu(np.float32(-2.5)) == 0 and cpu.relu(np.array(3.5, np.float32)) == 3.5
