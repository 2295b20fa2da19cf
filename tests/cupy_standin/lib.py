"""``cupy.lib``: only ``stride_tricks``."""
import sys
import types

import numpy.lib.stride_tricks

from ._names import NAMES as _NAMES
from ._namespace import mirror as _mirror

stride_tricks = types.ModuleType(__name__ + ".stride_tricks")
_mirror(_NAMES["cupy.lib.stride_tricks"], numpy.lib.stride_tricks, vars(stride_tricks), skip={"np"})
sys.modules[stride_tricks.__name__] = stride_tricks
