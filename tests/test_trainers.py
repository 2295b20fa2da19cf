"""torchrl 0.14's ``torchrl.trainers`` on rlpipe: the loop, its stages and the usual hooks.

The env is ``Counter`` (5-step episodes, reward ``t + 10 * action``: 11..15 with action 1) and the
"loss" pulls one parameter ``w`` to 3 (``(w - 3)**2``, SGD lr 0.1: ``w_k = 3 - 3 * 0.8**k``), so every
value is computed by hand."""
import math

import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, ReplayBuffer
from rlpipe.envs import GymEnv
from rlpipe.tensordict import TensorDict
from rlpipe.trainers import LogScalar, LogValidationReward, ReplayBufferTrainer, Trainer, UpdateWeights
from test_collector import COUNTER, constant_policy


class _PullToThree(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(rlpipe.zeros(()))
        self.batches = []

    def forward(self, batch):
        self.batches.append(tuple(batch.batch_size))
        return TensorDict({"loss_pull": (self.w - 3) ** 2, "other": self.w.detach()}, [])


class _Logger:
    def __init__(self):
        self.scalars = []

    def log_scalar(self, name, value, step=None):
        self.scalars.append((name, value, step))


def _trainer(total_frames=10, **kwargs):
    loss = _PullToThree()
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=5, total_frames=total_frames,
                                  track_policy_version=True)
    trainer = Trainer(collector=collector, total_frames=total_frames, frame_skip=1, optim_steps_per_batch=2,
                      loss_module=loss, optimizer=rlpipe.optim.SGD(loss.parameters(), lr=0.1), progress_bar=False,
                      **kwargs)
    return trainer, loss, collector


def test_the_loop_optimizes_each_batch_and_logs_the_mean_losses():
    logger = _Logger()
    trainer, loss, _ = _trainer(logger=logger, log_interval=0)
    trainer.train()
    assert trainer.collected_frames == 10 and trainer._optim_count == 4
    assert math.isclose(loss.w.item(), 3 - 3 * 0.8 ** 4, rel_tol=1e-6)
    names = [name for name, _, _ in logger.scalars]
    assert names == ["optim_steps", "loss_pull", "other", "grad_norm"] * 2
    first = {name: value for name, value, step in logger.scalars[:4]}
    # steps 1 and 2 start from w = 0 and 0.6: losses 9 and 5.76, gradient norms 6 and 4.8
    assert first["optim_steps"] == 2 and math.isclose(first["loss_pull"], (9 + 5.76) / 2, rel_tol=1e-6)
    assert math.isclose(first["grad_norm"], (6 + 4.8) / 2, rel_tol=1e-6)
    assert [step for _, _, step in logger.scalars] == [5] * 4 + [10] * 4


def test_clip_norm_clips_the_gradient():
    trainer, loss, _ = _trainer(total_frames=5, clip_norm=1.0)
    trainer.train()
    # each step moves w by lr * 1 (the clipped gradient's norm)
    assert math.isclose(loss.w.item(), 0.2, rel_tol=1e-6)


def test_replay_buffer_and_weight_update_hooks():
    trainer, loss, collector = _trainer()
    rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=3)
    ReplayBufferTrainer(rb, flatten_tensordicts=True).register(trainer)
    UpdateWeights(collector, update_weights_interval=1).register(trainer)
    trainer.train()
    assert len(rb) == 10 and loss.batches == [(3,)] * 4
    assert collector.policy_version == 2                  # one update per batch
    assert rb[:]["next", "truncated"][[4, 9], 0].tolist() == [True, True]  # a batch's end cuts its trajectory


def test_log_scalar_and_validation_reward():
    logger = _Logger()
    trainer, _, _ = _trainer(total_frames=5, logger=logger, log_interval=0)
    LogScalar(log_pbar=True).register(trainer)
    LogValidationReward(record_interval=1, record_frames=10, policy_exploration=constant_policy(1),
                        environment=GymEnv(COUNTER)).register(trainer)
    trainer.train()
    logged = {name: value for name, value, _ in logger.scalars}
    assert logged["('next', 'reward')"] == 13.0                                   # mean of 11..15
    assert math.isclose(logged["('next', 'reward')_std"], np.std([11, 12, 13, 14, 15], ddof=1), rel_tol=1e-6)
    assert logged["r_evaluation"] == 13.0 and logged["total_r_evaluation"] == 65.0  # two 5-step episodes
    assert trainer._pbar_str == {}  # no progress bar asked


@pytest.mark.parametrize("call, error, message", [
    (lambda t: t.register_op("later", print), RuntimeError, "The hook collection later is not recognised"),
    (lambda t: LogScalar(reduction="median"), ValueError, "reduction must be one of"),
    (lambda t: UpdateWeights(None, update_weights_interval=0), ValueError, "update_weights_interval must be >= 1"),
    (lambda t: t.register_module("x", LogScalar()) or t.register_module("x", LogScalar()), RuntimeError,
     "x is already registered"),
])
def test_bad_arguments(call, error, message):
    trainer, _, _ = _trainer(total_frames=5)
    with pytest.raises(error, match=message):
        call(trainer)


def test_unsupported_trainer_options_are_named():
    with pytest.raises(TypeError, match=r"\['async_collection'\] are not supported"):
        _trainer(async_collection=True)
