"""Tensor specs: the shape, dtype, device and domain of the tensors an environment reads and writes.

Names and behaviour follow torchrl's ``torchrl.data.tensor_specs`` (0.14): ``Bounded``,
``Unbounded``, ``Categorical``, ``OneHot``, ``MultiCategorical``, ``MultiOneHot``, ``Binary`` and
the nested ``Composite``, with the old ``*TensorSpec`` aliases. Every leaf spec can draw a random
element (``rand``, reproducible under ``rlpipe.manual_seed``), give a zero element (``zero``),
test membership exactly (``is_in``: trailing shape, dtype and bounds), map a tensor into the space
(``project``), turn host values into tensors (``encode``) and tensors into the action format
Gymnasium expects (``to_numpy``). ``gym.py``'s ``from_gym_space`` converts Gymnasium spaces.

Deliberate differences from torchrl: ``Bounded.zero`` is the zero tensor clamped into the box (so it
``is_in`` the spec), ``OneHot.project`` takes the argmax (torchrl samples), masks
(``update_mask``) and stacked specs are not implemented.
"""
import builtins
import itertools
import math

import numpy as np

from .. import _dtypes, primitives as _ops
from .._creation import as_tensor, from_numpy, full, zeros, zeros_like
from .._device import CPU, resolve
from .._tensor import Size, Tensor, host_array, size_repr as _shape_str
from ..random import rand as _rand
from ..random import randn as _randn
from ..tensordict import TensorDict, unravel_key_to_tuple
from ..tensordict.keys import KeysView

__all__ = [
    "Binary",
    "BinaryBox",
    "BinaryDiscreteTensorSpec",
    "Bounded",
    "BoundedContinuous",
    "BoundedDiscrete",
    "BoundedTensorSpec",
    "BoxList",
    "Categorical",
    "CategoricalBox",
    "Composite",
    "CompositeSpec",
    "ContinuousBox",
    "DiscreteBox",
    "DiscreteTensorSpec",
    "MultiCategorical",
    "MultiDiscreteTensorSpec",
    "MultiOneHot",
    "MultiOneHotDiscreteTensorSpec",
    "OneHot",
    "OneHotDiscreteTensorSpec",
    "TensorSpec",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscrete",
    "UnboundedDiscreteTensorSpec",
]


