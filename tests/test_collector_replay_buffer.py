"""torchrl 0.14's collector options ``replay_buffer`` (each batch goes into the buffer, the iteration
yields None) and ``auto_register_policy_transforms`` (a recurrent policy's ``InitTracker`` and
primers appended to the env), and ``rlpipe.modules.utils``' primer helpers.

The env is ``Counter`` (observation ``[t]``, an episode of 5 steps): expectations by hand, and the
transforms torchrl 0.14.1 appends (an ``InitTracker`` for any Module policy, as recorded)."""
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, ReplayBuffer
from rlpipe.envs import GymEnv
from rlpipe.envs.transforms import Compose, InitTracker, TensorDictPrimer, TransformedEnv
from rlpipe.modules import LSTMModule
from rlpipe.modules.utils import get_env_transforms_from_module, get_primers_from_module, missing_env_transforms
from rlpipe.tensordict import TensorDictModule, TensorDictSequential
from test_collector import COUNTER, arr, collect, constant_policy


def test_replay_buffer_gets_every_batch_and_the_iteration_yields_none():
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=4, total_frames=12,
                                  replay_buffer=rb)
    assert collect(collector) == [None, None, None]
    assert len(rb) == 12
    # episodes of 5 steps: t = 0..4, then a reset
    np.testing.assert_array_equal(arr(rb[:]["observation"])[:, 0], [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1])
    np.testing.assert_array_equal(arr(rb[:]["next", "done"])[:, 0], [0, 0, 0, 0, 1] * 2 + [0, 0])
    np.testing.assert_array_equal(arr(rb[:]["collector", "traj_ids"]), [0] * 5 + [1] * 5 + [2] * 2)


def test_replay_buffer_gets_whole_trajectories_with_trajs_per_batch():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))  # an item per trajectory
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=5, total_frames=10,
                                  trajs_per_batch=1, replay_buffer=rb)
    assert collect(collector) == [None, None]
    stored = rb[:]
    assert tuple(stored.batch_size) == (2, 5)
    np.testing.assert_array_equal(arr(stored["observation"])[..., 0], [[0, 1, 2, 3, 4]] * 2)
    assert bool(stored["collector", "mask"].all())


@pytest.mark.parametrize("kwargs, error, message", [
    ({"replay_buffer": {}}, TypeError, "replay_buffer must be a ReplayBuffer (an object with extend()), got dict"),
    ({"replay_buffer": None, "extend_buffer": False}, ValueError, "extend_buffer=False"),
])
def test_replay_buffer_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=4, total_frames=4, **kwargs)


class _ToAction(nn.Module):
    """Writes the one-hot of action 1 whatever the features."""

    def forward(self, features):
        return rlpipe.nn.functional.one_hot(rlpipe.ones(features.shape[:-1], dtype=rlpipe.int64), 2)


def _recurrent_policy():
    lstm = LSTMModule(input_size=1, hidden_size=3, in_keys=["observation", "rs_h", "rs_c"],
                      out_keys=["features", ("next", "rs_h"), ("next", "rs_c")])
    return TensorDictSequential(lstm, TensorDictModule(_ToAction(), ["features"], ["action"]))


def test_auto_register_appends_init_tracker_and_primer_for_a_recurrent_policy():
    collector = SyncDataCollector(GymEnv(COUNTER), _recurrent_policy(), frames_per_batch=7, total_frames=7,
                                  auto_register_policy_transforms=True)
    assert isinstance(collector.env, TransformedEnv)
    kinds = [type(t) for t in collector.env.transform]
    assert kinds == [InitTracker, TensorDictPrimer]
    batch = collect(collector)[0]
    np.testing.assert_array_equal(arr(batch["is_init"])[:, 0], [1, 0, 0, 0, 0, 1, 0])
    assert tuple(batch["next", "rs_h"].shape) == (7, 1, 3)
    # the state a step starts from is the previous step's next state, zero after a reset
    np.testing.assert_allclose(arr(batch["rs_h"])[1:5], arr(batch["next", "rs_h"])[:4])
    np.testing.assert_array_equal(arr(batch["rs_h"])[[0, 5]], np.zeros((2, 1, 3)))


