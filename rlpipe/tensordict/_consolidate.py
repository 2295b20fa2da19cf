"""TensorDict.consolidate: every leaf copied into one flat byte buffer (the "storage"), the leaves
becoming views of it, so that one transfer or one file moves the whole TensorDict.

Layout, as in tensordict 0.14: the leaves in depth-first key order, each padded with zeros to a
multiple of 8 bytes; ``td._consolidated`` is ``{"storage": uint8 tensor, "metadata": nested dict}``
where a leaf's metadata is ``(dtype name, shape, start, stop, padding)``. A file written by
``consolidate(filename)`` holds the storage, then the metadata as UTF-8 JSON, then the JSON's length
as a little-endian int64, which ``TensorDict.from_consolidated`` reads back (nothing is executed).
"""
import json
import math
import mmap
import os

import numpy as np

from .. import _dtypes
from .._device import CPU, device as _device_cls, resolve
from .._tensor import Tensor, wrap
from ._common import _as_batch_size
from .memmap import new_mapped_file
from .utils import is_tensorclass

_ALIGN = 8


def consolidate(td, filename=None, device_arg=None):
    """A locked copy of ``td`` (a TensorDict, a lazy stack, or any nesting of them and of
    tensorclasses) whose leaves are views of one uint8 storage (in ``filename``, a memory-mapped file
    on the CPU, when given)."""
    metadata, leaves, total = _describe(td)
    device = _target_device(td, leaves, device_arg, filename)
    keep = td.device if device_arg is None and filename is None else device  # the result's device
    if keep != td.device:
        _set_device(metadata, _device_name(keep))
    if filename is not None:
        storage = _file_buffer(filename, total, _json_suffix(metadata))
    else:  # on the target GPU itself, not the current one
        storage = device._backend.full((total,), 0, np.uint8, device.index)
    for start, leaf in leaves:
        data = leaf._data if leaf._device is device else leaf.to(device)._data
        storage[start:start + data.nbytes].view(data.dtype).reshape(data.shape)[...] = data
    return rebuild(type(td), metadata, wrap(storage, device))


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


def _json_suffix(metadata):
    """The bytes a consolidated file ends with: the metadata as JSON, then its length (int64)."""
    try:
        text = json.dumps(metadata).encode("utf-8")
    except TypeError as e:  # a non-tensor object JSON cannot carry
        raise TypeError(f"consolidate: the metadata cannot be written to a file as JSON ({e})") from None
    return text + np.array([len(text)], dtype="<i8").tobytes()


def _file_buffer(filename, total, suffix):
    """A writable uint8 array of ``total`` bytes mapped on ``filename`` (created or overwritten), the
    file ending with ``suffix``; its disk space is reserved first (on a full disk: OSError(ENOSPC),
    the old file left as it was)."""
    mapped = new_mapped_file(os.fspath(filename), (total + len(suffix),), np.uint8, npy=False)
    mapped[total:] = np.frombuffer(suffix, dtype=np.uint8)
    return mapped[:total]


def _describe(td):
    """(metadata, leaves, storage size) of ``td``, as tensordict lays them out: per TensorDict its
    class, batch size, device, names and lock state, its NonTensorData as ``(object, batch size,
    device)``; per leaf its dtype (torch's name, so that tensordict reads rlpipe's files), shape,
    start, stop and padding; ``leaves`` lists ``(start, tensor)`` in depth-first key order. A lazy
    stack is an entry per stacked TensorDict ("0", "1", ...) with its stack dim; a NonTensorStack
    holds its objects as a nested list under ``non_tensors["data"]``; a tensorclass records its class."""
    leaves, size = [], 0

    def leaf_spec(value):
        nonlocal size
        nbytes = value._data.nbytes
        pad = (-nbytes) % _ALIGN
        leaves.append((size, value))
        spec = ("torch." + value.dtype.name, list(value.shape), size, size + nbytes + pad, pad)
        size += nbytes + pad
        return spec

    def walk(node):
        if hasattr(node, "tensordicts") and not node._is_non_tensor:  # a lazy stack
            meta = _node_meta("LazyStackedTensorDict", {"stack_dim": node.stack_dim, "is_locked": node.is_locked,
                                                        "stack_dim_name": node._stack_name})
            meta.update((str(i), walk(sub)) for i, sub in enumerate(node.tensordicts))
            return meta
        meta = _node_meta(_class_of(node), {"device": _device_name(node.device), "names": node.names,
                                            "batch_size": list(node.batch_size), "is_locked": node.is_locked})
        if node._is_non_tensor:  # a NonTensorStack (a NonTensorData is recorded by its parent)
            meta["non_tensors"]["data"] = node.tolist()
            return meta
        for key, value in _entries(node).items():
            if isinstance(value, Tensor):
                meta["leaves"][key] = leaf_spec(value)
            elif type(value).__name__ == "NonTensorData":
                meta["non_tensors"][key] = (value.value(), list(value.batch_size), _device_name(value.device))
            else:
                meta[key] = walk(value)
        return meta
    return walk(td), leaves, size


