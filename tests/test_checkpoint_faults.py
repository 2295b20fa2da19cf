"""Checkpoint faults an adversarial run found: memory amplification on load, loads that write to the
file, saves killed at the wrong instant, and raw errors (MemoryError, RecursionError, ValueError
from int()) where a clear RuntimeError/ValueError naming the file or argument belongs."""
import io
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest

import rlpipe
from rlpipe.data import (LazyTensorStorage, ListStorage, PrioritizedReplayBuffer, ReplayBuffer)
from rlpipe.data import _checkpoint
from rlpipe.tensordict import TensorDict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def edit_manifest(path, edit):
    with zipfile.ZipFile(path) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    manifest = json.loads(entries["manifest.json"])
    edit(manifest)
    entries["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)


def peak_bytes(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run_python(code, cwd):
    """Runs ``code`` in a fresh interpreter (which may kill itself with os._exit)."""
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


# ---------------------------------------------------------------- 1. rlpipe.load amplifies memory

def test_load_reads_a_storage_that_many_records_name_once(tmp_path):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"w": np.zeros(4 << 20, np.uint8)}, path)

    def point_100_storages_at_one_entry(m):
        m["storages"] = m["storages"] * 100
        m["arrays"] = [dict(m["arrays"][0], storage=i) for i in range(100)]
        m["root"] = {"t": "list", "v": [{"t": "array", "i": i} for i in range(100)]}
    edit_manifest(path, point_100_storages_at_one_entry)
    out, peak = peak_bytes(lambda: rlpipe.load(path))
    assert len(out) == 100 and peak < 2 * path.stat().st_size
    out[0][0] = 7  # one entry, read once, shared by every record
    assert out[99][0] == 7


def test_load_shares_one_bytes_object_between_nodes_of_one_storage(tmp_path):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save([b"x" * (4 << 20)], path)
    edit_manifest(path, lambda m: m["root"].update(v=m["root"]["v"] * 100))
    out, peak = peak_bytes(lambda: rlpipe.load(path))
    assert len(out) == 100 and out[0] is out[99] and peak < 3 * path.stat().st_size


