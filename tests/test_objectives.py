"""rlpipe.objectives loss modules and target updaters, against losses computed by hand with NumPy."""
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict, nn
from rlpipe.objectives import (DQNLoss, HardUpdate, LossModule, SoftUpdate, ValueEstimators, default_value_kwargs,
                               distance_loss)
from rlpipe.objectives.value import TD0Estimator, TDLambdaEstimator
from rlpipe.tensordict import TensorDictModule

T = rlpipe.tensor


# ---- DQN ------------------------------------------------------------------------------------------

def _q_net(seed=0):
    rlpipe.manual_seed(seed)
    return nn.Linear(3, 2)


def _dqn_batch(rng, n=6, categorical=True):
    action = rng.integers(0, 2, n)
    term = rng.random((n, 1)) < 0.3
    return TensorDict({
        "observation": T(rng.standard_normal((n, 3)).astype(np.float32)),
        "action": T(action) if categorical else T(np.eye(2, dtype=np.int64)[action]),
        "next": {"observation": T(rng.standard_normal((n, 3)).astype(np.float32)),
                 "reward": T(rng.standard_normal((n, 1)).astype(np.float32)),
                 "done": T(term), "terminated": T(term)},
    }, batch_size=[n])


def _linear(net, x):
    w, b = net.weight.detach().numpy().astype(np.float64), net.bias.detach().numpy().astype(np.float64)
    return x @ w.T + b


def _dqn_by_hand(net, target, td, gamma, double=False, loss="l2"):
    obs, nobs = td["observation"].numpy(), td["next", "observation"].numpy()
    action = td["action"].numpy()
    action = action if action.ndim == 1 else action.argmax(-1)
    q = _linear(net, obs)[np.arange(len(obs)), action]
    next_q = _linear(target, nobs)
    best = next_q.max(-1) if not double else next_q[np.arange(len(obs)), _linear(net, nobs).argmax(-1)]
    alive = 1 - td["next", "terminated"].numpy()[:, 0]
    y = td["next", "reward"].numpy()[:, 0] + gamma * alive * best
    err = q - y
    per = {"l2": err ** 2, "l1": np.abs(err), "smooth_l1": np.where(np.abs(err) < 1, 0.5 * err ** 2,
                                                                    np.abs(err) - 0.5)}[loss]
    return per.mean(), err ** 2


@pytest.mark.parametrize("loss_function", ["l2", "l1", "smooth_l1"])
@pytest.mark.parametrize("categorical", [True, False])
def test_dqn_loss_by_hand(loss_function, categorical):
    rng = np.random.default_rng(1)
    net = _q_net()
    value_net = TensorDictModule(net, in_keys=["observation"], out_keys=["action_value"])
    loss = DQNLoss(value_net, loss_function=loss_function, action_space="categorical" if categorical else "one-hot")
    loss.make_value_estimator(gamma=0.9)
    td = _dqn_batch(rng, categorical=categorical)
    out = loss(td)
    assert list(out.keys()) == ["loss"]
    expected, td_error = _dqn_by_hand(net, loss.target_value_network.module, td, 0.9, loss=loss_function)
    np.testing.assert_allclose(out["loss"].item(), expected, rtol=1e-5)
    np.testing.assert_allclose(td["td_error"].numpy()[:, 0], td_error, rtol=1e-5)
    assert "action_value" not in td.keys()  # the input is left alone but for td_error
    out["loss"].backward()
    assert net.weight.grad is not None
    assert all(p.grad is None for p in loss.target_value_network.parameters())
    assert {n for n, _ in loss.named_parameters()} == {"value_network.module.weight", "value_network.module.bias"}


def test_dqn_double_target_updates_and_n_step_gamma():
    rng = np.random.default_rng(2)
    net = _q_net(1)
    loss = DQNLoss(net, action_space="categorical", double_dqn=True)  # a plain module reads "observation"
    loss.make_value_estimator(gamma=0.9)
    updater = SoftUpdate(loss, eps=0.8)
    target = loss.target_value_network.module
    np.testing.assert_allclose(target.weight.numpy(), net.weight.detach().numpy())  # init_ copied it
    with rlpipe.no_grad():
        net.weight.add_(1.0)
    updater.step()
    np.testing.assert_allclose(target.weight.numpy(), net.weight.detach().numpy() - 0.8, rtol=1e-6)
    td = _dqn_batch(rng)
    expected, _ = _dqn_by_hand(net, target, td, 0.9, double=True)
    np.testing.assert_allclose(loss(td)["loss"].item(), expected, rtol=1e-5)
    # MultiStep's steps_to_next_obs: gamma ** m per sample
    td = _dqn_batch(rng)
    td["steps_to_next_obs"] = T(np.full((6, 1), 3))
    expected, _ = _dqn_by_hand(net, target, td, 0.9 ** 3, double=True)
    np.testing.assert_allclose(loss(td)["loss"].item(), expected, rtol=1e-5)
    # priority weights: torchrl's weighted mean sum(w * loss) / sum(w)
    td = _dqn_batch(rng)
    td["priority_weight"] = T(np.arange(6, dtype=np.float32))
    _, sq = _dqn_by_hand(net, target, td, 0.9, double=True)
    np.testing.assert_allclose(loss(td)["loss"].item(), (sq * np.arange(6)).sum() / 15, rtol=1e-5)


