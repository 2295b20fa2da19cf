"""Replay-buffer checkpoints: a directory with ``state.json`` and one ``.npy`` file per array.

``save_state(directory, state)`` writes a nested state (dicts with string keys, lists, tuples,
None/bool/int/float/str, NumPy arrays, rlpipe Tensors and TensorDicts) and ``load_state``
reads it back. JSON holds the structure; an array becomes ``{"__array__": {"file": "3.npy",
"dtype": "float32", "shape": [...]}}``, a Tensor ``{"__tensor__": <array>}``, a TensorDict
``{"__tensordict__": {"batch_size": [...], "leaves": [[key path, <array>], ...]}}`` and a tuple
``{"__tuple__": [...]}``. Nothing is unpickled: arrays load with ``allow_pickle=False`` and
every record is checked (file names, dtype names, shapes) before it is used.

``atomic_directory(path)`` gives a temporary directory beside ``path`` that replaces it only
once everything inside was written.
"""
import contextlib
import json
import os
import re
import secrets
import shutil
import sys

import numpy as np

from .. import _dtypes
from .._tensor import Tensor, wrap
from ..serialization import _sibling, _sync_directory, _write_atomically, leftovers, open_npy
from ..tensordict import TensorDict

FORMAT, VERSION = "rlpipe-replay-buffer", 1
_STATE_FILE = "state.json"
_FILE_NAME = re.compile(r"^[A-Za-z0-9_]+\.npy$")  # a plain name: no path
_DTYPES = {d.name: d for d in _dtypes.ALL}


def plain_dtype(np_dtype):
    """The dtype a ``.npy`` file stores ``np_dtype`` as: extension types (bfloat16) as same-size
    unsigned integers, so files never need pickle."""
    return np_dtype if np_dtype.isbuiltin == 1 else np.dtype(f"u{np_dtype.itemsize}")


def dtype_named(name, what):
    """The NumPy dtype a checkpoint names by its string (refuses object and unknown dtypes)."""
    dt = _DTYPES.get(name) if isinstance(name, str) else None
    if dt is None:
        raise RuntimeError(f"{what}: unknown dtype {name!r}; expected one of {sorted(_DTYPES)}")
    return dt.np


def write_json(path, obj):
    """Writes ``obj`` as JSON atomically (a synced temporary file renamed over ``path``)."""
    _write_atomically(path, lambda f: f.write(json.dumps(obj).encode()))


