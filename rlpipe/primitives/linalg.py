"""Products: matmul, linear (x @ w.T + b in one node) and einsum.
"""
from .base import Op, unbroadcast


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
