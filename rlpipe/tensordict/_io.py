"""Storage on disk and in one buffer: memory-mapped TensorDicts (``memmap_``/``memmap``/``load_memmap``,
one ``.npy`` file per leaf and a ``meta.json`` per TensorDict), ``consolidate``, state dicts, pickling,
and the index (de)serialisation ``_SubTensorDict.memmap`` records."""
import contextlib
import json
import math
import os
from collections import OrderedDict

import numpy as np

from .. import _dtypes, serialization as _serialization
from .._creation import as_tensor, zeros as _zeros
from .._device import CPU as _CPU, resolve
from .._tensor import Tensor, host_array, wrap
from ._common import _NAMES_USED
from .base import TensorDictBase
from .memmap import MemoryMappedTensor, Staging
from .utils import TensorDictFuture

# set by the tensorclass module: fn(prefix, td) giving the tensorclass a folder records (in its
# tensorclass.json, JSON only) over the TensorDict loaded from it, or td itself
TENSORCLASS_LOADER = [lambda prefix, td: td]

# loaders of the other kinds of TensorDict a meta.json can record (its "kind" -> fn(prefix, meta,
# load_dense), load_dense() giving the TensorDict of the leaves it lists), filled in by the modules
# that define those kinds
_LOADERS = {}


class _IOMixin:
    """Memory maps, consolidation, state dicts and pickling (see the module docstring)."""
    __slots__ = ()

    def memmap_(self, prefix=None, copy_existing=False, num_threads=0, *, robust_key=None, **kwargs):
        """Moves every leaf into a NumPy memory-mapped file under ``prefix`` (one ``.npy`` file per
        leaf, one folder and ``meta.json`` per nested TensorDict), so the data can exceed RAM and
        outlive the process; then locks the TensorDict (in-place writes only). The leaves become
        ``MemoryMappedTensor``s. File and folder names are the keys with unsafe characters escaped
        (tensordict's ``robust_key=True``, which rlpipe always applies); an empty leaf gets no file
        (``meta.json`` records its shape and dtype). Without ``prefix``, each leaf not memory-mapped
        yet moves into anonymous memory instead: no file, nothing left behind, as in tensordict.

        All or nothing (see ``save_tensordict``): on a failure, a full disk included
        (``OSError(ENOSPC)``), this TensorDict stays as it was, in memory, and an older checkpoint
        in ``prefix`` stays loadable; overwriting one needs room for both at once."""
        if getattr(self, "_shared_state", False) is True:
            raise RuntimeError("memmap and shared memory are mutually exclusive features.")
        if prefix is None:
            return self._memmap_anonymous()
        self._check_memmap_layout()
        mapped = self._mapped_file()
        if mapped is not None and not copy_existing:
            if os.path.dirname(os.path.abspath(mapped)) != os.path.abspath(os.fspath(prefix)):
                raise RuntimeError(f"A filename was provided but the tensor already has a file associated ({mapped}). "
                                   f"To copy the tensor onto the new location, pass copy_existing=True.")
        save_tensordict(self, prefix)
        return self.lock_()._mark_memmap()

    def _check_memmap_layout(self):
        """Before memmap_(prefix) writes anything: every leaf on the CPU, every nested TensorDict a dense
        one, and no two entries of one TensorDict (nor an entry and its meta.json) on the same file name."""
        for td in self._all_tensordicts():
            taken = {"meta.json"}
            for key, value in td._tensordict.items():
                nested = isinstance(value, TensorDictBase)
                if nested and not isinstance(value, (self._dense_type, self._lazy_type)):
                    raise TypeError(f"memmap_: the entry {key!r} is a {type(value).__name__}, which cannot be memory-"
                                    "mapped inside a TensorDict yet; memmap it on its own (value.memmap_(path)) or "
                                    f"store it dense (td[{key!r}] = td[{key!r}].contiguous())")
                if value._is_non_tensor if nested else False:
                    value._check_json(key)
                if not nested:
                    _check_cpu_leaf(key, value)
                name = _file_name(key) + ("" if nested else ".memmap")
                if name in taken:
                    raise ValueError(f"memmap_: the entry {key!r} would be stored as {name!r}, a name another entry "
                                     "(or meta.json) of the same TensorDict already takes")
                taken.add(name)

    def _memmap_anonymous(self):
        """memmap_() without a prefix: leaves that are not MemoryMappedTensors yet are copied into
        anonymous memory maps (all leaves are checked before any moves); then locks."""
        for key, value in self.items(True, True):
            if not isinstance(value, (MemoryMappedTensor, TensorDictBase)):  # non-tensor data: no leaf to map
                _check_cpu_leaf(key, value)
        for td in self._all_tensordicts():
            for key, value in td._tensordict.items():
                if not isinstance(value, (TensorDictBase, MemoryMappedTensor)):
                    td._tensordict[key] = MemoryMappedTensor.from_tensor(value)
        return self.lock_()._mark_memmap()

    def _write_memmap_meta(self, prefix, **entries):
        """Writes ``prefix/meta.json`` last and atomically (see memmap_)."""
        # "shape" is tensordict's name for the batch size in its meta.json
        meta = {"format": "rlpipe-tensordict-memmap", "version": 3, "batch_size": list(self._batch_size),
                "shape": list(self._batch_size), **entries}
        _serialization._write_atomically(os.path.join(prefix, "meta.json"),
                                         lambda f: f.write(json.dumps(meta).encode()))

    def _mapped_file(self):
        """The file of the first leaf (nested ones included) that lives in a memory-mapped file, or None."""
        for value in self._tensordict.values():
            found = value._mapped_file() if isinstance(value, TensorDictBase) \
                else getattr(value._data, "filename", None)
            if found is not None:
                return found
        return None

    def memmap(self, prefix=None, copy_existing=False, *, num_threads=0, return_early=False, **kwargs):
        """A memory-mapped copy (this TensorDict is left as it is). ``return_early=True`` returns a
        future whose ``result()`` is that copy (rlpipe writes the files before returning)."""
        out = self.clone().memmap_(prefix, copy_existing=True, num_threads=num_threads)
        return _done(out) if return_early else out

    def memmap_like(self, prefix=None, copy_existing=False, *, existsok=True, num_threads=0, return_early=False,
                    **kwargs):
        """A memory-mapped TensorDict of the same structure, shapes and dtypes whose files hold zeros
        (the values are not copied); locked, as ``memmap_`` leaves it."""
        out = self._map(lambda t: _zeros(t.shape, dtype=t.dtype)).memmap_(prefix, num_threads=num_threads)
        return _done(out) if return_early else out

    def consolidate(self, filename=None, *, num_threads=0, device=None, non_blocking=False, inplace=False,
                    return_early=False, use_buffer=False, share_memory=False, pin_memory=False, metadata=False):
        """A locked copy whose leaves are views of one flat uint8 storage (``td._consolidated["storage"]``),
        in the file ``filename`` when given (then on the cpu), on ``device`` when given; self when it is
        consolidated already. Unlocking it drops the storage link. ``inplace=True`` makes self's leaves
        the views. ``return_early=True`` returns a future holding the result (rlpipe copies before
        returning; ``num_threads``, ``share_memory``, ``pin_memory`` and ``metadata`` change nothing)."""
        if return_early and use_buffer:
            raise NotImplementedError("consolidate(return_early=True) does not support use_buffer=True")
        if return_early and non_blocking:
            raise NotImplementedError("consolidate(return_early=True) does not support non_blocking=True")
        if self.is_consolidated() and filename is None and (device is None or resolve(device) == self._device):
            out = self
        else:
            from rlpipe.tensordict._consolidate import consolidate
            out = consolidate(self, filename, device)
            if inplace:
                self._check_unlocked()
                storage = out._consolidated
                out.unlock_()
                out = self._become(out).lock_()
                out._consolidated = storage
        return _done(out) if return_early else out

    @classmethod
    def from_consolidated(cls, source):
        """The TensorDict held by ``source``: a file that ``consolidate(filename)`` wrote (as in
        tensordict 0.14), the bytes of such a file, or a consolidated TensorDict (a new TensorDict over
        its storage). The result is consolidated and locked, its leaves views of the one storage (a
        file is mapped copy-on-write: writes never reach it)."""
        from rlpipe.tensordict._consolidate import from_consolidated
        return from_consolidated(cls, source)

    def is_consolidated(self):
        """Whether consolidate() made this TensorDict (and it has not been unlocked since)."""
        return getattr(self, "_consolidated", None) is not None

    def is_memmap(self):
        """True for a TensorDict that memmap_ or load_memmap made (and its views and indexed parts)
        until it is unlocked, as in tensordict."""
        return getattr(self, "_memmap_state", False) is True

    def _mark_memmap(self):
        """Marks this TensorDict and its nested ones memory-mapped, on the CPU device (a memory-mapped
        TensorDict made with device=None reports cpu, as in tensordict)."""
        for td in self._all_tensordicts():
            td._memmap_state = True
            td._device = _CPU
        return self

    @classmethod
    def _load_memmap(cls, prefix):
        """The TensorDict that memmap_(prefix) wrote (any nested folder loads on its own too).

        Loading never changes the files: leaves are mapped copy-on-write, so the TensorDict is
        writable in place but its writes stay in memory (tensordict maps them read-write, and its
        writes reach the files). Each leaf file must hold exactly the bytes of the shape and dtype
        ``meta.json`` records; otherwise a RuntimeError names the leaf. A leaf whose file is gone is
        left out, as tensordict does. A folder that ``_SubTensorDict.memmap`` wrote loads as a
        _SubTensorDict of its source."""
        try:
            with open(os.path.join(prefix, "meta.json")) as f:
                meta = json.load(f)
            if not isinstance(meta, dict) or meta.get("format") != "rlpipe-tensordict-memmap":
                raise ValueError("not an rlpipe TensorDict memmap directory")
            if meta.get("kind") == "sub":
                source = cls._dense_type._load_memmap(os.path.join(prefix, "_source"))
                return source._get_sub_tensordict(_str_to_index(meta["index"]))
            if meta.get("kind") in _LOADERS:
                return _LOADERS[meta["kind"]](prefix, meta, lambda: cls._load_dense(prefix, meta))
            td = cls._load_dense(prefix, meta)
        except RecursionError:
            raise RuntimeError(f"load_memmap: {prefix!r}: meta.json is nested too deeply") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise RuntimeError(f"load_memmap: {prefix!r} holds no valid memory-mapped TensorDict ({e})") from None
        return td.lock_()._mark_memmap()

    @classmethod
    def _load_dense(cls, prefix, meta):
        """The TensorDict of the leaves and nested folders ``meta`` lists (unlocked)."""
        version = meta.get("version", 2)
        td = cls(batch_size=_stored_batch_size(meta["batch_size"]))
        for key, leaf in meta["leaves"].items():
            array = _load_leaf(os.path.join(prefix, _stored_name(key, version)), key, leaf)
            if array is not None:
                td._tensordict[key] = td._leaf(key, MemoryMappedTensor._over(array))
        for key in meta["nested"]:
            td._tensordict[key] = td._leaf(key, cls.load_memmap(os.path.join(prefix, _stored_name(key, version))))
        return td

    def state_dict(self, destination=None, prefix="", keep_vars=False, flatten=True):
        """The leaves as an OrderedDict, with ``"."``-joined keys (a nested OrderedDict per nested
        TensorDict with ``flatten=False``); ``_metadata`` records each level's batch size and device."""
        if destination is None:
            destination = OrderedDict()
        if not hasattr(destination, "_metadata"):
            destination._metadata = OrderedDict()
        destination._metadata[prefix[:-1] if prefix.endswith(".") else prefix] = {
            "batch_size": self._batch_size, "device": self._device}
        for key, value in self._tensordict.items():
            if not isinstance(value, TensorDictBase):
                destination[prefix + key] = value if keep_vars else value.detach()
            elif flatten:
                value.state_dict(destination, prefix + key + ".", keep_vars, True)
            else:
                destination[prefix + key] = value.state_dict(keep_vars=keep_vars, flatten=False)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=None):
        """Loads what state_dict returned (flat or nested): copies into the existing leaves, or
        replaces them with ``assign=True``. With ``strict``, RuntimeError unless the keys match."""
        metadata = getattr(state_dict, "_metadata", None)
        if from_flatten is None:
            from_flatten = metadata is not None and set(state_dict) != set(self._tensordict)
        if from_flatten:
            state_dict = _unflatten_state_dict(state_dict)
            metadata = state_dict._metadata
        level = dict((metadata or {}).get("", {}))
        if "__batch_size" in state_dict:  # the format of older tensordict versions
            state_dict = OrderedDict(state_dict)
            level = {"batch_size": state_dict.pop("__batch_size"), "device": state_dict.pop("__device", None)}
        # nested TensorDicts (or dicts) without leaves may be missing on either side; the message
        # lists every key that differs, as tensordict's does
        extra, missing = set(state_dict) - set(self._tensordict), set(self._tensordict) - set(state_dict)
        if strict and (any(_holds_leaves(state_dict[k]) for k in extra) or any(
                not (isinstance(self._tensordict[k], TensorDictBase) and self._tensordict[k].is_empty())
                for k in missing)):
            raise RuntimeError(f"Cannot load state-dict because the key sets don't match: got state_dict extra "
                               f"keys \n{extra}\n and tensordict extra keys\n{missing}\n")
        device = level.get("device")
        if device is not None and self._device is not None and resolve(device) != self._device:
            raise RuntimeError("Loading data from another device is not yet supported.")
        self.batch_size = level.get("batch_size", self._batch_size)
        for key, item in state_dict.items():
            if isinstance(item, dict):
                dest = self._tensordict.get(key)
                if dest is None:
                    dest = self.empty()
                dest.load_state_dict(item, strict=strict, assign=assign, from_flatten=False)
                if key not in self._tensordict:
                    self.set(key, dest)
            else:
                self.set(key, item, inplace=not assign)
        return self

    # what `with` blocks, lock graphs and locked caches keep is tied to this process's objects (weak
    # references): pickling leaves it out and unpickling locks again
    _TRANSIENT = frozenset(("__weakref__", "_last_op", "_last_op_queue", "_lock_parents", "_cache_store", "_locked",
                            "_shared_state"))

    def __reduce_ex__(self, protocol):
        """A consolidated TensorDict pickles as its one storage and its metadata (tensordict 0.14's
        consolidated transport); any other pickles its state."""
        if self.is_consolidated():
            return consolidated_reduce(self)
        return super().__reduce_ex__(protocol)

    def __getstate__(self):
        state = dict(getattr(self, "__dict__", {}))
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if name not in self._TRANSIENT and not isinstance(getattr(type(self), name, None), property) \
                        and hasattr(self, name):
                    state[name] = getattr(self, name)
        state["_locked"] = self._locked
        return state

    def __setstate__(self, state):
        state = dict(state)
        locked = state.pop("_locked", False)
        if state.get("_names") is not None:
            _NAMES_USED[0] = True
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._locked = False
        if locked:
            self.lock_()
            self._last_op = None


def consolidated_reduce(td):
    """``__reduce_ex__`` of a consolidated TensorDict or lazy stack: its storage and its metadata."""
    storage = td._consolidated["storage"]
    return _from_consolidated_state, (type(td), td._consolidated["metadata"], storage._host(), str(storage.device))


def _from_consolidated_state(cls, metadata, array, device):
    """Unpickles a consolidated TensorDict (see ``__reduce_ex__``): its storage wraps the unpickled
    array (no copy on the cpu)."""
    from rlpipe.tensordict._consolidate import rebuild
    storage = wrap(array, _CPU)
    return rebuild(cls, metadata, storage if device == "cpu" else storage.to(device))


def _check_cpu_leaf(key, value):
    """memmap_ maps CPU data only: RuntimeError naming the leaf and its device otherwise."""
    if value.device.type != "cpu":
        raise RuntimeError(f"memmap_: {key!r} is on {value.device}; move the TensorDict to the CPU first")


def _done(result):
    """A finished TensorDictFuture of ``result`` (what ``return_early=True`` returns, as tensordict)."""
    return TensorDictFuture([], result)


def _index_to_str(index):
    """A batch index as JSON data, in tensordict 0.14's tagged form (``["tuple", [...]]``,
    ``["slice", {...}]``, ``["tensor", values, device]`` ...), which _str_to_index reverses."""
    if isinstance(index, (tuple, list)):
        return ["tuple" if isinstance(index, tuple) else "list", [_index_to_str(i) for i in index]]
    if isinstance(index, (slice, range)):
        return ["slice" if isinstance(index, slice) else "range",
                {"start": index.start, "stop": index.stop, "step": index.step}]
    if isinstance(index, (Tensor, np.ndarray)):
        return ["tensor", index.tolist(), str(getattr(index, "device", "cpu"))]
    if index is Ellipsis:
        return ["ellipsis"]
    return index.item() if isinstance(index, np.generic) else index


def _str_to_index(index):
    """The batch index _index_to_str stored; an untagged list (older metadata) is a tuple of indices."""
    if not isinstance(index, (tuple, list)):
        return index
    if not index:
        return ()
    tag, rest = index[0], index[1:]
    if tag in ("tuple", "list") and len(rest) == 1 and isinstance(rest[0], list):
        items = [_str_to_index(i) for i in rest[0]]
        return tuple(items) if tag == "tuple" else items
    if tag in ("slice", "range") and len(rest) == 1 and isinstance(rest[0], dict):
        return (slice if tag == "slice" else range)(rest[0]["start"], rest[0]["stop"], rest[0]["step"])
    if tag == "tensor" and len(rest) == 2:
        try:
            return as_tensor(rest[0], device=rest[1])
        except RuntimeError as e:  # values or a device no tensor can have
            raise ValueError(f"bad tensor index {rest!r}: {e}") from None
    if tag == "ellipsis" and not rest:
        return Ellipsis
    return tuple(_str_to_index(i) for i in index)


def save_tensordict(td, prefix):
    """Writes the files of ``td.memmap_(prefix)``, then makes td's leaves maps of them.

    All or nothing: every folder's new files are staged (their space reserved, their data
    written) before any is moved into place, so a failure until then (a full disk:
    ``OSError(ENOSPC)`` naming the file) leaves td in memory and an older checkpoint in
    ``prefix`` as they were; this needs room for the old and the new files at once. The moves
    start by removing the top ``meta.json`` and end by putting the new one there, so a process
    killed during them leaves a folder that ``load_memmap`` refuses, never a mix."""
    stagings, leaves = [], []
    try:
        _stage(td, prefix, stagings, leaves)
    except BaseException:
        for staging in stagings:
            staging.discard()
        raise
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(prefix, "meta.json"))
    maps = {id(staging): staging.commit() for staging in reversed(stagings)}  # nested folders first
    for owner, key, staging, name in leaves:
        owner._tensordict[key] = MemoryMappedTensor._over(maps[id(staging)][name])


def _stage(td, prefix, stagings, leaves):
    """Stages td's files in ``prefix`` and its nested TensorDicts' in their folders; appends each
    folder's Staging to ``stagings`` and (td, key, staging, file name) of each leaf to ``leaves``."""
    os.makedirs(prefix, exist_ok=True)
    staging = Staging(prefix)
    stagings.append(staging)
    records, nested = {}, []
    for key, value in td._tensordict.items():
        name = _file_name(key)
        if isinstance(value, td._lazy_type):  # a lazy stack: each stacked TensorDict in its folder
            _stage_lazy(value, os.path.join(prefix, name), stagings, leaves)
            nested.append(key)
            continue
        if not isinstance(value, Tensor):  # a nested TensorDict
            if type(value).memmap_ is not _IOMixin.memmap_ or value.is_shared():
                value.memmap_(prefix)  # a view (_SubTensorDict) or shared TensorDict: raises its error
            _stage(value, os.path.join(prefix, name), stagings, leaves)
            nested.append(key)
            continue
        records[key] = {"shape": list(value.shape), "dtype": value.dtype.name}
        if value.numel() == 0:
            continue  # nothing to map (a file could not be mapped either)
        host = host_array(value)
        array = staging.mapped(name + ".memmap", host.shape, host.dtype)
        array[...] = host
        array.flush()
        leaves.append((td, key, staging, name + ".memmap"))
    td._write_memmap_meta(staging.path, leaves=records, nested=nested)


def _stage_lazy(stack, prefix, stagings, leaves):
    """Stages a lazy stack nested in a TensorDict: its TensorDicts under ``prefix/<i>``, then the
    stack's own meta.json (what ``LazyStackedTensorDict.memmap_`` writes)."""
    os.makedirs(prefix, exist_ok=True)
    for i, td in enumerate(stack.tensordicts):
        _stage(td, os.path.join(prefix, str(i)), stagings, leaves)
    meta = stack._memmap_meta()
    _serialization._write_atomically(os.path.join(prefix, "meta.json"), lambda f: f.write(json.dumps(meta).encode()))


_UNSAFE_IN_NAMES = frozenset('/<>:"|?*\\ %' + "".join(map(chr, range(32))) + chr(127))


def _file_name(key):
    """The file or folder name memmap_ gives entry ``key``: tensordict's robust keys, each unsafe
    character written %XX, '' as '%' and '.' or '..' as %2E per dot, so no key leaves the prefix."""
    if key in ("", ".", ".."):
        return "%2E" * len(key) or "%"
    return "".join(f"%{ord(c):02X}" if c in _UNSAFE_IN_NAMES else c for c in key)


def _stored_name(key, version):
    """The name a memmap folder of format ``version`` holds entry ``key`` under (before version 3,
    the key itself, which must then be a plain file name)."""
    if not isinstance(key, str):
        raise ValueError(f"bad key {key!r}")
    if version >= 3:
        return _file_name(key)
    if "/" in key or key.startswith("."):
        raise ValueError(f"bad key {key!r}")
    return key


def _load_leaf(path, key, leaf):
    """The array memmap_ stored for ``key`` at ``path`` (+ ``.memmap``), mapped copy-on-write and
    checked against the shape and dtype ``leaf`` records; an empty one is rebuilt from them; None
    when the file is gone."""
    shape = _stored_batch_size(leaf["shape"])
    dtype = getattr(_dtypes, leaf["dtype"])
    if not isinstance(dtype, _dtypes.dtype):
        raise ValueError(f"leaf {key!r}: unknown dtype {leaf['dtype']!r}")
    if math.prod(shape) == 0:
        return np.empty(shape, dtype=dtype.np)
    try:
        array = _serialization.open_npy(path + ".memmap", mmap_mode="c")
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ValueError(f"leaf {key!r}: {e}") from None
    if list(array.shape) != shape or array.dtype != dtype.np:
        raise ValueError(f"{key} does not match its recorded shape or dtype")
    return array


def _stored_batch_size(batch_size):
    """A batch size read from a checkpoint, checked: a list of ints >= 0 whose product fits in int64."""
    if (not isinstance(batch_size, list) or len(batch_size) > 64
            or not all(type(n) is int and n >= 0 for n in batch_size) or math.prod(batch_size) >= 1 << 63):
        raise ValueError(f"batch_size should be a list of at most 64 ints >= 0 whose product fits in int64, "
                         f"got {batch_size!r}")
    return batch_size


def _holds_leaves(item):
    """Whether a state-dict entry holds a tensor (a nested dict counts only if one of its entries does)."""
    return not isinstance(item, dict) or any(_holds_leaves(v) for v in item.values())


def _unflatten_state_dict(flat):
    """A flat state dict (``"a.b"`` keys and ``_metadata``) as nested OrderedDicts, each with its
    level's ``_metadata``."""
    def level(parent, part):
        if part not in parent:
            parent[part] = OrderedDict()
            parent[part]._metadata = OrderedDict()
        return parent[part]
    root = OrderedDict()
    root._metadata = OrderedDict()
    for key, value in flat.items():
        parts = key.split(".")
        node = root
        for part in parts[:-1]:
            node = level(node, part)
        node[parts[-1]] = value
    for key, meta in (getattr(flat, "_metadata", None) or {}).items():
        node = root
        for part in key.split(".") if key else ():
            node = level(node, part)
        node._metadata[""] = meta
    return root