def _node_meta(cls, cls_metadata):
    return {"cls": cls, "non_tensors": {}, "leaves": {}, "cls_metadata": cls_metadata}


def _class_of(node):
    """A TensorDict's class name; a tensorclass's class itself (as tensordict: such metadata pickles,
    and JSON refuses it)."""
    return type(node) if is_tensorclass(node) else type(node).__name__


def _entries(node):
    """A TensorDict's own entries (a tensorclass: those of the TensorDict it wraps)."""
    return (node._tensordict if is_tensorclass(node) else node)._tensordict


def _set_device(meta, name):
    """Every device ``meta`` records becomes ``name`` (consolidate moving the TensorDict)."""
    info = meta["cls_metadata"]
    if "device" in info:
        info["device"] = name
    if meta["cls"] != "NonTensorStack":
        meta["non_tensors"] = {key: (data, size, name) for key, (data, size, _) in meta["non_tensors"].items()}
    for key, sub in meta.items():
        if key not in _META_FIELDS:
            _set_device(sub, name)


def _device_name(device):
    return None if device is None else str(device)



# ---- from_consolidated ----------------------------------------------------------------------------
def from_consolidated(cls, source):
    """The TensorDict that ``source`` holds: a file ``consolidate(filename)`` wrote (tensordict's
    only form), the bytes of such a file (bytes, bytearray, memoryview or a 1-d uint8 Tensor), or a
    consolidated TensorDict (then a new one over the same storage)."""
    if isinstance(source, (str, os.PathLike)):
        storage, metadata = _split_file_bytes(_read_file(source), source)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        storage, metadata = _split_file_bytes(np.frombuffer(source, dtype=np.uint8), "the buffer")
    elif isinstance(source, Tensor):
        if source.dtype.name != "uint8" or source.dim() != 1:
            raise ValueError(f"from_consolidated: a buffer must be a 1-d uint8 tensor, got dtype={source.dtype} "
                             f"and shape={tuple(source.shape)}")
        storage, metadata = _split_file_bytes(source._host(), "the buffer")
    elif hasattr(source, "is_consolidated") and not isinstance(source, type):
        if not source.is_consolidated():
            raise ValueError("from_consolidated: the TensorDict is not consolidated; call consolidate() first")
        return rebuild(cls, source._consolidated["metadata"], source._consolidated["storage"])
    else:
        raise TypeError(f"from_consolidated: expected a file name, a buffer or a consolidated TensorDict, "
                        f"got {type(source).__name__}")
    return rebuild(cls, metadata, wrap(storage, CPU))


def _read_file(filename):
    """The file's bytes, a private copy: read whole when small (faster than a map; straight into
    the array, with no intermediate bytes object), else mapped copy-on-write; writes to the result
    never reach the file."""
    fd = os.open(filename, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        if size >= _READ_WHOLE_BELOW:
            return np.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_COPY), dtype=np.uint8)
        data = np.empty(size, dtype=np.uint8)
        done = 0
        while done < size:  # (one read, unless the system hands the bytes over in parts)
            count = _read_into(fd, data[done:])
            if count == 0:
                raise ValueError(f"from_consolidated: {os.fspath(filename)!r} shrank while being read")
            done += count
        return data
    finally:
        os.close(fd)