def test_hard_update_and_no_delay():
    net = _q_net(2)
    loss = DQNLoss(net, action_space="categorical")
    hard = HardUpdate(loss, value_network_update_interval=2)
    target = loss.target_value_network.module
    with rlpipe.no_grad():
        net.bias.add_(1.0)
    hard.step()
    hard.step()
    assert not np.allclose(target.bias.numpy(), net.bias.detach().numpy())
    hard.step()  # the third call: the counter reached the interval
    np.testing.assert_allclose(target.bias.numpy(), net.bias.detach().numpy())
    plain = DQNLoss(_q_net(), action_space="categorical", delay_value=False)
    assert plain.target_value_network is plain.value_network
    with pytest.raises(RuntimeError, match="identical for all params"):
        SoftUpdate(plain, eps=0.99)


def test_loss_module_keys_estimators_and_errors():
    loss = DQNLoss(_q_net(), action_space="categorical")
    loss.set_keys(reward="r", priority="prio")
    assert loss.tensor_keys.reward == "r" and loss.tensor_keys.priority == "prio"
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.5)
    assert isinstance(loss.value_estimator, TDLambdaEstimator)
    assert loss.value_estimator.tensor_keys.reward == "r" and float(loss.value_estimator.gamma) == 0.5
    assert float(loss.value_estimator.lmbda) == pytest.approx(0.95)  # default_value_kwargs (a float32 buffer)
    assert default_value_kwargs(ValueEstimators.TDLambda) == {"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
    assert isinstance(DQNLoss(_q_net(), action_space="categorical").value_estimator, TD0Estimator)
    assert LossModule.functional is False
    with pytest.raises(NotImplementedError, match="not implemented for loss DQNLoss"):
        loss.make_value_estimator(ValueEstimators.GAE)
    with pytest.raises(ValueError, match="nope is not an accepted tensordict key"):
        loss.set_keys(nope="x")
    assert loss.tensor_keys.reward == "r"
    with pytest.raises(ValueError, match="double_dqn=True requires delay_value=True"):
        DQNLoss(_q_net(), action_space="categorical", double_dqn=True, delay_value=False)
    with pytest.raises(TypeError, match="make_value_estimator"):
        DQNLoss(_q_net(), action_space="categorical", gamma=0.9)
    with pytest.raises(NotImplementedError, match="Unknown loss l3"):
        DQNLoss(_q_net(), action_space="categorical", loss_function="l3")
    with pytest.raises(ValueError, match="action_space must be"):
        DQNLoss(_q_net(), action_space="box")
    with pytest.warns(UserWarning, match="default to 'one-hot'"):
        assert DQNLoss(_q_net()).action_space == "one-hot"
    with pytest.raises(ValueError, match="One and only one"):
        SoftUpdate(loss, eps=0.9, tau=0.1)
    with pytest.raises(RuntimeError, match="Neither eps nor tau"):
        SoftUpdate(loss)
    with pytest.raises(ValueError, match="between 0 and 1"):
        SoftUpdate(loss, eps=1.5)
    with pytest.raises(ValueError, match="must be a LossModule"):
        SoftUpdate(nn.Linear(2, 2), eps=0.9)
    with pytest.raises(RuntimeError, match="shapes"):
        distance_loss(rlpipe.ones(2), rlpipe.ones(3), "l2")
    with pytest.raises(NotImplementedError, match="Unknown loss"):
        distance_loss(rlpipe.ones(2), rlpipe.ones(2), "l5")
    assert set(loss.value_network_params.keys(include_nested=True, leaves_only=True)) == {
        ("module", "weight"), ("module", "bias")}


def test_dqn_loss_without_next_names_the_missing_key():
    """A batch without "next" is a KeyError naming it (torchrl 0.14.1 fails later, with an AttributeError
    on None, since tensordict's get() returns None), and the batch is left as it was."""
    td = _dqn_batch(np.random.default_rng(0))
    del td["next"]
    with pytest.raises(KeyError, match='key "next" not found'):
        DQNLoss(_q_net(), action_space="categorical")(td)
    assert set(td.keys()) == {"observation", "action"}


# ---- PPO ------------------------------------------------------------------------------------------

def _ppo_modules(seed=0):
    from rlpipe.distributions import Categorical
    from rlpipe.modules import ProbabilisticActor, ValueOperator
    rlpipe.manual_seed(seed)
    policy_net, value_net = nn.Linear(3, 2), nn.Linear(3, 1)
    actor = ProbabilisticActor(TensorDictModule(policy_net, in_keys=["observation"], out_keys=["logits"]),
                               in_keys=["logits"], distribution_class=Categorical, return_log_prob=True)
    critic = ValueOperator(value_net, in_keys=["observation"])
    return actor, critic, policy_net, value_net


def _ppo_batch(rng, n=8):
    return TensorDict({
        "observation": T(rng.standard_normal((n, 3)).astype(np.float32)),
        "action": T(rng.integers(0, 2, n)),
        "action_log_prob": T(np.log(rng.uniform(0.2, 0.8, n)).astype(np.float32)),
        "advantage": T(rng.standard_normal((n, 1)).astype(np.float32)),
        "value_target": T(rng.standard_normal((n, 1)).astype(np.float32)),
        "state_value": T(rng.standard_normal((n, 1)).astype(np.float32)),
    }, batch_size=[n])


def _ppo_by_hand(policy_net, value_net, td, eps, entropy_coeff, critic_coeff, normalize=False, clip_value=None):
    obs = td["observation"].numpy().astype(np.float64)
    logits = _linear(policy_net, obs)
    logp_all = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    logp = logp_all[np.arange(len(obs)), td["action"].numpy()]
    ratio = np.exp(logp - td["action_log_prob"].numpy())
    adv = td["advantage"].numpy()[:, 0].astype(np.float64)
    if normalize:
        adv = (adv - adv.mean()) / adv.std(ddof=1)
    objective = -np.minimum(ratio * adv, np.clip(ratio, 1 - eps, 1 + eps) * adv).mean()
    entropy = -(np.exp(logp_all) * logp_all).sum(-1)
    v = _linear(value_net, obs)[:, 0]
    target = td["value_target"].numpy()[:, 0]

    def smooth_l1(d):
        return np.where(np.abs(d) < 1, 0.5 * d ** 2, np.abs(d) - 0.5)
    critic = smooth_l1(target - v)
    if clip_value is not None:
        old = td["state_value"].numpy()[:, 0]
        critic = np.maximum(critic, smooth_l1(target - (old + np.clip(v - old, -clip_value, clip_value))))
    clipped = ((ratio < 1 - eps) | (ratio > 1 + eps)).mean()
    return {"loss_objective": objective, "loss_entropy": -entropy_coeff * entropy.mean(), "entropy": entropy.mean(),
            "loss_critic": critic_coeff * critic.mean(), "clip_fraction": clipped,
            "kl_approx": (td["action_log_prob"].numpy() - logp).mean(),
            "ESS": np.exp(2 * np.log(ratio.sum()) - np.log((ratio ** 2).sum())) / len(ratio)}


@pytest.mark.parametrize("normalize,clip_value", [(False, None), (True, 0.1)])
def test_clip_ppo_loss_by_hand(normalize, clip_value):
    from rlpipe.objectives import ClipPPOLoss
    rng = np.random.default_rng(3)
    actor, critic, policy_net, value_net = _ppo_modules()
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.1, entropy_coeff=0.05, critic_coeff=0.5,
                       normalize_advantage=normalize, clip_value=clip_value)
    td = _ppo_batch(rng)
    out = loss(td)
    expected = _ppo_by_hand(policy_net, value_net, td, 0.1, 0.05, 0.5, normalize, clip_value)
    assert set(expected) <= set(out.keys())
    for key, value in expected.items():
        np.testing.assert_allclose(out[key].item(), value, rtol=2e-5, atol=1e-6, err_msg=key)
    if clip_value is not None:
        assert "value_clip_fraction" in out.keys()
    total = out["loss_objective"] + out["loss_entropy"] + out["loss_critic"]
    total.backward()
    assert policy_net.weight.grad is not None and value_net.weight.grad is not None
    assert not out["entropy"].requires_grad and not out["clip_fraction"].requires_grad


def test_ppo_computes_gae_when_the_advantage_is_missing():
    from rlpipe.objectives import ClipPPOLoss, PPOLoss
    from rlpipe.objectives.value import GAE
    rng = np.random.default_rng(4)
    actor, critic, policy_net, value_net = _ppo_modules(1)
    td = _ppo_batch(rng)
    del td["advantage"]
    td["next"] = TensorDict({"observation": T(rng.standard_normal((8, 3)).astype(np.float32)),
                             "reward": T(np.ones((8, 1), np.float32)), "done": T(np.zeros((8, 1), bool)),
                             "terminated": T(np.zeros((8, 1), bool))}, batch_size=[8])
    loss = ClipPPOLoss(actor, critic)
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.9, lmbda=0.8)
    out = loss(td.clone())
    reference = td.clone()
    GAE(gamma=0.9, lmbda=0.8, value_network=critic)(reference)
    expected = _ppo_by_hand(policy_net, value_net, reference, 0.2, 0.01, 1.0)
    np.testing.assert_allclose(out["loss_objective"].item(), expected["loss_objective"], rtol=2e-5)
    plain = PPOLoss(actor, critic, entropy_bonus=False)(reference)
    assert "loss_entropy" not in plain.keys()
    obs = reference["observation"].numpy().astype(np.float64)
    logits = _linear(policy_net, obs)
    logp = (logits - np.log(np.exp(logits).sum(-1, keepdims=True)))[np.arange(8), reference["action"].numpy()]
    ratio = np.exp(logp - reference["action_log_prob"].numpy())
    np.testing.assert_allclose(plain["loss_objective"].item(), -(ratio * reference["advantage"].numpy()[:, 0]).mean(),
                               rtol=2e-5)


