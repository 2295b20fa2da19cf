"""``RayCollector`` on a local two-CPU Ray instance (torchrl 0.14's ``RayCollector`` semantics).

Every test starts at most two actors (one CPU each) and releases them before it ends, so the next
test's actors can be scheduled. Environments and policies defined here reach the actors by value
(cloudpickle), since the worker processes cannot import this test module.
"""
import itertools
import sys
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a local Ray cluster starts in ~6 s: CI runs this file in its slow step

from test_collector_threads import Stamped, check_policy_versions, collect_while_learning

import rlpipe
from rlpipe import nn
from rlpipe.collectors.distributed import RayCollector
from rlpipe.envs import GymEnv
from rlpipe.tensordict import TensorDictModule

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(sys.modules[Stamped.__module__])


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


# ---- environments and policies (shipped to the actors by value) ------------------------------------------

class Counter(gym.Env):
    """Observation ``[t]``, reward ``t + 10 * action``; terminates at ``t == 5``; with ``fail_at``,
    the step of that number (0-based count of step calls) raises."""
    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(self, fail_at=None):
        self.observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.fail_at = fail_at
        self.calls = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], np.float32), {}

    def step(self, action):
        if self.calls == self.fail_at:
            raise RuntimeError(f"simulator crashed at step {self.fail_at}")
        self.calls += 1
        self.t += 1
        return np.array([self.t], np.float32), float(self.t + 10 * int(action)), self.t >= 5, False, {}


def make_counter():
    return GymEnv(Counter())


def make_failing_counter():
    return GymEnv(Counter(fail_at=3))


class HangingCounter(Counter):
    """A Counter whose step number ``hang_at`` sleeps far longer than any test's timeout."""

    def __init__(self, hang_at):
        super().__init__()
        self.hang_at = hang_at

    def step(self, action):
        if self.calls == self.hang_at:
            time.sleep(600)
        return super().step(action)


def make_hanging_counter():
    return GymEnv(HangingCounter(hang_at=6))


def make_cartpole():
    return GymEnv("CartPole-v1")


def make_pendulum():
    return GymEnv("Pendulum-v1")


def make_broken():
    raise OSError("no simulator licence")


