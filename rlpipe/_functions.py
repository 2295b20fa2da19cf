"""Every built-in differentiable op, each a small Function over backend arrays.

``forward(ctx, ...)`` receives NumPy or CuPy arrays (and plain Python values) and uses
``ctx.xp`` (the array namespace) or ``ctx.be`` (the backend's kernels), so the same code runs
on both devices. ``backward(ctx, grad)`` returns one gradient per forward argument (None where
the argument needs none). Promotion, argument checking and views are handled in ``_ops.py``.
"""
import math

from .autograd.function import Function


class Op(Function):
    raw = True


def unbroadcast(g, shape):
    """Sums ``g`` down to ``shape``, undoing broadcasting (None for a non-tensor argument)."""
    if shape is None:
        return None
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def shape_of(x):
    return getattr(x, "shape", None)


def along_dim(xp, index, dim):
    """An advanced-index tuple that picks ``index`` along ``dim`` and keeps every other position:
    ``a[along_dim(xp, i, d)]`` is ``take_along_axis(a, i, d)``; the same tuple scatters back."""
    out = []
    for d, n in enumerate(index.shape):
        if d == dim:
            out.append(index)
        else:
            shape = [1] * index.ndim
            shape[d] = n
            out.append(xp.arange(n).reshape(shape))
    return tuple(out)


def expand_reduced(g, shape, dims, keepdim):
    """Broadcasts the gradient of a reduction over ``dims`` back to the input's ``shape``."""
    xp_g = g
    if not keepdim and dims is not None:
        for d in sorted(dims):
            xp_g = xp_g.reshape(xp_g.shape[:d] + (1,) + xp_g.shape[d:])
    elif dims is None and not keepdim:
        xp_g = xp_g.reshape((1,) * len(shape))
    return xp_g


# ---- arithmetic ----------------------------------------------------------------------

class Add(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = shape_of(x), shape_of(y)
        return x + y

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shapes[0]), unbroadcast(g, ctx.shapes[1])


class Sub(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = shape_of(x), shape_of(y)
        return x - y

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shapes[0]), unbroadcast(-g, ctx.shapes[1])


