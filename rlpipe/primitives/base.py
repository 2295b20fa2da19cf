"""What every primitive shares: ``Op`` and the helpers for broadcasting and indexing gradients.

A primitive is a small ``Function`` over backend arrays. ``forward(ctx, ...)`` receives NumPy or
CuPy arrays (and plain Python values) and uses ``ctx.xp`` (the array namespace) or ``ctx.be`` (the
backend: ``scatter_add``, ``erf``; fused kernels come from ``rlpipe.kernels``), so the same code runs on both devices.
``Function.apply`` and the backward walk run them with NumPy's floating-point warnings off: inf and
nan come out as in torch, and a formula may divide by zero where its result is masked out.
``backward(ctx, grad)`` returns one gradient per forward argument (None where the argument needs
none). Promotion, argument checking and views are handled by the callers: the public ops below
the Functions in each family's module (with ``common``'s helpers) and ``nn/functional.py``.
"""
from ..autograd.function import Function


class Op(Function):
    """A built-in primitive: a Function whose forward and backward take and return backend arrays (``raw``)."""
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
    """The shape of a backend array, or None for a Python number operand."""
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


def sign_of(xp, x):
    """-1, 0 or 1; 0 for nan (torch's sgn)."""
    s = xp.sign(x)
    return xp.where(s != s, 0, s).astype(s.dtype, copy=False) if s.dtype.kind == "f" else s
