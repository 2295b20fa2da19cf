"""torch._subclasses' names (fake tensors for tracing): rlpipe has no tracing, so they exist for code that
imports them and raise NotImplementedError when built."""
from ._utils import unavailable

__all__ = ["FakeTensor", "FakeTensorMode"]

FakeTensor = unavailable("FakeTensor", "rlpipe has no fake tensors (no tracing or torch.compile)")
FakeTensorMode = unavailable("FakeTensorMode", "rlpipe has no fake tensors (no tracing or torch.compile)")
