"""``rlpipe.save`` and ``rlpipe.load``: checkpoints without pickle.

A checkpoint is a zip archive whose entries are all stored uncompressed:

- ``manifest.json`` describes the saved object: ``{"magic": "rlpipe-checkpoint", "version": 1,
  "byteorder": "little", "storages": [...], "arrays": [...], "root": <node>}``.
- ``data/<i>.bin`` holds storage ``i``: raw little-endian bytes.

A storage record is ``{"file": "data/0.bin", "nbytes": 96}``. An array record describes one
tensor (``kind`` "tensor" or "parameter") or NumPy array (``kind`` "ndarray") as a strided view
of a storage: ``storage`` (index, null when the array has no elements), ``offset`` and
``strides`` in bytes, ``shape``, ``dtype`` (an rlpipe dtype name) and, for tensors, ``device``
(where it was saved, "cpu" or "cuda:N") and ``requires_grad``. Arrays whose bytes overlapped in
memory share one storage, so views of one tensor still share memory after loading; a storage
holds only the bytes its arrays span, never a whole unrelated base.

Nodes: JSON null, true/false, numbers and strings stand for None, bool, int, float and str;
everything else is an object tagged by ``"t"``: ``list``/``tuple`` (``v``: nodes), ``dict``/
``odict`` (``k``: str or int keys, ``v``: nodes, in order), ``array`` (``i``: an array record;
the same tensor object saved twice is one record and loads as one object), ``bytes`` (``s``: a
storage), ``numpy`` (a NumPy scalar: ``dtype``, ``v``), ``dtype`` and ``device`` (``v``: name).

Loading runs no code from the file: it parses JSON, checks every field (dtype names, shapes
against storage sizes, node kinds) and raises ``RuntimeError`` naming the file when anything
is off. It allocates no more than the file holds: each entry is read once however many records
name it, the entries read may not add up to more bytes than the file (overlapping zip entries),
and a view that repeats bytes (an expanded tensor) may describe at most ``_MAX_VIEW_BYTES``.
"""
import collections
import contextlib
import io
import json
import math
import os
import re
import secrets
import sys
import zipfile

import numpy as np

from . import _dtypes
from ._device import CPU, resolve
from ._device import device as _device
from ._tensor import Tensor, wrap

MAGIC = "rlpipe-checkpoint"
VERSION = 1
_MANIFEST = "manifest.json"
_MAX_VIEW_BYTES = 1 << 32  # the largest array a zero stride may make of a smaller storage
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed entry timestamps: the same object gives the same bytes
_BY_NAME = {d.name: d for d in _dtypes.ALL}
_SCALARS = frozenset((type(None), bool, int, float, str))
_TOP_KEYS = {"magic", "version", "byteorder", "storages", "arrays", "root"}
_ARRAY_KEYS = {"kind", "dtype", "shape", "strides", "storage", "offset"}
_TENSOR_KEYS = _ARRAY_KEYS | {"device", "requires_grad"}
_RECORD_KEYS = {"tensor": _TENSOR_KEYS, "parameter": _TENSOR_KEYS, "ndarray": _ARRAY_KEYS}
_Record = collections.namedtuple("_Record", "kind dtype shape strides offset storage device requires_grad")


class _Located(Exception):
    """An error found inside a nested structure; each container it passes adds its key to ``path``."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, []

    def where(self):
        if not self.path:
            return "the top level"
        return "".join(f"[{key!r}]" for key in reversed(self.path))


def _type_name(obj):
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _unsupported(obj, detail=""):
    if not detail and callable(getattr(type(obj), "state_dict", None)):  # a Module, an optimizer...
        detail = (" (objects are not pickled: save its state_dict() instead, as in save(module.state_dict(), path), "
                  "and restore it with module.load_state_dict(load(path)))")
    return _Located(TypeError, f"cannot store object of type {_type_name(obj)!r}{detail}")


def _span(start, shape, strides, itemsize):
    """The bytes [lo, hi) that an array's elements occupy, or None when it has no elements."""
    lo = hi = start
    for n, stride in zip(shape, strides):
        if n == 0:
            return None
        if stride < 0:
            lo += (n - 1) * stride
        else:
            hi += (n - 1) * stride
    return lo, hi + itemsize


