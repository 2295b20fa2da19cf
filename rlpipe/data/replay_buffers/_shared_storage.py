"""Tensor storages that several processes write (torchrl's ``shared_init`` and ``rb.share()``).

A shared storage keeps its arrays, its length and its write cursor in memory-mapped files of one
directory (its ``scratch_dir`` for a ``LazyMemmapStorage``, a temporary one otherwise), so every
process that holds the storage (forked, or unpickled in a spawned process) maps the same bytes.
Whichever process writes first creates the files; the others map them when they next look at the
storage (``len``, a read or a write). The replay buffer serializes writes with a process lock.
"""
import os
import shutil
import tempfile
import weakref

import numpy as np

from ..._tensor import Tensor
from ...tensordict.memmap import MemoryMappedTensor


class _Shareable:
    """The sharing half of ``TensorStorage``: ``_share()``, ``_sync()`` and pickling by directory."""

    _shared_dir = None  # set once shared: the directory of the storage's files

    def _share(self):
        """Moves the storage into files any process can map (its contents too, if written)."""
        if self._shared_dir is not None:
            return self
        directory = self._sharing_directory()
        if self._spec is not None and getattr(self, "scratch_dir", None) is None:  # in memory: copy into files
            arrays, meta = self._arrays, self._meta.copy()
            self._allocate_files(self._spec, directory)
            for mapped, array in zip(self._arrays, arrays):
                mapped[...] = array
            self._meta[:] = meta
        self._shared_dir = directory
        return self

    def _sharing_directory(self):
        """The directory the shared files live in: a memmap storage's own, or a new temporary one
        (removed when this storage, in the process that shared it, is collected or exits)."""
        if hasattr(self, "_directory"):
            return self._directory()
        directory = tempfile.mkdtemp(prefix="rlpipe-shared-storage-")
        self._cleanup_shared = weakref.finalize(self, shutil.rmtree, directory, True)
        return directory

    def _sync(self):
        """Maps the files another process created, if this process has not yet."""
        if self._shared_dir is not None and self._spec is None and os.path.exists(
                os.path.join(self._shared_dir, self._LAYOUT)):
            self._reopen_files(self._shared_dir)

    def __getstate__(self):
        state = self.__dict__.copy()
        for key in ("_finalizer", "_cleanup_shared"):  # cleanup stays with the process that owns the files
            state.pop(key, None)
        if state.get("_shared_dir") is not None:  # the receiver maps the files instead of copying the arrays
            state.update(_spec=None, _arrays=None, _data=None, _meta=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "_auto_cleanup" in state:  # a copy never removes the original's files
            self._finalizer, self._auto_cleanup = None, False
        if self._meta is None:
            self._meta = np.zeros(2, dtype=np.int64)
            self._sync()


def file_names(spec, directory, files):
    """``{key: path}`` of a storage's leaves stored in ``files`` of ``directory`` (the key ``()`` for
    a tensor storage)."""
    keys = spec.keys if spec.kind == "tensordict" else [()]
    return {key: os.path.join(directory, file) for key, file in zip(keys, files)}


def mapped_leaves(data, files):
    """``data`` (a storage's TensorDict or tensor) with each leaf that ``files`` names as a
    ``MemoryMappedTensor`` over the same memory that names its file (torchrl's memmap storages
    hold those: ``rb._storage._storage["a"].filename``); ``data`` itself is left as it is."""
    if isinstance(data, Tensor):
        return MemoryMappedTensor._over(data._data, files[()])
    data = data.copy()
    for key, filename in files.items():
        data.set(key, MemoryMappedTensor._over(data.get(key)._data, filename))
    return data