class LinearPolicy(nn.Module):
    """Deterministic Pendulum policy: ``2 * tanh(W obs + b)``."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)
        with rlpipe.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.zero_()

    def forward(self, observation):
        return self.linear(observation).tanh() * 2.0


def by_hand(obs, module):
    w, b = arr(module.linear.weight), arr(module.linear.bias)
    return np.tanh(obs @ w.T + b) * 2.0


# ---- helpers -------------------------------------------------------------------------------------------------

def arr(x):
    return np.array(x.detach().cpu().numpy())


KEYS = {"observation", "action", "done", "terminated", "truncated", ("collector", "traj_ids"),
        ("next", "observation"), ("next", "reward"), ("next", "done"), ("next", "terminated"),
        ("next", "truncated")}


def check_rows(rows):
    """``rows``: one actor's consecutive batches as (obs, next_obs, done, ids) arrays along time.
    Within a trajectory ``next_obs[t] == obs[t + 1]`` (across batch boundaries too); ids change
    exactly after a done."""
    obs, nxt, done, ids = (np.concatenate(parts) for parts in zip(*rows))
    for t in range(len(obs) - 1):
        if done[t]:
            assert ids[t + 1] != ids[t], t
        else:
            np.testing.assert_array_equal(nxt[t], obs[t + 1], err_msg=f"step {t}")
            assert ids[t + 1] == ids[t], t


def row(b, index=()):
    return (arr(b["observation"])[index], arr(b["next", "observation"])[index],
            arr(b["next", "done"])[index][..., 0], arr(b["collector", "traj_ids"])[index])


def alive_actors(timeout=10.0):
    """The number of actors the cluster still reports alive (killing is asynchronous: poll a while)."""
    try:
        from ray._private import state

        def count():
            return sum(info["State"] != "DEAD" for info in state.actors().values())
    except ImportError:  # private API moved: every actor here takes one of the two CPUs
        def count():
            return round(2 - ray.available_resources().get("CPU", 0))
    deadline = time.monotonic() + timeout
    while True:
        alive = count()
        if alive == 0 or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


# ---- tests ---------------------------------------------------------------------------------------------------

def test_import_error_without_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(ImportError, match=r'pip install "rlpipe\[ray\]"'):
        RayCollector(make_counter, None, num_collectors=2, frames_per_batch=10, total_frames=20)


def test_bad_arguments_fail_before_any_actor_starts():
    with pytest.raises(ValueError, match=r"frames_per_batch \(9\) must be divisible by num_collectors \(2\)"):
        RayCollector(make_counter, None, num_collectors=2, frames_per_batch=9, total_frames=18, sync=True)
    with pytest.raises(ValueError, match=r"total_frames \(5\) is smaller than frames_per_batch \(10\)"):
        RayCollector(make_counter, None, num_collectors=2, frames_per_batch=10, total_frames=5)
    with pytest.raises(ValueError, match="collector_kwargs"):
        RayCollector(make_counter, None, num_collectors=2, frames_per_batch=10, collector_kwargs={"total_frames": 5})
    with pytest.raises(ValueError, match="list of 3 entries but num_collectors=2"):
        RayCollector([make_counter] * 3, None, num_collectors=2, frames_per_batch=10)
    with pytest.raises(TypeError, match="function that builds the environment"):
        RayCollector(make_counter(), None, num_collectors=1, frames_per_batch=10)
    assert alive_actors(timeout=0) == 0


def test_sync_mode_stacks_one_batch_per_actor():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 60 = 3 batches of 20: no rounding warning
        collector = RayCollector(make_cartpole, None, num_collectors=2, frames_per_batch=20, total_frames=60,
                                 sync=True)
    with collector:
        assert len(collector) == 3 and collector.frames_per_batch == 20
        collector.set_seed(0)
        batches = list(collector)
    assert len(batches) == 3
    for b in batches:
        assert tuple(b.batch_size) == (2, 10) and b.numel() == 20
        assert {k if isinstance(k, str) or len(k) > 1 else k[0] for k in b.keys(True, True)} == KEYS
        assert tuple(b["observation"].shape) == (2, 10, 4) and b["observation"].dtype is rlpipe.float32
        assert tuple(b["action"].shape) == (2, 10, 2)
        ids = arr(b["collector", "traj_ids"])
        np.testing.assert_array_equal(ids % 2, [[0] * 10, [1] * 10])  # actor index in the ids
    assert sum(b.numel() for b in batches) == 60
    for actor in range(2):
        check_rows([row(b, actor) for b in batches])
    # different seeds per actor: the two rows are different trajectories
    assert not np.array_equal(arr(batches[0]["observation"])[0], arr(batches[0]["observation"])[1])
    assert sum(int(arr(b["next", "done"]).sum()) for b in batches) >= 1  # crosses an episode end
    assert alive_actors() == 0  # released when total_frames was reached (and by the with block)


def test_async_mode_exact_frames_and_update_after_each_batch():
    rlpipe.manual_seed(0)
    policy = LinearPolicy()
    with pytest.warns(UserWarning, match=r"total_frames \(50\) is not exactly divisible by frames_per_batch \(8\)"):
        collector = RayCollector(make_pendulum, policy, num_collectors=2, frames_per_batch=8, total_frames=50,
                                 sync=False, update_after_each_batch=True)
    with collector:
        assert len(collector) == 7 and collector.total_frames == 56
        batches = []
        for b in collector:
            batches.append(b)
            if len(batches) == 2:  # new weights from now on: each actor gets them before it collects again
                with rlpipe.no_grad():
                    policy.linear.bias.fill_(0.5)
    assert len(batches) == 7 and sum(b.numel() for b in batches) == 56
    per_actor = {0: [], 1: []}
    old = 0
    for i, b in enumerate(batches):
        assert tuple(b.batch_size) == (8,)
        ids = arr(b["collector", "traj_ids"])
        assert len(set(ids % 2)) == 1  # one actor's batch
        per_actor[int(ids[0] % 2)].append(b)
        action = arr(b["action"])
        if i < 2 or not action.any():
            np.testing.assert_array_equal(action, 0.0)
            old += 1
        else:
            np.testing.assert_allclose(action, by_hand(arr(b["observation"]), policy), rtol=1e-5, atol=1e-6)
            assert action.min() > 0.9  # 2 * tanh(0.5) ~ 0.92
    # old weights: the two first requests, and the one re-request sent after batch 0 (before the change)
    assert old == 3
    assert per_actor[0] and per_actor[1]
    for actor_batches in per_actor.values():
        check_rows([row(b) for b in actor_batches])
    assert alive_actors() == 0


def test_vectorized_actor_envs_round_frames_per_batch_with_warnings():
    with pytest.warns(UserWarning) as record:
        collector = RayCollector(lambda: GymEnv("CartPole-v1", num_envs=4), None, num_collectors=1,
                                 frames_per_batch=10, total_frames=30, sync=False)
    messages = [str(w.message) for w in record]
    assert any(m.startswith("RayCollector actor 0: frames_per_batch (10)") for m in messages), messages
    assert any("total_frames (30) is not exactly divisible by frames_per_batch (12)" in m for m in messages), messages
    with collector:
        assert collector.frames_per_batch == 12 and collector.total_frames == 36
        handles = list(collector._actors)
        batches = list(collector)
    assert [tuple(b.batch_size) for b in batches] == [(4, 3)] * 3
    for env in range(4):
        check_rows([row(b, env) for b in batches])
    assert alive_actors() == 0  # (ray.kill is asynchronous: wait until the cluster reports it dead)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(handles[0].info.remote(), timeout=30)


def test_weight_update_seed_and_transport():
    rlpipe.manual_seed(0)
    policy = TensorDictModule(LinearPolicy(), in_keys=["observation"], out_keys=["action"])
    with RayCollector(make_pendulum, policy, num_collectors=2, frames_per_batch=16, total_frames=-1,
                      sync=True) as collector:
        with pytest.raises(RuntimeError, match="no length"):
            len(collector)
        it = iter(collector)
        b0 = next(it)
        assert tuple(b0.batch_size) == (2, 8)
        np.testing.assert_array_equal(arr(b0["action"]), 0.0)
        # the actors hold copies: changing the main policy changes nothing until the update
        with rlpipe.no_grad():
            policy.module.linear.weight.copy_(rlpipe.tensor([[0.3, -0.2, 0.1]]))
            policy.module.linear.bias.fill_(0.25)
        np.testing.assert_array_equal(arr(next(it)["action"]), 0.0)
        collector.update_policy_weights_()
        b2 = next(it)
        action = arr(b2["action"])
        assert not np.allclose(action, 0.0)
        np.testing.assert_allclose(action, by_hand(arr(b2["observation"]), policy.module), rtol=1e-5, atol=1e-6)
        # bad weights are refused before anything is sent; the collector keeps working
        with pytest.raises(KeyError, match="missing keys"):
            collector.update_policy_weights_({"module.linear.weight": np.zeros((1, 3), np.float32)})
        with pytest.raises(ValueError, match="shape"):
            collector.update_policy_weights_({"module.linear.weight": np.zeros((2, 3), np.float32),
                                              "module.linear.bias": np.zeros(1, np.float32)})
        # a batch crosses as plain arrays, not Tensors
        batch_size, arrays = ray.get(collector._actors[0].collect.remote())
        assert batch_size == (8,)
        assert all(type(a) is np.ndarray for a in arrays.values())
        # seeding: the same seed gives the same data again, and the two actors differ
        collector.set_seed(3)
        first = next(it)
        collector.set_seed(3)
        again = next(it)
        for key in ("observation", "action", ("next", "observation"), ("next", "reward")):
            np.testing.assert_array_equal(arr(first[key]), arr(again[key]), err_msg=str(key))
        assert not np.array_equal(arr(first["observation"])[0], arr(first["observation"])[1])
        for actor in range(2):
            check_rows([row(first, actor)])
        it.close()
    assert alive_actors() == 0
    with pytest.raises(RuntimeError, match="shut down"):
        collector.update_policy_weights_()
    collector.shutdown()  # twice is fine


@pytest.mark.parametrize("sync", [True, False])
def test_learner_thread_updates_while_another_iterates(sync):
    """Every frame arrives, tagged with the version of the weights that collected it."""
    module = Stamped()
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action", "stamp"])
    with RayCollector([make_counter] * 2, policy, frames_per_batch=20, total_frames=600, sync=sync,
                      track_policy_version=True, timeout=120) as collector:
        assert collector.policy_version == 0
        batches = collect_while_learning(collector, module)
        assert collector.policy_version == collector.get_policy_version() > 0
    assert sum(b.numel() for b in batches) == 600
    check_policy_versions(batches, stacked=sync)


def test_env_fault_names_the_actor_and_the_cause():
    with RayCollector([make_counter, make_failing_counter], None, frames_per_batch=4, total_frames=40,
                      sync=True) as collector:
        assert collector.num_collectors == 2
        with pytest.raises(RuntimeError, match=r"actor 1 \(pid \d+ on node \w+ at [\d.]+\) failed"
                                               r".*simulator crashed at step 3"):
            for _ in collector:
                pass
    assert alive_actors() == 0


def test_env_construction_fault_releases_the_actors():
    with pytest.raises(RuntimeError, match=r"actor 0 failed while starting.*no simulator licence"):
        RayCollector(make_broken, None, num_collectors=1, frames_per_batch=4, total_frames=8)
    assert alive_actors() == 0


@pytest.mark.parametrize("sync", [True, False])
def test_timeout_names_the_hung_actor(sync):
    collector = RayCollector([make_counter, make_hanging_counter], None, frames_per_batch=4, total_frames=-1,
                             sync=sync, timeout=5)
    try:
        assert collector.timeout == 5
        with pytest.raises(RuntimeError, match=r"RayCollector: no reply from worker\(s\) \[1\] within 5 s"):
            for _ in collector:
                pass
    finally:
        collector.shutdown()
    assert alive_actors() == 0


def test_timeout_is_checked():
    for bad in (0, -1, "10"):
        with pytest.raises((ValueError, TypeError), match="timeout"):
            RayCollector(make_counter, None, frames_per_batch=4, total_frames=8, timeout=bad)


class OutOfBounds(nn.Module):
    """Pendulum actions of 5.0, outside the spec's [-2, 2]."""

    def forward(self, observation):
        return observation[..., :1] * 0.0 + 5.0


