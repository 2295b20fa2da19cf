"""Double backward: each built-in op's gradient written again with Tensor ops, for ``create_graph=True``.

``backward_graph(ctx, *grads)`` receives and returns Tensors, so the backward pass is recorded and can
be differentiated again (Hessian-vector products, gradient penalties, MAML). It is the op's ``backward``
formula, with the op's inputs and outputs rebuilt as Tensors on the graph (``ctx.graph_input``,
``ctx.graph_output``) and piecewise-constant factors (relu's mask, clamp's window) kept as constants.
``twice(Op)`` attaches a function as ``Op.backward_graph``; an op without one makes a create_graph
backward raise before it starts. ``ScaledGrad`` multiplies by a piecewise-constant derivative and, as
torch's ``threshold_backward``, hands its input a zero second-order gradient; a convolution's two
gradients are ops of their own, each differentiable through the other. Shape ops, indexing and views are
in ``double_backward_shape``.
"""
import math
from types import SimpleNamespace

import numpy as np

from .._tensor import Tensor, wrap
from .activations import (Elu, Gelu, Hardsigmoid, Hardswish, Hardtanh, LeakyRelu, LogSoftmax, Mish, Relu, Sigmoid,
                          Silu, Softmax, Softplus, Tanh, Threshold, softmax, softplus)
from .base import Op, broadcast_axes, shape_of, sign_of
from .common import Cast
from .elementwise import (Abs, Add, Clamp, Cos, Div, Erf, Erfinv, Exp, Expm1, FloorDivide, Lerp, Log, Log1p, Maximum,
                          Minimum, Mul, NanToNum, Neg, Pow, Reciprocal, Remainder, Rsqrt, Sin, Sqrt, Sub, Where,
                          clamp_above, clamp_below, clamp_inside,
                          _Stepwise, where)
from .linalg import Einsum, Linear, MatMul, einsum_grad_terms, einsum_unreduced_shape
from .losses import BinaryCrossEntropy, NllLoss
from .normalization import Normalize
from .reductions import Amax, CumSum, LogSumExp, Mean, Norm, Std, Sum, Var
from .special import Acos, Asin, Atan, Atanh, Cosh, Lgamma, Logit, Sinh, Tan
from .windows import Conv2d


def twice(*ops):
    """Decorator: the function becomes ``backward_graph`` of each op in ``ops``."""
    def attach(fn):
        fn.__doc__ = fn.__doc__ or (f"The backward of {', '.join(op.__name__ for op in ops)} in Tensor ops, which "
                                    "create_graph=True records.")
        for op in ops:
            op.backward_graph = staticmethod(fn)
        return fn
    return attach


def _const(ctx, array, dtype=None):
    """A constant Tensor (no gradient) around an array computed from saved values."""
    array = ctx.xp.asarray(array)
    return wrap(array if dtype is None else array.astype(dtype, copy=False), ctx._device)


def _mask(ctx, cond, g):
    """``cond`` (a boolean array) as a 0/1 constant of ``g``'s dtype."""
    return _const(ctx, cond, g._data.dtype)


class ScaledGrad(Op):
    """g * factor, ``factor`` an op's piecewise-constant derivative at ``x`` (relu's mask). ``x`` is an
    input only so that, as in torch (``threshold_backward``), a second-order gradient reaches it, as zeros."""
    @staticmethod
    def forward(ctx, g, x, factor):
        ctx.factor = factor
        ctx.x_meta = x.shape, x.dtype
        return g * factor

    @staticmethod
    def backward(ctx, gg):
        return gg * ctx.factor, ctx.xp.zeros(*ctx.x_meta), None


def _scaled(ctx, g, factor, i=0):
    """g times the constant ``factor`` (an array), wired to forward input ``i`` as ``ScaledGrad``."""
    factor = ctx.xp.asarray(factor).astype(g._data.dtype, copy=False)
    return ScaledGrad.apply(g, ctx.graph_input(i, ctx.saved_tensors[i]), factor)


def _scratch(ctx):
    """A throwaway ctx for calling another op's forward on arrays (that forward's notes must not land on ``ctx``)."""
    return SimpleNamespace(xp=ctx.xp, be=ctx.be)


