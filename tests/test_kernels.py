"""The kernels layer (``rlpipe.kernels``): the registry, its layering, each kernel's reference against the
code it replaced, and (``cuda`` marker: a GPU or the CuPy stand-in) each CUDA kernel against its reference.

Independent references: the optimizer steps as the CPU backend computed them before the kernels layer (a
verbatim copy below: the new references must match it bit for bit), the activations' formulas as the ops
wrote them, hand-computed returns, and the callers' own CPU formulas for the returns.
"""
import ast
import functools
import itertools
import pathlib
import sys

import numpy as np
import pytest
from scipy.special import erf

import rlpipe
from rlpipe import backends, kernels
from rlpipe.autograd.function import null_context
from rlpipe.backends import cpu
from rlpipe.objectives.value.functional import _ValueEstimate
from rlpipe.postprocs.multistep import _n_step_returns

KERNELS_DIR = pathlib.Path(rlpipe.__file__).parent / "kernels"
OPTIM = ("sgd_step", "adam_step", "rmsprop_step", "adagrad_step")
RETURNS = ("n_step_returns", "value_estimate")
ACTIVATIONS = ("relu_backward", "leaky_relu", "leaky_relu_backward", "sigmoid", "sigmoid_backward", "tanh_backward",
               "gelu", "gelu_tanh", "gelu_backward", "gelu_tanh_backward", "softplus", "softplus_backward")
# tested in test_rnn_kernels.py
RECURRENT = ("lstm_cell", "lstm_cell_backward", "lstm_cell_columns", "lstm_cell_columns_backward", "gru_cell_columns",
             "gru_cell_columns_backward")


# ---- the registry -------------------------------------------------------------------------------

def test_every_kernel_is_registered_and_tested_here():
    assert set(kernels.KERNELS) == set(OPTIM + RETURNS + ACTIVATIONS + RECURRENT)


def test_get_on_the_cpu():
    for name in OPTIM + RECURRENT:  # the reference runs on the CPU
        step = kernels.get(name, cpu)
        assert step.func is kernels.KERNELS[name].reference and step.args == (np,)
        assert kernels.get(name, cpu) is step  # looked up once per backend
    for name in RETURNS + ACTIVATIONS:  # the caller's own formula runs
        assert kernels.get(name, cpu) is None


def test_get_refuses_an_unknown_name():
    with pytest.raises(KeyError, match="no kernel named 'adam'.*adam_step"):
        kernels.get("adam", cpu)
    assert kernels.get("adam_step", cpu) is not None  # still usable


def test_the_layer_imports_only_backends_and_the_standard_library():
    for path in KERNELS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                target = "." * node.level + (node.module or "")
                assert target in (".", "._registry", "..backends"), f"{path.name} imports {target}"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                for name in names:
                    assert name.split(".")[0] in sys.stdlib_module_names, f"{path.name} imports {name}"


def test_every_kernel_has_cuda_sources():
    for kernel in kernels.KERNELS.values():
        assert kernel.sources, kernel.name
        assert all(source.body and source.out_params for source in kernel.sources), kernel.name


# ---- the optimizer steps: the CPU backend's code before the kernels layer, verbatim ----------------

@functools.lru_cache(maxsize=256)
def _scalar(value, dtype):
    """``value`` as a read-only 0-d array of ``dtype`` (constants recur across parameters and
    steps)."""
    out = np.array(value, dtype)
    out.flags.writeable = False
    return out


