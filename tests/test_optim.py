"""rlpipe.optim against the published update rules, and its torch.optim interface.

The references below restate each optimizer's update (torch.optim's documented algorithms) in
plain float64 NumPy, written out term by term; they share no code with the backend kernels.
"""
import copy
import math
import pickle
import re
import warnings

import numpy as np
import pytest

import rlpipe as r
import rlpipe.optim as optim
from rlpipe import backends
from rlpipe.optim import lr_scheduler


# ---- reference updates: (param, gradient, state dict) -> new param -------------------------

def ref_sgd(p, g, st, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        b = g.copy() if "b" not in st else momentum * st["b"] + (1 - dampening) * g
        st["b"] = b
        g = g + momentum * b if nesterov else b
    return p - lr * g


def ref_adam(p, g, st, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
             decoupled=False):
    b1, b2 = betas
    t = st["t"] = st.get("t", 0) + 1
    if maximize:
        g = -g
    if weight_decay:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    v = st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    if amsgrad:
        v = st["vmax"] = np.maximum(st.get("vmax", 0.0), v)
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def ref_adamw(p, g, st, lr, **kwargs):
    return ref_adam(p, g, st, lr, decoupled=True, **kwargs)


def ref_rmsprop(p, g, st, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                maximize=False):
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    v = st["v"] = alpha * st.get("v", 0.0) + (1 - alpha) * g * g
    if centered:
        mean = st["mean"] = alpha * st.get("mean", 0.0) + (1 - alpha) * g
        v = v - mean * mean
    update = g / (np.sqrt(v) + eps)
    if momentum > 0:
        update = st["b"] = momentum * st.get("b", 0.0) + update
    return p - lr * update


def ref_adagrad(p, g, st, lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                maximize=False):
    t = st["t"] = st.get("t", 0) + 1
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    s = st["s"] = st.get("s", initial_accumulator_value) + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s) + eps)


# (id, optimizer class, options, reference, the reference's options)
CASES = [
    ("sgd", optim.SGD, dict(lr=0.1), ref_sgd, {}),
    ("sgd-wd-max", optim.SGD, dict(lr=0.1, weight_decay=0.1, maximize=True), ref_sgd, {}),
    ("sgd-momentum-dampening-wd", optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.05),
     ref_sgd, {}),
    ("sgd-nesterov-max", optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True), ref_sgd, {}),
    ("adam", optim.Adam, dict(lr=0.05), ref_adam, {}),
    ("adam-amsgrad-wd", optim.Adam, dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True), ref_adam, {}),
    ("adam-max-eps", optim.Adam, dict(lr=0.05, eps=1e-3, maximize=True), ref_adam, {}),
    ("adam-decoupled", optim.Adam, dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True), ref_adam,
     dict(decoupled=True)),
    ("adamw", optim.AdamW, dict(lr=0.05), ref_adamw, dict(weight_decay=1e-2)),
    ("adamw-amsgrad-max", optim.AdamW, dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.3, amsgrad=True,
                                            maximize=True), ref_adamw, {}),
    ("rmsprop", optim.RMSprop, dict(lr=0.01), ref_rmsprop, {}),
    ("rmsprop-centered-momentum-wd", optim.RMSprop, dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5,
                                                         weight_decay=0.1), ref_rmsprop, {}),
    ("rmsprop-momentum-max", optim.RMSprop, dict(lr=0.01, momentum=0.9, eps=1e-4, maximize=True), ref_rmsprop, {}),
    ("rmsprop-centered-max", optim.RMSprop, dict(lr=0.01, centered=True, maximize=True), ref_rmsprop, {}),
    ("adagrad", optim.Adagrad, dict(lr=0.1), ref_adagrad, {}),
    ("adagrad-decay-wd-init", optim.Adagrad, dict(lr=0.1, lr_decay=0.5, weight_decay=0.1,
                                                  initial_accumulator_value=0.2), ref_adagrad, {}),
    ("adagrad-max-eps", optim.Adagrad, dict(lr=0.1, eps=1e-3, maximize=True), ref_adagrad, {}),
]

SHAPES = [(3, 4), (5,)]
# state entries and the reference's names for them
REF_NAMES = {"step": "t", "exp_avg": "m", "exp_avg_sq": "v", "max_exp_avg_sq": "vmax", "square_avg": "v",
             "grad_avg": "mean", "momentum_buffer": "b", "sum": "s"}


