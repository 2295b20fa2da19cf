"""The LSTM as two Functions over backend arrays, both running the step kernels of ``rlpipe.kernels``
(``lstm_cell``, ``lstm_cell_backward``):

- ``LSTMGates``: the gate math of one step (``LSTMCell``, and the layers' packed and projected paths);
- ``LSTMLayer``: one layer in one direction over a whole ``[T, B, input]`` sequence as a single graph node.
  Its forward runs the steps into preallocated buffers; its backward runs back through time by hand and
  computes the weight gradients in one matmul over all steps (a graph of a dozen nodes per step cost
  twice the arithmetic in Python and autograd bookkeeping).
"""
from ... import kernels
from ...primitives.base import Op


class LSTMGates(Op):
    """``(h', c')`` from the summed pre-activations ``gates`` (``[B, 4H]``, columns i, f, g, o) and ``c``."""

    @staticmethod
    def forward(ctx, gates, c):
        """Runs the ``lstm_cell`` kernel; keeps the activated gates, ``c`` and ``tanh(c')``."""
        xp = ctx.xp
        c = _contiguous(xp, c)
        act, c_out, tanh_c, h = xp.empty_like(gates), xp.empty_like(c), xp.empty_like(c), xp.empty_like(c)
        kernels.get("lstm_cell", ctx.be)(_contiguous(xp, gates), c, act, c_out, tanh_c, h)
        ctx.save_for_backward(act, c, tanh_c)
        return h, c_out

    @staticmethod
    def backward(ctx, dh, dc):
        """The gradients of ``gates`` and ``c``, from the ``lstm_cell_backward`` kernel."""
        xp = ctx.xp
        act, c, tanh_c = ctx.saved_tensors
        d_gates, dc_prev = xp.empty_like(act), xp.empty_like(c)
        kernels.get("lstm_cell_backward", ctx.be)(act, c, tanh_c, _contiguous(xp, dh), _contiguous(xp, dc),
                                                  d_gates, dc_prev)
        return d_gates, dc_prev


class LSTMLayer(Op):
    """``(output, h_n, c_n)`` of one LSTM layer in one direction (``reverse``: from the last step to the
    first) over ``x`` (``[T, B, input]``) from ``(h0, c0)`` (``[B, H]``); the biases may be None."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False):
        """The input projection of every step in one matmul, then per step ``h @ w_hh.T`` and the kernel."""
        xp = ctx.xp
        given, x = x, (x[::-1] if reverse else x)
        steps, batch = x.shape[:2]
        size = h0.shape[-1]
        x_gates = _input_projection(xp, x.reshape(steps * batch, x.shape[-1]), w_ih, b_ih, b_hh).reshape(
            steps, batch, 4 * size)
        hs, cs = xp.empty((steps + 1, batch, size), x.dtype), xp.empty((steps + 1, batch, size), x.dtype)
        tanh_cs, act = xp.empty((steps, batch, size), x.dtype), xp.empty_like(x_gates)
        hs[0], cs[0] = h0, c0
        cell = kernels.get("lstm_cell", ctx.be)
        w_hh_t = w_hh.T
        gates = xp.empty((batch, 4 * size), x.dtype)
        for t in range(steps):
            xp.matmul(hs[t], w_hh_t, out=gates)
            gates += x_gates[t]
            cell(gates, cs[t], act[t], cs[t + 1], tanh_cs[t], hs[t + 1])
        out = hs[1:][::-1] if reverse else hs[1:]
        ctx.save_for_backward(given, hs, cs, tanh_cs, act, w_ih, w_hh, out)  # out: for the in-place check only
        ctx.reverse = reverse
        return out, hs[steps].copy(), cs[steps].copy()

    @staticmethod
    def backward(ctx, d_out, d_hn, d_cn):
        """Back through time step by step (the kernel, then ``d_gates @ w_hh``); the input and weight
        gradients after the loop, each one matmul over all steps."""
        xp = ctx.xp
        x, hs, cs, tanh_cs, act, w_ih, w_hh, _ = ctx.saved_tensors
        reverse = ctx.reverse
        if reverse:
            x, d_out = x[::-1], d_out[::-1]
        steps, batch, size = tanh_cs.shape
        step_backward = kernels.get("lstm_cell_backward", ctx.be)
        d_gates = xp.empty_like(act)
        dh, dc, dc_prev = d_hn.copy(), d_cn.copy(), xp.empty_like(d_cn)
        for t in range(steps - 1, -1, -1):
            dh += d_out[t]
            step_backward(act[t], cs[t], tanh_cs[t], dh, dc, d_gates[t], dc_prev)
            dc, dc_prev = dc_prev, dc
            xp.matmul(d_gates[t], w_hh, out=dh)
        return _input_gradients(ctx, xp, x, hs, d_gates, w_ih, reverse) + (dh, dc) + _weight_gradients(
            ctx, x, hs, d_gates)


def _input_projection(xp, x, w_ih, b_ih, b_hh):
    """``x @ w_ih.T + b_ih + b_hh`` for ``x`` of shape [N, input], the biases (if any) added by the matmul
    itself as a column of ones: faster than a separate pass over the [N, 4H] result."""
    if b_ih is None:
        return xp.matmul(x, w_ih.T)
    ones = xp.ones((x.shape[0], 1), x.dtype)
    bias = (b_ih + b_hh)[:, None]
    return xp.matmul(xp.concatenate((x, ones), 1), xp.concatenate((w_ih, bias), 1).T)


def _input_gradients(ctx, xp, x, hs, d_gates, w_ih, reverse):
    """``(dx,)`` (None when ``x`` needs none), in the caller's time order."""
    if not ctx.needs_input_grad[0]:
        return (None,)
    dx = xp.matmul(d_gates.reshape(-1, d_gates.shape[-1]), w_ih).reshape(x.shape)
    return (dx[::-1] if reverse else dx,)


def _weight_gradients(ctx, x, hs, d_gates):
    """The gradients of ``w_ih``, ``w_hh``, ``b_ih`` and ``b_hh``, each one matmul (or sum) over every step."""
    flat = d_gates.reshape(-1, d_gates.shape[-1])
    needs = ctx.needs_input_grad
    d_w_ih = flat.T @ x.reshape(flat.shape[0], x.shape[-1]) if needs[3] else None
    d_w_hh = flat.T @ hs[:-1].reshape(flat.shape[0], hs.shape[-1]) if needs[4] else None
    d_bias = flat.sum(0) if needs[5] or needs[6] else None
    return d_w_ih, d_w_hh, d_bias if needs[5] else None, d_bias if needs[6] else None


def _contiguous(xp, a):
    """``a`` as a C-contiguous array (the kernels index rows by their width)."""
    return a if a.flags.c_contiguous else xp.ascontiguousarray(a)