def sum_to(g, shape):
    """``unbroadcast`` for Tensors: sums ``g`` down to ``shape`` (None for a non-tensor operand)."""
    if shape is None:
        return None
    if tuple(g.shape) == tuple(shape):
        return g
    added, kept = broadcast_axes(tuple(g.shape), shape)
    g = g.sum(dim=added) if added else g
    return g.sum(dim=kept, keepdim=True) if kept else g


def _keep_dims(g, shape, dims, keepdim):
    """A reduction's result (or gradient), Tensor or array, reshaped with the reduced ``dims`` of ``shape`` kept
    as 1 (all of them for None)."""
    if keepdim:
        return g
    return g.reshape(tuple(1 if dims is None or d in dims else n for d, n in enumerate(shape)))


# ---- arithmetic ----

@twice(Add)
def _add(ctx, g):
    return sum_to(g, ctx.shapes[0]), sum_to(g, ctx.shapes[1])


@twice(Sub)
def _sub(ctx, g):
    return sum_to(g, ctx.shapes[0]), sum_to(-g, ctx.shapes[1])


def _operands(ctx):
    """The two saved operands, as saved and as Tensors on the graph."""
    x, y = ctx.saved_tensors[:2]
    return x, y, ctx.graph_input(0, x), ctx.graph_input(1, y)


@twice(Mul)
def _mul(ctx, g):
    x, y, tx, ty = _operands(ctx)
    need_x, need_y = ctx.needs_input_grad
    return (sum_to(g * ty, shape_of(x)) if need_x else None,
            sum_to(g * tx, shape_of(y)) if need_y else None)


@twice(Div)
def _div(ctx, g):
    x, y, tx, ty = _operands(ctx)
    need_x, need_y = ctx.needs_input_grad
    return (sum_to(g / ty, shape_of(x)) if need_x else None,
            sum_to(-g * tx / (ty * ty), shape_of(y)) if need_y else None)


@twice(Pow)
def _pow(ctx, g):
    xp = ctx.xp
    x, y, tx, ty = _operands(ctx)
    need_x, need_y = ctx.needs_input_grad
    gx = gy = None
    if need_x:  # y * x**(y-1), 0 where y == 0
        gx = sum_to(where(_const(ctx, xp.equal(y, 0)), 0.0, g * ty * tx ** (ty - 1)), shape_of(x))
    if need_y:  # x**y * log(x), 0 where x == 0 and y >= 0
        log_x = tx.log() if isinstance(tx, Tensor) else math.log(tx)
        zero = _const(ctx, xp.logical_and(xp.equal(x, 0), xp.asarray(y) >= 0))
        gy = sum_to(where(zero, 0.0, g * ctx.graph_output(ctx.saved_tensors[2]) * log_x), shape_of(y))
    return gx, gy


@twice(Remainder)
def _remainder(ctx, g):
    x, y = ctx.saved_tensors
    gy = None
    if ctx.needs_input_grad[1]:
        gy = sum_to(-g * _const(ctx, ctx.xp.floor_divide(x, y), g._data.dtype), shape_of(y))
    return sum_to(g, shape_of(x)), gy


@twice(FloorDivide)
def _floor_divide(ctx, g):
    if ctx.mode == "floor_divide":
        raise RuntimeError("derivative for aten::floor_divide is not implemented")
    return tuple(None if s is None else _const(ctx, ctx.xp.zeros(s, dtype=g._data.dtype)) for s in ctx.shapes) + (None,)


@twice(Lerp)
def _lerp(ctx, g):
    start, end, weight = ctx.saved_tensors
    t_start, t_end, t_weight = (ctx.graph_input(i, v) for i, v in enumerate((start, end, weight)))
    g_weight = sum_to(g * (t_end - t_start), shape_of(weight)) if ctx.needs_input_grad[2] else None
    return sum_to(g * (1 - t_weight), shape_of(start)), sum_to(g * t_weight, shape_of(end)), g_weight


@twice(NanToNum)
def _nan_to_num(ctx, g):
    return g * _mask(ctx, ctx.xp.isfinite(ctx.saved_tensors[0]), g), None, None, None


