"""``rlpipe.safetensors``: safetensors.torch's functions for rlpipe tensors, over the ``safetensors``
package (the optional extra ``rlpipe[safetensors]``), so weights move between torch and rlpipe.

``save_file``/``load_file`` (and ``save``/``load`` on bytes) write and read the same files as
``safetensors.torch``: a JSON header and the raw little-endian bytes of each tensor, nothing
executable, so loading a file never runs code. ``save_model``/``load_model`` go through a
module's ``state_dict``, dropping tied (shared) tensors as safetensors.torch does. bfloat16 comes
and goes through ml_dtypes. rlpipe assumes a little-endian host, as the format's bytes are.
"""
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


def _tensors(entries, device):
    out = {}
    for name, entry in entries:
        dtype = _FORMAT_DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"tensor {name!r} has dtype {entry['dtype']}, which rlpipe does not support; "
                             f"supported: {', '.join(_FORMAT_DTYPES)}")
        array = np.frombuffer(entry["data"], dtype=dtype.np).reshape(entry["shape"])
        out[name] = as_tensor(array, device=device)
    return out


def load(data, device="cpu"):
    """The tensors held in safetensors ``data`` (bytes)."""
    return _tensors(safetensors.deserialize(data), device)


def load_file(filename, device="cpu"):
    """The tensors of a safetensors file, on ``device``. Only parses the header and copies bytes."""
    with open(filename, "rb") as f:
        return load(f.read(), device)


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