def test_ppo_errors():
    from rlpipe.objectives import ClipPPOLoss, KLPENPPOLoss
    actor, critic, _, _ = _ppo_modules()
    with pytest.raises(TypeError, match="'entropy_coef' has been removed"):
        ClipPPOLoss(actor, critic, entropy_coef=0.1)
    with pytest.raises(TypeError, match="'critic_coef' has been removed"):
        ClipPPOLoss(actor, critic, critic_coef=0.1)
    with pytest.raises(TypeError, match="Missing positional arguments"):
        ClipPPOLoss(None, critic)
    with pytest.raises(ValueError, match="clip_epsilon low must be less than 1"):
        ClipPPOLoss(actor, critic, clip_epsilon=1.5)
    with pytest.raises(ValueError, match="asymmetric"):
        ClipPPOLoss(actor, critic, clip_epsilon=(0.1, 0.3), clip_value=True)
    with pytest.raises(NotImplementedError, match="Unknown loss"):
        ClipPPOLoss(actor, critic, loss_critic_type="l7")
    td = _ppo_batch(np.random.default_rng(0))
    del td["action_log_prob"]
    with pytest.raises(KeyError, match="Couldn't find the log-prob action_log_prob"):
        ClipPPOLoss(actor, critic)(td)
    td = _ppo_batch(np.random.default_rng(0))
    del td["value_target"]
    with pytest.raises(KeyError, match="value_target was not found"):
        ClipPPOLoss(actor, critic)(td)
    kl = KLPENPPOLoss(actor, critic, dtarg=1e-9, beta=1.0)
    out = kl(_ppo_batch(np.random.default_rng(1)))
    assert "kl" in out.keys() and float(kl.beta) == 2.0  # KL above 1.5 * dtarg: beta doubled


def test_dqn_action_space_from_a_qvalue_actor_composite_spec():
    # torchrl 0.14.1: QValueActor(..., spec=OneHot(2)).spec is a Composite holding "action"; DQNLoss
    # reads its action space from that entry ("one_hot"; a Categorical spec gives "categorical").
    from rlpipe.envs.specs import Categorical, Composite, OneHot
    from rlpipe.modules import QValueActor
    actor = QValueActor(nn.Linear(3, 2), in_keys=["observation"], spec=OneHot(2))
    assert isinstance(actor.spec, Composite)
    assert DQNLoss(actor, delay_value=False).action_space == "one-hot"
    cat = QValueActor(nn.Linear(3, 2), in_keys=["observation"], spec=Categorical(2))
    assert DQNLoss(cat, delay_value=False).action_space == "categorical"
    nested = Composite(agent=Composite(action=OneHot(2)))
    assert DQNLoss(actor, delay_value=False, action_space=nested).action_space == "one-hot"
    with pytest.raises(KeyError, match="no 'action' entry"):
        DQNLoss(actor, delay_value=False, action_space=Composite(obs=OneHot(2)))
