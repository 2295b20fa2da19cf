"""``cupy.cuda``: the fake devices, and device memory that views a registered host buffer."""
import weakref

import numpy as np

from .._device import Device
from .._device import get_device_id as _get_device_id
from . import runtime

_registered = weakref.WeakValueDictionary()  # address -> the NumPy buffer there


def _register_memory(buffer):
    """Makes ``buffer`` reachable through its address, as device memory is."""
    _registered[buffer.ctypes.data] = buffer


def is_available():
    return True


class UnownedMemory:
    """Memory at ``ptr`` that someone else owns (``owner`` keeps it alive)."""

    def __init__(self, ptr, size, owner, device_id=None):
        buffer = _registered.get(ptr)
        if buffer is None or buffer.nbytes < size:
            raise ValueError("the stand-in knows no device memory of %d bytes at address %#x" % (size, ptr))
        self.ptr, self.size, self.owner = ptr, size, owner
        self.device_id = _get_device_id() if device_id is None else device_id
        self._bytes = buffer.view(np.int8)[:size]


class MemoryPointer:
    """A pointer ``offset`` bytes into ``mem``."""

    def __init__(self, mem, offset):
        self.mem, self.offset = mem, offset
        self.ptr = mem.ptr + offset
        self.device_id = mem.device_id

    @classmethod
    def _at(cls, ptr, device_id):
        """A bare pointer (no memory object behind it), as ``ndarray.data`` gives."""
        pointer = cls.__new__(cls)
        pointer.mem, pointer.offset, pointer.ptr, pointer.device_id = None, 0, ptr, device_id
        return pointer

    @property
    def device(self):
        return Device(self.device_id)

    def view_as(self, shape, dtype, strides=None):
        """The memory from here on as a NumPy array (shared, not copied)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape)) if strides is None else None
        flat = self.mem._bytes[self.offset:]
        if count is not None:
            return flat[:count * dtype.itemsize].view(dtype).reshape(shape)
        return np.lib.stride_tricks.as_strided(flat.view(dtype), shape, strides)