def _in_float32(step, args):
    """Runs ``step(**args)`` on float32 copies of its arrays, then rounds the results back into
    the parameter and state buffers (every array but ``grad``). ``args`` is the caller's
    ``locals()`` taken before it defines anything, so exactly its arguments."""
    wide = {k: v.astype(np.float32) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    step(**wide)
    for key, value in args.items():
        if key != "grad" and isinstance(value, np.ndarray):
            value[...] = wide[key]


def _array(x):
    """NumPy gives 0-d results as scalars; the steps write into their scratch arrays."""
    return x if type(x) is np.ndarray else np.array(x)


def _direction(param, grad, weight_decay, maximize):
    """The gradient an update follows: negated to maximize, plus ``weight_decay * param``.

    Without either it is ``grad`` itself, so callers must not write into the result."""
    if weight_decay:
        g = _array(param * _scalar(weight_decay, param.dtype))
        return np.subtract(g, grad, out=g) if maximize else np.add(g, grad, out=g)
    return np.negative(grad) if maximize else grad


@cpu.without_fp_warnings
def old_sgd_step(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, nesterov,
             maximize, first_step):
    """One torch.optim.SGD update of ``param`` (and ``momentum_buffer`` when momentum > 0)."""
    if param.dtype.itemsize < 4:
        return _in_float32(old_sgd_step, locals())
    g = _direction(param, grad, weight_decay, maximize)
    if momentum:
        if first_step:
            momentum_buffer[...] = g
        else:
            momentum_buffer *= momentum
            momentum_buffer += (1 - dampening) * g
        g = g + momentum * momentum_buffer if nesterov else momentum_buffer
    param -= lr * g


@cpu.without_fp_warnings
def old_adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, amsgrad, maximize, decoupled):
    """One torch.optim.Adam (``decoupled=False``) or AdamW (``decoupled=True``) update.

    ``step`` is the step count after this update (1 on the first call).
    """
    if param.dtype.itemsize < 4:
        return _in_float32(old_adam_step, locals())
    dtype = param.dtype
    if weight_decay and decoupled:
        param *= _scalar(1 - lr * weight_decay, dtype)
        weight_decay = 0
    g = _direction(param, grad, weight_decay, maximize)
    # both averages move part of the way to their targets: x += (1 - beta) * (target - x)
    scratch = _array(np.subtract(g, exp_avg))
    scratch *= _scalar(1 - beta1, dtype)
    exp_avg += scratch
    np.multiply(g, g, out=scratch)
    scratch -= exp_avg_sq
    scratch *= _scalar(1 - beta2, dtype)
    exp_avg_sq += scratch
    if amsgrad:
        np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        exp_avg_sq = max_exp_avg_sq
    # param -= lr / bias1 * exp_avg / (sqrt(v) / bias2_sqrt + eps), multiplied through by bias2_sqrt
    bias2_sqrt = (1 - beta2 ** step) ** 0.5
    np.sqrt(exp_avg_sq, out=scratch)
    scratch += _scalar(eps * bias2_sqrt, dtype)
    np.divide(exp_avg, scratch, out=scratch)
    scratch *= _scalar(lr * bias2_sqrt / (1 - beta1 ** step), dtype)
    param -= scratch


@cpu.without_fp_warnings
def old_rmsprop_step(param, grad, square_avg, momentum_buffer, grad_avg, lr, alpha, eps, weight_decay,
                 momentum, centered, maximize):
    """One torch.optim.RMSprop update (buffers given as None when unused)."""
    if param.dtype.itemsize < 4:
        return _in_float32(old_rmsprop_step, locals())
    dtype = param.dtype
    g = _direction(param, grad, weight_decay, maximize)
    rate = _scalar(1 - alpha, dtype)
    scratch = _array(np.multiply(g, g))  # the averages move (1 - alpha) of the way to g * g and g
    scratch -= square_avg
    scratch *= rate
    square_avg += scratch
    if centered:
        np.subtract(g, grad_avg, out=scratch)
        scratch *= rate
        grad_avg += scratch
        np.multiply(grad_avg, grad_avg, out=scratch)
        np.subtract(square_avg, scratch, out=scratch)
        np.sqrt(scratch, out=scratch)
    else:
        np.sqrt(square_avg, out=scratch)
    scratch += _scalar(eps, dtype)
    np.divide(g, scratch, out=scratch)
    if momentum > 0:
        momentum_buffer *= _scalar(momentum, dtype)
        momentum_buffer += scratch
        np.multiply(momentum_buffer, _scalar(lr, dtype), out=scratch)
    else:
        scratch *= _scalar(lr, dtype)
    param -= scratch


