"""A full disk: memory-mapped files get their space reserved before they are mapped, so writing
into them can no longer kill the process with SIGBUS; the caller gets OSError(ENOSPC) naming the
file, and the TensorDict, the storage and an older checkpoint stay as they were.

The real-disk tests mount a 1 MiB tmpfs (root only) and run each scenario in a child process, so
that the SIGBUS of an unreserved map shows as a failed test, not a dead test run. The others
make ``os.posix_fallocate`` report ENOSPC and run everywhere."""
import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rlpipe
from rlpipe.backends import cpu
from rlpipe.data import LazyMemmapStorage
from rlpipe.tensordict import MemoryMappedTensor, TensorDict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a fresh 1 MiB tmpfs."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a 1 MiB tmpfs needs root and mount(8); the ENOSPC tests below cover the rest")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True,
                             text=True)
    if mounted.returncode:
        pytest.skip(f"mount -t tmpfs is not permitted here: {mounted.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)


def run_child(code, disk):
    """Runs ``code`` (with ``disk`` bound to the small disk's path) in a fresh interpreter; fails
    the test with its output if it did not exit cleanly (a SIGBUS included)."""
    env = dict(os.environ, PYTHONPATH=REPO)
    source = f"DISK = {str(disk)!r}\n" + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", source], cwd=disk.parent, env=env, capture_output=True, text=True,
                          timeout=120)
    killed = " (killed by SIGBUS)" if done.returncode == -signal.SIGBUS else ""
    assert done.returncode == 0, f"exit status {done.returncode}{killed}\n{done.stdout}\n{done.stderr}"
    return done.stdout


CHILD_PRELUDE = """
    import errno, gc, os
    import numpy as np
    import rlpipe
    from rlpipe.tensordict import TensorDict

    def floats(kib, value):
        return rlpipe.full((kib * 256,), float(value))

    def enospc(fn):
        try:
            fn()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            return e
        raise AssertionError("no OSError(ENOSPC)")

    def fill(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT)
        try:
            enospc(lambda: [os.write(fd, bytes(1 << 16)) for _ in range(1 << 20)])
        finally:
            os.close(fd)

    def files(root):
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
"""


def test_memmap_to_a_full_disk_raises_enospc_and_keeps_the_tensordict(small_disk):
    run_child(CHILD_PRELUDE + """
    td = TensorDict({"a": floats(256, 1), "n": {"b": floats(1024, 2)}}, [])  # 1.25 MiB
    prefix = os.path.join(DISK, "ckpt")
    e = enospc(lambda: td.memmap_(prefix))
    assert e.filename.startswith(prefix) and e.filename.endswith("b.memmap"), e.filename
    assert not td.is_locked and not td.is_memmap() and type(td["n", "b"]) is rlpipe.Tensor
    assert td["a"].eq(1).all() and td["n", "b"].eq(2).all()
    assert files(DISK) == [], files(DISK)  # what it staged is gone again
    td["a"] += 1  # still a working TensorDict
    small = TensorDict({"a": floats(256, 3)}, [])
    small.memmap_(prefix)  # the space came back
    assert TensorDict.load_memmap(prefix)["a"].eq(3).all()
    """, small_disk)


@pytest.mark.parametrize("new_kib", [(512, 640), (384, 512)], ids=["too_big", "fits_only_without_the_old_one"])
def test_memmap_over_an_old_checkpoint_on_a_full_disk_keeps_it_loadable(small_disk, new_kib):
    run_child(CHILD_PRELUDE + f"""
    prefix = os.path.join(DISK, "ckpt")
    TensorDict({{"a": floats(256, 1), "n": {{"b": floats(128, 2)}}}}, []).memmap_(prefix)  # 384 KiB
    new = TensorDict({{"a": floats({new_kib[0]}, 5), "n": {{"b": floats({new_kib[1]}, 6)}}}}, [])
    enospc(lambda: new.memmap_(prefix))
    old = TensorDict.load_memmap(prefix)
    assert old["a"].eq(1).all() and old["n", "b"].eq(2).all() and old["a"].shape == (256 * 256,)
    assert not new.is_locked and new["a"].eq(5).all() and new["n", "b"].eq(6).all()
    assert files(DISK) == ["ckpt/a.memmap", "ckpt/meta.json", "ckpt/n/b.memmap", "ckpt/n/meta.json"], files(DISK)
    """, small_disk)


