"""torchrl 0.14's indexing of batched envs (``env[item]``: a live view over some of the envs) and
snapshot writeback refusals, on SerialEnv and ParallelEnv. Expected counts are by hand: each env
adds its action to its own count."""
import numpy as np
import pytest

import rlpipe as torch
from rlpipe.envs import EnvBase, ParallelEnv, SerialEnv
from rlpipe.envs.specs import Categorical, Composite, Unbounded
from rlpipe.tensordict import TensorDict


class Counter(EnvBase):
    """A single env counting the actions it was given (int64 ``count``)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(count=Unbounded((1,), dtype=torch.int64))
        self.action_spec = Categorical(3, shape=(1,))
        self.count = torch.zeros(1, dtype=torch.int64)

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict, **kwargs):
        self.count.zero_()
        return TensorDict({"count": self.count.clone()}, [])

    def _step(self, tensordict):
        self.count += tensordict["action"]
        return TensorDict({"count": self.count.clone(), "done": self.count > 100, "reward": torch.zeros(1)}, [])


def _counts(env):
    return [int(c[0]) for c in env.count]


def _step(env, value):
    env.step(TensorDict({"action": torch.full(tuple(env.batch_size) + (1,), value, dtype=torch.int64)},
                        env.batch_size))


@pytest.fixture(params=[SerialEnv, ParallelEnv])
def batched(request):
    env = request.param(4, Counter)
    env.reset()
    yield env
    env.close(raise_if_closed=False)


@pytest.mark.parametrize("item, selected", [
    (2, [2]), (-1, [3]), (slice(1, 3), [1, 2]), (np.array([0, 3]), [0, 3]), ([3, 1], [3, 1]),
    (torch.tensor([1, 3]), [1, 3]), (np.int64(0), [0]),
])
def test_view_steps_the_selected_envs(batched, item, selected):
    view = batched[item]
    assert type(view) is type(batched)
    assert view.num_workers == len(selected) and view.batch_size == (len(selected),)
    assert view.observation_spec["count"].shape == (len(selected), 1)
    _step(view, 2)
    expected = [2 if i in selected else 0 for i in range(4)]
    assert _counts(batched) == expected
    assert _counts(view) == [expected[i] for i in selected]
    view.close()
    assert view.is_closed and not batched.is_closed
    _step(batched, 1)
    assert _counts(batched) == [e + 1 for e in expected]


def test_view_of_a_view_and_its_rollout(batched):
    view = batched[1:][::2]  # envs 1 and 3
    assert view.num_workers == 2
    rollout = view.rollout(3, policy=lambda td: td.set("action", torch.ones(2, 1, dtype=torch.int64)))
    assert rollout.shape == (2, 3)
    assert rollout["next", "count"][..., 0].tolist() == [[1, 2, 3], [1, 2, 3]]
    assert _counts(batched) == [0, 3, 0, 3]
    view.check_env_specs()


def test_closed_view_and_closed_parent(batched):
    view = batched[1:]
    view.close()
    with pytest.raises(RuntimeError, match="Cannot use a closed indexed batched environment view"):
        view.reset()
    with pytest.raises(RuntimeError, match="Cannot start an indexed batched environment view"):
        view.start()
    other = batched[:2]
    batched.close()
    with pytest.raises(RuntimeError, match="after its parent environment has been closed"):
        other.reset()
    assert other.is_closed
    other.close(raise_if_closed=False)


def test_view_keeps_its_parent_alive():
    env = SerialEnv(3, Counter)
    env = env[:1]  # the only reference left is the view's
    try:
        assert env.batch_size == (1,)
        _step(env, 1)
        assert _counts(env) == [1]
    finally:
        env.close()


@pytest.mark.parametrize("item, error, message", [
    (np.ones(4, dtype=bool), NotImplementedError, "Boolean masks are not supported for batched envs"),
    (torch.ones(4, dtype=torch.bool), NotImplementedError, "Boolean masks are not supported for batched envs"),
    (True, NotImplementedError, "Boolean masks are not supported for batched envs"),
    (4, IndexError, "index 4 is out of bounds for 4 envs"),
    (np.array([0, -5]), IndexError, "index -5 is out of bounds for 4 envs"),
    (slice(4, None), IndexError, "Empty batched env indexing is not supported"),
    (np.zeros((2, 2), dtype=np.int64), IndexError, r"ints, scalar or 1D, got shape \[2, 2\]"),
    (np.array([0.5]), IndexError, "dtype float64"),
])
def test_bad_indices(batched, item, error, message):
    with pytest.raises(error, match=message):
        batched[item]
    _step(batched, 1)  # still usable
    assert _counts(batched) == [1, 1, 1, 1]


def test_snapshot_writeback_is_refused_where_the_env_cannot(batched):
    with pytest.raises(NotImplementedError, match="do not support snapshot writeback"):
        batched[0] = Counter()
    with pytest.raises(ValueError, match="got 1 and expected 2"):
        batched[:2] = [Counter()]
    with pytest.raises(TypeError, match="Expected an EnvBase or sequence of EnvBase sources, got int"):
        batched[0] = 3
    _step(batched, 1)
    assert not batched.is_closed and _counts(batched) == [1, 1, 1, 1]


class SlowClose(Counter):
    """A Counter whose close takes ``delay`` seconds."""

    def __init__(self, delay=0.0):
        super().__init__()
        self.delay = delay

    def close(self, *, raise_if_closed=True):
        import time
        time.sleep(self.delay)
        super().close(raise_if_closed=raise_if_closed)


class Sized(Counter):
    """A Counter whose count has ``size`` entries; ``fail`` raises while it is built."""

    def __init__(self, size=1, fail=False):
        if fail:
            raise RuntimeError("intentional worker construction failure")
        super().__init__()
        self.observation_spec = Composite(count=Unbounded((size,), dtype=torch.int64))


def test_metadata_from_workers_builds_no_env_here(monkeypatch):
    import rlpipe.envs.batched_envs as batched_envs
    monkeypatch.setattr(batched_envs, "get_env_metadata", None)  # would fail if called in this process
    env = ParallelEnv(2, Counter, metadata_from_workers=True, use_buffers=False, mp_start_method="fork")
    try:
        assert not env.is_closed and env._use_buffers is False and len(env._workers) == 2
        assert env.observation_spec["count"].shape == (2, 1)
        _step(env, 2)
        assert _counts(env) == [2, 2]
    finally:
        env.close()


def test_metadata_from_workers_errors():
    with pytest.raises(RuntimeError, match="metadata_from_workers=True currently requires use_buffers=False"):
        ParallelEnv(2, Counter, metadata_from_workers=True, use_buffers=True)
    with pytest.raises(RuntimeError, match="metadata are incompatible: worker 1 reports"):
        ParallelEnv(2, [Sized, Sized], [{"size": 1}, {"size": 2}], metadata_from_workers=True, mp_start_method="fork")
    with pytest.raises(RuntimeError, match="worker 1 failed in 'start'.*intentional worker construction failure"):
        ParallelEnv(2, [Sized, Sized], [{}, {"fail": True}], metadata_from_workers=True, mp_start_method="fork")
    with pytest.raises(ValueError, match="shutdown_timeout must be >= 0 seconds, got -1"):
        ParallelEnv(2, Counter, shutdown_timeout=-1)


def test_shutdown_timeout_bounds_close():
    import time
    env = ParallelEnv(1, SlowClose, {"delay": 30.0}, shutdown_timeout=0.1, metadata_from_workers=True,
                      mp_start_method="fork")  # (no env built here, whose close would take 30 s)
    env.reset()
    workers = list(env._workers)
    start = time.monotonic()
    env.close()
    assert time.monotonic() - start < 5.0
    assert workers and not any(worker.is_alive() for worker in workers)
    assert env._workers == []


def test_partial_reset_from_a_mask_alone_keeps_the_other_envs_observations(batched):
    _step(batched, 2)
    mask = torch.tensor([[True], [False], [True], [False]])
    out = batched.reset(TensorDict({"_reset": mask}, [4]))
    assert out["count"][:, 0].tolist() == [0, 2, 0, 2]  # the envs not reset: their last observations
    assert _counts(batched) == [0, 2, 0, 2]
