"""CPU backend: NumPy arrays, and what NumPy alone cannot say about them.

Every backend module exposes the same names: ``xp`` (the array namespace the ops' formulas are
written against), device helpers, ``silence_fp_warnings`` (inf/nan without warnings), ``scatter_add``
(unbuffered ``a[index] += values``), ``index_add`` (the same along one dim, its positions checked),
``below`` (an integer array's range test), ``relu`` (max(x, 0)), the special functions whose
implementation depends on the library (``erf``, ``erfinv``), random generators, and (here only) the C
allocator's tuning. The fused
computations (optimizer steps, returns, activations) live one layer up, in ``rlpipe/kernels``.
"""
import ctypes
import errno
import functools
import math
import os
import sys

import numpy as np

try:  # bfloat16 for NumPy comes from ml_dtypes
    import ml_dtypes
    bfloat16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    bfloat16 = None

xp = np
name = "cpu"
ndarray = np.ndarray


def is_available():
    """Always True: NumPy is always there."""
    return True


def finfo(np_dtype):
    """NumPy's floating-point limits, bfloat16's included (through ml_dtypes)."""
    return ml_dtypes.finfo(np_dtype) if np_dtype == bfloat16 else np.finfo(np_dtype)


def device_count():
    """1: the host counts as one device."""
    return 1


def synchronize(index=None):
    """A no-op: NumPy computes synchronously."""
    pass


def asarray(obj, dtype=None, index=None):
    """An array on this backend from host data (array, list, scalar or CPU array)."""
    if hasattr(obj, "__cuda_array_interface__"):  # a CuPy array coming back to the host
        obj = obj.get()
    return np.asarray(obj, dtype=dtype)


def anonymous_shared(shape, dtype):
    """A zero-filled array in an anonymous shared memory mapping: worker processes forked afterwards
    share it, and it leaves no file or /dev/shm name behind (the array's ``base`` is the mapping)."""
    import mmap
    dtype = np.dtype(dtype)
    return np.ndarray(shape, dtype=dtype, buffer=mmap.mmap(-1, max(math.prod(shape) * dtype.itemsize, 1)))


