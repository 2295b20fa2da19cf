"""``SyncDataCollector``'s options against torchrl 0.14.1: ``track_policy_version``, ``reset_at_each_iter``,
``split_trajs``, ``trajs_per_batch``, ``compact_obs`` and the action bounds check.

The env is test_collector's ``Counter`` (observation ``[t]``, ``t`` from 0, reward ``t + 10 * action``,
terminated when ``t`` reaches 5), so every batch is known by hand; the values marked "torchrl 0.14.1" were
recorded from torchrl's ``Collector`` on the same env and policy.
"""
import gymnasium as gym
import numpy as np
import pytest

import rlpipe

from rlpipe.collectors import MultiaSyncDataCollector, MultiSyncDataCollector, SyncDataCollector
from rlpipe.envs import GymEnv
from rlpipe.envs.transforms import NextStateReconstructor
from test_collector import COUNTER, arr, collect, constant_policy
from test_gym_env import Counter

ACTION_1 = constant_policy(1)


# ---- track_policy_version ----------------------------------------------------------------------------------

def test_policy_version_tags_every_frame_with_the_updates_so_far():
    collector = SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=12,
                                  track_policy_version=True)
    assert collector.policy_version == 0
    versions = []
    for batch in collector:
        assert batch["policy_version"].dtype == rlpipe.int64 and tuple(batch["policy_version"].shape) == (4,)
        versions.append((arr(batch["policy_version"]).tolist(), arr(batch["next", "policy_version"]).tolist()))
        collector.update_policy_weights_()
    # torchrl 0.14.1 tags ("next", ...) the same; its root entry of a batch's first frame keeps the version before
    assert versions == [([0] * 4, [0] * 4), ([1] * 4, [1] * 4), ([2] * 4, [2] * 4)]
    assert collector.policy_version == collector.get_policy_version() == 3


def test_policy_version_is_off_by_default_and_kept_by_state_dict():
    collector = SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=-1)
    (batch,) = collect(collector, 1)
    assert "policy_version" not in batch.keys() and ("next", "policy_version") not in batch.keys(True)
    assert collector.policy_version is None and "policy_version" not in collector.state_dict()
    collector.update_policy_weights_()
    assert collector.policy_version is None

    tracked = SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=-1,
                                track_policy_version=True)
    tracked.update_policy_weights_()
    tracked.update_policy_weights_()
    state = tracked.state_dict()
    assert state["policy_version"] == 2
    restored = SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=-1,
                                 track_policy_version=True)
    restored.load_state_dict(state)  # restored, not counted as an update
    assert restored.policy_version == 2
    assert (arr(collect(restored, 1)[0]["policy_version"]) == 2).all()


# ---- reset_at_each_iter ------------------------------------------------------------------------------------

def test_reset_at_each_iter_interrupts_episodes_of_a_vector_env():
    collector = SyncDataCollector(GymEnv(COUNTER, num_envs=2), ACTION_1, frames_per_batch=6, total_frames=18,
                                  reset_at_each_iter=True)
    batches = collect(collector)
    assert len(batches) == 3
    for k, batch in enumerate(batches):  # as torchrl 0.14.1: each batch [0, 1, 2] -> [1, 2, 3] in both envs
        np.testing.assert_array_equal(arr(batch["observation"])[..., 0], [[0, 1, 2]] * 2)
        np.testing.assert_array_equal(arr(batch["next", "observation"])[..., 0], [[1, 2, 3]] * 2)
        np.testing.assert_array_equal(arr(batch["next", "reward"])[..., 0], [[11, 12, 13]] * 2)
        assert not arr(batch["next", "done"]).any()
        # new trajectories at each batch (torchrl's ids start at 2: its construction's reset used 0 and 1)
        np.testing.assert_array_equal(arr(batch["collector", "traj_ids"]), [[2 * k] * 3, [2 * k + 1] * 3])


def test_without_reset_at_each_iter_episodes_go_on():
    collector = SyncDataCollector(GymEnv(COUNTER, num_envs=2), ACTION_1, frames_per_batch=6, total_frames=12)
    _, second = collect(collector)
    np.testing.assert_array_equal(arr(second["observation"])[..., 0], [[3, 4, 0]] * 2)


# ---- split_trajs -------------------------------------------------------------------------------------------

