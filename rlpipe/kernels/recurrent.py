"""The gate math of one LSTM time step over a batch, forward (``lstm_cell``) and backward
(``lstm_cell_backward``): what a recurrent layer runs between its matmuls at every step; and the GRU's
(``gru_cell_columns`` and its backward), in the column layout below.

Both write into arrays the caller allocated (a layer keeps every step's values for its backward pass
in buffers of the whole sequence). On the CPU the references run (a few whole-array NumPy calls); on
a GPU each is one launch, one thread per (row, hidden unit) reading that unit's four gates.

Gate columns are torch's: ``[B, 4 * H]`` holds i, f, g, o side by side. The ``_columns`` pair works on the
transposed layout a whole-sequence layer keeps (one column per batch row): ``[4 * H, B]`` holds the blocks
i, f, g, o one under the other, so every gate is one contiguous ``[H, B]`` block (NumPy runs contiguous
blocks about twice as fast as the strided column slices of the row layout).
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
    _new_state(xp, _split(act, size), c, c_out, tanh_c, h)


def _new_state(xp, gates, c, c_out, tanh_c, h):
    """From the activated ``gates`` (i, f, g, o) and ``c``: ``c' = f * c + i * g`` into ``c_out``,
    ``tanh(c')`` into ``tanh_c`` and ``h' = o * tanh(c')`` into ``h``."""
    i, f, g, o = gates
    xp.multiply(f, c, out=c_out)
    xp.multiply(i, g, out=tanh_c)  # tanh_c as scratch
    c_out += tanh_c
    xp.tanh(c_out, out=tanh_c)
    xp.multiply(o, tanh_c, out=h)


def lstm_cell_backward(xp, act, c, tanh_c, dh, dc, d_gates, dc_prev):
    """The step's backward: from the saved ``act``, ``c`` (the state before the step) and ``tanh_c``, the
    gradient ``dh`` of ``h'`` and ``dc`` of ``c'`` (what later steps sent back), writes the gradient of the
    pre-activations into ``d_gates`` (``[B, 4H]``) and that of ``c`` into ``dc_prev``."""
    size = c.shape[-1]
    _gates_backward(xp, lambda a: _split(a, size), act, c, tanh_c, dh, dc, d_gates, dc_prev)


def _gates_backward(xp, split, act, c, tanh_c, dh, dc, d_gates, dc_prev):
    """Both layouts' step backward; ``split`` gives an array's four gate parts (i, f, g, o)."""
    i, f, g, o = split(act)
    d_i, d_f, d_g, d_o = split(d_gates)
    dc_total = tanh_c * tanh_c
    xp.subtract(1, dc_total, out=dc_total)
    dc_total *= o
    dc_total *= dh
    dc_total += dc
    slope = 1 - act
    slope *= act  # s * (1 - s): the sigmoid's slope on i, f, o
    slope_g = split(slope)[2]
    xp.multiply(g, g, out=slope_g)
    xp.subtract(1, slope_g, out=slope_g)  # 1 - g^2 on g
    # the gradient reaching each activated gate, then through its activation
    xp.multiply(dc_total, g, out=d_i)
    xp.multiply(dc_total, c, out=d_f)
    xp.multiply(dc_total, i, out=d_g)
    xp.multiply(dh, tanh_c, out=d_o)
    d_gates *= slope
    xp.multiply(dc_total, f, out=dc_prev)


def _blocks(a, size):
    """The four gate blocks (i, f, g, o) of ``[4 * size, B]`` rows."""
    return a[:size], a[size:2 * size], a[2 * size:3 * size], a[3 * size:]


def lstm_cell_columns(xp, act, c, c_out, tanh_c, h):
    """One step in the column layout. ``act`` (``[4H, B]``) holds the pre-activations with the i, f and o
    rows halved (the caller halves those weight rows once) and is overwritten with the activated gates:
    sigmoid(z) = tanh(z / 2) / 2 + 1/2, so one tanh call serves all four. Writes ``c' = f * c + i * g``
    into ``c_out``, ``tanh(c')`` into ``tanh_c`` and ``h' = o * tanh(c')`` into ``h`` (``[H, B]`` each;
    ``h`` may be a strided view)."""
    size = c.shape[0]
    xp.tanh(act, out=act)
    for sigmoid in (act[:2 * size], act[3 * size:]):
        sigmoid *= 0.5
        sigmoid += 0.5
    _new_state(xp, _blocks(act, size), c, c_out, tanh_c, h)


def lstm_cell_columns_backward(xp, act, c, tanh_c, dh, dc, d_gates, dc_prev):
    """The backward of ``lstm_cell_columns``: from the activated gates ``act``, ``c`` (the state before the
    step), ``tanh_c`` and the gradients ``dh``, ``dc`` of ``h'`` and ``c'``, writes the gradient of the
    (unhalved) pre-activations into ``d_gates`` (``[4H, B]``, may be a strided view) and that of ``c``
    into ``dc_prev``."""
    size = c.shape[0]
    _gates_backward(xp, lambda a: _blocks(a, size), act, c, tanh_c, dh, dc, d_gates, dc_prev)


def gru_cell_columns(xp, x_gates, h_gates, h, act, h_out):
    """One GRU step in the column layout (blocks r, z, n of ``H`` rows): from the input part ``x_gates``
    (``x W_ih^T + b_ih``, may be a strided view) and the hidden part ``h_gates`` (``h W_hh^T + b_hh``) of
    the pre-activations (``[3H, B]``) and ``h`` (``[H, B]``), writes ``r``, ``z`` and
    ``n = tanh(x_n + r * h_n)`` into ``act`` and ``h' = n + z * (h - n)`` into ``h_out`` (may be strided)."""
    size = h.shape[0]
    gates = act[:2 * size]
    xp.add(x_gates[:2 * size], h_gates[:2 * size], out=gates)
    gates *= 0.5  # sigmoid(v) = tanh(v / 2) / 2 + 1/2
    xp.tanh(gates, out=gates)
    gates *= 0.5
    gates += 0.5
    r, z, n = act[:size], act[size:2 * size], act[2 * size:]
    xp.multiply(r, h_gates[2 * size:], out=n)
    n += x_gates[2 * size:]
    xp.tanh(n, out=n)
    xp.subtract(h, n, out=h_out)
    h_out *= z
    h_out += n


def gru_cell_columns_backward(xp, act, h_gates, h, dh, d_x, d_h, dh_prev):
    """The backward of ``gru_cell_columns``: from the saved ``act`` (r, z, n), ``h_gates``, ``h`` and the
    gradient ``dh`` of ``h'``, writes the gradients of the input part into ``d_x``, of the hidden part into
    ``d_h`` (``[3H, B]`` each; they differ in the n block, where the hidden part is scaled by r) and the
    direct part ``dh * z`` of ``h``'s gradient into ``dh_prev`` (the caller adds ``W_hh^T d_h``)."""
    size = h.shape[0]
    r, z, n = act[:size], act[size:2 * size], act[2 * size:]
    d_n = d_x[2 * size:]
    xp.subtract(1, z, out=d_n)
    d_n *= dh
    slope = n * n
    xp.subtract(1, slope, out=slope)
    d_n *= slope  # the gradient of n's pre-activation: the input part's n block
    xp.multiply(d_n, r, out=d_h[2 * size:])
    d_r, d_z = d_x[:size], d_x[size:2 * size]
    xp.multiply(d_n, h_gates[2 * size:], out=d_r)
    xp.subtract(h, n, out=d_z)
    d_z *= dh
    gates = act[:2 * size]
    slope = 1 - gates
    slope *= gates
    d_x[:2 * size] *= slope
    d_h[:2 * size] = d_x[:2 * size]
    xp.multiply(dh, z, out=dh_prev)


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


# one thread per (unit, batch row) of the [H, B] state; gate j of that element is act[j * H * B + i]
_LSTM_CELL_COLUMNS = Source(
    "lstm_cell_columns",
    "T c",
    "raw T act, T c_out, T tanh_c, T h",
    "const long long plane = _ind.size();\n"
    "const acc_t half = 0.5;\n"
    "const acc_t in_gate = half * tanh((acc_t)act[i]) + half;\n"
    "const acc_t forget = half * tanh((acc_t)act[i + plane]) + half;\n"
    "const acc_t cand = tanh((acc_t)act[i + 2 * plane]);\n"
    "const acc_t out_gate = half * tanh((acc_t)act[i + 3 * plane]) + half;\n"
    "act[i] = (T)in_gate;\n"
    "act[i + plane] = (T)forget;\n"
    "act[i + 2 * plane] = (T)cand;\n"
    "act[i + 3 * plane] = (T)out_gate;\n"
    "const acc_t cell = forget * (acc_t)c + in_gate * cand;\n"
    "const acc_t squashed = tanh(cell);\n"
    "c_out = (T)cell;\n"
    "tanh_c = (T)squashed;\n"
    "h = (T)(out_gate * squashed);")

_LSTM_CELL_COLUMNS_BACKWARD = Source(
    "lstm_cell_columns_backward",
    "raw T act, T c, T tanh_c, T dh, T dc",
    "raw T d_gates, T dc_prev",
    "const long long plane = _ind.size();\n"
    "const acc_t in_gate = (acc_t)act[i];\n"
    "const acc_t forget = (acc_t)act[i + plane];\n"
    "const acc_t cand = (acc_t)act[i + 2 * plane];\n"
    "const acc_t out_gate = (acc_t)act[i + 3 * plane];\n"
    "const acc_t t = (acc_t)tanh_c;\n"
    "const acc_t grad_h = (acc_t)dh;\n"
    "const acc_t grad_c = (acc_t)dc + grad_h * out_gate * (acc_t(1) - t * t);\n"
    "d_gates[i] = (T)(grad_c * cand * in_gate * (acc_t(1) - in_gate));\n"
    "d_gates[i + plane] = (T)(grad_c * (acc_t)c * forget * (acc_t(1) - forget));\n"
    "d_gates[i + 2 * plane] = (T)(grad_c * in_gate * (acc_t(1) - cand * cand));\n"
    "d_gates[i + 3 * plane] = (T)(grad_h * t * out_gate * (acc_t(1) - out_gate));\n"
    "dc_prev = (T)(grad_c * forget);")


# one thread per (unit, batch row) of the [H, B] state; block j of that element is at [j * H * B + i]
_GRU_CELL_COLUMNS = Source(
    "gru_cell_columns",
    "raw T x_gates, raw T h_gates, T h",
    "raw T act, T h_out",
    "const long long plane = _ind.size();\n"
    "const acc_t half = 0.5;\n"
    "const acc_t reset = half * tanh(half * ((acc_t)x_gates[i] + (acc_t)h_gates[i])) + half;\n"
    "const acc_t update = half * tanh(half * ((acc_t)x_gates[i + plane] + (acc_t)h_gates[i + plane])) + half;\n"
    "const acc_t cand = tanh((acc_t)x_gates[i + 2 * plane] + reset * (acc_t)h_gates[i + 2 * plane]);\n"
    "act[i] = (T)reset;\n"
    "act[i + plane] = (T)update;\n"
    "act[i + 2 * plane] = (T)cand;\n"
    "h_out = (T)(cand + update * ((acc_t)h - cand));")

_GRU_CELL_COLUMNS_BACKWARD = Source(
    "gru_cell_columns_backward",
    "raw T act, raw T h_gates, T h, T dh",
    "raw T d_x, raw T d_h, T dh_prev",
    "const long long plane = _ind.size();\n"
    "const acc_t reset = (acc_t)act[i];\n"
    "const acc_t update = (acc_t)act[i + plane];\n"
    "const acc_t cand = (acc_t)act[i + 2 * plane];\n"
    "const acc_t grad = (acc_t)dh;\n"
    "const acc_t grad_n = grad * (acc_t(1) - update) * (acc_t(1) - cand * cand);\n"
    "const acc_t grad_r = grad_n * (acc_t)h_gates[i + 2 * plane] * reset * (acc_t(1) - reset);\n"
    "const acc_t grad_z = grad * ((acc_t)h - cand) * update * (acc_t(1) - update);\n"
    "d_x[i] = (T)grad_r;\n"
    "d_x[i + plane] = (T)grad_z;\n"
    "d_x[i + 2 * plane] = (T)grad_n;\n"
    "d_h[i] = (T)grad_r;\n"
    "d_h[i + plane] = (T)grad_z;\n"
    "d_h[i + 2 * plane] = (T)(grad_n * reset);\n"
    "dh_prev = (T)(grad * update);")


def _launcher(inputs):
    """A launcher for a step kernel with ``inputs`` array inputs: the arrays come as the reference takes them
    (inputs, then outputs, all C-contiguous, as the caller's buffers are); the hidden size goes after the inputs."""
    def launch(backend, compiled, *arrays):
        backend.run(compiled[0], *arrays[:inputs], arrays[-1].shape[-1], *arrays[inputs:])
    return launch


define("lstm_cell", reference=lstm_cell, sources=[_LSTM_CELL], launch=_launcher(2), host=True)
define("lstm_cell_backward", reference=lstm_cell_backward, sources=[_LSTM_CELL_BACKWARD], launch=_launcher(5),
       host=True)


def _launch_columns(backend, compiled, act, c, c_out, tanh_c, h):
    """``lstm_cell_columns`` on CUDA: the state arrays set the launch shape, ``act`` is read and written raw."""
    backend.run(compiled[0], c, act, c_out, tanh_c, h)


def _launch_columns_backward(backend, compiled, act, c, tanh_c, dh, dc, d_gates, dc_prev):
    """``lstm_cell_columns_backward`` on CUDA (``d_gates`` raw: it may be a strided view)."""
    backend.run(compiled[0], act, c, tanh_c, dh, dc, d_gates, dc_prev)


define("lstm_cell_columns", reference=lstm_cell_columns, sources=[_LSTM_CELL_COLUMNS], launch=_launch_columns,
       host=True)
define("lstm_cell_columns_backward", reference=lstm_cell_columns_backward, sources=[_LSTM_CELL_COLUMNS_BACKWARD],
       launch=_launch_columns_backward, host=True)


def _launch_gru(backend, compiled, x_gates, h_gates, h, act, h_out):
    """``gru_cell_columns`` on CUDA: the state arrays set the launch shape."""
    backend.run(compiled[0], x_gates, h_gates, h, act, h_out)


def _launch_gru_backward(backend, compiled, act, h_gates, h, dh, d_x, d_h, dh_prev):
    """``gru_cell_columns_backward`` on CUDA."""
    backend.run(compiled[0], act, h_gates, h, dh, d_x, d_h, dh_prev)


define("gru_cell_columns", reference=gru_cell_columns, sources=[_GRU_CELL_COLUMNS], launch=_launch_gru, host=True)
define("gru_cell_columns_backward", reference=gru_cell_columns_backward, sources=[_GRU_CELL_COLUMNS_BACKWARD],
       launch=_launch_gru_backward, host=True)