@twice(Neg)
def _neg(ctx, g):
    return -g


@twice(Abs)
def _abs(ctx, g):
    return _scaled(ctx, g, sign_of(ctx.xp, ctx.saved_tensors[0]))


@twice(Reciprocal)
def _reciprocal(ctx, g):
    out = ctx.graph_output(ctx.saved_tensors[0])
    return -g * out * out


@twice(Maximum, Minimum)
def _maximum(ctx, g):
    xp = ctx.xp
    x, y = ctx.saved_tensors
    x_wins = (x > y) if type(ctx) is Maximum else (x < y)
    share = xp.where(x_wins, 1.0, xp.where(xp.equal(x, y), 0.5, 0.0))
    return sum_to(g * _mask(ctx, share, g), shape_of(x)), sum_to(g * _mask(ctx, 1 - share, g), shape_of(y))


@twice(Clamp)
def _clamp(ctx, g):
    x, lo, hi = ctx.saved_tensors
    g_lo = g_hi = None
    if ctx.needs_input_grad[1]:
        g_lo = sum_to(g * _mask(ctx, clamp_below(x, lo, hi), g), shape_of(lo))
    if ctx.needs_input_grad[2]:
        g_hi = sum_to(g * _mask(ctx, clamp_above(x, lo, hi), g), shape_of(hi))
    return g * _mask(ctx, clamp_inside(ctx.xp, x, lo, hi), g), g_lo, g_hi


@twice(Where)
def _where(ctx, g):
    cond = ctx.cond
    return (None, sum_to(g * _mask(ctx, cond, g), ctx.shapes[0]),
            sum_to(g * _mask(ctx, ctx.xp.logical_not(cond), g), ctx.shapes[1]))


@twice(_Stepwise)
def _stepwise(ctx, g):
    return _const(ctx, ctx.xp.zeros_like(g._data)), None


@twice(ScaledGrad)
def _scaled_grad(ctx, gg):
    return gg * _const(ctx, ctx.factor), _const(ctx, ctx.xp.zeros(*ctx.x_meta)), None


# ---- elementwise math ----

def _saved_input(ctx):
    return ctx.graph_input(0, ctx.saved_tensors[0])


def _saved_output(ctx):
    return ctx.graph_output(ctx.saved_tensors[0])


@twice(Exp)
def _exp(ctx, g):
    return g * _saved_output(ctx)


@twice(Expm1)
def _expm1(ctx, g):
    return g * (_saved_output(ctx) + 1)


@twice(Log)
def _log(ctx, g):
    return g / _saved_input(ctx)


@twice(Log1p)
def _log1p(ctx, g):
    return g / (_saved_input(ctx) + 1)


@twice(Sqrt)
def _sqrt(ctx, g):
    return g / (2 * _saved_output(ctx))


@twice(Rsqrt)
def _rsqrt(ctx, g):
    out = _saved_output(ctx)
    return -0.5 * g * out * out * out


@twice(Sin)
def _sin(ctx, g):
    return g * _saved_input(ctx).cos()


@twice(Cos)
def _cos(ctx, g):
    return -g * _saved_input(ctx).sin()


@twice(Erf)
def _erf(ctx, g):
    x = _saved_input(ctx)
    return g * (2 / math.sqrt(math.pi)) * (-x * x).exp()


@twice(Erfinv)
def _erfinv(ctx, g):
    y = _saved_output(ctx)
    return g * (math.sqrt(math.pi) / 2) * (y * y).exp()


@twice(Atanh)
def _atanh(ctx, g):
    x = _saved_input(ctx)
    return g / (1 - x * x)


@twice(Asin)
def _asin(ctx, g):
    x = _saved_input(ctx)
    return g / (1 - x * x).sqrt()


@twice(Acos)
def _acos(ctx, g):
    x = _saved_input(ctx)
    return -g / (1 - x * x).sqrt()


@twice(Atan)
def _atan(ctx, g):
    x = _saved_input(ctx)
    return g / (1 + x * x)


@twice(Tan)
def _tan(ctx, g):
    y = _saved_output(ctx)
    return g * (1 + y * y)


