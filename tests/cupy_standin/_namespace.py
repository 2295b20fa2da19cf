"""Builds a stand-in namespace from NumPy's: one wrapper per name that real CuPy exposes."""
import functools

import numpy as np

from ._array import call_numpy

# Functions that only make views (no kernel): CuPy runs them whatever the current device.
VIEW_FUNCTIONS = frozenset({
    "transpose", "swapaxes", "moveaxis", "rollaxis", "expand_dims", "squeeze", "broadcast_to",
    "broadcast_arrays", "atleast_1d", "atleast_2d", "atleast_3d", "split", "array_split", "hsplit",
    "vsplit", "dsplit", "flip", "fliplr", "flipud", "diagonal", "real", "imag", "reshape", "ravel",
    "as_strided", "sliding_window_view",
    # allocation only, on the current device
    "empty_like", "zeros_like", "ones_like", "full_like",
    # host-side answers about arrays
    "ndim", "shape", "size", "result_type", "common_type", "may_share_memory", "shares_memory",
})


def numpy_function(func, name):
    """A stand-in for the NumPy function ``func``: unwraps arrays, runs, wraps the result."""
    check_device = name not in VIEW_FUNCTIONS

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return call_numpy(func, args, kwargs, check_device=check_device)
    return wrapper


def mirror(names, numpy_module, target, skip=()):
    """Fill ``target`` (a module's globals) with a stand-in for each of ``names`` that
    ``numpy_module`` has: types and constants as they are, functions wrapped."""
    for name in names:
        if name in target or name in skip or not hasattr(numpy_module, name):
            continue
        found = getattr(numpy_module, name)
        if isinstance(found, type) or not callable(found):
            target[name] = found  # scalar types, dtype, finfo, constants
        elif not isinstance(found, np.ufunc):
            target[name] = numpy_function(found, name)
