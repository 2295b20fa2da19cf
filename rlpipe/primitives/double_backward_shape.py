"""Double backward, continued: shape ops, indexing, views, padding and device copies (see ``double_backward``).

Their backwards are linear in the gradient, so each ``backward_graph`` restates the backward with Tensor ops;
where the backward scatters (indexing, gather, padding) a small Function records the scatter and takes the
original gather as its own gradient.
"""
from .common import AsView, Cast, ViewUpdate
from .conversion import ToDevice, _to_device
from .double_backward import _const, _scratch, sum_to, twice
from .indexing import Embedding, Gather, Index, IndexAdd, IndexPut, IndexSelect, Scatter
from .linalg import DiagEmbed
from .base import Op, along_dim
from .reductions import ExtremeAlongDim
from .sorting import Sort
from .windows import AvgPool2d, MaxPool2d, _padded, _windows
from .shape import (Cat, Clone, Diagonal, Expand, Flip, Pad, Permute, Repeat, Reshape, Roll, Split, Stack, Triangle,
                    _diagonal_of, cat, stack)


# ---- shapes ----

@twice(Reshape)
def _reshape(ctx, g):
    return g.reshape(ctx.shape), None


@twice(Permute)
def _permute(ctx, g):
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return g.permute(inverse), None


@twice(Expand)
def _expand(ctx, g):
    return sum_to(g, ctx.shape), None


@twice(Flip)
def _flip(ctx, g):
    return g.flip(ctx.dims), None


@twice(Repeat)
def _repeat(ctx, g):
    in_shape, shape, repeats = ctx.args
    split = []
    for r, s in zip(repeats, shape):
        split += [r, s]
    return g.reshape(split).sum(dim=tuple(range(0, len(split), 2))).reshape(in_shape), None


@twice(Roll)
def _roll(ctx, g):
    shifts, dims = ctx.args
    back = tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts
    return g.roll(back, dims), None, None


@twice(Triangle)
def _triangle(ctx, g):
    diagonal, upper = ctx.args
    return (g.triu(diagonal) if upper else g.tril(diagonal)), None, None


@twice(Pad)
def _pad(ctx, g):
    _, pads, mode = ctx.args
    return Adjoint.apply(g, ctx, Pad, (pads, mode, 0.0)), None, None, None


@twice(ToDevice)
def _to_device_twice(ctx, g):
    return _to_device(g, ctx.source), None, None


@twice(Clone)
def _clone(ctx, g):
    return g, None


@twice(Cast)
def _cast(ctx, g):
    return Cast.apply(g, ctx.dtype), None


@twice(Cat)
def _cat(ctx, g):
    pieces, at = [], 0
    for n in ctx.sizes:
        pieces.append(g.narrow(ctx.dim, at, n))
        at += n
    return tuple(pieces)


@twice(Stack)
def _stack(ctx, g):
    return tuple(g.unbind(ctx.dim))


@twice(Split)
def _split(ctx, *grads):
    dim, squeeze = ctx.args
    return (stack(grads, dim) if squeeze else cat(grads, dim)), None, None, None


class IndexBackward(Op):
    """Index's gradient, g scattered (added) into zeros of the input's shape; its own gradient indexes again."""
    @staticmethod
    def forward(ctx, g, shape, index, advanced):
        ctx.args = index, advanced
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        if advanced:
            ctx.be.scatter_add(out, index, g)
        else:
            out[index] = g
        return out

    @staticmethod
    def backward(ctx, gg):
        index, advanced = ctx.args
        return Index.forward(_scratch(ctx), gg, index, advanced), None, None, None


@twice(IndexBackward)
def _index_backward(ctx, gg):
    index, advanced = ctx.args
    return Index.apply(gg, index, advanced), None, None, None


@twice(Index)
def _index(ctx, g):
    shape, _, index, advanced = ctx.args
    return IndexBackward.apply(g, shape, index, advanced), None, None


@twice(AsView)
def _as_view(ctx, g):
    shape, view_fn = ctx.args
    return AsViewBackward.apply(g, shape, view_fn), None


@twice(ViewUpdate)
def _view_update(ctx, g):
    view_fn, value_shape = ctx.args
    outside = ctx.xp.ones(g.shape, dtype=g._data.dtype)
    view_fn(outside)[...] = 0
    return g * _const(ctx, outside), sum_to(AsView.apply(g, view_fn), value_shape), None


class AsViewBackward(Op):
    """AsView's gradient, g written into the viewed part of zeros; its own gradient takes the view again."""
    @staticmethod
    def forward(ctx, g, shape, view_fn):
        ctx.view_fn = view_fn
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        view_fn(out)[...] = g
        return out

    @staticmethod
    def backward(ctx, gg):
        return ctx.view_fn(gg).copy(), None, None


@twice(AsViewBackward)
def _as_view_backward(ctx, gg):
    return AsView.apply(gg, ctx.view_fn), None, None


class GatherBackward(Op):
    """Gather's gradient, g scatter-added along ``dim``; its own gradient gathers again."""
    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.args = dim, index
        out = ctx.xp.zeros(shape, dtype=g.dtype)
        ctx.be.scatter_add(out, along_dim(ctx.xp, index, dim), g)
        return out

    @staticmethod
    def backward(ctx, gg):
        dim, index = ctx.args
        return Gather.forward(_scratch(ctx), gg, dim, index), None, None, None