def overlapping_zip(path, payload):
    """A checkpoint whose entry data/0.bin holds the whole entry data/1.bin (header and data): each
    byte of data/1.bin belongs to two storages, so together they claim more than the file holds."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("data/1.bin", payload)
    inner_info = zf.getinfo("data/1.bin")
    local = inner.getvalue()[:30 + len("data/1.bin") + len(payload)]
    manifest = {"magic": "rlpipe-checkpoint", "version": 1, "byteorder": "little", "arrays": [],
                "storages": [{"file": "data/0.bin", "nbytes": len(local)},
                             {"file": "data/1.bin", "nbytes": len(payload)}],
                "root": {"t": "list", "v": [{"t": "bytes", "s": 0}, {"t": "bytes", "s": 1}]}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data/0.bin", local)
        outer = zf.getinfo("data/0.bin")
        inner_info.header_offset = outer.header_offset + 30 + len(outer.filename) + len(outer.extra)
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.filelist.append(inner_info)
        zf.NameToInfo[inner_info.filename] = inner_info


def test_load_refuses_storages_adding_up_to_more_than_the_file(tmp_path):
    path = tmp_path / "ckpt.rlp"
    overlapping_zip(path, b"y" * 10_000)
    with pytest.raises(RuntimeError, match=r"ckpt\.rlp.*more than the file"):
        rlpipe.load(path)


def test_load_refuses_a_zero_stride_blowing_up_a_small_storage(tmp_path):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"w": rlpipe.zeros(12)}, path)
    edit_manifest(path, lambda m: m["arrays"][0].update(shape=[2 ** 40], strides=[0]))
    with pytest.raises(RuntimeError, match=r"ckpt\.rlp.*array of shape \[1099511627776\].*48"):
        rlpipe.load(path)


def test_expanded_tensors_still_load(tmp_path):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save(rlpipe.ones(1).expand(1000, 1000), path)
    assert rlpipe.load(path).sum().item() == 1e6


# ---------------------------------------------------------------- 5. clear errors

@pytest.mark.parametrize("spec", ["cuda:\u00b9", "cuda:\u0661", "cuda:-1"])
def test_device_strings_with_odd_digits(spec):
    with pytest.raises(RuntimeError, match="Invalid device string"):
        rlpipe.device(spec)


@pytest.mark.parametrize("args", [("cuda", -1), (-1,)])
def test_negative_device_index(args):
    with pytest.raises(RuntimeError, match="index.*>= 0.*-1"):
        rlpipe.device(*args)


def test_load_names_the_file_for_a_bad_device(tmp_path):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"w": rlpipe.zeros(3)}, path)
    edit_manifest(path, lambda m: m["arrays"][0].update(device="cuda:\u00b9"))
    with pytest.raises(RuntimeError, match=r"ckpt\.rlp.*unknown device"):
        rlpipe.load(path)


@pytest.mark.parametrize("map_location", ["cuda:\u00b9", {"cpu": "tpu"}, {"cuda:x": "cpu"}])
def test_load_names_the_file_for_a_bad_map_location(tmp_path, map_location):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"w": rlpipe.zeros(3)}, path)
    with pytest.raises(RuntimeError, match=r"load: .*ckpt\.rlp.*map_location"):
        rlpipe.load(path, map_location=map_location)


@pytest.mark.skipif(rlpipe.cuda.is_available(), reason="needs a machine without a GPU")
def test_load_names_the_file_when_the_target_device_is_missing(tmp_path):
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"w": rlpipe.zeros(3)}, path)
    for map_location in ("cuda:0", {"cpu": "cuda:0"}):
        with pytest.raises(RuntimeError, match=r"load: .*ckpt\.rlp.*cuda:0"):
            rlpipe.load(path, map_location=map_location)


def td_checkpoint(tmp_path, edit_state):
    path = tmp_path / "td.rlp"
    rlpipe.save(TensorDict({}, batch_size=[2]), path)
    edit_manifest(path, lambda m: edit_state(m["root"]["v"]))
    return path


def set_field(name, value):
    def edit(state):
        state["v"][state["k"].index(name)] = value
    return edit


@pytest.mark.parametrize("name, value, match", [
    ("entries", {"t": "list", "v": [1, 2]}, "entries"),
    ("batch_size", {"t": "list", "v": [-3]}, r"batch_size.*-3"),
    ("batch_size", {"t": "list", "v": [2 ** 70]}, r"batch_size.*1180591620717411303424"),
    ("batch_size", {"t": "list", "v": [2 ** 40, 2 ** 40]}, r"batch_size"),
])
def test_tensordict_manifest_errors_name_the_file(tmp_path, name, value, match):
    path = td_checkpoint(tmp_path, set_field(name, value))
    with pytest.raises(RuntimeError, match=rf"td\.rlp.*{match}"):
        rlpipe.load(path)


def test_save_of_a_deeply_nested_list(tmp_path):
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match="save: .*nested too deeply"):
        rlpipe.save(deep, tmp_path / "deep.rlp")
    assert os.listdir(tmp_path) == []


def dumped(tmp_path, rb=None):
    if rb is None:
        rb = ReplayBuffer(storage=LazyTensorStorage(8), batch_size=2)
        rb.extend(rlpipe.arange(3.0))
    rb.dumps(tmp_path / "ckpt")
    return tmp_path / "ckpt"


def test_rb_loads_of_a_npy_header_declaring_too_much(tmp_path):
    path = dumped(tmp_path)
    meta = json.loads((path / "state.json").read_text())
    record = meta["state"]["_storage"]["data"]["__tensor__"]
    record["shape"] = [2 ** 40]
    (path / "state.json").write_text(json.dumps(meta))
    npy = path / record["file"]
    with open(npy, "r+b") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2 ** 40,)})
    rb = ReplayBuffer(storage=LazyTensorStorage(8))
    with pytest.raises(RuntimeError, match=r"0\.npy.*4398046511104 bytes"):
        rb.loads(path)
    assert len(rb) == 0


def test_rb_loads_of_deep_json(tmp_path):
    path = dumped(tmp_path)
    (path / "state.json").write_text('{"format": "rlpipe-replay-buffer", "version": 1, "state": '
                                     + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(RuntimeError, match="state.json.*nested too deeply"):
        ReplayBuffer(storage=LazyTensorStorage(8)).loads(path)
    (path / "state.json").write_text('{"format": "rlpipe-replay-buffer", "version": 1, "state": '
                                     + "[" * 900 + "]" * 900 + "}")
    with pytest.raises((RuntimeError, ValueError), match="ckpt|load_state_dict"):
        ReplayBuffer(storage=LazyTensorStorage(8)).loads(path)


def test_rb_dumps_of_a_deeply_nested_item(tmp_path):
    deep = []
    for _ in range(5000):
        deep = [deep]
    rb = ReplayBuffer(storage=ListStorage(4))
    rb.add(deep)
    with pytest.raises(ValueError, match="dumps: .*nested too deeply"):
        rb.dumps(tmp_path / "ckpt")
    assert os.listdir(tmp_path) == []


def edit_state(path, edit):
    meta = json.loads((path / "state.json").read_text())
    edit(meta["state"])
    (path / "state.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("cursor", [4, 7])
def test_rb_loads_refuses_a_cursor_beyond_the_length(tmp_path, cursor):
    path = dumped(tmp_path)
    edit_state(path, lambda s: s["_storage"].update(cursor=cursor))
    rb = ReplayBuffer(storage=LazyTensorStorage(8))
    with pytest.raises(ValueError, match=rf"cursor {cursor} beyond length 3"):
        rb.loads(path)
    assert len(rb) == 0


def test_storage_set_beyond_the_cursor_dumps_and_loads(tmp_path):
    """torchrl's ``storage.set(range(3), data)`` grows a storage without moving its write cursor: the
    state it dumps (length 3, cursor 0) loads back, and a later extend writes from the cursor without
    counting rows it never wrote (torchrl 0.14's writer counts them: 5 rows, two of them garbage)."""
    storage = LazyTensorStorage(10)
    storage.set(range(3), TensorDict({"a": rlpipe.arange(3)}, [3]))
    storage.dumps(tmp_path)
    loaded = LazyTensorStorage(10)
    loaded.set(range(3), TensorDict({"a": rlpipe.zeros(3, dtype=rlpipe.int64)}, [3]))
    loaded.loads(tmp_path)
    assert len(loaded) == 3 and loaded[:]["a"].tolist() == [0, 1, 2]
    rb = ReplayBuffer(storage=loaded)
    rb.extend(TensorDict({"a": rlpipe.tensor([7, 8])}, [2]))
    assert len(rb) == 3 and rb.storage[:]["a"].tolist() == [7, 8, 2]
    rb.extend(TensorDict({"a": rlpipe.tensor([9, 10])}, [2]))
    assert len(rb) == 4 and rb.storage[:]["a"].tolist() == [7, 8, 9, 10]


def test_rb_loads_refuses_priorities_on_unwritten_slots(tmp_path):
    rb = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=ListStorage(4), batch_size=2)
    rb.extend([1, 2])
    state = rb.state_dict()
    state["_sampler"]["priorities"] = np.array([0.0, 0.0, 1.0, 1.0])
    _checkpoint.save_state(str(tmp_path), state)
    fresh = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=ListStorage(4), batch_size=2)
    with pytest.raises(ValueError, match="PrioritizedSampler.*2 items"):
        fresh.loads(tmp_path)
    assert len(fresh) == 0