def test_consolidate_to_a_full_disk_keeps_the_old_file(small_disk):
    run_child(CHILD_PRELUDE + """
    path = os.path.join(DISK, "storage.bin")
    with open(path, "wb") as f:
        f.write(b"old")
    td = TensorDict({"a": floats(1536, 1)}, [])
    enospc(lambda: td.consolidate(path))
    with open(path, "rb") as f:
        assert f.read() == b"old"
    assert files(DISK) == ["storage.bin"] and not td.is_locked
    import json
    small = TensorDict({"a": floats(256, 1)}, []).consolidate(path)
    # the file: the 256 KiB storage, then the metadata as JSON and its length (tensordict 0.14's layout)
    meta_bytes = len(json.dumps(small._consolidated["metadata"]).encode()) + 8
    assert small["a"].eq(1).all() and os.path.getsize(path) == 256 * 1024 + meta_bytes
    """, small_disk)


def test_memmap_storage_keeps_its_rows_when_the_disk_fills_up(small_disk):
    out = run_child(CHILD_PRELUDE + """
    from rlpipe.data import LazyMemmapStorage
    storage = LazyMemmapStorage(600, scratch_dir=os.path.join(DISK, "rb"))  # rows of 1 KiB: 600 KiB
    storage.set(range(10), TensorDict({"obs": rlpipe.zeros(10, 256)}, [10]))
    fill(os.path.join(DISK, "filler"))
    rows = rlpipe.arange(600 * 256, dtype=rlpipe.float32).reshape(600, 256)
    storage.set(range(600), TensorDict({"obs": rows}, [600]))  # writes every page of the map
    assert len(storage) == 600 and storage.get(range(600))["obs"].equal(rows)
    other = LazyMemmapStorage(600, scratch_dir=os.path.join(DISK, "other"))
    try:
        other.set(range(10), TensorDict({"obs": rlpipe.zeros(10, 256)}, [10]))
    except (OSError, ValueError) as e:  # ValueError: the free-space check before allocating
        print("second storage refused:", e)
    else:
        raise AssertionError("a second 600 KiB storage fit on a full 1 MiB disk")
    assert len(other) == 0 and not other.initialized
    os.remove(os.path.join(DISK, "filler"))
    storage.cleanup()
    del storage  # its maps hold the space of its removed files
    gc.collect()
    other.set(range(10), TensorDict({"obs": rlpipe.ones(10, 256)}, [10]))  # the space came back
    assert len(other) == 10 and other.get(range(10))["obs"].eq(1).all()
    """, small_disk)
    assert "second storage refused" in out


# ---------------------------------------------------------------- ENOSPC from fallocate, on any disk

@pytest.fixture
def full_after(monkeypatch):
    """full_after(n): os.posix_fallocate reserves the first n files, then reports ENOSPC."""
    def arm(n):
        calls = []

        def fallocate(fd, offset, length):
            calls.append(length)
            if len(calls) > n:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "posix_fallocate", fallocate, raising=False)
        return calls
    return arm


def staged_leftovers(root):
    return [d for d, _, _ in os.walk(root) if ".rlpipe-staging-" in d]


