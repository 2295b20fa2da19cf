"""``rlpipe.safetensors``: safetensors.torch's functions for rlpipe tensors, over the ``safetensors``
package (the optional extra ``rlpipe[safetensors]``), so weights move between torch and rlpipe.

``save_file``/``load_file`` (and ``save``/``load`` on bytes) write and read the same files as
``safetensors.torch``: a JSON header and the raw little-endian bytes of each tensor, nothing
executable, so loading a file never runs code. ``save_model``/``load_model`` go through a
module's ``state_dict``, dropping tied (shared) tensors as safetensors.torch does. bfloat16 comes
and goes through ml_dtypes. rlpipe assumes a little-endian host, as the format's bytes are.
"""
import json
import os

import numpy as np

try:
    import safetensors
except ImportError as e:
    raise ImportError("rlpipe.safetensors needs the safetensors package: pip install 'rlpipe[safetensors]' "
                      f"(or pip install safetensors) ({e})") from None

from . import _dtypes
from ._creation import as_tensor
from ._tensor import Tensor

SafetensorError = safetensors.SafetensorError

# the format's dtype names for the dtypes rlpipe has (torch reads and writes the same names)
_FORMAT_DTYPES = {"F64": _dtypes.float64, "F32": _dtypes.float32, "F16": _dtypes.float16, "BF16": _dtypes.bfloat16,
                  "I64": _dtypes.int64, "I32": _dtypes.int32, "I16": _dtypes.int16, "I8": _dtypes.int8,
                  "U8": _dtypes.uint8, "BOOL": _dtypes.bool}


def _specs(tensors):
    """The tensors as the package's TensorSpecs (host arrays kept alive in the second value)."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, rlpipe.Tensor] but received {type(tensors)}")
    for name, value in tensors.items():
        if not isinstance(value, Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected rlpipe.Tensor but received {type(value)}")
        if not value.is_contiguous():
            raise ValueError(f"You are trying to save a non contiguous tensor: `{name}` which is not allowed. It "
                             "either means you are trying to save tensors which are reference of each other in which "
                             "case it's recommended to save only the full tensors, and reslice at load time, or simply "
                             "call `.contiguous()` on your tensor to pack it before saving.")
    shared = _shared_groups(tensors)
    if shared:
        raise RuntimeError(f"Some tensors share memory, this will lead to duplicate memory on disk and potential "
                           f"differences when loading them again: {shared}. A potential way to correctly save your "
                           "model is to use `save_model`.")
    arrays = {name: np.ascontiguousarray(value.detach()._host()) for name, value in tensors.items()}
    specs = {name: safetensors.TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data,
                                          data_len=a.nbytes) for name, a in arrays.items()}
    return specs, arrays


def _shared_groups(tensors):
    """Groups of names whose tensors overlap in memory (tied weights, views of one another)."""
    spans = sorted((t.data_ptr(), t.data_ptr() + t.nbytes, str(t.device), name)
                   for name, t in tensors.items() if t.nbytes)
    groups, end, device = [], None, None
    for start, stop, dev, name in spans:
        if groups and dev == device and start < end:
            groups[-1].append(name)
            end = max(end, stop)
        else:
            groups.append([name])
            end, device = stop, dev
    return [set(g) for g in groups if len(g) > 1]


def save(tensors, metadata=None):
    """The safetensors bytes of a dict of tensors (``metadata``: an optional dict of strings)."""
    specs, arrays = _specs(tensors)
    return bytes(safetensors.serialize(specs, metadata=metadata))


def save_file(tensors, filename, metadata=None):
    """Writes a dict of tensors to ``filename`` in the safetensors format."""
    specs, arrays = _specs(tensors)
    safetensors.serialize_file(specs, os.fspath(filename), metadata=metadata)


def _dtype(name, format_dtype):
    dtype = _FORMAT_DTYPES.get(format_dtype)
    if dtype is None:
        raise ValueError(f"tensor {name!r} has dtype {format_dtype}, which rlpipe does not support; "
                         f"supported: {', '.join(_FORMAT_DTYPES)}")
    return dtype


def load(data, device="cpu"):
    """The tensors held in safetensors ``data`` (bytes)."""
    out = {}
    for name, entry in safetensors.deserialize(data):
        array = np.frombuffer(entry["data"], dtype=_dtype(name, entry["dtype"]).np).reshape(entry["shape"])
        out[name] = as_tensor(array, device=device)
    return out


def load_file(filename, device="cpu"):
    """The tensors of a safetensors file, on ``device``, in the header's order.

    The package checks the header against the file (a ``SafetensorError`` otherwise); then each
    tensor's bytes are read straight into its own array, so loading takes the file's size in
    memory once (reading the file whole and splitting it took twice), and nothing stays open
    or mapped: the file may be overwritten while the tensors live."""
    with safetensors.safe_open(os.fspath(filename), framework="numpy"):
        pass
    out = {}
    with open(filename, "rb") as f:
        for name, (dtype, shape, start, stop) in _layout(f, filename).items():
            array = np.empty(shape, _dtype(name, dtype).np)
            f.seek(start)
            if array.nbytes != stop - start or f.readinto(array.reshape(-1).view(np.uint8)) != array.nbytes:
                raise SafetensorError(f"{os.fspath(filename)!r} changed while tensor {name!r} was read")
            out[name] = as_tensor(array, device=device)
    return out


def _layout(f, filename):
    """{name: (format dtype, shape, start, stop)} of a safetensors file the package has checked
    (start and stop: byte offsets in the file)."""
    try:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        header.pop("__metadata__", None)
        return {name: (entry["dtype"], entry["shape"], 8 + size + entry["data_offsets"][0],
                       8 + size + entry["data_offsets"][1]) for name, entry in header.items()}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise SafetensorError(f"{os.fspath(filename)!r} changed while its header was read ({e})") from None


def _drop_tied(state_dict, preferred=()):
    """Removes all but one name of each group of tied tensors; returns {kept name: removed names}."""
    removed = {}
    for group in _shared_groups(state_dict):
        kept = sorted(group, key=lambda n: (n not in preferred, n))[0]
        removed[kept] = sorted(group - {kept})
        for name in removed[kept]:
            del state_dict[name]
    return removed


def save_model(model, filename, metadata=None, force_contiguous=True):
    """Saves ``model.state_dict()``, one copy of each tied tensor (the dropped names recorded in
    the metadata, as safetensors.torch does)."""
    state_dict = dict(model.state_dict())
    for kept, names in _drop_tied(state_dict).items():
        metadata = dict(metadata or {})
        for name in names:
            metadata.setdefault(name, kept)
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    save_file(state_dict, filename, metadata=metadata)


def load_model(model, filename, strict=True, device="cpu"):
    """Loads a file into ``model`` (tied tensors filled through the one name saved); returns
    (missing, unexpected) names, or raises RuntimeError listing them when ``strict``."""
    state_dict = load_file(filename, device=device)
    own = dict(model.state_dict())
    tied = _drop_tied(own, preferred=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing) - {name for names in tied.values() for name in names}
    unexpected = list(unexpected)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected
