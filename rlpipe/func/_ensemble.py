"""``EnsembleLinear``: ``linear`` with one weight per vmapped sample (an ensemble of layers), as one
node whose forward and backward are each a single batched matmul per product.

``vmap``'s rule for ``linear`` sends here when the weight is batched: the input, batched or not, is
multiplied by all the weights in one stacked matmul and the bias is added in place, so the layer
costs one graph node and one output array, not a transpose, a matmul and an add.
"""
from ..primitives.base import Op
from ..primitives.double_backward import twice

__all__ = ["EnsembleLinear", "StackedStates"]


class EnsembleLinear(Op):
    """``x @ w[e].T + b[e]`` for every sample ``e``: ``w`` is ``[E, out, in]``, ``b`` ``[E, out]`` or
    None; ``x`` is ``[E, ..., in]`` when ``x_batched`` else ``[..., in]``, shared by all samples."""
    node_name = "EnsembleLinearBackward0"

    @staticmethod
    def forward(ctx, x, w, b, x_batched):
        """``[E, ..., out]``: every sample's product, the bias added in place."""
        ensemble, features = w.shape[0], w.shape[1]
        lead = x.shape[1:-1] if x_batched else x.shape[:-1]
        rows = x.reshape(ensemble, -1, x.shape[-1]) if x_batched else x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(rows, w)
        ctx.x_shape, ctx.x_batched = x.shape, x_batched
        out = rows @ ctx.xp.swapaxes(w, -1, -2)  # [E, rows, out]: one stacked matmul
        if b is not None:
            out += b[:, None, :]
        return out.reshape((ensemble, *lead, features))

    @staticmethod
    def backward(ctx, g):
        """The gradients of x (summed over the samples when x is shared), w and b."""
        xp = ctx.xp
        rows, w = ctx.saved_tensors
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        g = g.reshape(w.shape[0], -1, w.shape[1])
        gx = gw = gb = None
        if need_x:
            # a width-1 layer's product is an outer product, which BLAS does slowly: multiply instead
            gx = g * w if w.shape[1] == 1 else g @ w
            gx = (gx if ctx.x_batched else gx.sum(axis=0)).reshape(ctx.x_shape)
        if need_w:
            gw = xp.swapaxes(g, -1, -2) @ rows
        if need_b:  # the sum over rows as a matmul with ones: several times faster than sum(axis=1)
            gb = (xp.ones((1, g.shape[1]), dtype=g.dtype) @ g).reshape(w.shape[0], w.shape[1])
        return gx, gw, gb, None


class StackedStates(Op):
    """Every parameter of an ensemble stacked over its members in one node: ``tensors`` holds
    ``members`` consecutive tensors per parameter, the output one ``[members, ...]`` stack per
    parameter; each member's tensor gets its slice of the gradient. One node instead of one stack
    per parameter: an ensemble restacks its members' parameters at every call."""
    node_name = "StackBackward0"

    @staticmethod
    def forward(ctx, *tensors, members):
        """One stack per group of ``members`` consecutive tensors."""
        ctx.members = members
        return tuple(ctx.xp.stack(tensors[i:i + members]) for i in range(0, len(tensors), members))

    @staticmethod
    def backward(ctx, *grads):
        """Each stacked gradient split back into its members' slices, in the order of the inputs."""
        return tuple(g[m] for g in grads for m in range(ctx.members))


@twice(EnsembleLinear)
def _ensemble_linear_twice(ctx, g):
    """EnsembleLinear's backward in Tensor ops, for create_graph."""
    rows, w = ctx.saved_tensors
    need_x, need_w, need_b, _ = ctx.needs_input_grad
    x = ctx.graph_input(0, rows.reshape(ctx.x_shape))
    tw = ctx.graph_input(1, w)
    g = g.reshape(w.shape[0], -1, w.shape[1])
    gx = gw = gb = None
    if need_x:
        gx = g * tw if w.shape[1] == 1 else g @ tw
        gx = (gx if ctx.x_batched else gx.sum(dim=0)).reshape(ctx.x_shape)
    if need_w:
        gw = g.transpose(-1, -2) @ x.reshape(rows.shape)
    if need_b:
        gb = g.sum(dim=1)
    return gx, gw, gb, None


@twice(StackedStates)
def _stacked_states_twice(ctx, *grads):
    """StackedStates' backward in Tensor ops: each member's slice of each stacked gradient."""
    return tuple(g[m] for g in grads for m in range(ctx.members))