def pulls(rng, step):
    """Per-step constant terms of the loss; they shrink, so averages of g*g fall (amsgrad matters)."""
    return [rng.standard_normal(shape) * 0.3 ** step for shape in SHAPES]


def loss_of(params, cs):
    """sum(c * p + p * p / 2) over the parameters: its gradient is c + p."""
    return sum(((p * c).sum() + 0.5 * (p * p).sum() for p, c in zip(params, cs)))


def run_trajectory(cls, options, ref, ref_options, steps=6, dtype=r.float64, device="cpu", seed=0):
    """Steps an optimizer and its reference side by side, yielding (optimizer, params, reference
    params, reference states) after each step. A third parameter never receives a gradient."""
    rng = np.random.default_rng(seed)
    start = [rng.standard_normal(shape) for shape in SHAPES]
    params = [r.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in start]
    idle = r.tensor([1.5, -2.5], dtype=dtype, device=device, requires_grad=True)
    opt = cls(params + [idle], **options)
    expected, states = [a.copy() for a in start], [{} for _ in start]
    lr = options["lr"]
    ref_kw = {k: v for k, v in options.items() if k not in ("lr", "decoupled_weight_decay")} | ref_options
    for step in range(steps):
        cs = pulls(rng, step)
        opt.zero_grad()
        loss_of(params, [r.tensor(c, dtype=dtype, device=device) for c in cs]).backward()
        opt.step()
        expected = [ref(p, c + p, st, lr, **ref_kw) for p, c, st in zip(expected, cs, states)]
        yield opt, params, expected, states
    assert idle.grad is None and idle.tolist() == [1.5, -2.5]
    assert idle not in opt.state or float(opt.state[idle]["step"]) == 0  # Adagrad's state exists from the start


