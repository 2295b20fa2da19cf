"""``MultiSyncDataCollector`` and ``MultiaSyncDataCollector`` (torchrl 0.14 semantics) against values
known by hand.

The ``Counter`` env of ``test_collector`` makes every worker's stream exact: with one env per
worker, the ``i``-th frame a worker collects (counting across its batches) has observation
``i % 5``, next observation ``i % 5 + 1``, reward ``next_obs + 10 * action``, and the worker's
local trajectory id ``i // 5``, which the collectors turn into ``(i // 5) * num_workers + w``
(unique across workers). CartPole checks the same bookkeeping on a real env. Every test leaves no
child process and no shared-memory block behind (``assert_clean``).
"""
import gc
import glob
import itertools
import multiprocessing as mp
import os
import signal
import time
import types
import warnings
from multiprocessing import shared_memory
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from test_collector import (
    COUNTER,
    ROOT_KEYS,
    STEP_RAISES,
    Counter,
    arr,
    check_bookkeeping,
    collect,
    constant_policy,
    keyset,
    leaves,
)

import rlpipe
from rlpipe import nn
from rlpipe.collectors import (
    MultiaSyncDataCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
    multi,
)
from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
from rlpipe.postprocs import MultiStep
from rlpipe.tensordict import TensorDictModule

HANGS = "rlpipe_test/MultiCollectorHangs-v0"
W = 2  # workers in most tests
COLLECTORS = [MultiSyncDataCollector, MultiaSyncDataCollector]


