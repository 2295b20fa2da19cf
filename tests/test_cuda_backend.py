"""The CUDA backend against the CPU reference: fused kernels (``rlpipe.kernels``), optimizer steps, helpers and RNG.

Every test here needs CuPy and a GPU; without them the whole module is skipped, with the reason
shown in pytest's summary (-rs).
"""
import numpy as np
import pytest

from rlpipe import backends, kernels
from rlpipe import primitives as P
from rlpipe.autograd.function import null_context

pytestmark = pytest.mark.cuda
if not backends.cuda_available():
    pytest.skip("cuda backend unavailable (CuPy or a GPU missing)", allow_module_level=True)

cuda = backends.cuda_backend()
cpu = backends.cpu

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}
TOL_ERF = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: TOL[np.float64]}  # gelu, erf

# zero, tiny values, both sides of the softplus thresholds (beta * x = 20 at x = 20 for beta 1
# and at x = 10 for beta 2; beta * x = 5 at x = 10 for beta 0.5 and threshold 5), where exp
# overflows in float32 (89) and float64 (710), and the non-finite values
EDGES = [0.0, -0.0, 1e-6, -1e-6, 0.5, -0.5, 1.0, -1.0, 2.5, 5.0, -5.0, 9.99, 10.0, 10.01,
         -10.0, 19.99, 20.0, 20.01, -20.0, 30.0, -30.0, 50.0, -50.0, 88.0, -88.0, 89.0, -89.0,
         100.0, -100.0, 710.0, -710.0, 1000.0, -1000.0, 1e4, -1e4,
         np.inf, -np.inf, np.nan]


@pytest.fixture(autouse=True)
def _quiet_numpy():
    """The edge values make inf and NaN on purpose: keep NumPy from warning about them."""
    with np.errstate(all="ignore"):
        yield


def inputs(dtype, seed=0, n=4096, scale=3.0):
    """Random values around the interesting range, then every edge value."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.standard_normal(n) * scale, EDGES]).astype(dtype)


def grads_like(x, seed=1):
    return np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)


def assert_matches(got, want, tol):
    """``got`` (a cuda array) holds ``want`` (a NumPy array) in the same dtype and shape."""
    assert isinstance(got, cuda.ndarray)
    host = cuda.to_host(got)
    assert isinstance(host, np.ndarray)
    assert host.dtype == want.dtype
    assert host.shape == want.shape
    np.testing.assert_allclose(host, want, equal_nan=True, **tol)


def forward(backend, function, x, *args):
    """A primitive's forward on ``backend``'s arrays: its fused kernel where the backend has one."""
    return function.forward(null_context(backend), x, *args)


def backward(backend, function, x, g, *args):
    """The gradient at ``x`` that a primitive's backward gives for the output gradient ``g``."""
    ctx = function()
    ctx.be = backend
    function.forward(ctx, x, *args)
    return function.backward(ctx, g)[0]


# ---- activations ---------------------------------------------------------------------------

