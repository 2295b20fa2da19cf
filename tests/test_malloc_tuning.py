"""The CPU backend's malloc tuning: glibc's mmap and trim thresholds are fixed at import, so a
training step re-uses heap memory instead of unmapping and faulting in its temporaries again.

The fault counts are read in a fresh interpreter (page faults and mallopt are per process)."""
import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from rlpipe.backends import cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLIBC_LINUX = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
glibc_only = pytest.mark.skipif(not GLIBC_LINUX, reason="malloc tuning applies to glibc on Linux only")

# an MLP 17-256-256-6 trained with Adam at batch 256: the SAC-sized network of issue 16
TRAIN_SCRIPT = """
    import json, resource
    import numpy as np
    import rlpipe
    from rlpipe import nn
    rlpipe.manual_seed(0)
    net = nn.Sequential(nn.Linear(17, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 6))
    opt = rlpipe.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = rlpipe.tensor(rng.standard_normal((256, 17)).astype(np.float32))
    y = rlpipe.tensor(rng.standard_normal((256, 6)).astype(np.float32))

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()

    for _ in range(10):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        step()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50
    print(json.dumps({"faults": faults, "tuning": rlpipe.backends.cpu.malloc_tuning}))
"""


def run_training(**env):
    """Faults per training step after warm-up, and the backend's malloc_tuning, in a new process
    whose environment has no malloc variables but ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES", "RLPIPE_MALLOPT"))}
    environ.update(env, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(TRAIN_SCRIPT)], env=environ, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@glibc_only
def test_training_step_does_not_fault_after_warmup():
    out = run_training()
    assert out["tuning"]["applied"] is True
    assert out["tuning"]["mmap_threshold"] == 32 << 20 and out["tuning"]["trim_threshold"] == 64 << 20
    # each 256x256 float32 temporary is 64 pages: one unmapped and re-faulted block per step is over this bound
    assert out["faults"] < 20, out


@glibc_only
def test_opting_out_leaves_glibc_defaults():
    out = run_training(RLPIPE_MALLOPT="0")
    assert out["tuning"] == {"applied": False, "reason": "RLPIPE_MALLOPT=0"}


@glibc_only
def test_users_own_malloc_settings_are_left_alone():
    out = run_training(MALLOC_TRIM_THRESHOLD_="1000000")
    assert out["tuning"] == {"applied": False,
                             "reason": "malloc is tuned by the environment (MALLOC_TRIM_THRESHOLD_)"}


def test_tune_malloc_reasons(monkeypatch):
    try:
        assert cpu.tune_malloc({"RLPIPE_MALLOPT": "0"}) == {"applied": False, "reason": "RLPIPE_MALLOPT=0"}
        assert cpu.malloc_tuning == {"applied": False, "reason": "RLPIPE_MALLOPT=0"}
        assert cpu.tune_malloc({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1", "MALLOC_TOP_PAD_": "0"}) == {
            "applied": False, "reason": "malloc is tuned by the environment (MALLOC_TOP_PAD_, GLIBC_TUNABLES)"}
        monkeypatch.setattr(cpu.sys, "platform", "darwin")
        assert cpu.tune_malloc({}) == {"applied": False, "reason": "not Linux (darwin)"}
        monkeypatch.setattr(cpu.sys, "platform", "linux")
        monkeypatch.setattr(cpu.ctypes, "CDLL", lambda name: object())  # a C library without glibc's names
        assert cpu.tune_malloc({}) == {"applied": False, "reason": "the C library is not glibc"}
    finally:
        monkeypatch.undo()
        cpu.tune_malloc()


@glibc_only
def test_tune_malloc_applies_in_this_process():
    out = cpu.tune_malloc({})
    assert out["applied"] is True and out["mmap_threshold"] == cpu.MMAP_THRESHOLD
    assert out["glibc"] == platform.libc_ver()[1]
