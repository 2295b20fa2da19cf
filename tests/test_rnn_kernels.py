"""The LSTM and GRU step kernels (``rlpipe.kernels.recurrent``) and the whole-sequence ``LSTMLayer`` and
``GRULayer`` nodes built on them.

Independent references: the LSTM equations written out with SciPy's ``expit`` and NumPy's ``tanh``
(forward), central finite differences of a scalar of the step's outputs (backward), the references run on
CuPy (``cuda`` marker: a GPU or the stand-in), and ``gradcheck`` in float64. test_rnn.py holds the layers
to torch's recorded values and gradients."""
import functools

import numpy as np
import pytest
from scipy.special import expit

import rlpipe as r
from rlpipe import backends, kernels
from rlpipe.backends import cpu
from rlpipe.nn.modules.rnn_fused import GRULayer, LSTMLayer

B, H = 3, 5
DTYPES = [np.float16, np.float32, np.float64]
TOL = {np.float16: dict(rtol=3e-3, atol=3e-3), np.float32: dict(rtol=1e-5, atol=1e-6),
       np.float64: dict(rtol=1e-12, atol=1e-12)}


def step_inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    gates = (rng.standard_normal((B, 4 * H)) * 2).astype(dtype)
    c = rng.standard_normal((B, H)).astype(dtype)
    return gates, c


def run_forward(cell, xp, gates, c):
    act, c_out, tanh_c, h = (xp.empty_like(a) for a in (gates, c, c, c))
    cell(gates, c, act, c_out, tanh_c, h)
    return act, c_out, tanh_c, h


def by_the_equations(gates, c):
    """(act, c', tanh(c'), h') of one LSTM step, written out."""
    i, f, g, o = np.split(gates.astype(np.float64), 4, axis=1)
    i, f, g, o = expit(i), expit(f), np.tanh(g), expit(o)
    c_new = f * c + i * g
    return np.concatenate([i, f, g, o], 1), c_new, np.tanh(c_new), o * np.tanh(c_new)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_lstm_cell_reference_is_the_lstm_equations(dtype):
    gates, c = step_inputs(dtype)
    got = run_forward(kernels.get("lstm_cell", cpu), np, gates, c)
    for g, w in zip(got, by_the_equations(gates, c.astype(np.float64))):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, **TOL[dtype])


def test_lstm_cell_by_hand():
    gates = np.zeros((1, 4))  # every sigmoid 1/2, tanh 0
    gates[0, 2] = np.arctanh(0.5)  # g = 0.5
    act, c_out, tanh_c, h = run_forward(kernels.get("lstm_cell", cpu), np, gates, np.array([[2.0]]))
    np.testing.assert_allclose(act, [[0.5, 0.5, 0.5, 0.5]], atol=1e-15)
    np.testing.assert_allclose(c_out, [[0.5 * 2 + 0.5 * 0.5]], atol=1e-15)  # f * c + i * g
    np.testing.assert_allclose(h, 0.5 * np.tanh(1.25), atol=1e-15)


def step_backward(dtype, seed=1):
    """The kernel's backward for random upstream gradients, and everything it needs."""
    gates, c = step_inputs(dtype, seed)
    act, _, tanh_c, _ = run_forward(kernels.get("lstm_cell", cpu), np, gates, c)
    rng = np.random.default_rng(seed + 1)
    dh, dc = rng.standard_normal((B, H)).astype(dtype), rng.standard_normal((B, H)).astype(dtype)
    d_gates, dc_prev = np.empty_like(gates), np.empty_like(c)
    kernels.get("lstm_cell_backward", cpu)(act, c, tanh_c, dh, dc, d_gates, dc_prev)
    return (gates, c, act, tanh_c, dh, dc), (d_gates, dc_prev)


def test_lstm_cell_backward_matches_finite_differences():
    (gates, c, _, _, dh, dc), (d_gates, dc_prev) = step_backward(np.float64)

    def loss(gates, c):
        _, c_new, _, h = by_the_equations(gates, c)
        return np.sum(dh * h) + np.sum(dc * c_new)

    eps = 1e-6
    for array, grad in ((gates, d_gates), (c, dc_prev)):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + eps
            up = loss(gates, c)
            array[index] = saved - eps
            down = loss(gates, c)
            array[index] = saved
            numeric[index] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-7, atol=1e-8)