# ---- helpers ------------------------------------------------------------------------------------
def _size(shape, what="shape"):
    if shape is None:
        return None
    if isinstance(shape, (builtins.int, np.integer)) and not isinstance(shape, builtins.bool):
        return Size((builtins.int(shape),))
    try:
        out = Size(builtins.int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise ValueError(f"{what} must have non-negative sizes, got {list(out)}")
    return out


def _extra_shape(shape):
    """The ``shape`` argument of rand/zero: None, an int, or a sequence of ints."""
    return Size(()) if shape is None else _size(shape)


def _device(device):
    return CPU if device is None else resolve(device)


def _dtype(dtype, default):
    return default if dtype is None else _dtypes.as_dtype(dtype)


def _tensor(value, dtype=None, device=None):
    """``value`` (number, list, ndarray, Tensor) as an rlpipe tensor, without a gradient."""
    if isinstance(value, Tensor):
        if ((dtype is None or value.dtype is _dtypes.as_dtype(dtype))
                and (device is None or value.device == resolve(device)) and not value.requires_grad):
            return value
        value = value.detach()
    return as_tensor(value, dtype=dtype, device=device)


def _check_positive_int(n, what):
    if isinstance(n, builtins.bool) or not isinstance(n, (builtins.int, np.integer)):
        if isinstance(n, Tensor) and n.numel() == 1 and not n.is_floating_point():
            n = n.item()
        else:
            raise TypeError(f"{what} must be a positive int, got {n!r}")
    if n <= 0:
        raise ValueError(f"{what} must be a positive int, got {n}")
    return builtins.int(n)


def _iinfo_range(dtype):
    if dtype is _dtypes.bool:
        return 0, 1
    if dtype.is_floating_point:
        return -math.inf, math.inf
    info = np.iinfo(dtype.np)
    return builtins.int(info.min), builtins.int(info.max)


def _indent(text, n=4):
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def _tensor_summary(t):
    return f"Tensor(shape={_shape_str(t.shape)}, device={t.device}, dtype={t.dtype}, contiguous=True)"


# ---- spaces ---------------------------------------------------------------------------------------
class ContinuousBox:
    """The box ``[low, high]`` of a ``Bounded`` (or ``Unbounded``) spec; ``low``/``high`` are tensors."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    @property
    def device(self):
        return self.low.device

    def to(self, device):
        return ContinuousBox(self.low.to(device), self.high.to(device))

    def clone(self):
        return ContinuousBox(self.low.clone(), self.high.clone())

    def __iter__(self):
        yield self.low
        yield self.high

    def __eq__(self, other):
        return (isinstance(other, ContinuousBox) and self.low.shape == other.low.shape
                and self.low.dtype == other.low.dtype and self.low.device == other.low.device
                and bool(_ops.equal(self.low, other.low)) and bool(_ops.equal(self.high, other.high)))

    def __repr__(self):
        return f"ContinuousBox(\n    low={_tensor_summary(self.low)},\n    high={_tensor_summary(self.high)})"


class CategoricalBox:
    """The discrete space ``{0, ..., n - 1}``."""

    def __init__(self, n):
        self.n = n

    def to(self, device):
        return self

    def clone(self):
        return CategoricalBox(self.n)

    def __eq__(self, other):
        return isinstance(other, CategoricalBox) and type(other) is type(self) and self.n == other.n

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n})"


DiscreteBox = CategoricalBox


class BinaryBox(CategoricalBox):
    """The space of ``n`` bits."""


class BoxList:
    """One ``CategoricalBox`` per sub-space (multi-categorical / multi-one-hot specs)."""

    def __init__(self, boxes):
        self.boxes = list(boxes)

    @classmethod
    def from_nvec(cls, nvec):
        return cls(CategoricalBox(builtins.int(n)) for n in np.asarray(nvec).reshape(-1))

    def to(self, device):
        return self

    def clone(self):
        return BoxList(b.clone() for b in self.boxes)

    def __len__(self):
        return len(self.boxes)

    def __iter__(self):
        return iter(self.boxes)

    def __getitem__(self, i):
        return self.boxes[i]

    def __eq__(self, other):
        return isinstance(other, BoxList) and self.boxes == other.boxes

    def __repr__(self):
        return f"BoxList(boxes={self.boxes})"


# ---- base -------------------------------------------------------------------------------------------
_LIST_CHECK_SIZE = 64  # elements: up to here a host array's values are checked as a Python list


class TensorSpec:
    """Base of every spec: ``shape``, ``dtype``, ``device``, ``space`` and ``domain``."""

    shape = Size(())
    dtype = None
    device = CPU
    space = None
    domain = ""

    # ---- to override ----
    def rand(self, shape=None):
        raise NotImplementedError

    def zero(self, shape=None):
        return zeros(_extra_shape(shape) + self.shape, dtype=self.dtype, device=self.device)

    def zeros(self, shape=None):
        return self.zero(shape)

    def one(self, shape=None):
        return full(_extra_shape(shape) + self.shape, 1, dtype=self.dtype, device=self.device)

    def _values_in(self, val):
        """Whether ``val`` (right shape, right dtype) lies in the space."""
        return True

    def _project(self, val):
        return val.to(self.dtype)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        """A copy of this spec with a new ``shape`` (expanded, or reshaped when ``reshape``), ``device``
        or ``dtype``."""
        raise NotImplementedError

    # ---- shared ----
    @property
    def ndim(self):
        return len(self.shape)

    def ndimension(self):
        return len(self.shape)

    def numel(self):
        return self.shape.numel()

    def _has_shape(self, val):
        shape = val.shape
        n = len(self.shape)
        return len(shape) >= n and (n == 0 or tuple(shape[len(shape) - n:]) == tuple(self.shape))

    def is_in(self, val):
        """True when ``val`` is a tensor whose shape ends with ``shape``, of this dtype, inside the space."""
        if not isinstance(val, Tensor):
            return False
        if val.dtype is not self.dtype or not self._has_shape(val):
            return False
        if val.numel() == 0:
            return True
        return builtins.bool(self._values_in(val))

    def host_membership_test(self):
        """A function ``test(array) -> bool``: whether a host (NumPy) array lies in the space, as
        ``is_in`` decides for a tensor, but cheaper for the common specs, which leave the shape to
        the caller. The collector checks every action a policy returns with it."""
        values_test = self._host_values_test()
        if values_test is None:
            return lambda array: self.is_in(from_numpy(np.asarray(array)))
        dtype = self.dtype.np
        return lambda array: array.dtype == dtype and values_test(array)

    def _host_values_test(self):
        """``_values_in`` for a host array of the right dtype, as a function; None where ``is_in``
        decides. Arrays of up to ``_LIST_CHECK_SIZE`` elements are checked as Python lists, whose
        methods cost less than NumPy's per-call overhead at a few elements."""
        return None

    def contains(self, val):
        return self.is_in(val)

    def assert_is_in(self, val):
        if not self.is_in(val):
            got = (f"shape={_shape_str(val.shape)}, dtype={val.dtype}" if isinstance(val, Tensor)
                   else f"a {type(val).__name__}")
            raise AssertionError(f"Encoding failed because value is not in space. Consider calling "
                                 f"project(val) first. value={val!r} ({got}), spec={self!r}")

    def type_check(self, value, key=None):
        if not isinstance(value, Tensor):
            raise TypeError(f"Expected a rlpipe Tensor{'' if key is None else f' for {key!r}'}, "
                             f"got {type(value).__name__}")
        if value.dtype is not self.dtype:
            raise ValueError(f"Expected dtype {self.dtype}{'' if key is None else f' for {key!r}'}, "
                             f"got {value.dtype}")

    def _shaped(self, val):
        """``val`` as a tensor on this device whose shape ends with ``shape`` (reshaped when the
        number of elements allows)."""
        val = _tensor(val, device=self.device)
        if not self._has_shape(val):
            if val.numel() == self.shape.numel():
                val = val.reshape(self.shape)
            else:
                raise ValueError(f"{type(self).__name__}: the shape of the value {_shape_str(val.shape)} does not "
                                 f"end with the spec's shape {_shape_str(self.shape)}")
        return val

    def project(self, val):
        """``val`` mapped into the space (clamped, rounded, cast); returned unchanged when already in it."""
        val = self._shaped(val)
        if self.is_in(val):
            return val
        return self._project(val)

    def encode(self, val, ignore_device=False):
        """A host value (NumPy array, number, list, tensor) as a tensor of this dtype and shape on ``device``."""
        val = val if isinstance(val, Tensor) else np.asarray(val)
        return self._shaped(_tensor(val, dtype=self.dtype, device=self.device))

    def to_numpy(self, val, safe=None):
        """A tensor of this spec as a NumPy array of its dtype (what a Gymnasium env takes)."""
        if safe:
            self.assert_is_in(val)
        return host_array(val)

    def expand(self, *shape):
        """The spec with new leading dims: ``shape`` must end with the current ``shape`` (where the
        spec has a size-1 dim, any size is accepted, as ``Tensor.expand``)."""
        if len(shape) == 1 and not isinstance(shape[0], (builtins.int, np.integer)):
            shape = shape[0]
        shape = _size(shape)
        n = len(self.shape)
        if len(shape) < n or builtins.any(new != old and old != 1
                                          for new, old in zip(shape[len(shape) - n:], self.shape)):
            raise ValueError(f"{type(self).__name__}.expand: the new shape {list(shape)} must end with the "
                             f"spec's shape {list(self.shape)}")
        return self._with(shape=shape)

    def _check_reshape(self, shape):
        if shape.numel() != self.shape.numel():
            raise ValueError(f"{type(self).__name__}: cannot reshape {list(self.shape)} to {list(shape)}")
        return self._with(shape=shape, reshape=True)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (builtins.int, np.integer)):
            shape = shape[0]
        shape = list(shape)
        if shape.count(-1) == 1:
            known = builtins.int(np.prod([s for s in shape if s != -1]))
            shape[shape.index(-1)] = self.shape.numel() // known if known else 0
        return self._check_reshape(_size(shape))

    view = reshape

    def unsqueeze(self, dim):
        n = len(self.shape) + 1
        if not -n <= dim < n:
            raise IndexError(f"unsqueeze: dim {dim} out of range for a spec of shape {list(self.shape)}")
        dim = dim + n if dim < 0 else dim
        return self._check_reshape(Size(self.shape[:dim] + (1,) + self.shape[dim:]))

    def squeeze(self, dim=None):
        if dim is None:
            shape = Size(s for s in self.shape if s != 1)
        else:
            n = len(self.shape)
            if not -n <= dim < n:
                raise IndexError(f"squeeze: dim {dim} out of range for a spec of shape {list(self.shape)}")
            dim = dim + n if dim < 0 else dim
            shape = self.shape if self.shape[dim] != 1 else Size(self.shape[:dim] + self.shape[dim + 1:])
        return self if shape == self.shape else self._check_reshape(shape)

    def clone(self):
        return self._with()

    def to(self, dest):
        """The spec on another device, or (given an rlpipe dtype) with another dtype."""
        if isinstance(dest, _dtypes.dtype):
            return self if dest is self.dtype else self._with(dtype=dest)
        dev = resolve(dest)
        if dev is self.device:
            return self
        return self._with(device=dev)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def _eq_fields(self, other):
        return True

    def __eq__(self, other):
        return (type(other) is type(self) and other.shape == self.shape and other.dtype is self.dtype
                and other.device == self.device and other.space == self.space and self._eq_fields(other))

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def _repr_name(self):
        return type(self).__name__

    def __repr__(self):
        space = _indent(repr(self.space)).lstrip()
        return (f"{self._repr_name()}(\n    shape={_shape_str(self.shape)},\n    space={space},\n    "
                f"device={self.device},\n    dtype={self.dtype},\n    domain={self.domain})")