class Hangs(Counter):
    """A Counter whose step number 2 sleeps far longer than any test's collector timeout."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self):
        super().__init__(terminate_at=100)
        self.steps = 0

    def step(self, action):
        if self.steps == 2:
            time.sleep(60)
        self.steps += 1
        return super().step(action)


if HANGS not in gym.registry:
    gym.register(HANGS, entry_point=Hangs)


# ---- helpers -------------------------------------------------------------------------------------------

def shm_entries():
    return set(glob.glob("/dev/shm/psm_*"))


def block_names(collector):
    return [w.shm.name for w in collector._workers if w.shm is not None]


CREATED = []  # names of the shared blocks the collectors create during the current test


def shm_path(name):
    return f"/dev/shm/{name.lstrip('/')}"


def assert_clean(names=()):
    """No child process is left, and no shared block a collector created (this test) exists any more."""
    deadline = time.monotonic() + 10
    while mp.active_children() and time.monotonic() < deadline:  # (active_children() also reaps)
        time.sleep(0.01)
    assert mp.active_children() == []
    for name in list(names) + CREATED:
        assert not os.path.exists(shm_path(name)), name


@pytest.fixture(autouse=True)
def no_children_or_blocks_left(monkeypatch):
    """Records every block ``multi`` creates (a spy on its ``shared_memory`` module) and checks, after
    the test, that no child process and none of those blocks is left."""
    real = shared_memory.SharedMemory

    class Spy(real):
        def __init__(self, name=None, create=False, size=0, **kwargs):
            super().__init__(name=name, create=create, size=size, **kwargs)
            if create:
                CREATED.append(self.name)

    CREATED.clear()
    monkeypatch.setattr(multi, "shared_memory", types.SimpleNamespace(SharedMemory=Spy))
    assert mp.active_children() == []
    yield
    assert_clean()


def counter_envs(n=W, **kwargs):
    return [lambda: GymEnv(COUNTER, **kwargs) for _ in range(n)]


def worker_of(batch, num_workers=W):
    """The worker that collected a MultiaSync batch, read from its trajectory ids (id % num_workers)."""
    ids = arr(batch["collector", "traj_ids"])
    workers = np.unique(ids % num_workers)
    assert len(workers) == 1, ids
    return int(workers[0])


def by_worker(batches, num_workers=W):
    out = {w: [] for w in range(num_workers)}
    for b in batches:
        out[worker_of(b, num_workers)].append(b)
    return out


def expected_counter(start, length, worker, num_workers=W, period=5):
    """(obs, traj ids) of frames ``start .. start + length - 1`` of a Counter worker's stream."""
    i = np.arange(start, start + length)
    return (i % period).astype(np.float32), (i // period) * num_workers + worker


def check_counter_row(obs, nxt, reward, action, ids, start, worker, num_workers=W, period=5):
    """One worker's frames ``start ..`` (1-D arrays over time) against the Counter stream."""
    exp_obs, exp_ids = expected_counter(start, len(obs), worker, num_workers, period)
    np.testing.assert_array_equal(obs, exp_obs)
    np.testing.assert_array_equal(nxt, exp_obs + 1)
    np.testing.assert_array_equal(reward, exp_obs + 1 + 10 * action)
    np.testing.assert_array_equal(ids, exp_ids)


def check_counter_sync_batch(b, k, action=None, period=5):
    """The k-th MultiSync batch ([W, T]) of Counter workers: row w is worker w's frames k*T .. (k+1)*T - 1."""
    num_workers, T = tuple(b.batch_size)
    act = arr(b["action"]).argmax(-1)
    if action is not None:
        np.testing.assert_array_equal(act, np.full((num_workers, T), action))
    for w in range(num_workers):
        check_counter_row(arr(b["observation"])[w, :, 0], arr(b["next", "observation"])[w, :, 0],
                          arr(b["next", "reward"])[w, :, 0], act[w], arr(b["collector", "traj_ids"])[w],
                          k * T, w, num_workers, period)


def check_counter_async_batches(batches, num_workers=W, action=None):
    """MultiaSync batches of Counter workers: each worker's batches, in order, continue its stream."""
    for w, mine in by_worker(batches, num_workers).items():
        start = 0
        for b in mine:
            T = b.numel()
            act = arr(b["action"]).argmax(-1)
            if action is not None:
                np.testing.assert_array_equal(act, np.full(T, action))
            check_counter_row(arr(b["observation"])[:, 0], arr(b["next", "observation"])[:, 0],
                              arr(b["next", "reward"])[:, 0], act, arr(b["collector", "traj_ids"]), start, w,
                              num_workers)
            start += T


def collect_until_each_worker_has(it, k, num_workers=W, limit=1000):
    """MultiaSync batches from ``it`` until every worker has delivered ``k`` of them (at most ``limit``)."""
    out, counts = [], [0] * num_workers
    while min(counts) < k:
        assert len(out) < limit, counts
        out.append(next(it))
        counts[worker_of(out[-1], num_workers)] += 1
    return out


def rows(b):
    """A batch with leading dims flattened into rows ([R, T, ...]) as plain arrays, for check_bookkeeping."""
    T = b.batch_size[-1]

    def flat(key):
        a = arr(b.get(key))
        return a.reshape((-1, T) + a.shape[len(b.batch_size):])

    return {"observation": flat("observation"), ("next", "observation"): flat(("next", "observation")),
            ("next", "done"): flat(("next", "done")), ("collector", "traj_ids"): flat(("collector", "traj_ids"))}


class Greedy(nn.Module):
    """A deterministic policy: the one-hot argmax of a Linear(1, 2) of the observation."""

    def __init__(self, action=0):
        super().__init__()
        self.linear = nn.Linear(1, 2)
        set_action(self, action)

    def forward(self, observation):
        return nn.functional.one_hot(self.linear(observation).argmax(-1), 2)


def set_action(module, action):
    """Weights and bias by hand: logits [t + 1, 0] (action 0) or [0, t + 1] (action 1) for obs t >= 0."""
    weight = [[1.0], [0.0]] if action == 0 else [[0.0], [1.0]]
    bias = [1.0, 0.0] if action == 0 else [0.0, 1.0]
    with rlpipe.no_grad():
        module.linear.weight.copy_(rlpipe.tensor(weight))
        module.linear.bias.copy_(rlpipe.tensor(bias))


# ---- construction: create_env_fn forms ---------------------------------------------------------------

@pytest.mark.parametrize("cls", COLLECTORS)
def test_list_of_functions_and_single_function_give_the_same_data(cls):
    fpb = 10 if cls is MultiSyncDataCollector else 5
    for kwargs in ({"create_env_fn": counter_envs()},
                   {"create_env_fn": lambda: GymEnv(COUNTER), "num_workers": W},
                   {"create_env_fn": counter_envs(), "num_workers": W}):
        with cls(policy=constant_policy(1), frames_per_batch=fpb, total_frames=4 * fpb, **kwargs) as c:
            assert c.num_workers == W
            assert len(c._workers) == W
            batches = collect(c)
        assert len(batches) == 4
        if cls is MultiSyncDataCollector:
            for k, b in enumerate(batches):
                assert tuple(b.batch_size) == (W, fpb // W)
                check_counter_sync_batch(b, k, action=1)
        else:
            for b in batches:
                assert tuple(b.batch_size) == (fpb,)
            check_counter_async_batches(batches, action=1)
            assert all(len(v) >= 1 for v in by_worker(batches).values())  # both started one at once


@pytest.mark.parametrize("cls", COLLECTORS)
def test_each_worker_builds_its_own_env_from_the_list(cls):
    """Worker 0 gets a Counter ending at 5, worker 1 one ending at 3: worker w runs create_env_fn[w]."""
    fns = [lambda: GymEnv(COUNTER), lambda: GymEnv(COUNTER, terminate_at=3)]
    fpb = 16 if cls is MultiSyncDataCollector else 8
    with cls(fns, constant_policy(0), frames_per_batch=fpb, total_frames=2 * fpb) as c:
        batches = collect(c)
    if cls is MultiSyncDataCollector:
        for k, b in enumerate(batches):
            for w, period in ((0, 5), (1, 3)):
                obs, ids = expected_counter(k * 8, 8, w, period=period)
                np.testing.assert_array_equal(arr(b["observation"])[w, :, 0], obs)
                np.testing.assert_array_equal(arr(b["collector", "traj_ids"])[w], ids)
    else:
        for w, period in ((0, 5), (1, 3)):
            mine = by_worker(batches)[w]
            assert len(mine) == 1
            obs, ids = expected_counter(0, 8, w, period=period)
            np.testing.assert_array_equal(arr(mine[0]["observation"])[:, 0], obs)
            np.testing.assert_array_equal(arr(mine[0]["collector", "traj_ids"]), ids)


def test_three_workers_from_one_function():
    with MultiSyncDataCollector(lambda: GymEnv(COUNTER), constant_policy(1), num_workers=3, frames_per_batch=21,
                                total_frames=42) as c:
        batches = collect(c)
    assert [tuple(b.batch_size) for b in batches] == [(3, 7), (3, 7)]
    for k, b in enumerate(batches):
        check_counter_sync_batch(b, k, action=1)
    ids = np.concatenate([arr(b["collector", "traj_ids"]).reshape(-1) for b in batches])
    for w in range(3):
        assert set(ids[ids % 3 == w]) == set(expected_counter(0, 14, w, num_workers=3)[1])


# ---- MultiSync: batch shape and frame accounting -------------------------------------------------------

def test_multisync_batch_shape_keys_and_dtypes():
    with MultiSyncDataCollector(counter_envs(), None, frames_per_batch=20, total_frames=40) as c:
        batches = collect(c)
    assert len(batches) == 2
    for b in batches:
        assert tuple(b.batch_size) == (W, 10)
        assert b.names == [None, "time"] and b["next"].names == [None, "time"]  # torchrl 0.14.1's names
        assert keyset(b) == ROOT_KEYS
        assert tuple(b["observation"].shape) == (W, 10, 1) and b["observation"].dtype is rlpipe.float32
        assert tuple(b["action"].shape) == (W, 10, 2)
        assert tuple(b["next", "reward"].shape) == (W, 10, 1) and b["next", "reward"].dtype is rlpipe.float32
        for key in ("done", "terminated", "truncated"):
            assert tuple(b[key].shape) == (W, 10, 1) and b[key].dtype is rlpipe.bool
            assert tuple(b["next", key].shape) == (W, 10, 1) and b["next", key].dtype is rlpipe.bool
        assert tuple(b["collector", "traj_ids"].shape) == (W, 10)
        assert b["collector", "traj_ids"].dtype is rlpipe.int64


def test_multisync_counter_exact_values_across_batches():
    with MultiSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=14, total_frames=42) as c:
        batches = collect(c)
    assert len(batches) == 3
    for k, b in enumerate(batches):
        check_counter_sync_batch(b, k, action=1)
        T = 7
        i = np.arange(k * T, (k + 1) * T)
        for w in range(W):
            np.testing.assert_array_equal(arr(b["next", "terminated"])[w, :, 0], i % 5 == 4)
            np.testing.assert_array_equal(arr(b["next", "done"])[w, :, 0], i % 5 == 4)
        assert not arr(b["next", "truncated"]).any()
    # by hand, the first batch: obs 0 1 2 3 4 0 1, worker 0's ids 0 0 0 0 0 2 2, worker 1's 1 1 1 1 1 3 3
    np.testing.assert_array_equal(arr(batches[0]["collector", "traj_ids"]),
                                  [[0, 0, 0, 0, 0, 2, 2], [1, 1, 1, 1, 1, 3, 3]])
    np.testing.assert_array_equal(arr(batches[1]["observation"])[:, :, 0], [[2, 3, 4, 0, 1, 2, 3]] * 2)
    np.testing.assert_array_equal(arr(batches[1]["collector", "traj_ids"]),
                                  [[2, 2, 2, 4, 4, 4, 4], [3, 3, 3, 5, 5, 5, 5]])
    check_bookkeeping([rows(b) for b in batches])


def test_multisync_vectorized_workers_batch_is_workers_envs_time():
    """Workers running GymEnv(..., num_envs=2): batches [W, 2, T]; each worker's envs get local ids
    0, 1 then 2, 3 (both end together), i.e. global ids local * W + w."""
    with MultiSyncDataCollector([lambda: GymEnv(COUNTER, num_envs=2)] * W, constant_policy(0), frames_per_batch=28,
                                total_frames=56) as c:
        batches = collect(c)
    assert len(batches) == 2
    for k, b in enumerate(batches):
        assert tuple(b.batch_size) == (W, 2, 7) and b.names == [None, None, "time"]
        assert b.numel() == 28
        assert tuple(b["observation"].shape) == (W, 2, 7, 1)
        assert tuple(b["action"].shape) == (W, 2, 7, 2)
        i = np.arange(k * 7, (k + 1) * 7)
        for w in range(W):
            for e in range(2):
                np.testing.assert_array_equal(arr(b["observation"])[w, e, :, 0], i % 5)
                np.testing.assert_array_equal(arr(b["next", "observation"])[w, e, :, 0], i % 5 + 1)
                np.testing.assert_array_equal(arr(b["next", "reward"])[w, e, :, 0], i % 5 + 1)
                np.testing.assert_array_equal(arr(b["collector", "traj_ids"])[w, e], ((i // 5) * 2 + e) * W + w)
    check_bookkeeping([rows(b) for b in batches])


def test_multisync_total_frames_exact_when_divisible():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = MultiSyncDataCollector(counter_envs(), None, frames_per_batch=20, total_frames=100)
        assert len(c) == 5
        batches = collect(c)
        c.shutdown()
    assert len(batches) == 5
    assert [b.numel() for b in batches] == [20] * 5
    assert sum(b.numel() for b in batches) == 100


def test_multisync_frames_per_batch_not_divisible_by_workers_rounds_up_with_warning():
    with pytest.warns(UserWarning, match=r"frames_per_batch 15 is not exactly divisible by the number of collector "
                                         r"workers 2"):
        c = MultiSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=15, total_frames=30)
    batches = collect(c)
    c.shutdown()
    # 8 frames per worker: 16 per batch, 2 batches reach 30 (32 frames)
    assert [tuple(b.batch_size) for b in batches] == [(W, 8), (W, 8)]
    assert sum(b.numel() for b in batches) == 32
    for k, b in enumerate(batches):
        check_counter_sync_batch(b, k, action=1)


def test_multisync_len_is_the_number_of_batches_when_workers_round_up():
    """15 frames per batch on 2 workers makes 16-frame batches: 240 frames take 15 batches, and len()
    must say how many batches the loop yields."""
    with pytest.warns(UserWarning, match="not exactly divisible"):
        c = MultiSyncDataCollector(counter_envs(), None, frames_per_batch=15, total_frames=240)
    with c:
        batches = collect(c)
        assert sum(b.numel() for b in batches) == 240
        assert len(batches) == 15
        assert len(c) == len(batches)


def test_multisync_total_frames_not_divisible_rounds_up_with_warning():
    with pytest.warns(UserWarning, match=r"total_frames \(50\) is not exactly divisible by frames_per_batch \(20\)"):
        c = MultiSyncDataCollector(counter_envs(), None, frames_per_batch=20, total_frames=50)
    with c:
        assert c.total_frames == 60
        assert len(c) == 3
        batches = collect(c)
    assert [b.numel() for b in batches] == [20, 20, 20]


@pytest.mark.parametrize("cls", COLLECTORS)
def test_len(cls):
    for fpb, total, n in ((10, 10, 1), (10, 100, 10), (20, 60, 3)):
        with cls(counter_envs(), None, frames_per_batch=fpb, total_frames=total) as c:
            assert len(c) == n
            assert len(collect(c)) == n
    with cls(counter_envs(), None, frames_per_batch=10, total_frames=-1) as c, \
            pytest.raises(RuntimeError, match="no length"):
        len(c)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_total_frames_minus_one_runs_until_break(cls):
    with cls(counter_envs(), constant_policy(1), frames_per_batch=6, total_frames=-1) as c:
        batches = collect(c, n=9)
    assert len(batches) == 9
    assert all(b.numel() == 6 for b in batches)
    if cls is MultiSyncDataCollector:
        for k, b in enumerate(batches):
            check_counter_sync_batch(b, k, action=1)
    else:
        check_counter_async_batches(batches, action=1)


# ---- MultiaSync: batch shape and frame accounting ------------------------------------------------------

def test_multiasync_batches_and_total_frames():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = MultiaSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=7, total_frames=70)
    with c:
        assert len(c) == 10
        batches = collect(c)
    assert len(batches) == 70 // 7
    for b in batches:
        assert tuple(b.batch_size) == (7,) and b.names == ["time"]
        assert keyset(b) == ROOT_KEYS
        assert tuple(b["observation"].shape) == (7, 1)
    assert sum(b.numel() for b in batches) == 70
    per_worker = by_worker(batches)
    assert sum(len(v) for v in per_worker.values()) == 10
    assert all(len(v) >= 1 for v in per_worker.values())
    check_counter_async_batches(batches, action=1)
    for mine in per_worker.values():
        check_bookkeeping(mine)


@pytest.mark.parametrize("fpb,total", [(10, 10), (10, 30), (10, 110), (25, 200)])
def test_multiasync_frame_sum_is_exact(fpb, total):
    with MultiaSyncDataCollector(counter_envs(), None, frames_per_batch=fpb, total_frames=total) as c:
        batches = collect(c)
    assert len(batches) == total // fpb
    assert all(b.numel() == fpb for b in batches)
    assert sum(b.numel() for b in batches) == total


def test_multiasync_total_frames_not_divisible_rounds_up_with_warning():
    with pytest.warns(UserWarning, match=r"total_frames \(25\) is not exactly divisible by frames_per_batch \(10\)"):
        c = MultiaSyncDataCollector(counter_envs(), None, frames_per_batch=10, total_frames=25)
    with c:
        assert len(c) == 3
        batches = collect(c)
    assert [b.numel() for b in batches] == [10, 10, 10]


def test_multiasync_vectorized_workers():
    with MultiaSyncDataCollector([lambda: GymEnv(COUNTER, num_envs=2)] * W, constant_policy(0), frames_per_batch=14,
                                 total_frames=56) as c:
        batches = collect(c)
    assert len(batches) == 4
    for b in batches:
        assert tuple(b.batch_size) == (2, 7)
    for w, mine in by_worker(batches).items():
        for k, b in enumerate(mine):
            i = np.arange(k * 7, (k + 1) * 7)
            for e in range(2):
                np.testing.assert_array_equal(arr(b["observation"])[e, :, 0], i % 5)
                np.testing.assert_array_equal(arr(b["collector", "traj_ids"])[e], ((i // 5) * 2 + e) * W + w)
        check_bookkeeping(mine)


# ---- real transitions on CartPole ------------------------------------------------------------------------

def test_multisync_cartpole_transitions_across_batches():
    rlpipe.manual_seed(0)
    with MultiSyncDataCollector([lambda: GymEnv("CartPole-v1")] * W, None, frames_per_batch=64,
                                total_frames=320) as c:
        c.set_seed(11)
        batches = collect(c)
    assert len(batches) == 5
    assert sum(b.numel() for b in batches) == 320
    assert sum(int(arr(b["next", "done"]).sum()) for b in batches) >= 2  # episodes end inside the test
    check_bookkeeping([rows(b) for b in batches])
    for b in batches:
        ids = arr(b["collector", "traj_ids"])
        for w in range(W):
            assert (ids[w] % W == w).all()
    for a, b in itertools.pairwise(batches):  # the batch boundary itself, per worker
        for w in range(W):
            if not arr(a["next", "done"])[w, -1, 0]:
                np.testing.assert_array_equal(arr(a["next", "observation"])[w, -1], arr(b["observation"])[w, 0])
                assert arr(a["collector", "traj_ids"])[w, -1] == arr(b["collector", "traj_ids"])[w, 0]


def test_multisync_vectorized_cartpole_transitions():
    with MultiSyncDataCollector([lambda: GymEnv("CartPole-v1", num_envs=3)] * W, None, frames_per_batch=96,
                                total_frames=384) as c:
        c.set_seed(5)
        batches = collect(c)
    assert len(batches) == 4
    for b in batches:
        assert tuple(b.batch_size) == (W, 3, 16)
    check_bookkeeping([rows(b) for b in batches])
    for b in batches:
        ids = arr(b["collector", "traj_ids"])
        for w in range(W):
            assert (ids[w] % W == w).all()


def test_multiasync_cartpole_transitions_across_batches():
    with MultiaSyncDataCollector([lambda: GymEnv("CartPole-v1")] * W, None, frames_per_batch=32,
                                 total_frames=320) as c:
        c.set_seed(3)
        batches = collect(c)
    assert len(batches) == 10
    assert sum(int(arr(b["next", "done"]).sum()) for b in batches) >= 2
    groups = by_worker(batches)
    for mine in groups.values():
        assert mine
        check_bookkeeping(mine)
    all_ids = [set(arr(b["collector", "traj_ids"]).tolist()) for b in batches]
    w0 = set().union(*(s for s, b in zip(all_ids, batches) if worker_of(b) == 0))
    w1 = set().union(*(s for s, b in zip(all_ids, batches) if worker_of(b) == 1))
    assert not w0 & w1


def test_batches_do_not_alias_the_shared_block():
    """Later batches come through the shared block: each yielded batch must be its own copy."""
    for cls in COLLECTORS:
        with cls(counter_envs(), None, frames_per_batch=10, total_frames=60) as c:
            it = iter(c)
            first, second = next(it), next(it)
            saved = [leaves(first), leaves(second)]
            rest = list(it)
            assert block_names(c)  # the later batches did use the blocks
        assert len(rest) == 4
        for batch, before in zip((first, second), saved):
            for key, value in leaves(batch).items():
                np.testing.assert_array_equal(value, before[key], err_msg=str(key))


# ---- SyncDataCollector options in the workers ------------------------------------------------------------

def test_multisync_split_trajs():
    """Each worker's 7 frames are trajectories of 5 and 2 frames: split gives 4 rows padded to 5."""
    with MultiSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=14, total_frames=14,
                                split_trajs=True) as c:
        (b,) = collect(c)
    assert tuple(b.batch_size) == (4, 5) and b.names == [None, "time"]
    ids = arr(b["collector", "traj_ids"])
    mask = arr(b["collector", "mask"])
    order = np.argsort([ids[r][mask[r]][0] for r in range(4)])
    expected = {0: ([0, 1, 2, 3, 4], 5), 1: ([0, 1, 2, 3, 4], 5), 2: ([0, 1], 2), 3: ([0, 1], 2)}
    for r, traj in zip(order, range(4)):
        obs, length = expected[traj]
        np.testing.assert_array_equal(mask[r], np.arange(5) < length)
        np.testing.assert_array_equal(ids[r][mask[r]], [traj] * length)
        np.testing.assert_array_equal(arr(b["observation"])[r, :length, 0], obs)
        np.testing.assert_array_equal(arr(b["next", "reward"])[r, :length, 0], np.array(obs) + 11)
        assert not arr(b["observation"])[r, length:].any()  # padding is zeros


def test_multiasync_split_trajs():
    with MultiaSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=7, total_frames=14,
                                 split_trajs=True) as c:
        batches = collect(c)
    assert len(batches) == 2
    for b in batches:  # one first batch per worker: trajectories of 5 and 2 frames
        assert tuple(b.batch_size) == (2, 5) and b.names == [None, "time"]
        np.testing.assert_array_equal(arr(b["collector", "mask"]).sum(-1), [5, 2])
        np.testing.assert_array_equal(arr(b["observation"])[..., 0], [[0, 1, 2, 3, 4], [0, 1, 0, 0, 0]])
    firsts = sorted(int(arr(b["collector", "traj_ids"])[0, 0]) for b in batches)
    assert firsts == [0, 1]


@pytest.mark.parametrize("cls", COLLECTORS)
def test_multistep_postproc(cls):
    fpb = 14 if cls is MultiSyncDataCollector else 7
    with cls(counter_envs(), constant_policy(1), frames_per_batch=fpb, total_frames=fpb,
             postproc=MultiStep(0.99, 4)) as c:
        (b,) = collect(c)
    rows_ = [b] if cls is MultiaSyncDataCollector else [b[w] for w in range(W)]
    r = [11, 12, 13, 14, 15]
    for row in rows_:
        assert tuple(row.batch_size) == (7,)
        for key in ("gamma", "nonterminal", "steps_to_next_obs", ("next", "original_reward")):
            assert key in row.keys(True, True), key
        # episode 0..4 (done after obs 4), then 0, 1: windows stop after the done and at the batch end
        np.testing.assert_array_equal(arr(row["steps_to_next_obs"]).reshape(-1), [4, 4, 3, 2, 1, 2, 1])
        np.testing.assert_array_equal(arr(row["next", "observation"])[:, 0], [4, 5, 5, 5, 5, 2, 2])
        np.testing.assert_array_equal(arr(row["next", "original_reward"])[:, 0], [11, 12, 13, 14, 15, 11, 12])
        np.testing.assert_allclose(arr(row["next", "reward"])[0, 0], sum(0.99 ** k * r[k] for k in range(4)),
                                   rtol=1e-6)
        np.testing.assert_allclose(arr(row["next", "reward"])[4, 0], 15, rtol=1e-6)
        np.testing.assert_allclose(arr(row["next", "reward"])[5, 0], 11 + 0.99 * 12, rtol=1e-6)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_max_frames_per_traj(cls):
    fpb = 16 if cls is MultiSyncDataCollector else 8
    with cls(counter_envs(), constant_policy(1), frames_per_batch=fpb, total_frames=4 * fpb,
             max_frames_per_traj=3) as c:
        batches = collect(c)
    assert len(batches) == 4
    streams = ([[b[w] for b in batches] for w in range(W)] if cls is MultiSyncDataCollector
               else list(by_worker(batches).values()))
    for stream in streams:
        assert stream
        n = 8 * len(stream)
        obs = np.concatenate([arr(b["observation"])[:, 0] for b in stream])
        np.testing.assert_array_equal(obs, np.arange(n) % 3)
        truncated = np.concatenate([arr(b["next", "truncated"])[:, 0] for b in stream])
        np.testing.assert_array_equal(truncated, np.arange(n) % 3 == 2)
        np.testing.assert_array_equal(np.concatenate([arr(b["step_count"])[:, 0] for b in stream]),
                                      np.arange(n) % 3)
        np.testing.assert_array_equal(np.concatenate([arr(b["next", "step_count"])[:, 0] for b in stream]),
                                      np.arange(n) % 3 + 1)
        ids = np.concatenate([arr(b["collector", "traj_ids"]) for b in stream])
        worker = int(ids[0] % W)
        np.testing.assert_array_equal(ids, (np.arange(n) // 3) * W + worker)
        assert not any(arr(b["next", "terminated"]).any() for b in stream)
        check_bookkeeping(stream)


def test_multisync_init_random_frames():
    """Batches are random while the frames collected before them are below init_random_frames."""
    rlpipe.manual_seed(0)
    with MultiSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=40, total_frames=160,
                                init_random_frames=50) as c:
        batches = collect(c)
    assert len(batches) == 4
    for k, b in enumerate(batches):
        action = arr(b["action"])
        assert (action.sum(-1) == 1).all()
        np.testing.assert_array_equal(arr(b["next", "reward"])[..., 0],
                                      arr(b["next", "observation"])[..., 0] + 10 * action.argmax(-1))
        if k < 2:  # frames before: 0, 40 < 50
            for w in range(W):  # uniform draws: both actions in 20 frames of every worker
                assert 0 < action[w, :, 1].sum() < 20, (k, w)
        else:
            assert (action.argmax(-1) == 1).all(), k


def test_multiasync_init_random_frames():
    """Each worker's first batch is requested with 0 frames collected (< 20): random; later ones not."""
    rlpipe.manual_seed(0)
    with MultiaSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=20, total_frames=120,
                                 init_random_frames=20) as c:
        batches = collect(c)
    assert len(batches) == 6
    for w, mine in by_worker(batches).items():
        first = arr(mine[0]["action"]).argmax(-1)
        assert 0 < first.sum() < 20, w
        for b in mine[1:]:
            assert (arr(b["action"]).argmax(-1) == 1).all(), w


@pytest.mark.parametrize("cls", COLLECTORS)
def test_reset_at_each_iter(cls):
    fpb = 6 if cls is MultiSyncDataCollector else 3
    with cls(counter_envs(), constant_policy(0), frames_per_batch=fpb, total_frames=4 * fpb,
             reset_at_each_iter=True) as c:
        batches = collect(c)
    assert len(batches) == 4
    streams = ([[b[w] for b in batches] for w in range(W)] if cls is MultiSyncDataCollector
               else list(by_worker(batches).values()))
    for stream in streams:
        for k, b in enumerate(stream):
            np.testing.assert_array_equal(arr(b["observation"])[:, 0], [0, 1, 2])
            np.testing.assert_array_equal(arr(b["next", "observation"])[:, 0], [1, 2, 3])
            ids = arr(b["collector", "traj_ids"])
            assert len(np.unique(ids)) == 1
            assert ids[0] == k * W + ids[0] % W  # a fresh trajectory (local id k) each batch


@pytest.mark.parametrize("cls", COLLECTORS)
def test_storing_device_cpu(cls):
    with cls(counter_envs(), None, frames_per_batch=10, total_frames=20, storing_device="cpu") as c:
        for b in collect(c):
            assert b.device is not None and str(b.device) == "cpu"
            for key in b.keys(True, True):
                assert str(b.get(key).device) == "cpu"


# ---- seeds ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", COLLECTORS)
def test_set_seed_chains_seeds_and_returns_the_last(cls):
    with cls([lambda: GymEnv("CartPole-v1")] * W, None, frames_per_batch=10, total_frames=20) as c:
        assert c.set_seed(42) == 44  # worker 0: 42 -> 43, worker 1: 43 -> 44
    with cls([lambda: GymEnv("CartPole-v1", num_envs=3)] * 3, None, frames_per_batch=18, total_frames=18) as c:
        assert c.set_seed(7) == 16  # 7 -> 10 -> 13 -> 16


@pytest.mark.parametrize("cls", COLLECTORS)
def test_set_seed_reproducible(cls):
    fpb = 40 if cls is MultiSyncDataCollector else 20

    def run(construction_seed):
        rlpipe.manual_seed(construction_seed)  # the caller's generator must not matter after set_seed
        with cls([lambda: GymEnv("CartPole-v1")] * W, None, frames_per_batch=fpb, total_frames=3 * fpb) as c:
            c.set_seed(42)
            batches = collect(c)
        if cls is MultiaSyncDataCollector:  # arrival order between workers may differ: compare per worker
            return {w: [leaves(b) for b in mine] for w, mine in by_worker(batches).items()}
        return {0: [leaves(b) for b in batches]}

    a, b = run(0), run(1)
    for w in a:
        n = min(len(a[w]), len(b[w]))
        assert n >= 1
        for x, y in zip(a[w][:n], b[w][:n]):
            assert x.keys() == y.keys()
            for key in x:
                np.testing.assert_array_equal(x[key], y[key], err_msg=f"worker {w}, {key}")


def test_set_seed_worker_w_matches_a_single_collector_seeded_with_seed_plus_w():
    """Chained seeds: worker 0 gets 42, worker 1 gets 43; each equals a SyncDataCollector so seeded."""
    with MultiSyncDataCollector([lambda: GymEnv("CartPole-v1")] * W, None, frames_per_batch=40,
                                total_frames=80) as c:
        c.set_seed(42)
        batches = collect(c)
    for w in range(W):
        single = SyncDataCollector(GymEnv("CartPole-v1"), None, frames_per_batch=20, total_frames=40)
        single.set_seed(42 + w)
        expected = collect(single)
        single.shutdown()
        for b, e in zip(batches, expected):
            got, want = leaves(b[w]), leaves(e)
            assert got.keys() == want.keys()
            for key in want:
                if key == ("collector", "traj_ids"):
                    np.testing.assert_array_equal(got[key], want[key] * W + w)
                else:
                    np.testing.assert_array_equal(got[key], want[key], err_msg=f"worker {w}, {key}")
    # different seeds: the two workers' streams differ
    assert not np.array_equal(arr(batches[0]["observation"])[0], arr(batches[0]["observation"])[1])


def test_workers_draw_different_random_actions_without_set_seed():
    rlpipe.manual_seed(0)
    with MultiSyncDataCollector(counter_envs(), None, frames_per_batch=64, total_frames=64) as c:
        (b,) = collect(c)
    action = arr(b["action"])
    assert not np.array_equal(action[0], action[1])


# ---- policy weights ------------------------------------------------------------------------------------

@pytest.mark.parametrize("wrap", [False, True], ids=["module", "tensordict_module"])
def test_multisync_update_policy_weights(wrap):
    module = Greedy(action=0)
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action"]) if wrap else module
    with MultiSyncDataCollector(counter_envs(), policy, frames_per_batch=20, total_frames=-1) as c:
        it = iter(c)
        b0 = next(it)
        check_counter_sync_batch(b0, 0, action=0)
        set_action(module, 1)  # the main process's copy only
        b1 = next(it)
        check_counter_sync_batch(b1, 1, action=0)  # the workers keep their own copies
        c.update_policy_weights_()
        b2 = next(it)
        check_counter_sync_batch(b2, 2, action=1)  # every action changed (and the env saw it: rewards)
        # explicit weights: a state_dict back to action 0
        c.update_policy_weights_(Greedy(action=0).state_dict() if not wrap else
                                 TensorDictModule(Greedy(action=0), in_keys=["observation"],
                                                  out_keys=["action"]).state_dict())
        b3 = next(it)
        check_counter_sync_batch(b3, 3, action=0)
        c.update_policy_weights_(policy)  # a Module: its weights (action 1)
        check_counter_sync_batch(next(it), 4, action=1)
    check_bookkeeping([rows(b) for b in (b0, b1, b2, b3)])


def test_multisync_update_at_each_batch():
    module = Greedy(action=0)
    with MultiSyncDataCollector(counter_envs(), module, frames_per_batch=10, total_frames=-1,
                                update_at_each_batch=True) as c:
        it = iter(c)
        check_counter_sync_batch(next(it), 0, action=0)
        set_action(module, 1)
        check_counter_sync_batch(next(it), 1, action=1)


@pytest.mark.parametrize("wrap", [False, True], ids=["module", "tensordict_module"])
def test_multiasync_update_policy_weights(wrap):
    """A worker starts its next batch before the yield: the batch each worker has in flight when the
    weights are sent is still the old policy's; every later one is the new policy's."""
    module = Greedy(action=0)
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action"]) if wrap else module
    with MultiaSyncDataCollector(counter_envs(), policy, frames_per_batch=5, total_frames=-1) as c:
        before = collect(c, n=4)
        for b in before:
            assert (arr(b["action"]).argmax(-1) == 0).all()
        set_action(module, 1)
        without = collect(c, n=4)  # no update: the workers' copies are unchanged
        for b in without:
            assert (arr(b["action"]).argmax(-1) == 0).all()
        c.update_policy_weights_()
        after = collect_until_each_worker_has(iter(c), 2)
    per_worker = by_worker(after)
    for w, mine in per_worker.items():
        assert len(mine) >= 2, w
        assert (arr(mine[0]["action"]).argmax(-1) == 0).all()  # in flight during the update
        for b in mine[1:]:
            assert (arr(b["action"]).argmax(-1) == 1).all()
    check_counter_async_batches(before + without + after)


def test_multiasync_serves_workers_in_the_order_their_batches_were_asked_for():
    """While the caller trains (here: sleeps), every worker finishes its batch; the next batch must
    be the one asked for first (torchrl's queue order), not always the lowest worker's: worker 1
    must not starve behind a fast worker 0 (its data would grow stale, its death go unnoticed)."""
    with MultiaSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=5, total_frames=-1) as c:
        batches = []
        for b in c:
            batches.append(b)
            if len(batches) == 8:
                break
            time.sleep(0.03)  # "training": both workers have their batch ready before the next is taken
    order = [worker_of(b) for b in batches]
    assert order.count(0) >= 3 and order.count(1) >= 3, order  # (4 and 4, alternating, unless the machine stalls)
    check_counter_async_batches(batches, action=1)


@pytest.mark.parametrize("victim", [0, 1])
def test_multiasync_notices_a_dead_worker_while_another_is_always_ready(victim):
    """Whichever worker dies, and whatever order the pipes are polled in, its death is noticed
    though the other worker always has a batch ready."""
    c = MultiaSyncDataCollector(counter_envs(), None, frames_per_batch=5, total_frames=-1, timeout=20)
    it = iter(c)
    next(it)
    next(it)
    time.sleep(0.05)
    os.kill(c._workers[victim].process.pid, signal.SIGKILL)
    c._workers[victim].process.join(5)
    with pytest.raises(RuntimeError, match=f"worker {victim} died unexpectedly"):
        for _ in range(10):
            next(it)
            time.sleep(0.03)  # the other worker always has its next batch ready
    c.shutdown()
    assert_clean()


def test_non_module_policy_update_is_a_no_op():
    with MultiSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=10, total_frames=20) as c:
        assert c.update_policy_weights_() is None
        for k, b in enumerate(collect(c)):
            check_counter_sync_batch(b, k, action=1)


# ---- state_dict ------------------------------------------------------------------------------------------

def test_multisync_state_dict_round_trip_continues_frame_count():
    module = Greedy(action=1)
    first = MultiSyncDataCollector(counter_envs(), module, frames_per_batch=20, total_frames=100)
    seen = collect(first, n=2)
    state = first.state_dict()
    first.shutdown()
    assert state["frames"] == 40
    assert state["worker0"]["frames"] == state["worker1"]["frames"] == 20
    for k, b in enumerate(seen):
        check_counter_sync_batch(b, k, action=1)

    other = Greedy(action=0)
    with MultiSyncDataCollector(counter_envs(), other, frames_per_batch=20, total_frames=100) as second:
        second.load_state_dict(state)
        for p, q in zip(module.parameters(), other.parameters()):
            np.testing.assert_array_equal(arr(p), arr(q))
        rest = collect(second)
        resumed = second.state_dict()
    assert len(rest) == 3  # 40 of 100 frames were collected before: 60 remain
    assert resumed["frames"] == 100
    assert resumed["worker0"]["frames"] == resumed["worker1"]["frames"] == 50
    seen_ids = set(np.concatenate([arr(b["collector", "traj_ids"]).reshape(-1) for b in seen]).tolist())
    for b in rest:
        action = arr(b["action"]).argmax(-1)
        assert (action == 1).all()  # the loaded weights reached the workers
        ids = arr(b["collector", "traj_ids"])
        assert not seen_ids & set(ids.reshape(-1).tolist())  # trajectory ids are never reused
        for w in range(W):
            assert (ids[w] % W == w).all()
    # the new envs start fresh trajectories: local id 4 was open at frame 20, so the next is 5
    first_rest = rest[0]
    np.testing.assert_array_equal(arr(first_rest["observation"])[:, :, 0], [np.arange(10) % 5] * 2)
    np.testing.assert_array_equal(arr(first_rest["collector", "traj_ids"]),
                                  [(5 + np.arange(10) // 5) * W + w for w in range(W)])


def test_state_dict_of_a_finished_collector_yields_nothing():
    for cls in COLLECTORS:
        with cls(counter_envs(), None, frames_per_batch=10, total_frames=20) as first:
            assert len(collect(first)) == 2
            state = first.state_dict()
        with cls(counter_envs(), None, frames_per_batch=10, total_frames=20) as second:
            second.load_state_dict(state)
            assert collect(second) == []


def test_multiasync_state_dict_round_trip_continues_frame_count():
    with MultiaSyncDataCollector(counter_envs(), None, frames_per_batch=10, total_frames=100) as first:
        assert len(collect(first, n=3)) == 3
        state = first.state_dict()
    assert state["frames"] == 30
    with MultiaSyncDataCollector(counter_envs(), None, frames_per_batch=10, total_frames=100) as second:
        second.load_state_dict(state)
        rest = collect(second)
    assert len(rest) == 7
    assert sum(b.numel() for b in rest) == 70


def test_multiasync_iteration_goes_on_after_state_dict_inside_the_loop():
    """Checkpointing inside the loop (``state_dict()`` between two batches) must not end the loop."""
    with MultiaSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=5, total_frames=40) as c:
        batches = []
        for i, b in enumerate(c):
            batches.append(b)
            if i == 1:
                state = c.state_dict()
                assert state["frames"] == 10
    assert sum(b.numel() for b in batches) == 40
    assert len(batches) == 8


def test_multiasync_state_dict_inside_the_loop_loses_no_frames():
    """The batches the workers had in flight at ``state_dict()`` are part of their streams: dropping
    them would make a worker's next batch jump ahead inside one trajectory id."""
    with MultiaSyncDataCollector(counter_envs(), constant_policy(1), frames_per_batch=5, total_frames=-1) as c:
        it = iter(c)
        batches = [next(it), next(it)]
        c.state_dict()
        for _ in range(6):
            batches.append(next(it))
    check_counter_async_batches(batches, action=1)
    for mine in by_worker(batches).values():
        check_bookkeeping(mine)


# ---- control ---------------------------------------------------------------------------------------------

def test_multisync_reset_starts_new_trajectories():
    with MultiSyncDataCollector(counter_envs(), constant_policy(0), frames_per_batch=6, total_frames=-1) as c:
        it = iter(c)
        b0 = next(it)
        np.testing.assert_array_equal(arr(b0["observation"])[:, :, 0], [[0, 1, 2]] * 2)
        c.reset()
        b1 = next(it)
        np.testing.assert_array_equal(arr(b1["observation"])[:, :, 0], [[0, 1, 2]] * 2)
        np.testing.assert_array_equal(arr(b1["collector", "traj_ids"]), [[2, 2, 2], [3, 3, 3]])  # local id 1
        b2 = next(it)
        np.testing.assert_array_equal(arr(b2["observation"])[:, :, 0], [[3, 4, 0]] * 2)
        c.reset(1)  # only worker 1
        b3 = next(it)
        np.testing.assert_array_equal(arr(b3["observation"])[:, :, 0], [[1, 2, 3], [0, 1, 2]])


def test_multiasync_reset_inside_the_loop():
    """After reset() each worker's next batch starts a fresh trajectory, and the loop goes on."""
    with MultiaSyncDataCollector(counter_envs(), constant_policy(0), frames_per_batch=3, total_frames=-1) as c:
        it = iter(c)
        first = [next(it), next(it)]
        check_counter_async_batches(first, action=0)
        c.reset()
        after = collect_until_each_worker_has(it, 2)
    old = set(np.concatenate([arr(b["collector", "traj_ids"]) for b in first]).tolist())
    for mine in by_worker(after).values():
        np.testing.assert_array_equal(arr(mine[0]["observation"])[:, 0], [0, 1, 2])
        assert int(arr(mine[0]["collector", "traj_ids"])[0]) not in old
        check_bookkeeping(mine)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_context_manager_leaves_no_children(cls):
    with cls(counter_envs(), None, frames_per_batch=10, total_frames=40) as c:
        assert len(mp.active_children()) == W
        assert len(collect(c)) == 4
        names = block_names(c)
        assert len(names) == W
    assert_clean(names=names)
    with pytest.raises(RuntimeError, match="shut down"):
        next(iter(c))
    with pytest.raises(RuntimeError, match="shut down"):
        c.update_policy_weights_(Greedy().state_dict())
    assert c.shutdown() is None  # twice is fine


@pytest.mark.parametrize("cls", COLLECTORS)
def test_break_then_shutdown(cls):
    c = cls(counter_envs(), None, frames_per_batch=10, total_frames=-1)
    assert len(collect(c, n=3)) == 3
    names = block_names(c)
    assert c.shutdown() is None
    assert_clean(names=names)
    with pytest.raises(RuntimeError, match="shut down"):
        for _ in c:
            pass


def test_garbage_collected_collector_releases_its_workers():
    c = MultiaSyncDataCollector(counter_envs(), None, frames_per_batch=10, total_frames=-1)
    collect(c, n=3)
    names = block_names(c)
    del c
    gc.collect()
    assert_clean(names=names)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_no_shared_memory_left_after_shutdown(cls):
    before = shm_entries()
    with cls([lambda: GymEnv("CartPole-v1")] * W, None, frames_per_batch=32, total_frames=128) as c:
        collect(c)
        names = {shm_path(n) for n in block_names(c)}
        assert len(names) == W
        assert names == {shm_path(n) for n in CREATED}  # one block per worker, no other
        assert names <= shm_entries() - before  # while it runs, the blocks exist
    leftover = shm_entries() - before  # (other processes on this machine may create blocks too)
    assert not leftover & names, leftover


def test_repr():
    with MultiSyncDataCollector(counter_envs(), None, frames_per_batch=10, total_frames=20) as c:
        assert repr(c) == "MultiSyncDataCollector(num_workers=2, frames_per_batch=10, total_frames=20)"


# ---- faults ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", COLLECTORS)
def test_env_step_raises_in_worker_1(cls):
    c = cls([lambda: GymEnv(COUNTER), lambda: GymEnv(STEP_RAISES)], None, frames_per_batch=20, total_frames=200,
            timeout=30)
    with pytest.raises(RuntimeError, match="worker 1") as info:
        collect(c)
    message = str(info.value)
    assert "simulator crashed at step 3" in message
    assert "worker 0" not in message
    with pytest.raises(RuntimeError, match="unusable after an earlier failure"):
        next(iter(c))
    assert c.shutdown() is None
    assert c.shutdown() is None
    assert_clean()


def test_env_step_raises_after_the_shared_block_is_in_use():
    """One frame per worker per batch: worker 1's fourth step call (its fourth batch, the third one
    through the shared block) raises."""
    c = MultiSyncDataCollector([lambda: GymEnv(COUNTER), lambda: GymEnv(STEP_RAISES)], None, frames_per_batch=2,
                               total_frames=-1, timeout=30)
    it = iter(c)
    for k in range(3):
        np.testing.assert_array_equal(arr(next(it)["observation"])[:, 0, 0], [k, k])
    assert len(block_names(c)) == W
    with pytest.raises(RuntimeError, match=r"worker 1 failed.*simulator crashed at step 3"):
        next(it)
    names = block_names(c)
    c.shutdown()
    assert_clean(names=names)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_env_constructor_raises(cls):
    def broken():
        raise ValueError("no simulator licence")

    with pytest.raises(RuntimeError, match="worker 1") as info:
        cls([lambda: GymEnv(COUNTER), broken], None, frames_per_batch=10, total_frames=20, timeout=30)
    assert "no simulator licence" in str(info.value)
    assert "ValueError" in str(info.value)
    assert_clean()


@pytest.mark.parametrize("cls", COLLECTORS)
def test_create_env_fn_returning_something_else(cls):
    with pytest.raises(RuntimeError, match=r"worker 0.*create_env_fn"):
        cls([lambda: gym.make("CartPole-v1"), lambda: GymEnv(COUNTER)], None, frames_per_batch=10, total_frames=20,
            timeout=30)
    assert_clean()


def test_multisync_worker_killed_between_batches():
    c = MultiSyncDataCollector(counter_envs(), None, frames_per_batch=10, total_frames=-1, timeout=20)
    it = iter(c)
    next(it)
    pid = c._workers[1].process.pid
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"worker 1 died unexpectedly") as info:
        next(it)
    assert "exit code -9" in str(info.value)
    with pytest.raises(RuntimeError, match="unusable"):
        next(iter(c))
    names = block_names(c)
    assert c.shutdown() is None
    assert_clean(names=names)


@pytest.mark.parametrize("cls", COLLECTORS)
@pytest.mark.parametrize("victim", [0, 1])
def test_worker_killed_while_iterating(cls, victim):
    c = cls(counter_envs(), None, frames_per_batch=10, total_frames=-1, timeout=20)
    it = iter(c)
    next(it)
    next(it)
    os.kill(c._workers[victim].process.pid, signal.SIGKILL)
    c._workers[victim].process.join(5)  # dead for sure: on a loaded machine the other worker could
    # otherwise hand out 50 batches before the kill takes effect
    with pytest.raises(RuntimeError, match=f"worker {victim} died unexpectedly"):
        for _ in range(50):  # MultiaSync may still hand out a batch that was ready before the kill
            next(it)
    names = block_names(c)
    assert c.shutdown() is None
    assert_clean(names=names)


def test_worker_killed_while_collecting():
    """Worker 1 is killed in the middle of a batch (its env hangs): the sentinel reports the death."""
    c = MultiaSyncDataCollector([lambda: GymEnv(COUNTER), lambda: GymEnv(HANGS)], None, frames_per_batch=5,
                                total_frames=-1, timeout=20)
    it = iter(c)
    b = next(it)
    assert worker_of(b) == 0  # worker 1 hangs in its first batch
    os.kill(c._workers[1].process.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="worker 1 died unexpectedly"):
        for _ in range(1000):
            next(it)
    c.shutdown()
    assert_clean()


def test_multisync_timeout_names_the_silent_worker():
    c = MultiSyncDataCollector([lambda: GymEnv(COUNTER), lambda: GymEnv(HANGS)], None, frames_per_batch=10,
                               total_frames=-1, timeout=0.5)
    with pytest.raises(RuntimeError, match=r"worker\(s\) \[1\] within 0.5 s"):
        collect(c, n=1000)
    assert c.shutdown(timeout=0.5) is None  # the hung worker is terminated
    assert_clean()


def test_multiasync_timeout_when_every_worker_is_silent():
    """MultiaSync goes on with the workers that answer; it times out when none does."""
    c = MultiaSyncDataCollector([lambda: GymEnv(HANGS)] * W, None, frames_per_batch=10, total_frames=-1,
                                timeout=0.5)
    with pytest.raises(RuntimeError, match=r"worker\(s\) \[0, 1\] within 0.5 s"):
        collect(c, n=1000)
    assert c.shutdown(timeout=0.5) is None
    assert_clean()


# ---- bad input -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", COLLECTORS)
@pytest.mark.parametrize("fpb", [0, -1, 1.5, True])
def test_bad_frames_per_batch(cls, fpb):
    with pytest.raises(ValueError, match="frames_per_batch must be a positive integer"):
        cls(counter_envs(), None, frames_per_batch=fpb, total_frames=100)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_total_frames_smaller_than_frames_per_batch(cls):
    with pytest.raises(ValueError, match=r"total_frames \(5\).*frames_per_batch \(10\)"):
        cls(counter_envs(), None, frames_per_batch=10, total_frames=5)
    assert mp.active_children() == []


@pytest.mark.parametrize("cls", COLLECTORS)
@pytest.mark.parametrize("total", [0, 10.0])
def test_bad_total_frames(cls, total):
    with pytest.raises(ValueError, match="total_frames"):
        cls(counter_envs(), None, frames_per_batch=10, total_frames=total)


@pytest.mark.parametrize("cls", COLLECTORS)
@pytest.mark.parametrize("total", [None, -2])
def test_total_frames_none_or_negative_runs_until_stopped(cls, total):
    """torchrl: ``total_frames=None`` or any negative value is an endless collector."""
    with cls(counter_envs(), None, frames_per_batch=10, total_frames=total) as c:
        assert c.total_frames == -1
        assert len(collect(c, n=3)) == 3


@pytest.mark.parametrize("cls", COLLECTORS)
def test_single_function_without_num_workers(cls):
    with pytest.raises(ValueError, match="num_workers"):
        cls(lambda: GymEnv(COUNTER), None, frames_per_batch=10, total_frames=20)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_num_workers_mismatching_the_list(cls):
    with pytest.raises(ValueError, match=r"num_workers \(3\).*2 environment functions"):
        cls(counter_envs(2), None, num_workers=3, frames_per_batch=12, total_frames=24)


@pytest.mark.parametrize("cls", COLLECTORS)
@pytest.mark.parametrize("bad", ["empty", "not_callable", "env_instance"])
def test_create_env_fn_not_functions(cls, bad):
    value = {"empty": [], "not_callable": [lambda: GymEnv(COUNTER), "CartPole-v1"]}.get(bad)
    if bad == "env_instance":
        value = GymEnv(COUNTER)
    with pytest.raises(TypeError, match="create_env_fn"):
        cls(value, None, frames_per_batch=10, total_frames=20)


@pytest.mark.parametrize("cat_results,shape", [("stack", [2, 3]), (None, [2, 3]), (0, [6]), (-1, [6])])
def test_multisync_cat_results(cat_results, shape):
    with MultiSyncDataCollector(counter_envs(), constant_policy(0), frames_per_batch=6, total_frames=6,
                                cat_results=cat_results) as c:
        (batch,) = collect(c)
    assert list(batch.batch_size) == shape
    obs = arr(batch["observation"]).reshape(-1).tolist()
    assert obs == [0, 1, 2, 0, 1, 2]  # worker 0's steps, then worker 1's
    assert arr(batch["collector", "traj_ids"]).reshape(-1).tolist() == [0, 0, 0, 1, 1, 1]


def test_multisync_workers_with_different_entries_cannot_be_stacked():
    """Workers whose batches hold different entries (worker 1's env counts its steps) cannot form one
    batch: the KeyError names both key sets, and the collector still shuts down cleanly."""
    fns = [lambda: GymEnv(COUNTER), lambda: TransformedEnv(GymEnv(COUNTER), StepCounter())]
    with MultiSyncDataCollector(fns, constant_policy(0), frames_per_batch=6, total_frames=6) as c:
        with pytest.raises(KeyError, match="different keys.*step_count"):
            collect(c)


def test_multisync_cat_results_out_of_the_batch_dims():
    """cat_results=2 on [3]-frame worker batches: the IndexError names the dim and the batch size."""
    with MultiSyncDataCollector(counter_envs(), constant_policy(0), frames_per_batch=6, total_frames=6,
                                cat_results=2) as c:
        with pytest.raises(IndexError, match=r"dim 2 is out of range .*\[3\]"):
            collect(c)


def test_cat_results_bad_values():
    with pytest.raises(ValueError, match="cat_results must be 'stack' or an integer"):
        MultiSyncDataCollector(counter_envs(), frames_per_batch=6, total_frames=6, cat_results="cat")
    with pytest.raises(ValueError, match="only be used with MultiSyncDataCollector"):
        MultiaSyncDataCollector(counter_envs(), frames_per_batch=6, total_frames=6, cat_results=0)
    assert mp.active_children() == []


def test_devices_are_accepted_like_torchrl():
    with MultiSyncDataCollector(counter_envs(), constant_policy(0), frames_per_batch=6, total_frames=6,
                                device="cpu", policy_device="cpu", env_device="cpu") as c:
        (batch,) = collect(c)
    assert batch.batch_size == rlpipe.Size([2, 3])


@pytest.mark.parametrize("cls", COLLECTORS)
def test_no_batch_travels_through_the_pipes(cls):
    """Every reply a worker sends while collecting is a layout (once) or a bare "batch" signal:
    the frames themselves only cross through the shared block."""
    with cls(counter_envs(), constant_policy(0), frames_per_batch=6, total_frames=24) as c:
        replies = []
        receive = c._receive_any

        def spy(indices, expected):
            index, reply = receive(indices, expected)
            replies.append(reply)
            return index, reply
        c._receive_any = spy
        batches = collect(c)
    assert sum(b.numel() for b in batches) == 24
    kinds = [kind for kind, _ in replies]
    assert kinds.count("layout") == W and set(kinds) == {"layout", "batch"}
    assert all(payload is None for kind, payload in replies if kind == "batch")
    layouts = [payload for kind, payload in replies if kind == "layout"]
    assert all(isinstance(size, int) and all(not isinstance(x, np.ndarray) for x in layout)
               for layout, size in layouts)


# ---- torchrl 0.14.1 parity: found by differential runs against torchrl's multi-process collectors ----------

def logits_policy(td):
    """A plain callable: the one-hot of action 1, and logits ``[2 * obs + 1, -obs]``."""
    obs = td.get("observation")
    one_hot = np.zeros(tuple(obs.shape[:-1]) + (2,), np.int64)
    one_hot[..., 1] = 1
    td.set("action", rlpipe.tensor(one_hot))
    td.set("logits", rlpipe.cat([obs * 2 + 1, -obs], -1))
    return td


@pytest.mark.parametrize("cls", COLLECTORS)
def test_policy_outputs_reach_the_batches_zeros_in_random_ones(cls):
    """The policy's other outputs are in every batch (zeros in random ones, as torchrl's), through
    the workers' shared blocks."""
    with cls(counter_envs(), logits_policy, frames_per_batch=10, total_frames=60, init_random_frames=10) as c:
        batches = collect(c)
    # which batches are random: MultiSync's first; MultiaSync's first of every worker (requested
    # while no frame was collected), whatever order the workers' batches arrive in
    streams = [batches] if cls is MultiSyncDataCollector else list(by_worker(batches).values())
    for stream in streams:
        for k, b in enumerate(stream):
            assert keyset(b) == ROOT_KEYS | {"logits"}
            obs = arr(b["observation"])[..., 0]
            expected = np.zeros(obs.shape + (2,), np.float32) if k == 0 else np.stack([2 * obs + 1, -obs], -1)
            np.testing.assert_array_equal(arr(b["logits"]), expected, err_msg=str(k))
            if k:
                assert (arr(b["action"]).argmax(-1) == 1).all()


def test_a_batch_whose_layout_changes_gets_a_new_block():
    """Should a worker's batch keys change, the main process allocates a new block instead of
    copying into the old layout (and frees the old one). Here: a policy that claims to write only
    the action (so the random first batch has no logits) but writes logits too."""
    def policy(td):
        return logits_policy(td)
    policy.out_keys = ["action"]

    with MultiSyncDataCollector(counter_envs(), policy, frames_per_batch=6, total_frames=12,
                                init_random_frames=6) as c:
        b0, b1 = collect(c)
        assert len(CREATED) == 2 * W
        assert sum(os.path.exists(shm_path(name)) for name in CREATED) == W  # the first blocks are gone
    assert keyset(b0) == ROOT_KEYS
    assert keyset(b1) == ROOT_KEYS | {"logits"}
    obs = arr(b1["observation"])[..., 0]
    np.testing.assert_array_equal(arr(b1["logits"]), np.stack([2 * obs + 1, -obs], -1))
    check_counter_sync_batch(b1, 1, action=1)


@pytest.mark.parametrize("cls", COLLECTORS)
def test_state_dict_layout_and_iter(cls):
    """torchrl's order: worker0, worker1, ..., frames, iter (the index of the last batch yielded, -1
    before the first); each worker's part holds its trajectory counter as ``traj_pool``."""
    with cls(counter_envs(), Greedy(action=1), frames_per_batch=10, total_frames=40) as c:
        state = c.state_dict()
        assert list(state) == ["worker0", "worker1", "frames", "iter", "policy_state_dict"]
        assert (state["frames"], state["iter"]) == (0, -1)
        assert list(state["worker0"]) == ["env_state_dict", "frames", "iter", "traj_pool"]
        collect(c, n=2)
        state = c.state_dict()
    assert (state["frames"], state["iter"]) == (20, 1)


def test_multisync_reset_takes_torchrls_reset_idx():
    """torchrl's ``reset(reset_idx)``: one bool per worker."""
    with MultiSyncDataCollector(counter_envs(), constant_policy(0), frames_per_batch=6, total_frames=-1) as c:
        it = iter(c)
        next(it)
        c.reset([False, True])
        np.testing.assert_array_equal(arr(next(it)["observation"])[:, :, 0], [[3, 4, 0], [0, 1, 2]])
        with pytest.raises(ValueError, match="one bool per worker"):
            c.reset([True])


class SeedEcho(GymEnv):
    """A Counter GymEnv whose set_seed returns ``seed`` when static, else ``seed + 100``."""

    def set_seed(self, seed, static_seed=False):
        super().set_seed(seed)
        return seed if static_seed else seed + 100


@pytest.mark.parametrize("cls", COLLECTORS)
def test_set_seed_passes_static_seed_to_the_workers(cls):
    with cls([lambda: SeedEcho(COUNTER)] * W, None, frames_per_batch=10, total_frames=40) as c:
        assert c.set_seed(3) == 203
        assert c.set_seed(3, static_seed=True) == 3
