"""Running and integrated quantities along a dimension: logcumsumexp (the ``LogCumSumExp``
Function, stable for any spread of values), trapezoid/trapz and cumulative_trapezoid (trapezoidal
rule, compositions), gradient (numpy.gradient's differences, a composition) and dist (the p-norm
of a difference).
"""
import builtins
import math

from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method
from .base import Op
from .common import _LEGACY_TYPE_NAMES, _cast, _float_input, with_out
from .elementwise import abs, div, mul, sub
from .reductions import amax, cumsum, norm, sum
from .shape import cat, narrow


__all__ = ["LogCumSumExp", "logcumsumexp", "trapezoid", "trapz", "cumulative_trapezoid", "dist", "gradient"]


class LogCumSumExp(Op):
    """log(cumsum(exp(x))) along ``dim``, as a running logaddexp (no overflow, no loss of small
    terms). Backward runs the other way: grad_j = exp(x_j - out_j) * T_j with
    T_j = g_j + exp(out_j - out_{j+1}) * T_{j+1}, every factor at most 1 (out never decreases)."""

    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        moved = xp.moveaxis(x, dim, 0)
        out = xp.empty_like(moved)
        running = None
        for k in range(moved.shape[0]):
            running = moved[k] if running is None else xp.logaddexp(running, moved[k])
            out[k] = running
        out = xp.moveaxis(out, 0, dim)
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, out = ctx.saved_tensors
        x, out, g = (xp.moveaxis(a, ctx.dim, 0) for a in (x, out, g))
        grad = xp.empty_like(g)
        carry = None
        for k in range(g.shape[0] - 1, -1, -1):
            carry = g[k] if carry is None else g[k] + xp.exp(out[k] - out[k + 1]) * carry
            # where out is -inf the whole prefix is -inf: nothing flows back (torch gives 0 too)
            grad[k] = xp.where(xp.isneginf(out[k]), 0, xp.exp(x[k] - out[k]) * carry)
        return xp.moveaxis(grad, 0, ctx.dim), None


@with_out("input")
@tensor_method
def logcumsumexp(input, dim):
    """``log(cumsum(exp(input), dim))`` computed without overflow; float tensors only."""
    if not input.is_floating_point():
        name = _LEGACY_TYPE_NAMES[input.dtype.name]
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for \'{name}\'')
    d = input._dim(dim)
    if input.ndim == 0:
        return input.clone()
    return LogCumSumExp.apply(input, d)


def _spacing(y, x, dx, d, name):
    """The widths of the trapezoids along dim ``d``: ``dx`` (a number), or the differences of ``x``
    (1-d, or broadcast against y)."""
    if x is None:
        return 1 if dx is None else dx
    if dx is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, x=Tensor, dx="
                        f"{type(dx).__name__}): give either x or dx")
    n = x.shape[-1] if x.ndim == 1 else x.shape[d]
    if n != y.shape[d]:
        raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
    if x.ndim == 1:
        widths = sub(narrow(x, 0, 1, n - 1), narrow(x, 0, 0, n - 1))
        return widths.reshape([-1] + [1] * (y.ndim - 1 - d)) if d != y.ndim - 1 else widths
    return sub(narrow(x, d, 1, n - 1), narrow(x, d, 0, n - 1))


def _trapezoids(y, x, dx, dim, name):
    """The area of each trapezoid between neighbouring samples of ``y`` along ``dim``, and that dim."""
    if y.ndim == 0:
        raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    y = _float_input(y)
    d = y._dim(dim)
    widths = _spacing(y, x, dx, d, name)
    n = y.shape[d]
    if n == 0:
        return narrow(y, d, 0, 0), d
    mean_heights = div(narrow(y, d, 1, n - 1) + narrow(y, d, 0, n - 1), 2)
    return mul(mean_heights, widths), d


@torch_function("y")
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal-rule integral of ``y`` along ``dim``, with sample points ``x`` or a uniform
    spacing ``dx`` (1 by default)."""
    areas, d = _trapezoids(y, x, dx, dim, "trapezoid")
    return sum(areas, d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """``trapezoid``'s older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