def mapped_file(path, shape, dtype, *, npy=True):
    """A writable ``np.memmap`` of ``shape`` and ``dtype`` on the file ``path``, created (or
    overwritten) as an ``.npy`` file, or as raw bytes with ``npy=False``.

    The file's disk space is reserved before it is mapped: on a full disk this raises
    ``OSError(ENOSPC)`` naming ``path`` (and removes the file), where writing into an unreserved
    (sparse) map would kill the process with SIGBUS on the first page the disk has no room for."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    with open(path, "wb") as f:
        try:
            if npy:
                _write_npy_header(f, shape, dtype)
            offset = f.tell()
            f.flush()
            _reserve(f.fileno(), offset + math.prod(shape) * dtype.itemsize)
        except OSError as e:
            f.close()
            os.unlink(path)
            raise OSError(e.errno, f"{e.strerror} (reserving the space of a {dtype}{list(shape)} array)",
                          os.fspath(path)) from None
    return np.memmap(path, dtype=dtype, mode="r+", offset=offset, shape=shape)


def _write_npy_header(f, shape, dtype):
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    try:
        np.lib.format.write_array_header_1_0(f, header)
    except ValueError:  # a header over 64 KiB (a very large structured dtype) needs format 2.0
        np.lib.format.write_array_header_2_0(f, header)


def _reserve(fd, size):
    """Allocates the first ``size`` bytes of the file ``fd`` on disk, as zeros."""
    fallocate = getattr(os, "posix_fallocate", None)  # absent on macOS and Windows
    if fallocate is not None:
        try:
            return fallocate(fd, 0, size)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a filesystem without fallocate
                raise
    zeros = memoryview(bytes(1 << 20))
    position = os.fstat(fd).st_size
    while position < size:
        os.lseek(fd, position, os.SEEK_SET)
        position += os.write(fd, zeros[:size - position])


def full(shape, value, dtype, index=None):
    """An array of ``shape`` filled with ``value``; the integer 0 through np.zeros (calloc'd
    memory, about half of np.full's time on small arrays; a float -0.0 keeps its sign)."""
    if type(value) is int and value == 0:
        return np.zeros(shape, dtype)
    return np.full(shape, value, dtype=dtype)


def to_host(a):
    """The array itself: CPU arrays already live in host memory."""
    return a


def supports(dtype):
    """Always True: NumPy holds every rlpipe dtype (bfloat16 through ml_dtypes)."""
    return True


try:  # NumPy 2 keeps its floating-point error settings in a context variable: setting it is ~0.05 us
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    # silence_fp_warnings() turns NumPy's divide/overflow/invalid warnings off in this context (torch
    # never warns: 1/0 is inf, log(-1) nan) and returns the token restore_fp_warnings(token) takes;
    # both are the context variable's own C methods, called once per op
    silence_fp_warnings = functools.partial(_extobj_contextvar.set, _make_extobj(all="ignore"))
    restore_fp_warnings = _extobj_contextvar.reset
except (ImportError, AttributeError, TypeError):  # another NumPy layout: the public context, ~1 us
    def silence_fp_warnings():
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore_fp_warnings(token):
        token.__exit__(None, None, None)


def without_fp_warnings(fn):
    """``fn`` run with NumPy's floating-point warnings off (an optimizer step on an inf gradient
    gives nan, as in torch, without a warning)."""
    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        token = silence_fp_warnings()
        try:
            return fn(*args, **kwargs)
        finally:
            restore_fp_warnings(token)
    return quiet


def may_share_memory(a, b):
    """Whether two NumPy arrays might overlap in memory (NumPy's conservative test)."""
    return np.may_share_memory(a, b)


def writable(a):
    """Whether ``a`` may be written in place: NumPy marks broadcast views (several elements on one
    memory location) and read-only buffers."""
    return a.flags.writeable


def scatter_add(target, index, values):
    """target[index] += values, adding once per occurrence of a repeated index."""
    np.add.at(target, index, values)


def along(positions, dim):
    """The index that picks ``positions`` (a 1-d integer array) along ``dim`` and every position
    of the other dims; along dim 0 the bare array."""
    return positions if dim == 0 else (slice(None),) * dim + (positions,)


def index_add(target, dim, positions, values):
    """``scatter_add`` of ``values`` at ``positions`` (1-d, native int64) along ``dim`` where every
    position lies in [0, target.shape[dim]); else an IndexError, nothing written. NumPy's add.at
    checks every index before it writes, but reads a negative one from the end: negatives are
    refused first. Up to 256 positions, their sign bytes are tested at once, as ASCII (below 0x80
    exactly where the int64 is not negative; a copy of 2 KiB at most, 0.2 us for 101 positions
    where an argmin's fixed cost is 0.3 us); beyond, by one argmin, which grows more slowly."""
    if positions.size <= 256:
        negative = not positions.tobytes()[_SIGN_BYTES].isascii()
    else:
        negative = positions.item(positions.argmin()) < 0
    if negative:
        raise IndexError("a negative position")
    _add_at(target, positions if dim == 0 else along(positions, dim), values)


# where each int64's most significant byte lies in its bytes
def relu(x):
    """max(x, 0) elementwise, NaN kept: NumPy's maximum, bit for bit. A large float array is compared
    with a block of zeros, a slice at a time, rather than with the scalar 0, which NumPy runs through an
    unvectorized loop (about 3x slower: 123 against 43 us for 409 600 float32 entries)."""
    if x.size < _RELU_BLOCKED or x.dtype.kind != "f" or not x.flags.c_contiguous:
        return np.maximum(x, 0)
    zeros = _zero_blocks.get(x.dtype)
    if zeros is None:
        zeros = np.zeros(_ZERO_BLOCK, x.dtype)
        zeros.flags.writeable = False
        _zero_blocks[x.dtype] = zeros
    out = np.empty_like(x)
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for lo in range(0, x.size, _ZERO_BLOCK):
        hi = min(lo + _ZERO_BLOCK, x.size)
        np.maximum(flat_x[lo:hi], zeros[:hi - lo], out=flat_out[lo:hi])
    return out


_ZERO_BLOCK = 1 << 16  # entries of the zero block relu compares with (one per dtype, read-only)
_RELU_BLOCKED = 4096  # below this many entries the scalar loop is as fast
_zero_blocks = {}


_SIGN_BYTES = slice(7, None, 8) if sys.byteorder == "little" else slice(0, None, 8)
_add_at = np.add.at  # looked up once: c51.py calls index_add 256 times per batch


# the unsigned dtype of each integer width: a view as it puts negative values above every positive one
UNSIGNED = {d.itemsize: d for d in map(np.dtype, (np.uint8, np.uint16, np.uint32, np.uint64))}


def below(values, n):
    """Whether every element of a non-empty integer (or bool) array lies in [0, n): seen as
    unsigned, negatives are above any n, so one argmax decides (a fraction of two comparisons
    and two reductions)."""
    u = values.view(UNSIGNED[values.dtype.itemsize])
    return u.item(u.argmax()) < n


def erf(x):
    """The error function (SciPy's), in x's dtype."""
    from scipy.special import erf as _erf  # SciPy's erf is exact to float64 precision
    return _erf(x).astype(x.dtype, copy=False)


def erfinv(x):
    """The inverse error function (SciPy's), in x's dtype."""
    from scipy.special import erfinv as _erfinv
    return _erfinv(x).astype(x.dtype, copy=False)


def lgamma(x):
    """log |Gamma(x)| (SciPy's gammaln), in x's dtype."""
    from scipy.special import gammaln
    return gammaln(x).astype(x.dtype, copy=False)


def digamma(x):
    """The derivative of lgamma (SciPy's psi), in x's dtype."""
    from scipy.special import psi
    return psi(x).astype(x.dtype, copy=False)


def zeta(s, q):
    """The Hurwitz zeta function (trigamma is zeta(2, q))."""
    from scipy.special import zeta as _zeta
    return _zeta(s, q).astype(q.dtype, copy=False)


# ---- the C allocator ----------------------------------------------------------------------
# NumPy takes array memory from malloc. glibc serves a block of M_MMAP_THRESHOLD bytes or more
# (128 KiB at start) with its own mmap and gives it back with munmap when freed, and it returns
# free memory at the top of the heap to the system once more than M_TRIM_THRESHOLD has gathered
# there. Its adaptive rule raises both after the first such block is freed, but only to that
# block's size (threshold) and twice it (trim): a training step that frees and re-allocates a few
# megabytes of 256x256 float32 temporaries (256 KiB each) gives pages back and faults them in
# again, about a thousand minor page faults per SAC update, with their kernel time. rlpipe
# therefore fixes both at the values the adaptive rule reaches at its ceiling (a 32 MiB block freed):
# blocks under 32 MiB come from the heap, and up to 64 MiB of free heap is kept for reuse. Larger
# arrays (replay-buffer storage) are still mapped and unmapped on their own. This is applied once,
# when rlpipe is imported, on Linux with glibc only; it is skipped when RLPIPE_MALLOPT=0 or when
# the user already tunes malloc through MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
# MALLOC_TOP_PAD_ or GLIBC_TUNABLES.

MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers (malloc.h)
_USER_MALLOC_VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")
malloc_tuning = {"applied": False, "reason": "not attempted"}


def tune_malloc(environ=os.environ):
    """Sets glibc's mmap and trim thresholds as described above; returns (and stores in
    ``malloc_tuning``) what was done: ``{"applied": True, "mmap_threshold": ..., "trim_threshold":
    ...}`` or ``{"applied": False, "reason": ...}``."""
    global malloc_tuning
    malloc_tuning = _tune_malloc(environ)
    return malloc_tuning


def _tune_malloc(environ):
    if environ.get("RLPIPE_MALLOPT", "1") == "0":
        return {"applied": False, "reason": "RLPIPE_MALLOPT=0"}
    user = [name for name in _USER_MALLOC_VARS if name in environ]
    if user:
        return {"applied": False, "reason": f"malloc is tuned by the environment ({', '.join(user)})"}
    if not sys.platform.startswith("linux"):
        return {"applied": False, "reason": f"not Linux ({sys.platform})"}
    try:
        libc = ctypes.CDLL(None)
        gnu_get_libc_version, mallopt = libc.gnu_get_libc_version, libc.mallopt
    except (OSError, AttributeError):
        return {"applied": False, "reason": "the C library is not glibc"}
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return {"applied": False, "reason": "mallopt refused the thresholds"}
    gnu_get_libc_version.restype = ctypes.c_char_p
    return {"applied": True, "mmap_threshold": MMAP_THRESHOLD, "trim_threshold": TRIM_THRESHOLD,
            "glibc": gnu_get_libc_version().decode()}


tune_malloc()


# ---- random numbers -----------------------------------------------------------------

class RandomState:
    """The bit generator behind an ``rlpipe.Generator`` on the CPU."""

    def __init__(self, seed, index=None):
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def uniform(self, shape, dtype, low=0.0, high=1.0):
        """Samples uniform in [low, high) of ``shape``, drawn in float32 for float32 (float64 otherwise) and cast to
        ``dtype``."""
        out = self.rng.random(shape, dtype=np.float64 if dtype != np.float32 else np.float32)
        if low != 0.0 or high != 1.0:
            return (out * (high - low) + low).astype(dtype, copy=False)
        out = out.astype(dtype, copy=False)
        if out.dtype.itemsize < 4:  # rounding to a half type can reach 1.0; keep [0, 1)
            np.minimum(out, out.dtype.type(1 - 2.0 ** -(ml_dtypes.finfo(out.dtype).nmant + 1)), out=out)
        return out

    def normal(self, shape, dtype, mean=0.0, std=1.0):
        """Normal samples of ``shape`` with ``mean`` and ``std``, cast to ``dtype``."""
        out = self.rng.standard_normal(shape, dtype=np.float64 if dtype != np.float32 else np.float32)
        if mean != 0.0 or std != 1.0:
            out = out * std + mean
        return out.astype(dtype, copy=False)

    def integers(self, low, high, shape, dtype):
        """int64 draws uniform in [low, high), cast to ``dtype``."""
        return self.rng.integers(low, high, size=shape, dtype=np.int64).astype(dtype, copy=False)

    def permutation(self, n):
        """A random permutation of 0..n-1 as int64."""
        return self.rng.permutation(n).astype(np.int64, copy=False)

    def standard_gamma(self, concentration):
        """Gamma(concentration, 1) draws, one per element, in the concentration's dtype."""
        return self.rng.standard_gamma(concentration.astype(np.float64)).astype(concentration.dtype, copy=False)

    def get_state(self):
        """The PCG64 bit generator's state (a dict, as NumPy gives it)."""
        return self.rng.bit_generator.state

    def set_state(self, state):
        """Restores a state from ``get_state``."""
        self.rng.bit_generator.state = state


# ---- BLAS threads ---------------------------------------------------------------------

_BLAS_PREFIXES = ("scipy_openblas_", "openblas_")
_BLAS_SUFFIXES = ("64_", "")


@functools.lru_cache(maxsize=1)
def _openblas():
    """(get_num_threads, set_num_threads) of the OpenBLAS bundled with NumPy's wheel, or None when NumPy
    uses another BLAS (MKL, Accelerate) or a system one this lookup does not find."""
    import glob
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _BLAS_PREFIXES:
            for suffix in _BLAS_SUFFIXES:
                get, put = (getattr(lib, f"{prefix}{what}_num_threads{suffix}", None) for what in ("get", "set"))
                if get is not None and put is not None:
                    get.restype, put.argtypes = ctypes.c_int, (ctypes.c_int,)
                    return get, put
    return None


def blas_threads():
    """The number of threads NumPy's OpenBLAS uses, or None when it cannot be read."""
    found = _openblas()
    return None if found is None else found[0]()


def set_blas_threads(n):
    """Sets the threads of NumPy's OpenBLAS; returns False (nothing changed) when it cannot be reached."""
    found = _openblas()
    if found is None:
        return False
    found[1](n)
    return True
