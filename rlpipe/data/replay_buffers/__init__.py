"""torchrl's ``torchrl.data.replay_buffers`` package: buffers, storages, samplers and writers.
Names rlpipe does not implement exist and raise NotImplementedError when built."""
from .frame_stack import FrameStackReplayBuffer
from .replay_buffers import (PrioritizedReplayBuffer, RemoteTensorDictReplayBuffer, ReplayBuffer, ReplayBufferEnsemble,
                             TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer)
from .sample_units import SampleUnit, Sequence, Transition
from .samplers import (ConsumingSampler, PrioritizedSampler, PrioritizedSliceSampler, PromptGroupSampler, RandomSampler,
                       Sampler, SamplerEnsemble, SamplerWithoutReplacement, SliceSampler,
                       SliceSamplerWithoutReplacement,
                       StalenessAwareSampler, StreamingSliceSampler, SumMinTree)
from .storages import (CompressedListStorage, LazyMemmapStorage, LazyStackStorage, LazyTensorStorage, ListStorage,
                       Storage, StorageEnsemble, TensorStorage)
from .utils import (DEFAULT_DONE_KEYS, H5Combine, H5Split, TED2Flat, TED2Nested, Flat2TED, Nested2TED,
                    find_start_stop_traj)
from .writers import (ImmutableDatasetWriter, RoundRobinWriter, TensorDictMaxValueWriter, TensorDictRoundRobinWriter,
                      Writer, WriterEnsemble)

__all__ = ["ReplayBuffer", "TensorDictReplayBuffer", "PrioritizedReplayBuffer", "TensorDictPrioritizedReplayBuffer",
           "ReplayBufferEnsemble", "RemoteTensorDictReplayBuffer", "FrameStackReplayBuffer",
           "SampleUnit", "Transition", "Sequence",
           "Storage", "ListStorage", "TensorStorage", "LazyTensorStorage", "LazyMemmapStorage", "LazyStackStorage",
           "CompressedListStorage", "StorageEnsemble",
           "Sampler", "RandomSampler", "SamplerWithoutReplacement", "PrioritizedSampler", "SliceSampler",
           "SliceSamplerWithoutReplacement", "PrioritizedSliceSampler", "ConsumingSampler", "PromptGroupSampler",
           "StalenessAwareSampler", "StreamingSliceSampler", "SamplerEnsemble", "SumMinTree",
           "Writer", "RoundRobinWriter", "TensorDictRoundRobinWriter", "TensorDictMaxValueWriter",
           "ImmutableDatasetWriter", "WriterEnsemble",
           "DEFAULT_DONE_KEYS", "find_start_stop_traj", "TED2Flat", "TED2Nested", "Flat2TED", "Nested2TED", "H5Split",
           "H5Combine"]
