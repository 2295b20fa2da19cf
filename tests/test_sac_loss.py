"""rlpipe.objectives.SACLoss and DiscreteSACLoss against torchrl 0.14.1 (tests/fixtures/sac/sac_cases.npz, written by
make_sac_cases.py there) and against the losses worked out by hand with NumPy.

The actor's Gaussian noise is fixed: ``rlpipe.distributions.normal.standard_normal`` hands out the
draws torchrl consumed, in the same order."""
import math
import os
import sys
import warnings

import numpy as np
import pytest

import rlpipe
import rlpipe.distributions.normal as normal_mod
from rlpipe import nn
from rlpipe.envs.specs import Bounded
from rlpipe.distributions import Categorical
from rlpipe.modules import MLP, NormalParamExtractor, OneHotCategorical, ProbabilisticActor, TanhNormal, ValueOperator
from rlpipe.objectives import DiscreteSACLoss, SACLoss, SoftUpdate, ValueEstimators
from rlpipe.tensordict import TensorDict, TensorDictModule

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sac")
sys.path.insert(0, HERE)
from sac_case_specs import ACT, CASES, DISCRETE_CASES, NUM_ACTIONS, OBS  # noqa: E402

sys.path.remove(HERE)
REF = np.load(os.path.join(HERE, "sac_cases.npz"))
T = rlpipe.tensor


# ---- building a case ----------------------------------------------------------------------------

def _weights(name, net):
    return [REF[f"{name}/w/{net}/{i}"] for i in range(4)]


def _load(module, weights):
    with rlpipe.no_grad():
        for p, w in zip(module.parameters(), weights):
            p.copy_(T(w))
    return module


def _actor(weights=None, spec=True):
    net = nn.Sequential(MLP(in_features=OBS, out_features=2 * ACT, num_cells=[8]), NormalParamExtractor())
    if weights is not None:
        _load(net, weights)
    return ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
                              in_keys=["loc", "scale"], distribution_class=TanhNormal,
                              distribution_kwargs={"low": -2.0, "high": 2.0},
                              spec=Bounded(-2.0, 2.0, (ACT,)) if spec else None, return_log_prob=True)


def _q(weights=None):
    net = MLP(in_features=OBS + ACT, out_features=1, num_cells=[8])
    return ValueOperator(_load(net, weights) if weights is not None else net, in_keys=["observation", "action"])


def _value(weights):
    return ValueOperator(_load(MLP(in_features=OBS, out_features=1, num_cells=[8]), weights), in_keys=["observation"])


def _n_q(name):
    return len({k.split("/")[2] for k in REF.files if k.startswith(f"{name}/w/q")})


def _discrete_actor(weights=None, one_hot=True):
    net = MLP(in_features=OBS, out_features=NUM_ACTIONS, num_cells=[8])
    if weights is not None:
        _load(net, weights)
    return ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["logits"]), in_keys=["logits"],
                              distribution_class=OneHotCategorical if one_hot else Categorical)


def _action_values(weights=None):
    net = MLP(in_features=OBS, out_features=NUM_ACTIONS, num_cells=[8])
    return TensorDictModule(_load(net, weights) if weights is not None else net, in_keys=["observation"],
                            out_keys=["action_value"])


def _case(name):
    """(loss, input TensorDict, noise draws) of a recorded case."""
    n_q = _n_q(name)
    if name in DISCRETE_CASES:
        kwargs, estimator, shape, _, _, space = DISCRETE_CASES[name]
        loss = DiscreteSACLoss(_discrete_actor(_weights(name, "actor"), space == "one-hot"),
                               [_action_values(_weights(name, f"q{i}")) for i in range(n_q)], action_space=space,
                               num_qvalue_nets=n_q, **kwargs)
    else:
        kwargs, estimator, shape, _, _, with_value = CASES[name]
        loss = SACLoss(_actor(_weights(name, "actor")), [_q(_weights(name, f"q{i}")) for i in range(n_q)],
                       _value(_weights(name, "value")) if with_value else None, num_qvalue_nets=n_q, **kwargs)
    if estimator is not None:
        loss.make_value_estimator(ValueEstimators[estimator[0]], **estimator[1])
    return loss, _data(name, shape), [REF[k] for k in sorted(REF.files) if k.startswith(f"{name}/eps/")]


