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
    added, kept = broadcast_axes(g.shape, shape)
    g = g.sum(axis=added) if added else g
    return g.sum(axis=kept, keepdims=True) if kept else g


def broadcast_axes(g_shape, shape):
    """The axes a gradient of ``g_shape`` sums over to get back to ``shape``: those broadcasting added in
    front, and (counted after those are gone) those where ``shape`` has size 1 and the gradient does not."""
    added = len(g_shape) - len(shape)
    kept = tuple(i for i, s in enumerate(shape) if s == 1 and g_shape[added + i] != 1)
    return tuple(range(added)), kept


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


def in_tensor_dtype(xp, x, y):
    """``x`` and ``y`` as arrays of one dtype, the tensor's where one of them is a Python number (x's otherwise)."""
    dtype = (y if shape_of(x) is None else x).dtype
    return xp.asarray(x, dtype=dtype), xp.asarray(y, dtype=dtype)
