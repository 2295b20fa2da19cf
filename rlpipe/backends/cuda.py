"""CUDA backend: CuPy arrays, and what CuPy alone cannot say about them.

This module offers the names of ``cpu.py``: the array namespace, device helpers, ``scatter_add``,
``index_add``, ``below``, ``relu``, the special functions (``erf``, ``erfinv``) and the random generator; and
the plumbing of hand-written kernels (``elementwise``, ``run``), with which ``rlpipe/kernels``
builds its fused computations. Every kernel call runs on the device that holds its first array.

Importing this module raises ImportError when CuPy is missing; ``backends/__init__.py``
turns that into a message saying what to install.
"""

import numpy as np

import cupy
import cupyx

from . import cpu as _cpu

xp = cupy
name = "cuda"
ndarray = cupy.ndarray
bfloat16 = None  # no bfloat16 arrays on this backend: supports() says so

# What CuPy raises when the driver, the runtime or the GPU is missing or unusable: its
# CUDARuntimeError and CUDADriverError are RuntimeErrors; a missing library is an OSError or
# an ImportError.
_CUDA_ERRORS = (RuntimeError, OSError, ImportError)


def is_available():
    """True when CuPy can see at least one GPU; False on any CUDA error."""
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except _CUDA_ERRORS:
        return False


def device_count():
    """How many GPUs CuPy can see (0 when CUDA cannot start)."""
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except _CUDA_ERRORS:
        return 0


def current_device():
    """The index of the GPU that new arrays and kernels use by default."""
    return cupy.cuda.runtime.getDevice()


def set_device(index):
    """Makes GPU ``index`` CuPy's current device."""
    cupy.cuda.runtime.setDevice(index)


def synchronize(index=None):
    """Wait until every queued kernel on GPU ``index`` (the current one by default) is done."""
    cupy.cuda.Device(index).synchronize()


def asarray(obj, dtype=None, index=None):
    """An array on GPU ``index`` (the current one by default) from host data or a CuPy array.

    A CuPy array that lives on another GPU is copied over; one already in place comes back
    as it is (or cast when ``dtype`` asks for another type).
    """
    device = cupy.cuda.Device(index)
    with device:
        if isinstance(obj, cupy.ndarray) and obj.device.id != device.id:
            obj = obj.copy()  # ndarray.copy() allocates on the current device
        return cupy.asarray(obj, dtype=dtype)


def full(shape, value, dtype, index=None):
    """An array of ``shape`` filled with ``value`` on GPU ``index`` (the current one by default)."""
    with cupy.cuda.Device(index):
        return cupy.full(shape, value, dtype=dtype)


def to_host(a):
    """A NumPy copy of ``a`` (waits for the GPU)."""
    return cupy.asnumpy(a)


def supports(dtype):
    """Whether arrays of ``dtype`` can live on this backend: every dtype but bfloat16."""
    try:
        return np.dtype(dtype).name != "bfloat16"
    except TypeError:
        return False


def may_share_memory(a, b):
    """Whether two CuPy arrays might overlap in memory; a host array never shares with a device one."""
    if isinstance(a, cupy.ndarray) and isinstance(b, cupy.ndarray):
        return bool(cupy.may_share_memory(a, b))
    return False  # a host array never shares memory with a device one


def writable(a):
    """Whether ``a`` may be written in place. CuPy arrays carry no writeable flag; the case to refuse
    is a broadcast view, where a zero stride puts several elements on one memory location."""
    return not any(stride == 0 and size > 1 for stride, size in zip(a.strides, a.shape))


# the dtypes cupyx.scatter_add takes; other integer and bool data is added as uint64
_SCATTER_ADD_DTYPES = frozenset(np.dtype(t) for t in (np.int32, np.uint32, np.uint64, np.float16, np.float32,
                                                      np.float64))


def below(values, n):
    """Whether every element of a non-empty integer (or bool) array lies in [0, n): seen as
    unsigned, negatives are above any n, so one max (one synchronization) decides."""
    return int(values.view(_cpu.UNSIGNED[values.dtype.itemsize]).max()) < n


