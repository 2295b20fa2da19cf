"""Data types and PyTorch's type-promotion rules."""
import builtins
import sys

import numpy as np

from .backends import cpu as _cpu


def shown_module():
    """The module name that reprs and messages put before rlpipe's public names: ``"torch"`` when
    rlpipe stands in for torch, else ``"rlpipe"``.

    rlpipe stands in for torch when ``sys.modules["torch"]`` is a module whose ``Tensor`` is rlpipe's
    own ``Tensor`` (an import shim that maps ``torch`` to ``rlpipe``), or, before anything imported
    ``torch``, when ``torchrl`` or ``tensordict`` is rlpipe under an alias (a torchrl script that never
    imports torch itself). Then ``Size``, dtypes and legacy tensor type names print as torch prints
    them (``torch.Size([2])``, ``torch.float32``, ``torch.FloatTensor``), so code and doctests written
    against torch's reprs run unchanged. With a real torch, or no alias, they print
    ``rlpipe.Size([2])``, ``rlpipe.float32``. Asked at each call (not cached), since a shim may be
    installed after rlpipe is imported.
    """
    package = __name__.rpartition(".")[0]
    modules = sys.modules
    torch = modules.get("torch")
    if torch is not None:
        core = modules.get(package + "._tensor")
        return "torch" if getattr(torch, "Tensor", None) is getattr(core, "Tensor", 0) else "rlpipe"
    if modules.get("torchrl", 0) is modules.get(package) or modules.get("tensordict", 0) is modules.get(
            package + ".tensordict"):
        return "torch"
    return "rlpipe"


class dtype:
    """A tensor element type (``rlpipe.float32`` ...), backed by a NumPy dtype."""
    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_rank")

    def __init__(self, name, np_dtype, rank):
        self.name = name
        self.np = np_dtype
        self.is_floating_point = rank >= 3
        self.is_signed = name not in ("bool", "uint8")
        self.itemsize = np_dtype.itemsize if np_dtype is not None else 2
        self._rank = rank  # the promotion category: 0 bool, 2 integer, 3 floating

    def __repr__(self):
        return f"{shown_module()}.{self.name}"

    def __reduce__(self):
        return self.name

    @property
    def is_complex(self):
        """Always False: rlpipe has no complex dtypes."""
        return False

    def to_real(self):
        """The dtype itself (the real counterpart of a real dtype, as torch's ``to_real``)."""
        return self


bool = dtype("bool", np.dtype(np.bool_), 0)
uint8 = dtype("uint8", np.dtype(np.uint8), 2)
int8 = dtype("int8", np.dtype(np.int8), 2)
int16 = dtype("int16", np.dtype(np.int16), 2)
int32 = dtype("int32", np.dtype(np.int32), 2)
int64 = dtype("int64", np.dtype(np.int64), 2)
float16 = dtype("float16", np.dtype(np.float16), 3)
bfloat16 = dtype("bfloat16", _cpu.bfloat16, 3)
float32 = dtype("float32", np.dtype(np.float32), 3)
float64 = dtype("float64", np.dtype(np.float64), 3)

# torch's aliases
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64

ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
_FROM_NP = {d.np: d for d in ALL if d.np is not None}
FLOATING_NP = frozenset(d.np for d in ALL if d.is_floating_point and d.np is not None)

_default = [float32]


def get_default_dtype():
    """The float dtype that creation functions use when none is given (float32 unless changed)."""
    return _default[0]


def set_default_dtype(d):
    """Sets the float dtype for creation functions and Python floats; TypeError for a non-float dtype."""
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"set_default_dtype: expected a floating point rlpipe.dtype, got {d!r}")
    _default[0] = d


def from_numpy_dtype(np_dtype):
    """The rlpipe dtype of a NumPy dtype; TypeError naming the supported ones when there is none."""
    try:
        return _FROM_NP[np_dtype]
    except KeyError:
        raise TypeError(f"NumPy dtype {np_dtype} has no rlpipe equivalent; supported: "
                        f"{', '.join(d.name for d in ALL)}") from None


