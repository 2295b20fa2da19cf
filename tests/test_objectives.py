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
    # priority weights multiply each sample's loss
    td = _dqn_batch(rng)
    td["priority_weight"] = T(np.arange(6, dtype=np.float32))
    _, sq = _dqn_by_hand(net, target, td, 0.9, double=True)
    np.testing.assert_allclose(loss(td)["loss"].item(), (sq * np.arange(6)).mean(), rtol=1e-5)


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