def index_add(target, dim, positions, values):
    """``scatter_add`` of ``values`` at ``positions`` (1-d, int64) along ``dim`` where every
    position lies in [0, target.shape[dim]); else an IndexError, nothing written (cupyx's
    scatter_add does not check: here one max decides)."""
    if positions.size and not below(positions, target.shape[dim]):
        raise IndexError("a position out of range")
    scatter_add(target, _cpu.along(positions, dim), values)


def scatter_add(target, index, values):
    """target[index] += values, adding once per occurrence of a repeated index (atomics).

    cupyx.scatter_add refuses int64 and the narrow integer types; their sums are taken in uint64,
    whose wrap-around gives the same bits as two's-complement addition in any width."""
    with target.device:
        if target.dtype in _SCATTER_ADD_DTYPES:
            cupyx.scatter_add(target, index, values)
            return
        values = cupy.asarray(values).astype(np.int64, copy=False).astype(np.uint64)
        if target.dtype == np.int64:
            cupyx.scatter_add(target.view(np.uint64), index, values)
            return
        wide = target.astype(np.int64).astype(np.uint64)
        cupyx.scatter_add(wide, index, values)
        target[...] = wide.astype(target.dtype)


# ---- kernel plumbing ----------------------------------------------------------------------
# Hand-written kernels (``erf`` here, the fused computations of ``rlpipe/kernels``) accept float16,
# float32 and float64 arrays: they load the values into ``acc_t`` (float for half and single precision,
# double for double precision), compute there, and store the result in the array's own dtype. Scalar
# parameters travel as float64 kernel arguments and are narrowed to ``acc_t`` inside, the way NumPy
# narrows a Python float that meets a float32 array.

# The ElementwiseKernel machinery declares the type placeholder T (a typedef) before the preamble;
# the template takes its own parameter U instead.
ACC_PREAMBLE = r"""
template <typename U> struct rlpipe_acc { typedef float type; };
template <> struct rlpipe_acc<double> { typedef double type; };
"""

# First line of every kernel body: the type the arithmetic runs in.
_ACC = "typedef rlpipe_acc<T>::type acc_t;\n"


def elementwise(kernel_name, in_params, out_params, body, preamble=""):
    """A ``cupy.ElementwiseKernel`` named ``rlpipe_<kernel_name>`` whose ``body`` may compute in ``acc_t``
    (``preamble`` follows the one that defines it); compiled on first use per dtype."""
    return cupy.ElementwiseKernel(in_params, out_params, _ACC + body, "rlpipe_" + kernel_name,
                                  preamble=ACC_PREAMBLE + preamble)


def run(kernel, *args, **kwargs):
    """Launch ``kernel`` on the device of its first argument (an array)."""
    with args[0].device:
        return kernel(*args, **kwargs)


_ERF = elementwise("erf", "T x", "T y", "y = (T)erf((acc_t)x);")


def relu(x):
    """max(x, 0) elementwise, NaN kept (CuPy's maximum)."""
    return cupy.maximum(x, 0)


def erf(x):
    """The error function, by the backend's own elementwise kernel, in x's dtype."""
    return run(_ERF, x)


def erfinv(x):
    """The inverse error function (cupyx.scipy.special), in x's dtype."""
    from cupyx.scipy.special import erfinv as _erfinv
    return _erfinv(x).astype(x.dtype, copy=False)


def lgamma(x):
    """log |Gamma(x)| (cupyx.scipy.special.gammaln), in x's dtype."""
    from cupyx.scipy.special import gammaln
    return gammaln(x).astype(x.dtype, copy=False)


def digamma(x):
    """The derivative of lgamma (cupyx.scipy.special), in x's dtype."""
    from cupyx.scipy.special import digamma as _digamma
    return _digamma(x).astype(x.dtype, copy=False)


def zeta(s, q):
    """The Hurwitz zeta function (trigamma is zeta(2, q))."""
    from cupyx.scipy.special import zeta as _zeta
    return _zeta(s, q).astype(q.dtype, copy=False)


def all_kernels():
    """The ElementwiseKernels of this module (for compile checks; ``rlpipe.kernels`` lists its own)."""
    return [_ERF]


# ---- random numbers -----------------------------------------------------------------

