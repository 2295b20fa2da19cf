"""Collector failures that must not go unnoticed: workers orphaned by a killed main process, hung Ray
actors, transient errors inside a batch, misshapen or non-finite observations, bad arguments."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pytest
from test_gym_env import Counter

from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import CheckFinite, GymEnv, TransformedEnv

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


def _run_and_kill(script, sig):
    """Runs ``script`` in a new main process, reads the pids (first line) and shared block names
    (second line) it prints, leaves its children a second (to get stuck, if they do), then kills
    it with ``sig``: returns (pids, block names)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    main = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    pids = []
    try:
        pids = [int(p) for p in main.stdout.readline().split()]
        blocks = main.stdout.readline().split()
        assert len(pids) >= 2, f"expected the children's pids from the main process, got {pids}"
        time.sleep(1.0)  # the children are asleep in the env's step
        assert _wait_gone(pids, 0) == pids, "the children should be running before the main process dies"
        main.send_signal(sig)
        main.wait(30)
        return pids, blocks
    except BaseException:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        raise
    finally:
        if main.poll() is None:
            main.kill()
            main.wait()


def _check_gone(what, pids, blocks):
    survivors = _wait_gone(pids, 10)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"{what}: processes {survivors} still alive 10 s after their main process was killed"
    leaked = blocks
    deadline = time.monotonic() + 10
    while leaked and time.monotonic() < deadline:
        time.sleep(0.1)
        leaked = [name for name in leaked if os.path.exists(f"/dev/shm/{name}")]
    assert not leaked, f"{what}: shared blocks {leaked} outlived the killed main process and its workers"


@pytest.mark.parametrize("cls", ["MultiSyncDataCollector", "MultiaSyncDataCollector"])
@pytest.mark.slow
def test_workers_exit_when_the_main_process_is_killed(cls):
    pids, blocks = _run_and_kill(ORPHAN_SCRIPT.format(cls=cls), signal.SIGKILL)
    assert len(pids) == 2, f"expected 2 worker pids from the main process, got {pids}"
    _check_gone(cls, pids, blocks)


# ---- issue 26 item 4: workers stuck in an env step die with their main process, whatever killed it ------

STICKS = textwrap.dedent("""
    import sys, time
    import gymnasium as gym
    import numpy as np

    class Sticks(gym.Env):
        \"\"\"Steps 10 times, then sleeps in its 11th step for 10 minutes.\"\"\"
        observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)
        steps = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(1, np.float32), dict()

        def step(self, action):
            self.steps += 1
            if self.steps > 10:
                time.sleep(600)
            return np.ones(1, np.float32), 0.0, False, False, dict()

    gym.register("RlpipeSticks-v0", entry_point=Sticks)
""")

STUCK_COLLECTOR_SCRIPT = STICKS + textwrap.dedent("""
    import threading
    from multiprocessing import resource_tracker
    from rlpipe.collectors import {cls}
    from rlpipe.envs import GymEnv
    made = []
    make = lambda: made.append({cls}(lambda: GymEnv("RlpipeSticks-v0"), None, num_workers=2,  # noqa: E731
                                     frames_per_batch={fpb}, total_frames=-1, timeout=1200))
    if {in_thread}:  # a thread that ends: the workers must not die with it, only with the process
        thread = threading.Thread(target=make)
        thread.start()
        thread.join()
    else:
        make()
    c = made[0]
    it = iter(c)
    while any(w.shm is None for w in c._workers):  # each worker's first batch: 10 steps, through its block
        next(it)
    # the workers' next batch sticks in step 11
    print(" ".join(str(w.process.pid) for w in c._workers), resource_tracker._resource_tracker._pid, flush=True)
    print(" ".join(w.shm.name for w in c._workers), flush=True)
    for _ in it:
        pass
""")

STUCK_VECTOR_ENV_SCRIPT = STICKS + textwrap.dedent("""
    from rlpipe.envs import GymEnv
    env = GymEnv("RlpipeSticks-v0", num_envs=2, vectorization_mode="async")
    env.rollout(10, break_when_any_done=False)
    print(" ".join(str(p.pid) for p in env.env.unwrapped.processes), flush=True)
    print(flush=True)
    env.rollout(10, break_when_any_done=False)  # sticks in step 11
""")