def _little(np_dtype):
    return np_dtype.newbyteorder("<")


def _is_parameter(t):
    cls = type(t)
    return cls.__name__ == "Parameter" and cls.__module__ == "rlpipe.nn.parameter"


# ---------------------------------------------------------------- saving

_REGISTERED = {}  # type -> (name, to_state, from_state)
_BY_REGISTERED_NAME = {}  # name -> from_state


_parameter_type = None  # nn.Parameter, which rlpipe.nn.parameter (a layer above) registers when it loads


def register_parameter_type(cls):
    """Sets the class that load() rebuilds saved parameters as: ``cls(tensor, requires_grad)``."""
    global _parameter_type
    _parameter_type = cls


def register_type(cls, name, to_state, from_state):
    """Lets save/load store instances of ``cls`` (a type from a layer above the core, such as
    TensorDict): ``to_state(obj)`` gives plain storable data, ``from_state(data)`` rebuilds the
    object. Loading only ever calls the ``from_state`` of a registered name."""
    _REGISTERED[cls] = (name, to_state, from_state)
    _BY_REGISTERED_NAME[name] = from_state


class _Packer:
    """Turns a Python structure into manifest nodes and collects the arrays and bytes to store."""

    def __init__(self):
        self.records = []   # array records for the manifest
        self.sources = []   # per record: (host array, memory space, address, strides)
        self.blobs = []     # bytes objects: the first storages
        self.groups = []    # (nbytes, record indices) per array storage, set by layout()
        self.memo = {}      # id(tensor or ndarray) -> record index
        self.open = set()   # ids of the containers being packed, to catch cycles

    def node(self, obj):
        cls = type(obj)
        if cls in _SCALARS:
            return obj
        pack = _PACK.get(cls)
        if pack is not None:
            return pack(self, obj)
        registered = _REGISTERED.get(cls)  # before the Tensor test: a registered Tensor subclass
        if registered is not None:
            name, to_state, _ = registered
            return {"t": "object", "type": name, "v": self.node(to_state(obj))}
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, np.generic):
            return self.numpy_scalar(obj)
        raise _unsupported(obj)

    def _enter(self, obj):
        if id(obj) in self.open:
            raise _Located(ValueError, "cannot store a structure that contains itself")
        self.open.add(id(obj))

    def sequence(self, obj):
        self._enter(obj)
        items = []
        for i, item in enumerate(obj):
            try:
                items.append(self.node(item))
            except _Located as e:
                e.path.append(i)
                raise
        self.open.discard(id(obj))
        return {"t": "list" if type(obj) is list else "tuple", "v": items}

    def mapping(self, obj):
        self._enter(obj)
        keys, values = [], []
        for key, value in obj.items():
            if type(key) not in (str, int):
                raise _Located(TypeError, f"cannot store a dict key of type {_type_name(key)!r}")
            keys.append(key)
            try:
                values.append(self.node(value))
            except _Located as e:
                e.path.append(key)
                raise
        self.open.discard(id(obj))
        return {"t": "dict" if type(obj) is dict else "odict", "k": keys, "v": values}

    def bytes_(self, obj):
        self.blobs.append(obj)
        return {"t": "bytes", "s": len(self.blobs) - 1}  # bytes come first among the storages

    def tensor(self, t):
        if type(t) is not Tensor and not _is_parameter(t):
            raise _unsupported(t, " (a Tensor subclass: store t.detach() instead)")
        index = self.memo.get(id(t))
        if index is None:
            extra = {"device": str(t.device), "requires_grad": t.requires_grad}
            kind = "parameter" if _is_parameter(t) else "tensor"
            index = self._add(kind, t.dtype, t._host(), str(t.device), t.data_ptr(), t._data.strides, extra)
            self.memo[id(t)] = index
        return {"t": "array", "i": index}

    def ndarray(self, a):
        dt = _dtypes._FROM_NP.get(a.dtype.newbyteorder("="))
        if dt is None:
            raise _unsupported(a, f" with dtype {a.dtype}")
        index = self.memo.get(id(a))
        if index is None:
            index = self._add("ndarray", dt, a, "cpu", a.__array_interface__["data"][0], a.strides, {})
            self.memo[id(a)] = index
        return {"t": "array", "i": index}

    def numpy_scalar(self, x):
        dt = _dtypes._FROM_NP.get(x.dtype)
        if dt is None:
            raise _unsupported(x)
        return {"t": "numpy", "dtype": dt.name, "v": x.item()}

    def _add(self, kind, dt, host, space, address, strides, extra):
        self.records.append({"kind": kind, "dtype": dt.name, "shape": list(host.shape), "strides": list(strides),
                             "storage": None, "offset": 0, **extra})
        self.sources.append((host, space, address, tuple(strides)))
        return len(self.records) - 1

    def layout(self):
        """Groups the arrays whose bytes overlap (within one memory space) into storages, numbered
        after the bytes objects' storages in the order their first array was met, and fills in
        each record's storage and offset."""
        spans = collections.defaultdict(list)
        for i, (host, space, address, strides) in enumerate(self.sources):
            span = _span(address, host.shape, strides, host.itemsize)
            if span is not None:
                spans[space].append((*span, i))
        groups = []
        for found in spans.values():
            groups.extend(_merge_overlapping(sorted(found)))
        groups.sort(key=lambda g: min(g[2]))
        self.groups = [(hi - lo, members) for lo, hi, members in groups]
        for sid, (lo, _, members) in enumerate(groups, start=len(self.blobs)):
            for i in members:
                self.records[i]["storage"] = sid
                self.records[i]["offset"] = self.sources[i][2] - lo

    def storage_sizes(self):
        return [len(b) for b in self.blobs] + [n for n, _ in self.groups]

    def storages(self):
        """Yields each storage's bytes, one at a time."""
        yield from self.blobs
        for nbytes, members in self.groups:
            yield self._storage(nbytes, members)

    def _storage(self, nbytes, members):
        host, _, _, strides = self.sources[members[0]]
        if (len(members) == 1 and host.flags.c_contiguous and host.strides == strides and host.nbytes == nbytes
                and host.dtype == _little(host.dtype)):
            return host.reshape(-1).view(np.uint8)  # the common case: no copy
        buf = np.zeros(nbytes, np.uint8)
        for i in members:
            host, _, _, strides = self.sources[i]
            view = np.ndarray(host.shape, _little(host.dtype), buffer=buf, offset=self.records[i]["offset"],
                              strides=strides)
            view[...] = host
        return buf


_PACK = {list: _Packer.sequence, tuple: _Packer.sequence, dict: _Packer.mapping,
         collections.OrderedDict: _Packer.mapping, bytes: _Packer.bytes_, np.ndarray: _Packer.ndarray,
         _dtypes.dtype: lambda self, d: {"t": "dtype", "v": d.name},
         _device: lambda self, d: {"t": "device", "v": str(d)}}


def _merge_overlapping(spans):
    """[lo, hi, members] groups of sorted (lo, hi, index) spans, merging spans that overlap."""
    groups = []
    for lo, hi, i in spans:
        if groups and lo < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], hi)
            groups[-1][2].append(i)
        else:
            groups.append([lo, hi, [i]])
    return groups


def _zip_entry(zf, name, data):
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = 0o644 << 16
    view = memoryview(data)
    with zf.open(info, "w", force_zip64=view.nbytes >= zipfile.ZIP64_LIMIT) as out:
        out.write(view)


def _write_zip(fh, manifest, packer):
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        _zip_entry(zf, _MANIFEST, manifest)
        for i, data in enumerate(packer.storages()):
            _zip_entry(zf, f"data/{i}.bin", data)


def _sibling(directory, base, token, kind):
    """Where a save to ``base`` keeps its new (``kind`` "tmp") or previous ("old") copy."""
    return os.path.join(directory, f".{base}.{token}.{kind}")


def leftovers(directory, base):
    """``{(token, kind): path}`` of the siblings that saves to ``base`` interrupted by a kill left in
    ``directory`` (names of ``_sibling``'s pattern only, for that target only)."""
    pattern = re.compile(rf"\.{re.escape(base)}\.([0-9a-f]{{12}})\.(tmp|old)")
    found = {}
    for name in os.listdir(directory):
        match = pattern.fullmatch(name)
        if match:
            found[match.groups()] = os.path.join(directory, name)
    return found


def _create_temp(directory, base):
    """A new file beside the target (permissions from the umask, as for a plain open)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        path = _sibling(directory, base, secrets.token_hex(6), "tmp")
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue


def _sync_directory(directory):
    """Makes the rename durable where the platform allows it (POSIX)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_atomically(path, write):
    """Runs ``write(file)`` on a temporary file in the target's directory, syncs it, and renames
    it over ``path``; on any failure the temporary file goes and ``path`` is untouched. Temporary
    files that killed saves to ``path`` left behind go first (saves to one path from two processes
    at once are not supported)."""
    target = os.path.realpath(path)  # a symlink keeps pointing at the new file
    directory, base = os.path.split(target)
    for (_, kind), stale in leftovers(directory, base).items():  # from saves killed before their rename
        if kind == "tmp" and os.path.isfile(stale):
            with contextlib.suppress(OSError):
                os.unlink(stale)
    fd, tmp = _create_temp(directory, base)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_directory(directory)