class RandomState:
    """The bit generator behind an ``rlpipe.Generator`` on a GPU.

    cuRAND's Philox4x32-10 through ``cupy.random.Generator``. Its whole state is one device
    buffer of per-thread cuRAND states, so ``get_state`` copies that buffer to the host and
    ``set_state`` copies it back: the draws after a restore are exactly the ones that
    followed the snapshot.
    """

    _KIND = "cupy.random.Philox4x3210"

    def __init__(self, seed, index=None):
        self.device = cupy.cuda.Device(index)
        with self.device:
            self.bits = cupy.random.Philox4x3210(seed)
            self.rng = cupy.random.Generator(self.bits)

    def uniform(self, shape, dtype, low=0.0, high=1.0):
        """Samples uniform in [low, high) of ``shape`` on this GPU, cast to ``dtype``."""
        with self.device:
            out = self.rng.random(shape, dtype=np.float64 if dtype != np.float32 else np.float32)
            if low != 0.0 or high != 1.0:
                return (out * (high - low) + low).astype(dtype, copy=False)
            out = out.astype(dtype, copy=False)
            if out.dtype.itemsize < 4:  # rounding to float16 can reach 1.0; keep [0, 1) as the CPU does
                cupy.minimum(out, out.dtype.type(1 - 2.0 ** -(np.finfo(out.dtype).nmant + 1)), out=out)
            return out

    def normal(self, shape, dtype, mean=0.0, std=1.0):
        """Normal samples of ``shape`` with ``mean`` and ``std`` on this GPU, cast to ``dtype``."""
        with self.device:
            out = self.rng.standard_normal(
                shape, dtype=np.float64 if dtype != np.float32 else np.float32)
            if mean != 0.0 or std != 1.0:
                out = out * std + mean
            return out.astype(dtype, copy=False)

    def integers(self, low, high, shape, dtype):
        """int64 draws uniform in [low, high) on this GPU, cast to ``dtype``."""
        with self.device:
            out = self.rng.integers(low, high, size=shape, dtype=np.int64)
            return out.astype(dtype, copy=False)

    def standard_gamma(self, concentration):
        """Gamma(concentration, 1) draws, one per element, in the concentration's dtype."""
        with self.device:
            return self.rng.standard_gamma(concentration, dtype=np.float64).astype(concentration.dtype, copy=False)

    def permutation(self, n):
        """A random ordering of range(n): the order that sorts n random 63-bit keys."""
        with self.device:
            keys = self.rng.integers(0, 2 ** 63 - 1, size=int(n), dtype=np.int64)
            return cupy.argsort(keys).astype(np.int64, copy=False)

    def _state_buffer(self):
        """The device buffer holding the cuRAND states (an int8 view of it)."""
        buffer = getattr(self.bits, "_state", None)
        if isinstance(buffer, cupy.ndarray):
            return buffer
        try:  # no such attribute in this CuPy: find the buffer through its pointer and size
            nbytes = self.bits._state_size() * self.bits._type_size()
            memory = cupy.cuda.UnownedMemory(self.bits.state(), nbytes, self.bits,
                                             self.device.id)
            return cupy.ndarray((nbytes,), np.int8, cupy.cuda.MemoryPointer(memory, 0))
        except (AttributeError, TypeError) as e:
            raise RuntimeError(
                "get_state/set_state are unsupported on cuda with this CuPy version: its "
                "cupy.random generator does not expose its state buffer") from e

    def get_state(self):
        """A host snapshot of the generator (a dict holding a NumPy int8 array)."""
        with self.device:
            return {"bit_generator": self._KIND, "state": self._state_buffer().get()}

    def set_state(self, state):
        """Restore a snapshot taken by ``get_state`` (on any RandomState of this backend)."""
        saved = state.get("bit_generator") if isinstance(state, dict) else None
        if saved != self._KIND:
            raise ValueError(f"not a state of the cuda backend's generator ({self._KIND}): "
                             f"{saved!r}")
        data = np.ascontiguousarray(cupy.asnumpy(state["state"]), dtype=np.int8)
        with self.device:
            buffer = self._state_buffer()
            if data.shape != buffer.shape:
                raise ValueError(f"generator state of {data.size} bytes does not fit this "
                                 f"generator's {buffer.size}")
            buffer.set(data)
