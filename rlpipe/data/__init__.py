"""Replay buffers (torchrl's ``torchrl.data`` API): storages, samplers and buffers.

>>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256)
>>> rb.extend(batch)            # a TensorDict of transitions, one per row
>>> sample = rb.sample()        # a [256] TensorDict with an "index" entry
"""
from .replay_buffers import (PrioritizedReplayBuffer, ReplayBuffer, TensorDictPrioritizedReplayBuffer,
                             TensorDictReplayBuffer)
from .samplers import PrioritizedSampler, RandomSampler, Sampler, SamplerWithoutReplacement, SumMinTree
from .storages import LazyMemmapStorage, LazyTensorStorage, ListStorage, Storage

__all__ = ["ReplayBuffer", "TensorDictReplayBuffer", "PrioritizedReplayBuffer", "TensorDictPrioritizedReplayBuffer",
           "Storage", "ListStorage", "LazyTensorStorage", "LazyMemmapStorage",
           "Sampler", "RandomSampler", "SamplerWithoutReplacement", "PrioritizedSampler", "SumMinTree"]