@twice(Sinh)
def _sinh(ctx, g):
    return g * _saved_input(ctx).cosh()


@twice(Cosh)
def _cosh(ctx, g):
    return g * _saved_input(ctx).sinh()


@twice(Lgamma)
def _lgamma(ctx, g):
    return g * _saved_input(ctx).digamma()


@twice(Logit)
def _logit(ctx, g):
    p, = ctx.saved_tensors
    tp = ctx.graph_input(0, p)
    grad = g / (tp * (1 - tp))
    if ctx.eps is None:
        return grad, None
    return where(_const(ctx, (p < ctx.eps) | (p > 1 - ctx.eps)), 0.0, grad), None


# ---- activations ----

@twice(Tanh)
def _tanh(ctx, g):
    y = _saved_output(ctx)
    return g * (1 - y * y)


@twice(Sigmoid)
def _sigmoid(ctx, g):
    y = _saved_output(ctx)
    return g * y * (1 - y)


@twice(Relu)
def _relu(ctx, g):
    return _scaled(ctx, g, ~(ctx.saved_tensors[0] <= 0))


@twice(LeakyRelu)
def _leaky_relu(ctx, g):
    return _scaled(ctx, g, ctx.xp.where(ctx.saved_tensors[0] > 0, 1.0, ctx.slope)), None


@twice(Hardtanh)
def _hardtanh(ctx, g):
    x, = ctx.saved_tensors
    lo, hi = ctx.args
    return _scaled(ctx, g, (x > lo) & (x < hi)), None, None


@twice(Threshold)
def _threshold(ctx, g):
    return _scaled(ctx, g, ctx.saved_tensors[0] > ctx.threshold), None, None


@twice(Hardsigmoid)
def _hardsigmoid(ctx, g):
    x, = ctx.saved_tensors
    return _scaled(ctx, g, ((x > -3) & (x < 3)) / 6)


@twice(Hardswish)
def _hardswish(ctx, g):
    x, = ctx.saved_tensors
    tx = ctx.graph_input(0, x)
    middle = (x >= -3) & (x <= 3)
    return g * (_mask(ctx, middle, g) * (tx / 3 + 0.5) + _mask(ctx, x > 3, g))


@twice(Elu)
def _elu(ctx, g):
    x, = ctx.saved_tensors
    alpha, scale, input_scale = ctx.args
    negative = g * (scale * alpha * input_scale) * (ctx.graph_input(0, x).clamp(max=0) * input_scale).exp()
    return where(_const(ctx, x > 0), g * scale, negative), None, None, None


@twice(Gelu)
def _gelu(ctx, g):
    x = _saved_input(ctx)
    if ctx.approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = (k * (x + c * x * x * x)).tanh()
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)), None
    cdf = 0.5 * (1 + (x * (1 / math.sqrt(2))).erf())
    pdf = (-0.5 * x * x).exp() * (1 / math.sqrt(2 * math.pi))
    return g * (cdf + x * pdf), None


@twice(Softplus)
def _softplus(ctx, g):
    x, = ctx.saved_tensors
    beta, threshold = ctx.params
    linear = _const(ctx, x * x.dtype.type(beta) > threshold)
    return where(linear, g, g * (ctx.graph_input(0, x) * beta).sigmoid()), None, None


@twice(Silu)
def _silu(ctx, g):
    x = _saved_input(ctx)
    s = x.sigmoid()
    return g * s * (1 + x * (1 - s))


@twice(Mish)
def _mish(ctx, g):
    x = _saved_input(ctx)
    t = softplus(x).tanh()
    return g * (t + x * x.sigmoid() * (1 - t * t))


@twice(Softmax)
def _softmax(ctx, g):
    y = _saved_output(ctx)
    return y * (g - (g * y).sum(dim=ctx.dim, keepdim=True)), None


@twice(LogSoftmax)
def _log_softmax(ctx, g):
    y = _saved_output(ctx)
    return g - y.exp() * g.sum(dim=ctx.dim, keepdim=True), None


# ---- matrix products ----

