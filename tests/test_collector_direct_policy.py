"""The collector's direct call of a plain TensorDictModule policy (its module on the step buffers,
no TensorDict read and write per step): the same batches as through TensorDictModule.forward, and
the generic path wherever the module would do more than that."""
import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import GymEnv
from rlpipe.tensordict import TensorDictModule


class Greedy(nn.Module):
    def __init__(self):
        super().__init__()
        rlpipe.manual_seed(0)
        self.net = nn.Linear(4, 2)

    def forward(self, observation):
        return self.net(observation).argmax(-1)


class SubclassedModule(TensorDictModule):
    pass


def collect(policy, frames=96):
    env = GymEnv("CartPole-v1", num_envs=4, vectorization_mode="vector_entry_point", categorical_action_encoding=True)
    env.set_seed(3)
    collector = SyncDataCollector(env, policy, frames_per_batch=frames // 2, total_frames=frames)
    batches = list(collector)
    direct = collector._direct is not None
    collector.shutdown()
    return batches, direct


GREEDY = Greedy()


def generic(td):
    td.set("action", GREEDY(td["observation"]))
    return td


@pytest.mark.parametrize("policy_type", [TensorDictModule, SubclassedModule])
def test_same_batches_as_forward(policy_type):
    reference, reference_direct = collect(generic)
    batches, direct = collect(policy_type(Greedy(), in_keys=["observation"], out_keys=["action"]))
    assert direct is (policy_type is TensorDictModule) and not reference_direct
    for got, want in zip(batches, reference):
        for key in want.keys(True, True):
            np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())


def test_a_hook_on_the_policy_keeps_the_generic_path():
    policy = TensorDictModule(Greedy(), in_keys=["observation"], out_keys=["action"])
    calls = []
    policy.register_forward_hook(lambda module, args, out: calls.append(1))
    _, direct = collect(policy)
    assert not direct and len(calls) >= 24  # every step: 96 frames of 4 envs, and the steps that reset envs


def test_extra_outputs_keep_the_generic_path():
    class TwoOut(nn.Module):
        def forward(self, observation):
            return observation.sum(-1).gt(0).long(), observation.sum(-1, keepdim=True)
    batches, direct = collect(TensorDictModule(TwoOut(), in_keys=["observation"], out_keys=["action", "score"]))
    assert not direct
    np.testing.assert_allclose(batches[0]["score"].numpy(), batches[0]["observation"].numpy().sum(-1, keepdims=True),
                               rtol=1e-6)


def test_a_non_tensor_action_is_a_type_error():
    class Flip(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, observation):
            self.calls += 1
            return observation.sum(-1).gt(0).long() if self.calls == 1 else [0, 1, 0, 1]
    with pytest.raises(TypeError, match="the policy must write a Tensor under 'action', got list"):
        collect(TensorDictModule(Flip(), in_keys=["observation"], out_keys=["action"]))


class Faulty(nn.Module):
    """Greedy actions for ``good`` calls, then ``bad(actions)``."""

    def __init__(self, good, bad):
        super().__init__()
        self.calls, self.good, self.bad = 0, good, bad

    def forward(self, observation):
        self.calls += 1
        action = GREEDY(observation)
        return action if self.calls <= self.good else self.bad(action)


@pytest.mark.parametrize("bad, check, message", [
    (lambda a: a + 5, True, r"outside the action spec at frame 0: .* not in"),
    (lambda a: a[:2], False, r"the policy returned an action of shape \[2\]; the action spec expects \[4\]"),
    (lambda a: a.float().numpy(), False, r"the policy must write a Tensor under 'action', got ndarray")])
def test_a_bad_action_in_the_direct_path_is_refused(bad, check, message):
    """The direct call checks each step's action as the generic path does (its first step's)."""
    env = GymEnv("CartPole-v1", num_envs=4, vectorization_mode="vector_entry_point", categorical_action_encoding=True)
    module = Faulty(3, bad)
    collector = SyncDataCollector(env, TensorDictModule(module, in_keys=["observation"], out_keys=["action"]),
                                  frames_per_batch=40, total_frames=40, check_action_spec=check)
    with pytest.raises((ValueError, TypeError), match=message) as error:
        next(iter(collector))
    assert collector._direct is not None and module.calls == 4
    assert error.type is (TypeError if "Tensor" in message else ValueError)
    collector.shutdown()
