"""Reading and writing by index: x[index], index_put, gather, scatter, index_select, embedding.
"""
import numpy as np

from ..backends.cpu import along
from .base import Op, unbroadcast, shape_of, along_dim


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
        ctx.be.scatter_add(out, along(index, dim), g)
        return out, None, None


class Embedding(Op):
    """Rows of ``weight`` picked by integer ``indices``; the row at ``padding_idx`` gets no gradient,
    and ``scale_grad_by_freq`` divides each row's gradient by how often it was picked."""
    node_name = "EmbeddingBackward0"

    @staticmethod
    def forward(ctx, weight, indices, padding_idx, scale_grad_by_freq):
        ctx.args = weight.shape, indices, padding_idx, scale_grad_by_freq
        return weight[indices]

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        shape, indices, padding_idx, by_freq = ctx.args
        flat = indices.reshape(-1)
        rows = g.reshape(-1, shape[1])
        if by_freq:
            counts = xp.bincount(flat, minlength=shape[0])
            rows = rows / counts[flat].astype(g.dtype)[:, None]
        gw = xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(gw, flat, rows)
        if padding_idx is not None and padding_idx >= 0:
            gw[padding_idx] = 0
        return gw, None, None, None


def index_add_into(be, target, dim, positions, values, in_float32=False):
    """``be.index_add`` of ``values`` into ``target``, each repeated position added in turn and
    rounded to the target's dtype; ``in_float32``: the sums of a float16/bfloat16 target taken in
    float32 and rounded once (torch's CPU kernel for 2+-dim tensors along the first or last dim,
    int64 positions and alpha 1, where it adds through scatter_add)."""
    if not in_float32:
        be.index_add(target, dim, positions, values)
        return
    sums = target.astype(np.float32)
    be.index_add(sums, dim, positions, values.astype(np.float32))
    target[...] = sums


class IndexAdd(Op):
    """A copy of x with ``alpha * source`` added at the positions ``index`` picks along ``dim``
    (repeated positions accumulate; see ``index_add_into`` for ``in_float32``)."""

    @staticmethod
    def forward(ctx, x, dim, index, source, alpha, in_float32=False):
        out = x.copy()
        index_add_into(ctx.be, out, dim, index, source if alpha == 1 else source * x.dtype.type(alpha), in_float32)
        ctx.args = dim, index, alpha
        return out

    @staticmethod
    def backward(ctx, g):
        dim, index, alpha = ctx.args
        g_source = ctx.xp.take(g, index, axis=dim) if ctx.needs_input_grad[3] else None
        if g_source is not None and alpha != 1:
            g_source = g_source * alpha
        return g, None, None, g_source, None
