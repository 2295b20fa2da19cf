"""Imported first by every benchmark: NumPy's BLAS on one thread (set before NumPy loads), and the
peers (torch and friends) on one thread too when they are importable. rlpipe never depends on them."""
import importlib
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def import_peer(*names):
    """(torch, *modules) imported and pinned to one thread, or all None when any is missing."""
    try:
        modules = tuple(importlib.import_module(name) for name in ("torch", *names))
    except ImportError:
        return (None,) * (1 + len(names))
    modules[0].set_num_threads(1)
    return modules
