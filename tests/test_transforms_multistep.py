"""``MultiStepTransform`` (``rlpipe.postprocs``), torchrl 0.14.1's replay-buffer n-step transform: the
values below were recorded from torchrl 0.14.1 on the same data (writes of 5 frames, n=3,
gamma=0.5, a done at step 4)."""
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.data import LazyTensorStorage, ReplayBuffer
from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
from rlpipe.postprocs import MultiStepTransform


def episode(T=12, done_at=4):
    done = rlpipe.zeros(T, 1, dtype=rlpipe.bool)
    done[done_at] = True
    return TensorDict({"steps": rlpipe.arange(T), "next": {
        "steps": rlpipe.arange(1, T + 1), "reward": rlpipe.arange(1, T + 1, dtype=rlpipe.float32).unsqueeze(-1),
        "done": done, "terminated": done, "truncated": rlpipe.zeros(T, 1, dtype=rlpipe.bool)}}, batch_size=[T])


def test_values_and_frame_counts_recorded_from_torchrl():
    data = episode()
    rb = ReplayBuffer(storage=LazyTensorStorage(20), transform=MultiStepTransform(3, 0.5))
    sizes = []
    for i in range(0, 12, 5):
        rb.extend(data[i:i + 5])
        sizes.append(len(rb))
    assert sizes == [2, 7, 9]  # each frame once, n_steps frames held back
    s = rb[:]
    assert s["steps"].tolist() == list(range(9))
    assert s["next", "steps"].tolist() == [3, 4, 5, 5, 5, 8, 9, 10, 11]
    assert s["next", "reward"].squeeze(-1).tolist() == [2.75, 4.5, 6.25, 6.5, 5.0, 11.5, 13.25, 15.0, 16.75]
    assert s["steps_to_next_obs"].tolist() == [3, 3, 3, 2, 1, 3, 3, 3, 3]
    assert s["next", "original_reward"].squeeze(-1).tolist() == list(range(1, 10))


def test_independent_of_how_writes_are_split_and_n_steps_changes():
    whole = MultiStepTransform(3, 0.9)._inv_call(episode(40, 17))
    t = MultiStepTransform(3, 0.9)
    parts = [t._inv_call(episode(40, 17)[i:i + 2]) for i in range(0, 40, 2)]
    parts = [p for p in parts if p is not None]
    assert parts and rlpipe.cat([p["next", "reward"] for p in parts]).tolist() == whole["next", "reward"].tolist()
    t = MultiStepTransform(1, 0.9)
    assert t._inv_call(episode()[:1]) is None  # nothing ready yet
    t.n_steps = 2
    assert t._inv_call(episode()[1:4])["steps"].tolist() == [0, 1]
    rb = ReplayBuffer(storage=LazyTensorStorage(20), transform=MultiStepTransform(3, 0.99))
    for i in range(5):
        rb.add(episode()[i])
    assert len(rb) == 2 and rb[:]["steps_to_next_obs"].tolist() == [3, 3]  # (the done at step 4 is 3 steps on)


def test_errors():
    with pytest.raises(ValueError, match="The value of n_steps must be a strictly positive integer, got 0"):
        MultiStepTransform(0, 0.9)
    t = MultiStepTransform(2, 0.9)
    with pytest.raises(ValueError, match="n_steps must be a strictly positive integer, got 1.5"):
        t.n_steps = 1.5
    assert t.n_steps == 2
    with pytest.raises(ValueError, match="only an inverse transform and can be applied exclusively to replay buffers"):
        TransformedEnv(GymEnv("CartPole-v1"), t)
    with pytest.raises(NotImplementedError, match=r"done_keys \['done'\]: rlpipe's MultiStep shifts"):
        MultiStepTransform(2, 0.9, done_keys=["done"])
    TransformedEnv(GymEnv("CartPole-v1"), StepCounter())  # the env side is unaffected