def _read_into(fd, view):
    """Reads from ``fd`` into the uint8 array ``view``; the number of bytes read."""
    if hasattr(os, "readv"):
        return os.readv(fd, [view])
    chunk = os.read(fd, len(view))  # (Windows: no readv)
    view[:len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
    return len(chunk)


_READ_WHOLE_BELOW = 1 << 20
_JSON = json.JSONDecoder()


def _split_file_bytes(data, where):
    """(storage, metadata) of a consolidated file's bytes: ValueError naming ``where`` if they are
    not one."""
    if data.size < 8:
        raise ValueError(f"from_consolidated: {where} holds {data.size} bytes, fewer than the 8 of the "
                         "metadata length: not a consolidated TensorDict")
    length = int.from_bytes(data[-8:].tobytes(), "little", signed=True)
    if not 0 < length <= data.size - 8:
        raise ValueError(f"from_consolidated: {where} records {length} bytes of metadata, expected 1 to "
                         f"{data.size - 8}: not a consolidated TensorDict")
    try:  # (decoded first: json.loads of bytes would detect their encoding at every call)
        metadata = _JSON.decode(data[-8 - length:-8].tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"from_consolidated: {where} holds no valid JSON metadata ({e})") from None
    return data[:-8 - length], metadata


def rebuild(cls, metadata, storage):
    """A locked TensorDict of class ``cls`` whose leaves are views of ``storage`` as ``metadata``
    lays them out, consolidated (``_consolidated`` holds both). ValueError if ``metadata`` does not
    describe a TensorDict inside ``storage``."""
    try:
        out = _build(cls, metadata, storage)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        raise ValueError(f"from_consolidated: the metadata does not describe a consolidated TensorDict "
                         f"({type(e).__name__}: {e})") from None
    out.lock_()
    out._consolidated = {"storage": storage, "metadata": metadata}
    return out


def _build(cls, meta, storage, outer=()):
    """The TensorDict, lazy stack or tensorclass ``meta`` describes (a TensorDict of class ``cls``),
    its batch size starting with ``outer``, every entry checked against it; built without the
    per-entry checks of ``set``."""
    kind = meta["cls"]
    if kind == "LazyStackedTensorDict":
        out = _build_lazy(cls, meta, storage)
        _check_prefix(kind, out.batch_size, outer)
        return out
    info = meta["cls_metadata"]
    batch_size = _as_batch_size(info["batch_size"])
    _check_prefix(kind, batch_size, outer)
    # NonTensorData and NonTensorStack: _nontensor (above this module) hands them over on TensorDictBase
    non_tensor_data, non_tensor_stack = cls._non_tensor_types[:2]
    if kind == "NonTensorStack":
        return non_tensor_stack.from_list(meta["non_tensors"]["data"], device=info["device"])
    wrapper = None
    if kind != "TensorDict":
        if not is_tensorclass(kind):
            raise ValueError(f"from_consolidated: cannot rebuild a {kind!r}; expected a TensorDict")
        wrapper, cls = kind, cls._dense_type
    entries = {}
    for key, (data, size, device) in meta["non_tensors"].items():
        entries[key] = non_tensor_data(data, batch_size=size, device=device)
        _check_prefix(key, entries[key].batch_size, batch_size)
    array, prefix = storage._data, list(batch_size)
    for key, spec in meta["leaves"].items():
        if spec[1][:len(prefix)] != prefix:
            _check_prefix(key, spec[1], batch_size)
        entries[key] = wrap(_leaf_array(key, spec, array), storage._device)
    for key, sub in meta.items():
        if key not in _META_FIELDS:
            entries[key] = _build(cls._dense_type, sub, storage, batch_size)
    device = None if info["device"] is None else resolve(info["device"])
    out = cls._build(entries, batch_size, device)
    names = info.get("names")
    if names and any(n is not None for n in names):
        out.names = names
    return out if wrapper is None else wrapper._from_tensordict(out)


def _build_lazy(cls, meta, storage):
    """The lazy stack ``meta`` describes: its stacked TensorDicts built, then stacked (checked)."""
    info = meta["cls_metadata"]
    count = sum(key not in _META_FIELDS for key in meta)
    parts = [_build(cls._dense_type, meta[str(i)], storage) for i in range(count)]
    # LazyStackedTensorDict, which _lazy (importing this module) hands over on TensorDictBase
    return cls._lazy_type(*parts, stack_dim=info["stack_dim"], stack_dim_name=info.get("stack_dim_name"))


_META_FIELDS = frozenset(("cls", "non_tensors", "leaves", "cls_metadata", "size"))
_DTYPES = {"torch." + d.name: d for d in _dtypes.ALL} | {"rlpipe." + d.name: d for d in _dtypes.ALL}


def _check_prefix(key, shape, batch_size):
    if tuple(shape[:len(batch_size)]) != tuple(batch_size):
        raise ValueError(f"from_consolidated: {key!r} has shape {list(shape)}, which does not start with its "
                         f"TensorDict's batch size {list(batch_size)}")


def _leaf_array(key, spec, array):
    """The view of the storage's ``array`` that leaf ``key``'s ``(dtype, shape, start, stop, pad)``
    names."""
    dtype_name, shape, start, stop = spec[:4]
    dtype = _DTYPES.get(dtype_name)
    if dtype is None:
        raise ValueError(f"from_consolidated: leaf {key!r} has the unknown dtype {dtype_name!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if not 0 <= start <= stop <= len(array) or stop - start < nbytes:
        raise ValueError(f"from_consolidated: leaf {key!r} needs {nbytes} bytes at [{start}, {stop}) of a "
                         f"{len(array)}-byte storage")
    if type(array) is np.ndarray:  # one view straight onto the bytes (a third of slice-view-reshape's cost)
        return np.ndarray(shape, dtype.np, array, start)
    return array[start:start + nbytes].view(dtype.np).reshape(shape)