@cpu.without_fp_warnings
def old_adagrad_step(param, grad, state_sum, step, lr, lr_decay, weight_decay, eps, maximize):
    """One torch.optim.Adagrad update of ``param`` and ``state_sum`` (dense gradients).

    ``step`` is the step count after this update (1 on the first call).
    """
    if param.dtype.itemsize < 4:
        return _in_float32(old_adagrad_step, locals())
    dtype = param.dtype
    g = _direction(param, grad, weight_decay, maximize)
    scratch = _array(np.multiply(g, g))
    state_sum += scratch
    np.sqrt(state_sum, out=scratch)
    scratch += _scalar(eps, dtype)
    np.divide(g, scratch, out=scratch)
    scratch *= _scalar(lr / (1 + (step - 1) * lr_decay), dtype)
    param -= scratch


OLD = {"sgd_step": old_sgd_step, "adam_step": old_adam_step, "rmsprop_step": old_rmsprop_step,
       "adagrad_step": old_adagrad_step}

# every option of every step: (buffers used, keyword arguments)
SGD_CASES = [({"momentum_buffer": momentum > 0},
              dict(lr=0.05, momentum=momentum, dampening=dampening, weight_decay=wd, nesterov=nesterov, maximize=mx))
             for (momentum, dampening, nesterov), wd, mx in itertools.product(
                 [(0.0, 0.0, False), (0.9, 0.0, False), (0.9, 0.0, True), (0.9, 0.1, False)], [0.0, 0.01],
                 [False, True])]
ADAM_CASES = [({"exp_avg": True, "exp_avg_sq": True, "max_exp_avg_sq": ams},
               dict(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=wd, amsgrad=ams, maximize=mx,
                    decoupled=dec))
              for ams, wd, dec, mx in itertools.product([False, True], [0.0, 0.01], [False, True], [False, True])]
RMSPROP_CASES = [({"square_avg": True, "momentum_buffer": momentum > 0, "grad_avg": centered},
                  dict(lr=0.01, alpha=0.99, eps=1e-8, weight_decay=wd, momentum=momentum, centered=centered,
                       maximize=mx))
                 for centered, momentum, wd, mx in itertools.product([False, True], [0.0, 0.9], [0.0, 0.01],
                                                                     [False, True])]
ADAGRAD_CASES = [({"state_sum": True}, dict(lr=0.1, lr_decay=decay, weight_decay=wd, eps=1e-10, maximize=mx))
                 for decay, wd, mx in itertools.product([0.0, 0.01], [0.0, 0.01], [False, True])]
CASES = [(name, i, case) for name, cases in (("sgd_step", SGD_CASES), ("adam_step", ADAM_CASES),
                                             ("rmsprop_step", RMSPROP_CASES), ("adagrad_step", ADAGRAD_CASES))
         for i, case in enumerate(cases)]
HOST_DTYPES = [np.float16, cpu.bfloat16, np.float32, np.float64]


def fresh_state(buffers, dtype, n=257, seed=3):
    """A parameter, three gradients (shrinking, so amsgrad's maximum matters) and the buffers (None where
    unused), the buffers starting at 0.5 so that a step ignoring one shows."""
    rng = np.random.default_rng(seed)
    state = {"param": rng.standard_normal(n).astype(dtype)}
    state.update({key: np.full(n, 0.5, dtype) if used else None for key, used in buffers.items()})
    grads = [(rng.standard_normal(n) * scale).astype(dtype) for scale in (1.0, 0.1, 0.01)]
    return state, grads