def host(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("name,cls,options,ref,ref_options", CASES, ids=[c[0] for c in CASES])
def test_trajectory_matches_reference(name, cls, options, ref, ref_options):
    for opt, params, expected, states in run_trajectory(cls, options, ref, ref_options):
        for p, want in zip(params, expected):
            assert p.dtype is r.float64
            np.testing.assert_allclose(host(p), want, rtol=1e-9, atol=1e-12)
    for p, ref_state in zip(params, states):  # the buffers hold the reference's quantities
        for key, value in opt.state.get(p, {}).items():
            want = ref_state.get(REF_NAMES[key])
            if want is not None:
                np.testing.assert_allclose(host(value), want, rtol=1e-9, atol=1e-12, err_msg=key)
    if options.get("amsgrad"):  # the running maximum did differ from the average
        state = opt.state[params[0]]
        assert not np.allclose(host(state["max_exp_avg_sq"]), host(state["exp_avg_sq"]))


@pytest.mark.parametrize("name,cls,options,ref,ref_options", CASES[::3], ids=[c[0] for c in CASES[::3]])
def test_trajectory_float32(name, cls, options, ref, ref_options):
    for opt, params, expected, _ in run_trajectory(cls, options, ref, ref_options, dtype=r.float32):
        for p, want in zip(params, expected):
            assert p.dtype is r.float32
            np.testing.assert_allclose(host(p), want, rtol=2e-5, atol=2e-6)
    for state in opt.state.values():
        for key, value in state.items():
            assert value.dtype is r.float32, key


def test_state_entries_like_torch():
    def stepped(cls, **options):
        p = r.tensor([1.0, -2.0], requires_grad=True)
        opt = cls([p], lr=0.1, **options)
        for _ in range(3):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        return opt.state[p] if p in opt.state else None

    assert stepped(optim.SGD) is None  # plain SGD keeps no state
    assert set(stepped(optim.SGD, momentum=0.9)) == {"momentum_buffer"}
    assert set(stepped(optim.Adam)) == {"step", "exp_avg", "exp_avg_sq"}
    assert set(stepped(optim.AdamW, amsgrad=True)) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert set(stepped(optim.RMSprop)) == {"step", "square_avg"}
    assert set(stepped(optim.RMSprop, momentum=0.5, centered=True)) == {"step", "square_avg", "momentum_buffer",
                                                                         "grad_avg"}
    state = stepped(optim.Adagrad, initial_accumulator_value=0.5)
    assert set(state) == {"step", "sum"}
    step = state["step"]
    assert isinstance(step, r.Tensor) and step.shape == () and step.dtype is r.float32 and step.item() == 3.0
    assert step.device == r.device("cpu") and not step.requires_grad


def test_adagrad_state_exists_before_the_first_step():
    a, b = r.zeros(2, requires_grad=True), r.zeros(3, requires_grad=True)
    opt = optim.Adagrad([a], initial_accumulator_value=0.25)
    assert opt.state[a]["sum"].tolist() == [0.25, 0.25] and opt.state[a]["step"].item() == 0.0
    assert list(opt.state_dict()["state"]) == [0]
    opt.add_param_group({"params": [b], "initial_accumulator_value": 1.0, "lr": 0.0})
    assert b not in opt.state  # a later group's state comes with its first step
    b.grad = r.ones(3)
    opt.step()
    assert opt.state[b]["sum"].tolist() == [2.0] * 3 and opt.state[b]["step"].item() == 1.0
    assert opt.state[a]["step"].item() == 0.0  # no gradient: not stepped


@pytest.mark.parametrize("dtype", [r.float16, r.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_updates_in_float32(dtype):
    """Adam's first step moves each parameter by lr against its gradient's sign. In float16
    arithmetic (1 - beta2) * g * g and eps=1e-8 underflow to 0 and the step is inf or nan."""
    start = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    p = r.tensor(start, dtype=dtype, requires_grad=True)
    opt = optim.Adam([p], lr=0.01)
    grads = np.array([1e-3, -2e-3, 5e-4, -1e-3], np.float32)
    p.grad = r.tensor(grads, dtype=dtype)
    opt.step()
    assert p.dtype is dtype and opt.state[p]["exp_avg"].dtype is dtype
    want = (start - 0.01 * np.sign(grads)).astype(dtype.np).astype(np.float32)  # rounded to the half type
    np.testing.assert_array_equal(host(p).astype(np.float32), want)
    for _ in range(20):  # stays finite (the stored exp_avg_sq may underflow in float16)
        opt.step()
    assert np.all(np.isfinite(host(p).astype(np.float32)))


def test_half_precision_matches_float32_rounded_each_step():
    """Each step in float16 equals a float32 step on the stored float16 values, rounded once."""
    rng = np.random.default_rng(3)
    start = rng.standard_normal(50).astype(np.float16)
    p = r.tensor(start, requires_grad=True)
    opt = optim.RMSprop([p], lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)
    want, st = start.copy(), {}
    for _ in range(3):
        g = (rng.standard_normal(50) * 1e-3).astype(np.float16)
        p.grad = r.tensor(g)
        opt.step()
        state = {k: v.astype(np.float32) for k, v in st.items()}
        new = ref_rmsprop(want.astype(np.float32), g.astype(np.float32), state, 0.01, alpha=0.99,
                          momentum=0.9, centered=True, weight_decay=0.1)
        st = {k: np.asarray(v, np.float32).astype(np.float16) for k, v in state.items()}  # stored rounded
        want = new.astype(np.float16)
        np.testing.assert_allclose(host(p).astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-6)


# ---- parameter groups, zero_grad, closure ---------------------------------------------------

def test_param_groups_with_their_own_options():
    a = r.tensor([1.0, 2.0], requires_grad=True)
    b = r.tensor([3.0], requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[0]["momentum"] == 0
    assert set(opt.param_groups[0]) == {"params", "lr", "momentum", "dampening", "weight_decay", "nesterov",
                                        "maximize"}
    for _ in range(2):
        opt.zero_grad()
        (a.sum() + 2 * b.sum()).backward()
        opt.step()
    np.testing.assert_allclose(a.tolist(), [1.0 - 0.2, 2.0 - 0.2])
    # momentum in the second group only: buffer 2, then 0.9 * 2 + 2
    np.testing.assert_allclose(b.tolist(), [3.0 - 0.5 * 2 - 0.5 * 3.8], rtol=1e-6)
    assert a not in opt.state and set(opt.state[b]) == {"momentum_buffer"}


def test_add_param_group_and_named_params():
    a, b = r.zeros(2, requires_grad=True), r.zeros(2, requires_grad=True)
    opt = optim.Adam([("w", a)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["w"]
    opt.add_param_group({"params": [("v", b)], "lr": 0.2})
    assert opt.param_groups[1]["lr"] == 0.2 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    assert opt.state_dict()["param_groups"][1]["param_names"] == ["v"]
    with pytest.raises(ValueError, match="all optimizer param groups should be with/without names"):
        opt.add_param_group({"params": [r.zeros(1, requires_grad=True)]})
    with pytest.raises(ValueError, match="Some param names are missing"):
        optim.Adam([("w", a), b])


def test_zero_grad_both_modes():
    p = r.tensor([1.0, 2.0], requires_grad=True)
    q = r.tensor([3.0], requires_grad=True)
    opt = optim.SGD([p, q])
    (p * p).sum().backward()
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad and p.grad.tolist() == [0.0, 0.0] and q.grad is None
    (p * p).sum().backward()  # accumulates into the zeroed gradient
    assert p.grad.tolist() == [2.0, 4.0]
    opt.zero_grad()
    assert p.grad is None and q.grad is None


def test_step_with_closure_returns_its_loss():
    p = r.tensor([3.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)
    calls = []

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        calls.append(loss.item())
        return loss

    with r.no_grad():  # the closure still records its graph
        out = opt.step(closure)
    assert calls == [9.0] and out.item() == 9.0
    assert p.tolist() == [3.0 - 0.25 * 6.0]
    assert opt.step() is None


def test_step_bumps_the_parameter_version():
    w = r.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    y = (w * w).sum()
    y.backward(retain_graph=True)
    version = w._version
    opt.step()
    assert w._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ---- state_dict ----------------------------------------------------------------------------

def train(opt, params, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        opt.zero_grad()
        loss_of(params, [r.tensor(rng.standard_normal(p.shape), dtype=p.dtype) for p in params]).backward()
        opt.step()


@pytest.mark.parametrize("cls,options", [
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (optim.Adam, dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    (optim.AdamW, dict(lr=0.05)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.1)),
], ids=["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_state_dict_round_trip_continues_identically(cls, options):
    rng = np.random.default_rng(0)
    params = [r.tensor(rng.standard_normal(shape), requires_grad=True) for shape in SHAPES]
    opt = cls([{"params": params[:1]}, {"params": params[1:], "lr": options["lr"] / 2}], **options)
    train(opt, params, 3, seed=1)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))  # as a checkpoint file would hold it

    clones = [p.detach().clone().requires_grad_() for p in params]
    fresh = cls([{"params": clones[:1]}, {"params": clones[1:]}], lr=1.0)
    fresh.load_state_dict(saved)
    assert [g["lr"] for g in fresh.param_groups] == [options["lr"], options["lr"] / 2]
    assert fresh.param_groups[1]["params"] == [clones[1]]
    train(opt, params, 3, seed=2)
    train(fresh, clones, 3, seed=2)
    for p, q in zip(params, clones):
        assert p.tolist() == q.tolist()
    assert repr(fresh) == repr(opt)


def test_state_dict_format():
    a, b, c = (r.zeros(2, requires_grad=True) for _ in range(3))
    opt = optim.Adam([{"params": [a, b]}, {"params": [c], "lr": 0.5}])
    train(opt, [b, c], 1, seed=0)  # a has no gradient: no state
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert list(sd["state"]) == [1, 2]
    assert sd["state"][1]["exp_avg"] is opt.state[b]["exp_avg"]  # references, as torch
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1] == {"lr": 0.5, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0,
                                     "amsgrad": False, "maximize": False, "decoupled_weight_decay": False,
                                     "params": [2]}


def test_load_state_dict_casts_buffers_to_the_params():
    src = r.tensor([1.0, 2.0], dtype=r.float64, requires_grad=True)
    opt = optim.Adam([src])
    train(opt, [src], 2, seed=0)
    dst = r.zeros(2, dtype=r.float32, requires_grad=True)
    other = optim.Adam([dst])
    other.load_state_dict(copy.deepcopy(opt.state_dict()))
    state = other.state[dst]
    assert state["exp_avg"].dtype is r.float32 and state["exp_avg_sq"].dtype is r.float32
    assert state["step"].dtype is r.float32 and state["step"].item() == 2.0  # 'step' stays as saved
    np.testing.assert_allclose(host(state["exp_avg"]), host(opt.state[src]["exp_avg"]), rtol=1e-6)


def test_load_state_dict_takes_plain_number_steps_and_missing_options():
    p = r.zeros(2, requires_grad=True)
    opt = optim.Adam([p])
    sd = {"state": {0: {"step": 4, "exp_avg": r.zeros(2), "exp_avg_sq": r.zeros(2)}},
          "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "params": [0]}]}
    opt.load_state_dict(sd)
    assert isinstance(opt.state[p]["step"], r.Tensor) and opt.state[p]["step"].item() == 4.0
    group = opt.param_groups[0]
    assert group["amsgrad"] is False and group["maximize"] is False and group["decoupled_weight_decay"] is False
    w = optim.AdamW([r.zeros(2, requires_grad=True)])
    w.load_state_dict(opt.state_dict())  # an Adam state dict: AdamW stays decoupled
    assert w.param_groups[0]["decoupled_weight_decay"] is True


def test_load_state_dict_errors():
    a, b = r.zeros(2, requires_grad=True), r.zeros(2, requires_grad=True)
    one_group = optim.SGD([a, b]).state_dict()
    two_groups = optim.SGD([{"params": [a]}, {"params": [b]}]).state_dict()
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        optim.SGD([a, b]).load_state_dict(two_groups)
    with pytest.raises(ValueError, match=re.escape("loaded state dict contains a parameter group that doesn't "
                                                   "match the size of optimizer's group")):
        optim.SGD([a]).load_state_dict(one_group)


# ---- construction errors and repr ---------------------------------------------------------

@pytest.mark.parametrize("cls,options,message", [
    (optim.SGD, dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (optim.SGD, dict(momentum=-0.5), "Invalid momentum value: -0.5"),
    (optim.SGD, dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (optim.SGD, dict(nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (optim.SGD, dict(nesterov=True, momentum=0.9, dampening=0.1), "Nesterov momentum requires a momentum and zero "
                                                                 "dampening"),
    (optim.Adam, dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (optim.Adam, dict(eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (optim.Adam, dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (optim.Adam, dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (optim.Adam, dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
    (optim.AdamW, dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1: 1.5"),
    (optim.Adam, dict(betas=(0, 0.9)), "betas must be either both floats or both Tensors"),
    (optim.RMSprop, dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (optim.RMSprop, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (optim.RMSprop, dict(momentum=-1.0), "Invalid momentum value: -1.0"),
    (optim.RMSprop, dict(weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    (optim.RMSprop, dict(alpha=-0.5), "Invalid alpha value: -0.5"),
    (optim.Adagrad, dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    (optim.Adagrad, dict(initial_accumulator_value=-0.1), "Invalid initial_accumulator_value value: -0.1"),
    (optim.Adagrad, dict(eps=-1.0), "Invalid epsilon value: -1.0"),
])
def test_invalid_hyperparameters(cls, options, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        cls([r.zeros(1, requires_grad=True)], **options)


def test_invalid_params():
    p = r.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="^optimizer got an empty parameter list$"):
        optim.Adam([])
    with pytest.raises(TypeError, match=re.escape("params argument given to the optimizer should be an iterable of "
                                                  "Tensors or dicts, but got rlpipe.FloatTensor")):
        optim.Adam(p)
    with pytest.raises(TypeError, match="^optimizer can only optimize Tensors, but one of the params is int$"):
        optim.SGD([p, 3])
    with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group$"):
        optim.SGD([{"params": [p]}, {"params": [p], "lr": 0.1}])
    with pytest.raises(ValueError, match="^can't optimize a non-leaf Tensor$"):
        optim.SGD([p * 2])
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {p}}])
    with pytest.raises(TypeError, match="param_group must be a dict"):
        optim.SGD([p]).add_param_group([p])
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([p, p])


def test_repr_like_torch():
    opt = optim.Adam([r.zeros(1, requires_grad=True)])
    opt.add_param_group({"params": [r.zeros(1, requires_grad=True)], "lr": 0.5})
    assert repr(opt) == ("Adam (\n"
                         "Parameter Group 0\n"
                         "    amsgrad: False\n"
                         "    betas: (0.9, 0.999)\n"
                         "    decoupled_weight_decay: False\n"
                         "    eps: 1e-08\n"
                         "    lr: 0.001\n"
                         "    maximize: False\n"
                         "    weight_decay: 0\n"
                         "\n"
                         "Parameter Group 1\n"
                         "    amsgrad: False\n"
                         "    betas: (0.9, 0.999)\n"
                         "    decoupled_weight_decay: False\n"
                         "    eps: 1e-08\n"
                         "    lr: 0.5\n"
                         "    maximize: False\n"
                         "    weight_decay: 0\n"
                         ")")
    assert repr(optim.SGD([r.zeros(1, requires_grad=True)])).splitlines()[2:] == [
        "    dampening: 0", "    lr: 0.001", "    maximize: False", "    momentum: 0", "    nesterov: False",
        "    weight_decay: 0", ")"]
    assert "    decoupled_weight_decay: True" in repr(optim.AdamW([r.zeros(1, requires_grad=True)]))


def test_defaults_like_torch():
    p = [r.zeros(1, requires_grad=True)]
    assert optim.SGD(p).defaults == dict(lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                                         maximize=False)
    assert optim.AdamW(p).defaults["weight_decay"] == 1e-2
    assert optim.RMSprop(p).defaults == dict(lr=1e-2, momentum=0, alpha=0.99, eps=1e-8, centered=False,
                                             weight_decay=0, maximize=False)
    assert optim.Adagrad(p).defaults == dict(lr=1e-2, lr_decay=0, eps=1e-10, weight_decay=0,
                                             initial_accumulator_value=0, maximize=False)


# ---- convergence -----------------------------------------------------------------------------

def test_adam_minimizes_a_quadratic():
    target = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]], np.float32)
    scale = r.tensor([[1.0, 4.0, 0.25]])  # an ill-conditioned bowl
    w = r.zeros(2, 3, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    losses = []
    for _ in range(300):
        opt.zero_grad()
        loss = (scale * (w - r.tensor(target)) ** 2).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 1e-4 * losses[0]
    np.testing.assert_allclose(w.tolist(), target, atol=0.02)


# ---- learning-rate schedulers -------------------------------------------------------------

def scheduled(make, epochs, lrs=(0.1, 0.02)):
    """lr of each group after construction and after each of ``epochs`` steps."""
    opt = optim.SGD([{"params": [r.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs])
    sched = make(opt)
    out = [sched.get_last_lr()]
    for _ in range(epochs):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
        assert out[-1] == [g["lr"] for g in opt.param_groups]
    return np.array(out), sched, opt


def closed_forms(fn, epochs, lrs=(0.1, 0.02)):
    return np.array([[fn(base, e) for base in lrs] for e in range(epochs + 1)])


@pytest.mark.parametrize("make,formula", [
    (lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.5), lambda base, e: base * 0.5 ** (e // 3)),
    (lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9), lambda base, e: base * 0.9 ** e),
    (lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.001),
     lambda base, e: 0.001 + (base - 0.001) * (1 + math.cos(math.pi * e / 5)) / 2),
    (lambda o: lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + e)), lambda base, e: base / (1 + e)),
    (lambda o: lr_scheduler.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=4),
     lambda base, e: base * (0.25 + 0.5 * min(e, 4) / 4)),
    (lambda o: lr_scheduler.LinearLR(o), lambda base, e: base * (1 / 3 + (2 / 3) * min(e, 5) / 5)),
], ids=["step", "exponential", "cosine", "lambda", "linear", "linear-defaults"])
def test_scheduler_values(make, formula):
    got, sched, opt = scheduled(make, 16)
    np.testing.assert_allclose(got, closed_forms(formula, 16), rtol=1e-9, atol=1e-15)
    assert sched.last_epoch == 16 and sched.base_lrs == [0.1, 0.02]
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.02]


def test_cosine_recursion_follows_outside_changes():
    """torch's chainable form: each step scales (lr - eta_min) by a ratio of cosines."""
    opt = optim.SGD([r.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    sched.step()
    opt.param_groups[0]["lr"] = 0.5  # someone halves the rate
    sched.step()
    ratio = (1 + math.cos(math.pi * 2 / 4)) / (1 + math.cos(math.pi / 4))
    assert sched.get_last_lr() == pytest.approx([0.5 * ratio])


def test_lambda_lr_per_group_and_its_state():
    class Warmup:
        def __init__(self, n):
            self.n = n

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.n)

    got, sched, _ = scheduled(lambda o: lr_scheduler.LambdaLR(o, [Warmup(4), lambda e: 0.5 ** e]), 5)
    np.testing.assert_allclose(got[:, 0], [0.1 * min(1, (e + 1) / 4) for e in range(6)])
    np.testing.assert_allclose(got[:, 1], [0.02 * 0.5 ** e for e in range(6)])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"n": 4}, None] and "optimizer" not in state
    sched.lr_lambdas[0].n = 10
    sched.load_state_dict(state)
    assert sched.lr_lambdas[0].n == 4
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lr_scheduler.LambdaLR(sched.optimizer, [lambda e: 1.0])


def test_scheduler_state_dict_resumes():
    _, sched, opt = scheduled(lambda o: lr_scheduler.StepLR(o, step_size=2, gamma=0.1), 3)
    saved = sched.state_dict()
    assert saved["last_epoch"] == 3 and saved["base_lrs"] == [0.1, 0.02] and "optimizer" not in saved
    opt2 = optim.SGD([{"params": [r.zeros(1, requires_grad=True)], "lr": lr} for lr in (0.1, 0.02)])
    opt2.load_state_dict(opt.state_dict())
    resumed = lr_scheduler.StepLR(opt2, step_size=2, gamma=0.1)
    resumed.load_state_dict(saved)
    for _ in range(4):
        sched.step()
        resumed.step()
        assert resumed.get_last_lr() == sched.get_last_lr()
    assert resumed.last_epoch == 7


def test_scheduler_drives_the_optimizer_and_checks_its_arguments():
    p = r.tensor([0.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        p.sum().backward()
        opt.step()
        sched.step()
    assert p.tolist() == [-(1.0 + 0.5 + 0.25)]
    with pytest.raises(TypeError, match="^list is not an Optimizer$"):
        lr_scheduler.StepLR([], step_size=1)
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        lr_scheduler.StepLR(optim.SGD([p]), step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Ending multiplicative factor"):
        lr_scheduler.LinearLR(opt, end_factor=1.5)


def test_scheduler_step_with_epoch_uses_the_closed_form():
    opt = optim.SGD([r.zeros(1, requires_grad=True)], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    with pytest.warns(UserWarning, match="deprecated"):
        sched.step(5)
    assert sched.last_epoch == 5 and sched.get_last_lr() == [0.25]


def test_scheduler_resume_with_last_epoch():
    """Resuming at last_epoch=k: construction steps to k + 1 but leaves the chainable rates as
    they are (torch's initial step); later steps go on from there."""
    opt = optim.SGD([r.zeros(1, requires_grad=True)], lr=0.1)
    opt.param_groups[0]["initial_lr"] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
    assert cosine.last_epoch == 5 and cosine.get_last_lr() == [0.1] and cosine.base_lrs == [1.0]
    cosine.step()
    ratio = (1 + math.cos(math.pi * 6 / 10)) / (1 + math.cos(math.pi * 5 / 10))
    assert cosine.get_last_lr() == pytest.approx([0.1 * ratio])
    exponential = lr_scheduler.ExponentialLR(opt, gamma=0.5, last_epoch=7)
    assert exponential.last_epoch == 8 and exponential.get_last_lr() == [pytest.approx(0.1 * ratio)]
    assert exponential._is_initial is False


def test_get_lr_outside_step_warns():
    sched = lr_scheduler.ExponentialLR(optim.SGD([r.zeros(1, requires_grad=True)], lr=1.0), gamma=0.5)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        assert sched.get_lr() == [0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()


# ---- CUDA ----------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not backends.cuda_available(), reason="cuda backend unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("name,cls,options,ref,ref_options", CASES, ids=[c[0] for c in CASES])
def test_trajectory_on_cuda(name, cls, options, ref, ref_options):
    for opt, params, expected, _ in run_trajectory(cls, options, ref, ref_options, device="cuda"):
        for p, want in zip(params, expected):
            assert p.device.type == "cuda"
            np.testing.assert_allclose(host(p), want, rtol=1e-9, atol=1e-12)
    for state in opt.state.values():
        for key, value in state.items():
            assert value.device.type == ("cpu" if key == "step" else "cuda"), key


@pytest.mark.parametrize("name,cls,options,ref,ref_options", CASES, ids=[c[0] for c in CASES])
def test_zero_dim_parameter_follows_its_one_element_twin(name, cls, options, ref, ref_options):
    """A 0-d parameter (e.g. SAC's log temperature) steps exactly like a [1] one."""
    scalar = r.tensor(0.7, dtype=r.float64, requires_grad=True)
    vector = r.tensor([0.7], dtype=r.float64, requires_grad=True)
    opts = [cls([p], **options) for p in (scalar, vector)]
    for step in range(4):
        for p, opt in zip((scalar, vector), opts):
            opt.zero_grad()
            ((p - 0.3 * step) ** 2).sum().backward()
            opt.step()
        assert scalar.shape == () and scalar.item() == vector.item(), (name, step)
