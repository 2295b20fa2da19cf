"""torchrl's ``torchrl.data.replay_buffers`` package: buffers, storages, samplers and writers."""
from .replay_buffers import (PrioritizedReplayBuffer, ReplayBuffer, TensorDictPrioritizedReplayBuffer,
                             TensorDictReplayBuffer)
from .samplers import (PrioritizedSampler, RandomSampler, Sampler, SamplerWithoutReplacement, SliceSampler,
                       SliceSamplerWithoutReplacement, SumMinTree)
from .storages import LazyMemmapStorage, LazyTensorStorage, ListStorage, Storage
from .writers import (ImmutableDatasetWriter, RoundRobinWriter, TensorDictMaxValueWriter, TensorDictRoundRobinWriter,
                      Writer)

__all__ = ["ReplayBuffer", "TensorDictReplayBuffer", "PrioritizedReplayBuffer", "TensorDictPrioritizedReplayBuffer",
           "Storage", "ListStorage", "LazyTensorStorage", "LazyMemmapStorage",
           "Sampler", "RandomSampler", "SamplerWithoutReplacement", "PrioritizedSampler", "SliceSampler",
           "SliceSamplerWithoutReplacement", "SumMinTree",
           "Writer", "RoundRobinWriter", "TensorDictRoundRobinWriter", "TensorDictMaxValueWriter",
           "ImmutableDatasetWriter"]
