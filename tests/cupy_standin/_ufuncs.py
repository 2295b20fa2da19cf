"""CuPy's ufuncs over NumPy's: operands must be stand-in arrays or scalars (no host arrays)."""
import numpy as np

from ._array import call_numpy
from ._names import NAMES


class ufunc:
    """``cupy.ufunc``: calls the NumPy ufunc on the stored arrays, with CuPy's operand rules."""

    def __init__(self, np_ufunc, name):
        self._ufunc = np_ufunc
        self.__name__ = self.name = name
        self.nin, self.nout, self.nargs = np_ufunc.nin, np_ufunc.nout, np_ufunc.nargs
        self.types = np_ufunc.types

    def __call__(self, *args, **kwargs):
        return call_numpy(self._ufunc, args, kwargs, strict=True)

    def reduce(self, array, *args, **kwargs):
        return call_numpy(self._ufunc.reduce, (array,) + args, kwargs, strict=True)

    def accumulate(self, array, *args, **kwargs):
        return call_numpy(self._ufunc.accumulate, (array,) + args, kwargs, strict=True)

    def reduceat(self, array, indices, *args, **kwargs):
        return call_numpy(self._ufunc.reduceat, (array, indices) + args, kwargs, strict=True)

    def outer(self, a, b, **kwargs):
        return call_numpy(self._ufunc.outer, (a, b), kwargs, strict=True)

    def at(self, a, indices, b=None):
        args = (a, indices) if b is None else (a, indices, b)
        call_numpy(self._ufunc.at, args, {})

    def __repr__(self):
        return "<ufunc '%s'>" % self.name


def _numpy_ufunc(name):
    found = getattr(np, name, None)
    if isinstance(found, np.ufunc):
        return found
    return None


_UFUNCS = {name: ufunc(_numpy_ufunc(name), name) for name in NAMES["cupy"] if _numpy_ufunc(name)}
globals().update(_UFUNCS)
