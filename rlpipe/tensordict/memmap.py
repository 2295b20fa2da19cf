"""tensordict.memmap: ``MemoryMappedTensor``, the type of a memory-mapped TensorDict's leaves."""
import os

import numpy as np

from .. import backends
from .._format import tensor_repr
from .._tensor import Tensor, host_array, init_from, wrap

__all__ = ["MemoryMappedTensor"]


class MemoryMappedTensor(Tensor):
    """A CPU tensor whose data lives in a memory map: a file (``filename``) or, made without one,
    anonymous memory that leaves nothing on disk (and that forked child processes share).

    ``TensorDict.memmap_``, ``memmap``, ``memmap_like`` and ``load_memmap`` give leaves of this type,
    as tensordict does, and it prints as ``MemoryMappedTensor(...)``. As in tensordict, basic
    indexing (ints, slices: a view of the same map) and ``unbind`` give MemoryMappedTensors; ops, advanced
    indexing, ``clone`` and ``detach`` give plain Tensors. ``MemoryMappedTensor(t)`` is
    ``MemoryMappedTensor.from_tensor(t)``. Files are NumPy ``.npy`` files (tensordict writes raw
    bytes); the other constructors (``empty``, ``zeros``, ``from_filename``...) are not provided.
    """

    def __new__(cls, source, *, filename=None, existsok=False):
        return cls.from_tensor(source, filename=filename, existsok=existsok)

    def __init__(self, *args, **kwargs):
        pass  # everything happened in __new__

    @classmethod
    def _over(cls, array):
        """A MemoryMappedTensor over ``array`` (an np.memmap or an mmap-backed array), without a copy."""
        return init_from(Tensor.__new__(cls), wrap(array))

    @classmethod
    def from_tensor(cls, input, *, filename=None, existsok=False, copy_data=True):
        """A copy of ``input`` (a tensor or array) in a new memory map: the ``.npy`` file ``filename``
        (RuntimeError if it exists, unless ``existsok``), or anonymous memory when ``filename`` is None.
        ``copy_data=False`` leaves the values zero."""
        host = host_array(input)
        if filename is None:
            array = backends.cpu.anonymous_shared(host.shape, host.dtype)
        else:
            filename = os.fspath(filename)
            if os.path.exists(filename) and not existsok:
                raise RuntimeError(f"The file {filename} already exists.")
            source = getattr(host, "filename", None)
            if source is not None and os.path.exists(filename) and os.path.samefile(source, filename):
                host = np.array(host)  # opening the file for writing truncates what host maps
            array = np.lib.format.open_memmap(filename, mode="w+", dtype=host.dtype, shape=host.shape)
        if copy_data:
            array[...] = host
        return cls._over(array)

    @property
    def filename(self):
        """The file the data lives in; RuntimeError for an anonymous map, as in tensordict."""
        name = getattr(self._data, "filename", None)
        if name is None:
            raise RuntimeError("The MemoryMappedTensor has no file associated.")
        return name

    def is_shared(self):
        """True for a map over a file (tensordict maps files shared, and a ``share_memory_`` then leaves
        the data in the file), False for anonymous memory, as tensordict 0.14.3."""
        return getattr(self._data, "filename", None) is not None or Tensor.is_shared(self)

    def __getitem__(self, index):
        return _mapped_view(Tensor.__getitem__(self, index))

    def unbind(self, dim=0):
        return tuple(_mapped_view(part) for part in Tensor.unbind(self, dim))

    def __repr__(self):
        return tensor_repr(self, prefix="MemoryMappedTensor(")


def _mapped_view(out):
    """``out`` as a MemoryMappedTensor when it is a view of the map, else (a copy) as it is."""
    return out if out._view_of is None else init_from(Tensor.__new__(MemoryMappedTensor), out)
