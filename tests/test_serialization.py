"""rlpipe.save / rlpipe.load: round trips, map_location, refused objects, damaged files, atomic writes."""
import collections
import io
import json
import math
import os
import pickle
import zipfile

import numpy as np
import pytest

import rlpipe
from rlpipe import serialization

ALL_DTYPES = [rlpipe.bool, rlpipe.uint8, rlpipe.int8, rlpipe.int16, rlpipe.int32, rlpipe.int64, rlpipe.float16,
              rlpipe.bfloat16, rlpipe.float32, rlpipe.float64]


def roundtrip(obj, tmp_path, **load_kwargs):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save(obj, path)
    return rlpipe.load(path, **load_kwargs)


def assert_same_tensor(a, b):
    assert isinstance(b, rlpipe.Tensor)
    assert b.dtype is a.dtype and b.shape == a.shape and b.device == a.device
    assert b.requires_grad == a.requires_grad
    np.testing.assert_array_equal(a.detach().numpy().astype(np.float64), b.detach().numpy().astype(np.float64))


def read_zip(path):
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def write_zip(path, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)


def edit_manifest(path, edit):
    """Rewrites a checkpoint with ``edit(manifest)`` applied to its manifest."""
    entries = read_zip(path)
    manifest = json.loads(entries["manifest.json"])
    edit(manifest)
    entries["manifest.json"] = json.dumps(manifest).encode()
    write_zip(path, entries)


def saved(tmp_path, obj=None):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"w": rlpipe.arange(6.0).reshape(2, 3)} if obj is None else obj, path)
    return path


# ---------------------------------------------------------------- round trips

def test_python_values_round_trip(tmp_path):
    obj = [None, True, False, 0, -7, 2 ** 100, 1.5, -0.0, math.inf, -math.inf, "", "héllo \u2603", b"",
           b"\x00\xff" * 3, [], (), {}, [1, [2, (3, {"x": [4]})]], (1,), ("a", None)]
    out = roundtrip(obj, tmp_path)
    assert out == obj
    assert [type(v) for v in out] == [type(v) for v in obj]
    assert math.copysign(1.0, out[7]) == -1.0
    assert type(out[17][1][1]) is tuple
    assert math.isnan(roundtrip(float("nan"), tmp_path))


def test_dicts_keep_key_types_order_and_class(tmp_path):
    inner = collections.OrderedDict([("z", 1), ("a", 2), ("m", 3)])
    obj = {"b": 1, 3: "three", "a": inner, -1: {"nested": collections.OrderedDict()}}
    out = roundtrip(obj, tmp_path)
    assert out == obj and list(out) == ["b", 3, "a", -1]
    assert type(out) is dict and type(out["a"]) is collections.OrderedDict
    assert list(out["a"]) == ["z", "a", "m"]
    assert type(out[-1]["nested"]) is collections.OrderedDict


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_every_dtype_round_trips(tmp_path, dtype):
    values = [[0, 1, 0], [1, 1, 0]] if dtype is rlpipe.bool else [[0, 1, -2], [3, 100, -5]]
    if dtype is rlpipe.uint8:
        values = [[0, 1, 2], [255, 128, 7]]
    if dtype.is_floating_point:
        values = [[0.5, -1.25, float("inf")], [3.0, 1e-3, -0.0]]
    t = rlpipe.tensor(values, dtype=dtype, requires_grad=dtype.is_floating_point)
    scalar = rlpipe.tensor(values[1][1], dtype=dtype)
    empty = rlpipe.zeros(0, 4, dtype=dtype)
    out = roundtrip({"t": t, "scalar": scalar, "empty": empty}, tmp_path)
    for key, original in (("t", t), ("scalar", scalar), ("empty", empty)):
        assert_same_tensor(original, out[key])


def test_loaded_tensors_are_leaves_that_train(tmp_path):
    w = rlpipe.randn(3, 2, requires_grad=True)
    frozen = rlpipe.ones(2)
    out = roundtrip([w * 2, frozen], tmp_path)  # a non-leaf saves as a leaf, as in torch
    assert out[0].is_leaf and out[0].requires_grad and not out[1].requires_grad
    out[0].sum().backward()
    assert out[0].grad.shape == (3, 2)


def test_non_contiguous_and_expanded_tensors(tmp_path):
    base = rlpipe.arange(24.0).reshape(4, 6)
    cases = {"t": base.T, "step": base[::2, 1::2], "expand": rlpipe.arange(3.0).expand(5, 3), "col": base[:, 2]}
    out = roundtrip(cases, tmp_path)
    for key, original in cases.items():
        assert_same_tensor(original, out[key])


def test_same_object_loads_as_one_object(tmp_path):
    t = rlpipe.ones(3)
    a = np.arange(4)
    out = roundtrip({"x": t, "y": [t, (t,)], "a": a, "b": a}, tmp_path)
    assert out["x"] is out["y"][0] is out["y"][1][0]
    assert out["a"] is out["b"]


def test_views_keep_sharing_memory(tmp_path):
    base = rlpipe.arange(12.0).reshape(3, 4)
    row, twin = base[1], base.detach()
    out = roundtrip([base, row, twin], tmp_path)
    assert out[0] is not out[2]
    out[1][0] = -1.0  # a write through the loaded view shows in the loaded base and its twin
    assert out[0][1, 0].item() == -1.0 and out[2][1, 0].item() == -1.0


def test_tensor_and_numpy_array_sharing_memory(tmp_path):
    a = np.zeros(5, np.float32)
    t = rlpipe.from_numpy(a)
    out = roundtrip((a, t), tmp_path)
    out[1][2] = 7.0
    assert out[0][2] == 7.0


def test_a_slice_saves_only_its_own_bytes(tmp_path):
    big = rlpipe.zeros(100_000)
    path = saved(tmp_path, [big[:3], big[-2:]])
    assert path.stat().st_size < 2_000
    out = rlpipe.load(path)
    out[0][0] = 1.0  # the two slices never overlapped, so they stay independent
    assert out[1].tolist() == [0.0, 0.0]


def test_numpy_arrays_scalars_dtypes_devices(tmp_path):
    obj = {"arr": np.arange(6, dtype=">i4").reshape(2, 3), "f": np.float32(0.1), "i": np.int8(-3),
           "b": np.bool_(True), "bf": np.dtype(rlpipe.bfloat16.np).type(1.5), "h": np.float16(2.5),
           "dt": rlpipe.bfloat16, "dev": rlpipe.device("cuda:1"), "cpu": rlpipe.device("cpu")}
    out = roundtrip(obj, tmp_path)
    assert out["arr"].dtype == np.int32 and out["arr"].tolist() == [[0, 1, 2], [3, 4, 5]]
    for key in ("f", "i", "b", "bf", "h"):
        assert type(out[key]) is type(obj[key]) and out[key] == obj[key]
    assert out["dt"] is rlpipe.bfloat16 and out["dev"] is rlpipe.device("cuda:1")


def test_parameters_stay_parameters(tmp_path):
    parameter = pytest.importorskip("rlpipe.nn.parameter")
    p = parameter.Parameter(rlpipe.randn(2, 2))
    out = roundtrip({"p": p, "again": p}, tmp_path)
    assert type(out["p"]) is parameter.Parameter and out["p"] is out["again"]
    assert out["p"].requires_grad
    assert_same_tensor(p, out["p"])


def test_file_objects_and_path_kinds(tmp_path):
    obj = {"t": rlpipe.arange(3), "s": "x"}
    buffer = io.BytesIO()
    rlpipe.save(obj, buffer)
    buffer.seek(0)
    assert rlpipe.load(buffer)["s"] == "x"
    rlpipe.save(obj, str(tmp_path / "a.rlp"))
    assert rlpipe.load(str(tmp_path / "a.rlp"))["t"].tolist() == [0, 1, 2]

    class Stream(io.RawIOBase):  # readable, not seekable
        def __init__(self, data):
            self.inner = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self.inner.readinto(b)
    assert rlpipe.load(Stream(buffer.getvalue()))["t"].tolist() == [0, 1, 2]
    buffer.seek(0)
    assert rlpipe.load(buffer, weights_only=False)["s"] == "x"  # accepted; nothing is unpickled either way


def test_saving_is_deterministic(tmp_path):
    obj = {"a": rlpipe.arange(4.0), "b": [np.ones(2), b"xy"]}
    first, second = io.BytesIO(), io.BytesIO()
    rlpipe.save(obj, first)
    rlpipe.save(obj, second)
    assert first.getvalue() == second.getvalue()


def test_format_layout(tmp_path):
    entries = read_zip(saved(tmp_path))
    manifest = json.loads(entries["manifest.json"])
    assert manifest["magic"] == "rlpipe-checkpoint" and manifest["version"] == 1
    record, = manifest["arrays"]
    assert record["device"] == "cpu" and record["dtype"] == "float32" and record["shape"] == [2, 3]
    data = entries[manifest["storages"][record["storage"]]["file"]]
    assert np.frombuffer(data, "<f4").tolist() == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------- map_location

def cuda_file(tmp_path):
    """A checkpoint whose tensors claim to come from cuda:0 (crafted: no GPU needed)."""
    path = saved(tmp_path, {"w": rlpipe.arange(6.0).reshape(2, 3).requires_grad_(), "n": rlpipe.ones(2)})
    edit_manifest(path, lambda m: [r.update(device="cuda:0") for r in m["arrays"]])
    return path


@pytest.mark.parametrize("map_location", ["cpu", rlpipe.device("cpu"), {"cuda:0": "cpu"},
                                          {rlpipe.device("cuda:0"): rlpipe.device("cpu")}],
                         ids=["str", "device", "dict", "dict-of-devices"])
def test_cuda_file_loads_to_cpu(tmp_path, map_location):
    out = rlpipe.load(cuda_file(tmp_path), map_location=map_location)
    assert out["w"].device == "cpu" and out["w"].requires_grad and out["w"].tolist()[1] == [3.0, 4.0, 5.0]


def test_map_location_function_sees_the_saved_location(tmp_path):
    seen = []

    def to_cpu_times_ten(t, location):
        seen.append(location)
        return t * 10
    out = rlpipe.load(cuda_file(tmp_path), map_location=to_cpu_times_ten)
    assert seen == ["cuda:0", "cuda:0"] and out["n"].tolist() == [10.0, 10.0]
    assert out["w"].requires_grad and out["w"].is_leaf
    cpu_out = rlpipe.load(saved(tmp_path), map_location=lambda t, location: None)  # None: the saved place
    assert cpu_out["w"].device == "cpu"
    with pytest.raises(TypeError, match="map_location returned 'str'"):
        rlpipe.load(saved(tmp_path), map_location=lambda t, location: "oops")


def test_map_location_on_a_cpu_file(tmp_path):
    path = saved(tmp_path)
    for map_location in (None, "cpu", {"cuda:0": "cpu"}):
        assert rlpipe.load(path, map_location=map_location)["w"].device == "cpu"
    with pytest.raises(TypeError, match="map_location"):
        rlpipe.load(path, map_location=3.5)


@pytest.mark.skipif(rlpipe.cuda.is_available(), reason="checks the message given when no GPU is present")
def test_cuda_file_without_a_gpu_says_what_to_do(tmp_path):
    path = cuda_file(tmp_path)
    with pytest.raises(RuntimeError, match=r"ckpt\.rlp.*cuda:0.*map_location='cpu'"):
        rlpipe.load(path)
    with pytest.raises(RuntimeError, match=r"cuda:0.*map_location"):
        rlpipe.load(path, map_location={"cuda:1": "cpu"})


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="needs CuPy and a GPU")
def test_cuda_round_trip(tmp_path):
    t = rlpipe.randn(3, 4, device="cuda").requires_grad_()
    view = t.detach()[:, 1]
    path = saved(tmp_path, {"t": t, "view": view, "again": t})
    assert json.loads(read_zip(path)["manifest.json"])["arrays"][0]["device"] == "cuda:0"
    out = rlpipe.load(path)
    assert out["t"].device == "cuda:0" and out["t"] is out["again"] and out["t"].requires_grad
    assert out["view"].tolist() == view.tolist()
    cpu = rlpipe.load(path, map_location="cpu")
    assert cpu["t"].device == "cpu" and cpu["t"].tolist() == t.tolist()
    back = rlpipe.load(saved(tmp_path, rlpipe.arange(3.0)), map_location="cuda:0")
    assert back.device == "cuda:0" and back.tolist() == [0.0, 1.0, 2.0]


# ---------------------------------------------------------------- objects that are refused

class Custom:
    pass


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize("value, type_name", [
    ({1, 2}, "set"), (lambda: 0, "function"), (Custom(), "Custom"), (np.array([object()]), "numpy.ndarray"),
    (np.zeros(2, np.complex64), "numpy.ndarray"), (Point(1, 2), "Point"), (collections.defaultdict(int), "defaultdict"),
    (bytearray(b"x"), "bytearray"), (1 + 2j, "complex"), (np.complex128(1), "numpy.complex128"), (int, "type"),
])
def test_unsupported_objects_raise_type_error_with_their_path(tmp_path, value, type_name):
    path = tmp_path / "ckpt.rlp"
    where = r"at \['opt'\]\['x'\]\[1\]"
    with pytest.raises(TypeError, match=rf"save: cannot store object of type '[\w.]*{type_name}'.* {where}"):
        rlpipe.save({"opt": {"x": [0, value]}}, path)
    assert not path.exists() and not list(tmp_path.iterdir())


def test_other_refusals(tmp_path):
    with pytest.raises(TypeError, match=r"at the top level"):
        rlpipe.save({1}, io.BytesIO())
    with pytest.raises(TypeError, match=r"dict key of type 'tuple' at \['a'\]"):
        rlpipe.save({"a": {(1, 2): 3}}, io.BytesIO())
    with pytest.raises(TypeError, match=r"dict key of type 'bool'"):
        rlpipe.save({True: 1}, io.BytesIO())
    loop = [1]
    loop.append({"again": loop})
    with pytest.raises(ValueError, match=r"contains itself at \[1\]\['again'\]"):
        rlpipe.save(loop, io.BytesIO())
    with pytest.raises(TypeError, match="path or a binary file"):
        rlpipe.save([], 42)
    with pytest.raises(TypeError, match="path or a binary file"):
        rlpipe.load(42)


def test_shared_leaves_are_not_cycles(tmp_path):
    leaf = [1, 2]
    assert roundtrip([leaf, {"x": leaf}], tmp_path) == [[1, 2], {"x": [1, 2]}]


# ---------------------------------------------------------------- damaged and foreign files

def assert_invalid(path, match=""):
    with pytest.raises(RuntimeError, match=rf"load: '.*{path.name}' is not a valid rlpipe checkpoint \(.*{match}"):
        rlpipe.load(path)


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, -22, -1])
def test_truncated_files(tmp_path, keep):
    path = saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep) if isinstance(keep, float) else keep])
    assert_invalid(path)


def test_random_bytes_and_pickles(tmp_path):
    path = tmp_path / "ckpt.rlp"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert_invalid(path, "not a zip archive")
    path.write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    assert_invalid(path, "not a zip archive")


