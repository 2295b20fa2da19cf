"""A strict CuPy stand-in for running rlpipe's GPU code paths on a CPU, in tests only.

NumPy does the math; the arrays (``_array.ndarray``) behave as CuPy's where CuPy differs from
NumPy: no implicit host conversion, CuPy's ``flags``, 0-d results of reductions, TypeError for
host arrays given to device operations, arrays tied to one of two fake devices. Only names that
real CuPy has are offered (``_names.py``, derived from CuPy itself by ``derive_names.py``).

``tests/conftest.py`` installs it as ``cupy`` and ``cupyx`` when ``RLPIPE_CUPY_STANDIN=1``.
"""
import numpy as np

from . import _ufuncs, cuda, fft, lib, linalg, random
from ._array import _wrap, ndarray
from ._array import call_numpy as _call_numpy, unsupported as _unsupported, writable_diagonal as _writable_diagonal
from ._device import get_device_id as _get_device_id
from ._names import NAMES as _NAMES
from ._namespace import mirror as _mirror, numpy_function as _numpy_function
from ._ufuncs import ufunc

from .kernels import ElementwiseKernel, RawKernel, ReductionKernel


def _host_data(obj):
    """``obj`` as NumPy data: stand-in arrays inside lists are read back, host data kept."""
    if isinstance(obj, ndarray):
        return obj._array
    if isinstance(obj, (list, tuple)):
        return [_host_data(o) for o in obj]
    return obj


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, blocking=False):
    """A new array on the current device from host data (NumPy arrays, lists, scalars) or a
    stand-in array (copied across devices as CuPy does)."""
    storage = np.array(_host_data(obj), dtype=dtype, copy=True, order=order, ndmin=ndmin)
    return _wrap(storage, _get_device_id())


def asarray(a, dtype=None, order=None, *, blocking=False):
    """``a`` itself when it is a stand-in array of ``dtype``; otherwise a new device array."""
    if isinstance(a, ndarray):
        if dtype is None or np.dtype(dtype) == a.dtype:
            return a
        return a.astype(dtype)
    return array(a, dtype=dtype, order="K" if order is None else order)


asanyarray = asarray


def ascontiguousarray(a, dtype=None):
    if isinstance(a, ndarray) and a.flags.c_contiguous and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    if isinstance(a, ndarray):
        return _call_numpy(np.ascontiguousarray, (a,), {"dtype": dtype})
    return array(a, dtype=dtype, order="C")


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    """A NumPy copy of a stand-in array; host data through ``numpy.asarray``."""
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    result = np.asarray(a, order=order)
    if out is not None:
        out[...] = result
        return out
    return result


def get_array_module(*args):
    import sys
    if any(isinstance(a, ndarray) for a in args):
        return sys.modules[__name__]
    return np


def from_dlpack(array):
    """Only stand-in arrays (device memory) can be imported, as a view."""
    if isinstance(array, ndarray):
        return _wrap(array._array, array._device_id)
    if hasattr(array, "__dlpack_device__") and array.__dlpack_device__()[0] == 1:
        raise BufferError("cupy.from_dlpack: the producer's data is on the host (kDLCPU), "
                          "not on a CUDA device")
    raise _unsupported(array)


def take(a, indices, axis=None, out=None):
    """CuPy copies host indices to the device; out-of-range indices wrap around, as CuPy's do."""
    if not isinstance(indices, ndarray):
        indices = array(indices, dtype=np.int64)  # so that an empty list or range is an index too
    return _call_numpy(np.take, (a, indices), {"axis": axis, "out": out, "mode": "wrap"})


def may_share_memory(a, b, max_work=None):
    return bool(np.may_share_memory(a._array, b._array))


def shares_memory(a, b, max_work=None):
    return bool(np.shares_memory(a._array, b._array))


def is_available():
    return True


globals().update({name: getattr(_ufuncs, name) for name in _NAMES["cupy"] if hasattr(_ufuncs, name)})
_mirror(_NAMES["cupy"], np, globals(), skip={"ndarray", "ufunc", "asarray", "array"})
diagonal = _numpy_function(_writable_diagonal, "diagonal")  # writable, as CuPy's