def test_split_trajs_of_a_vector_env_as_torchrl():
    """torchrl 0.14.1's split of the same batches: rows env by env, each env's trajectories in order,
    zero-padded, ("collector", "mask") marking the steps (torchrl's own vector env gives 0 as the
    last ("next", "observation") of an episode, where rlpipe keeps the true one: 5)."""
    collector = SyncDataCollector(GymEnv(COUNTER, num_envs=2), ACTION_1, frames_per_batch=8, total_frames=16,
                                  split_trajs=True)
    first, second = collect(collector)
    assert tuple(first.batch_size) == (2, 4) and first.names == [None, "time"]
    np.testing.assert_array_equal(arr(first["collector", "mask"]), np.ones((2, 4), bool))
    np.testing.assert_array_equal(arr(first["collector", "traj_ids"]), [[0] * 4, [1] * 4])
    assert tuple(second.batch_size) == (4, 3)
    mask = [[1, 0, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]]
    np.testing.assert_array_equal(arr(second["collector", "mask"]), np.array(mask, bool))
    np.testing.assert_array_equal(arr(second["collector", "traj_ids"]), [[0, 0, 0], [2, 2, 2], [1, 0, 0], [3, 3, 3]])
    np.testing.assert_array_equal(arr(second["observation"])[..., 0], [[4, 0, 0], [0, 1, 2], [4, 0, 0], [0, 1, 2]])
    np.testing.assert_array_equal(arr(second["next", "observation"])[..., 0],
                                  [[5, 0, 0], [1, 2, 3], [5, 0, 0], [1, 2, 3]])
    np.testing.assert_array_equal(arr(second["next", "reward"])[..., 0],
                                  [[15, 0, 0], [11, 12, 13], [15, 0, 0], [11, 12, 13]])
    np.testing.assert_array_equal(arr(second["next", "done"])[..., 0], [[1, 0, 0], [0, 0, 0]] * 2)
    np.testing.assert_array_equal(arr(second["action"])[..., 1], mask)  # padded actions are zeros


# ---- trajs_per_batch ---------------------------------------------------------------------------------------

class Cycling(Counter):
    """A Counter whose episodes last 2, 4, 2, 4, ... steps."""

    def reset(self, *, seed=None, options=None):
        self.episodes = getattr(self, "episodes", -1) + 1
        self.terminate_at = 2 if self.episodes % 2 == 0 else 4
        return super().reset(seed=seed, options=options)


CYCLING = "rlpipe_test/CollectorCycling-v0"
if CYCLING not in gym.registry:
    gym.register(CYCLING, entry_point=Cycling)


def test_trajs_per_batch_pads_whole_trajectories_as_torchrl():
    """torchrl 0.14.1's four batches, the same (episodes cross the batches of 4 frames)."""
    collector = SyncDataCollector(GymEnv(CYCLING), ACTION_1, frames_per_batch=4, total_frames=24, trajs_per_batch=2)
    batches = collect(collector)
    assert len(batches) == 4
    for k, batch in enumerate(batches):
        assert tuple(batch.batch_size) == (2, 4)
        np.testing.assert_array_equal(arr(batch["collector", "mask"]), [[1, 1, 0, 0], [1, 1, 1, 1]])
        np.testing.assert_array_equal(arr(batch["observation"])[..., 0], [[0, 1, 0, 0], [0, 1, 2, 3]])
        np.testing.assert_array_equal(arr(batch["next", "observation"])[..., 0], [[1, 2, 0, 0], [1, 2, 3, 4]])
        np.testing.assert_array_equal(arr(batch["next", "done"])[..., 0], [[0, 1, 0, 0], [0, 0, 0, 1]])
        np.testing.assert_array_equal(arr(batch["next", "reward"])[..., 0], [[11, 12, 0, 0], [11, 12, 13, 14]])
        np.testing.assert_array_equal(arr(batch["action"])[..., 1], [[1, 1, 0, 0], [1, 1, 1, 1]])
        np.testing.assert_array_equal(arr(batch["collector", "traj_ids"]), [[2 * k] * 2 + [0] * 2, [2 * k + 1] * 4])