def test_corrupted_data_byte_fails_the_checksum(tmp_path):
    path = saved(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.index(np.arange(6, dtype="<f4").tobytes())
    data[at + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    assert_invalid(path, "CRC")


class Trap:
    """Unpickling this creates a marker file: proof that code from the file ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_payloads_never_run(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(Trap(str(marker)))
    path = tmp_path / "evil.rlp"
    write_zip(path, {"manifest.json": payload})  # a pickle where the manifest belongs
    assert_invalid(path, "manifest.json is not valid JSON")
    write_zip(path, {"archive/data.pkl": payload, "archive/version": b"3"})  # torch's layout
    assert_invalid(path, "missing entry 'manifest.json'")
    path.write_bytes(payload)
    assert_invalid(path)
    # a well-formed manifest pointing at the pickle: its bytes load as plain data, nothing runs
    manifest = {"magic": "rlpipe-checkpoint", "version": 1, "byteorder": "little",
                "storages": [{"file": "data.pkl", "nbytes": len(payload)}], "arrays": [],
                "root": {"t": "bytes", "s": 0}}
    write_zip(path, {"manifest.json": json.dumps(manifest), "data.pkl": payload})
    assert rlpipe.load(path) == payload
    assert not marker.exists()


def test_foreign_zip_and_bad_manifests(tmp_path):
    path = tmp_path / "ckpt.rlp"
    write_zip(path, {"hello.txt": b"hi"})
    assert_invalid(path, "missing entry 'manifest.json'")
    write_zip(path, {"manifest.json": b"{not json"})
    assert_invalid(path, "not valid JSON")
    write_zip(path, {"manifest.json": b'{"magic": "something else"}'})
    assert_invalid(path, "magic")
    write_zip(path, {"manifest.json": b"[" * 100_000 + b"]" * 100_000})
    assert_invalid(path)


def test_compressed_entries_are_refused(tmp_path):
    path = saved(tmp_path)
    write_zip(path, read_zip(path), zipfile.ZIP_DEFLATED)
    assert_invalid(path, "compressed")


BAD_EDITS = {
    "newer version": (lambda m: m.update(version=2), "newer than this rlpipe reads"),
    "string version": (lambda m: m.update(version="1"), "not supported"),
    "extra top key": (lambda m: m.update(extra=1), "the manifest should be an object"),
    "byte order": (lambda m: m.update(byteorder="big"), "byte order"),
    "unknown dtype": (lambda m: m["arrays"][0].update(dtype="object"), "unknown dtype 'object'"),
    "shape too big": (lambda m: m["arrays"][0].update(shape=[3, 3], strides=[12, 4]), r"needs bytes 0\.\.36"),
    "negative reach": (lambda m: m["arrays"][0].update(strides=[-12, 4]), "needs bytes -12"),
    "strides mismatch": (lambda m: m["arrays"][0].update(strides=[4]), "do not match"),
    "negative dim": (lambda m: m["arrays"][0].update(shape=[-2, 3]), "shape should be an integer >= 0"),
    "bool dim": (lambda m: m["arrays"][0].update(shape=[True, 3]), "shape should be an integer"),
    "storage size": (lambda m: m["storages"][0].update(nbytes=48), "holds 24 bytes but the manifest says 48"),
    "missing storage": (lambda m: m["arrays"][0].update(storage=5), "storage 5 does not exist"),
    "missing file": (lambda m: m["storages"][0].update(file="data/9.bin"), "missing entry 'data/9.bin'"),
    "int requires grad": (lambda m: m["arrays"][0].update(dtype="int32", requires_grad=True), "requires_grad"),
    "bad device": (lambda m: m["arrays"][0].update(device="tpu:0"), "unknown device"),
    "unknown kind": (lambda m: m["arrays"][0].update(kind="module"), "no known kind"),
    "unknown node": (lambda m: m.update(root={"t": "dict", "k": ["w"], "v": [{"t": "eval", "v": "1"}]}),
                     r"unknown node .* at \['w'\]"),
    "raw list node": (lambda m: m.update(root={"t": "list", "v": [[1]]}), r"unknown node \[1\] at \[0\]"),
    "bad array index": (lambda m: m["root"]["v"].__setitem__(0, {"t": "array", "i": 3}), "array 3 does not exist"),
    "key count": (lambda m: m["root"].update(k=["w", "x"]), "different numbers of keys"),
    "repeated key": (lambda m: m.update(root={"t": "dict", "k": ["a", "a"], "v": [1, 2]}), "repeats a key"),
    "float key": (lambda m: m.update(root={"t": "dict", "k": [1.5], "v": [1]}), "neither a string"),
    "numpy overflow": (lambda m: m.update(root={"t": "numpy", "dtype": "int8", "v": 300}), "does not fit"),
    "numpy type": (lambda m: m.update(root={"t": "numpy", "dtype": "float32", "v": "1"}), "bad numpy scalar"),
    "huge shape": (lambda m: m["arrays"][0].update(shape=[2 ** 62, 2 ** 62], strides=[0, 0]), "array of shape"),
}


@pytest.mark.parametrize("edit, match", BAD_EDITS.values(), ids=BAD_EDITS.keys())
def test_invalid_manifests(tmp_path, edit, match):
    path = saved(tmp_path)
    edit_manifest(path, edit)
    assert_invalid(path, match)


def test_errors_name_file_objects(tmp_path):
    with pytest.raises(RuntimeError, match=r"load: <BytesIO> is not a valid"):
        rlpipe.load(io.BytesIO(b"junk"))
    with open(saved(tmp_path), "r+b") as fh:
        fh.truncate(30)
        fh.seek(0)
        with pytest.raises(RuntimeError, match=r"load: '.*ckpt\.rlp' is not a valid"):
            rlpipe.load(fh)
    with pytest.raises(FileNotFoundError):
        rlpipe.load(tmp_path / "missing.rlp")


# ---------------------------------------------------------------- atomic writes

def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = saved(tmp_path)
    before = path.read_bytes()
    real_entry = serialization._zip_entry
    calls = []

    def failing_entry(zf, name, data):
        calls.append(name)
        if len(calls) == 2:  # after the manifest, in the middle of the data
            raise OSError("disk full")
        real_entry(zf, name, data)
    monkeypatch.setattr(serialization, "_zip_entry", failing_entry)
    with pytest.raises(OSError, match="disk full"):
        rlpipe.save({"w": rlpipe.zeros(1000)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.rlp"]


@pytest.mark.parametrize("stage", ["fsync", "replace"])
def test_failure_at_sync_or_rename_cleans_up(tmp_path, monkeypatch, stage):
    path = saved(tmp_path)
    before = path.read_bytes()

    def fail(*args):
        raise KeyboardInterrupt if stage == "replace" else OSError("fsync failed")
    monkeypatch.setattr(serialization.os, stage, fail)
    with pytest.raises(KeyboardInterrupt if stage == "replace" else OSError):
        rlpipe.save({"w": rlpipe.ones(3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.rlp"]
    new = tmp_path / "new.rlp"
    monkeypatch.setattr(serialization.os, stage, fail)
    with pytest.raises((KeyboardInterrupt, OSError)):
        rlpipe.save([1], new)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ckpt.rlp"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_saved_file_permissions_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = saved(tmp_path)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_saving_through_a_symlink_replaces_its_target(tmp_path):
    target = saved(tmp_path)
    link = tmp_path / "latest.rlp"
    link.symlink_to(target)
    rlpipe.save([1, 2], link)
    assert link.is_symlink() and rlpipe.load(target) == [1, 2]


def _leaves(node):
    """(container, key) for every value in a JSON document, depth first."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield node, key
        yield from _leaves(value)


def test_any_single_manifest_change_loads_or_raises_runtime_error(tmp_path):
    """Replace each value of a rich manifest in turn with odd values: load must either work or
    raise RuntimeError, never another exception."""
    source = saved(tmp_path, {"t": rlpipe.arange(6.0).reshape(2, 3)[:, 1:], 1: [b"ab", np.int16(3)],
                              "o": collections.OrderedDict(x=(rlpipe.float16, rlpipe.device("cpu")))})
    entries = read_zip(source)
    manifest = json.loads(entries["manifest.json"])
    count = sum(1 for _ in _leaves(manifest))
    path = tmp_path / "mutant.rlp"
    for n in range(count):
        for odd in (None, -1, 2 ** 70, 0.5, "x", "t", [], [1], {}, {"t": []}, True):
            mutant = json.loads(entries["manifest.json"])
            container, key = list(_leaves(mutant))[n]
            container[key] = odd
            write_zip(path, {**entries, "manifest.json": json.dumps(mutant).encode()})
            try:
                rlpipe.load(path)
            except RuntimeError as e:
                assert "mutant.rlp" in str(e)


def test_any_flipped_byte_loads_or_raises_runtime_error():
    buffer = io.BytesIO()
    rlpipe.save({"t": rlpipe.arange(6.0), "b": b"xy", "l": [1, 2.5]}, buffer)
    data = buffer.getvalue()
    for i in range(len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0xFF
        try:
            rlpipe.load(io.BytesIO(bytes(damaged)))
        except RuntimeError as e:
            assert "<BytesIO> is not a valid rlpipe checkpoint" in str(e)