FORWARD = {
    "relu": (lambda b, x: forward(b, P.Relu, x), TOL),
    "leaky_relu_0.01": (lambda b, x: forward(b, P.LeakyRelu, x, 0.01), TOL),
    "leaky_relu_0.2": (lambda b, x: forward(b, P.LeakyRelu, x, 0.2), TOL),
    "sigmoid": (lambda b, x: forward(b, P.Sigmoid, x), TOL),
    "tanh": (lambda b, x: forward(b, P.Tanh, x), TOL),
    "gelu": (lambda b, x: forward(b, P.Gelu, x, "none"), TOL_ERF),
    "gelu_tanh": (lambda b, x: forward(b, P.Gelu, x, "tanh"), TOL_ERF),
    "softplus": (lambda b, x: forward(b, P.Softplus, x, 1.0, 20.0), TOL),
    "softplus_beta2": (lambda b, x: forward(b, P.Softplus, x, 2.0, 20.0), TOL),
    "softplus_beta0.5_threshold5": (lambda b, x: forward(b, P.Softplus, x, 0.5, 5.0), TOL),
    "erf": (lambda b, x: b.erf(x), TOL_ERF),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kernel", sorted(FORWARD))
def test_forward_matches_cpu(kernel, dtype):
    fn, tol = FORWARD[kernel]
    x = inputs(dtype)
    assert_matches(fn(cuda, cuda.asarray(x)), fn(cpu, x), tol[dtype])


# backward kernels: (call, tolerance, what the first argument is made from x)
BACKWARD = {
    "relu_backward": (lambda b, x, g: backward(b, P.Relu, x, g), TOL, None),
    "leaky_relu_backward_0.01": (lambda b, x, g: backward(b, P.LeakyRelu, x, g, 0.01), TOL, None),
    "leaky_relu_backward_0.2": (lambda b, x, g: backward(b, P.LeakyRelu, x, g, 0.2), TOL, None),
    "sigmoid_backward": (lambda b, x, g: backward(b, P.Sigmoid, x, g), TOL, None),
    "tanh_backward": (lambda b, x, g: backward(b, P.Tanh, x, g), TOL, None),
    "gelu_backward": (lambda b, x, g: backward(b, P.Gelu, x, g, "none"), TOL_ERF, None),
    "gelu_backward_tanh": (lambda b, x, g: backward(b, P.Gelu, x, g, "tanh"), TOL_ERF, None),
    "softplus_backward": (lambda b, x, g: backward(b, P.Softplus, x, g, 1.0, 20.0), TOL, None),
    "softplus_backward_beta2": (lambda b, x, g: backward(b, P.Softplus, x, g, 2.0, 20.0), TOL, None),
    "softplus_backward_beta0.5_threshold5": (
        lambda b, x, g: backward(b, P.Softplus, x, g, 0.5, 5.0), TOL, None),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kernel", sorted(BACKWARD))
def test_backward_matches_cpu(kernel, dtype):
    fn, tol, make_first = BACKWARD[kernel]
    x = inputs(dtype)
    first = make_first(x) if make_first else x  # sigmoid/tanh backward take the output
    g = grads_like(x)
    assert_matches(fn(cuda, cuda.asarray(first), cuda.asarray(g)), fn(cpu, first, g), tol[dtype])


@pytest.mark.parametrize("kernel", sorted(FORWARD))
def test_forward_float16(kernel):
    """Half precision: computed in float32 and rounded once, so within a half ulp or so of the
    float32 reference rounded to half."""
    fn, _ = FORWARD[kernel]
    x = inputs(np.float16, n=1024, scale=2.0)
    got = fn(cuda, cuda.asarray(x))
    want = fn(cpu, x.astype(np.float32)).astype(np.float16)
    assert_matches(got, want, dict(rtol=2e-3, atol=1e-4))


@pytest.mark.parametrize("kernel", sorted(BACKWARD))
def test_backward_float16(kernel):
    fn, _, make_first = BACKWARD[kernel]
    x = inputs(np.float16, n=1024, scale=2.0)
    first = (make_first(x.astype(np.float32)).astype(np.float16) if make_first else x)
    g = grads_like(x)
    got = fn(cuda, cuda.asarray(first), cuda.asarray(g))
    want = fn(cpu, first.astype(np.float32), g.astype(np.float32)).astype(np.float16)
    assert_matches(got, want, dict(rtol=2e-3, atol=1e-4))


def test_kernels_take_strided_arrays():
    x = inputs(np.float32, n=4096)[:4096].reshape(64, 64)
    g = grads_like(x)
    xt, gt = x.T, g[::-1].T  # neither is contiguous
    dx, dg = cuda.asarray(x).T, cuda.asarray(g)[::-1].T
    assert_matches(forward(cuda, P.Gelu, dx, "none"), forward(cpu, P.Gelu, xt, "none"), TOL_ERF[np.float32])
    assert_matches(backward(cuda, P.Softplus, dx, dg, 1.0, 20.0), backward(cpu, P.Softplus, xt, gt, 1.0, 20.0),
                   TOL[np.float32])


def test_backward_dtype_follows_numpy():
    x64 = inputs(np.float64, n=256)
    g32 = grads_like(x64).astype(np.float32)
    # the relu family returns the gradient's dtype ...
    assert_matches(backward(cuda, P.Relu, cuda.asarray(x64), cuda.asarray(g32)),
                   backward(cpu, P.Relu, x64, g32), TOL[np.float32])
    assert_matches(backward(cuda, P.LeakyRelu, cuda.asarray(x64), cuda.asarray(g32), 0.1),
                   backward(cpu, P.LeakyRelu, x64, g32, 0.1), TOL[np.float32])
    # ... the others NumPy's promoted dtype
    assert_matches(backward(cuda, P.Sigmoid, cuda.asarray(x64), cuda.asarray(g32)),
                   backward(cpu, P.Sigmoid, x64, g32), TOL[np.float64])


# ---- optimizer steps -------------------------------------------------------------------

def start(dtype, buffers, fill=0.5, n=333, seed=2):
    """A parameter, three gradients and the named state buffers, on both backends.

    Buffers start at ``fill``: 0.5 rather than 0 catches a step that ignores a buffer it should
    read or overwrite. A buffer mapped to False is None (unused).
    """
    rng = np.random.default_rng(seed)
    host = {"param": rng.standard_normal(n).astype(dtype)}
    for key, used in buffers.items():
        host[key] = np.full(n, fill, dtype) if used else None
    grads = [rng.standard_normal(n).astype(dtype) for _ in range(3)]
    device = {key: None if a is None else cuda.asarray(a.copy()) for key, a in host.items()}
    return host, device, grads


def assert_states_match(device, host, dtype, step):
    for key, want in host.items():
        if want is None:
            assert device[key] is None
            continue
        try:
            assert_matches(device[key], want, TOL[dtype])
        except AssertionError as e:
            raise AssertionError(f"{key} after step {step}: {e}") from None


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01], ids=["nowd", "wd"])
@pytest.mark.parametrize("momentum,dampening,nesterov", [
    (0.0, 0.0, False), (0.0, 0.0, True), (0.9, 0.0, False), (0.9, 0.0, True), (0.9, 0.1, False),
], ids=["plain", "plain-nesterov", "momentum", "nesterov", "dampening"])
def test_sgd_step_matches_cpu(momentum, dampening, nesterov, weight_decay, maximize, dtype):
    host, device, grads = start(dtype, {"momentum_buffer": momentum > 0})
    for step, g in enumerate(grads, start=1):
        for backend, state, grad in ((cpu, host, g), (cuda, device, cuda.asarray(g))):
            kernels.get("sgd_step", backend)(state["param"], grad, state["momentum_buffer"], lr=0.05,
                                             momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                             nesterov=nesterov, maximize=maximize, first_step=step == 1)
        assert_states_match(device, host, dtype, step)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