def test_trajs_per_batch_cat_of_a_vector_env():
    """Both envs run episodes of 2, 4, 2, ... steps; batches of 3 steps per env. Within a frame batch the
    trajectories that complete are taken in id order (torchrl's argsort), then concatenated."""
    collector = SyncDataCollector(GymEnv(CYCLING, num_envs=2), ACTION_1, frames_per_batch=6, total_frames=36,
                                  trajs_per_batch=3, traj_format="cat")
    batches = collect(collector)
    ids = [arr(b["collector", "traj_ids"]).tolist() for b in batches]
    assert ids == [[0, 0, 1, 1, 2, 2, 2, 2], [3, 3, 3, 3, 4, 4, 5, 5], [6, 6, 6, 6, 7, 7, 7, 7, 8, 8],
                   [9, 9, 10, 10, 10, 10, 11, 11, 11, 11]]
    first = batches[0]
    assert tuple(first.batch_size) == (8,) and ("collector", "mask") not in first.keys(True)
    np.testing.assert_array_equal(arr(first["observation"])[:, 0], [0, 1, 0, 1, 0, 1, 2, 3])
    np.testing.assert_array_equal(arr(first["next", "observation"])[:, 0], [1, 2, 1, 2, 1, 2, 3, 4])
    np.testing.assert_array_equal(arr(first["next", "done"])[:, 0], [0, 1, 0, 1, 0, 0, 0, 1])


def test_trajs_per_batch_drops_the_episodes_a_reset_interrupts():
    """reset_at_each_iter: batches of 3 steps hold a whole episode of 2 steps and the first step of one of 4,
    which the next batch's reset ends: only the short ones are yielded (torchrl 0.14.1 drops them too)."""
    collector = SyncDataCollector(GymEnv(CYCLING), ACTION_1, frames_per_batch=3, total_frames=24, trajs_per_batch=2,
                                  reset_at_each_iter=True)
    batches = collect(collector)
    assert len(batches) == 4
    for k, batch in enumerate(batches):
        np.testing.assert_array_equal(arr(batch["collector", "traj_ids"]), [[4 * k] * 2, [4 * k + 2] * 2])
        np.testing.assert_array_equal(arr(batch["collector", "mask"]), np.ones((2, 2), bool))


def test_trajs_per_batch_reset_drops_what_was_assembled():
    collector = SyncDataCollector(GymEnv(CYCLING), ACTION_1, frames_per_batch=8, total_frames=-1, trajs_per_batch=1)
    it = iter(collector)
    first = next(it)  # the first batch of frames completes trajectories 0 (2 steps), 1 (4) and 2 (2); 3 runs
    np.testing.assert_array_equal(arr(first["collector", "traj_ids"]), [[0, 0]])
    collector.reset()
    second = next(it)  # 1, 2 and 3 are gone: the new frames start trajectory 4 (2 steps) from the reset
    np.testing.assert_array_equal(arr(second["collector", "traj_ids"]), [[4, 4]])
    np.testing.assert_array_equal(arr(second["observation"])[..., 0], [[0, 1]])
    assert next(it)["collector", "traj_ids"].shape == (1, 4)  # then 5 (4 steps)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(trajs_per_batch=0), ValueError, r"trajs_per_batch must be a positive integer \(or None\), got 0"),
    (dict(trajs_per_batch=-2), ValueError, r"trajs_per_batch must be a positive integer \(or None\), got -2"),
    (dict(trajs_per_batch=1.5), TypeError, r"trajs_per_batch must be a positive integer \(or None\), got 1.5 \(float"),
    (dict(trajs_per_batch=True), TypeError, r"got True \(bool\)"),
    (dict(traj_format="cat"), ValueError, "traj_format has no effect unless trajs_per_batch is set"),
    (dict(trajs_per_batch=2, traj_format="flat"), ValueError, "traj_format must be 'padded' or 'cat', got 'flat'"),
    (dict(trajs_per_batch=2, split_trajs=True), ValueError, "split_trajs=True cannot be combined with trajs_per_batch"),
])
def test_trajs_per_batch_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=8, **kwargs)


def test_trajs_per_batch_needs_the_trajectory_ids():
    def drop_ids(batch):
        return batch.exclude(("collector", "traj_ids"))
    collector = SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=8, trajs_per_batch=1,
                                  postproc=drop_ids)
    with pytest.raises(KeyError, match=r"trajs_per_batch requires \('collector', 'traj_ids'\)"):
        collect(collector)


# ---- compact_obs -------------------------------------------------------------------------------------------

