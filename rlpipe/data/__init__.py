"""Replay buffers (torchrl's ``torchrl.data`` API): storages, samplers, writers and buffers, at
torchrl's module paths (``rlpipe.data.replay_buffers.{replay_buffers,storages,samplers,writers}``),
and the postprocessors ``MultiStep`` and ``DensifyReward`` (``rlpipe.data.postprocs``).

>>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256)
>>> rb.extend(batch)            # a TensorDict of transitions, one per row
>>> sample = rb.sample()        # a [256] TensorDict with an "index" entry
"""
from .postprocs import DensifyReward, MultiStep
from .replay_buffers import *  # noqa: F403
from .replay_buffers import __all__ as _buffers_all

__all__ = list(_buffers_all) + ["MultiStep", "DensifyReward"]
