"""Replay buffers (torchrl's ``torchrl.data`` API): storages, samplers, writers and buffers, at
torchrl's module paths (``rlpipe.data.replay_buffers.{replay_buffers,storages,samplers,writers}``),
the postprocessors ``MultiStep`` and ``DensifyReward`` (``rlpipe.data.postprocs``), and torchrl's spec
names (``rlpipe.data.OneHot``, ``rlpipe.data.tensor_specs``: the classes of ``rlpipe.envs.specs``).

>>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256)
>>> rb.extend(batch)            # a TensorDict of transitions, one per row
>>> sample = rb.sample()        # a [256] TensorDict with an "index" entry
"""
from .postprocs import DensifyReward, MultiStep
from .replay_buffers import *  # noqa: F403
from .replay_buffers import __all__ as _buffers_all

# the spec classes torchrl 0.14 exports from torchrl.data (``from torchrl.data import OneHot``), looked up in
# rlpipe.envs.specs on first use: ``import rlpipe`` imports this package but not rlpipe.envs
_SPECS = ("Binary", "Bounded", "BoundedContinuous", "Categorical", "Composite", "MultiCategorical", "MultiOneHot",
          "OneHot", "TensorSpec", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete")

__all__ = list(_buffers_all) + ["MultiStep", "DensifyReward", *_SPECS]


def __getattr__(name):
    if name in _SPECS:
        from rlpipe.envs import specs
        return getattr(specs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