class Mul(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        return (unbroadcast(g * y, shape_of(x)) if need_x else None,
                unbroadcast(g * x, shape_of(y)) if need_y else None)


class Div(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x / y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        return (unbroadcast(g / y, shape_of(x)) if need_x else None,
                unbroadcast(-g * x / (y * y), shape_of(y)) if need_y else None)


class Pow(Op):
    @staticmethod
    def forward(ctx, x, y):
        out = ctx.xp.power(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, y, out = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad
        gx = gy = None
        with ctx.be.quietly():  # inf/nan at x == 0 are masked out below
            if need_x:  # d/dx x**y = y * x**(y-1), taken as 0 where y == 0
                gx = xp.where(xp.equal(y, 0), 0, g * y * xp.power(x, y - 1))
                gx = unbroadcast(gx.astype(g.dtype, copy=False), shape_of(x))
            if need_y:  # d/dy x**y = x**y * log(x), taken as 0 where x == 0 and y >= 0
                with_log = g * out * xp.log(xp.asarray(x, dtype=g.dtype) if shape_of(x) is None else x)
                gy = xp.where(xp.logical_and(xp.equal(x, 0), y >= 0), 0, with_log)
                gy = unbroadcast(gy.astype(g.dtype, copy=False), shape_of(y))
        return gx, gy


class Remainder(Op):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.remainder(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gy = None
        if ctx.needs_input_grad[1]:
            if shape_of(x) is None:  # number % tensor
                raise RuntimeError("derivative for aten::remainder is not implemented")
            gy = unbroadcast(-g * ctx.xp.floor_divide(x, y), shape_of(y))
        return unbroadcast(g, shape_of(x)), gy


for _binary in (Add, Sub, Mul, Div, Pow, Remainder):
    _binary.scalar_operands = True


class Neg(Op):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


def sign_of(xp, x):
    """-1, 0 or 1; 0 for nan (torch's sgn)."""
    s = xp.sign(x)
    return xp.where(s != s, 0, s).astype(s.dtype, copy=False) if s.dtype.kind == "f" else s


class Abs(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.abs(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * sign_of(ctx.xp, x)


class Reciprocal(Op):
    @staticmethod
    def forward(ctx, x):
        out = 1 / x
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return -g * out * out


class Maximum(Op):
    """max(x, y) elementwise; a tie sends half the gradient to each side, as torch does."""
    pick = "maximum"

    @classmethod
    def forward(cls, ctx, x, y):
        ctx.save_for_backward(x, y)
        return getattr(ctx.xp, cls.pick)(x, y)

    @classmethod
    def backward(cls, ctx, g):
        xp = ctx.xp
        x, y = ctx.saved_tensors
        x_wins = (x > y) if cls.pick == "maximum" else (x < y)
        share = xp.where(x_wins, 1.0, xp.where(xp.equal(x, y), 0.5, 0.0)).astype(g.dtype)
        return unbroadcast(g * share, shape_of(x)), unbroadcast(g * (1 - share), shape_of(y))


class Minimum(Maximum):
    pick = "minimum"


Maximum.scalar_operands = Minimum.scalar_operands = True


class Clamp(Op):
    """clamp(x, lo, hi) with scalar or tensor bounds; the gradient passes where lo <= x <= hi."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        xp = ctx.xp
        ctx.save_for_backward(x, lo, hi)
        out = x
        if lo is not None:
            out = xp.maximum(out, lo)
        if hi is not None:
            out = xp.minimum(out, hi)
        return out.astype(x.dtype, copy=False) if out is not x else x.copy()

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        xp = ctx.xp
        inside = xp.ones(x.shape, dtype=bool)
        if lo is not None:
            inside &= x >= lo
        if hi is not None:
            inside &= x <= hi
        zero = xp.zeros((), dtype=g.dtype)
        g_lo = g_hi = None
        if ctx.needs_input_grad[1]:  # min wins where x < min, unless min > max (then max wins)
            below = x < lo if hi is None else (x < lo) & (lo < hi)
            g_lo = unbroadcast(xp.where(below, g, zero), shape_of(lo))
        if ctx.needs_input_grad[2]:
            above = x > hi if lo is None else (x > hi) | (hi < lo)
            g_hi = unbroadcast(xp.where(above, g, zero), shape_of(hi))
        return xp.where(inside, g, zero), g_lo, g_hi


class Where(Op):
    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.cond = cond
        ctx.shapes = shape_of(x), shape_of(y)
        return ctx.xp.where(cond, x, y)

    @staticmethod
    def backward(ctx, g):
        xp, cond = ctx.xp, ctx.cond
        zero = xp.zeros((), dtype=g.dtype)
        return (None, unbroadcast(xp.where(cond, g, zero), ctx.shapes[0]),
                unbroadcast(xp.where(cond, zero, g), ctx.shapes[1]))


# ---- elementwise functions -------------------------------------------------------------

class Exp(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensors[0]


class Expm1(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.expm1(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * (ctx.saved_tensors[0] + 1)


class Log(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx, g):
        return g / ctx.saved_tensors[0]


class Log1p(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log1p(x)

    @staticmethod
    def backward(ctx, g):
        return g / (ctx.saved_tensors[0] + 1)


class Sqrt(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        with ctx.be.quietly():  # infinite at 0, as in torch
            return g / (2 * ctx.saved_tensors[0])


class Rsqrt(Op):
    @staticmethod
    def forward(ctx, x):
        out = 1 / ctx.xp.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return -0.5 * g * out * out * out


class Sin(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.sin(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.xp.cos(ctx.saved_tensors[0])


class Cos(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.cos(x)

    @staticmethod
    def backward(ctx, g):
        return -g * ctx.xp.sin(ctx.saved_tensors[0])


class Erf(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.be.erf(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * (2 / math.sqrt(math.pi)) * ctx.xp.exp(-x * x)


class Tanh(Op):
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        fused = ctx.be.fused.get("tanh_backward")  # a backend's one-launch kernel, where it has one (cuda)
        return fused(y, g) if fused else g * (1 - y * y)


def _sigmoid(ctx, x):
    """1 / (1 + exp(-x)) without overflow (Sigmoid, Silu, Mish, Softplus's gradient)."""
    fused = ctx.be.fused.get("sigmoid")  # a backend's one-launch kernel, where it has one (cuda)
    if fused:
        return fused(x)
    xp = ctx.xp
    e = xp.exp(-xp.abs(x))  # exp of a non-positive number never overflows
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


class Sigmoid(Op):
    @staticmethod
    def forward(ctx, x):
        out = _sigmoid(ctx, x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        fused = ctx.be.fused.get("sigmoid_backward")  # a backend's one-launch kernel, where it has one (cuda)
        return fused(y, g) if fused else g * y * (1 - y)


class Relu(Op):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.maximum(x, 0)  # a Python 0 keeps x's dtype (NumPy 2's weak scalars)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        fused = ctx.be.fused.get("relu_backward")  # a backend's one-launch kernel, where it has one (cuda)
        return fused(x, g) if fused else g * ~(x <= 0)  # nan passes the gradient, as in torch


class LeakyRelu(Op):
    @staticmethod
    def forward(ctx, x, slope):
        ctx.save_for_backward(x)
        ctx.slope = slope
        fused = ctx.be.fused.get("leaky_relu")  # a backend's one-launch kernel, where it has one (cuda)
        return fused(x, slope) if fused else ctx.xp.where(x > 0, x, x * x.dtype.type(slope))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        fused = ctx.be.fused.get("leaky_relu_backward")  # a backend's one-launch kernel, where it has one (cuda)
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
        fused = ctx.be.fused.get("gelu_tanh" if tanh else "gelu")  # a backend's one-launch kernel (cuda)
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
        fused = ctx.be.fused.get("gelu_tanh_backward" if tanh else "gelu_backward")  # one launch (cuda)
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
    fused = ctx.be.fused.get("softplus")  # a backend's one-launch kernel, where it has one (cuda)
    if fused:
        return fused(x, beta, threshold)
    xp = ctx.xp
    bx = x * x.dtype.type(beta)
    soft = (xp.maximum(bx, 0) + xp.log1p(xp.exp(-xp.abs(bx)))) / x.dtype.type(beta)
    return xp.where(bx > threshold, x, soft)


class Softplus(Op):
    @staticmethod
    def forward(ctx, x, beta, threshold):
        ctx.save_for_backward(x)
        ctx.params = beta, threshold
        return _softplus(ctx, x, beta, threshold)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        beta, threshold = ctx.params
        fused = ctx.be.fused.get("softplus_backward")  # a backend's one-launch kernel, where it has one (cuda)
        if fused:
            return fused(x, g, beta, threshold), None, None
        bx = x * x.dtype.type(beta)
        return ctx.xp.where(bx > threshold, g, g * _sigmoid(ctx, bx)), None, None


class _Stepwise(Op):
    """Piecewise-constant functions: their gradient is zero almost everywhere."""
    fn = None

    @classmethod
    def forward(cls, ctx, x, *args):
        ctx.shape = x.shape
        return getattr(ctx.xp, cls.fn)(x, *args)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.zeros_like(g), None


class Sign(_Stepwise):
    @staticmethod
    def forward(ctx, x):
        return sign_of(ctx.xp, x) if x.dtype != bool else x.copy()


class Floor(_Stepwise):
    fn = "floor"


class Ceil(_Stepwise):
    fn = "ceil"


class Trunc(_Stepwise):
    fn = "trunc"


class Round(_Stepwise):
    fn = "round"


class FloorDivide(Op):
    """The quotient rounded down ('floor', 'floor_divide') or toward zero ('trunc'). Piecewise
    constant: div with a rounding mode has zero gradients, and floor_divide none at all (torch)."""
    scalar_operands = True

    @staticmethod
    def forward(ctx, x, y, mode):
        ctx.shapes = shape_of(x), shape_of(y)
        ctx.mode = mode
        if mode == "trunc":
            with ctx.be.quietly():
                return ctx.xp.trunc(x / y)
        return ctx.xp.floor_divide(x, y)

    @staticmethod
    def backward(ctx, g):
        if ctx.mode == "floor_divide":
            raise RuntimeError("derivative for aten::floor_divide is not implemented")
        xp = ctx.xp
        return tuple(None if s is None else xp.zeros(s, dtype=g.dtype) for s in ctx.shapes) + (None,)


# ---- reductions ---------------------------------------------------------------------------

class Sum(Op):
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype):
        ctx.args = x.shape, dims, keepdim
        ctx.in_dtype = x.dtype
        return ctx.xp.sum(x, axis=dims, keepdims=keepdim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx.args
        g = ctx.xp.broadcast_to(expand_reduced(g, shape, dims, keepdim), shape)
        return g.astype(ctx.in_dtype, copy=False), None, None, None


class Mean(Op):
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype):
        ctx.args = x.shape, dims, keepdim
        out = ctx.xp.mean(x, axis=dims, keepdims=keepdim, dtype=dtype)
        ctx.count = x.size // max(out.size, 1) if x.size else 0
        return out

    @staticmethod
    def backward(ctx, g):
        shape, dims, keepdim = ctx.args
        g = expand_reduced(g, shape, dims, keepdim) / max(ctx.count, 1)
        return ctx.xp.broadcast_to(g, shape), None, None, None


def _exclusive_cumprod(xp, x, axis, reverse=False):
    """Products of the elements strictly before (or after) each position along ``axis``."""
    if reverse:
        x = xp.flip(x, axis)
    ones = xp.ones_like(xp.take(x, [0], axis=axis))
    out = xp.cumprod(xp.concatenate([ones, xp.take(x, range(x.shape[axis] - 1), axis=axis)], axis=axis), axis=axis)
    return xp.flip(out, axis) if reverse else out


class Prod(Op):
    """The gradient is the product of all other elements, computed without dividing, so zeros are exact."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        ctx.save_for_backward(x)
        ctx.args = dim, keepdim
        return ctx.xp.prod(x, axis=dim, keepdims=keepdim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        dim, keepdim = ctx.args
        flat = dim is None
        axis = 0 if flat else dim
        xs = x.reshape(-1) if flat else x
        if xs.shape[axis] == 0:
            return xp.zeros_like(x), None, None, None
        others = _exclusive_cumprod(xp, xs, axis) * _exclusive_cumprod(xp, xs, axis, reverse=True)
        g = expand_reduced(g, x.shape, None if flat else (dim,), keepdim).astype(x.dtype, copy=False)
        return (g.reshape(()) * others).reshape(x.shape) if flat else g * others, None, None, None


class Amax(Op):
    """amax/amin; tied extremes share the gradient evenly, as torch does."""
    pick = "max"

    @classmethod
    def forward(cls, ctx, x, dims, keepdim):
        out = getattr(ctx.xp, cls.pick)(x, axis=dims, keepdims=keepdim)
        ctx.save_for_backward(x, out)
        ctx.args = dims, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.args
        hit = x == expand_reduced(out, x.shape, dims, keepdim)
        count = hit.sum(axis=dims, keepdims=True).astype(g.dtype)
        return hit * (expand_reduced(g, x.shape, dims, keepdim) / count), None, None


class Amin(Amax):
    pick = "min"


class ExtremeAlongDim(Op):
    """max(dim)/min(dim): (values, indices); the gradient goes to the chosen index only."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, largest):
        xp = ctx.xp
        idx = (xp.argmax if largest else xp.argmin)(x, axis=dim, keepdims=True)
        values = xp.take_along_axis(x, idx, axis=dim)
        ctx.args = x.shape, dim, keepdim, idx
        ctx.node_name = "MaxBackward0" if largest else "MinBackward0"
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        ctx.mark_non_differentiable(idx)
        return values, idx

    @staticmethod
    def backward(ctx, g, _):
        shape, dim, keepdim, idx = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        out[along_dim(ctx.xp, idx, dim)] = g if keepdim else ctx.xp.expand_dims(g, dim)
        return out, None, None, None


class Var(Op):
    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        xp = ctx.xp
        diff = x - xp.mean(x, axis=dims, keepdims=True)
        denom = max(_count(x.shape, dims) - correction, 0)
        ctx.save_for_backward(diff)
        ctx.args = dims, keepdim, denom
        scale = 1.0 / denom if denom else float("inf")  # 0/0 gives nan and s/0 inf, as in torch
        return xp.sum(diff * diff, axis=dims, keepdims=keepdim) * x.dtype.type(scale)

    @staticmethod
    def backward(ctx, g):
        diff, = ctx.saved_tensors
        dims, keepdim, denom = ctx.args
        scale = 2.0 / denom if denom else float("inf")
        return expand_reduced(g, diff.shape, dims, keepdim) * (diff * diff.dtype.type(scale)), None, None, None


class Std(Var):
    """sqrt(var); where the spread is zero the gradient is 0, as torch masks it."""

    @staticmethod
    def forward(ctx, x, dims, correction, keepdim):
        out = ctx.xp.sqrt(Var.forward(ctx, x, dims, correction, keepdim))
        ctx.std = out
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        std = ctx.std
        with ctx.be.quietly():
            scaled = xp.where(std == 0, 0, g / (2 * std)).astype(g.dtype, copy=False)
        return Var.backward(ctx, scaled)


def _count(shape, dims):
    n = 1
    for d in (range(len(shape)) if dims is None else dims):
        n *= shape[d]
    return n


class LogSumExp(Op):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        xp = ctx.xp
        if x.size == 0:  # the log of an empty sum
            ctx.save_for_backward(x, x)
            ctx.args = dims, keepdim
            return xp.full(xp.sum(x, axis=dims, keepdims=keepdim).shape, -xp.inf, dtype=x.dtype)
        top = xp.max(x, axis=dims, keepdims=True)
        top = xp.where(xp.isfinite(top), top, 0)
        out = xp.log(xp.sum(xp.exp(x - top), axis=dims, keepdims=True)) + top
        ctx.save_for_backward(x, out)
        ctx.args = dims, keepdim
        return out if keepdim else out.reshape([s for d, s in enumerate(out.shape) if d not in dims])

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.args
        return expand_reduced(g, x.shape, dims, keepdim) * ctx.xp.exp(x - out), None, None


class Norm(Op):
    """The vector p-norm for a finite p. The gradient is 0 where the norm or an element is 0
    (p < 1), as in torch, instead of the nan that the plain formula gives."""

    @staticmethod
    def forward(ctx, x, p, dims, keepdim):
        xp = ctx.xp
        ctx.save_for_backward(x)
        ctx.args = p, dims, keepdim
        if p == 0:
            out = xp.sum(x != 0, axis=dims, keepdims=keepdim).astype(x.dtype)
        elif p == 2:
            out = xp.sqrt(xp.sum(x * x, axis=dims, keepdims=keepdim))
        else:
            out = xp.power(xp.sum(xp.power(xp.abs(x), p), axis=dims, keepdims=keepdim), 1.0 / p).astype(x.dtype)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, = ctx.saved_tensors
        p, dims, keepdim = ctx.args
        if p == 0:
            return xp.zeros_like(x), None, None, None
        norm = expand_reduced(ctx.out, x.shape, dims, keepdim)
        g = expand_reduced(g, x.shape, dims, keepdim)
        with ctx.be.quietly():
            scaled = x if p == 2 else sign_of(xp, x) * xp.where(x == 0, 0, xp.power(xp.abs(x), p - 1))
            out = xp.where(norm == 0, 0, scaled * g / xp.power(norm, p - 1))
        return out.astype(x.dtype, copy=False), None, None, None


class CumSum(Op):
    @staticmethod
    def forward(ctx, x, dim, dtype):
        ctx.dim = dim
        ctx.in_dtype = x.dtype
        return ctx.xp.cumsum(x, axis=dim, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        return xp.flip(xp.cumsum(xp.flip(g, ctx.dim), axis=ctx.dim), ctx.dim).astype(ctx.in_dtype, copy=False), None, None


class CumProd(Op):
    @staticmethod
    def forward(ctx, x, dim, dtype):
        out = ctx.xp.cumprod(x, axis=dim, dtype=dtype)
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, out = ctx.saved_tensors
        d = ctx.dim
        rev_cumsum = lambda a: xp.flip(xp.cumsum(xp.flip(a, d), axis=d), d)
        g = g.astype(x.dtype, copy=False)
        out = out.astype(x.dtype, copy=False)
        if not bool((x == 0).any()):
            return rev_cumsum(g * out) / x, None, None
        # with zeros: grad[i] = sum_{j>=i} g[j] * prod_{k<=j, k!=i} x[k], one position at a time
        n = x.shape[d]
        grad = xp.zeros_like(x)
        for i in range(n):
            xi = xp.take(x, [i], axis=d)
            ones = xp.ones_like(xi)
            without_i = xp.concatenate([xp.take(x, range(i), axis=d), ones, xp.take(x, range(i + 1, n), axis=d)], axis=d)
            partial = xp.cumprod(without_i, axis=d)
            tail = xp.take(g * partial, range(i, n), axis=d).sum(axis=d, keepdims=True)
            index = [slice(None)] * x.ndim
            index[d] = slice(i, i + 1)
            grad[tuple(index)] = tail
        return grad, None, None


class Softmax(Op):
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


# ---- shape and layout ----------------------------------------------------------------------

class Reshape(Op):
    """reshape/view/flatten/unflatten/squeeze/unsqueeze: a view whenever the layout allows."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


class Permute(Op):
    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return g.transpose(inverse), None


class Expand(Op):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return ctx.xp.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shape), None


class Repeat(Op):
    @staticmethod
    def forward(ctx, x, repeats):
        shape = (1,) * (len(repeats) - x.ndim) + x.shape
        ctx.args = x.shape, shape, repeats
        return ctx.xp.tile(x.reshape(shape), repeats)

    @staticmethod
    def backward(ctx, g):
        in_shape, shape, repeats = ctx.args
        split = []
        for r, s in zip(repeats, shape):
            split += [r, s]
        g = g.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return g.reshape(in_shape), None


class Flip(Op):
    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return ctx.xp.flip(x, dims).copy()  # torch's flip copies; NumPy's would be a view

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.flip(g, ctx.dims), None


class Roll(Op):
    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.args = shifts, dims
        return ctx.xp.roll(x, shifts, dims)

    @staticmethod
    def backward(ctx, g):
        shifts, dims = ctx.args
        back = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
        return ctx.xp.roll(g, back, dims), None, None


class Cat(Op):
    @staticmethod
    def forward(ctx, *xs, dim):
        ctx.dim = dim
        ctx.sizes = [x.shape[dim] for x in xs]
        return ctx.xp.concatenate(xs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        bounds, at = [], 0
        for n in ctx.sizes[:-1]:
            at += n
            bounds.append(at)
        return tuple(ctx.xp.split(g, bounds, axis=ctx.dim))


class Stack(Op):
    @staticmethod
    def forward(ctx, *xs, dim):
        ctx.dim = dim
        return ctx.xp.stack(xs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        return tuple(ctx.xp.moveaxis(g, ctx.dim, 0))


class Split(Op):
    """Views of consecutive pieces along ``dim`` (split, chunk, unbind)."""

    @staticmethod
    def forward(ctx, x, sizes, dim, squeeze):
        ctx.args = dim, squeeze
        pieces, at = [], 0
        index = [slice(None)] * x.ndim
        for n in sizes:
            index[dim] = at if squeeze else slice(at, at + n)
            pieces.append(x[tuple(index)])
            at += n
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *grads):
        dim, squeeze = ctx.args
        xp = ctx.xp
        return (xp.stack(grads, axis=dim) if squeeze else xp.concatenate(grads, axis=dim)), None, None, None


class Index(Op):
    """x[index]; ``index`` has already been converted to backend arrays and Python values."""

    @staticmethod
    def forward(ctx, x, index, advanced):
        ctx.args = x.shape, x.dtype, index, advanced
        if advanced and len(index) == 1 and index[0].dtype.kind in "iu" and x.ndim:
            return x.take(index[0], axis=0)  # the same rows, several times faster than x[index]
        return x[index]

    @staticmethod
    def backward(ctx, g):
        shape, dtype, index, advanced = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        if advanced:
            ctx.be.scatter_add(out, index, g)
        else:
            out[index] = g
        return out, None, None


class IndexPut(Op):
    """A copy of x with x[index] = value (what ``x[index] = value`` records when it needs a graph)."""

    @staticmethod
    def forward(ctx, x, value, index):
        out = x.copy()
        out[index] = value
        ctx.args = index, shape_of(value)
        return out

    @staticmethod
    def backward(ctx, g):
        index, value_shape = ctx.args
        gx = g.copy()
        gx[index] = 0
        gv = None
        if value_shape is not None:
            gv = unbroadcast(g[index], value_shape)
        return gx, gv, None


class Gather(Op):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.args = x.shape, dim, index
        sel = tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(index.shape))
        return x[sel][along_dim(ctx.xp, index, dim)]

    @staticmethod
    def backward(ctx, g):
        shape, dim, index = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(out, along_dim(ctx.xp, index, dim), g)
        return out, None, None


class Scatter(Op):
    """x with values from ``src`` (array or scalar) written at ``index`` along ``dim``; ``add`` accumulates."""

    @staticmethod
    def forward(ctx, x, dim, index, src, add):
        where = along_dim(ctx.xp, index, dim)
        src_shape = shape_of(src)
        used = tuple(slice(0, n) for n in index.shape)  # the part of src that index covers
        if src_shape is not None:
            src = src[used]
        out = x.copy()
        if add:
            ctx.be.scatter_add(out, where, src)
        else:
            out[where] = src
        ctx.args = where, add, src_shape, used
        return out

    @staticmethod
    def backward(ctx, g):
        where, add, src_shape, used = ctx.args
        gx = g
        if not add:
            gx = g.copy()
            gx[where] = 0
        gsrc = None
        if src_shape is not None and ctx.needs_input_grad[3]:
            gsrc = ctx.xp.zeros(src_shape, dtype=g.dtype)
            gsrc[used] = g[where]
        return gx, None, None, gsrc, None


class IndexSelect(Op):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.args = x.shape, dim, index
        return ctx.xp.take(x, index, axis=dim)

    @staticmethod
    def backward(ctx, g):
        shape, dim, index = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        where = (slice(None),) * dim + (index,)
        ctx.be.scatter_add(out, where, g)
        return out, None, None


class MatMul(Op):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        a, b = ctx.saved_tensors
        if a.ndim == 1 and b.ndim == 1:  # a dot product: g is 0-d
            return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = xp.expand_dims(g2, -2)
        if b.ndim == 1:
            g2 = xp.expand_dims(g2, -1)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = unbroadcast(g2 @ xp.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = unbroadcast(xp.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)
        return ga, gb


class Linear(Op):
    """x @ w.T + b in one op (nn.Linear's forward): fewer graph nodes and temporaries."""
    node_name = "AddmmBackward0"

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        out = x @ w.T
        if b is not None:
            out += b
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])
        return (g @ w if need_x else None,
                g2.T @ x.reshape(-1, x.shape[-1]) if need_w else None,
                g2.sum(axis=0) if need_b else None)


class Einsum(Op):
    """einsum with an explicit equation (``_ops.einsum`` makes it explicit and expands '...')."""

    @staticmethod
    def forward(ctx, *operands, inputs, output):
        ctx.save_for_backward(*operands)
        ctx.args = inputs, output
        return ctx.xp.einsum(",".join(inputs) + "->" + output, *operands)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        operands = ctx.saved_tensors
        inputs, output = ctx.args
        grads = []
        for k, (sub, x) in enumerate(zip(inputs, operands)):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
                continue
            if len(set(sub)) != len(sub):
                raise RuntimeError(f"einsum backward: repeated subscripts within one operand ({sub!r}) "
                                   "are not supported by rlpipe")
            others = [s for j, s in enumerate(inputs) if j != k]
            present = "".join(c for c in sub if c in output or any(c in s for s in others))
            partial = xp.einsum(",".join([output] + others) + "->" + present,
                                g, *[o for j, o in enumerate(operands) if j != k])
            partial = partial.reshape([partial.shape[present.index(c)] if c in present else 1 for c in sub])
            grads.append(unbroadcast(xp.broadcast_to(partial, xp.broadcast_shapes(partial.shape, x.shape)), x.shape)
                         .astype(x.dtype, copy=False))
        return tuple(grads)


# ---- dtype, device, copies, views ------------------------------------------------------------

class Cast(Op):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g.astype(ctx.dtype), None


class ToDevice(Op):
    """Copies between devices; the caller sets the output tensor's device."""

    @staticmethod
    def forward(ctx, x, source, target):
        ctx.source = source
        return target._backend.asarray(x, index=target.index)

    @staticmethod
    def backward(ctx, g):
        return ctx.source._backend.asarray(g, index=ctx.source.index), None, None


class Clone(Op):
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g


class AsView(Op):
    """Re-takes a view of an updated base: the view's grad_fn after an in-place op on it."""

    @staticmethod
    def forward(ctx, base, view_fn):
        ctx.args = base.shape, view_fn
        return view_fn(base)

    @staticmethod
    def backward(ctx, g):
        shape, view_fn = ctx.args
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        view_fn(out)[...] = g
        return out, None


class ViewUpdate(Op):
    """base with its view ``view_fn(base)`` replaced by ``value``: the base's grad_fn after an
    in-place op on one of its views (torch's CopySlices)."""

    @staticmethod
    def forward(ctx, base, value, view_fn):
        out = base.copy()
        view_fn(out)[...] = value
        ctx.args = view_fn, value.shape
        return out

    @staticmethod
    def backward(ctx, g):
        view_fn, value_shape = ctx.args
        gb = g.copy()
        view_fn(gb)[...] = 0
        return gb, unbroadcast(view_fn(g).copy(), value_shape), None