def as_dtype(d):
    """Accepts an rlpipe dtype, a NumPy dtype or type, or a Python type (float means float64, as in torch)."""
    if isinstance(d, dtype):
        return d
    if d is builtins.float:
        return float64
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool
    try:
        return from_numpy_dtype(np.dtype(d))
    except TypeError:
        raise TypeError(f"expected an rlpipe dtype, got {d!r}") from None


def _promote_pair(a, b):
    if a is b:
        return a
    if a._rank != b._rank:
        return a if a._rank > b._rank else b
    if a.is_floating_point:
        if {a.name, b.name} == {"float16", "bfloat16"}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    return from_numpy_dtype(np.promote_types(a.np, b.np))


def promote_types(a, b):
    """The dtype an op on tensors of dtypes ``a`` and ``b`` returns (float16 with bfloat16 gives float32)."""
    return _promote_pair(as_dtype(a), as_dtype(b))


def of_scalar(x):
    """The dtype torch gives a Python number: bool, int64, or the default float dtype."""
    return (bool, None, int64, _default[0])[scalar_kind(x)]


def scalar_kind(x):
    """The rank of a Python scalar's category (bool 0, int 2, float 3), or None for other objects."""
    t = type(x)
    if t is builtins.bool or t is np.bool_:
        return 0
    if t is builtins.int or isinstance(x, np.integer):
        return 2
    if t is builtins.float or isinstance(x, np.floating):
        return 3
    return None


def _promote_all(dtypes):
    out = None
    for d in dtypes:
        out = d if out is None else _promote_pair(out, d)
    return out


def result_type(dims, zero_dims=(), scalar_ranks=()):
    """PyTorch's promotion: dimensioned tensors first, then 0-dim tensors, then Python scalars.

    A later group only counts when its category (bool < integer < floating) is higher than
    that of everything before it; a Python float then gives the default dtype, an int int64.
    """
    out = _promote_all(dims)
    zero = _promote_all(zero_dims)
    if zero is not None and (out is None or zero._rank > out._rank):
        out = zero
    for rank in scalar_ranks:
        if out is None or rank > out._rank:
            out = (bool, None, int64, _default[0])[rank]
    return out


# ---- numeric limits: torch.finfo and torch.iinfo ---------------------------------------------------

def _info_dtype(kind, type, floating):
    if not isinstance(type, dtype):
        raise TypeError(f"{kind}(): argument 'type' (position 1) must be {shown_module()}.dtype, "
                        f"not {builtins.type(type).__name__}")
    if type.is_floating_point != floating or type is bool:
        if type is bool and not floating:
            raise TypeError(f"{bool!r} is not supported by {shown_module()}.iinfo")
        other = "iinfo" if floating else "finfo"
        need = "a floating point" if floating else "an integer"
        m = shown_module()
        raise TypeError(f"{m}.{kind}() requires {need} input type. Use {m}.{other} to handle '{m}.{kind}'")
    return type


class finfo:
    """The numeric limits of a floating dtype (the default dtype when none is given), as torch.finfo:
    ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype`` (its name)."""
    __hash__ = None

    def __init__(self, type=None):
        type = _info_dtype("finfo", get_default_dtype() if type is None else type, True)
        info = _cpu.finfo(type.np)
        self.bits = info.bits
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.smallest_normal)
        self.resolution = 10.0 ** -info.precision
        self.dtype = type.name

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The numeric limits of an integer dtype, as torch.iinfo: ``bits``, ``max``, ``min``, ``dtype`` (its name)."""
    __hash__ = None

    def __init__(self, type):
        type = _info_dtype("iinfo", type, False)
        info = np.iinfo(type.np)
        self.bits, self.max, self.min, self.dtype = info.bits, builtins.int(info.max), builtins.int(info.min), type.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