@functools.lru_cache(maxsize=None)
def cuda():
    return backends.cuda_backend()


needs_cuda = pytest.mark.skipif(not backends.cuda_available(), reason="cuda backend unavailable (CuPy or a GPU)")


def cuda_variants(name):
    """Kernel ``name`` on the cuda backend: compiled, and its reference run on CuPy."""
    return kernels.get(name, cuda()), functools.partial(kernels.KERNELS[name].reference, cuda().xp)


def assert_on_host(got, want, dtype):
    """Device arrays ``got`` equal the host arrays ``want``, in ``dtype``."""
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(cuda().to_host(g), w, **TOL[dtype])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_lstm_cell_matches_the_reference(dtype):
    gates, c = step_inputs(dtype)
    want = run_forward(kernels.get("lstm_cell", cpu), np, gates, c)
    device = [cuda().asarray(a) for a in (gates, c)]
    for cell in cuda_variants("lstm_cell"):
        assert_on_host(run_forward(cell, cuda().xp, *device), want, dtype)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_lstm_cell_backward_matches_the_reference(dtype):
    inputs, want = step_backward(dtype)
    device = [cuda().asarray(a) for a in inputs[2:]]  # act, tanh_c, dh, dc
    act, tanh_c, dh, dc = device
    c = cuda().asarray(inputs[1])
    for step in cuda_variants("lstm_cell_backward"):
        d_gates, dc_prev = cuda().xp.empty_like(act), cuda().xp.empty_like(c)
        step(act, c, tanh_c, dh, dc, d_gates, dc_prev)
        assert_on_host((d_gates, dc_prev), want, dtype)


# ---- the column layout (one column per batch row) that the whole-sequence node runs ------------------------

def halved(gates):
    """The step's pre-activations as ``lstm_cell_columns`` takes them: transposed, i, f and o rows halved."""
    columns = gates.T.copy()
    columns[:2 * H] /= 2
    columns[3 * H:] /= 2
    return columns


def run_columns(cell, xp, gates, c, strided_h=False):
    """(act, c', tanh(c'), h') in the row layout, from the kernel run on the transposed arrays; ``strided_h``
    writes h into a strided view, as the layer does."""
    act, c_t = halved(gates), c.T.copy()
    c_out, tanh_c = xp.empty_like(c_t), xp.empty_like(c_t)
    h = xp.empty((H, 3, B), c.dtype)[:, 1] if strided_h else xp.empty_like(c_t)
    cell(act, c_t, c_out, tanh_c, h)
    return act.T, c_out.T, tanh_c.T, h.T


@pytest.mark.parametrize("strided_h", [False, True], ids=["contiguous_h", "strided_h"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_lstm_cell_columns_reference_is_the_lstm_equations(dtype, strided_h):
    gates, c = step_inputs(dtype)
    got = run_columns(kernels.get("lstm_cell_columns", cpu), np, gates, c, strided_h)
    for g, w in zip(got, by_the_equations(gates.astype(np.float64), c.astype(np.float64))):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, **TOL[dtype])


def columns_backward(step, xp, act, c, tanh_c, dh, dc):
    """(d_gates, dc_prev) in the row layout from the column kernel ``step`` (row-layout inputs)."""
    act_t, c_t, tanh_t, dh_t, dc_t = (xp.ascontiguousarray(a.T) for a in (act, c, tanh_c, dh, dc))
    d_gates, dc_prev = xp.empty_like(act_t), xp.empty_like(c_t)
    step(act_t, c_t, tanh_t, dh_t, dc_t, d_gates, dc_prev)
    return d_gates.T, dc_prev.T


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_lstm_cell_columns_backward_equals_the_row_kernel_checked_by_finite_differences(dtype):
    (_, c, act, tanh_c, dh, dc), want = step_backward(dtype)
    got = columns_backward(kernels.get("lstm_cell_columns_backward", cpu), np, act, c, tanh_c, dh, dc)
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, **TOL[dtype])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_lstm_cell_columns_matches_the_reference(dtype):
    gates, c = step_inputs(dtype)
    want = run_columns(kernels.get("lstm_cell_columns", cpu), np, gates, c)
    device = [cuda().asarray(a) for a in (gates, c)]
    xp = cuda().xp

    def on_device(cell, gates, c):  # (the transposes and halving on the host: they are the caller's)
        return run_columns(cell, xp, gates, c, strided_h=True)

    for cell in cuda_variants("lstm_cell_columns"):
        assert_on_host(on_device(cell, *device), want, dtype)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_lstm_cell_columns_backward_matches_the_reference(dtype):
    (_, c, act, tanh_c, dh, dc), want = step_backward(dtype)
    device = [cuda().asarray(a) for a in (act, c, tanh_c, dh, dc)]
    for step in cuda_variants("lstm_cell_columns_backward"):
        assert_on_host(columns_backward(step, cuda().xp, *device), want, dtype)