@pytest.mark.parametrize("cls, sig, in_thread", [
    ("MultiSyncDataCollector", signal.SIGKILL, False),
    ("MultiSyncDataCollector", signal.SIGTERM, False),
    ("MultiaSyncDataCollector", signal.SIGKILL, False),
    ("MultiaSyncDataCollector", signal.SIGTERM, False),
    ("MultiSyncDataCollector", signal.SIGKILL, True),
])
@pytest.mark.slow
def test_workers_stuck_in_a_step_die_with_the_main_process(cls, sig, in_thread):
    """Both workers sleep in their env's step when the main process dies: they, the resource
    tracker (last pid) and the shared blocks are gone within 10 s. ``in_thread``: the collector
    was made by a thread that has ended since."""
    fpb = 20 if cls == "MultiSyncDataCollector" else 10  # 10 steps a worker
    pids, blocks = _run_and_kill(STUCK_COLLECTOR_SCRIPT.format(cls=cls, fpb=fpb, in_thread=in_thread), sig)
    assert len(pids) == 3 and len(blocks) == 2, (pids, blocks)
    _check_gone(cls, pids, blocks)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.slow
def test_async_vector_env_subprocesses_stuck_in_a_step_die_with_the_main_process(sig):
    pids, _ = _run_and_kill(STUCK_VECTOR_ENV_SCRIPT, sig)
    assert len(pids) == 2, pids
    _check_gone("GymEnv(vectorization_mode='async')", pids, [])


# ---- issue 26 item 7: a dead async vector-env subprocess leaks no process ------------------------------------

@pytest.mark.parametrize("closer", ["env.close", "collector.shutdown"])
def test_closing_an_async_vector_env_with_a_killed_subprocess_reaps_every_subprocess(closer):
    """Three rounds: one of the two subprocesses is SIGKILLed; the env's next step fails clearly,
    and closing (the env, or the collector over it) leaves neither the other subprocess running
    nor the killed one a zombie (its /proc entry is gone once reaped)."""
    for _ in range(3):
        env = GymEnv("CartPole-v1", num_envs=2, vectorization_mode="async")
        collector = SyncDataCollector(env, None, frames_per_batch=10, total_frames=-1)
        next(iter(collector))
        pids = [p.pid for p in env.env.unwrapped.processes]
        os.kill(pids[0], signal.SIGKILL)
        assert _wait_gone(pids[:1], 10) == []
        with pytest.raises(RuntimeError, match=r"GymEnv\(CartPole-v1\)"):
            env.rollout(5)
        if closer == "env.close":
            env.close()
        collector.shutdown()
        left = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
        assert not left, f"subprocesses {left} are still running or zombies after {closer}()"


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


# ---- 9: NaN and inf are refused on request (CheckFinite), naming the env, the key, the env and the step ----

class NonFinite(Counter):
    """A Counter (episodes of 5 steps) whose ``key`` ("observation" or "reward") is ``value`` at
    step ``at_step`` of its ``episode``-th episode (0 being the first; step 0 is the reset).
    Seeded with a seed other than ``bad_seed``, it stays finite."""

    def __init__(self, key="observation", value=np.nan, episode=1, at_step=3, bad_seed=None):
        super().__init__()
        self.key, self.value, self.episode, self.at_step, self.bad_seed = key, value, episode, at_step, bad_seed
        self.episodes, self.bad = -1, True

    def reset(self, *, seed=None, options=None):
        if seed is not None and self.bad_seed is not None:
            self.bad = seed == self.bad_seed
        obs, info = super().reset(seed=seed, options=options)
        self.episodes += 1
        return self._spoiled(obs, 0.0)[0], info

    def step(self, action):
        obs, reward, *rest = super().step(action)
        return *self._spoiled(obs, reward), *rest

    def _spoiled(self, obs, reward):
        if self.bad and self.episodes == self.episode and self.t == self.at_step:
            if self.key == "observation":
                obs = np.full_like(obs, self.value)
            else:
                reward = self.value
        return obs, reward


gym.register(id="RlpipeNonFinite-v0", entry_point=NonFinite)


