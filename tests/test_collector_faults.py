"""Collector failures that must not go unnoticed: workers orphaned by a killed main process, hung Ray
actors, transient errors inside a batch, misshapen or non-finite observations, bad arguments."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from test_gym_env import Counter

from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import GymEnv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (not yet reaped by its new parent) has exited too
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(map(_alive, pids)):
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


# ---- 6: the workers of a killed main process exit and free their shared memory ---------------------------

ORPHAN_SCRIPT = textwrap.dedent("""
    import sys, time
    from rlpipe.collectors import {cls}
    from rlpipe.envs import GymEnv
    c = {cls}(lambda: GymEnv("CartPole-v1"), None, num_workers=2, frames_per_batch=20, total_frames=-1, timeout=120)
    next(iter(c))  # the shared blocks exist once a batch came back
    print(" ".join(str(w.process.pid) for w in c._workers), flush=True)
    print(" ".join(w.shm.name for w in c._workers if w.shm is not None), flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("cls", ["MultiSyncDataCollector", "MultiaSyncDataCollector"])
def test_workers_exit_when_the_main_process_is_killed(cls):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    main = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT.format(cls=cls)], stdout=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    pids = []
    try:
        pids = [int(p) for p in main.stdout.readline().split()]
        blocks = main.stdout.readline().split()
        assert len(pids) == 2, f"expected 2 worker pids from the main process, got {pids}"
        main.send_signal(signal.SIGKILL)
        main.wait(30)
        survivors = _wait_gone(pids, 10)
        assert not survivors, f"{cls}: workers {survivors} still alive 10 s after their main process was killed"
        leaked = blocks
        deadline = time.monotonic() + 10
        while leaked and time.monotonic() < deadline:
            time.sleep(0.1)
            leaked = [name for name in leaked if os.path.exists(f"/dev/shm/{name}")]
        assert not leaked, f"{cls}: shared blocks {leaked} outlived the killed main process and its workers"
    finally:
        if main.poll() is None:
            main.kill()
            main.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# ---- 8: after a transient error the next batch starts a fresh trajectory --------------------------------

class FailsOnce:
    """A policy (the spec's zero action) whose ``fail_at``-th call (0-based) raises, once."""

    def __init__(self, fail_at, action_spec):
        self.calls, self.fail_at, self.action_spec = 0, fail_at, action_spec

    def __call__(self, td):
        self.calls += 1
        if self.calls - 1 == self.fail_at:
            raise RuntimeError("transient policy failure")
        td.set("action", self.action_spec.zero())
        return td


class EnvFailsOnce(Counter):
    """A Counter (never terminating) whose step number ``fail_at`` (0-based) raises, once."""

    def __init__(self, fail_at):
        super().__init__(terminate_at=1000)
        self.calls, self.fail_at = 0, fail_at

    def step(self, action):
        self.calls += 1
        if self.calls - 1 == self.fail_at:
            raise RuntimeError("transient simulator failure")
        return super().step(action)


def _values(batch, *key):
    return np.asarray(batch.get(key).numpy()).reshape(-1).tolist()


@pytest.mark.parametrize("where", ["policy", "env"])
def test_a_transient_error_ends_the_trajectory(where):
    """Steps 5 and 6 (of the second batch) are lost to an error: the batch after it starts a new
    trajectory from a reset, rather than going on as if the lost steps had been delivered."""
    env = GymEnv(EnvFailsOnce(6) if where == "env" else Counter(terminate_at=1000))
    policy = FailsOnce(6 if where == "policy" else -1, env.action_spec)
    collector = SyncDataCollector(env, policy, frames_per_batch=4, total_frames=-1)
    it = iter(collector)
    first = next(it)
    assert _values(first, "observation") == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="transient"):
        next(it)
    it = iter(collector)
    after = next(it)
    assert _values(after, "observation") == [0, 1, 2, 3], "the batch after an error must start from a reset"
    ids = set(_values(after, "collector", "traj_ids"))
    assert len(ids) == 1 and ids.isdisjoint(_values(first, "collector", "traj_ids")), \
        "the batch after an error must have a new trajectory id"
    collector.shutdown()


# ---- 9: observations of the wrong shape are refused, naming the env, the key and both shapes ------------

class WrongShape(Counter):
    """A Counter whose observations from step ``from_step`` on (0-based) have shape (2,), not (1,)."""

    def __init__(self, from_step):
        super().__init__(terminate_at=1000)
        self.calls, self.from_step = 0, from_step

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return (np.zeros(2, np.float32) if self.from_step == 0 else obs), info

    def step(self, action):
        obs, *rest = super().step(action)
        self.calls += 1
        return (np.full(2, self.t, np.float32) if self.calls > self.from_step else obs), *rest


def _tensordict_policy(env):
    return lambda td: td.set("action", env.action_spec.zero())


@pytest.mark.parametrize("from_step", [0, 3])
@pytest.mark.parametrize("policy", [None, _tensordict_policy])
def test_wrong_observation_shape_names_env_key_and_shapes(from_step, policy):
    env = GymEnv(WrongShape(from_step))
    collector = SyncDataCollector(env, policy and policy(env), frames_per_batch=6, total_frames=-1)
    with pytest.raises(ValueError, match=r"WrongShape.*'observation' of shape \[2\].*expects \[1\]") as info:
        next(iter(collector))
    assert "broadcast" not in str(info.value)
    collector.shutdown()
