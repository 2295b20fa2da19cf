"""tensordict.memmap's names. ``TensorDict.memmap_`` is rlpipe's memory-mapped storage; the
MemoryMappedTensor class itself is not (out of scope: persistent storage), and raises
NotImplementedError when built."""
from .._utils import unavailable

__all__ = ["MemoryMappedTensor"]

MemoryMappedTensor = unavailable("MemoryMappedTensor", "persistent storage classes are out of scope; "
                                 "TensorDict.memmap_ maps a TensorDict's arrays")
