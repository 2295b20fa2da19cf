"""``cupyx.scipy.special``: SciPy's special-function ufuncs with CuPy's operand rules."""
import scipy.special

from ..._names import NAMES as _NAMES
from ..._ufuncs import ufunc as _ufunc

for _name in _NAMES["cupyx.scipy.special"]:
    if isinstance(getattr(scipy.special, _name, None), type(scipy.special.erf)):
        globals()[_name] = _ufunc(getattr(scipy.special, _name), _name)
del _name

# CuPy's Hurwitz zeta is a two-argument ufunc; SciPy's public zeta wraps its ufunc in a function.
zeta = _ufunc(scipy.special._ufuncs._zeta, "zeta")
