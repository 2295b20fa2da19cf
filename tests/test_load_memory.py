"""Loading a file takes its size in memory once: ``rlpipe.safetensors.load_file`` and ``rlpipe.load``
read each tensor's (or bytes object's) data straight into its own buffer, and keep nothing open or
mapped. Measured as the growth of the peak resident set (VmHWM) of a fresh interpreter that loads a
64 MiB file, imports done before the first measurement. (``ru_maxrss`` cannot say: the kernel carries
the peak of the process that started the interpreter across exec, and under pytest that peak is larger
than anything the load adds.)"""
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rlpipe
import rlpipe.safetensors as st

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
SLACK = 4 * MIB  # allocator and interpreter noise around the load

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status: Linux")

CHILD = """
    import hashlib, json, os, sys
    import numpy as np
    import rlpipe, rlpipe.safetensors

    def digests(tree):
        if isinstance(tree, dict):
            return {k: digests(v) for k, v in tree.items()}
        data = tree if isinstance(tree, bytes) else tree.numpy().reshape(-1).view(np.uint8)
        return hashlib.sha256(data).hexdigest()

    def peak():  # bytes; VmHWM, not ru_maxrss: that one starts at the peak of the process that ran us
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024

    path = sys.argv[1]
    before = peak()
    loaded = LOAD(path)
    growth = peak() - before
    first = digests(loaded)
    with open(path, "r+b") as f:  # overwrite the file in place: loaded data must not change
        f.write(bytes(os.path.getsize(path)))
    with open("/proc/self/maps") as f:
        mapped = path in f.read()
    print(json.dumps({"growth": growth, "digests": first, "after_overwrite": digests(loaded), "mapped": mapped}))
"""


def load_in_child(load, path):
    env = dict(os.environ, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD).replace("LOAD", load), str(path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def digest(array):
    return hashlib.sha256(np.ascontiguousarray(array).reshape(-1).view(np.uint8)).hexdigest()


def assert_loaded_once(result, path, expected):
    size = os.path.getsize(path)
    assert result["growth"] <= 1.3 * size + SLACK, f"peak RSS grew by {result['growth'] / MIB:.1f} MiB for a " \
                                                   f"{size / MIB:.1f} MiB file"
    assert result["digests"] == expected and result["after_overwrite"] == expected
    assert not result["mapped"]


def halves():
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal(8 * MIB // 2).astype(np.float32),  # 16 MiB
            "b": rng.integers(-2**62, 2**62, size=6 * MIB, dtype=np.int64)}  # 48 MiB


@pytest.mark.parametrize("save, load", [(st.save_file, "rlpipe.safetensors.load_file"), (rlpipe.save, "rlpipe.load")],
                         ids=["safetensors", "rlpipe"])
def test_tensors_are_read_once(tmp_path, save, load):
    path = tmp_path / "weights"
    arrays = halves()
    save({k: rlpipe.from_numpy(v) for k, v in arrays.items()}, path)
    result = load_in_child(load, path)
    assert_loaded_once(result, path, {k: digest(v) for k, v in arrays.items()})


def test_loaded_safetensors_are_writable_and_equal_to_the_saved_ones(tmp_path):
    path = tmp_path / "w.safetensors"
    saved = {"w": rlpipe.randn(3, 4), "h": rlpipe.randn(5).to(rlpipe.bfloat16), "i": rlpipe.arange(4),
             "m": rlpipe.tensor([True, False]), "e": rlpipe.zeros(0, 3)}
    st.save_file(saved, path)
    loaded = st.load_file(path)
    assert set(loaded) == set(saved)
    for name, tensor in saved.items():
        assert loaded[name].dtype == tensor.dtype and loaded[name].shape == tensor.shape
        assert loaded[name].numpy().tobytes() == tensor.numpy().tobytes()
    loaded["w"].add_(1)  # its own memory, not a read-only view of a bytes object
    assert loaded["w"].equal(saved["w"] + 1)


def test_rlpipe_load_reads_bytes_once(tmp_path):
    path = tmp_path / "blob.rlp"
    blob = np.random.default_rng(1).bytes(64 * MIB)
    rlpipe.save({"blob": blob}, path)
    result = load_in_child("rlpipe.load", path)
    assert_loaded_once(result, path, {"blob": hashlib.sha256(blob).hexdigest()})


@pytest.mark.parametrize("damage", ["truncated", "garbage_header"])
def test_a_file_that_changes_after_the_header_check_raises_a_safetensor_error(tmp_path, monkeypatch, damage):
    path = tmp_path / "w.safetensors"
    st.save_file({"w": rlpipe.randn(64)}, path)
    data = path.read_bytes()
    path.write_bytes(data[:-8] if damage == "truncated" else data[:8] + b"x" * (len(data) - 8))
    monkeypatch.setattr(st.safetensors, "safe_open", lambda *args, **kwargs: contextlib.nullcontext())
    with pytest.raises(st.SafetensorError, match="changed while"):
        st.load_file(path)
