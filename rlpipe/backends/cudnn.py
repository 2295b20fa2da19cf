"""``rlpipe.backends.cudnn``: torch's cuDNN switches, kept so training scripts that set them run.

rlpipe does not use cuDNN: these flags have no effect on the NumPy backend, nor on the CuPy
backend, whose hand-written kernels are deterministic whatever ``deterministic`` says. They are
plain module attributes a script may read and set (``rlpipe.backends.cudnn.deterministic = True``).
"""
import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available():
    """False: rlpipe never calls cuDNN."""
    return False


def version():
    """None, as torch answers where cuDNN is absent."""
    return None


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Sets the flags inside a ``with`` block and restores them after it (torch's ``cudnn.flags``)."""
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    module = globals()
    saved = {n: module[n] for n in names}
    module.update(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit,
                  deterministic=deterministic, allow_tf32=allow_tf32)
    try:
        yield
    finally:
        module.update(saved)