def test_compact_obs_reaches_the_actors():
    with RayCollector(make_cartpole, None, num_collectors=1, frames_per_batch=10, total_frames=20,
                      compact_obs=True) as collector:
        assert collector.compact_obs is True
        batches = list(collector)
    keys = {k if isinstance(k, str) or len(k) > 1 else k[0] for k in batches[0].keys(True, True)}
    assert keys == KEYS - {("next", "observation")}


def test_check_action_spec_reaches_the_actors():
    policy = TensorDictModule(OutOfBounds(), in_keys=["observation"], out_keys=["action"])
    with RayCollector(make_pendulum, policy, num_collectors=1, frames_per_batch=10, total_frames=20,
                      check_action_spec=True) as collector:
        with pytest.raises(RuntimeError, match="outside the action spec"):
            next(iter(collector))
    with RayCollector(make_pendulum, policy, num_collectors=1, frames_per_batch=10, total_frames=10) as collector:
        batch = next(iter(collector))  # off by default: the env receives the action, as torchrl
    assert np.all(arr(batch["action"]) == 5.0)


def test_compact_obs_and_check_action_spec_are_not_collector_kwargs():
    with pytest.raises(ValueError, match=r"collector_kwargs\[0\] sets \['compact_obs'\], which RayCollector sets"):
        RayCollector(make_counter, None, num_collectors=1, frames_per_batch=10, collector_kwargs={"compact_obs": True})


def test_trajs_per_batch_yields_whole_trajectories():
    """Counter episodes last 5 steps: each batch holds two of them, whole (padded form: [2, 5], all kept)."""
    with RayCollector(make_counter, None, num_collectors=2, frames_per_batch=6, total_frames=36, sync=True,
                      trajs_per_batch=2) as collector:
        batches = list(itertools.islice(iter(collector), 2))
    for batch in batches:
        assert tuple(batch.batch_size) == (2, 5)
        assert arr(batch["collector", "mask"]).all()
        np.testing.assert_array_equal(arr(batch["observation"])[..., 0], [[0, 1, 2, 3, 4]] * 2)
        np.testing.assert_array_equal(arr(batch["next", "done"])[..., 0], [[0, 0, 0, 0, 1]] * 2)
    with pytest.raises(ValueError, match="traj_format has no effect unless trajs_per_batch is set"):
        RayCollector(make_counter, None, num_collectors=1, frames_per_batch=10, traj_format="cat")