def step_arguments(name, state, grad, options, step):
    """The positional arguments of step ``name`` (its signature, the reference's less ``xp``)."""
    s = state
    if name == "sgd_step":
        return (s["param"], grad, s["momentum_buffer"], options["lr"], options["momentum"], options["dampening"],
                options["weight_decay"], options["nesterov"], options["maximize"], step == 1)
    if name == "adam_step":
        return (s["param"], grad, s["exp_avg"], s["exp_avg_sq"], s["max_exp_avg_sq"], step, options["lr"],
                options["beta1"], options["beta2"], options["eps"], options["weight_decay"], options["amsgrad"],
                options["maximize"], options["decoupled"])
    if name == "rmsprop_step":
        return (s["param"], grad, s["square_avg"], s["momentum_buffer"], s["grad_avg"], options["lr"],
                options["alpha"], options["eps"], options["weight_decay"], options["momentum"], options["centered"],
                options["maximize"])
    return (s["param"], grad, s["state_sum"], step, options["lr"], options["lr_decay"], options["weight_decay"],
            options["eps"], options["maximize"])


def run_steps(step_fn, name, state, grads, options, to_device=lambda a: a):
    for step, grad in enumerate(grads, start=1):
        step_fn(*step_arguments(name, state, to_device(grad), options, step))
    return state