def read_json(path, what):
    """The JSON object in ``path``; a RuntimeError naming ``what`` when it is missing or broken."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{what}: cannot read {path!r} ({e})") from None
    except RecursionError:
        raise RuntimeError(f"{what}: cannot read {path!r} (it is nested too deeply)") from None


def array_record(array, file):
    """The layout entry (file, dtype, shape) that describes ``array`` saved as ``file``."""
    return {"file": file, "dtype": _dtypes.from_numpy_dtype(array.dtype).name, "shape": list(array.shape)}


def open_array(directory, record, what, mmap_mode=None):
    """The array a record describes, checked against it (a memory map with ``mmap_mode``)."""
    if not isinstance(record, dict) or set(record) != {"file", "dtype", "shape"}:
        raise RuntimeError(f"{what}: bad array record {record!r}")
    file, shape = record["file"], record["shape"]
    if not isinstance(file, str) or not _FILE_NAME.match(file):
        raise RuntimeError(f"{what}: bad array file name {file!r}")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise RuntimeError(f"{what}: bad array shape {shape!r}")
    np_dtype = dtype_named(record["dtype"], what)
    try:
        array = open_npy(os.path.join(directory, file), mmap_mode=mmap_mode)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{what}: cannot load {file!r} ({e})") from None
    if list(array.shape) != shape or array.dtype != plain_dtype(np_dtype):
        raise RuntimeError(f"{what}: {file!r} holds {array.dtype}{list(array.shape)}, its record says "
                           f"{record['dtype']}{shape}")
    return np.asarray(array).view(np_dtype)  # a plain ndarray view: memory maps stay open through it


class _Writer:
    def __init__(self, directory):
        self.directory, self.count = directory, 0

    def array(self, array):
        file = f"{self.count}.npy"
        self.count += 1
        path = os.path.join(self.directory, file)
        with open(path, "wb") as f:
            # ascontiguousarray makes a 0-d array 1-d: keep the shape (a 0-d "index" of a listed item)
            plain = np.ascontiguousarray(array).reshape(array.shape).view(plain_dtype(array.dtype))
            np.save(f, plain, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        return array_record(array, file)

    def node(self, obj, where):
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, np.ndarray):
            return {"__array__": self.array(obj)}
        if isinstance(obj, Tensor):
            return {"__tensor__": self.array(obj.detach().cpu()._data)}
        if isinstance(obj, TensorDict):
            leaves = []
            for key, value in obj.items(include_nested=True, leaves_only=True):
                path = [key] if isinstance(key, str) else list(key)
                leaves.append([path, self.array(value.detach().cpu()._data)])
            return {"__tensordict__": {"batch_size": list(obj.batch_size), "leaves": leaves}}
        if isinstance(obj, (list, tuple)):
            items = [self.node(v, f"{where}[{i}]") for i, v in enumerate(obj)]
            return items if isinstance(obj, list) else {"__tuple__": items}
        if isinstance(obj, dict) and all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: self.node(v, f"{where}[{k!r}]") for k, v in obj.items()}
        if isinstance(obj, (np.integer, np.floating, np.bool_)):
            return obj.item()
        raise TypeError(f"dumps: cannot save a {type(obj).__name__} at {where} (rlpipe checkpoints hold tensors, "
                        "TensorDicts, NumPy arrays, numbers, strings, lists, tuples and dicts with string keys; "
                        "no pickle)")


def save_state(directory, state):
    """Writes ``state`` (nested dicts, lists, arrays, tensors, TensorDicts) as JSON and ``.npy`` files
    in ``directory``."""
    writer = _Writer(directory)
    try:
        root = writer.node(state, "state")
    except RecursionError:
        raise ValueError(f"dumps: the state is nested too deeply (more than Python's recursion limit of "
                         f"{sys.getrecursionlimit()} levels allows)") from None
    write_json(os.path.join(directory, _STATE_FILE), {"format": FORMAT, "version": VERSION, "state": root})


def load_state(directory, mmap_mode="r"):
    """The state ``save_state`` wrote; arrays are read-only memory maps unless ``mmap_mode=None``."""
    what = f"loads({directory!r})"
    directory = checkpoint_directory(directory)
    meta = read_json(os.path.join(directory, _STATE_FILE), what)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise RuntimeError(f"{what}: not an rlpipe replay-buffer checkpoint (format {FORMAT!r} version {VERSION})")

    def node(n):
        if isinstance(n, list):
            return [node(v) for v in n]
        if not isinstance(n, dict):
            return n
        if set(n) == {"__array__"}:
            return open_array(directory, n["__array__"], what, mmap_mode)
        if set(n) == {"__tensor__"}:
            return wrap(open_array(directory, n["__tensor__"], what, mmap_mode))
        if set(n) == {"__tuple__"}:
            return tuple(node(v) for v in n["__tuple__"])
        if set(n) == {"__tensordict__"}:
            body = n["__tensordict__"]
            try:
                td = TensorDict(batch_size=body["batch_size"])
                for path, record in body["leaves"]:
                    td.set(tuple(path), wrap(open_array(directory, record, what, mmap_mode)))
            except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as e:
                raise RuntimeError(f"{what}: bad TensorDict record ({e})") from None
            return td
        return {k: node(v) for k, v in n.items()}
    try:
        return node(meta["state"])
    except RecursionError:
        raise RuntimeError(f"{what}: {_STATE_FILE} is nested too deeply") from None


def _split(path):
    return os.path.split(os.path.abspath(os.fspath(path)))


def _interrupted_swap(parent, base):
    """The complete checkpoint a ``dumps`` killed between its two renames left beside a missing
    ``base`` (the new copy when it is complete, else the previous one), or None."""
    found = leftovers(parent, base)
    for (token, kind), old in sorted(found.items()):
        if kind == "old":
            new = found.get((token, "tmp"))
            return new if new is not None and os.path.isfile(os.path.join(new, _STATE_FILE)) else old
    return None


def checkpoint_directory(path):
    """The directory ``loads(path)`` reads: ``path``, or while a ``dumps`` over it is between its two
    renames (or was killed there), the copy that ``dumps`` left beside it."""
    parent, base = _split(path)
    if os.path.lexists(os.path.join(parent, base)) or not os.path.isdir(parent):
        return path
    return _interrupted_swap(parent, base) or path


def _recover(parent, base):
    """Puts back what a killed ``dumps`` left mid-swap, then removes every leftover of killed ones."""
    path = os.path.join(parent, base)
    if not os.path.lexists(path):
        survivor = _interrupted_swap(parent, base)
        if survivor is not None:
            os.replace(survivor, path)
    for stale in leftovers(parent, base).values():
        shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(path):
    """Yields an empty temporary directory beside ``path``; when the block succeeds it takes
    ``path``'s place (an old directory there is removed), otherwise it is deleted and ``path``
    is left as it was. A kill between the two renames leaves both copies beside ``path``:
    ``checkpoint_directory`` finds them, and the next save puts one back and removes the rest."""
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(f"dumps: {path!r} exists and is not a directory")
    parent, base = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    _recover(parent, base)
    token = secrets.token_hex(6)
    tmp = _sibling(parent, base, token, "tmp")
    os.mkdir(tmp)
    old = None
    try:
        yield tmp
        if os.path.lexists(path):
            old = _sibling(parent, base, token, "old")
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        if old is not None and not os.path.lexists(path):
            os.replace(old, path)  # put the previous checkpoint back
            old = None
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _sync_directory(parent)