@pytest.mark.parametrize("decoupled", [False, True], ids=["adam", "adamw"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01], ids=["nowd", "wd"])
@pytest.mark.parametrize("amsgrad", [False, True], ids=["plain", "amsgrad"])
def test_adam_step_matches_cpu(amsgrad, weight_decay, decoupled, maximize, dtype):
    host, device, grads = start(dtype, {"exp_avg": True, "exp_avg_sq": True,
                                        "max_exp_avg_sq": amsgrad}, fill=0.0)
    # shrink the later gradients so exp_avg_sq falls and amsgrad's maximum matters
    grads = [grads[0], grads[1] * 0.1, grads[2] * 0.01]
    for step, g in enumerate(grads, start=1):
        for backend, state, grad in ((cpu, host, g), (cuda, device, cuda.asarray(g))):
            kernels.get("adam_step", backend)(state["param"], grad, state["exp_avg"], state["exp_avg_sq"],
                                              state["max_exp_avg_sq"], step=step, lr=0.01, beta1=0.9,
                                              beta2=0.999, eps=1e-8, weight_decay=weight_decay, amsgrad=amsgrad,
                                              maximize=maximize, decoupled=decoupled)
        assert_states_match(device, host, dtype, step)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01], ids=["nowd", "wd"])
@pytest.mark.parametrize("momentum", [0.0, 0.9], ids=["nomomentum", "momentum"])
@pytest.mark.parametrize("centered", [False, True], ids=["plain", "centered"])
def test_rmsprop_step_matches_cpu(centered, momentum, weight_decay, maximize, dtype):
    host, device, grads = start(dtype, {"square_avg": True, "momentum_buffer": momentum > 0,
                                        "grad_avg": centered})
    for step, g in enumerate(grads, start=1):
        for backend, state, grad in ((cpu, host, g), (cuda, device, cuda.asarray(g))):
            kernels.get("rmsprop_step", backend)(state["param"], grad, state["square_avg"],
                                                 state["momentum_buffer"], state["grad_avg"], lr=0.01,
                                                 alpha=0.99, eps=1e-8, weight_decay=weight_decay,
                                                 momentum=momentum, centered=centered, maximize=maximize)
        assert_states_match(device, host, dtype, step)