def open_npy(path, mmap_mode=None):
    """The array in the ``.npy`` file ``path`` (a memory map with ``mmap_mode``, never ``"r+"`` or
    ``"w+"`` when loading a checkpoint), after checking that the file holds exactly the bytes its
    header declares: a ValueError naming the dtype, shape and sizes otherwise, before anything is
    allocated or mapped. Object arrays are refused (they would need pickle)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(f)
        held = os.fstat(f.fileno()).st_size - f.tell()
    if dtype.hasobject:
        raise ValueError(f"its header declares dtype {dtype}, an object dtype that needs pickle")
    needed = math.prod(shape) * dtype.itemsize
    if needed != held:
        raise ValueError(f"its header declares {dtype}{list(shape)}, {needed} bytes, but the file holds {held}")
    return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)


def save(obj, f):
    """Saves ``obj`` to ``f``, a path (written atomically) or a binary file object.

    ``obj`` may nest lists, tuples, dicts and OrderedDicts (str or int keys) of tensors, NumPy
    arrays and scalars of rlpipe's dtypes, None, bool, int, float, str, bytes, dtypes and
    devices. Tensors are saved from host memory with their device and ``requires_grad``;
    anything else raises ``TypeError`` naming its type and where it sits in ``obj``.
    """
    packer = _Packer()
    try:
        root = packer.node(obj)
        packer.layout()
        storages = [{"file": f"data/{i}.bin", "nbytes": n} for i, n in enumerate(packer.storage_sizes())]
        manifest = {"magic": MAGIC, "version": VERSION, "byteorder": "little", "storages": storages,
                    "arrays": packer.records, "root": root}
        text = json.dumps(manifest, separators=(",", ":")).encode("ascii")
    except _Located as e:
        raise e.kind(f"save: {e.message} at {e.where()}") from None
    except RecursionError:
        raise ValueError(f"save: the structure is nested too deeply (more than Python's recursion limit of "
                         f"{sys.getrecursionlimit()} levels allows)") from None
    if isinstance(f, (str, os.PathLike)):
        _write_atomically(os.fsdecode(os.fspath(f)), lambda fh: _write_zip(fh, text, packer))
    elif hasattr(f, "write"):
        _write_zip(f, text, packer)
    else:
        raise TypeError(f"save: expected a path or a binary file object, got {_type_name(f)!r}")


# ---------------------------------------------------------------- loading

def _bad(message):
    return _Located(RuntimeError, message)


def _want(node, keys, what):
    if type(node) is not dict or node.keys() != keys:
        raise _bad(f"{what} should be an object with keys {sorted(keys)}")


def _int(value, what, low=0):
    if type(value) is not int or value < low:
        raise _bad(f"{what} should be an integer >= {low}, got {value!r}")
    return value


def _list(value, what):
    if type(value) is not list:
        raise _bad(f"{what} should be a list")
    return value


def _read_into(src, view):
    """Fills ``view`` from the file ``src`` in chunks (zipfile copies what it reads); returns the
    number of bytes read (fewer at the end of the file)."""
    filled = 0
    while filled < len(view):
        chunk = src.read(min(len(view) - filled, 1 << 20))
        if not chunk:
            break
        view[filled:filled + len(chunk)] = chunk
        filled += len(chunk)
    return filled


class _Unpacker:
    """Reads one checkpoint: checks the manifest, then rebuilds the root node, reading storages
    and making arrays only when a node refers to them."""

    def __init__(self, zf, size, place):
        self.zf, self.size, self.place = zf, size, place
        self.buffers, self.objects = {}, {}  # buffers: by (entry name, read as bytes)
        self.unread = size  # bytes the storages still read may add up to
        raw = self.entry(_MANIFEST, as_bytes=True)
        try:
            manifest = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise _bad(f"manifest.json is not valid JSON: {e}") from None
        self.storages, self.records, self.root = self.check(manifest)

    def entry(self, name, nbytes=None, as_bytes=False):
        """The bytes of an archive entry, in a fresh (aligned, writable) uint8 array, or in a
        bytes object (read in one piece: building one from an array would copy it)."""
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise _bad(f"missing entry {name!r}") from None
        if info.compress_type != zipfile.ZIP_STORED:
            raise _bad(f"entry {name!r} is compressed; rlpipe stores entries uncompressed")
        if nbytes is not None and info.file_size != nbytes:
            raise _bad(f"entry {name!r} holds {info.file_size} bytes but the manifest says {nbytes}")
        if info.file_size > self.size:
            raise _bad(f"entry {name!r} claims {info.file_size} bytes, more than the whole file")
        try:
            with self.zf.open(info) as src:
                if as_bytes:
                    buf = src.read(info.file_size)
                    filled = len(buf)
                else:
                    buf = np.empty(info.file_size, np.uint8)
                    filled = _read_into(src, memoryview(buf))
                if filled != info.file_size or src.read(1):
                    raise _bad(f"entry {name!r} is truncated")
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, RuntimeError) as e:
            # RuntimeError: zipfile's word for encrypted entries and unsupported zip versions
            raise _bad(f"cannot read entry {name!r}: {e}") from None
        return buf

    def check(self, manifest):
        if type(manifest) is not dict or manifest.get("magic") != MAGIC:
            raise _bad("manifest.json lacks the rlpipe magic")
        version = manifest.get("version")
        if type(version) is not int or version != VERSION:
            newer = type(version) is int and version > VERSION
            raise _bad(f"format version {version!r}" + (f" is newer than this rlpipe reads ({VERSION})" if newer
                                                         else " is not supported"))
        _want(manifest, _TOP_KEYS, "the manifest")
        if manifest["byteorder"] != "little":
            raise _bad(f"byte order {manifest['byteorder']!r} is not supported")
        storages = []
        for i, s in enumerate(_list(manifest["storages"], "storages")):
            _want(s, {"file", "nbytes"}, f"storages[{i}]")
            if type(s["file"]) is not str:
                raise _bad(f"storages[{i}].file should be a string")
            storages.append((s["file"], _int(s["nbytes"], f"storages[{i}].nbytes")))
        records = [self.check_record(r, i, storages) for i, r in enumerate(_list(manifest["arrays"], "arrays"))]
        return storages, records, manifest["root"]

    @staticmethod
    def check_record(rec, i, storages):
        what = f"arrays[{i}]"
        keys = _RECORD_KEYS.get(rec.get("kind")) if type(rec) is dict and type(rec.get("kind")) is str else None
        if keys is None:
            raise _bad(f"{what} has no known kind")
        _want(rec, keys, what)
        dt = _BY_NAME.get(rec["dtype"]) if type(rec["dtype"]) is str else None
        if dt is None:
            raise _bad(f"{what}: unknown dtype {rec['dtype']!r}")
        shape = [_int(n, f"{what}.shape") for n in _list(rec["shape"], f"{what}.shape")]
        strides = [_int(s, f"{what}.strides", low=-(1 << 62)) for s in _list(rec["strides"], f"{what}.strides")]
        if len(strides) != len(shape) or len(shape) > 64:
            raise _bad(f"{what}: shape {shape} and strides {strides} do not match")
        offset = _int(rec["offset"], f"{what}.offset")
        span = _span(offset, shape, strides, dt.itemsize)
        storage = rec["storage"]
        if span is not None:
            _int(storage, f"{what}.storage")
            if storage >= len(storages):
                raise _bad(f"{what}: storage {storage} does not exist")
            if span[0] < 0 or span[1] > storages[storage][1]:
                raise _bad(f"{what}: shape {shape} (dtype {dt.name}, strides {strides}, offset {offset}) needs "
                           f"bytes {span[0]}..{span[1]} but storage {storage} holds {storages[storage][1]}")
            nbytes = math.prod(shape) * dt.itemsize
            if nbytes > max(storages[storage][1], _MAX_VIEW_BYTES):
                raise _bad(f"{what}: array of shape {shape} (dtype {dt.name}, strides {strides}) describes {nbytes} "
                           f"bytes of a storage that holds {storages[storage][1]}; a view that repeats bytes may "
                           f"describe at most {_MAX_VIEW_BYTES}")
        if "device" in keys:
            if type(rec["requires_grad"]) is not bool or (rec["requires_grad"] and not dt.is_floating_point):
                raise _bad(f"{what}: requires_grad {rec['requires_grad']!r} is not valid for {dt.name}")
            try:
                _device(rec["device"])
            except (RuntimeError, TypeError):
                raise _bad(f"{what}: unknown device {rec['device']!r}") from None
        return _Record(rec["kind"], dt, tuple(shape), tuple(strides), offset, None if span is None else storage,
                       rec.get("device"), rec.get("requires_grad", False))

    def buffer(self, sid, as_bytes=False):
        """Storage ``sid``'s bytes (see ``entry``), read once per entry however many storages name
        it (twice for an entry named both by arrays and by bytes, which ``save`` never writes)."""
        name, nbytes = self.storages[sid]
        buf = self.buffers.get((name, as_bytes))
        if buf is None:
            if nbytes > self.unread:
                raise _bad(f"storage {sid} ({name!r}, {nbytes} bytes) and the storages read before it add up to "
                           f"more than the file holds ({self.size} bytes)")
            buf = self.buffers[name, as_bytes] = self.entry(name, nbytes, as_bytes)
            self.unread -= nbytes
        elif len(buf) != nbytes:
            raise _bad(f"entry {name!r} holds {buf.nbytes} bytes but storage {sid} says {nbytes}")
        return buf

    def host(self, r):
        """A record's NumPy array: a view of its storage's bytes (a copy on big-endian hosts)."""
        try:
            if r.storage is None:
                return np.empty(r.shape, r.dtype.np)
            view = np.ndarray(r.shape, _little(r.dtype.np), buffer=self.buffer(r.storage), offset=r.offset,
                              strides=r.strides)
        except (ValueError, OverflowError) as e:
            raise _bad(f"array of shape {list(r.shape)}: {e}") from None
        return view if view.dtype == r.dtype.np else view.astype(r.dtype.np)

    # ---- nodes ----
    def node(self, n):
        if type(n) in _SCALARS:
            return n
        decode = _DECODE.get(n.get("t")) if type(n) is dict and type(n.get("t")) is str else None
        if decode is None:
            raise _bad(f"unknown node {str(n)[:60]}")
        return decode(self, n)

    def sequence(self, n):
        _want(n, {"t", "v"}, f"a {n['t']} node")
        out = []
        for i, item in enumerate(_list(n["v"], "a list node's items")):
            try:
                out.append(self.node(item))
            except _Located as e:
                e.path.append(i)
                raise
        return out if n["t"] == "list" else tuple(out)

    def mapping(self, n):
        _want(n, {"t", "k", "v"}, f"a {n['t']} node")
        keys, values = _list(n["k"], "dict keys"), _list(n["v"], "dict values")
        if len(keys) != len(values):
            raise _bad("a dict node has different numbers of keys and values")
        out = {} if n["t"] == "dict" else collections.OrderedDict()
        for key, value in zip(keys, values):
            if type(key) not in (str, int):
                raise _bad(f"dict key {key!r} is neither a string nor an integer")
            try:
                out[key] = self.node(value)
            except _Located as e:
                e.path.append(key)
                raise
        if len(out) != len(keys):
            raise _bad("a dict node repeats a key")
        return out

    def array(self, n):
        _want(n, {"t", "i"}, "an array node")
        i = _int(n["i"], "an array node's index")
        if i >= len(self.records):
            raise _bad(f"array {i} does not exist")
        if i not in self.objects:
            self.objects[i] = self.make(self.records[i])
        return self.objects[i]

    def make(self, r):
        host = self.host(r)
        if r.kind == "ndarray":
            return host
        t = self.place(wrap(host, CPU), r.device)
        if r.kind == "parameter":
            return _parameter_type(t, r.requires_grad)
        return t.requires_grad_(True) if r.requires_grad else t

    def bytes_(self, n):
        _want(n, {"t", "s"}, "a bytes node")
        sid = _int(n["s"], "a bytes node's storage")
        if sid >= len(self.storages):
            raise _bad(f"storage {sid} does not exist")
        return self.buffer(sid, as_bytes=True)  # bytes are immutable: one object serves every node

    def numpy_scalar(self, n):
        _want(n, {"t", "dtype", "v"}, "a numpy node")
        dt = _BY_NAME.get(n["dtype"]) if type(n["dtype"]) is str else None
        value = n["v"]
        expected = float if dt is not None and dt.is_floating_point else bool if dt is _dtypes.bool else int
        if dt is None or type(value) is not expected:
            raise _bad(f"bad numpy scalar {n['dtype']!r}: {value!r}")
        try:
            return dt.np.type(value)
        except OverflowError:
            raise _bad(f"{value} does not fit in {dt.name}") from None

    def object_(self, n):
        _want(n, {"t", "type", "v"}, "an object node")
        from_state = _BY_REGISTERED_NAME.get(n["type"]) if type(n["type"]) is str else None
        if from_state is None:
            raise _bad(f"unknown object type {str(n['type'])[:60]!r}")
        state = self.node(n["v"])
        try:
            return from_state(state)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, RuntimeError) as e:
            raise _bad(f"a {n['type']} object could not be rebuilt ({type(e).__name__}: {e})") from None

    def dtype_(self, n):
        _want(n, {"t", "v"}, "a dtype node")
        if type(n["v"]) is not str or n["v"] not in _BY_NAME:
            raise _bad(f"unknown dtype {n['v']!r}")
        return _BY_NAME[n["v"]]

    def device_(self, n):
        _want(n, {"t", "v"}, "a device node")
        try:
            return _device(n["v"])
        except (RuntimeError, TypeError):
            raise _bad(f"unknown device {n['v']!r}") from None


_DECODE = {"list": _Unpacker.sequence, "tuple": _Unpacker.sequence, "dict": _Unpacker.mapping,
           "odict": _Unpacker.mapping, "array": _Unpacker.array, "bytes": _Unpacker.bytes_,
           "numpy": _Unpacker.numpy_scalar, "dtype": _Unpacker.dtype_, "device": _Unpacker.device_,
           "object": _Unpacker.object_}


def _describe(f):
    if isinstance(f, (str, os.PathLike)):
        return repr(os.fsdecode(os.fspath(f)))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"<{type(f).__name__}>"


def _restore(t, location, name):
    """``t`` on the device it was saved from, or a RuntimeError saying how to load it elsewhere."""
    try:
        dev = resolve(location)
    except RuntimeError as e:
        raise RuntimeError(f"load: {name} holds a tensor saved on {location}, which is not available here ({e}); "
                           f"pass map_location='cpu' (or a dict or a function) to load it elsewhere") from None
    return t.to(dev)


def _moved(t, target, name):
    """``t`` on ``target``, the device ``map_location`` chose; a RuntimeError naming the file if it is missing."""
    try:
        dev = resolve(target)
    except RuntimeError as e:
        raise RuntimeError(f"load: {name}: map_location asks for {target}, which is not available here ({e})") from None
    return t.to(dev)


def _placer(map_location, name):
    """A function (CPU tensor, saved location) -> the tensor where ``map_location`` puts it."""
    def as_device(spec):
        try:
            return _device(spec)
        except (RuntimeError, TypeError) as e:
            raise type(e)(f"load: {name}: map_location={map_location!r} names no device ({e})") from None

    if map_location is None:
        return lambda t, location: _restore(t, location, name)
    if isinstance(map_location, (str, _device)):
        target = as_device(map_location)
        return lambda t, location: _moved(t, target, name)
    if isinstance(map_location, dict):
        table = {str(as_device(k)): as_device(v) for k, v in map_location.items()}

        def by_table(t, location):
            return _moved(t, table[location], name) if location in table else _restore(t, location, name)
        return by_table
    if callable(map_location):
        def by_function(t, location):
            out = map_location(t, location)
            if out is None:
                return _restore(t, location, name)
            if not isinstance(out, Tensor):
                raise TypeError(f"load: map_location returned {_type_name(out)!r}; expected a Tensor or None")
            return out
        return by_function
    raise TypeError(f"load: map_location should be None, a device, a dict or a function, "
                    f"got {_type_name(map_location)!r}")


def _read(fh, name, place):
    if not getattr(fh, "seekable", lambda: False)():
        fh = io.BytesIO(fh.read())
    start = fh.tell()
    size = fh.seek(0, io.SEEK_END)
    fh.seek(start)
    try:
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, NotImplementedError) as e:
            raise _bad(f"not a zip archive: {e}") from None
        with zf:
            unpacker = _Unpacker(zf, size, place)
            try:
                return unpacker.node(unpacker.root)
            except RecursionError:
                raise _bad("the structure is nested too deeply") from None
    except _Located as e:
        where = f" at {e.where()}" if e.path else ""
        raise RuntimeError(f"load: {name} is not a valid rlpipe checkpoint ({e.message}{where})") from None


def load(f, map_location=None, weights_only=True):
    """Loads what ``save`` wrote to ``f`` (a path or a binary file object).

    Tensors go back to the device they were saved from unless ``map_location`` says otherwise:
    a device (``'cpu'``), a dict from saved to new locations (``{'cuda:0': 'cpu'}``), or a
    function ``(cpu_tensor, saved_location) -> tensor`` (None means: the saved location). Views
    of one storage share memory again when they load to the CPU. ``weights_only`` is accepted
    for PyTorch compatibility and changes nothing: loading never runs code from the file.
    """
    del weights_only
    name = _describe(f)
    place = _placer(map_location, name)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _read(fh, name, place)
    if hasattr(f, "read"):
        return _read(f, name, place)
    raise TypeError(f"load: expected a path or a binary file object, got {_type_name(f)!r}")