@pytest.mark.parametrize("dtype", HOST_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,index,case", CASES, ids=[f"{name}-{i}" for name, i, _ in CASES])
def test_optimizer_reference_is_the_old_cpu_step_bit_for_bit(name, index, case, dtype):
    buffers, options = case
    want = run_steps(OLD[name], name, *fresh_state(buffers, dtype), options)
    got = run_steps(kernels.get(name, cpu), name, *fresh_state(buffers, dtype), options)
    for key, value in want.items():
        if value is None:
            assert got[key] is None
        else:
            assert got[key].dtype == value.dtype
            np.testing.assert_array_equal(got[key].astype(np.float64), value.astype(np.float64), err_msg=key)


def test_optimizer_reference_on_a_zero_dim_parameter():
    """NumPy gives 0-d results as scalars: the steps still write into their arrays."""
    for name, _, (buffers, options) in CASES:
        state, grads = fresh_state(buffers, np.float64, n=1)
        state = {k: None if v is None else v.reshape(()) for k, v in state.items()}
        want = {k: None if v is None else v.copy() for k, v in state.items()}
        run_steps(OLD[name], name, want, [g.reshape(()) for g in grads], options)
        run_steps(kernels.get(name, cpu), name, state, [g.reshape(()) for g in grads], options)
        assert state["param"].shape == () and state["param"] == want["param"], name


# ---- the returns: hand-computed values and the callers' own CPU formulas --------------------------

def test_n_step_returns_by_hand():
    done = np.array([[False, True, False, False]])
    reward = np.array([[1.0, 2.0, 3.0, 4.0]])
    m, total = kernels.KERNELS["n_step_returns"].reference(np, done, np.ones((1, 4), bool), reward, 0.5, 2)
    assert m.tolist() == [[2, 1, 2, 1]] and total.tolist() == [[2.0, 2.0, 5.0, 4.0]]
    valid = np.array([[True, True, True, False]])  # the batch ends after step 2
    m, total = kernels.KERNELS["n_step_returns"].reference(np, done, valid, reward, 0.5, 2)
    assert m.tolist() == [[2, 1, 1, 1]] and total.tolist() == [[2.0, 2.0, 3.0, 4.0]]
    m, total = kernels.KERNELS["n_step_returns"].reference(np, done & False, np.ones((1, 4), bool), reward, 0.5, 3)
    assert m.tolist() == [[3, 3, 2, 1]] and total.tolist() == [[1 + 1 + 0.75, 2 + 1.5 + 1, 3 + 2, 4]]


def test_value_estimate_by_hand():
    reference = kernels.KERNELS["value_estimate"].reference
    reward, value = np.array([[1.0, 1.0]]), np.array([[0.5, 0.5]])
    no, last_terminated = np.zeros((1, 2), bool), np.array([[False, True]])
    for gae in (True, False):  # with no done in the batch, GAE's target is TD(lambda)'s
        advantage, target = reference(np, reward, value, value, no, no, 0.5, 0.5, gae)
        assert advantage.tolist() == [[0.9375, 0.75]] and target.tolist() == [[1.4375, 1.25]]
    advantage, target = reference(np, reward, value, value, last_terminated, last_terminated, 0.5, 0.5, True)
    assert advantage.tolist() == [[0.875, 0.5]] and target.tolist() == [[1.375, 1.0]]


def random_returns_batch(dtype, shape=(6, 37), seed=7):
    rng = np.random.default_rng(seed)
    done = rng.random(shape) < 0.15
    valid = np.ones(shape, bool)
    valid[1, 20:] = False  # a row whose batch ends early, as a collector's mask does
    valid[4, 3] = False
    terminated = done & (rng.random(shape) < 0.5)
    reward, value, next_value = ((rng.standard_normal(shape) * 2).astype(dtype) for _ in range(3))
    return done, valid, terminated, reward, value, next_value


@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_n_step_returns_reference_is_multisteps_cpu_formula(dtype, n):
    done, valid, _, reward, _, _ = random_returns_batch(dtype)
    want_m, want_total = _n_step_returns(cpu, done, valid, reward, 0.93, n)
    m, total = kernels.KERNELS["n_step_returns"].reference(np, done, valid, reward, 0.93, n)
    assert m.dtype == np.int64 and total.dtype == dtype
    np.testing.assert_array_equal(m, want_m)
    np.testing.assert_array_equal(total, want_total)  # the same terms, added in the same order


@pytest.mark.parametrize("gae", [True, False], ids=["gae", "td_lambda"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_value_estimate_reference_is_the_estimators_cpu_formula(dtype, gae):
    done, _, terminated, reward, value, next_value = random_returns_batch(dtype)
    want = _ValueEstimate.forward(null_context(cpu), reward, value, next_value, done, terminated, 0.97, 0.9, gae)
    got = kernels.KERNELS["value_estimate"].reference(np, reward, value, next_value, done, terminated, 0.97, 0.9,
                                                      gae)
    tol = {np.float32: 2e-5, np.float64: 1e-12}[dtype]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# ---- the activations: the ops' formulas as they wrote them ----------------------------------------

def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _gelu_tanh_inner(x):
    return 0.7978845608028654 * (x + 0.044715 * x ** 3)


def _softplus(x, beta, threshold):
    bx = x * beta
    return np.where(bx > threshold, x, (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta)


# name: (formula over float arrays, how many array arguments, the scalar parameters)
ACTIVATION_FORMULAS = {
    "relu_backward": (lambda x, g: g * ~(x <= 0), 2, ()),
    "leaky_relu": (lambda x, slope: np.where(x > 0, x, x * slope), 1, (0.2,)),
    "leaky_relu_backward": (lambda x, g, slope: np.where(x > 0, g, g * slope), 2, (0.01,)),
    "sigmoid": (_sigmoid, 1, ()),
    "sigmoid_backward": (lambda y, g: g * y * (1 - y), 2, ()),
    "tanh_backward": (lambda y, g: g * (1 - y * y), 2, ()),
    "gelu": (lambda x: 0.5 * x * (1 + erf(x * 0.7071067811865476)), 1, ()),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(_gelu_tanh_inner(x))), 1, ()),
    "gelu_backward": (lambda x, g: g * (0.5 * (1 + erf(x * 0.7071067811865476))
                                        + x * 0.3989422804014327 * np.exp(-0.5 * x * x)), 2, ()),
    "gelu_tanh_backward": (lambda x, g: g * (0.5 * (1 + np.tanh(_gelu_tanh_inner(x))) + 0.5 * x * (
        1 - np.tanh(_gelu_tanh_inner(x)) ** 2) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x)), 2, ()),
    "softplus": (_softplus, 1, (2.0, 20.0)),
    "softplus_backward": (lambda x, g, beta, threshold: np.where(x * beta > threshold, g, g * _sigmoid(x * beta)),
                          2, (0.5, 5.0)),
}

# zero, tiny values, both sides of the softplus thresholds, where exp overflows, the non-finite values
EDGES = [0.0, -0.0, 1e-6, -1e-6, 0.5, -0.5, 1.0, -1.0, 2.5, 5.0, -5.0, 9.99, 10.0, 10.01, -10.0, 20.0, -20.0,
         30.0, -30.0, 89.0, -89.0, 710.0, -710.0, 1e4, -1e4, np.inf, -np.inf, np.nan]


def activation_inputs(dtype, n=2048, seed=11):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(n) * 3, EDGES]).astype(dtype)
    return x, rng.standard_normal(x.shape).astype(dtype)