@pytest.mark.parametrize("key, value, at_step, message", [
    ("observation", np.nan, 3, r"NaN in \('next', 'observation'\) at step 3 of env \[\]"),
    ("reward", -np.inf, 2, r"inf in \('next', 'reward'\) at step 2 of env \[\]"),
    ("observation", np.inf, 0, r"inf in 'observation' at step 0 of env \[\]"),
])
def test_check_finite_names_env_key_and_step(key, value, at_step, message):
    env = TransformedEnv(GymEnv(NonFinite(key, value, episode=1, at_step=at_step)), CheckFinite())
    collector = SyncDataCollector(env, None, frames_per_batch=4, total_frames=-1)
    # a step's error comes wrapped in the collector's RuntimeError naming the frame; a reset's as it is
    with pytest.raises((RuntimeError, ValueError), match=r"CheckFinite: GymEnv\(env=NonFinite.*\) gave "
                       + message) as info:
        for _ in collector:
            pass
    assert isinstance(info.value.__cause__ or info.value, ValueError) and "expected finite values" in str(info.value)
    collector.shutdown()


def test_non_finite_values_pass_without_check_finite():
    collector = SyncDataCollector(GymEnv(NonFinite(at_step=3)), None, frames_per_batch=10, total_frames=10)
    batch = next(iter(collector))
    assert np.isnan(batch["next", "observation"].numpy()).sum() == 1  # delivered as it came: the check is opt-in
    collector.shutdown()


def test_check_finite_names_the_env_index_of_a_vector_env():
    env = TransformedEnv(GymEnv("RlpipeNonFinite-v0", num_envs=3, bad_seed=11), CheckFinite())
    env.set_seed(10)  # the vector env seeds its envs 10, 11, 12: only the second one goes bad
    with pytest.raises(ValueError, match=r"NaN in \('next', 'observation'\) at step 3 of env \[1\]"):
        env.rollout(20, break_when_any_done=False)


def test_check_finite_in_keys():
    finite_obs = TransformedEnv(GymEnv(NonFinite("reward", np.nan, episode=0)), CheckFinite(in_keys=["observation"]))
    assert np.isnan(finite_obs.rollout(5)["next", "reward"].numpy()).any()  # the reward is not checked
    missing = TransformedEnv(GymEnv(NonFinite()), CheckFinite(in_keys=["pixels"]))
    with pytest.raises(KeyError, match=r"CheckFinite: no entry 'pixels' to check; the frame has \['observation'\]"):
        missing.reset()


# ---- 11: arguments a collector must refuse -----------------------------------------------------------------

def _collector(name, **kwargs):
    factory = lambda: GymEnv(Counter())  # noqa: E731
    if name == "SyncDataCollector":
        return SyncDataCollector(factory, None, frames_per_batch=10, total_frames=100, **kwargs)
    if name == "RayCollector":
        pytest.importorskip("ray")
        from rlpipe.collectors.distributed import RayCollector
        return RayCollector([factory], None, frames_per_batch=10, total_frames=100, **kwargs)
    cls = getattr(__import__("rlpipe.collectors", fromlist=[name]), name)
    return cls([factory, factory], None, frames_per_batch=10, total_frames=100, **kwargs)


COLLECTORS = ["SyncDataCollector", "MultiSyncDataCollector", "MultiaSyncDataCollector", "RayCollector"]


@pytest.mark.parametrize("name", COLLECTORS)
@pytest.mark.parametrize("kwargs, error, message", [
    (dict(init_random_frames=-5), ValueError, r"init_random_frames must be >= 0 \(or -1/None for none\), got -5"),
    (dict(init_random_frames=2.5), TypeError, r"init_random_frames must be an integer .*got 2.5 \(float\)"),
    (dict(init_random_frames=True), TypeError, r"init_random_frames must be an integer .*got True \(bool\)"),
    (dict(split_trajs="yes"), TypeError, r"split_trajs must be True or False, got 'yes' \(str\)"),
    (dict(split_trajs=1), TypeError, r"split_trajs must be True or False, got 1 \(int\)"),
])
def test_bad_collector_arguments(name, kwargs, error, message):
    with pytest.raises(error, match=message):
        _collector(name, **kwargs)


@pytest.mark.parametrize("init_random_frames", [None, -1])
def test_torchrl_defaults_mean_no_random_frames(init_random_frames):
    collector = _collector("SyncDataCollector", init_random_frames=init_random_frames, split_trajs=None)
    assert collector.init_random_frames == 0 and collector.split_trajs is False
    collector.shutdown()