def _data(name, shape):
    inp = {k.split("/")[-1]: REF[k] for k in REF.files if k.startswith(f"{name}/in/")}
    td = TensorDict({"observation": T(inp["observation"]), "action": T(inp["action"]),
                     "next": {"observation": T(inp["next_observation"]), "reward": T(inp["reward"]),
                              "done": T(inp["done"]), "terminated": T(inp["terminated"])}}, batch_size=list(shape))
    for key in ("steps_to_next_obs", "priority_weight"):
        if key in inp:
            td.set(key, T(inp[key]))
    return td


class _FixedNoise:
    """Hands out the given standard-normal draws in order (and checks their shapes)."""

    def __init__(self, draws):
        self.draws = list(draws)

    def __call__(self, shape, dtype, device):
        eps = self.draws.pop(0)
        assert tuple(shape) == eps.shape
        return T(eps, dtype=dtype, device=device)

    def __enter__(self):
        self.original = normal_mod.standard_normal
        normal_mod.standard_normal = self
        return self

    def __exit__(self, *exc):
        normal_mod.standard_normal = self.original


def _run(loss, td, eps):
    with _FixedNoise(eps):
        return loss(td)


def _grad_sets(loss):
    nets = {"actor": list(loss.actor_network.parameters())}
    if loss.log_alpha.requires_grad:
        nets["log_alpha"] = [loss.log_alpha]
    if getattr(loss, "_version", 2) == 1:
        nets["value"] = list(loss.value_network.parameters())
    return nets


# ---- against torchrl ----------------------------------------------------------------------------

ALL_CASES = sorted([*CASES, *DISCRETE_CASES])


@pytest.mark.parametrize("name", ALL_CASES)
def test_outputs_and_priorities_match_torchrl(name):
    loss, td, eps = _case(name)
    out = _run(loss, td, eps)
    expected = {k.split("/")[-1] for k in REF.files if k.startswith(f"{name}/out/")} - {"td_error"}
    assert set(out.keys()) == expected
    for key in expected:
        np.testing.assert_allclose(out[key].detach().numpy(), REF[f"{name}/out/{key}"], rtol=2e-5, atol=2e-6,
                                   err_msg=key)
    np.testing.assert_allclose(td["td_error"].numpy(), REF[f"{name}/out/td_error"], rtol=2e-5, atol=2e-6)
    assert not td["td_error"].requires_grad


@pytest.mark.parametrize("name", ALL_CASES)
def test_gradients_match_torchrl(name):
    """Each loss's gradients w.r.t. the actor, every critic (stacked as torchrl stacks them), the value
    network and log_alpha; zeros where torchrl's are zero (the loss does not reach those parameters)."""
    loss, td, eps = _case(name)
    out = _run(loss, td, eps)
    nets = _grad_sets(loss)
    q_params = [list(net.parameters()) for net in loss.qvalue_network]
    for term in [k for k in out.keys() if k.startswith("loss_")]:
        total = out[term].sum()
        if not total.requires_grad:  # fixed_alpha's loss_alpha: a constant, as in torchrl
            assert not any(k.startswith(f"{name}/grad/{term}/") for k in REF.files)
            continue
        params = [p for group in nets.values() for p in group] + [p for net in q_params for p in net]
        grads = dict(zip(map(id, params), rlpipe.autograd.grad(total, params, retain_graph=True, allow_unused=True)))

        def got(p, grads=grads):
            g = grads[id(p)]
            return np.zeros(tuple(p.shape), np.float32) if g is None else g.numpy()
        for net, group in nets.items():
            for i, p in enumerate(group):
                key = f"{name}/grad/{term}/{net}/{i}"
                if key in REF.files:
                    np.testing.assert_allclose(got(p), REF[key], rtol=1e-4, atol=1e-6, err_msg=key)
        for i in range(4):
            stacked = np.stack([got(net[i]) for net in q_params])
            np.testing.assert_allclose(stacked, REF[f"{name}/grad/{term}/q/{i}"], rtol=1e-4, atol=1e-6)


# ---- by hand ------------------------------------------------------------------------------------

def _mlp(weights, x):
    w0, b0, w1, b1 = [w.astype(np.float64) for w in weights]
    return np.tanh(x @ w0.T + b0) @ w1.T + b1


def _tanh_normal(weights, obs, eps):
    """Action in [-2, 2] and its log-probability, from the actor's MLP and NormalParamExtractor
    (scale = softplus(x + log(e^0.99 - 1)) + 0.01)."""
    loc, raw = np.split(_mlp(weights, obs), 2, axis=-1)
    scale = np.logaddexp(0, raw + np.log(np.expm1(0.99))) + 0.01
    u = loc + scale * eps
    log_n = -0.5 * eps ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    log_det = np.log(1 - np.tanh(u) ** 2) + np.log(2.0)
    return 2 * np.tanh(u), (log_n - log_det).sum(-1)