# ---- the whole-sequence node ---------------------------------------------------------------------------

def layer_arguments(bias=True, seed=0, steps=4, batch=2, size=3, features=2, gates=4):
    """``(x, h0, c0, w_ih, w_hh, b_ih, b_hh)`` of an LSTM layer as float64 leaves; with ``gates=3`` a GRU's
    (no ``c0``)."""
    r.manual_seed(seed)

    def leaf(*shape):
        return r.randn(*shape, dtype=r.float64, requires_grad=True)

    states = tuple(leaf(batch, size) for _ in range(2 if gates == 4 else 1))
    biases = (leaf(gates * size), leaf(gates * size)) if bias else (None, None)
    return (leaf(steps, batch, features), *states, leaf(gates * size, features), leaf(gates * size, size), *biases)


# steps * batch against input + hidden size: the layer joins and halves the weights once (many columns) or
# runs two matmuls a step and halves their product (a few, as a batch-1 step while acting)
COLUMNS = {"many_columns": dict(steps=4, batch=2), "few_columns": dict(steps=2, batch=1)}


@pytest.mark.parametrize("columns", COLUMNS)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_lstm_layer_passes_gradcheck(reverse, bias, columns):
    args = layer_arguments(bias, **COLUMNS[columns])
    tensors = tuple(a for a in args if a is not None)

    def run(*tensors):
        full = list(tensors) + [None, None] * (not bias)
        return LSTMLayer.apply(*full, reverse=reverse)

    assert r.autograd.gradcheck(run, tensors)


def unrolled(x, h, c, w_ih, w_hh, b_ih, b_hh, reverse=False):
    """The same layer from the per-step cell (a graph of ordinary ops per step)."""
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outputs = [None] * x.shape[0]
    for t in steps:
        gates = x[t] @ w_ih.T + h @ w_hh.T + b_ih + b_hh
        i, f, g, o = gates.chunk(4, 1)
        c = r.sigmoid(f) * c + r.sigmoid(i) * r.tanh(g)
        h = r.sigmoid(o) * r.tanh(c)
        outputs[t] = h
    return r.stack(outputs), h, c