# ---------------------------------------------------------------- 11. arguments

def test_lazy_tensor_storage_refuses_what_cannot_be_allocated():
    with pytest.raises(ValueError, match="max_size=1180591620717411303424"):
        LazyTensorStorage(2 ** 70)
    storage = LazyTensorStorage(2 ** 50)
    rb = ReplayBuffer(storage=storage)
    with pytest.raises(ValueError, match=r"max_size=1125899906842624.*bytes"):
        rb.extend(rlpipe.zeros(3, 4))
    assert not storage.initialized and len(rb) == 0


def test_sample_refuses_an_impossible_batch_size():
    rb = ReplayBuffer(storage=LazyTensorStorage(8))
    rb.extend(rlpipe.zeros(3, 4))
    with pytest.raises(ValueError, match="batch_size=1099511627776.*bytes"):
        rb.sample(2 ** 40)
    assert rb.sample(2).shape == (2, 4)


# ---------------------------------------------------------------- 2. load_memmap never writes

def memmapped(tmp_path):
    td = TensorDict({"obs": rlpipe.arange(12.0).reshape(4, 3), "nested": {"r": rlpipe.ones(4)}}, batch_size=[4])
    td.memmap_(tmp_path)
    return tmp_path


def file_states(root):
    return {p: (p.stat().st_size, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def assert_load_memmap_refuses(path, match):
    before = file_states(path)
    with pytest.raises(RuntimeError, match=match):
        TensorDict.load_memmap(path)
    assert file_states(path) == before


def test_load_memmap_of_a_truncated_leaf(tmp_path):
    path = memmapped(tmp_path)
    with open(path / "obs.memmap", "r+b") as f:
        f.truncate(os.path.getsize(path / "obs.memmap") - 8)
    assert_load_memmap_refuses(path, r"'obs'.*float32\[4, 3\].*48 bytes.*40")


def test_load_memmap_of_a_header_declaring_a_huge_shape(tmp_path):
    path = memmapped(tmp_path)
    meta = json.loads((path / "meta.json").read_text())
    meta["leaves"]["obs"]["shape"] = [2 ** 40, 3]
    meta["batch_size"] = [2 ** 40]
    (path / "meta.json").write_text(json.dumps(meta))
    with open(path / "obs.memmap", "r+b") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2 ** 40, 3)})
    assert_load_memmap_refuses(path, r"'obs'.*13194139533312 bytes")