# ---- continuous boxes ---------------------------------------------------------------------------
class Bounded(TensorSpec):
    """Values in the box ``[low, high]`` (both inclusive); ``low``/``high`` broadcast to ``shape``.

    ``Bounded(low, high, shape=None, device=None, dtype=None)``: ``dtype`` defaults to the default
    float dtype; ``shape`` to the broadcast shape of ``low`` and ``high``. A floating dtype gives a
    ``BoundedContinuous`` (domain "continuous"), an integer or bool one a ``BoundedDiscrete``.
    """
    domain = "continuous"

    def __new__(cls, *args, **kwargs):
        if cls is Bounded:
            dtype = kwargs.get("dtype", args[4] if len(args) > 4 else None)
            dtype = _dtype(dtype, _dtypes.get_default_dtype())
            cls = BoundedContinuous if dtype.is_floating_point else BoundedDiscrete  # noqa: PLW0642
        return object.__new__(cls)

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        # torchrl's former names of the bounds
        if "minimum" in kwargs:
            low = kwargs.pop("minimum")
        if "maximum" in kwargs:
            high = kwargs.pop("maximum")
        if kwargs:
            raise TypeError(f"Bounded got unexpected keyword arguments {sorted(kwargs)}")
        if low is None or high is None:
            raise TypeError("Bounded requires both low and high")
        self.device = _device(device)
        self.dtype = _dtype(dtype, self._default_dtype())
        shape = _size(shape)
        low = _tensor(low, dtype=self.dtype, device=self.device)
        high = _tensor(high, dtype=self.dtype, device=self.device)
        if shape is None:
            try:
                shape = Size(np.broadcast_shapes(tuple(low.shape), tuple(high.shape)))
            except ValueError:
                raise ValueError(f"Bounded: the shapes of low {_shape_str(low.shape)} and high "
                                 f"{_shape_str(high.shape)} do not broadcast together") from None
        for name, bound in (("low", low), ("high", high)):
            try:
                np.broadcast_shapes(tuple(bound.shape), tuple(shape))
                if len(bound.shape) > len(shape):
                    raise ValueError
            except ValueError:
                raise ValueError(f"Bounded: the shape of {name} {_shape_str(bound.shape)} does not match the "
                                 f"spec's shape {_shape_str(shape)}") from None
        low, high = low.expand(*shape).clone(), high.expand(*shape).clone()
        if low.dtype.is_floating_point and builtins.bool((low.isnan() | high.isnan()).any()):
            raise ValueError(f"Bounded: low and high must not be NaN, got low={low} and high={high}")
        if builtins.bool((low > high).any()):
            raise ValueError(f"Bounded: low must be less than or equal to high, got low={low} and high={high}")
        self.shape = shape
        self.space = ContinuousBox(low, high)
        self._setup()

    def _default_dtype(self):
        return _dtypes.get_default_dtype()

    def _setup(self):
        low, high = self.space.low, self.space.high
        self.domain = "continuous" if self.dtype.is_floating_point else "discrete"
        lo64, hi64 = low.to(_dtypes.float64), high.to(_dtypes.float64)
        if self.dtype.is_floating_point:
            lo_inf, hi_inf = lo64.isinf(), hi64.isinf()
            self._all_finite = not builtins.bool((lo_inf | hi_inf).any())
            if not self._all_finite:
                self._masks = (lo_inf, hi_inf)
                lo64 = _ops.where(lo_inf, zeros_like(lo64), lo64)
                hi64 = _ops.where(hi_inf, zeros_like(hi64), hi64)
        else:
            self._all_finite = True
        self._lo64, self._hi64 = lo64, hi64

    @property
    def low(self):
        return self.space.low

    @property
    def high(self):
        return self.space.high

    def _repr_name(self):
        return "BoundedContinuous" if self.dtype.is_floating_point else "BoundedDiscrete"

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        lo, hi = self._lo64, self._hi64
        if self.dtype.is_floating_point:
            out = lo + (hi - lo) * u
            if not self._all_finite:
                lo_inf, hi_inf = self._masks
                z = _randn(*shape, dtype=_dtypes.float64, device=self.device)
                out = _ops.where(lo_inf & hi_inf, z,
                                 _ops.where(lo_inf, hi - z.abs(), _ops.where(hi_inf, lo + z.abs(), out)))
            out = out.to(self.dtype)
            # rounding to a narrower float can step just outside the box
            return _ops.clamp(out, self.low, self.high) if self._all_finite else out
        out = (lo + (u * (hi - lo + 1)).floor())
        return _ops.minimum(out, hi).to(self.dtype)

    def zero(self, shape=None):
        z = zeros(_extra_shape(shape) + self.shape, dtype=self.dtype, device=self.device)
        if self.dtype is _dtypes.bool:
            return z | self.low
        return _ops.clamp(z, self.low, self.high)

    def _values_in(self, val):
        low, high = self.low, self.high
        if val.device != self.device:
            low, high = low.to(val.device), high.to(val.device)
        return ((val >= low) & (val <= high)).all()

    def _host_values_test(self):
        low, high = host_array(self.low), host_array(self.high)  # the test reads host action arrays
        return lambda array: bool((array >= low).all()) and bool((array <= high).all())

    def _project(self, val):
        if self.dtype is _dtypes.bool:
            return val.to(_dtypes.bool)
        v = val.to(_dtypes.float64)
        v = _ops.where(v.isnan(), zeros_like(v), v)
        if not self.dtype.is_floating_point:
            v = v.round()
        return _ops.clamp(v, self.low.to(_dtypes.float64), self.high.to(_dtypes.float64)).to(self.dtype)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else shape
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        fit = (lambda b: b.reshape(shape)) if reshape else (lambda b: b.expand(*shape))
        return Bounded(fit(self.low).to(device), fit(self.high).to(device), shape=shape, device=device,
                       dtype=dtype)

    def to_numpy(self, val, safe=None):
        if safe:
            self.assert_is_in(val)
        return np.asarray(host_array(val), dtype=self.dtype.np)


