"""TensorDict.consolidate: every leaf copied into one flat byte buffer (the "storage"), the leaves
becoming views of it, so that one transfer or one file moves the whole TensorDict.

Layout, as in tensordict 0.14: the leaves in depth-first key order, each padded with zeros to a
multiple of 8 bytes; ``td._consolidated`` is ``{"storage": uint8 tensor, "metadata": nested dict}``
where a leaf's metadata is ``(dtype name, shape, start, stop, padding)``.
"""
import os

import numpy as np

from .._device import device as _device_cls, resolve
from .._tensor import Tensor, wrap
from .memmap import new_mapped_file

_ALIGN = 8


def consolidate(td, filename=None, device_arg=None):
    """A locked copy of ``td`` whose leaves are views of one uint8 storage (in ``filename``, a
    memory-mapped file on the CPU, when given)."""
    leaves = [(path, leaf) for path, leaf in td._leaf_items()]
    device = _target_device(td, leaves, device_arg, filename)
    layout, total = _layout(leaves)
    if filename is not None:
        storage = _file_buffer(filename, total)
    else:  # on the target GPU itself, not the current one
        storage = device._backend.full((total,), 0, np.uint8, device.index)
    views = {}  # id(leaf) -> its views, in _leaf_items' order (a leaf stored under two keys has two)
    for (_, leaf), (start, nbytes) in zip(leaves, layout):
        data = leaf._data if leaf._device is device else leaf.to(device)._data
        view = storage[start:start + nbytes].view(data.dtype).reshape(data.shape)
        view[...] = data
        views.setdefault(id(leaf), []).append(wrap(view, device))
    keep = td.device if device_arg is None and filename is None else device
    # a tensor _map meets that is no leaf of _leaf_items' (a NonTensorStack's positions) is kept
    out = td._map(lambda leaf: views[id(leaf)].pop(0) if views.get(id(leaf)) else leaf, device=keep)
    out._consolidated = {"storage": wrap(storage, device), "metadata": _metadata(out, leaves, layout)}
    return out.lock_()


def _target_device(td, leaves, device, filename):
    if filename is not None:
        if device is not None and _device_cls(device).type != "cpu":
            raise ValueError(f"consolidate: a file-backed storage lives on the cpu, got device={device!r}")
        return resolve("cpu")
    if device is not None:
        return resolve(device)
    if td.device is not None:
        return td.device
    devices = {leaf._device for _, leaf in leaves}
    if len(devices) > 1:
        raise RuntimeError(f"consolidate: the leaves live on several devices {sorted(map(str, devices))}; "
                           "pass device= to gather them on one")
    return devices.pop() if devices else resolve("cpu")


def _layout(leaves):
    """(start, nbytes) of each leaf in the storage, and the storage's size in bytes."""
    layout, offset = [], 0
    for _, leaf in leaves:
        nbytes = leaf._data.nbytes
        layout.append((offset, nbytes))
        offset += nbytes + (-nbytes) % _ALIGN
    return layout, offset


def _file_buffer(filename, total):
    """A writable uint8 array of ``total`` bytes mapped on ``filename`` (created or overwritten),
    its disk space reserved first (on a full disk: OSError(ENOSPC), the old file left as it was)."""
    if total == 0:
        open(filename, "wb").close()
        return np.zeros(0, dtype=np.uint8)
    return new_mapped_file(os.fspath(filename), (total,), np.uint8, npy=False)


def _metadata(td, leaves, layout):
    """tensordict's consolidated metadata: per TensorDict its class and batch size, per leaf its
    dtype, shape, start, stop and padding."""
    spans = {path: (start, nbytes) for (path, _), (start, nbytes) in zip(leaves, layout)}

    def walk(sub, prefix):
        meta = {"cls": type(sub).__name__, "non_tensors": {}, "leaves": {},
                "cls_metadata": {"device": None if sub.device is None else str(sub.device),
                                 "names": [None] * sub.batch_dims, "batch_size": list(sub.batch_size),
                                 "is_locked": False}}
        if sub._is_non_tensor:  # its objects, where tensordict records them
            meta["non_tensors"]["data"] = sub.value()
            return meta
        for key, value in sub._tensordict.items():
            if isinstance(value, Tensor):
                start, nbytes = spans[prefix + (key,)]
                pad = (-nbytes) % _ALIGN
                meta["leaves"][key] = (str(value.dtype), list(value.shape), start, start + nbytes + pad, pad)
            else:
                meta[key] = walk(value, prefix + (key,))
        return meta
    return walk(td, ())