def op_backward(function, x, g, *args):
    """The gradient a primitive's backward gives on the CPU at ``x`` for the output gradient ``g``."""
    ctx = function()
    ctx.be = cpu
    function.forward(ctx, x, *args)
    grads = function.backward(ctx, g)
    return grads[0] if isinstance(grads, tuple) else grads  # one gradient per argument, or the only one


def test_activation_formulas_are_the_ops_cpu_path():
    """The ops still run these formulas on the CPU (``kernels.get`` gives None there)."""
    from rlpipe import primitives as P
    x, g = activation_inputs(np.float64)
    ctx = null_context(cpu)
    with np.errstate(all="ignore"):
        cases = {"sigmoid": P.Sigmoid.forward(ctx, x), "leaky_relu": P.LeakyRelu.forward(ctx, x, 0.2),
                 "gelu": P.Gelu.forward(ctx, x, "none"), "gelu_tanh": P.Gelu.forward(ctx, x, "tanh"),
                 "softplus": P.Softplus.forward(ctx, x, 2.0, 20.0),
                 "relu_backward": op_backward(P.Relu, x, g),
                 "leaky_relu_backward": op_backward(P.LeakyRelu, x, g, 0.01),
                 "gelu_backward": op_backward(P.Gelu, x, g, "none"),
                 "gelu_tanh_backward": op_backward(P.Gelu, x, g, "tanh"),
                 "softplus_backward": op_backward(P.Softplus, x, g, 0.5, 5.0)}
        # these two take the forward's output
        y = {"sigmoid_backward": _sigmoid(x), "tanh_backward": np.tanh(x)}
        cases["sigmoid_backward"] = op_backward(P.Sigmoid, x, g)
        cases["tanh_backward"] = op_backward(P.Tanh, x, g)
        assert set(cases) == set(ACTIVATIONS)
        for name, got in cases.items():
            first = y.get(name, x)
            formula, arrays, params = ACTIVATION_FORMULAS[name]
            want = formula(*(first, g)[:arrays], *params)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=name)


# ---- CUDA against the references (a GPU, or the CuPy stand-in) --------------------------------------

needs_cuda = pytest.mark.skipif(not backends.cuda_available(), reason="cuda backend unavailable (CuPy or a GPU)")
DEVICE_DTYPES = [np.float16, np.float32, np.float64]
TOL = {np.float16: dict(rtol=2e-3, atol=1e-3), np.float32: dict(rtol=2e-5, atol=1e-6),
       np.float64: dict(rtol=1e-12, atol=1e-12)}


@functools.lru_cache(maxsize=None)
def cuda():
    return backends.cuda_backend()


def to_host(a):
    return None if a is None else cuda().to_host(a)


def to_device(a):
    return None if a is None else cuda().asarray(a)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DEVICE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,index,case", CASES, ids=[f"{name}-{i}" for name, i, _ in CASES])