def test_compact_obs_leaves_the_next_observations_out_as_torchrl():
    (batch,) = collect(SyncDataCollector(GymEnv(COUNTER), ACTION_1, frames_per_batch=4, total_frames=4,
                                         compact_obs=True))
    # torchrl 0.14.1's keys for the same collection
    assert sorted(map(str, batch.keys(True, True))) == sorted(map(str, [
        ("collector", "traj_ids"), ("next", "done"), ("next", "reward"), ("next", "terminated"),
        ("next", "truncated"), "action", "done", "observation", "terminated", "truncated"]))
    np.testing.assert_array_equal(arr(batch["observation"])[:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(arr(batch["next", "reward"])[:, 0], [11, 12, 13, 14])


@pytest.mark.parametrize("num_envs", [None, 3])
def test_compact_obs_round_trip_through_next_state_reconstructor(num_envs):
    """NextStateReconstructor rebuilds ("next", "observation") of a flattened compact batch: the full
    collection's value wherever the next step is in the sample, NaN at an episode's end and at the end of
    each env's steps (here: exactly the frames whose next observation is 5 or which end a batch)."""
    def batches(compact_obs):
        env = GymEnv(COUNTER) if num_envs is None else GymEnv(COUNTER, num_envs=num_envs)
        return collect(SyncDataCollector(env, ACTION_1, frames_per_batch=12, total_frames=24,
                                         compact_obs=compact_obs))
    for full, compact in zip(batches(False), batches(True)):
        flat = compact.reshape(-1)
        assert ("next", "observation") not in flat.keys(True)
        rebuilt = arr(NextStateReconstructor()(flat)["next", "observation"])[:, 0]
        expected = arr(full.reshape(-1)["next", "observation"])[:, 0]
        steps = 12 if num_envs is None else 4
        batch_end = (np.arange(12) % steps) == steps - 1
        lost = (expected == 5) | batch_end
        assert np.isnan(rebuilt[lost]).all()
        np.testing.assert_array_equal(rebuilt[~lost], expected[~lost])
        assert (~lost).sum() >= 6


# ---- actions outside the action spec -----------------------------------------------------------------------

def one_hot_1_1(td):
    td.set("action", rlpipe.tensor([1, 1]))
    return td


def constant_torque(value):
    def policy(td):
        td.set("action", rlpipe.tensor([value]))
        return td
    return policy


def test_actions_outside_the_spec_reach_the_env_as_torchrl():
    """torchrl 0.14.1 on the same collections: a one-hot [1, 1] is stored as given and read by its argmax
    (action 0: reward t); Pendulum clips a torque of 5 to 2 itself (the same rewards as 2)."""
    (batch,) = collect(SyncDataCollector(GymEnv(COUNTER), one_hot_1_1, frames_per_batch=5, total_frames=5))
    np.testing.assert_array_equal(arr(batch["action"]), [[1, 1]] * 5)
    np.testing.assert_array_equal(arr(batch["next", "reward"])[:, 0], [1, 2, 3, 4, 5])

    def pendulum_batch(torque):
        env = GymEnv("Pendulum-v1")
        env.set_seed(0)
        return collect(SyncDataCollector(env, constant_torque(torque), frames_per_batch=5, total_frames=5))[0]
    over, at_bound = pendulum_batch(5.0), pendulum_batch(2.0)
    np.testing.assert_array_equal(arr(over["action"])[:, 0], [5.0] * 5)
    np.testing.assert_allclose(arr(over["next", "reward"])[:, 0], [-8.415810585021973, -8.645183563232422,
                                                                   -8.834403038024902, -8.977234840393066,
                                                                   -9.069242477416992], rtol=1e-6)
    np.testing.assert_array_equal(arr(over["next", "reward"]), arr(at_bound["next", "reward"]))


def test_an_env_that_refuses_an_action_names_it():
    """A Categorical index past the spec reaches the env, whose refusal is the collector's RuntimeError."""
    def index_7(td):
        td.set("action", rlpipe.tensor(7))
        return td
    collector = SyncDataCollector(GymEnv(COUNTER, categorical_action_encoding=True), index_7, frames_per_batch=5,
                                  total_frames=5)
    with pytest.raises(RuntimeError, match=r"CollectorCounter-v0.*step 0 of batch 0"):
        collect(collector)


def test_check_action_spec_refuses_before_the_env_steps():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    collector = SyncDataCollector(env, constant_torque(5.0), frames_per_batch=5, total_frames=10,
                                  check_action_spec=True)
    with pytest.raises(ValueError, match=r"outside the action spec at frame 0"):
        collect(collector)
    assert collector.check_action_spec is True
    ok = SyncDataCollector(GymEnv("Pendulum-v1"), constant_torque(2.0), frames_per_batch=5, total_frames=5,
                           check_action_spec=True)
    assert tuple(collect(ok)[0].batch_size) == (5,)  # on the bound is in the spec


# ---- the multi-process collectors pass the options to their workers ---------------------------------------

def test_multisync_passes_compact_obs_and_check_action_spec_to_its_workers():
    from rlpipe.collectors import MultiSyncDataCollector
    envs = [lambda: GymEnv(COUNTER)] * 2
    with MultiSyncDataCollector(envs, ACTION_1, frames_per_batch=8, total_frames=8, compact_obs=True,
                                timeout=60) as collector:
        (batch,) = collect(collector)
    assert ("next", "observation") not in batch.keys(True) and ("next", "reward") in batch.keys(True)
    np.testing.assert_array_equal(arr(batch["observation"])[..., 0], [[0, 1, 2, 3]] * 2)
    with MultiSyncDataCollector(envs, one_hot_1_1, frames_per_batch=8, total_frames=8, check_action_spec=True,
                                timeout=60) as collector:
        with pytest.raises(RuntimeError, match="outside the action spec"):
            collect(collector)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("traj_format", ["padded", "cat"])
def test_trajs_per_batch_on_a_cuda_storing_device(traj_format):
    def batches(device):
        collector = SyncDataCollector(GymEnv(CYCLING), ACTION_1, frames_per_batch=4, total_frames=12,
                                      trajs_per_batch=2, traj_format=traj_format, storing_device=device,
                                      track_policy_version=True, compact_obs=True)
        return collect(collector)
    for cpu, cuda in zip(batches("cpu"), batches("cuda"), strict=True):
        assert cuda["observation"].device.type == "cuda"
        assert sorted(map(str, cpu.keys(True, True))) == sorted(map(str, cuda.keys(True, True)))
        for key in cpu.keys(True, True):
            np.testing.assert_array_equal(arr(cpu[key]), arr(cuda[key]))


# ---- trajs_per_batch on the multi-process collectors ---------------------------------------------------------

@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_multi_collectors_yield_whole_trajectories(cls):
    """Two workers, each a Cycling env (episodes of 2, 4, 2, ... steps): every batch holds two whole
    trajectories, padded; each worker's first trajectory has 2 steps, its second 4 (ids i * 2 + w)."""
    collector = cls([lambda: GymEnv(CYCLING)] * 2, ACTION_1, frames_per_batch=6, total_frames=48, trajs_per_batch=2)
    try:
        batches = collect(collector, 4)
    finally:
        collector.shutdown()
    lengths = {}
    for batch in batches:
        assert batch.batch_size[0] == 2
        mask = arr(batch["collector", "mask"])
        ids = arr(batch["collector", "traj_ids"])
        for row in range(2):
            n = int(mask[row].sum())
            assert mask[row, :n].all() and not mask[row, n:].any()
            np.testing.assert_array_equal(arr(batch["observation"])[row, :n, 0], np.arange(n))
            assert arr(batch["next", "done"])[row, n - 1, 0] and not arr(batch["next", "done"])[row, :n - 1].any()
            lengths[int(ids[row, 0])] = n
    assert lengths[0] == lengths[1] == 2 and lengths[2] == lengths[3] == 4  # each worker: 2 steps, then 4


def test_multi_collector_trajs_per_batch_cat_and_errors():
    collector = MultiSyncDataCollector([lambda: GymEnv(CYCLING)] * 2, ACTION_1, frames_per_batch=6, total_frames=24,
                                       trajs_per_batch=3, traj_format="cat")
    try:
        first = collect(collector, 1)[0]
    finally:
        collector.shutdown()
    assert first.batch_size == (2 + 2 + 4,) or first.batch_size == (2 + 4 + 2,)
    assert int(arr(first["next", "done"]).sum()) == 3
    with pytest.raises(ValueError, match="traj_format has no effect unless trajs_per_batch is set"):
        MultiSyncDataCollector([lambda: GymEnv(CYCLING)] * 2, ACTION_1, frames_per_batch=6, traj_format="cat")
    with pytest.raises(ValueError, match="split_trajs=True cannot be combined with trajs_per_batch"):
        MultiaSyncDataCollector([lambda: GymEnv(CYCLING)] * 2, ACTION_1, frames_per_batch=6, trajs_per_batch=2,
                                split_trajs=True)