def test_writes_to_a_loaded_memmap_stay_in_memory(tmp_path):
    path = memmapped(tmp_path)
    before = file_states(path)
    loaded = TensorDict.load_memmap(path)
    assert loaded.is_memmap() and loaded.is_locked
    loaded["obs"][0] = -1.0  # writable, copy-on-write
    loaded["nested", "r"].zero_()
    assert loaded["obs"][0].tolist() == [-1.0] * 3
    assert file_states(path) == before
    assert TensorDict.load_memmap(path)["obs"][0].tolist() == [0.0, 1.0, 2.0]


def test_load_memmap_of_deep_meta_json(tmp_path):
    path = memmapped(tmp_path)
    (path / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RuntimeError, match="load_memmap"):
        TensorDict.load_memmap(path)


@pytest.mark.parametrize("batch_size", [[-1], [2 ** 70]])
def test_load_memmap_of_a_bad_batch_size(tmp_path, batch_size):
    path = memmapped(tmp_path)
    meta = json.loads((path / "meta.json").read_text())
    meta.update(batch_size=batch_size, leaves={}, nested=[])
    (path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(RuntimeError, match="load_memmap.*batch_size"):
        TensorDict.load_memmap(path)


# ---------------------------------------------------------------- 4. interrupted saves

def test_save_removes_its_own_stale_temporaries(tmp_path):
    stale = [tmp_path / ".ckpt.rlp.0123456789ab.tmp", tmp_path / ".ckpt.rlp.ba9876543210.tmp"]
    kept = [tmp_path / ".other.rlp.0123456789ab.tmp", tmp_path / ".ckpt.rlp.backup", tmp_path / "ckpt.rlp.tmp",
            tmp_path / ".ckpt.rlp.xyz.tmp"]
    for p in stale + kept:
        p.write_bytes(b"left behind")
    rlpipe.save([1, 2], tmp_path / "ckpt.rlp")
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt.rlp"] + [p.name for p in kept])


def test_save_killed_midway_leaves_a_temporary_the_next_save_removes(tmp_path):
    result = run_python("""
        import os, numpy as np, rlpipe
        from rlpipe import serialization
        real = serialization._zip_entry
        def entry(zf, name, data):
            if name == "data/0.bin":
                os._exit(3)
            real(zf, name, data)
        serialization._zip_entry = entry
        rlpipe.save({"w": np.zeros(1 << 20)}, "ckpt.rlp")
    """, tmp_path)
    assert result.returncode == 3, result.stderr
    assert len(os.listdir(tmp_path)) == 1 and os.listdir(tmp_path)[0].startswith(".ckpt.rlp.")
    rlpipe.save([1], tmp_path / "ckpt.rlp")
    assert os.listdir(tmp_path) == ["ckpt.rlp"]


@pytest.mark.parametrize("kill_at", range(3))
def test_memmap_over_an_old_folder_never_leaves_a_mixed_checkpoint(tmp_path, monkeypatch, kill_at):
    old = TensorDict({"a": rlpipe.zeros(4), "b": rlpipe.zeros(4), "n": {"c": rlpipe.zeros(4)}}, batch_size=[4])
    old.memmap_(tmp_path)
    new = TensorDict({"a": rlpipe.ones(4), "b": rlpipe.ones(4), "n": {"c": rlpipe.ones(4)}}, batch_size=[4])
    real = rlpipe.backends.cpu.mapped_file
    calls = []

    def killed(*args, **kwargs):  # an interrupt while a file is made (the test below kills for real)
        calls.append(args)
        if len(calls) > kill_at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(rlpipe.backends.cpu, "mapped_file", killed)
    with pytest.raises(KeyboardInterrupt):
        new.memmap_(tmp_path)
    monkeypatch.undo()
    try:
        loaded = TensorDict.load_memmap(tmp_path)
    except RuntimeError as e:
        assert "load_memmap" in str(e)
        return
    values = {loaded[k].sum().item() for k in ("a", "b", ("n", "c"))}
    assert values in ({0.0}, {4.0})


MEMMAP_KILLED = """
    import os, rlpipe
    from rlpipe.tensordict import TensorDict
    new = TensorDict({{"a": rlpipe.ones(4), "b": rlpipe.ones(4), "n": {{"c": rlpipe.ones(4)}}}}, batch_size=[4])
    calls, real_map, real_replace = [], rlpipe.backends.cpu.mapped_file, os.replace
    def killed(real):
        def call(*args, **kwargs):
            calls.append(args)
            if len(calls) > {kill_at}:
                os._exit(3)
            return real(*args, **kwargs)
        return call
    rlpipe.backends.cpu.mapped_file, os.replace = killed(real_map), killed(real_replace)
    new.memmap_("ckpt")
"""


@pytest.mark.parametrize("kill_at", range(11))
def test_memmap_killed_at_any_file_step_leaves_the_old_or_the_new_checkpoint_or_none(tmp_path, kill_at):
    """Killed while staging (3 files made, 2 meta.json renamed in the staging folders), an older
    checkpoint loads as it was; killed among the 5 moves, the folder is refused or complete."""
    old = TensorDict({"a": rlpipe.zeros(4), "b": rlpipe.zeros(4), "n": {"c": rlpipe.zeros(4)}}, batch_size=[4])
    old.memmap_(tmp_path / "ckpt")
    result = run_python(MEMMAP_KILLED.format(kill_at=kill_at), tmp_path)
    assert result.returncode == (3 if kill_at < 10 else 0), result.stderr
    try:
        loaded = TensorDict.load_memmap(tmp_path / "ckpt")
    except RuntimeError as e:
        assert "load_memmap" in str(e) and kill_at >= 5
        return
    values = {loaded[k].sum().item() for k in ("a", "b", ("n", "c"))}
    assert values == ({0.0} if kill_at < 5 else {4.0})


# ---------------------------------------------------------------- 3. dumps over an existing checkpoint

DUMPS_KILLED = """
    import os, sys, rlpipe
    from rlpipe.data import ReplayBuffer, ListStorage
    rb = ReplayBuffer(storage=ListStorage(8))
    rb.extend([1, 2, 3])
    rb.dumps("ckpt")
    rb.extend([4, 5])
    kill_at, calls = {kill_at}, []
    real = {name}
    def killed(*args):
        calls.append(args)
        if len(calls) > kill_at:
            os._exit(3)
        return real(*args)
    {name} = killed
    rb.dumps("ckpt")
    print(len(calls))
"""


@pytest.mark.slow
def test_dumps_killed_at_any_rename_leaves_a_loadable_checkpoint(tmp_path):
    name = "os.replace"
    unkilled = run_python(DUMPS_KILLED.format(kill_at=10 ** 6, name=name), tmp_path)
    assert unkilled.returncode == 0, unkilled.stderr
    renames = int(unkilled.stdout)
    assert renames == 3  # state.json into the new folder, the old folder aside, the new one in place
    for kill_at in range(renames):
        folder = tmp_path / str(kill_at)
        folder.mkdir()
        result = run_python(DUMPS_KILLED.format(kill_at=kill_at, name=name), folder)
        assert result.returncode == 3, result.stderr
        rb = ReplayBuffer(storage=ListStorage(8))
        rb.loads(folder / "ckpt")
        assert rb[:] in ([1, 2, 3], [1, 2, 3, 4, 5])
        rb.dumps(folder / "ckpt")  # the next save cleans up what the killed one left
        assert os.listdir(folder) == ["ckpt"]
        rb2 = ReplayBuffer(storage=ListStorage(8))
        rb2.loads(folder / "ckpt")
        assert rb2[:] == rb[:]


def test_loads_in_the_window_between_the_renames(tmp_path, monkeypatch):
    rb = ReplayBuffer(storage=ListStorage(8))
    rb.extend([1, 2, 3])
    rb.dumps(tmp_path / "ckpt")
    rb.extend([4])
    real = os.replace
    seen = []

    def check_between(src, dst):
        real(src, dst)
        if os.path.basename(src) == "ckpt":  # the old checkpoint just moved aside
            fresh = ReplayBuffer(storage=ListStorage(8))
            fresh.loads(tmp_path / "ckpt")
            seen.append(fresh[:])
    monkeypatch.setattr(os, "replace", check_between)
    rb.dumps(tmp_path / "ckpt")
    assert seen == [[1, 2, 3, 4]]
