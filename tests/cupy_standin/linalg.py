"""``cupy.linalg``: NumPy's linear algebra on the stored arrays."""
import numpy.linalg

from ._names import NAMES as _NAMES
from ._namespace import mirror as _mirror

_mirror(_NAMES["cupy.linalg"], numpy.linalg, globals())