@twice(GatherBackward)
def _gather_backward(ctx, gg):
    dim, index = ctx.args
    return Gather.apply(gg, dim, index), None, None, None


@twice(Gather)
def _gather(ctx, g):
    shape, dim, index = ctx.args
    return GatherBackward.apply(g, shape, dim, index), None, None


@twice(IndexSelect)
def _index_select(ctx, g):
    shape, dim, index = ctx.args
    along = index.reshape([-1 if d == dim else 1 for d in range(len(shape))])
    return GatherBackward.apply(g, shape, dim, ctx.xp.broadcast_to(along, g.shape)), None, None


@twice(Embedding)
def _embedding(ctx, g):
    xp = ctx.xp
    shape, indices, padding_idx, by_freq = ctx.args
    flat = indices.reshape(-1)
    rows = g.reshape(-1, shape[1])
    if by_freq:
        rows = rows / _const(ctx, xp.bincount(flat, minlength=shape[0])[flat][:, None], g._data.dtype)
    weight_grad = IndexBackward.apply(rows, shape, (flat,), True)
    if padding_idx is None or padding_idx < 0:
        return weight_grad, None, None, None
    keep = xp.ones((shape[0], 1), dtype=g._data.dtype)
    keep[padding_idx] = 0
    return weight_grad * _const(ctx, keep), None, None, None


class Adjoint(Op):
    """A linear op's gradient, ``node``'s own backward of g, recorded as an op; its gradient is the adjoint of that
    backward, which for a linear op is the op again: ``op`` applied with ``args`` (Pad with a zero fill)."""
    @staticmethod
    def forward(ctx, g, node, op, args):
        ctx.op, ctx.args = op, args
        return type(node).backward(node, g)[0]

    @staticmethod
    def backward(ctx, gg):
        return ctx.op.forward(_scratch(ctx), gg, *ctx.args), None, None, None


@twice(Adjoint)
def _adjoint(ctx, gg):
    return ctx.op.apply(gg, *ctx.args), None, None, None


@twice(ExtremeAlongDim)
def _extreme_along_dim(ctx, g, _):
    shape, dim, keepdim, idx = ctx.args
    return GatherBackward.apply(g if keepdim else g.unsqueeze(dim), shape, dim, idx), None, None, None


@twice(Sort)
def _sort(ctx, g, _):
    shape, dim, idx = ctx.args
    return GatherBackward.apply(g, shape, dim, idx), None, None, None


class MaxPoolPick(Op):
    """Each max-pool window's element at the position the pooling picked (``node``'s argmax), read from x: the
    adjoint of max pooling's gradient scatter, and its gradient that scatter."""
    @staticmethod
    def forward(ctx, x, node):
        ctx.node = node
        _, _, (kh, kw), stride, pads, dilation, out_size, arg = node.args
        win = _windows(ctx.xp, _padded(ctx.xp, x, pads), (kh, kw), stride, dilation, out_size, "NCHWij")
        win = win.reshape(win.shape[:4] + (kh * kw,))
        return ctx.xp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]

    @staticmethod
    def backward(ctx, g):
        return MaxPool2d.backward(ctx.node, g)[0], None


@twice(MaxPoolPick)
def _max_pool_pick(ctx, g):
    return Adjoint.apply(g, ctx.node, MaxPoolPick, (ctx.node,)), None


@twice(MaxPool2d)
def _max_pool(ctx, g, *_):
    return (Adjoint.apply(g, ctx, MaxPoolPick, (ctx,)),) + (None,) * 6


@twice(AvgPool2d)
def _avg_pool(ctx, g):
    _, _, kernel, stride, pads, out_size, _ = ctx.args
    return (Adjoint.apply(g, ctx, AvgPool2d, (kernel, stride, pads, out_size) + ctx.settings),) + (None,) * 6


def _without(ctx, g, index):
    """g with the positions ``index`` picks set to zero (they were overwritten), as a constant factor."""
    keep = ctx.xp.ones(g.shape, dtype=g._data.dtype)
    keep[index] = 0
    return g * _const(ctx, keep)


def _picked(g, index):
    """g[index] (any index), recorded: Index without the advanced scatter, so its gradient writes back."""
    return Index.apply(g, index, False)


@twice(IndexPut)
def _index_put(ctx, g):
    index, value_shape = ctx.args
    return _without(ctx, g, index), sum_to(_picked(g, index), value_shape), None


@twice(Scatter)
def _scatter(ctx, g):
    where, add, src_shape, used = ctx.args
    g_src = None
    if src_shape is not None and ctx.needs_input_grad[3]:
        g_src = IndexBackward.apply(_picked(g, where), src_shape, used, False)
    return (g if add else _without(ctx, g, where)), None, None, g_src, None


@twice(IndexAdd)
def _index_add(ctx, g):
    dim, index, alpha = ctx.args
    g_source = IndexSelect.apply(g, dim, index) * alpha if ctx.needs_input_grad[3] else None
    return g, None, None, g_source, None, None


@twice(Diagonal)
def _diagonal(ctx, g):
    shape, offset, dim1, dim2 = ctx.args
    xp = ctx.xp
    return AsViewBackward.apply(g, shape, lambda a: _diagonal_of(xp, a, offset, dim1, dim2)), None, None, None


@twice(DiagEmbed)
def _diag_embed(ctx, g):
    offset, dim1, dim2 = ctx.args
    return Diagonal.apply(g, offset, dim1, dim2), None, None, None
