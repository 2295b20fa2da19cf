"""A ``TransformedEnv`` over a torchrl-style env that reads inputs besides the action (its
``state_spec``) or takes any batch size runs torchrl's TensorDict path: inverse transforms reach
the state entries, the batch comes from the input, and ``rollout`` keeps the caller's grad mode.

The env is a walker: ``x`` (a state entry and an observation) moves by the action, ``next x =
x + scale * action``, and the reward is ``next x``; so values are computed by hand."""
import pytest

import rlpipe
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import EnvBase, GymEnv, TransformedEnv
from rlpipe.envs.specs import Composite, Unbounded
from rlpipe.envs.transforms import UnsqueezeTransform
from rlpipe.tensordict import TensorDict


class Walker(EnvBase):
    batch_locked = False

    def __init__(self):
        super().__init__(batch_size=[])
        self.observation_spec = Composite(x=Unbounded(shape=()), scale=Unbounded(shape=()), shape=())
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Unbounded(shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))

    def _reset(self, tensordict):
        batch = () if tensordict is None else tuple(tensordict.batch_size)
        scale = rlpipe.ones(batch) if tensordict is None or "scale" not in tensordict.keys() else tensordict["scale"]
        return TensorDict({"x": rlpipe.zeros(batch), "scale": scale}, batch)

    def _step(self, tensordict):
        x = tensordict["x"] + tensordict["scale"] * tensordict["action"].squeeze(-1)
        return TensorDict({"x": x, "scale": tensordict["scale"], "reward": x.unsqueeze(-1),
                           "done": rlpipe.zeros(x.shape + (1,), dtype=rlpipe.bool)}, tensordict.batch_size)

    def _set_seed(self, seed):
        pass


def _unsqueezed():
    return TransformedEnv(Walker(), UnsqueezeTransform(dim=-1, in_keys=["x"], in_keys_inv=["x"]))


def test_inverse_transform_reaches_a_state_entry():
    """The user's x has the transformed shape [1]; the inverse squeezes it before the base env's _step."""
    env = _unsqueezed()
    td = env.reset()
    assert tuple(td["x"].shape) == (1,)
    td["x"] = rlpipe.tensor([5.0])
    td["action"] = rlpipe.tensor([2.0])
    out = env.step(td)
    assert out["next", "x"].tolist() == [7.0] and out["next", "reward"].tolist() == [7.0]
    assert tuple(env.state_spec["x"].shape) == (1,) and tuple(env.base_env.state_spec["x"].shape) == ()


def test_batch_comes_from_the_input_of_an_env_that_is_not_batch_locked():
    env = _unsqueezed()
    assert env.batch_locked is False
    td = env.reset(TensorDict({"scale": rlpipe.tensor([1.0, 2.0, 3.0])}, [3]))
    assert tuple(td.batch_size) == (3,) and tuple(td["x"].shape) == (3, 1)
    assert tuple(env.rand_step(td.clone())["action"].shape) == (3, 1)
    policy = lambda td: td.set("action", rlpipe.ones(td.batch_size + (1,)))  # noqa: E731
    rollout = env.rollout(4, policy, auto_reset=False, tensordict=td)
    assert tuple(rollout.batch_size) == (3, 4)
    # x after k steps is k * scale
    assert rollout["next", "x"][..., 0].tolist() == [[1, 2, 3, 4], [2, 4, 6, 8], [3, 6, 9, 12]]


def test_rollout_of_a_differentiable_env_keeps_the_gradient():
    """Three steps from 0 with a constant action a: rewards a, 2a, 3a; their sum's gradient is 6."""
    a = rlpipe.tensor([0.5], requires_grad=True)
    rollout = Walker().rollout(3, lambda td: td.set("action", a.expand(td.batch_size + (1,))))
    total = rollout["next", "reward"].sum()
    total.backward()
    assert total.item() == 3.0 and a.grad.tolist() == [6.0]


def test_a_collector_steps_the_tensordict_path():
    batch = next(iter(SyncDataCollector(_unsqueezed(), lambda td: td.set("action", rlpipe.tensor([1.0])),
                                        frames_per_batch=3, total_frames=3)))
    assert batch["next", "x"][:, 0].tolist() == [1.0, 2.0, 3.0] and batch["x"][:, 0].tolist() == [0.0, 1.0, 2.0]


def test_a_frame_env_still_refuses_inverse_transforms_on_other_inputs():
    env = TransformedEnv(GymEnv("Pendulum-v1"), UnsqueezeTransform(dim=-1, in_keys=["observation"],
                                                                   in_keys_inv=["observation"]))
    with pytest.raises(NotImplementedError, match=r"UnsqueezeTransform: in_keys_inv/out_keys_inv can only hold "
                                                  r"'action' on an env that takes no other input.*\['observation'\]"):
        env.reset()
