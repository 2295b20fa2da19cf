"""The multi-process collectors used from two threads: a learner thread updating the weights while
another iterates (every frame arrives, each batch tagged with the version of the weights that
collected it), and ``shutdown()`` from another thread (the iterating thread's loop ends, nothing
is left running). Every test leaves no child process and no shared block (``assert_clean``)."""
import threading
import time
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from test_collector import COUNTER, Counter, arr
from test_multi_collector import (  # noqa: F401 - the autouse fixture checks that nothing is left
    COLLECTORS,
    HANGS,
    W,
    assert_clean,
    check_counter_async_batches,
    check_counter_sync_batch,
    counter_envs,
    no_children_or_blocks_left,
)

import rlpipe
from rlpipe import nn
from rlpipe.collectors import MultiSyncDataCollector
from rlpipe.envs import GymEnv
from rlpipe.tensordict import TensorDictModule

SLOW = "rlpipe_test/ThreadsSlowCounter-v0"


class SlowCounter(Counter):
    """A Counter whose steps take ``step_s`` seconds."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, step_s):
        super().__init__()
        self.step_s = step_s

    def step(self, action):
        time.sleep(self.step_s)
        return super().step(action)


if SLOW not in gym.registry:
    gym.register(SLOW, entry_point=SlowCounter)


class Stamped(nn.Module):
    """A policy with large weights (a 256-unit MLP: ~260 KiB) whose second output, ``stamp``, is
    its parameter ``stamp``: the data says which weights collected it."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 2))
        self.stamp = nn.Parameter(rlpipe.zeros(1))

    def forward(self, observation):
        action = nn.functional.one_hot(self.mlp(observation).argmax(-1), 2)
        return action, observation * 0 + self.stamp


def collect_while_learning(collector, module):
    """The batches of ``collector``, iterated while a learner thread sets ``module.stamp`` to 1, 2,
    ... and sends each version (then flips the MLP's weights in place: the collector must have
    copied them) until the iteration is over."""
    stop, updates, errors = threading.Event(), [], []

    def learn():
        while not stop.is_set():
            with rlpipe.no_grad():
                module.stamp.fill_(float(len(updates) + 1))
                try:
                    collector.update_policy_weights_()
                except RuntimeError as error:  # a RayCollector shuts down once total_frames is reached
                    errors.append(error)
                    return
                updates.append(collector.policy_version)
                for p in module.mlp.parameters():
                    p.mul_(-1.0)
            time.sleep(0.001)

    learner = threading.Thread(target=learn, daemon=True)
    learner.start()
    try:
        batches = []
        for b in collector:
            batches.append(b)
            if len(batches) == 3 and not updates:
                time.sleep(0.5)  # a slow machine: let the learner start before the collection is over
    finally:
        stop.set()
        learner.join(60)
    assert not learner.is_alive()
    assert all("shut down" in str(error) for error in errors), errors
    assert updates == list(range(1, len(updates) + 1)), "each update is the next version"
    return batches


def check_policy_versions(batches, stacked, num_workers=W):
    """Each frame's ``"policy_version"`` (and ``("next", "policy_version")``) is the version of the
    weights that collected it (their stamp); a stacked (sync) batch has one; each worker's versions
    never go back; the learner's updates reached the data (3 versions at least)."""
    per_worker = {w: [] for w in range(num_workers)}
    for b in batches:
        version = arr(b["policy_version"])
        assert version.dtype == np.int64 and version.shape == tuple(b.batch_size)
        np.testing.assert_array_equal(arr(b["next", "policy_version"]), version)
        np.testing.assert_array_equal(arr(b["stamp"])[..., 0], version)
        if stacked:
            assert len(np.unique(version)) == 1, "a sync batch is collected with one version"
            for w in range(num_workers):
                per_worker[w].append(version[w])
        else:
            per_worker[int(arr(b["collector", "traj_ids"]).reshape(-1)[0]) % num_workers].append(version)
    for w, versions in per_worker.items():
        versions = np.concatenate([v.reshape(-1) for v in versions])
        assert (np.diff(versions) >= 0).all(), f"worker {w}: versions go back: {versions}"
    seen = np.unique(np.concatenate([arr(b["policy_version"]).reshape(-1) for b in batches]))
    assert len(seen) >= 3, f"the learner's updates should reach the data; versions seen: {seen}"


@pytest.mark.parametrize("cls", COLLECTORS)
def test_learner_thread_updates_while_another_iterates(cls):
    """Every frame arrives, in its worker's stream, tagged with the version of its weights."""
    module = Stamped()
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action", "stamp"])
    sync = cls is MultiSyncDataCollector
    with cls(counter_envs(), policy, frames_per_batch=20 if sync else 10, total_frames=2000, timeout=60,
             track_policy_version=True) as c:
        assert c.policy_version == 0
        batches = collect_while_learning(c, module)
        assert c.policy_version == c.get_policy_version() > 0
    assert sum(b.numel() for b in batches) == 2000  # every frame arrived
    if sync:
        for k, b in enumerate(batches):
            check_counter_sync_batch(b, k)
    else:
        check_counter_async_batches(batches)
    check_policy_versions(batches, stacked=sync)