class BoundedContinuous(Bounded):
    """A ``Bounded`` spec with a floating dtype."""

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(low, high, shape=shape, device=device, dtype=dtype, **kwargs)
        if not self.dtype.is_floating_point:
            raise ValueError(f"BoundedContinuous requires a floating dtype, got {self.dtype}")


class BoundedDiscrete(Bounded):
    """A ``Bounded`` spec with an integer (or bool) dtype."""
    domain = "discrete"

    def _default_dtype(self):
        return _dtypes.int64

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(low, high, shape=shape, device=device, dtype=dtype, **kwargs)
        if self.dtype.is_floating_point:
            raise ValueError(f"BoundedDiscrete requires an integer dtype, got {self.dtype}")


class Unbounded(TensorSpec):
    """Any value of ``dtype`` (default: the default float dtype) with shape ``shape`` (default ``[]``).

    A floating dtype gives an ``UnboundedContinuous``, an integer or bool one an ``UnboundedDiscrete``.
    ``rand`` draws standard normals (integers: uniform in [-100, 100] within the dtype's range).
    """
    domain = "continuous"

    def __new__(cls, *args, **kwargs):
        if cls is Unbounded:
            dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)
            dtype = _dtype(dtype, _dtypes.get_default_dtype())
            cls = UnboundedContinuous if dtype.is_floating_point else UnboundedDiscrete  # noqa: PLW0642
        return object.__new__(cls)

    def __init__(self, shape=None, device=None, dtype=None, **kwargs):
        if kwargs:
            raise TypeError(f"Unbounded got unexpected keyword arguments {sorted(kwargs)}")
        self.shape = Size(()) if shape is None else _size(shape)
        self.device = _device(device)
        self.dtype = _dtype(dtype, self._default_dtype())
        self.domain = "continuous" if self.dtype.is_floating_point else "discrete"
        lo, hi = _iinfo_range(self.dtype)
        box_dtype = self.dtype if self.dtype is not _dtypes.bool else _dtypes.uint8
        self.space = ContinuousBox(full(self.shape, lo, dtype=box_dtype, device=self.device),
                                   full(self.shape, hi, dtype=box_dtype, device=self.device))

    def _default_dtype(self):
        return _dtypes.get_default_dtype()

    def _repr_name(self):
        return "UnboundedContinuous" if self.dtype.is_floating_point else "UnboundedDiscrete"

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape
        if self.dtype.is_floating_point:
            return _randn(*shape, dtype=_dtypes.float64, device=self.device).to(self.dtype)
        lo, hi = _iinfo_range(self.dtype)
        lo, hi = builtins.max(lo, -100), builtins.min(hi, 100)
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        return _ops.clamp((u * (hi - lo + 1)).floor() + lo, lo, hi).to(self.dtype)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        return Unbounded(shape=self.shape if shape is None else shape,
                         device=self.device if device is None else device,
                         dtype=self.dtype if dtype is None else dtype)

    def _project(self, val):
        if val.dtype.is_floating_point and not self.dtype.is_floating_point:
            val = val.round()
            if self.dtype is not _dtypes.bool:
                lo, hi = _iinfo_range(self.dtype)
                val = _ops.clamp(val, lo, hi)
        return val.to(self.dtype)

    def to_numpy(self, val, safe=None):
        if safe:
            self.assert_is_in(val)
        return np.asarray(host_array(val), dtype=self.dtype.np)