@twice(MatMul)
def _matmul(ctx, g):
    a, b = ctx.saved_tensors
    ta, tb = ctx.graph_input(0, a), ctx.graph_input(1, b)
    need_a, need_b = ctx.needs_input_grad
    if a.ndim == 1 and b.ndim == 1:  # a dot product: g is 0-d
        return (g * tb if need_a else None), (g * ta if need_b else None)
    a2 = ta.reshape(1, -1) if a.ndim == 1 else ta
    b2 = tb.reshape(-1, 1) if b.ndim == 1 else tb
    g2 = g.unsqueeze(-2) if a.ndim == 1 else g
    g2 = g2.unsqueeze(-1) if b.ndim == 1 else g2
    ga = sum_to(g2 @ b2.transpose(-1, -2), tuple(a2.shape)).reshape(a.shape) if need_a else None
    gb = sum_to(a2.transpose(-1, -2) @ g2, tuple(b2.shape)).reshape(b.shape) if need_b else None
    return ga, gb


@twice(Linear)
def _linear(ctx, g):
    x, w = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad
    g2 = g.reshape(-1, g.shape[-1])
    return (g @ ctx.graph_input(1, w) if need_x else None,
            g2.transpose(0, 1) @ ctx.graph_input(0, x).reshape(-1, x.shape[-1]) if need_w else None,
            g2.sum(dim=0) if need_b else None)


@twice(Einsum)
def _einsum(ctx, g):
    operands = ctx.saved_tensors
    inputs, output = ctx.args
    on_graph = [ctx.graph_input(k, x) for k, x in enumerate(operands)]
    grads = [None] * len(operands)
    for k, others, present in einsum_grad_terms(inputs, output, ctx.needs_input_grad):
        x = operands[k]
        partial = Einsum.apply(g, *[t for j, t in enumerate(on_graph) if j != k], inputs=[output] + others,
                               output=present)
        partial = partial.reshape(einsum_unreduced_shape(tuple(partial.shape), present, inputs[k]))
        grad = sum_to(partial.expand(np.broadcast_shapes(tuple(partial.shape), x.shape)), x.shape)
        grads[k] = grad if grad._data.dtype == x.dtype else Cast.apply(grad, x.dtype)
    return tuple(grads)


# ---- reductions ----

@twice(Sum)
def _sum(ctx, g):
    shape, dims, keepdim = ctx.args
    g = _keep_dims(g, shape, dims, keepdim).expand(shape)
    return (g if g._data.dtype == ctx.in_dtype else Cast.apply(g, ctx.in_dtype)), None, None, None


@twice(Mean)
def _mean(ctx, g):
    shape, dims, keepdim = ctx.args
    return (_keep_dims(g, shape, dims, keepdim) / max(ctx.count, 1)).expand(shape), None, None, None


@twice(LogSumExp)
def _logsumexp(ctx, g):
    x, out = ctx.saved_tensors
    dims, keepdim = ctx.args
    shown = out if keepdim else out.reshape([s for d, s in enumerate(out.shape) if d not in dims])
    out = _keep_dims(ctx.graph_output(shown), x.shape, dims, keepdim)
    return _keep_dims(g, x.shape, dims, keepdim) * (ctx.graph_input(0, x) - out).exp(), None, None


@twice(Norm)
def _norm(ctx, g):
    xp = ctx.xp
    x, = ctx.saved_tensors
    p, dims, keepdim = ctx.args
    if p == 0:
        return _const(ctx, xp.zeros_like(x)), None, None, None
    norm = _keep_dims(ctx.graph_output(ctx.out), x.shape, dims, keepdim)
    g = _keep_dims(g, x.shape, dims, keepdim)
    tx = ctx.graph_input(0, x)
    scaled = tx if p == 2 else _const(ctx, sign_of(xp, x)) * tx.abs() ** (p - 1)
    zero = _const(ctx, xp.broadcast_to(_keep_dims(ctx.out, x.shape, dims, keepdim) == 0, x.shape))
    return where(zero, 0.0, scaled * g / norm ** (p - 1)), None, None, None


@twice(Amax)
def _amax(ctx, g):
    x, out = ctx.saved_tensors
    dims, keepdim = ctx.args
    hit = x == _keep_dims(out, x.shape, dims, keepdim)
    share = hit / hit.sum(axis=dims, keepdims=True)
    return _keep_dims(g, x.shape, dims, keepdim) * _mask(ctx, share, g), None, None


