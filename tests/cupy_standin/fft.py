"""``cupy.fft``: NumPy's FFTs on the stored arrays."""
import numpy.fft

from ._names import NAMES as _NAMES
from ._namespace import mirror as _mirror

_mirror(_NAMES["cupy.fft"], numpy.fft, globals())