def _smooth_l1(d):
    return np.where(np.abs(d) < 1, 0.5 * d ** 2, np.abs(d) - 0.5)


@pytest.mark.parametrize("name", ["v2", "v2_l2_nstep"])
def test_v2_losses_by_hand(name):
    """The v2 target r + gamma^m (1 - terminated) min_i(Q'_i(s', a') - alpha log pi(a'|s')), the critics'
    loss summed over critics, the actor and temperature losses; weighted means sum(w l) / sum(w)."""
    loss, td, eps = _case(name)
    out = _run(loss, td, eps)
    kwargs, estimator, _, _, n_q, _ = CASES[name]
    alpha = kwargs.get("alpha_init", 1.0)
    gamma = estimator[1]["gamma"] if estimator else 0.99
    inp = {k.split("/")[-1]: REF[k].astype(np.float64) for k in REF.files if k.startswith(f"{name}/in/")}
    w_actor, w_q = _weights(name, "actor"), [_weights(name, f"q{i}") for i in range(n_q)]
    next_a, next_lp = _tanh_normal(w_actor, inp["next_observation"], eps[0])
    next_q = np.stack([_mlp(w, np.concatenate([inp["next_observation"], next_a], -1))[:, 0] for w in w_q])
    discount = gamma ** inp.get("steps_to_next_obs", np.ones_like(inp["reward"]))[:, 0]
    target = inp["reward"][:, 0] + discount * (1 - inp["terminated"][:, 0]) * (next_q - alpha * next_lp).min(0)
    pred = np.stack([_mlp(w, np.concatenate([inp["observation"], inp["action"]], -1))[:, 0] for w in w_q])
    dist = (pred - target) ** 2 if kwargs.get("loss_function") == "l2" else _smooth_l1(pred - target)
    a, lp = _tanh_normal(w_actor, inp["observation"], eps[1])
    q_new = np.stack([_mlp(w, np.concatenate([inp["observation"], a], -1))[:, 0] for w in w_q]).min(0)
    w = inp.get("priority_weight", np.ones(len(lp)))
    expected = {"loss_qvalue": dist.sum(0), "loss_actor": alpha * lp - q_new,
                "loss_alpha": -math.log(alpha) * (lp - ACT)}
    for key, per_sample in expected.items():
        np.testing.assert_allclose(out[key].item(), (per_sample * w).sum() / w.sum(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["entropy"].item(), -lp.mean(), rtol=1e-5)
    np.testing.assert_allclose(out["alpha"].item(), alpha, rtol=1e-6)
    np.testing.assert_allclose(td["td_error"].numpy(), np.abs(pred - target).max(0), rtol=1e-4, atol=1e-6)


def test_target_entropy():
    """"auto" is minus the number of action elements, from the actor's spec or ``action_spec``."""
    loss = SACLoss(_actor(), _q())
    assert loss.target_entropy.item() == -2.0 and loss.target_entropy.shape == rlpipe.Size([])
    assert loss.target_entropy_buffer is loss.target_entropy
    assert SACLoss(_actor(spec=False), _q(), action_spec=Bounded(-1.0, 1.0, (3, 2))).target_entropy.item() == -6.0
    assert SACLoss(_actor(), _q(), target_entropy=-0.5).target_entropy.item() == -0.5
    with pytest.raises(RuntimeError, match="Cannot infer the dimensionality of the action"):
        SACLoss(_actor(spec=False), _q()).target_entropy
    state = SACLoss(_actor(), _q()).state_dict()
    assert state["_target_entropy"].item() == -2.0 and "log_alpha" in state and "alpha_init" in state


def test_alpha_bounds_and_fixed_alpha():
    loss = SACLoss(_actor(), _q(), alpha_init=5.0, max_alpha=2.0)
    assert loss.min_log_alpha is None  # min_alpha becomes 0.0, which torchrl treats as no bound
    np.testing.assert_allclose(loss._alpha.item(), 2.0, rtol=1e-6)
    np.testing.assert_allclose(loss.log_alpha.item(), math.log(2.0), rtol=1e-6)  # clamped in place
    free = SACLoss(_actor(), _q())
    assert free.min_log_alpha is None and free.max_log_alpha is None
    assert any(p is free.log_alpha for p in free.parameters()) and free.log_alpha.requires_grad
    fixed = SACLoss(_actor(), _q(), fixed_alpha=True, alpha_init=0.2)
    assert not any(p is fixed.log_alpha for p in fixed.parameters()) and not fixed.log_alpha.requires_grad
    assert "log_alpha" in dict(fixed.named_buffers())


def test_one_critic_module_is_copied_with_redrawn_weights():
    rlpipe.manual_seed(0)
    q = _q()
    before = [p.detach().numpy().copy() for p in q.parameters()]
    loss = SACLoss(_actor(), q, num_qvalue_nets=3)
    assert len(loss.qvalue_network) == 3 and loss.qvalue_network.in_keys == ["observation", "action"]
    copies = [list(net.parameters()) for net in loss.qvalue_network]
    for i, original in enumerate(before):
        drawn = [c[i].detach().numpy() for c in copies]
        assert all(d.min() >= original.min() and d.max() <= original.max() for d in drawn)
        if original.size > 1:
            assert not np.array_equal(drawn[0], drawn[1]) and not np.array_equal(drawn[0], original)
        else:  # a one-element parameter: min == max, every copy keeps its value (as in torchrl)
            assert all(np.array_equal(d, original) for d in drawn)
    for p, b in zip(q.parameters(), before):  # the given module is left as it was, and is not trained
        np.testing.assert_array_equal(p.detach().numpy(), b)
    td = _data("v2", (6,))
    stacked = loss.qvalue_network(td)  # every critic's output, stacked along a new leading dimension
    assert stacked.batch_size == rlpipe.Size([3, 6]) and stacked["state_action_value"].shape == rlpipe.Size([3, 6, 1])
    np.testing.assert_allclose(stacked["state_action_value"][1].detach().numpy(),
                               loss.qvalue_network[1](td.copy())["state_action_value"].detach().numpy())
    params = loss.qvalue_network_params.flatten_keys(".")
    assert sorted(params.keys())[:2] == ["0.module.0.bias", "0.module.0.weight"] and len(params.keys()) == 12
    trained = {id(p) for p in loss.parameters()}
    assert all(id(p) in trained for c in copies for p in c) and not any(id(p) in trained for p in q.parameters())
    targets = [p for net in loss.target_qvalue_network for p in net.parameters()]
    assert not any(id(p) in trained for p in targets) and not any(p.requires_grad for p in targets)
    for p, t in zip([p for c in copies for p in c], targets):
        np.testing.assert_array_equal(p.detach().numpy(), t.numpy())


def test_each_loss_reaches_only_its_parameters_and_soft_update():
    rlpipe.manual_seed(1)
    loss = SACLoss(_actor(), _q())
    td = _data("v2", (6,))
    out = loss(td)
    critics = list(loss.qvalue_network.parameters())
    actor = list(loss.actor_network.parameters())
    targets = list(loss.target_qvalue_network.parameters())
    out["loss_actor"].backward()
    assert all(p.grad is None for p in critics + [loss.log_alpha]) and all(p.grad is not None for p in actor)
    loss.zero_grad()
    out["loss_qvalue"].backward()
    assert all(p.grad is None or not p.grad.numpy().any() for p in actor + [loss.log_alpha])
    assert all(p.grad is not None for p in critics) and all(p.grad is None for p in targets)
    loss.zero_grad()
    out["loss_alpha"].backward()
    assert all(p.grad is None or not p.grad.numpy().any() for p in actor + critics)
    assert loss.log_alpha.grad is not None
    updater = SoftUpdate(loss, tau=0.25)
    with rlpipe.no_grad():
        for p in critics:
            p.add_(1.0)
    old = [t.numpy().copy() for t in targets]
    updater.step()
    for t, o, p in zip(targets, old, critics):
        np.testing.assert_allclose(t.numpy(), 0.75 * o + 0.25 * p.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_training_steps_lower_the_critic_loss():
    rlpipe.manual_seed(2)
    loss = SACLoss(_actor(), _q())
    loss.make_value_estimator(gamma=0.5)
    optim = rlpipe.optim.Adam(loss.parameters(), lr=1e-2)
    td = _data("v2", (6,))
    first = None
    for _ in range(60):
        out = loss(td.copy())
        total = out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]
        optim.zero_grad()
        total.backward()
        optim.step()
        first = out["loss_qvalue"].item() if first is None else first
    assert out["loss_qvalue"].item() < 0.5 * first


def test_keys_and_set_keys():
    loss = SACLoss(_actor(), _q())
    assert loss.out_keys == ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy"]
    assert set(loss.in_keys) == {"action", ("next", "reward"), ("next", "done"), ("next", "terminated"),
                                 "observation", ("next", "observation")}
    assert loss.tensor_keys.log_prob == "action_log_prob" and loss.tensor_keys.action == "action"
    v1 = SACLoss(_actor(), _q(), _value(_weights("v1", "value")))
    assert v1.out_keys[-1] == "loss_value"
    loss.set_keys(priority="my_priority")
    td = _data("v2", (6,))
    loss(td)
    assert "my_priority" in td.keys() and "td_error" not in td.keys()
    assert SACLoss(_actor(), _q(), priority_key="p2").tensor_keys.priority == "p2"


def test_reduction_none_warns_and_skip_done_zeroes():
    with pytest.warns(UserWarning, match="scalar_output_mode='exclude'"):
        loss = SACLoss(_actor(), _q(), reduction="none")
    out = loss(_data("v2", (6,)))
    assert set(out.keys()) == {"loss_actor", "loss_qvalue", "loss_alpha"} and out.batch_size == rlpipe.Size([6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SACLoss(_actor(), _q(), reduction="none", scalar_output_mode="exclude")


def test_bad_arguments():
    with pytest.raises(TypeError, match="make_value_estimator"):
        SACLoss(_actor(), _q(), gamma=0.9)
    with pytest.raises(RuntimeError, match="must match the length of the module list"):
        SACLoss(_actor(), [_q(), _q(), _q()], num_qvalue_nets=2)
    with pytest.raises(NotImplementedError, match="Unknown loss huber"):
        SACLoss(_actor(), _q(), loss_function="huber")
    with pytest.raises(ValueError, match="max_alpha must be either None or greater than 0"):
        SACLoss(_actor(), _q(), min_alpha=0.1, max_alpha=0)
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'max'"):
        SACLoss(_actor(), _q(), reduction="max")
    with pytest.raises(ValueError, match="num_qvalue_nets must be a positive integer, got 0"):
        SACLoss(_actor(), _q(), num_qvalue_nets=0)
    if not hasattr(TensorDict, "set_non_tensor"):
        with pytest.raises(NotImplementedError, match="scalar_output_mode='non_tensor' needs non-tensor entries"):
            SACLoss(_actor(), _q(), reduction="none", scalar_output_mode="non_tensor")
    with pytest.raises(ValueError, match="scalar_output_mode must be"):
        SACLoss(_actor(), _q(), scalar_output_mode="keep")
    with pytest.raises(TypeError, match="qvalue_network must be a module or a list of modules, got str"):
        SACLoss(_actor(), "critic")
    actor = _actor()
    shared = ValueOperator(actor.module[0].module[0], in_keys=["observation"], out_keys=["state_action_value"])
    with pytest.raises(NotImplementedError, match="separate_losses=True"):
        SACLoss(actor, shared, separate_losses=True)
    with pytest.raises(NotImplementedError, match="not implemented for loss SACLoss"):
        SACLoss(_actor(), _q()).make_value_estimator(ValueEstimators.GAE)
    v1 = SACLoss(_actor(), _q(), _value(_weights("v1", "value")), num_qvalue_nets=4)
    td = _data("v1", (6,))
    with pytest.raises(RuntimeError, match=r"Batch size=.*6.* is incompatible with num_qvqlue_nets=4"):
        v1(td)
    assert "td_error" not in td.keys()  # the failed call wrote nothing
    q_elsewhere = ValueOperator(MLP(in_features=OBS + ACT, out_features=1, num_cells=[8]),
                                in_keys=["observation", "action"], out_keys=["q"])
    for value in (None, _value(_weights("v1", "value"))):  # a KeyError naming the critics' missing output
        with pytest.raises(KeyError, match='key "state_action_value" not found'):
            SACLoss(_actor(), q_elsewhere, value)(_data("v2" if value is None else "v1", (6,)))


# ---- DiscreteSACLoss ------------------------------------------------------------------------------

def test_discrete_losses_by_hand():
    """Exact expectations over the actions: the target sum_a' pi(a'|s') (min_i Q'_i(s', a') - alpha log pi),
    the chosen actions' values, the actor's sum_a pi (alpha log pi - min_i Q_i) and the entropy."""
    name = "discrete_onehot"
    loss, td, _ = _case(name)
    out = loss(td)
    inp = {k.split("/")[-1]: REF[k].astype(np.float64) for k in REF.files if k.startswith(f"{name}/in/")}
    w_actor, w_q = _weights(name, "actor"), [_weights(name, f"q{i}") for i in range(2)]

    def policy(obs):
        logits = _mlp(w_actor, obs)
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return np.exp(log_p), log_p
    p_next, lp_next = policy(inp["next_observation"])
    q_next = np.stack([_mlp(w, inp["next_observation"]) for w in w_q]).min(0)
    target = inp["reward"][:, 0] + 0.99 * (1 - inp["terminated"][:, 0]) * (p_next * (q_next - lp_next)).sum(-1)
    q = np.stack([_mlp(w, inp["observation"]) for w in w_q])
    chosen = (q * inp["action"]).sum(-1)
    p, lp = policy(inp["observation"])
    np.testing.assert_allclose(out["loss_qvalue"].item(), _smooth_l1(chosen - target).sum(0).mean(), rtol=1e-5)
    np.testing.assert_allclose(out["loss_actor"].item(), (p * (lp - q.min(0))).sum(-1).mean(), rtol=1e-5)
    np.testing.assert_allclose(out["entropy"].item(), -(p * lp).sum(-1).mean(), rtol=1e-5)
    np.testing.assert_allclose(td["td_error"].numpy(), np.abs(chosen - target).max(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss.target_entropy.item(), 0.98 * math.log(NUM_ACTIONS), rtol=1e-6)
    np.testing.assert_allclose(loss.alpha_loss(T([0.5, -1.0])).detach().numpy(), [0.0, 0.0])


def test_discrete_each_loss_reaches_only_its_parameters():
    rlpipe.manual_seed(3)
    loss = DiscreteSACLoss(_discrete_actor(one_hot=False), _action_values(), action_space="categorical",
                           num_actions=NUM_ACTIONS)
    td = _data("discrete_categorical_skip", (6,))
    out = loss(td)
    actor, critics = list(loss.actor_network.parameters()), list(loss.qvalue_network.parameters())
    out["loss_actor"].backward()
    assert all(p.grad is None for p in critics + [loss.log_alpha]) and all(p.grad is not None for p in actor)
    loss.zero_grad()
    out["loss_qvalue"].backward()
    assert all(p.grad is None for p in actor + [loss.log_alpha]) and all(p.grad is not None for p in critics)
    assert all(p.grad is None for p in loss.target_qvalue_network.parameters())
    assert loss.out_keys == ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy"]
    assert len(loss.qvalue_network) == 2 and SoftUpdate(loss, eps=0.9).eps == 0.9


def test_discrete_bad_arguments():
    with pytest.raises(ValueError, match="num_actions needs to be provided if target_entropy == 'auto'"):
        DiscreteSACLoss(_discrete_actor(), _action_values(), action_space="one-hot")
    with pytest.warns(UserWarning, match="action_space was not specified"):
        loss = DiscreteSACLoss(_discrete_actor(), _action_values(), num_actions=NUM_ACTIONS)
    assert loss.action_space == "one-hot"
    with pytest.raises(ValueError, match="action_space must be 'one-hot' or 'categorical', got 'binary'"):
        DiscreteSACLoss(_discrete_actor(), _action_values(), action_space="binary", num_actions=NUM_ACTIONS)
    with pytest.raises(NotImplementedError, match="Unknown loss l3"):
        DiscreteSACLoss(_discrete_actor(), _action_values(), action_space="one-hot", num_actions=3, loss_function="l3")
    with pytest.raises(RuntimeError, match="must match the length of the module list"):
        DiscreteSACLoss(_discrete_actor(), [_action_values()], action_space="one-hot", num_actions=3)


# ---- cuda -----------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("name", ["v2_l2_nstep", "v2_skip_done", "v1", "discrete_categorical_skip"])
def test_cuda_matches_torchrl(name):
    loss, td, eps = _case(name)
    loss = loss.to("cuda")
    td = td.to("cuda")
    out = _run(loss, td, eps)
    assert out["loss_qvalue"].device.type == "cuda" and td["td_error"].device.type == "cuda"
    for key in out.keys():
        np.testing.assert_allclose(out[key].detach().cpu().numpy(), REF[f"{name}/out/{key}"], rtol=2e-5, atol=2e-6,
                                   err_msg=key)
    np.testing.assert_allclose(td["td_error"].cpu().numpy(), REF[f"{name}/out/td_error"], rtol=2e-5, atol=2e-6)
    (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
    assert all(p.grad is not None and p.grad.device.type == "cuda" for p in loss.actor_network.parameters())