def test_cuda_optimizer_step_matches_the_reference(name, index, case, dtype):
    buffers, options = case
    want = run_steps(kernels.get(name, cpu), name, *fresh_state(buffers, dtype), options)
    state, grads = fresh_state(buffers, dtype)
    device = {key: to_device(value) for key, value in state.items()}
    run_steps(kernels.get(name, cuda()), name, device, grads, options, to_device)
    on_device_reference = {key: to_device(value) for key, value in state.items()}  # the reference runs on CuPy
    run_steps(functools.partial(kernels.KERNELS[name].reference, cuda().xp), name, on_device_reference, grads,
              options, to_device)
    for key, value in want.items():
        for got in (device[key], on_device_reference[key]):
            if value is None:
                assert got is None
                continue
            assert got.dtype == dtype
            np.testing.assert_allclose(to_host(got), value, err_msg=key, **TOL[dtype])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("dtype", DEVICE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_n_step_returns_match_the_reference(dtype, n):
    done, valid, _, reward, _, _ = random_returns_batch(dtype)
    reference = kernels.KERNELS["n_step_returns"].reference
    want_m, want_total = reference(np, done, valid, reward, 0.93, n)
    arrays = [to_device(a) for a in (done, valid, reward)]
    for m, total in (kernels.get("n_step_returns", cuda())(*arrays, 0.93, n), reference(cuda().xp, *arrays, 0.93, n)):
        assert m.dtype == np.int64 and total.dtype == dtype
        np.testing.assert_array_equal(to_host(m), want_m)
        np.testing.assert_allclose(to_host(total), want_total, **TOL[dtype])  # an FMA on a real GPU


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("gae", [True, False], ids=["gae", "td_lambda"])
@pytest.mark.parametrize("dtype", DEVICE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_cuda_value_estimate_matches_the_reference(dtype, gae):
    done, _, terminated, reward, value, next_value = random_returns_batch(dtype)
    reference = kernels.KERNELS["value_estimate"].reference
    want = reference(np, reward, value, next_value, done, terminated, 0.97, 0.9, gae)
    arrays = [to_device(a) for a in (reward, value, next_value, done, terminated)]
    for got in (kernels.get("value_estimate", cuda())(*arrays, 0.97, 0.9, gae),
                reference(cuda().xp, *arrays, 0.97, 0.9, gae)):
        for g, w in zip(got, want):
            assert g.dtype == dtype
            np.testing.assert_allclose(to_host(g), w, **TOL[dtype])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", DEVICE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_cuda_activation_matches_the_ops_formula(name, dtype):
    """Computed in float (double for float64) and rounded once: the formula in that precision, rounded."""
    formula, arrays, params = ACTIVATION_FORMULAS[name]
    x, g = activation_inputs(dtype)
    if name in ("sigmoid_backward", "tanh_backward"):  # these take the forward's output
        x = (_sigmoid(x) if name == "sigmoid_backward" else np.tanh(x)).astype(dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        want = formula(*(a.astype(wide) for a in (x, g)[:arrays]), *params).astype(dtype)
    got = kernels.get(name, cuda())(*(to_device(a) for a in (x, g)[:arrays]), *params)
    assert got.dtype == dtype
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 and "gelu" in name else TOL[dtype]
    np.testing.assert_allclose(to_host(got), want, equal_nan=True, **tol)


@pytest.mark.cuda
@needs_cuda
def test_cuda_backward_kernels_promote_as_the_formulas():
    """sigmoid_backward and the like compute in NumPy's common dtype of their arrays; the relu family in the
    gradient's."""
    x, g = activation_inputs(np.float64)
    g32 = g.astype(np.float32)
    assert kernels.get("sigmoid_backward", cuda())(to_device(x), to_device(g32)).dtype == np.float64
    assert kernels.get("relu_backward", cuda())(to_device(x), to_device(g32)).dtype == np.float32

