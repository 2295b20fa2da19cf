"""Imported first by every benchmark: NumPy's BLAS on one thread (set before NumPy loads), and the
peers (torch and friends) on one thread too when they are importable. rlpipe never depends on them.

It prints the OpenBLAS kernel NumPy runs: some machines pin it with ``OPENBLAS_CORETYPE`` (older
OpenBLAS builds misbehave on their processors), which slows a current NumPy's matrix products; to
measure without the pin, unset it (with ``OPENBLAS_L2_SIZE``) for that one command:
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/bench_rnn.py``."""
import ctypes
import glob
import importlib
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def openblas_core():
    """The name of the OpenBLAS kernel NumPy's wheel runs (e.g. 'Haswell', 'SkylakeX'), or None."""
    import numpy
    for lib in glob.glob(os.path.join(os.path.dirname(numpy.__file__), "..", "numpy.libs", "*openblas*")):
        corename = getattr(ctypes.CDLL(lib), "scipy_openblas_get_corename64_", None)
        if corename is not None:
            corename.restype = ctypes.c_char_p
            return corename().decode()
    return None


print(f"NumPy's OpenBLAS kernel: {openblas_core()} (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')})")


def import_peer(*names):
    """(torch, *modules) imported and pinned to one thread, or all None when any is missing."""
    try:
        modules = tuple(importlib.import_module(name) for name in ("torch", *names))
    except ImportError:
        return (None,) * (1 + len(names))
    modules[0].set_num_threads(1)
    return modules
