"""DDPGLoss against torchrl 0.14.1: the same fixed networks and batch give these values there
(measured in a separate environment)."""
import numpy as np
import pytest

import rlpipe as torch
from rlpipe import nn
from rlpipe.modules import Actor, ValueOperator
from rlpipe.objectives import DDPGLoss, SoftUpdate
from rlpipe.tensordict import TensorDict


class V(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 1)

    def forward(self, o, a):
        return self.l(torch.cat([o, a], -1))


def build():
    a, v = nn.Linear(3, 1), V()
    with torch.no_grad():
        a.weight.copy_(torch.tensor([[0.5, -0.25, 0.1]]))
        a.bias.fill_(0.2)
        v.l.weight.copy_(torch.tensor([[0.3, 0.2, -0.1, 0.7]]))
        v.l.bias.fill_(-0.1)
    return a, v, DDPGLoss(Actor(a), ValueOperator(v, in_keys=["observation", "action"]))


def batch():
    return TensorDict({
        "observation": torch.tensor([[1., 2., 3.], [-1., 0.5, 0.], [0., 0., 1.]]),
        "action": torch.tensor([[0.3], [-0.6], [1.0]]),
        ("next", "observation"): torch.tensor([[0.5, 0.5, 0.5], [2., -1., 1.], [1., 1., 1.]]),
        ("next", "reward"): torch.tensor([[1.], [0.5], [-1.]]),
        ("next", "done"): torch.tensor([[False], [False], [True]]),
        ("next", "terminated"): torch.tensor([[False], [False], [True]])}, [3])


def test_ddpg_values_match_torchrl():
    a, v, loss = build()
    td = batch()
    out = loss(td)
    expected = {"loss_actor": -0.020833319053053856, "loss_value": 3.060466766357422,
                "pred_value": [0.5099999904632568, -0.7200000286102295, 0.4999999701976776],
                "target_value": [1.358875036239624, 1.7721500396728516, -1.0],
                "td_error": [0.7205888628959656, 6.210812091827393, 2.25],
                "pred_value_max": 0.5099999904632568, "target_value_max": 1.7721500396728516}
    for key, value in expected.items():
        np.testing.assert_allclose(out[key].detach().numpy(), value, rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(td["td_error"].numpy(), expected["td_error"], rtol=1e-5)
    out["loss_actor"].backward()
    assert v.l.weight.grad is None  # the actor's loss does not train the critic
    np.testing.assert_allclose(a.weight.grad.numpy(), [[0.0, -0.5833333134651184, -0.9333333373069763]], rtol=1e-5)


def test_ddpg_training_step_and_target_update():
    a, v, loss = build()
    assert sorted(n for n, _ in loss.named_parameters()) == ["actor_network.module.bias", "actor_network.module.weight",
                                                             "value_network.module.l.bias",
                                                             "value_network.module.l.weight"]
    optim = torch.optim.Adam(loss.parameters(), lr=0.1)
    updater = SoftUpdate(loss, eps=0.5)
    before = loss.target_value_network.module.l.weight.detach().numpy().copy()
    out = loss(batch())
    (out["loss_actor"] + out["loss_value"]).backward()
    optim.step()
    updater.step()
    now = v.l.weight.detach().numpy()
    np.testing.assert_allclose(loss.target_value_network.module.l.weight.detach().numpy(), 0.5 * before + 0.5 * now,
                               rtol=1e-6)


def test_ddpg_bad_arguments():
    a, v, _ = build()
    actor, value = Actor(a), ValueOperator(v, in_keys=["observation", "action"])
    with pytest.raises(TypeError, match="make_value_estimator"):
        DDPGLoss(actor, value, gamma=0.9)
    with pytest.raises(NotImplementedError, match="Unknown loss huber"):
        DDPGLoss(actor, value, loss_function="huber")


def _target_warnings(loss, data):
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss(data)
    return [w for w in caught if "No target network updater" in str(w.message)]


def test_target_net_warning_until_an_updater_is_associated(monkeypatch):
    # torchrl 0.14.1: a loss holding target networks warns (UserWarning, the text below) on each call
    # until a SoftUpdate/HardUpdate is built on it; RL_WARNINGS=0 silences it.
    from rlpipe.objectives import HardUpdate
    loss = build()[2]
    caught = _target_warnings(loss, batch())
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert str(caught[0].message) == (
        "No target network updater has been associated with this loss module, but target parameters have been "
        "found. While this is supported, it is expected that the target network updates will be manually "
        "performed. You can deactivate this warning by turning the RL_WARNINGS env variable to False.")
    monkeypatch.setenv("RL_WARNINGS", "0")
    assert _target_warnings(loss, batch()) == []
    monkeypatch.setenv("RL_WARNINGS", "1")
    SoftUpdate(loss, eps=0.99)
    assert _target_warnings(loss, batch()) == []
    hard = build()[2]
    HardUpdate(hard, value_network_update_interval=10)
    assert _target_warnings(hard, batch()) == []


def test_no_target_net_warning_without_targets():
    from rlpipe.modules import QValueActor
    from rlpipe.envs.specs import OneHot
    from rlpipe.objectives import DQNLoss
    actor = QValueActor(nn.Linear(3, 2), in_keys=["observation"], spec=OneHot(2))
    data = batch()
    data["action"] = torch.tensor([[1, 0], [0, 1], [1, 0]])
    assert _target_warnings(DQNLoss(actor, delay_value=False), data) == []
    assert len(_target_warnings(DQNLoss(actor, delay_value=True), data)) == 1
