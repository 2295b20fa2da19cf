"""The LSTM and the GRU as Functions over backend arrays, running step kernels of ``rlpipe.kernels``:

- ``LSTMGates``: the gate math of one step (``LSTMCell``, and the layers' packed and projected paths),
  ``lstm_cell`` / ``lstm_cell_backward``;
- ``LSTMLayer``: one layer in one direction over a whole ``[T, B, input]`` sequence as a single graph node,
  on transposed arrays (``lstm_cell_columns`` / ``lstm_cell_columns_backward``). Its forward runs the
  steps into preallocated buffers; its backward runs back through time by hand and computes the weight
  gradients in one matmul over all steps (a graph of a dozen nodes per step cost twice the arithmetic in
  Python and autograd bookkeeping);
- ``GRULayer``: the same for a GRU layer (``gru_cell_columns`` / ``gru_cell_columns_backward``).
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
    first) over ``x`` (``[T, B, input]``) from ``(h0, c0)`` (``[B, H]``); the biases may be None.

    Inside, every step works on transposed (column) arrays, one column per batch row: the step's matmul
    ``W @ [x_t; h; 1]`` (input and recurrent weights and the summed bias side by side, one matmul per step)
    gives ``[4H, B]`` whose gate blocks are contiguous for the ``lstm_cell_columns`` kernel."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False):
        """One matmul and the kernel per step; every step's inputs and activations kept for the backward."""
        xp = ctx.xp
        steps, batch, inputs = x.shape
        size = h0.shape[-1]
        product = _gate_product(xp, w_ih, w_hh, b_ih, b_hh, steps * batch)
        columns = _step_columns(xp, x[::-1] if reverse else x, h0, b_ih is not None)
        hs = columns[inputs:inputs + size]  # [H, T + 1, B]: h0 and every step's h, inside the columns
        act = xp.empty((steps, 4 * size, batch), x.dtype)
        cs, tanh_cs = xp.empty((steps + 1, size, batch), x.dtype), xp.empty((steps, size, batch), x.dtype)
        cs[0] = c0.T
        cell = kernels.get("lstm_cell_columns", ctx.be)
        for t in range(steps):
            product(columns[:, t], act[t])
            cell(act[t], cs[t], cs[t + 1], tanh_cs[t], hs[:, t + 1])
        out = xp.ascontiguousarray(hs[:, 1:].transpose(1, 2, 0))
        out = out[::-1] if reverse else out
        ctx.save_for_backward(columns, cs, tanh_cs, act, w_ih, w_hh, out)  # out: for the in-place check only
        ctx.reverse = reverse
        return out, xp.ascontiguousarray(hs[:, steps].T), xp.ascontiguousarray(cs[steps].T)

    @staticmethod
    def backward(ctx, d_out, d_hn, d_cn):
        """Back through time step by step (the kernel, then ``w_hh.T @ d_gates``); then the input gradient
        and all weight and bias gradients, each one matmul over every step."""
        xp = ctx.xp
        columns, cs, tanh_cs, act, w_ih, w_hh, _ = ctx.saved_tensors
        steps, size, batch = tanh_cs.shape
        needs = ctx.needs_input_grad
        d_out = d_out[::-1] if ctx.reverse else d_out
        step_backward = kernels.get("lstm_cell_columns_backward", ctx.be)
        w_hh_t = xp.ascontiguousarray(w_hh.T)
        # every step's gate gradients side by side ([4H, T, B]) for the products over all steps; the kernel
        # writes a contiguous scratch (strided rows run at half speed), then one copy into its place
        d_gates, d_step = xp.empty((4 * size, steps, batch), act.dtype), xp.empty_like(act[0])
        dh, dc = xp.ascontiguousarray(d_hn.T), xp.ascontiguousarray(d_cn.T)
        dc_prev = xp.empty_like(dc)
        for t in range(steps - 1, -1, -1):
            dh += d_out[t].T
            step_backward(act[t], cs[t], tanh_cs[t], dh, dc, d_step, dc_prev)
            d_gates[:, t] = d_step
            dc, dc_prev = dc_prev, dc
            if t or needs[1]:  # (the last product is h0's gradient)
                xp.matmul(w_hh_t, d_step, out=dh)
        d_gates = d_gates.reshape(4 * size, steps * batch)
        return (_input_gradient(ctx, d_gates, w_ih, steps), _from_columns(xp, dh) if needs[1] else None,
                _from_columns(xp, dc) if needs[2] else None) + _weight_gradients(ctx, xp, columns, d_gates, w_ih)


