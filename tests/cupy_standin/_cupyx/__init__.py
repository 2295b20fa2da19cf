"""The stand-in's ``cupyx``: ``scatter_add`` and ``scipy.special``."""
import numpy as np

from .._array import ndarray as _ndarray, unsupported as _unsupported
from .._ufuncs import add as _add
from . import scipy

# atomicAdd exists for these element types only; CuPy refuses the others (int64 among them)
_SCATTER_ADD_TYPES = (np.int32, np.float16, np.float32, np.float64, np.uint32, np.uint64, np.ulonglong)


def scatter_add(a, slices, value):
    """``a[slices] += value``, adding once per occurrence of a repeated index (as atomics do)."""
    if not isinstance(a, _ndarray):
        raise _unsupported(a)
    if not issubclass(a.dtype.type, _SCATTER_ADD_TYPES):
        raise TypeError("scatter_add only supports int32, float16, float32, float64, uint32, uint64, "
                        "as data type")
    _add.at(a, slices, value)