@pytest.mark.parametrize("shape", [dict(steps=5, batch=3), dict(steps=3, batch=1)], ids=["many_columns", "few_columns"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_lstm_layer_equals_the_unrolled_equations_values_and_gradients(reverse, shape):
    args = layer_arguments(size=4, features=3, seed=3, **shape)
    assert_same_values_and_gradients(LSTMLayer.apply(*args, reverse=reverse), unrolled(*args, reverse=reverse), args)


def assert_same_values_and_gradients(got, want, args):
    """The outputs ``got`` and ``want`` equal, and so the gradients of one random weighting of them."""
    weights = [r.randn(*w.shape, dtype=r.float64) for w in want]
    grads = r.autograd.grad(sum((g * w).sum() for g, w in zip(got, weights)), args)
    grads_want = r.autograd.grad(sum((g * w).sum() for g, w in zip(want, weights)), args)
    for g, w in zip(got + grads, want + grads_want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_lstm_layer_backward_twice_with_retain_graph_gives_the_same_gradients():
    args = layer_arguments()
    out, h, c = LSTMLayer.apply(*args)
    loss = out.sum() + c.sum()
    first = [g.numpy().copy() for g in r.autograd.grad(loss, args, retain_graph=True)]
    second = [g.numpy() for g in r.autograd.grad(loss, args)]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_lstm_layer_skips_gradients_nobody_needs():
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = layer_arguments()
    out, _, _ = LSTMLayer.apply(x.detach(), h0.detach(), c0.detach(), w_ih, w_hh.detach(), b_ih, b_hh)
    out.sum().backward()
    assert w_ih.grad is not None and b_ih.grad is not None
    assert x.grad is None and w_hh.grad is None and h0.grad is None


def test_changing_the_output_in_place_before_backward_raises():
    args = layer_arguments()
    out, h, c = LSTMLayer.apply(*args)
    out.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_h_n_is_not_a_view_of_the_output():
    out, h, _ = LSTMLayer.apply(*(a.detach() for a in layer_arguments()))
    before = out[-1].clone()
    h.add_(1)
    assert r.equal(out[-1], before)


def test_the_lstm_layer_runs_the_fused_node_and_the_cell_the_step_node():
    lstm = r.nn.LSTM(2, 3)
    out, _ = lstm(r.randn(4, 2, 2))
    assert out.grad_fn.name() == "LSTMLayerBackward0"
    h, c = r.nn.LSTMCell(2, 3)(r.randn(2, 2))
    assert h.grad_fn.name() == "LSTMGatesBackward0"


@pytest.mark.parametrize("cls", [r.nn.LSTM, r.nn.GRU])
def test_an_empty_batch_runs_forward_and_backward(cls):
    """PyTorch's test_RNN_input_size_zero: a batch of no sequences gives empty outputs and zero gradients."""
    layer = cls(3, 4)
    out, state = layer(r.zeros(5, 0, 3))
    assert out.shape == (5, 0, 4)
    assert all(s.shape == (1, 0, 4) for s in (state if isinstance(state, tuple) else (state,)))
    out.sum().backward()
    assert not layer.weight_hh_l0.grad.any() and not layer.bias_ih_l0.grad.any()


# ---- the GRU: its column kernels and its whole-sequence node ------------------------------------------------

def gru_by_the_equations(x_gates, h_gates, h):
    """(r, z, n, h') of one GRU step in the row layout (``[B, 3H]`` parts, columns r, z, n), written out."""
    xr, xz, xn = np.split(x_gates.astype(np.float64), 3, axis=1)
    hr, hz, hn = np.split(h_gates.astype(np.float64), 3, axis=1)
    reset, update = expit(xr + hr), expit(xz + hz)
    cand = np.tanh(xn + reset * hn)
    return reset, update, cand, (1 - update) * cand + update * h


def gru_inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple((rng.standard_normal(shape) * 2).astype(dtype) for shape in ((B, 3 * H), (B, 3 * H), (B, H)))


def run_gru(cell, xp, x_gates, h_gates, h):
    """(r, z, n, h') in the row layout from the column kernel; the input part and h' as strided views, as
    the layer passes them."""
    x_cols = xp.empty((3 * H, 2, B), x_gates.dtype)[:, 1]
    x_cols[...] = x_gates.T
    act, h_out = xp.empty((3 * H, B), h.dtype), xp.empty((H, 3, B), h.dtype)[:, 2]
    cell(x_cols, xp.ascontiguousarray(h_gates.T), xp.ascontiguousarray(h.T), act, h_out)
    return act[:H].T, act[H:2 * H].T, act[2 * H:].T, h_out.T


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gru_cell_columns_reference_is_the_gru_equations(dtype):
    inputs = gru_inputs(dtype)
    got = run_gru(kernels.get("gru_cell_columns", cpu), np, *inputs)
    for g, w in zip(got, gru_by_the_equations(*inputs)):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, **TOL[dtype])


def gru_backward(forward, step, xp, x_gates, h_gates, h, dh):
    """(d_input_part, d_hidden_part, direct part of dh) in the row layout from the column kernels: ``forward``
    for the activations, then ``step``."""
    x_cols, hg_cols, h_cols = (xp.ascontiguousarray(a.T) for a in (x_gates, h_gates, h))
    act = xp.empty((3 * H, B), h.dtype)
    forward(x_cols, hg_cols, h_cols, act, xp.empty_like(h_cols))
    d_x, d_h, direct = xp.empty_like(act), xp.empty_like(act), xp.empty_like(h_cols)
    step(act, hg_cols, h_cols, xp.ascontiguousarray(dh.T), d_x, d_h, direct)
    return d_x.T, d_h.T, direct.T


def test_gru_cell_columns_backward_matches_finite_differences():
    x_gates, h_gates, h = gru_inputs(np.float64, seed=1)
    dh = np.random.default_rng(2).standard_normal((B, H))
    d_x, d_h, direct = gru_backward(kernels.get("gru_cell_columns", cpu), kernels.get("gru_cell_columns_backward", cpu),
                                    np, x_gates, h_gates, h, dh)

    def loss(x_gates, h_gates, h):
        return np.sum(dh * gru_by_the_equations(x_gates, h_gates, h)[3])

    eps = 1e-6
    arrays = [x_gates, h_gates, h]
    # h's own gradient here is the direct part only: the hidden part reaches h through W_hh, the caller's
    for k, grad in enumerate((d_x, d_h, direct)):
        numeric = np.zeros_like(arrays[k])
        for index in np.ndindex(arrays[k].shape):
            saved = arrays[k][index]
            arrays[k][index] = saved + eps
            up = loss(*arrays)
            arrays[k][index] = saved - eps
            down = loss(*arrays)
            arrays[k][index] = saved
            numeric[index] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-7, atol=1e-8)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_gru_cell_columns_and_backward_match_the_reference(dtype):
    inputs = gru_inputs(dtype)
    dh = np.random.default_rng(3).standard_normal((B, H)).astype(dtype)
    on_cpu = [kernels.get(name, cpu) for name in ("gru_cell_columns", "gru_cell_columns_backward")]
    want = run_gru(on_cpu[0], np, *inputs) + gru_backward(*on_cpu, np, *inputs, dh)
    xp, device = cuda().xp, [cuda().asarray(a) for a in (*inputs, dh)]
    for forward, backward in zip(cuda_variants("gru_cell_columns"), cuda_variants("gru_cell_columns_backward")):
        assert_on_host(run_gru(forward, xp, *device[:3]) + gru_backward(forward, backward, xp, *device), want, dtype)


gru_arguments = functools.partial(layer_arguments, gates=3)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_gru_layer_passes_gradcheck(reverse, bias):
    tensors = tuple(a for a in gru_arguments(bias) if a is not None)

    def run(*tensors):
        return GRULayer.apply(*tensors, *[None, None] * (not bias), reverse=reverse)

    assert r.autograd.gradcheck(run, tensors)


def gru_unrolled(x, h, w_ih, w_hh, b_ih, b_hh, reverse=False):
    """The same GRU layer as a graph of ordinary ops per step."""
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outputs = [None] * x.shape[0]
    for t in steps:
        xr, xz, xn = (x[t] @ w_ih.T + b_ih).chunk(3, 1)
        hr, hz, hn = (h @ w_hh.T + b_hh).chunk(3, 1)
        reset, update = r.sigmoid(xr + hr), r.sigmoid(xz + hz)
        cand = r.tanh(xn + reset * hn)
        h = (1 - update) * cand + update * h
        outputs[t] = h
    return r.stack(outputs), h


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_gru_layer_equals_the_unrolled_equations_values_and_gradients(reverse):
    args = gru_arguments(steps=5, batch=3, size=4, features=3, seed=3)
    assert_same_values_and_gradients(GRULayer.apply(*args, reverse=reverse), gru_unrolled(*args, reverse=reverse),
                                     args)


def test_the_gru_layer_runs_the_fused_node_and_skips_gradients_nobody_needs():
    out, _ = r.nn.GRU(2, 3)(r.randn(4, 2, 2))
    assert out.grad_fn.name() == "GRULayerBackward0"
    x, h0, w_ih, w_hh, b_ih, b_hh = gru_arguments()
    out, _ = GRULayer.apply(x.detach(), h0.detach(), w_ih, w_hh.detach(), b_ih, b_hh)
    out.sum().backward()
    assert w_ih.grad is not None and b_ih.grad is not None and b_hh.grad is not None
    assert x.grad is None and w_hh.grad is None and h0.grad is None


def test_the_two_bias_gradients_are_independent_tensors():
    """One sum over the steps serves both biases; changing one gradient in place (clip_grad_norm_) leaves the
    other alone."""
    lstm = r.nn.LSTM(2, 3)
    out, _ = lstm(r.randn(4, 2, 2))
    out.sum().backward()
    assert r.equal(lstm.bias_ih_l0.grad, lstm.bias_hh_l0.grad)
    before = lstm.bias_hh_l0.grad.clone()
    lstm.bias_ih_l0.grad.mul_(2)
    assert r.equal(lstm.bias_hh_l0.grad, before)
