"""``cupy.random``: the ``Generator`` API over a Philox bit generator, with CuPy's dtype rules.

The numbers are NumPy's Philox stream, not cuRAND's: tests can compare a generator with its
own restored state, not with a real GPU's draws. The bit generator keeps its whole state in one
device buffer (``state()`` is its address), so code that snapshots cuRAND's state buffer through
``cupy.cuda.UnownedMemory`` works here too.
"""
import numpy as np

from . import cuda
from ._array import _wrap, ndarray as _ndarray, unwrap as _unwrap
from ._device import get_device_id as _get_device_id
from ._ufuncs import add as _add

_STATE_FIELDS = 13  # counter (4), key (2), buffer (4), buffer_pos, has_uint32, uinteger: uint64 each


class BitGenerator:
    """A bit generator whose state lives in a device buffer of uint64 words."""

    def __init__(self, seed=None):
        self._device_id = _get_device_id()
        self._state_buffer = np.zeros(_STATE_FIELDS, np.uint64)
        self._store(np.random.Philox(seed))
        cuda._register_memory(self._state_buffer)

    def _store(self, bits):
        s = bits.state
        self._state_buffer[:] = np.concatenate([
            s["state"]["counter"], s["state"]["key"], s["buffer"],
            [s["buffer_pos"], s["has_uint32"], s["uinteger"]]]).astype(np.uint64)

    def _load(self):
        w = self._state_buffer
        bits = np.random.Philox()
        bits.state = {"bit_generator": "Philox",
                      "state": {"counter": w[0:4].copy(), "key": w[4:6].copy()},
                      "buffer": w[6:10].copy(), "buffer_pos": int(w[10]),
                      "has_uint32": int(w[11]), "uinteger": int(w[12])}
        return bits

    def _draw(self, method, *args, **kwargs):
        """One NumPy draw that advances the state kept in the device buffer."""
        bits = self._load()
        result = getattr(np.random.Generator(bits), method)(*args, **kwargs)
        self._store(bits)
        return result

    def state(self):
        """The device address of the state buffer."""
        return self._state_buffer.ctypes.data

    def _state_size(self):
        return _STATE_FIELDS

    def _type_size(self):
        return self._state_buffer.itemsize


class Philox4x3210(BitGenerator):
    """cuRAND's Philox4x32-10 in CuPy; NumPy's Philox here."""


class Generator:
    """``cupy.random.Generator``: draws on the current device."""

    def __init__(self, bit_generator):
        self.bit_generator = bit_generator

    def _new(self, values):
        return _wrap(np.asarray(values), _get_device_id())

    def random(self, size=None, dtype=np.float64, out=None):
        """float64 draws in [0, 1) cast to ``dtype`` (so a narrow dtype may round up to 1.0)."""
        y = self._new(self.bit_generator._draw("random", size, np.float64))
        if out is not None:
            out[...] = y
            y = out
        return y.astype(dtype, copy=False)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=np.float64):
        return self.random(size, np.float64) * (high - low) + low

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        dtype = np.dtype(dtype if out is None else out.dtype)
        if dtype.char not in ("f", "d"):
            raise TypeError(f"Unsupported dtype {dtype.name} for standard_normal")
        y = self._new(self.bit_generator._draw("standard_normal", size, dtype))
        if out is not None:
            out[...] = y
            return out
        return y

    def standard_gamma(self, shape, size=None, dtype=np.float64):
        """Gamma(shape, 1) draws; ``shape`` a number or a device array (read on the device)."""
        shape = _unwrap(shape, _get_device_id()) if isinstance(shape, _ndarray) else shape
        return self._new(self.bit_generator._draw("standard_gamma", shape, size, dtype))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        lo, hi1 = (0, int(low) - 1) if high is None else (int(low), int(high) - 1)
        if lo > hi1:
            raise ValueError("low >= high")
        if lo < np.iinfo(dtype).min:
            raise ValueError("low is out of bounds for {}".format(np.dtype(dtype).name))
        if hi1 > np.iinfo(dtype).max:
            raise ValueError("high is out of bounds for {}".format(np.dtype(dtype).name))
        diff = hi1 - lo + (1 if endpoint else 0)
        offsets = self.bit_generator._draw("integers", 0, diff, size, np.uint64, True)
        return _add(lo, self._new(offsets), dtype=dtype)


def default_rng(seed=None):
    return Generator(Philox4x3210(seed))