class UnboundedContinuous(Unbounded):
    """An ``Unbounded`` spec with a floating dtype."""

    def __init__(self, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(shape=shape, device=device, dtype=dtype, **kwargs)
        if not self.dtype.is_floating_point:
            raise ValueError(f"UnboundedContinuous requires a floating dtype, got {self.dtype}")


class UnboundedDiscrete(Unbounded):
    """An ``Unbounded`` spec with an integer dtype (default int64)."""
    domain = "discrete"

    def _default_dtype(self):
        return _dtypes.int64

    def __init__(self, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(shape=shape, device=device, dtype=dtype, **kwargs)
        if self.dtype.is_floating_point:
            raise ValueError(f"UnboundedDiscrete requires an integer dtype, got {self.dtype}")


# ---- discrete -----------------------------------------------------------------------------------
def _int_scalar_or_array(arr):
    """``to_numpy`` of an index: a Python int when 0-d, else an int64 array."""
    arr = np.asarray(arr)
    return builtins.int(arr) if arr.ndim == 0 else arr.astype(np.int64, copy=False)


class Categorical(TensorSpec):
    """An integer in ``{0, ..., n - 1}`` per element: ``Categorical(n, shape=None, device=None, dtype=int64)``."""
    domain = "discrete"

    def __init__(self, n, shape=None, device=None, dtype=None, mask=None):
        if mask is not None:
            raise NotImplementedError("Categorical masks are not supported by rlpipe")
        self.n = _check_positive_int(n, f"{type(self).__name__}: n")
        self.shape = Size(()) if shape is None else _size(shape)
        self.device = _device(device)
        self.dtype = _dtype(dtype, _dtypes.int64)
        if self.dtype.is_floating_point:
            raise ValueError(f"{type(self).__name__} requires an integer dtype, got {self.dtype}")
        if self.n > _iinfo_range(self.dtype)[1] + 1:
            raise ValueError(f"{type(self).__name__}: n={self.n} does not fit in dtype {self.dtype}")
        self.space = CategoricalBox(self.n)

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        return _ops.clamp((u * self.n).floor(), 0, self.n - 1).to(self.dtype)

    def _values_in(self, val):
        if self.dtype is _dtypes.bool:
            return True
        return ((val >= 0) & (val < self.n)).all()

    def _host_values_test(self):
        n, below = int(self.n), CPU._backend.below

        def test(array):
            if array.size > _LIST_CHECK_SIZE:
                return below(array, n)  # one argmax over the array seen as unsigned
            flat = array.reshape(-1).tolist()
            return not flat or (min(flat) >= 0 and max(flat) < n)
        return test

    def _project(self, val):
        if val.dtype.is_floating_point:
            val = _ops.where(val.isnan(), zeros_like(val), val).round()
        elif val.dtype is _dtypes.bool:
            val = val.to(_dtypes.int64)
        return _ops.clamp(val, 0, self.n - 1).to(self.dtype)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        return type(self)(self.n, shape=self.shape if shape is None else shape,
                          device=self.device if device is None else device,
                          dtype=self.dtype if dtype is None else dtype)

    def encode(self, val, ignore_device=False):
        arr = val if isinstance(val, Tensor) else np.asarray(val)
        if isinstance(arr, np.ndarray) and arr.size and (arr.min() < 0 or arr.max() >= self.n):
            raise ValueError(f"{type(self).__name__}.encode: values must be in [0, {self.n}), got {arr}")
        return super().encode(arr)

    def to_numpy(self, val, safe=None):
        """The category as a Python int (0-d) or an int64 array (Gymnasium's ``Discrete`` format)."""
        if safe:
            self.assert_is_in(val)
        if self.dtype is _dtypes.bool:
            return np.asarray(host_array(val), dtype=bool)
        return _int_scalar_or_array(host_array(val))


class Binary(Categorical):
    """``n`` bits (0 or 1): ``Binary(n=None, shape=None, device=None, dtype=int8)``; ``shape[-1] == n``."""

    def __init__(self, n=None, shape=None, device=None, dtype=_dtypes.int8):
        if n is None and shape is None:
            raise TypeError("Binary: provide n or shape")
        shape = _size(shape)
        if n is None:
            if not len(shape):
                raise ValueError("Binary: shape must have at least one dim, got []")
            n = shape[-1]
        n = _check_positive_int(n, "Binary: n")
        if shape is None or not len(shape):
            shape = Size((n,))
        elif shape[-1] != n:
            raise ValueError(f"Binary: the last dim of shape {list(shape)} must be n={n}")
        super().__init__(2, shape=shape, device=device, dtype=dtype)
        self.n = n
        self.space = BinaryBox(2)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        return Binary(self.n, shape=self.shape if shape is None else shape,
                      device=self.device if device is None else device,
                      dtype=self.dtype if dtype is None else dtype)

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape
        return (_rand(*shape, dtype=_dtypes.float64, device=self.device) < 0.5).to(self.dtype)

    def _values_in(self, val):
        if self.dtype is _dtypes.bool:
            return True
        return ((val == 0) | (val == 1)).all()

    def _host_values_test(self):
        def test(array):
            if array.size > _LIST_CHECK_SIZE:
                return bool(((array == 0) | (array == 1)).all())
            flat = array.reshape(-1).tolist()
            return flat.count(0) + flat.count(1) == len(flat)
        return test

    def _project(self, val):
        if val.dtype is _dtypes.bool:
            return val.to(self.dtype)
        if val.dtype.is_floating_point:
            val = _ops.where(val.isnan(), zeros_like(val), val)
        return (val >= 0.5).to(self.dtype) if val.dtype.is_floating_point else (val > 0).to(self.dtype)

    def encode(self, val, ignore_device=False):
        arr = val if isinstance(val, Tensor) else np.asarray(val)
        if isinstance(arr, np.ndarray) and arr.size and not np.isin(arr, (0, 1)).all():
            raise ValueError(f"Binary.encode: values must be 0 or 1, got {arr}")
        return TensorSpec.encode(self, arr)

    def to_numpy(self, val, safe=None):
        """The bits as an array of this dtype (Gymnasium's ``MultiBinary`` format)."""
        if safe:
            self.assert_is_in(val)
        return np.asarray(host_array(val), dtype=self.dtype.np)


class OneHot(TensorSpec):
    """A one-hot vector over ``n`` categories: ``OneHot(n, shape=None, device=None, dtype=bool)``,
    ``shape`` defaulting to ``[n]`` (its last dim must be ``n``)."""
    domain = "discrete"

    def __init__(self, n, shape=None, device=None, dtype=None, use_register=False, mask=None):
        if mask is not None:
            raise NotImplementedError("OneHot masks are not supported by rlpipe")
        self.n = _check_positive_int(n, "OneHot: n")
        shape = _size(shape)
        if shape is None or not len(shape):
            shape = Size((self.n,))
        elif shape[-1] != self.n:
            raise ValueError(f"OneHot: the last dim of shape {list(shape)} must be n={self.n}")
        self.shape = shape
        self.device = _device(device)
        self.dtype = _dtype(dtype, _dtypes.bool)
        self.space = CategoricalBox(self.n)
        self.use_register = use_register

    def _one_hot(self, index):
        return _ops.one_hot(index.to(_dtypes.int64), self.n).to(self.dtype)

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape[:-1]
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        return self._one_hot(_ops.clamp((u * self.n).floor(), 0, self.n - 1))

    def zero(self, shape=None):
        """The first category (the all-zero vector is not one-hot)."""
        shape = _extra_shape(shape) + self.shape[:-1]
        return self._one_hot(zeros(shape, dtype=_dtypes.int64, device=self.device))

    def _values_in(self, val):
        if self.dtype is _dtypes.bool:
            return (val.to(_dtypes.int64).sum(-1) == 1).all()
        return (((val == 0) | (val == 1)).all() & (val.sum(-1) == 1).all())

    def _host_values_test(self):
        n = self.shape[-1]

        def one_hot(row):
            return row.count(1) == 1 and row.count(0) == n - 1

        def test(array):
            if array.size > _LIST_CHECK_SIZE:
                return bool(((array == 0) | (array == 1)).all()) and bool((array.sum(-1) == 1).all())
            if array.ndim == 1:  # one env
                return one_hot(array.tolist())
            return all(map(one_hot, array.reshape(-1, n).tolist()))
        return test

    def _project(self, val):
        if val.dtype is _dtypes.bool:
            val = val.to(_dtypes.int64)
        if val.dtype.is_floating_point:
            val = _ops.where(val.isnan(), full(val.shape, -math.inf, dtype=val.dtype, device=val.device), val)
        return self._one_hot(val.argmax(-1))

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        return type(self)(self.n, shape=self.shape if shape is None else shape,
                          device=self.device if device is None else device,
                          dtype=self.dtype if dtype is None else dtype)

    def encode(self, val, ignore_device=False):
        """Integer indices (shape ``shape[:-1]``, with any leading batch dims) as one-hot vectors."""
        if isinstance(val, Tensor):
            idx = val.detach()
            arr = idx._host()
        else:
            arr = np.asarray(val)
            idx = None
        if arr.dtype.kind not in "iub" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
            raise TypeError(f"OneHot.encode takes integer indices, got {arr!r}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.n):
            raise ValueError(f"OneHot.encode: indices must be in [0, {self.n}), got {arr}")
        idx = _tensor(arr.astype(np.int64), device=self.device) if idx is None else idx.to(self.device)
        lead = self.shape[:-1]
        if len(lead) and tuple(idx.shape[idx.ndim - len(lead):]) != tuple(lead):
            if idx.numel() == lead.numel():
                idx = idx.reshape(lead)
            else:
                raise ValueError(f"OneHot.encode: the indices' shape {_shape_str(idx.shape)} does not end with "
                                 f"{_shape_str(lead)}")
        return self._one_hot(idx)

    def to_numpy(self, val, safe=None):
        """The category index (argmax): a Python int (0-d) or an int64 array (Gymnasium's ``Discrete``)."""
        if safe:
            self.assert_is_in(val)
        return _int_scalar_or_array(np.argmax(host_array(val), axis=-1))

    def to_categorical(self, val, safe=None):
        if safe:
            self.assert_is_in(val)
        return val.argmax(-1)

    def to_categorical_spec(self):
        return Categorical(self.n, shape=self.shape[:-1], device=self.device)

    def to_one_hot(self, val, safe=None):
        return val

    def _eq_fields(self, other):
        return self.n == other.n


def _nvec_array(nvec, what):
    if isinstance(nvec, Tensor):
        nvec = nvec.detach()._host()
    arr = np.asarray(nvec)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.size == 0:
        raise ValueError(f"{what}: nvec must not be empty, got {nvec!r}")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
        raise TypeError(f"{what}: nvec must hold positive ints, got {nvec!r}")
    if (arr <= 0).any():
        raise ValueError(f"{what}: nvec must hold positive ints, got {arr.tolist()}")
    return arr.astype(np.int64)


class MultiCategorical(TensorSpec):
    """One integer in ``{0, ..., nvec[i] - 1}`` per element: ``MultiCategorical(nvec, shape=None,
    device=None, dtype=int64)``; ``shape`` defaults to ``nvec``'s shape (``nvec`` broadcasts to it)."""
    domain = "discrete"

    def __init__(self, nvec, shape=None, device=None, dtype=None, mask=None, remove_singleton=True):
        if mask is not None:
            raise NotImplementedError("MultiCategorical masks are not supported by rlpipe")
        arr = _nvec_array(nvec, "MultiCategorical")
        shape = _size(shape)
        if shape is None:
            shape = Size(arr.shape)
        else:
            try:
                arr = np.broadcast_to(arr, tuple(shape)).copy()
            except ValueError:
                raise ValueError(f"MultiCategorical: nvec of shape {list(arr.shape)} does not match the shape "
                                 f"{list(shape)}") from None
        self.shape = shape
        self.device = _device(device)
        self.dtype = _dtype(dtype, _dtypes.int64)
        if self.dtype.is_floating_point or self.dtype is _dtypes.bool:
            raise ValueError(f"MultiCategorical requires an integer dtype, got {self.dtype}")
        if arr.max() > _iinfo_range(self.dtype)[1] + 1:
            raise ValueError(f"MultiCategorical: nvec={arr.tolist()} does not fit in dtype {self.dtype}")
        self.remove_singleton = remove_singleton
        self.nvec = _tensor(arr, dtype=_dtypes.int64, device=self.device)
        self._nvec_f = self.nvec.to(_dtypes.float64)
        self.space = BoxList.from_nvec(arr)

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        return _ops.minimum((u * self._nvec_f).floor(), self._nvec_f - 1).to(self.dtype)

    def _values_in(self, val):
        return ((val >= 0) & (val < self.nvec.to(val.device))).all()

    def _project(self, val):
        val = val.to(_dtypes.float64)
        val = _ops.where(val.isnan(), zeros_like(val), val).round()
        return _ops.clamp(val, zeros_like(self._nvec_f), self._nvec_f - 1).to(self.dtype)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else shape
        nvec = self.nvec._host()
        nvec = nvec.reshape(tuple(shape)) if reshape else np.broadcast_to(nvec, tuple(shape))
        return type(self)(nvec, shape=shape, device=self.device if device is None else device,
                          dtype=self.dtype if dtype is None else dtype)

    def encode(self, val, ignore_device=False):
        out = super().encode(val)
        if out.numel() and not builtins.bool(self._values_in(out)):
            raise ValueError(f"MultiCategorical.encode: values must be in [0, nvec) with nvec="
                             f"{self.nvec.tolist()}, got {host_array(val).tolist()}")
        return out

    def to_numpy(self, val, safe=None):
        """An int64 array (Gymnasium's ``MultiDiscrete`` format)."""
        if safe:
            self.assert_is_in(val)
        return np.asarray(host_array(val)).astype(np.int64, copy=False)

    def _eq_fields(self, other):
        return bool(_ops.equal(self.nvec, other.nvec))


class MultiOneHot(TensorSpec):
    """One one-hot vector per sub-space, concatenated along the last dim:
    ``MultiOneHot(nvec, shape=None, device=None, dtype=bool)``, ``shape[-1] == sum(nvec)``."""
    domain = "discrete"

    def __init__(self, nvec, shape=None, device=None, dtype=None, use_register=False, mask=None):
        if mask is not None:
            raise NotImplementedError("MultiOneHot masks are not supported by rlpipe")
        arr = _nvec_array(nvec, "MultiOneHot")
        if arr.ndim != 1:
            raise ValueError(f"MultiOneHot: nvec must be 1-dimensional, got shape {list(arr.shape)}")
        self.nvec = [builtins.int(n) for n in arr]
        total = builtins.sum(self.nvec)
        shape = _size(shape)
        if shape is None or not len(shape):
            shape = Size((total,))
        elif shape[-1] != total:
            raise ValueError(f"MultiOneHot: the last dim of shape {list(shape)} must be sum(nvec)={total} "
                             f"(nvec={self.nvec})")
        self.shape = shape
        self.device = _device(device)
        self.dtype = _dtype(dtype, _dtypes.bool)
        self.use_register = use_register
        self.space = BoxList.from_nvec(arr)
        self._nvec_f = _tensor(arr, dtype=_dtypes.float64, device=self.device)

    @property
    def n(self):
        return builtins.sum(self.nvec)

    def _split(self, val):
        return _ops.split(val, self.nvec, -1)

    def _from_indices(self, idx):
        """Indices ``[..., len(nvec)]`` as the concatenated one-hot vectors."""
        return _ops.cat([_ops.one_hot(idx[..., i], n) for i, n in enumerate(self.nvec)], -1).to(self.dtype)

    def rand(self, shape=None):
        shape = _extra_shape(shape) + self.shape[:-1] + (len(self.nvec),)
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        idx = _ops.minimum((u * self._nvec_f).floor(), self._nvec_f - 1).to(_dtypes.int64)
        return self._from_indices(idx)

    def zero(self, shape=None):
        shape = _extra_shape(shape) + self.shape[:-1] + (len(self.nvec),)
        return self._from_indices(zeros(shape, dtype=_dtypes.int64, device=self.device))

    def _values_in(self, val):
        v = val.to(_dtypes.int64)
        if self.dtype is not _dtypes.bool and not builtins.bool(((v == 0) | (v == 1)).all()):
            return False
        return builtins.all(builtins.bool((part.sum(-1) == 1).all()) for part in self._split(v))

    def _project(self, val):
        if val.dtype is _dtypes.bool:
            val = val.to(_dtypes.int64)
        idx = [part.argmax(-1) for part in self._split(val)]
        return self._from_indices(_ops.stack(idx, -1))

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        return type(self)(self.nvec, shape=self.shape if shape is None else shape,
                          device=self.device if device is None else device,
                          dtype=self.dtype if dtype is None else dtype)

    def encode(self, val, ignore_device=False):
        """Integer indices ``[..., len(nvec)]`` as concatenated one-hot vectors."""
        arr = host_array(val)
        if arr.dtype.kind not in "iub" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
            raise TypeError(f"MultiOneHot.encode takes integer indices, got {arr!r}")
        if arr.ndim == 0 or arr.shape[-1] != len(self.nvec):
            raise ValueError(f"MultiOneHot.encode: expected indices whose last dim is len(nvec)={len(self.nvec)}, "
                             f"got shape {list(arr.shape)}")
        nvec = np.asarray(self.nvec)
        if arr.size and ((arr < 0).any() or (arr >= nvec).any()):
            raise ValueError(f"MultiOneHot.encode: indices must be in [0, nvec) with nvec={self.nvec}, got {arr}")
        lead = self.shape[:-1]
        if len(lead) and tuple(arr.shape[arr.ndim - 1 - len(lead):-1]) != tuple(lead):
            raise ValueError(f"MultiOneHot.encode: the indices' shape {list(arr.shape)} does not end with "
                             f"{list(lead) + [len(self.nvec)]}")
        return self._from_indices(_tensor(arr.astype(np.int64), device=self.device))

    def to_numpy(self, val, safe=None):
        """Each sub-space's index (argmax): an int64 array ``[..., len(nvec)]`` (Gymnasium's ``MultiDiscrete``)."""
        if safe:
            self.assert_is_in(val)
        host = host_array(val)
        bounds = np.cumsum([0] + self.nvec)
        return np.stack([np.argmax(host[..., a:b], axis=-1) for a, b in itertools.pairwise(bounds)],
                        -1).astype(np.int64)

    def to_categorical(self, val, safe=None):
        if safe:
            self.assert_is_in(val)
        return _ops.stack([part.argmax(-1) for part in self._split(val)], -1)

    def to_categorical_spec(self):
        return MultiCategorical(self.nvec, shape=self.shape[:-1] + (len(self.nvec),), device=self.device)

    def _eq_fields(self, other):
        return self.nvec == other.nvec


# ---- composite ----------------------------------------------------------------------------------
_MISSING = object()


class Composite(TensorSpec):
    """A nested dictionary of specs sharing the leading dims ``shape`` (a TensorDict's batch size).

    ``Composite(dict_of_specs=None, shape=None, device=None, **kwargs)``: keys are strings, nested
    keys tuples of strings; nested dicts become nested Composites. ``rand``/``zero`` give
    TensorDicts of batch size ``shape``.
    """
    domain = "composite"

    def __init__(self, *args, shape=None, device=None, batch_size=None, data_cls=None, step_mdp_static=False,
                 **kwargs):
        if len(args) > 1:
            raise TypeError("Composite takes at most one positional argument (a dict of specs)")
        if shape is not None and batch_size is not None:
            raise TypeError("Composite: give shape or batch_size, not both")
        shape = batch_size if shape is None else shape
        self.shape = Size(()) if shape is None else _size(shape)
        self.device = None if device is None else resolve(device)
        self.data_cls = data_cls
        self._specs = {}
        source = args[0] if args else None
        if source is not None and not hasattr(source, "items"):
            raise TypeError(f"Composite expects a dict of specs, got {type(source).__name__}")
        for key, value in (*(source.items() if source is not None else ()), *kwargs.items()):
            self[key] = value

    # ---- shape, device, dtype ----
    @property
    def batch_size(self):
        return self.shape

    @property
    def dtype(self):
        dtypes = {spec.dtype for spec in self.values(True, True) if spec is not None}
        return dtypes.pop() if len(dtypes) == 1 else None

    @property
    def space(self):
        return None

    def _check_leaf(self, key, value):
        if value is None:
            return value
        if isinstance(value, dict):
            value = Composite(value, shape=self.shape, device=self.device)
        if not isinstance(value, TensorSpec):
            raise TypeError(f"Composite: the value for {key!r} must be a TensorSpec, a dict or None, "
                            f"got {type(value).__name__}")
        n = len(self.shape)
        if tuple(value.shape[:n]) != tuple(self.shape):
            raise ValueError(f"Composite: the shape of the spec for {key!r} {_shape_str(value.shape)} must start "
                             f"with the Composite's shape {_shape_str(self.shape)}")
        if self.device is not None and value.device != self.device:
            if isinstance(value, Composite) and value.device is None:
                value = value.clone()
                value._set_device(self.device)
            else:
                value = value.to(self.device)
        return value

    def _set_device(self, device):
        self.device = device
        for key, value in list(self._specs.items()):
            if value is not None and value.device != device:
                if isinstance(value, Composite):
                    value._set_device(device)
                else:
                    self._specs[key] = value.to(device)

    # ---- dict interface ----
    def _lookup(self, path):
        node = self
        for part in path:
            if not isinstance(node, Composite):
                return _MISSING
            node = node._specs.get(part, _MISSING)
            if node is _MISSING:
                return _MISSING
        return node

    def __getitem__(self, key):
        if not isinstance(key, str) and not (isinstance(key, tuple) and key):
            raise TypeError(f"Composite keys are strings or tuples of strings, got {key!r} "
                            "(indexing the batch dims is not supported)")
        path = unravel_key_to_tuple(key)
        spec = self._lookup(path)
        if spec is _MISSING:
            raise KeyError(f"key {key!r} not found in Composite with keys {sorted(map(str, self.keys(True)))}")
        return spec

    def get(self, key, default=_MISSING):
        try:
            return self[key]
        except KeyError:
            if default is _MISSING:
                raise
            return default

    def __setitem__(self, key, value):
        path = unravel_key_to_tuple(key)
        node = self
        for i, part in enumerate(path[:-1]):
            child = node._specs.get(part)
            if child is None:
                child = Composite(shape=node.shape, device=node.device)
                node._specs[part] = child
            elif not isinstance(child, Composite):
                raise KeyError(f"Composite: cannot set {key!r}: {path[:i + 1]!r} is a leaf spec, not a Composite")
            node = child
        node._specs[path[-1]] = node._check_leaf(key, value)

    def set(self, key, spec):
        self[key] = spec
        return self

    def __delitem__(self, key):
        path = unravel_key_to_tuple(key)
        parent = self._lookup(path[:-1]) if len(path) > 1 else self
        if not isinstance(parent, Composite) or path[-1] not in parent._specs:
            raise KeyError(f"key {key!r} not found in Composite")
        del parent._specs[path[-1]]

    def del_(self, key):
        del self[key]
        return self

    def pop(self, key, default=_MISSING):
        try:
            value = self[key]
        except KeyError:
            if default is _MISSING:
                raise
            return default
        del self[key]
        return value

    def setdefault(self, key, default):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, dict_or_spec):
        for key, value in dict_or_spec.items():
            if isinstance(value, Composite) and key in self.keys() and isinstance(self[key], Composite):
                self[key].update(value)
            else:
                self[key] = value
        return self

    def _walk(self, include_nested, leaves_only, prefix=()):
        for key, value in self._specs.items():
            full = prefix + (key,)
            is_comp = isinstance(value, Composite)
            if not (leaves_only and is_comp):
                yield full if prefix else key
            if include_nested and is_comp:
                yield from value._walk(include_nested, leaves_only, full)

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None):
        return KeysView(self, include_nested, leaves_only)

    _keys_view_name = "_CompositeKeys"

    def _has_key(self, key, include_nested, leaves_only):
        """``key in self.keys(include_nested, leaves_only)``: False for a key that is not one, and for a
        nested key without include_nested."""
        try:
            path = unravel_key_to_tuple(key)
        except TypeError:
            return False
        if len(path) > 1 and not include_nested:
            return False
        spec = self._lookup(path)
        return spec is not _MISSING and not (leaves_only and isinstance(spec, Composite))

    def values(self, include_nested=False, leaves_only=False, is_leaf=None):
        return [self[k] for k in self.keys(include_nested, leaves_only)]

    def items(self, include_nested=False, leaves_only=False, is_leaf=None):
        return [(k, self[k]) for k in self.keys(include_nested, leaves_only)]

    def __contains__(self, key):
        return key in self.keys(include_nested=True)

    def __iter__(self):
        return iter(self._specs)

    def __len__(self):
        return len(self._specs)

    def is_empty(self, recurse=False):
        if not recurse:
            return not self._specs
        return builtins.all(isinstance(v, Composite) and v.is_empty(True) for v in self._specs.values())

    def select(self, *keys, strict=True):
        out = Composite(shape=self.shape, device=self.device)
        for key in keys:
            if strict or key in self:
                out[key] = self[key].clone() if self[key] is not None else None
        return out

    def exclude(self, *keys):
        out = self.clone()
        for key in keys:
            if key in out:
                del out[key]
        return out

    def empty(self):
        return Composite(shape=self.shape, device=self.device)

    # ---- sampling and membership ----
    def _build_td(self, fn, shape):
        shape = _extra_shape(shape)
        td = TensorDict(batch_size=shape + self.shape, device=self.device)
        for key, spec in self._specs.items():
            if spec is None:
                continue
            td.set(key, spec._build_td(fn, shape) if isinstance(spec, Composite) else fn(spec, shape))
        return td

    def rand(self, shape=None):
        """A TensorDict of batch size ``shape + self.shape`` with a random element of every leaf."""
        return self._build_td(lambda spec, s: spec.rand(s), shape)

    def zero(self, shape=None):
        return self._build_td(lambda spec, s: spec.zero(s), shape)

    def one(self, shape=None):
        return self._build_td(lambda spec, s: spec.one(s), shape)

    def is_in(self, val):
        """True when every (non-None) leaf's entry is in ``val`` and in its spec. Extra entries are ignored."""
        if not isinstance(val, (TensorDict, dict)):
            return False
        for key, spec in self._specs.items():
            if spec is None:
                continue
            sub = val.get(key, None)
            if sub is None or not spec.is_in(sub):
                return False
        return True

    def project(self, val):
        """Projects each entry of ``val`` (a TensorDict) into its spec, in place; returns ``val``."""
        for key, spec in self._specs.items():
            if spec is None:
                continue
            sub = val.get(key, None)
            if sub is None:
                continue
            if isinstance(spec, Composite):
                spec.project(sub)
            elif not spec.is_in(sub):
                val.set(key, spec.project(sub))
        return val

    def encode(self, vals, ignore_device=False):
        """A dict of host values (nested dicts or tuple keys) as a TensorDict of batch ``shape``."""
        td = TensorDict(batch_size=self.shape, device=self.device)
        for key, value in vals.items():
            spec = self[key]
            if spec is None:
                td.set(key, _tensor(value, device=self.device))
            else:
                td.set(key, spec.encode(value))
        return td

    def to_numpy(self, val, safe=None):
        """A TensorDict of this spec as a nested dict of NumPy values."""
        out = {}
        for key, spec in self._specs.items():
            if spec is None:
                continue
            sub = val.get(key, None)
            if sub is not None:
                out[key] = spec.to_numpy(sub, safe=safe)
        return out

    def type_check(self, value, selected_keys=None):
        for key, spec in self._specs.items():
            if spec is not None and (selected_keys is None or key in selected_keys) \
                    and key in value.keys():  # noqa: SIM118 - TensorDict has no __contains__
                spec.type_check(value.get(key), key)

    # ---- copies ----
    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else shape
        out = Composite(shape=shape, device=self.device if device is None else device, data_cls=self.data_cls)
        n = len(self.shape)
        for key, spec in self._specs.items():
            if spec is not None:
                new_shape = shape + spec.shape[n:]
                spec = spec._with(shape=new_shape if new_shape != spec.shape else None, device=device,
                                  dtype=dtype, reshape=reshape)
            out._specs[key] = spec
        return out

    def clone(self):
        return self._with()

    def to(self, dest):
        """The spec with every leaf on another device, or (given an rlpipe dtype) cast to it."""
        if isinstance(dest, _dtypes.dtype):
            return self._with(dtype=dest)
        dev = resolve(dest)
        if dev is self.device and builtins.all(v is None or v.device == dev for v in self.values(True, True)):
            return self
        return self._with(device=dev)

    def __eq__(self, other):
        return (type(other) is type(self) and other.shape == self.shape and other.device == self.device
                and list(other._specs) == list(self._specs)
                and builtins.all(self._specs[k] == other._specs[k] for k in self._specs))

    def __repr__(self):
        entries = ",\n".join(_indent(f"{k}: {v!r}") for k, v in self._specs.items())
        sep = ",\n" if entries else ""
        return (f"Composite(\n{entries}{sep}    device={self.device},\n    shape={_shape_str(self.shape)},\n"
                f"    data_cls={self.data_cls})")


# ---- torchrl's former names ---------------------------------------------------------------------
BoundedTensorSpec = Bounded
UnboundedContinuousTensorSpec = UnboundedContinuous
UnboundedDiscreteTensorSpec = UnboundedDiscrete
DiscreteTensorSpec = Categorical
OneHotDiscreteTensorSpec = OneHot
MultiDiscreteTensorSpec = MultiCategorical
MultiOneHotDiscreteTensorSpec = MultiOneHot
BinaryDiscreteTensorSpec = Binary
CompositeSpec = Composite


# ---- Gymnasium ----------------------------------------------------------------------------------