@twice(Var)
def _var(ctx, g):
    diff, = ctx.saved_tensors
    dims, keepdim, denom = ctx.args
    x = ctx.graph_input(0, diff + ctx.center)
    scale = 2.0 / denom if denom else math.inf
    return _keep_dims(g, diff.shape, dims, keepdim) * ((x - x.mean(dim=dims, keepdim=True)) * scale), None, None, None


@twice(Std)
def _std(ctx, g):
    std = ctx.std
    return _var(ctx, where(_const(ctx, std == 0), 0.0, g / (2 * ctx.graph_output(std))))


@twice(CumSum)
def _cumsum(ctx, g):
    d = (ctx.dim,)
    out = g.flip(d).cumsum(ctx.dim).flip(d)
    return (out if out._data.dtype == ctx.in_dtype else Cast.apply(out, ctx.in_dtype)), None, None


def _summed(t, dims):
    """``t`` summed over ``dims`` (unchanged for none: ``sum(dim=())`` would sum everything)."""
    return t.sum(dim=dims) if dims else t


@twice(Normalize)
def _normalize(ctx, g, *_):
    xhat, rstd, w = ctx.saved_tensors
    axes, param_shape, vector_shape = ctx.args
    mean, eps = ctx.stats
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    x = ctx.graph_input(0, xhat / rstd + mean)
    diff = x - x.mean(dim=axes, keepdim=True)
    inv_std = ((diff * diff).mean(dim=axes, keepdim=True) + eps).rsqrt()  # rstd and xhat, on the graph
    normed = diff * inv_std
    lead = g.ndim - len(param_shape)
    others = tuple(d for d in range(g.ndim) if d < lead or param_shape[d - lead] == 1)
    gx = gw = gb = None
    if need_w:
        gw = _summed(g * normed, others).reshape(vector_shape)
    if need_b:
        gb = _summed(g, others).reshape(vector_shape)
    if need_x:
        g_normed = g if w is None else g * ctx.graph_input(1, w).reshape(param_shape)
        gx = inv_std * (g_normed - g_normed.mean(dim=axes, keepdim=True)
                        - normed * (g_normed * normed).mean(dim=axes, keepdim=True))
    return gx, gw, gb, None, None, None


# ---- losses ----

@twice(NllLoss)
def _nll_loss(ctx, g):
    xp = ctx.xp
    logp, weight = ctx.saved_tensors
    t, valid, wt, smoothing, scale, from_logits = ctx.args
    n_classes = logp.shape[1]
    per_sample = g if scale is None else g * _const(ctx, scale, g._data.dtype)
    per_sample = per_sample.unsqueeze(1) if per_sample.ndim else per_sample
    classes = xp.arange(n_classes).reshape((1, -1) + (1,) * (logp.ndim - 2))
    coef = (classes == t[:, None]) * -(wt * (1 - smoothing))[:, None]  # d loss / d logp per unit of per_sample
    if smoothing:
        spread = (valid * (smoothing / n_classes))[:, None]
        coef = coef - (spread if weight is None else spread * weight.reshape(classes.shape))
    grad = per_sample * _const(ctx, coef, g._data.dtype)
    if from_logits:
        # softmax of the input, on the graph: logp differs from the logits by a constant per sample, which softmax
        # ignores, so it stands in for their value
        grad = grad - softmax(ctx.graph_input(0, logp), 1) * grad.sum(dim=1, keepdim=True)
    return grad, None, None, None, None, None, None


@twice(BinaryCrossEntropy)
def _binary_cross_entropy(ctx, g):
    x, t = ctx.saved_tensors
    tx, tt = ctx.graph_input(0, x), ctx.graph_input(1, t)
    gx = gt = None
    if ctx.needs_input_grad[0]:
        gx = g * (tx - tt) / (tx * (1 - tx)).clamp(min=1e-12)
    if ctx.needs_input_grad[1]:
        gt = g * ((1 - tx).log().clamp(min=-100) - tx.log().clamp(min=-100))
    return gx, gt


