"""ActorValueOperator and ActorCriticWrapper (torchrl.modules), which torchrl's PPO and A2C Atari
scripts build their networks with; values recorded from torchrl 0.14.1 / torch 2.13."""
import rlpipe as torch
from rlpipe.tensordict import TensorDict, TensorDictModule
from rlpipe.tensordict.nn import NormalParamExtractor
from rlpipe.modules import ActorCriticWrapper, ActorValueOperator, ProbabilisticActor, TanhNormal, ValueOperator
from rlpipe.testing import assert_close


def _linear(n_in, n_out, k):
    m = torch.nn.Linear(n_in, n_out)
    with torch.no_grad():
        m.weight.copy_(torch.linspace(-1, 1, n_in * n_out).reshape(n_out, n_in) * k)
        m.bias.fill_(0.1 * k)
    return m


def _parts():
    common = TensorDictModule(_linear(3, 4, 1.0), in_keys=["observation"], out_keys=["hidden"])
    net = TensorDictModule(torch.nn.Sequential(_linear(4, 4, 0.5), NormalParamExtractor()), in_keys=["hidden"],
                           out_keys=["loc", "scale"])
    policy = ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True)
    value = ValueOperator(_linear(4, 1, 2.0), in_keys=["hidden"])
    return common, policy, value


OBS = [[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]
STATE_VALUE = [[-1.6181817054748535], [7.472726821899414]]  # torchrl 0.14.1
LOC = [[-0.05545453354716301, -0.04575757309794426], [0.5445454716682434, 0.4572727382183075]]


def _td():
    return TensorDict(observation=torch.tensor(OBS), batch_size=[2])


def test_actor_value_operator_runs_trunk_and_both_heads():
    avo = ActorValueOperator(*_parts())
    out = avo(_td())
    assert sorted(out.keys()) == ["action", "action_log_prob", "hidden", "loc", "observation", "scale",
                                  "state_value"]
    assert_close(out["state_value"], torch.tensor(STATE_VALUE))
    assert_close(out["loc"], torch.tensor(LOC))
    assert avo.in_keys == ["observation"]
    assert sorted(avo.out_keys) == ["action", "action_log_prob", "hidden", "loc", "scale", "state_value"]
    assert len(list(avo.parameters())) == 6


def test_actor_value_operator_standalone_operators_share_the_trunk():
    common, policy, value = _parts()
    avo = ActorValueOperator(common, policy, value)
    actor, critic = avo.get_policy_operator(), avo.get_value_operator()
    assert type(actor).__name__ == "SafeProbabilisticTensorDictSequential"
    assert sorted(actor(_td()).keys()) == ["action", "action_log_prob", "hidden", "loc", "observation", "scale"]
    assert sorted(critic(_td()).keys()) == ["hidden", "observation", "state_value"]
    assert_close(critic(_td())["state_value"], torch.tensor(STATE_VALUE))
    assert_close(actor.get_dist(_td()).loc, torch.tensor(LOC))
    assert actor.module[0] is common and critic.module[1] is value
    assert avo.get_policy_head() is policy and avo.get_value_head() is value
    assert len(list(actor.parameters())) == 4 and len(list(critic.parameters())) == 4


def test_actor_value_operator_with_a_deterministic_head():
    common, _, value = _parts()
    head = TensorDictModule(_linear(4, 2, 1.0), in_keys=["hidden"], out_keys=["action"])
    actor = ActorValueOperator(common, head, value).get_policy_operator()
    assert type(actor).__name__ == "TensorDictSequential"
    assert actor(_td())["action"].shape == (2, 2)


def test_actor_critic_wrapper_returns_the_parts_as_given():
    _, policy, value = _parts()
    value = ValueOperator(_linear(4, 1, 2.0), in_keys=["hidden"])
    wrapper = ActorCriticWrapper(policy, value)
    assert wrapper.get_policy_operator() is policy and wrapper.get_value_head() is value
    assert wrapper.in_keys == ["hidden"]
    assert sorted(wrapper.out_keys) == ["action", "action_log_prob", "loc", "scale", "state_value"]


def test_assert_close_on_none():
    # torch 2.13: None equals None; against a tensor, "None mismatch: None is not tensor([1.])"
    torch.testing.assert_close(None, None)
    try:
        torch.testing.assert_close(None, torch.ones(1))
    except AssertionError as error:
        assert str(error) == "None mismatch: None is not tensor([1.])"
    else:
        raise AssertionError("assert_close(None, tensor) passed")
    try:
        torch.testing.assert_close(torch.ones(1), None)
    except AssertionError as error:
        assert str(error) == "None mismatch: tensor([1.]) is not None"
    else:
        raise AssertionError("assert_close(tensor, None) passed")