def test_memmap_is_all_or_nothing_when_the_second_file_does_not_fit(tmp_path, full_after):
    TensorDict({"a": rlpipe.zeros(4), "n": {"b": rlpipe.zeros(4)}}, [4]).memmap_(tmp_path)
    new = TensorDict({"a": rlpipe.ones(4), "n": {"b": rlpipe.ones(4)}}, [4])
    full_after(1)
    with pytest.raises(OSError) as e:
        new.memmap_(tmp_path)
    assert e.value.errno == errno.ENOSPC and e.value.filename.endswith("b.memmap")
    assert "No space left on device" in str(e.value) and "b.memmap" in str(e.value)
    old = TensorDict.load_memmap(tmp_path)
    assert old["a"].tolist() == [0] * 4 and old["n", "b"].tolist() == [0] * 4
    assert not new.is_locked and not new.is_memmap() and new["n", "b"].tolist() == [1] * 4
    assert type(new["a"]) is rlpipe.Tensor and staged_leftovers(tmp_path) == []
    full_after(10)
    new.memmap_(tmp_path)
    assert TensorDict.load_memmap(tmp_path)["n", "b"].tolist() == [1] * 4 and new.is_memmap()


def test_memory_mapped_tensor_over_an_existing_file_keeps_it_on_enospc(tmp_path, full_after):
    path = tmp_path / "x.npy"
    MemoryMappedTensor.from_tensor(rlpipe.arange(3), filename=path)
    full_after(0)
    with pytest.raises(OSError, match="No space left on device"):
        MemoryMappedTensor.from_tensor(rlpipe.arange(5), filename=path, existsok=True)
    assert np.load(path).tolist() == [0, 1, 2] and os.listdir(tmp_path) == ["x.npy"]


def test_memmap_storage_whose_first_write_does_not_fit_stays_empty_and_usable(tmp_path, full_after):
    storage = LazyMemmapStorage(8, scratch_dir=tmp_path / "rb")
    data = TensorDict({"a": rlpipe.ones(2, 3), "b": rlpipe.zeros(2)}, [2])
    full_after(1)
    with pytest.raises(OSError) as e:
        storage.set(range(2), data)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "rb" / "1.npy")
    assert len(storage) == 0 and not storage.initialized and os.listdir(tmp_path / "rb") == []
    full_after(10)
    storage.set(range(2), data)
    assert storage.get(range(2))["a"].tolist() == [[1.0] * 3] * 2
    reopened = LazyMemmapStorage(8, scratch_dir=tmp_path / "rb")
    assert len(reopened) == 2 and reopened.get(1)["a"].tolist() == [1.0] * 3


@pytest.mark.parametrize("unsupported", [errno.EOPNOTSUPP, errno.EINVAL, None])
def test_without_fallocate_the_space_is_reserved_by_writing_zeros(tmp_path, monkeypatch, unsupported):
    def fallocate(fd, offset, length):
        raise OSError(unsupported, os.strerror(unsupported))
    if unsupported is None:  # the platform has no posix_fallocate (macOS, Windows)
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    else:
        monkeypatch.setattr(os, "posix_fallocate", fallocate, raising=False)
    path = tmp_path / "x.npy"
    array = cpu.mapped_file(path, (3 << 20,), np.uint8)
    size = os.path.getsize(path)
    assert size == array.offset + (3 << 20)
    if hasattr(os.stat(path), "st_blocks"):  # every block allocated: nothing sparse left to fault
        assert os.stat(path).st_blocks * 512 >= size
    array[-1] = 7
    array.flush()
    assert np.load(path)[-1] == 7 and not np.load(path)[:-1].any()


def test_a_mapped_npy_file_is_what_np_load_reads(tmp_path):
    array = cpu.mapped_file(tmp_path / "x.npy", (2, 3), np.int16)
    array[...] = np.arange(6).reshape(2, 3)
    array.flush()
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), np.arange(6, dtype=np.int16).reshape(2, 3))
    raw = cpu.mapped_file(tmp_path / "raw.bin", (4,), np.uint8, npy=False)
    raw[...] = [1, 2, 3, 4]
    raw.flush()
    assert (tmp_path / "raw.bin").read_bytes() == b"\1\2\3\4"
