"""Every activation: relu and its relatives, sigmoid, tanh, gelu, softplus, silu, mish, the
hard* family, and softmax / log_softmax.

Each formula is written here against ``ctx.xp``. Where a backend has a fused kernel for it
(``rlpipe.kernels``; on cuda some, on the CPU none) the op runs that kernel instead, in one line
at the call site.

Below the Functions, the public ops (relu, leaky_relu, gelu, softplus, sigmoid, tanh, softmax,
log_softmax) and their Tensor methods; the other activations are ``nn.functional``'s.
"""
from .. import _dtypes, kernels
from .._dispatch import torch_function
from .._tensor import tensor_method
from .base import Op
from .common import inplace_variant, _cast, _require_float, _unary_float


class Tanh(Op):
    """tanh(x); gradient g * (1 - tanh(x)**2), from the saved output."""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        fused = kernels.get("tanh_backward", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
        return fused(y, g) if fused else g * (1 - y * y)


def _sigmoid(ctx, x):
    """1 / (1 + exp(-x)) without overflow (Sigmoid, Silu, Mish, Softplus's gradient)."""
    fused = kernels.get("sigmoid", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
    if fused:
        return fused(x)
    xp = ctx.xp
    e = xp.exp(-xp.abs(x))  # exp of a non-positive number never overflows
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


class Sigmoid(Op):
    """1 / (1 + exp(-x)); gradient g * y * (1 - y), from the saved output y."""
    @staticmethod
    def forward(ctx, x):
        out = _sigmoid(ctx, x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        fused = kernels.get("sigmoid_backward", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
        return fused(y, g) if fused else g * y * (1 - y)


class Relu(Op):
    """max(x, 0); the gradient passes where x > 0 (and at NaN, as in torch)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.be.relu(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        fused = kernels.get("relu_backward", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
        return fused(x, g) if fused else g * ~(x <= 0)  # nan passes the gradient, as in torch


class LeakyRelu(Op):
    """x for x > 0, else slope * x; gradient g or g * slope."""
    @staticmethod
    def forward(ctx, x, slope):
        ctx.save_for_backward(x)
        ctx.slope = slope
        fused = kernels.get("leaky_relu", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
        return fused(x, slope) if fused else ctx.xp.where(x > 0, x, x * x.dtype.type(slope))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        fused = kernels.get("leaky_relu_backward", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
        return (fused(x, g, ctx.slope) if fused else ctx.xp.where(x > 0, g, g * g.dtype.type(ctx.slope))), None


_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715
_INV_SQRT_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


class Gelu(Op):
    """x * Phi(x), Phi the standard normal CDF through erf; or its tanh approximation."""

    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        tanh = approximate == "tanh"
        fused = kernels.get("gelu_tanh" if tanh else "gelu", ctx.be)  # a backend's one-launch kernel (cuda)
        if fused:
            return fused(x)
        dt = x.dtype.type
        if tanh:
            return 0.5 * x * (1 + ctx.xp.tanh(dt(_SQRT_2_OVER_PI) * (x + dt(_GELU_C) * x ** 3)))
        return 0.5 * x * (1 + ctx.be.erf(x * dt(_INV_SQRT_2)))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        tanh = ctx.approximate == "tanh"
        fused = kernels.get("gelu_tanh_backward" if tanh else "gelu_backward", ctx.be)  # one launch (cuda)
        if fused:
            return fused(x, g), None
        xp, dt = ctx.xp, x.dtype.type
        if tanh:
            k, c = dt(_SQRT_2_OVER_PI), dt(_GELU_C)
            t = xp.tanh(k * (x + c * x ** 3))
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)), None
        cdf = 0.5 * (1 + ctx.be.erf(x * dt(_INV_SQRT_2)))
        pdf = dt(_INV_SQRT_2PI) * xp.exp(-0.5 * x * x)
        return g * (cdf + x * pdf), None


def _softplus(ctx, x, beta, threshold):
    """log1p(exp(beta * x)) / beta computed without overflow; x itself above the threshold, as torch does."""
    fused = kernels.get("softplus", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
    if fused:
        return fused(x, beta, threshold)
    xp = ctx.xp
    bx = x * x.dtype.type(beta)
    soft = (xp.maximum(bx, 0) + xp.log1p(xp.exp(-xp.abs(bx)))) / x.dtype.type(beta)
    return xp.where(bx > threshold, x, soft)


class Softplus(Op):
    """log(1 + exp(beta x)) / beta (x itself where beta x > threshold); gradient g * sigmoid(beta x)."""
    @staticmethod
    def forward(ctx, x, beta, threshold):
        ctx.save_for_backward(x)
        ctx.params = beta, threshold
        return _softplus(ctx, x, beta, threshold)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        beta, threshold = ctx.params
        fused = kernels.get("softplus_backward", ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
        if fused:
            return fused(x, g, beta, threshold), None, None
        bx = x * x.dtype.type(beta)
        return ctx.xp.where(bx > threshold, g, g * _sigmoid(ctx, bx)), None, None


class Softmax(Op):
    """exp(x) / sum(exp(x)) along ``dim``, shifted by the max; gradient y * (g - sum(g * y))."""
    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        if x.size == 0:
            ctx.save_for_backward(x)
            ctx.dim = dim
            return x.copy()
        e = xp.exp(x - xp.max(x, axis=dim, keepdims=True))
        out = e / xp.sum(e, axis=dim, keepdims=True)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return y * (g - (g * y).sum(axis=ctx.dim, keepdims=True)), None


class LogSoftmax(Op):
    """x - log(sum(exp(x))) along ``dim``, shifted by the max; gradient g - softmax(x) * sum(g)."""
    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        if x.size == 0:
            ctx.save_for_backward(x)
            ctx.dim = dim
            return x.copy()
        shifted = x - xp.max(x, axis=dim, keepdims=True)
        out = shifted - xp.log(xp.sum(xp.exp(shifted), axis=dim, keepdims=True))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g - ctx.xp.exp(y) * g.sum(axis=ctx.dim, keepdims=True), None


class Elu(Op):
    """scale * x for x > 0, else scale * alpha * (exp(x * input_scale) - 1): elu, selu and celu."""
    node_name = "EluBackward0"

    @staticmethod
    def forward(ctx, x, alpha, scale, input_scale):
        xp = ctx.xp
        ctx.save_for_backward(x)
        ctx.args = alpha, scale, input_scale
        dt = x.dtype.type
        neg = dt(scale * alpha) * xp.expm1(xp.minimum(x, 0) * dt(input_scale))
        return xp.where(x > 0, x * dt(scale), neg)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        alpha, scale, input_scale = ctx.args
        dt = x.dtype.type
        neg = g * dt(scale * alpha * input_scale) * xp.exp(xp.minimum(x, 0) * dt(input_scale))
        return xp.where(x > 0, g * dt(scale), neg), None, None, None


class Hardtanh(Op):
    """x clipped to [min_val, max_val]; the gradient passes strictly inside, as in torch."""
    node_name = "HardtanhBackward0"

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.args = lo, hi
        return ctx.xp.clip(x, x.dtype.type(lo), x.dtype.type(hi))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        lo, hi = ctx.args
        return ctx.xp.where((x > lo) & (x < hi), g, ctx.xp.zeros((), dtype=g.dtype)), None, None


class Threshold(Op):
    """x where x > threshold, else ``value``."""
    node_name = "ThresholdBackward0"

    @staticmethod
    def forward(ctx, x, threshold, value):
        ctx.save_for_backward(x)
        ctx.threshold = threshold
        return ctx.xp.where(x > threshold, x, x.dtype.type(value))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return ctx.xp.where(x > ctx.threshold, g, ctx.xp.zeros((), dtype=g.dtype)), None, None


class Hardsigmoid(Op):
    """relu6(x + 3) / 6; the gradient 1/6 passes strictly inside (-3, 3)."""
    node_name = "HardsigmoidBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.clip(x / 6 + x.dtype.type(0.5), 0, 1).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return ctx.xp.where((x > -3) & (x < 3), g / 6, ctx.xp.zeros((), dtype=g.dtype))


class Hardswish(Op):
    """x * relu6(x + 3) / 6, with torch's gradient: 0 below -3, x / 3 + 1/2 on [-3, 3], 1 above."""
    node_name = "HardswishBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * ctx.xp.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        return xp.where(x < -3, xp.zeros((), dtype=g.dtype), xp.where(x <= 3, g * (x / 3 + x.dtype.type(0.5)), g))


class Silu(Op):
    """x * sigmoid(x)."""
    node_name = "SiluBackward0"

    @staticmethod
    def forward(ctx, x):
        s = _sigmoid(ctx, x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s * (1 + x * (1 - s))


class Mish(Op):
    """x * tanh(softplus(x))."""
    node_name = "MishBackward0"

    @staticmethod
    def forward(ctx, x):
        t = ctx.xp.tanh(_softplus(ctx, x, 1.0, 20.0))
        ctx.save_for_backward(x, t)
        return x * t

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        return g * (t + x * _sigmoid(ctx, x) * (1 - t * t))


# ---- the public ops -------------------------------------------------------------------------------

tanh = _unary_float(Tanh)
sigmoid = _unary_float(Sigmoid)


@torch_function("input")
@inplace_variant
@tensor_method
def relu(input):
    """``max(input, 0)`` elementwise."""
    return Relu.apply(input)


@torch_function("input")
def leaky_relu(input, negative_slope=0.01):
    """``input`` where positive, ``negative_slope * input`` elsewhere (float input only)."""
    _require_float(input, "leaky_relu_cpu")
    return LeakyRelu.apply(input, float(negative_slope))


@torch_function("input")
def gelu(input, approximate="none"):
    """``x * Phi(x)`` with Phi the standard normal CDF, or its tanh approximation with ``approximate="tanh"``."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    _require_float(input, "GeluKernelImpl")
    return Gelu.apply(input, approximate)


@torch_function("input")
def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear (x itself) where ``beta * x > threshold``."""
    _require_float(input, "softplus_cpu")
    return Softplus.apply(input, float(beta), float(threshold))


@torch_function("input")
@tensor_method
def softmax(input, dim, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim``, computed without overflow (cast to ``dtype`` first when given)."""
    if dtype is None:
        _require_float(input, "softmax_kernel_impl")
    x = input if dtype is None else _cast(input, _dtypes.as_dtype(dtype))
    return Softmax.apply(x, x._dim(dim) if x.ndim else None)


@torch_function("input")
@tensor_method
def log_softmax(input, dim, dtype=None):
    """``x - logsumexp(x)`` along ``dim``, more accurate than ``log(softmax(x))`` (cast to ``dtype`` first when
    given)."""
    if dtype is None:
        _require_float(input, "log_softmax_kernel_impl")
    x = input if dtype is None else _cast(input, _dtypes.as_dtype(dtype))
    return LogSoftmax.apply(x, x._dim(dim) if x.ndim else None)