def test_auto_register_is_idempotent_and_off_by_default():
    policy = _recurrent_policy()
    env = GymEnv(COUNTER).append_transform(get_env_transforms_from_module(policy))
    assert missing_env_transforms(env, policy) == []
    collector = SyncDataCollector(env, policy, frames_per_batch=2, total_frames=2,
                                  auto_register_policy_transforms=True)
    assert collector.env is env
    for flag in (None, False):
        base = GymEnv(COUNTER)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert SyncDataCollector(base, constant_policy(1), frames_per_batch=2, total_frames=2,
                                     auto_register_policy_transforms=flag).env is base


def test_auto_register_adds_an_init_tracker_for_any_module_policy_as_torchrl():
    """torchrl 0.14.1 appends InitTracker for a Module policy without recurrent parts; a plain
    callable cannot be walked and leaves the env alone."""
    module_policy = TensorDictModule(_ToAction(), ["observation"], ["action"])
    env = SyncDataCollector(GymEnv(COUNTER), module_policy, frames_per_batch=2, total_frames=2,
                            auto_register_policy_transforms=True).env
    assert isinstance(env, TransformedEnv) and isinstance(env.transform, InitTracker)
    base = GymEnv(COUNTER)
    assert SyncDataCollector(base, constant_policy(1), frames_per_batch=2, total_frames=2,
                             auto_register_policy_transforms=True).env is base


def test_get_primers_from_module():
    policy = _recurrent_policy()
    primer = get_primers_from_module(policy)
    assert isinstance(primer, TensorDictPrimer)
    assert sorted(primer.primers.keys()) == ["rs_c", "rs_h"] and tuple(primer.primers["rs_h"].shape) == (1, 3)
    two = TensorDictSequential(policy, LSTMModule(input_size=3, hidden_size=2, in_keys=["features", "h2", "c2"],
                                                  out_keys=["f2", ("next", "h2"), ("next", "c2")]))
    assert isinstance(get_primers_from_module(two), Compose) and len(get_primers_from_module(two)) == 2
    with pytest.warns(UserWarning, match="No primers found in the module."):
        assert get_primers_from_module(nn.Linear(1, 1)) is None
    assert isinstance(get_env_transforms_from_module(nn.Linear(1, 1)), InitTracker)


class _BrokenPrimer(nn.Module):
    def make_tensordict_primer(self):
        raise ValueError("needs input_shape")


def test_get_primers_from_module_strict_or_not():
    model = nn.Sequential(_BrokenPrimer())
    with pytest.raises(ValueError, match="needs input_shape"):
        get_primers_from_module(model)
    with pytest.warns(UserWarning, match="_BrokenPrimer: needs input_shape"):
        assert get_primers_from_module(model, warn=False, strict=False) is None


def test_start_collects_into_the_buffer_in_the_background_until_async_shutdown():
    import time
    rb = ReplayBuffer(storage=LazyTensorStorage(1000))
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=10, total_frames=-1,
                                  replay_buffer=rb)
    collector.start()
    deadline = time.monotonic() + 30
    while len(rb) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert collector.is_running()
    collector.async_shutdown(timeout=30)
    assert not collector.is_running()
    n = len(rb)
    assert n >= 20 and n % 10 == 0
    np.testing.assert_array_equal(arr(rb[:n]["observation"])[:, 0], np.tile(np.arange(5), n // 5))


def test_start_ends_with_total_frames_and_needs_a_buffer():
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=5, total_frames=15,
                                  replay_buffer=rb)
    collector.start()
    collector._thread.join(30)
    assert not collector.is_running() and len(rb) == 15
    plain = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=5, total_frames=5)
    with pytest.raises(RuntimeError, match="Replay buffer must be defined for execution."):
        plain.start()
