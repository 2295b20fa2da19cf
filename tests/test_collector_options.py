"""``SyncDataCollector``'s options against torchrl 0.14.1: ``track_policy_version``, ``reset_at_each_iter``,
``split_trajs``, ``trajs_per_batch``, ``compact_obs`` and the action bounds check.

The env is test_collector's ``Counter`` (observation ``[t]``, ``t`` from 0, reward ``t + 10 * action``,
terminated when ``t`` reaches 5), so every batch is known by hand; the values marked "torchrl 0.14.1" were
recorded from torchrl's ``Collector`` on the same env and policy.
"""
import numpy as np

import rlpipe

from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import GymEnv
from test_collector import COUNTER, arr, collect, constant_policy

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
