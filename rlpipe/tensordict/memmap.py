"""tensordict.memmap: ``MemoryMappedTensor``, the type of a memory-mapped TensorDict's leaves."""
import contextlib
import os
import shutil
import tempfile

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
    def _over(cls, array, filename=None):
        """A MemoryMappedTensor over ``array`` (an np.memmap or an mmap-backed array), without a copy;
        ``filename`` names the file of a plain array that maps one (a storage's ``.npy`` file)."""
        out = init_from(Tensor.__new__(cls), wrap(array))
        if filename is not None:
            out._filename = os.fspath(filename)
        return out

    @classmethod
    def from_tensor(cls, input, *, filename=None, existsok=False, copy_data=True):
        """A copy of ``input`` (a tensor or array) in a new memory map: the ``.npy`` file ``filename``
        (RuntimeError if it exists, unless ``existsok``), or anonymous memory when ``filename`` is None.
        ``copy_data=False`` leaves the values zero. On a full disk, ``OSError(ENOSPC)`` and a file
        that was at ``filename`` is left as it was (see ``new_mapped_file``)."""
        host = host_array(input)
        if filename is None:
            array = backends.cpu.anonymous_shared(host.shape, host.dtype)
        else:
            filename = os.fspath(filename)
            if os.path.exists(filename) and not existsok:
                raise RuntimeError(f"The file {filename} already exists.")
            array = new_mapped_file(filename, host.shape, host.dtype)
        if copy_data:
            array[...] = host
        return cls._over(array)

    @property
    def filename(self):
        """The file the data lives in; RuntimeError for an anonymous map, as in tensordict."""
        name = getattr(self._data, "filename", None) or getattr(self, "_filename", None)
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
        """The slices along ``dim``, each a MemoryMappedTensor over the same file."""
        return tuple(_mapped_view(part) for part in Tensor.unbind(self, dim))

    def __repr__(self):
        return tensor_repr(self, prefix="MemoryMappedTensor(")


def _mapped_view(out):
    """``out`` as a MemoryMappedTensor when it is a view of the map, else (a copy) as it is."""
    return out if out._view_of is None else init_from(Tensor.__new__(MemoryMappedTensor), out)


def new_mapped_file(path, shape, dtype, *, npy=True):
    """``backends.cpu.mapped_file`` made beside ``path`` and renamed over it once its space is
    reserved: on a full disk (``OSError(ENOSPC)``) a file that was at ``path`` is left as it was,
    and a map of the old file (``input`` in ``from_tensor``) keeps reading the old data."""
    staging = Staging(os.path.dirname(path) or ".")
    try:
        staging.mapped(os.path.basename(path), shape, dtype, npy=npy)
    except BaseException:
        staging.discard()
        raise
    return staging.commit()[os.path.basename(path)]


class Staging:
    """New files for the folder ``folder``, written in a hidden staging folder inside it and moved
    over their targets by ``commit``. Until ``commit`` the targets are untouched, so a failure
    (a full disk: ``OSError(ENOSPC)``) leaves what was there; ``commit`` only renames, which
    needs no disk space. A process killed before ``commit`` leaves its ``.rlpipe-staging-*``
    folder behind (safe to delete)."""

    def __init__(self, folder):
        self.folder = folder
        self.path = tempfile.mkdtemp(prefix=".rlpipe-staging-", dir=folder)
        self._maps = {}  # name -> (dtype, shape, offset) of each mapped file

    def mapped(self, name, shape, dtype, *, npy=True):
        """A reserved, writable memory map on the new file ``name`` (see ``backends.cpu.mapped_file``);
        an OSError names the target, not the staged file."""
        try:
            array = backends.cpu.mapped_file(os.path.join(self.path, name), shape, dtype, npy=npy)
        except OSError as e:
            raise OSError(e.errno, e.strerror, os.path.join(self.folder, name)) from None
        self._maps[name] = (array.dtype, array.shape, array.offset)
        return array

    def commit(self, last="meta.json"):
        """Moves every staged file over its target, ``last`` after all others (a ``last`` already
        in the folder is removed first: killed half-way, the folder then has none); returns
        ``{name: writable map of the file at its target}`` for the files ``mapped`` made."""
        names = sorted(os.listdir(self.path), key=lambda name: name == last)
        if last in names:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.folder, last))
        for name in names:
            os.replace(os.path.join(self.path, name), os.path.join(self.folder, name))
        os.rmdir(self.path)
        return {name: np.memmap(os.path.join(self.folder, name), dtype=dtype, mode="r+", offset=offset, shape=shape)
                for name, (dtype, shape, offset) in self._maps.items()}

    def discard(self):
        """Removes the files staged so far and leaves the target untouched."""
        shutil.rmtree(self.path, ignore_errors=True)