# ---- convolution: its two gradients as ops, each differentiable through the other and Conv2d ----
# ``geometry`` is the Conv2d node's ctx.args (layout, input shape, padded shape, then stride, pads,
# dilation, groups, out_size), the same for every derivative of one convolution.

def _conv_node(ctx, needs):
    """A fresh Conv2d node for running its forward and backward on arrays."""
    node = Conv2d()
    node.be = ctx.be
    node.needs_input_grad = needs
    return node


def _conv_forward(ctx, x, w, geometry, needs=(False, False, False)):
    """(conv2d(x, w) without bias, the node that ran it)."""
    node = _conv_node(ctx, needs)
    return Conv2d.forward(node, x, w, None, *geometry[-5:]), node


def _conv_input_grad(ctx, g, w, geometry):
    """The gradient of a convolution's input from its output's gradient g (a transposed convolution)."""
    node = _conv_node(ctx, (True, False, False))
    node.args = geometry
    node._saved = (None, w)
    return Conv2d.backward(node, g)[0]


def _conv_weight_grad(ctx, x, g, w_shape, geometry):
    """The gradient of a convolution's weight from its input x and its output's gradient g."""
    _, node = _conv_forward(ctx, x, ctx.xp.zeros(w_shape, dtype=g.dtype), geometry, (False, True, False))
    return Conv2d.backward(node, g)[1]


class ConvInputGrad(Op):
    """Conv2d's input gradient from (g, w), recorded; its gradients: conv2d(gg, w) for g, the weight
    gradient of gg against g for w."""
    @staticmethod
    def forward(ctx, g, w, geometry):
        ctx.geometry = geometry
        ctx.save_for_backward(g, w)
        return _conv_input_grad(ctx, g, w, geometry)

    @staticmethod
    def backward(ctx, gg):
        g, w = ctx.saved_tensors
        need_g, need_w = ctx.needs_input_grad[:2]
        return (_conv_forward(ctx, gg, w, ctx.geometry)[0] if need_g else None,
                _conv_weight_grad(ctx, gg, g, w.shape, ctx.geometry) if need_w else None, None)


class ConvWeightGrad(Op):
    """Conv2d's weight gradient from (x, g), recorded; its gradients: the input gradient of g against gg
    for x, conv2d(x, gg) for g."""
    @staticmethod
    def forward(ctx, x, g, w_shape, geometry):
        ctx.geometry = geometry
        ctx.save_for_backward(x, g)
        return _conv_weight_grad(ctx, x, g, w_shape, geometry)

    @staticmethod
    def backward(ctx, gg):
        x, g = ctx.saved_tensors
        need_x, need_g = ctx.needs_input_grad[:2]
        return (_conv_input_grad(ctx, g, gg, ctx.geometry) if need_x else None,
                _conv_forward(ctx, x, gg, ctx.geometry)[0] if need_g else None, None, None)


@twice(Conv2d)
def _conv2d(ctx, g):
    _, w = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    geometry = ctx.args
    tw = ctx.graph_input(1, w)
    gx = ConvInputGrad.apply(g, tw, geometry) if need_x else None
    gw = ConvWeightGrad.apply(ctx.graph_input(0, ctx.input), g, w.shape, geometry) if need_w else None
    gb = g.sum(dim=(0, 2, 3)) if need_b else None
    return gx, gw, gb, None, None, None, None, None


@twice(ConvInputGrad)
def _conv_input_grad_twice(ctx, gg):
    g, w = ctx.saved_tensors
    tg, tw = ctx.graph_input(0, g), ctx.graph_input(1, w)
    return (Conv2d.apply(gg, tw, None, *ctx.geometry[-5:]),
            ConvWeightGrad.apply(gg, tg, w.shape, ctx.geometry), None)


@twice(ConvWeightGrad)
def _conv_weight_grad_twice(ctx, gg):
    x, g = ctx.saved_tensors
    tx, tg = ctx.graph_input(0, x), ctx.graph_input(1, g)
    return ConvInputGrad.apply(tg, gg, ctx.geometry), Conv2d.apply(tx, gg, None, *ctx.geometry[-5:]), None, None