def test_optimizer_steps_update_in_place():
    host, device, grads = start(np.float32, {"exp_avg": True, "exp_avg_sq": True}, fill=0.0)
    param, exp_avg = device["param"], device["exp_avg"]
    before = cuda.to_host(param).copy()
    out = kernels.get("adam_step", cuda)(param, cuda.asarray(grads[0]), exp_avg, device["exp_avg_sq"], None, 1,
                                         0.01, 0.9, 0.999, 1e-8, 0.0, False, False, False)
    assert out is None
    assert param is device["param"] and not np.array_equal(cuda.to_host(param), before)


# ---- helpers -----------------------------------------------------------------------------

def test_module_constants():
    assert cuda.name == "cuda"
    assert cuda.is_available() is True
    assert cuda.device_count() >= 1
    assert cuda.bfloat16 is None
    assert isinstance(cuda.xp.zeros(2), cuda.ndarray)


def test_asarray_and_to_host():
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = cuda.asarray(host)
    assert isinstance(a, cuda.ndarray) and a.dtype == np.float32 and a.shape == (2, 3)
    np.testing.assert_array_equal(cuda.to_host(a), host)
    assert cuda.may_share_memory(cuda.asarray(a), a)  # already there: no copy
    assert cuda.asarray(a, dtype=np.float64).dtype == np.float64
    assert cuda.to_host(cuda.asarray([1, 2, 3], dtype=np.int64)).tolist() == [1, 2, 3]
    assert cuda.to_host(cuda.asarray(2.5)).shape == ()
    assert cuda.asarray(host, index=0).device.id == 0
    # the CPU backend brings a device array back
    np.testing.assert_array_equal(cpu.asarray(a), host)


def test_full():
    a = cuda.full((2, 3), 1.5, np.float32, 0)
    assert_matches(a, cpu.full((2, 3), 1.5, np.float32), TOL[np.float32])
    assert cuda.full(4, 7, np.int64).dtype == np.int64


@pytest.mark.skipif(cuda.device_count() < 2, reason="needs two GPUs")
def test_asarray_moves_between_devices():
    a = cuda.asarray(np.arange(4.0), index=0)
    b = cuda.asarray(a, index=1)
    assert b.device.id == 1
    np.testing.assert_array_equal(cuda.to_host(b), np.arange(4.0))
    cuda.synchronize(1)


def test_supports():
    assert cuda.supports(np.float32) and cuda.supports(np.float16) and cuda.supports(np.int64)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert not cuda.supports(ml_dtypes.bfloat16)


def test_may_share_memory():
    a = cuda.asarray(np.zeros(10))
    assert cuda.may_share_memory(a, a[2:5])
    assert not cuda.may_share_memory(a, a.copy())
    assert not cuda.may_share_memory(a, np.zeros(10))


def test_scatter_add_repeats_indices():
    index = np.array([0, 2, 2, 5, 0, 0])
    values = np.arange(6, dtype=np.float32)
    want = np.zeros(7, np.float32)
    cpu.scatter_add(want, index, values)
    got = cuda.asarray(np.zeros(7, np.float32))
    cuda.scatter_add(got, cuda.asarray(index), cuda.asarray(values))
    assert_matches(got, want, TOL[np.float32])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_, np.float64])
def test_scatter_add_takes_every_dtype_as_numpy_add_at(dtype):
    # cupyx.scatter_add alone refuses int64 and the narrow integer types; sums wrap as NumPy's do
    index = np.array([0, 2, 2, 5, 0, 0])
    values = np.array([100, -3, 120, 7, 90, -128]).astype(dtype)
    start = np.array([5, -1, 127, 0, -7, 3, 1]).astype(dtype)
    want = start.copy()
    np.add.at(want, index, values)
    got = cuda.asarray(start)
    cuda.scatter_add(got, cuda.asarray(index), cuda.asarray(values))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(cuda.to_host(got), want)