@torch_function("y")
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal-rule integral of ``y`` along ``dim`` (one value fewer than y)."""
    areas, d = _trapezoids(y, x, dx, dim, "cumulative_trapezoid")
    return cumsum(areas, d)


@torch_function("input", "other")
@tensor_method
def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast) over all elements: p = 0 counts the nonzero
    differences, p = inf takes the largest. Float tensors only."""
    if not isinstance(other, Tensor):
        raise TypeError(f"dist(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    diff = sub(input, other)
    if not diff.is_floating_point():
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got "
                           f"{_LEGACY_TYPE_NAMES[diff.dtype.name]} instead.")
    p = builtins.float(p)
    if p == 0:
        return _cast(sum(diff != 0), diff.dtype)
    if p == math.inf:
        return amax(abs(diff)) if diff.numel() else sum(diff) * 0
    return norm(diff, p)



def _gradient_dims(input, dim):
    """The dims ``gradient`` differentiates along (all by default), checked for repeats."""
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, builtins.int) else list(dim)
    dims = [input._dim(d) for d in dims]
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims


def _gradient_spacings(input, spacing, dims, dim):
    """One spacing per dim: a number (uniform) or a 1-d tensor of coordinates."""
    if not isinstance(spacing, (list, tuple)):
        return [spacing] * len(dims)
    if len(spacing) != len(dims):
        expected = f"'self.dim() = {input.ndim}', since dim argument was not given" if dim is None else \
            f"'len(dim) = {len(dims)}'"
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal to "
                           f"{expected}, but got a list of length {len(spacing)}")
    return list(spacing)


def _derivative_along(f, d, spacing, edge_order):
    """numpy.gradient's second-order accurate differences of ``f`` along dim ``d`` (one-sided, of
    order ``edge_order``, at the two ends), for coordinates or a uniform spacing."""
    from rlpipe._creation import arange
    n = f.shape[d]
    coords = spacing if isinstance(spacing, Tensor) else arange(n, dtype=f.dtype, device=f.device) * spacing
    coords = _cast(coords, f.dtype) if coords.dtype is not f.dtype else coords
    steps = sub(narrow(coords, 0, 1, n - 1), narrow(coords, 0, 0, n - 1)).reshape([-1] + [1] * (f.ndim - 1 - d))

    def at(start, length=1):
        return narrow(f, d, start, length)

    def step(start, length=1):
        return narrow(steps, 0, start, length)

    hd, hs = step(0, n - 2), step(1, n - 2)
    inner = (hd * hd * at(2, n - 2) + (hs * hs - hd * hd) * at(1, n - 2) - hs * hs * at(0, n - 2)) / (
        hs * hd * (hd + hs))
    if edge_order == 1:
        first = (at(1) - at(0)) / step(0)
        last = (at(n - 1) - at(n - 2)) / step(n - 2)
    else:  # the second-order one-sided formulas, from the first (last) three points
        a, b = step(0), step(1)
        first = (-(2 * a + b) / (a * (a + b))) * at(0) + ((a + b) / (a * b)) * at(1) - (a / (b * (a + b))) * at(2)
        a, b = step(n - 3), step(n - 2)
        last = (b / (a * (a + b))) * at(n - 3) - ((a + b) / (a * b)) * at(n - 2) + (
            (2 * b + a) / (b * (a + b))) * at(n - 1)
    return cat([first, inner, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative estimates of ``input`` along each of ``dim`` (all dims by default), one tensor per
    dim: central differences inside, one-sided ones of order ``edge_order`` (1 or 2) at the ends;
    ``spacing`` is a number, or per dim a number or a 1-d tensor of sample coordinates."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = _gradient_dims(input, dim)
    spacings = _gradient_spacings(input, spacing, dims, dim)
    f = _float_input(input)
    for d in dims:
        if f.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    return tuple(_derivative_along(f, d, s, edge_order) for d, s in zip(dims, spacings))