class GRULayer(Op):
    """``(output, h_n)`` of one GRU layer in one direction (``reverse``: from the last step to the first)
    over ``x`` (``[T, B, input]``) from ``h0`` (``[B, H]``); the biases may be None.

    As ``LSTMLayer``, on transposed (column) arrays: the input part of every step's pre-activations in
    one matmul before the loop, then per step ``[W_hh | b_hh] @ [h; 1]`` and the ``gru_cell_columns``
    kernel (the hidden part stays apart: torch's ``n = tanh(x_n + r * h_n)`` scales only it)."""

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False):
        """The input part in one matmul; per step one matmul and the kernel; every step's activations
        and hidden part kept for the backward."""
        xp = ctx.xp
        steps, batch, _ = x.shape
        size, bias = h0.shape[-1], b_ih is not None
        x_columns = _columns(xp, x[::-1] if reverse else x, bias)
        x_gates = _with_bias(xp, w_ih, b_ih) @ x_columns.reshape(len(x_columns), steps * batch)
        x_gates = x_gates.reshape(3 * size, steps, batch)
        h_columns = _columns(xp, xp.empty((steps + 1, batch, size), x.dtype), bias)  # h0, then each step's h
        hs = h_columns[:size]
        hs[:, 0] = h0.T
        w_h = _with_bias(xp, w_hh, b_hh)
        h_gates, act = xp.empty((steps, 3 * size, batch), x.dtype), xp.empty((steps, 3 * size, batch), x.dtype)
        cell = kernels.get("gru_cell_columns", ctx.be)
        for t in range(steps):
            xp.matmul(w_h, h_columns[:, t], out=h_gates[t])
            cell(x_gates[:, t], h_gates[t], hs[:, t], act[t], hs[:, t + 1])
        out = xp.ascontiguousarray(hs[:, 1:].transpose(1, 2, 0))
        out = out[::-1] if reverse else out
        ctx.save_for_backward(x_columns, h_columns, h_gates, act, w_ih, w_hh, out)  # out: for the in-place check
        ctx.reverse = reverse
        return out, _from_columns(xp, hs[:, steps])

    @staticmethod
    def backward(ctx, d_out, d_hn):
        """Back through time step by step (the kernel, then ``w_hh.T @ d_hidden``); then the input gradient
        and the weight and bias gradients, each one matmul over every step."""
        xp = ctx.xp
        x_columns, h_columns, h_gates, act, w_ih, w_hh, _ = ctx.saved_tensors
        steps, rows, batch = act.shape
        hs, needs = h_columns[:rows // 3], ctx.needs_input_grad
        d_out = d_out[::-1] if ctx.reverse else d_out
        step_backward = kernels.get("gru_cell_columns_backward", ctx.be)
        w_hh_t = xp.ascontiguousarray(w_hh.T)
        # every step's gradients of the input and hidden parts side by side ([3H, T, B]), for the products
        # over all steps; the kernel writes contiguous scratch (strided rows run at half speed)
        d_inputs, d_hiddens = xp.empty((rows, steps, batch), act.dtype), xp.empty((rows, steps, batch), act.dtype)
        d_input, d_hidden = xp.empty_like(act[0]), xp.empty_like(act[0])
        dh = xp.ascontiguousarray(d_hn.T)
        direct = xp.empty_like(dh)
        for t in range(steps - 1, -1, -1):
            dh += d_out[t].T
            step_backward(act[t], h_gates[t], hs[:, t], dh, d_input, d_hidden, direct)
            d_inputs[:, t], d_hiddens[:, t] = d_input, d_hidden
            if t or needs[1]:  # (the last product is h0's gradient)
                xp.matmul(w_hh_t, d_hidden, out=dh)
                dh += direct
        d_inputs, d_hiddens = d_inputs.reshape(rows, steps * batch), d_hiddens.reshape(rows, steps * batch)
        dx = None
        if needs[0]:
            dx = (d_inputs.T @ w_ih).reshape(steps, batch, w_ih.shape[1])
            dx = dx[::-1] if ctx.reverse else dx
        bias = len(x_columns) > w_ih.shape[1]
        d_w_ih, d_b_ih = _split_bias(xp, d_inputs, x_columns, bias, needs[2], needs[4])
        d_w_hh, d_b_hh = _split_bias(xp, d_hiddens, h_columns[:, :steps], bias, needs[3], needs[5])
        return dx, _from_columns(xp, dh) if needs[1] else None, d_w_ih, d_w_hh, d_b_ih, d_b_hh


def _columns(xp, a, ones):
    """``a`` (``[T, B, F]``) transposed to ``[F (+ 1), T, B]``, with a row of ones under it when ``ones``
    (it multiplies a bias column)."""
    steps, batch, features = a.shape
    columns = xp.empty((features + ones, steps, batch), a.dtype)
    columns[:features] = a.transpose(2, 0, 1)
    if ones:
        columns[features] = 1
    return columns


def _with_bias(xp, w, b):
    """``[w | b]``, or ``w`` without a bias."""
    return w if b is None else xp.concatenate((w, b[:, None]), 1)


def _split_bias(xp, d_gates, columns, bias, need_w, need_b):
    """The gradients of a weight and of its bias (the last column, from the row of ones, when ``bias``):
    one matmul of ``d_gates`` (``[rows, T * B]``) with the columns over every step."""
    if not (need_w or need_b):
        return None, None
    d_weights = d_gates @ columns.reshape(len(columns), d_gates.shape[1]).T
    if not bias:
        return d_weights, None
    return xp.ascontiguousarray(d_weights[:, :-1]) if need_w else None, d_weights[:, -1].copy() if need_b else None


def _gate_product(xp, w_ih, w_hh, b_ih, b_hh, columns):
    """A function ``(column_block, out)`` that writes a step's pre-activations (``[4H, B]``) with the i, f
    and o rows halved into ``out``. Over many ``columns`` (steps times batch) the weights are joined and
    halved once and each step is one matmul; over a few (a batch-1 step while acting) that would cost more
    than the step itself, so each step runs two matmuls and the bias, then halves the product's rows."""
    inputs, size = w_ih.shape[1], w_hh.shape[1]
    if columns > inputs + size:
        weights = _halved_gate_weights(xp, w_ih, w_hh, b_ih, b_hh)
        return lambda block, out: xp.matmul(weights, block, out=out)
    bias = None if b_ih is None else (b_ih + b_hh)[:, None]

    def product(block, out):
        xp.matmul(w_ih, block[:inputs], out=out)
        out += w_hh @ block[inputs:inputs + size]
        if bias is not None:
            out += bias
        out[:2 * size] *= 0.5
        out[3 * size:] *= 0.5
    return product


def _halved_gate_weights(xp, w_ih, w_hh, b_ih, b_hh):
    """``[w_ih | w_hh | b_ih + b_hh]`` (``[4H, input + H (+ 1)]``) with the i, f and o rows halved: the
    kernel's one tanh call then gives every sigmoid (sigmoid(z) = tanh(z / 2) / 2 + 1/2)."""
    parts = (w_ih, w_hh) if b_ih is None else (w_ih, w_hh, (b_ih + b_hh)[:, None])
    weights = xp.concatenate(parts, 1)
    size = w_hh.shape[1]
    weights[:2 * size] *= 0.5
    weights[3 * size:] *= 0.5
    return weights


def _step_columns(xp, x, h0, bias):
    """``[input + H (+ 1), T + 1, B]``: column block ``t`` holds ``x_t`` transposed, the ``h`` the step reads
    (h0 in block 0; the steps write theirs) and a row of ones that multiplies the bias column."""
    steps, batch, inputs = x.shape
    size = h0.shape[-1]
    columns = xp.empty((inputs + size + bias, steps + 1, batch), x.dtype)
    columns[:inputs, :steps] = x.transpose(2, 0, 1)
    columns[inputs:inputs + size, 0] = h0.T
    if bias:
        columns[-1] = 1
    return columns


def _from_columns(xp, a):
    """A ``[H, B]`` column array back as a contiguous ``[B, H]`` one."""
    return xp.ascontiguousarray(a.T)


def _input_gradient(ctx, d_gates, w_ih, steps):
    """The gradient of ``x`` (None when ``x`` needs none), in the caller's time order."""
    if not ctx.needs_input_grad[0]:
        return None
    dx = (d_gates.T @ w_ih).reshape(steps, -1, w_ih.shape[1])
    return dx[::-1] if ctx.reverse else dx


def _weight_gradients(ctx, xp, columns, d_gates, w_ih):
    """The gradients of ``w_ih``, ``w_hh``, ``b_ih`` and ``b_hh``: one matmul over every step against the
    columns (the row of ones gives the bias gradient)."""
    needs = ctx.needs_input_grad
    if not any(needs[3:]):
        return None, None, None, None
    rows, steps, batch = columns.shape
    inputs = w_ih.shape[1]
    d_weights = d_gates @ columns[:, :steps - 1].reshape(rows, (steps - 1) * batch).T
    d_w_ih = xp.ascontiguousarray(d_weights[:, :inputs]) if needs[3] else None
    d_w_hh = xp.ascontiguousarray(d_weights[:, inputs:inputs + d_weights.shape[0] // 4]) if needs[4] else None
    return d_w_ih, d_w_hh, *(d_weights[:, -1].copy() if need else None for need in needs[5:])


def _contiguous(xp, a):
    """``a`` as a C-contiguous array (the kernels index rows by their width)."""
    return a if a.flags.c_contiguous else xp.ascontiguousarray(a)