def test_writable_refuses_broadcast_views_only():
    a = cuda.asarray(np.zeros((3, 4), np.float32))
    assert cuda.writable(a) and cuda.writable(a[:, 1]) and cuda.writable(a.T)
    assert not cuda.writable(cuda.xp.broadcast_to(a[:1], (3, 4)))
    assert cuda.writable(cuda.xp.broadcast_to(a[:1], (1, 4)))  # a zero stride over one element is fine


def test_synchronize():
    cuda.synchronize()
    cuda.synchronize(0)


# ---- random numbers ------------------------------------------------------------------

def draws(rs):
    """One of every kind of draw, as host arrays."""
    return [cuda.to_host(a) for a in (
        rs.uniform((5, 3), np.float32), rs.uniform(7, np.float64, -2.0, 3.0),
        rs.normal((4, 4), np.float32), rs.normal(9, np.float64, 1.0, 0.5),
        rs.integers(-3, 11, (13,), np.int32), rs.permutation(17))]


def test_random_shapes_dtypes_and_ranges():
    rs = cuda.RandomState(1234)
    u = rs.uniform((1000, 10), np.float32, -1.0, 2.0)
    assert isinstance(u, cuda.ndarray) and u.shape == (1000, 10) and u.dtype == np.float32
    u = cuda.to_host(u)
    assert u.min() >= -1.0 and u.max() < 2.0
    assert abs(u.mean() - 0.5) < 0.05
    assert cuda.to_host(rs.uniform(3, np.float16)).dtype == np.float16
    n = cuda.to_host(rs.normal((200000,), np.float64, 2.0, 3.0))
    assert n.dtype == np.float64 and abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 3.0) < 0.05
    i = cuda.to_host(rs.integers(-3, 4, (10000,), np.int32))
    assert i.dtype == np.int32 and set(np.unique(i)) == set(range(-3, 4))
    p = cuda.to_host(rs.permutation(1000))
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(1000))
    assert not np.array_equal(p, np.arange(1000))


def test_float16_uniform_stays_below_one():
    # float64 draws within 2**-12 of 1 round to 1.0 in float16: the CPU backend clamps them, so must this
    u = cuda.to_host(cuda.RandomState(0).uniform((1_000_000,), np.float16))
    assert u.dtype == np.float16 and u.min() >= 0 and u.max() < 1


def test_random_same_seed_same_draws():
    a, b, c = cuda.RandomState(7), cuda.RandomState(7), cuda.RandomState(8)
    first, second, other = draws(a), draws(b), draws(c)
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(first, other))


def test_random_state_round_trip_is_exact():
    rs = cuda.RandomState(99)
    draws(rs)  # move away from the seed
    state = rs.get_state()
    after = draws(rs)
    rs.set_state(state)
    for x, y in zip(after, draws(rs)):
        np.testing.assert_array_equal(x, y)
    other = cuda.RandomState(5)  # a state fits any generator of this backend
    other.set_state(state)
    for x, y in zip(after, draws(other)):
        np.testing.assert_array_equal(x, y)


def test_random_state_rejects_foreign_state():
    rs = cuda.RandomState(0)
    with pytest.raises(ValueError):
        rs.set_state(cpu.RandomState(0).get_state())


# ---- tensors across devices (each of these failed on first contact with CuPy) ---------------

def test_tensor_round_trip_between_devices():
    import rlpipe as r
    x = r.tensor([[1.0, 2.0], [3.0, -4.0]], requires_grad=True)
    on_gpu = x.cuda()
    assert on_gpu.device.type == "cuda" and isinstance(on_gpu._data, cuda.ndarray)
    back = on_gpu.cpu()
    assert back.device.type == "cpu" and type(back._data) is np.ndarray
    np.testing.assert_array_equal(back.detach().numpy(), x.detach().numpy())
    (on_gpu.to("cpu") * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 2.0, np.float32))


def test_in_place_ops_on_cuda_tensors():
    import rlpipe as r
    x = r.zeros(3, device="cuda")
    x.add_(2).mul_(3)
    np.testing.assert_array_equal(x.cpu().numpy(), np.full(3, 6.0, np.float32))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        r.zeros(1, device="cuda").expand(3).add_(1)
