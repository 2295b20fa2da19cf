"""The gate math of one LSTM time step over a batch, forward (``lstm_cell``) and backward
(``lstm_cell_backward``): what a recurrent layer runs between its matmuls at every step.

Both write into arrays the caller allocated (a layer keeps every step's values for its backward pass
in buffers of the whole sequence). On the CPU the references run (a few whole-array NumPy calls); on
a GPU each is one launch, one thread per (row, hidden unit) reading that unit's four gates.

Gate columns are torch's: ``[B, 4 * H]`` holds i, f, g, o side by side.
"""
from ._registry import Source, define

_CONSTANTS = {}


def _sigmoid_by_tanh(xp, gates):
    """``(scale, shift)`` shaped as ``gates`` (``[B, 4 * size]``): sigmoid(x) = tanh(x / 2) / 2 + 1/2 on
    i, f, o and tanh on g, so one tanh call activates every gate (NumPy's tanh is many times faster than
    its exp). Full-shape constants: NumPy broadcasts a row of them at half the speed."""
    key = (xp.__name__, gates.shape, gates.dtype, getattr(gates, "device", None))
    pair = _CONSTANTS.get(key)
    if pair is None:
        size = gates.shape[-1] // 4
        scale = xp.full(gates.shape, 0.5, dtype=gates.dtype)
        scale[:, 2 * size:3 * size] = 1
        shift = scale.copy()
        shift[:, 2 * size:3 * size] = 0
        if len(_CONSTANTS) > 32:  # a few batch sizes are the norm; never let the table grow without bound
            _CONSTANTS.clear()
        pair = _CONSTANTS[key] = (scale, shift)
    return pair


def _split(a, size):
    """The four gate blocks (i, f, g, o) of ``[B, 4 * size]`` columns."""
    return a[:, :size], a[:, size:2 * size], a[:, 2 * size:3 * size], a[:, 3 * size:]


def lstm_cell(xp, gates, c, act, c_out, tanh_c, h):
    """From the summed pre-activations ``gates`` (``[B, 4H]``) and the cell state ``c`` (``[B, H]``), writes
    the activated gates into ``act`` (sigmoid on i, f, o, tanh on g), ``c' = f * c + i * g`` into ``c_out``,
    ``tanh(c')`` into ``tanh_c`` and ``h' = o * tanh(c')`` into ``h``."""
    size = c.shape[-1]
    scale, shift = _sigmoid_by_tanh(xp, gates)
    xp.multiply(gates, scale, out=act)
    xp.tanh(act, out=act)
    act *= scale
    act += shift
    i, f, g, o = _split(act, size)
    xp.multiply(f, c, out=c_out)
    xp.multiply(i, g, out=h)  # h as scratch
    c_out += h
    xp.tanh(c_out, out=tanh_c)
    xp.multiply(o, tanh_c, out=h)


def lstm_cell_backward(xp, act, c, tanh_c, dh, dc, d_gates, dc_prev):
    """The step's backward: from the saved ``act``, ``c`` (the state before the step) and ``tanh_c``, the
    gradient ``dh`` of ``h'`` and ``dc`` of ``c'`` (what later steps sent back), writes the gradient of the
    pre-activations into ``d_gates`` (``[B, 4H]``) and that of ``c`` into ``dc_prev``."""
    size = c.shape[-1]
    i, f, g, o = _split(act, size)
    dc_total = 1 - tanh_c * tanh_c
    dc_total *= o
    dc_total *= dh
    dc_total += dc
    d_i, d_f, d_g, d_o = _split(d_gates, size)
    # the gradient reaching each activated gate, then through its activation
    xp.multiply(dc_total, g, out=d_i)
    xp.multiply(dc_total, c, out=d_f)
    xp.multiply(dc_total, i, out=d_g)
    xp.multiply(dh, tanh_c, out=d_o)
    slope = 1 - act
    slope *= act  # s * (1 - s): the sigmoid's slope on i, f, o
    xp.multiply(g, g, out=slope[:, 2 * size:3 * size])
    xp.subtract(1, slope[:, 2 * size:3 * size], out=slope[:, 2 * size:3 * size])  # 1 - g^2 on g
    d_gates *= slope
    xp.multiply(dc_total, f, out=dc_prev)


# one thread per (row, unit): it reads the unit's four gates (raw, [B, 4H]) and writes them back activated
_LSTM_CELL = Source(
    "lstm_cell",
    "raw T gates, T c, int64 size",
    "raw T act, T c_out, T tanh_c, T h",
    "const long long k = (i / size) * 4 * size + i % size;\n"
    "const acc_t in_gate = rlpipe_sigmoid((acc_t)gates[k]);\n"
    "const acc_t forget = rlpipe_sigmoid((acc_t)gates[k + size]);\n"
    "const acc_t cand = tanh((acc_t)gates[k + 2 * size]);\n"
    "const acc_t out_gate = rlpipe_sigmoid((acc_t)gates[k + 3 * size]);\n"
    "act[k] = (T)in_gate;\n"
    "act[k + size] = (T)forget;\n"
    "act[k + 2 * size] = (T)cand;\n"
    "act[k + 3 * size] = (T)out_gate;\n"
    "const acc_t cell = forget * (acc_t)c + in_gate * cand;\n"
    "const acc_t squashed = tanh(cell);\n"
    "c_out = (T)cell;\n"
    "tanh_c = (T)squashed;\n"
    "h = (T)(out_gate * squashed);")

_LSTM_CELL_BACKWARD = Source(
    "lstm_cell_backward",
    "raw T act, T c, T tanh_c, T dh, T dc, int64 size",
    "raw T d_gates, T dc_prev",
    "const long long k = (i / size) * 4 * size + i % size;\n"
    "const acc_t in_gate = (acc_t)act[k];\n"
    "const acc_t forget = (acc_t)act[k + size];\n"
    "const acc_t cand = (acc_t)act[k + 2 * size];\n"
    "const acc_t out_gate = (acc_t)act[k + 3 * size];\n"
    "const acc_t t = (acc_t)tanh_c;\n"
    "const acc_t grad_h = (acc_t)dh;\n"
    "const acc_t grad_c = (acc_t)dc + grad_h * out_gate * (acc_t(1) - t * t);\n"
    "d_gates[k] = (T)(grad_c * cand * in_gate * (acc_t(1) - in_gate));\n"
    "d_gates[k + size] = (T)(grad_c * (acc_t)c * forget * (acc_t(1) - forget));\n"
    "d_gates[k + 2 * size] = (T)(grad_c * in_gate * (acc_t(1) - cand * cand));\n"
    "d_gates[k + 3 * size] = (T)(grad_h * t * out_gate * (acc_t(1) - out_gate));\n"
    "dc_prev = (T)(grad_c * forget);")


def _launcher(inputs):
    """A launcher for a step kernel with ``inputs`` array inputs: the arrays come as the reference takes them
    (inputs, then outputs, all C-contiguous, as the caller's buffers are); the hidden size goes after the inputs."""
    def launch(backend, compiled, *arrays):
        backend.run(compiled[0], *arrays[:inputs], arrays[-1].shape[-1], *arrays[inputs:])
    return launch


define("lstm_cell", reference=lstm_cell, sources=[_LSTM_CELL], launch=_launcher(2), host=True)
define("lstm_cell_backward", reference=lstm_cell_backward, sources=[_LSTM_CELL_BACKWARD], launch=_launcher(5),
       host=True)