def test_policy_version_is_off_by_default_and_kept_by_state_dict():
    module = Stamped()
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action", "stamp"])
    with MultiSyncDataCollector(counter_envs(), policy, frames_per_batch=10, total_frames=-1) as c:
        b = next(iter(c))
        assert "policy_version" not in b.keys() and c.policy_version is None
        assert "policy_version" not in c.state_dict()
    with MultiSyncDataCollector(counter_envs(), policy, frames_per_batch=10, total_frames=-1,
                                track_policy_version=True) as c:
        it = iter(c)
        assert (arr(next(it)["policy_version"]) == 0).all()
        c.update_policy_weights_()
        c.update_policy_weights_()
        assert c.get_policy_version() == 2
        assert (arr(next(it)["policy_version"]) == 2).all()
        state = c.state_dict()
        assert state["policy_version"] == 2
    with MultiSyncDataCollector(counter_envs(), policy, frames_per_batch=10, total_frames=-1,
                                track_policy_version=True) as c:
        c.load_state_dict(state)  # the version is restored, not counted as a new update
        assert c.policy_version == 2
        assert (arr(next(iter(c))["policy_version"]) == 2).all()


# ---- shutdown() from another thread --------------------------------------------------------------------

def _iterate_in_a_thread(collector):
    """Starts a thread looping over ``collector``; returns it and the list its outcome goes to:
    "ended" (the loop ended) or the exception it raised."""
    outcome = []

    def loop():
        try:
            for _ in collector:
                pass
            outcome.append("ended")
        except BaseException as error:  # noqa: BLE001 - the test looks at whatever it was
            outcome.append(error)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread, outcome


def _check_outcome(outcome):
    """The loop ended, or (a shutdown before its first batch was asked for) one clear error."""
    assert len(outcome) == 1, outcome
    if outcome[0] != "ended":
        assert isinstance(outcome[0], RuntimeError) and str(outcome[0]).endswith("has been shut down"), \
            repr(outcome[0])


@pytest.mark.parametrize("cls", COLLECTORS)
@pytest.mark.slow
def test_shutdown_from_another_thread_ends_the_loop(cls):
    """20 rounds, each shutting down at another moment (every 3 ms of the first 60), while worker 0
    is mostly idle and worker 1 busy (10 steps of 5 ms a batch)."""
    for round_ in range(20):
        c = cls([lambda: GymEnv(SLOW, step_s=0.0), lambda: GymEnv(SLOW, step_s=0.005)], None, frames_per_batch=20,
                total_frames=-1, timeout=60)
        thread, outcome = _iterate_in_a_thread(c)
        time.sleep(0.003 * round_)
        c.shutdown()
        thread.join(30)
        assert not thread.is_alive(), f"round {round_}: the iterating thread is still running"
        _check_outcome(outcome)
        assert_clean()


@pytest.mark.parametrize("cls", COLLECTORS)
def test_shutdown_from_another_thread_while_a_worker_hangs(cls):
    c = cls([lambda: GymEnv(COUNTER), lambda: GymEnv(HANGS)], None, frames_per_batch=10, total_frames=-1,
            timeout=60)
    thread, outcome = _iterate_in_a_thread(c)
    time.sleep(0.3)  # worker 1 sleeps in its env's step
    start = time.monotonic()
    c.shutdown(timeout=0.5)
    thread.join(30)
    assert not thread.is_alive()
    assert time.monotonic() - start < 10, "shutdown must not wait for the hung step"
    _check_outcome(outcome)
    assert_clean()


# ---- processes started by a thread that has ended since ------------------------------------------------

def _made_in_a_thread(make):
    made = []
    thread = threading.Thread(target=lambda: made.append(make()))
    thread.start()
    thread.join()
    return made[0]


@pytest.mark.parametrize("cls", COLLECTORS)
def test_workers_started_by_a_thread_outlive_it(cls):
    """Workers die with their main process, not with the thread that started them (Linux's
    parent-death signal follows the starting thread: it is only used for the main thread)."""
    c = _made_in_a_thread(lambda: cls(counter_envs(), None, frames_per_batch=10, total_frames=40, timeout=60))
    time.sleep(0.3)
    assert [b.numel() for b in c] == [10] * 4
    c.shutdown()
    assert_clean()


def test_async_vector_env_started_by_a_thread_outlives_it():
    env = _made_in_a_thread(lambda: GymEnv("CartPole-v1", num_envs=2, vectorization_mode="async"))
    time.sleep(0.3)
    assert env.rollout(5, break_when_any_done=False).batch_size == (2, 5)
    env.close()
    assert_clean()
