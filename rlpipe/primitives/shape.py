"""Shape and layout (reshape, permute, expand, repeat, flip, roll, cat, stack, split, pad), casts,
copies between devices, and the nodes behind views updated in place.
"""
from .base import Op, unbroadcast


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


def _source_positions(xp, n, before, after, mode):
    """For each position along a padded axis, the input position it copies (reflect, replicate,
    circular); negative ``before``/``after`` crop."""
    pos = xp.arange(-before, n + after)
    if mode == "reflect":
        pos = xp.abs(pos)
        return xp.where(pos >= n, 2 * (n - 1) - pos, pos)
    if mode == "replicate":
        return xp.clip(pos, 0, n - 1)
    return pos % n  # circular


class Pad(Op):
    """Pads (or, with negative amounts, crops) the trailing dims. ``pads`` holds one (before, after)
    pair per dim from the first padded dim on. 'constant' fills with ``value``; the other modes copy
    input positions along each padded axis in turn, and backward adds the copies back."""
    node_name = "PadBackward0"

    @staticmethod
    def forward(ctx, x, pads, mode, value):
        xp = ctx.xp
        first = x.ndim - len(pads)
        ctx.args = x.shape, pads, mode
        if mode == "constant":
            shape = x.shape[:first] + tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[first:], pads))
            out = xp.full(shape, value, dtype=x.dtype)
            src, dst = _constant_regions(x.shape[first:], pads)
            out[(Ellipsis,) + dst] = x[(Ellipsis,) + src]
            return out
        positions = []
        for d, (lo, hi) in enumerate(pads, start=first):
            pos = _source_positions(xp, x.shape[d], lo, hi, mode)
            positions.append(pos)
            x = xp.take(x, pos, axis=d)
        ctx.positions = positions
        return x

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        shape, pads, mode = ctx.args
        first = len(shape) - len(pads)
        if mode == "constant":
            gx = xp.zeros(shape, dtype=g.dtype)
            src, dst = _constant_regions(shape[first:], pads)
            gx[(Ellipsis,) + src] = g[(Ellipsis,) + dst]
            return gx, None, None, None
        for d in reversed(range(first, len(shape))):
            part = xp.zeros(g.shape[:d] + (shape[d],) + g.shape[d + 1:], dtype=g.dtype)
            ctx.be.scatter_add(part, (slice(None),) * d + (ctx.positions[d - first],), g)
            g = part
        return g, None, None, None


def _constant_regions(sizes, pads):
    """The slices of the input that survive constant padding and where they land in the output."""
    src, dst = [], []
    for n, (lo, hi) in zip(sizes, pads):
        src.append(slice(max(-lo, 0), n - max(-hi, 0)))
        dst.append(slice(max(lo, 0), max(lo, 0) + max(n - max(-lo, 0) - max(-hi, 0), 0)))
    return tuple(src), tuple(dst)


class Triangle(Op):
    """tril/triu: the lower (upper) triangle of the last two dims from ``diagonal`` on, zeros elsewhere."""

    @staticmethod
    def forward(ctx, x, diagonal, upper):
        ctx.args = diagonal, upper
        return (ctx.xp.triu if upper else ctx.xp.tril)(x, diagonal)

    @staticmethod
    def backward(ctx, g):
        diagonal, upper = ctx.args
        return (ctx.xp.triu if upper else ctx.xp.tril)(g, diagonal), None, None

