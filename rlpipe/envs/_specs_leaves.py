"""The leaf specs (``rlpipe.envs.specs`` is their public home): ``Bounded``, ``Unbounded`` and their
continuous/discrete variants, ``Categorical``, ``Binary``, ``OneHot``, ``MultiCategorical`` and
``MultiOneHot``.
"""
import builtins
import itertools
import math

import numpy as np

from .. import _dtypes, primitives as _ops
from .._creation import full, zeros, zeros_like
from .._device import CPU
from .._tensor import Size, Tensor, host_array, size_repr as _shape_str
from ..random import rand as _rand
from ..random import randn as _randn
from ._specs_base import (
    _LIST_CHECK_SIZE,
    BinaryBox,
    BoxList,
    CategoricalBox,
    ContinuousBox,
    TensorSpec,
    _check_positive_int,
    _device,
    _dtype,
    _extra_shape,
    _iinfo_range,
    _size,
    _tensor,
    check_spec_encode,
)
from ._specs_masks import MaskSupport, one_hot_indices, one_hot_values


# ---- continuous boxes ---------------------------------------------------------------------------
class Bounded(TensorSpec):
    """Values in the box ``[low, high]`` (both inclusive); ``low``/``high`` broadcast to ``shape``.

    ``Bounded(low, high, shape=None, device=None, dtype=None)``: ``dtype`` defaults to the default
    float dtype; ``shape`` to the broadcast shape of ``low`` and ``high`` (scalar bounds need a ``shape``,
    as torchrl). A floating dtype gives a ``BoundedContinuous`` (domain "continuous"), an integer or
    bool one a ``BoundedDiscrete``.
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
        if shape is None and low.ndim == 0 and high.ndim == 0:
            raise RuntimeError(f"Bounded: scalar low={low.item()} and high={high.item()} need an explicit shape")
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

    def cardinality(self):
        """The number of possible values: infinite for a box (as torchrl's, even when discrete)."""
        return math.inf

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
        """The lower bound (a tensor of the spec's shape)."""
        return self.space.low

    @property
    def high(self):
        """The upper bound (a tensor of the spec's shape)."""
        return self.space.high

    def _repr_name(self):
        return "BoundedContinuous" if self.dtype.is_floating_point else "BoundedDiscrete"

    def rand(self, shape=None):
        """Uniform values in [low, high] (integers for an integer dtype); where a bound is infinite, a normal draw
        on the open side."""
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
        """Zeros where they lie in the bounds, else the bound nearest to zero."""
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

    def _indexed(self, index, shape):
        return Bounded(host_array(self.low)[index], host_array(self.high)[index], shape=shape, device=self.device,
                       dtype=self.dtype)

    def unbind(self, dim=0):
        """As every spec's, but ``unbind(-1)`` is refused, as torchrl's (which tests the literal -1 only)."""
        if dim == -1:
            raise ValueError(f"Final dimension of {type(self).__name__} must remain unchanged (unbind got dim {dim} of "
                             f"shape {list(self.shape)})")
        return super().unbind(dim)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else shape
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        fit = (lambda b: b.reshape(shape)) if reshape else (lambda b: b.expand(*shape))
        return Bounded(fit(self.low).to(device), fit(self.high).to(device), shape=shape, device=device,
                       dtype=dtype)

    def to_numpy(self, val, safe=None):
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return np.asarray(host_array(val), dtype=self.dtype.np)


def _require_dtype_kind(spec, floating):
    """The ``*Continuous`` specs need a floating dtype, the ``*Discrete`` ones an integer (or bool) one."""
    if spec.dtype.is_floating_point != floating:
        kind = "a floating" if floating else "an integer"
        raise ValueError(f"{type(spec).__name__} requires {kind} dtype, got {spec.dtype}")


class BoundedContinuous(Bounded):
    """A ``Bounded`` spec with a floating dtype."""

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(low, high, shape=shape, device=device, dtype=dtype, **kwargs)
        _require_dtype_kind(self, floating=True)


class BoundedDiscrete(Bounded):
    """A ``Bounded`` spec with an integer (or bool) dtype."""
    domain = "discrete"

    def _default_dtype(self):
        return _dtypes.int64

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(low, high, shape=shape, device=device, dtype=dtype, **kwargs)
        _require_dtype_kind(self, floating=False)


class Unbounded(TensorSpec):
    """Any value of ``dtype`` (default: the default float dtype) with shape ``shape`` (default ``[1]``, as torchrl).

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
        self.shape = Size((1,)) if shape is None else _size(shape)
        self.device = _device(device)
        self.dtype = _dtype(dtype, self._default_dtype())
        self.domain = "continuous" if self.dtype.is_floating_point else "discrete"
        lo, hi = _iinfo_range(self.dtype)
        box_dtype = self.dtype if self.dtype is not _dtypes.bool else _dtypes.uint8
        self.space = ContinuousBox(full(self.shape, lo, dtype=box_dtype, device=self.device),
                                   full(self.shape, hi, dtype=box_dtype, device=self.device))

    def _default_dtype(self):
        return _dtypes.get_default_dtype()

    def cardinality(self):
        """Not defined for an unbounded spec (NotImplementedError)."""
        raise NotImplementedError("cardinality is not implemented for Unbounded specs.")

    def _repr_name(self):
        return "UnboundedContinuous" if self.dtype.is_floating_point else "UnboundedDiscrete"

    def rand(self, shape=None):
        """Standard normal values; for an integer dtype, uniform integers in [-100, 100] within its range."""
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
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return np.asarray(host_array(val), dtype=self.dtype.np)


class UnboundedContinuous(Unbounded):
    """An ``Unbounded`` spec with a floating dtype."""

    def __init__(self, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(shape=shape, device=device, dtype=dtype, **kwargs)
        _require_dtype_kind(self, floating=True)


class UnboundedDiscrete(Unbounded):
    """An ``Unbounded`` spec with an integer dtype (default int64)."""
    domain = "discrete"

    def _default_dtype(self):
        return _dtypes.int64

    def __init__(self, shape=None, device=None, dtype=None, **kwargs):
        super().__init__(shape=shape, device=device, dtype=dtype, **kwargs)
        _require_dtype_kind(self, floating=False)


# ---- discrete -----------------------------------------------------------------------------------
def _index_in(val, upper):
    """Elementwise: whether ``val`` is a whole number in ``[0, upper)``."""
    inside = (val >= 0) & (val < upper)
    return inside & (val == val.floor()) if val.dtype.is_floating_point else inside


def _int_scalar_or_array(arr):
    """``to_numpy`` of an index: a Python int when 0-d, else an int64 array."""
    arr = np.asarray(arr)
    return builtins.int(arr) if arr.ndim == 0 else arr.astype(np.int64, copy=False)


class Categorical(MaskSupport, TensorSpec):
    """An integer in ``{0, ..., n - 1}`` per element: ``Categorical(n, shape=None, device=None, dtype=int64,
    mask=None)``; ``mask`` (bool, ``[*shape, n]``) allows only some categories (``update_mask``)."""
    domain = "discrete"

    def __init__(self, n, shape=None, device=None, dtype=None, mask=None):
        self.n = _check_positive_int(n, f"{type(self).__name__}: n")
        self.shape = Size(()) if shape is None else _size(shape)
        self.device = _device(device)
        self.dtype = _dtype(dtype, _dtypes.int64)  # a float dtype holds whole numbers, as torchrl allows
        if self.n > _iinfo_range(self.dtype)[1] + 1:
            raise ValueError(f"{type(self).__name__}: n={self.n} does not fit in dtype {self.dtype}")
        self.space = CategoricalBox(self.n)
        self.update_mask(mask)

    def cardinality(self):
        """The number of categories ``n``."""
        return self.n

    def _mask_sizes(self):
        return [self.n]

    def _mask_shape(self, shape=None):
        return tuple(self.shape if shape is None else shape) + (self.n,)

    def _mask_indices(self, values):
        return values.astype(np.int64)[..., None]

    def _mask_values(self, indices):
        return indices[..., 0]

    def rand(self, shape=None):
        """Uniform random category indices in [0, n) (only the allowed ones under a mask)."""
        if self.mask is not None:
            return self._masked_rand(shape)
        shape = _extra_shape(shape) + self.shape
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        return _ops.clamp((u * self.n).floor(), 0, self.n - 1).to(self.dtype)

    def _values_in(self, val):
        if self.dtype is _dtypes.bool:
            return True
        return _index_in(val, self.n).all()

    def _host_values_test(self):
        if self.dtype.is_floating_point:
            return None
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
                          dtype=self.dtype if dtype is None else dtype, mask=self._mask_like(shape, reshape))

    def _validate_host(self, arr):
        if arr.size and (arr.min() < 0 or arr.max() >= self.n):
            raise ValueError(f"{type(self).__name__}.encode: values must be in [0, {self.n}), got {arr}")
        return arr

    def to_numpy(self, val, safe=None):
        """The category as a Python int (0-d) or an int64 array (Gymnasium's ``Discrete`` format)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        if self.dtype is _dtypes.bool:
            return np.asarray(host_array(val), dtype=bool)
        return _int_scalar_or_array(host_array(val))

    def to_one_hot(self, val, safe=None):
        """Category indices as one-hot vectors (bool, a new last dim of size ``n``)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return _ops.one_hot(val.to(_dtypes.int64), self.n).to(_dtypes.bool)

    def to_one_hot_spec(self):
        """The matching ``OneHot`` spec (shape ``[*shape, n]``)."""
        return OneHot(self.n, shape=tuple(self.shape) + (self.n,), device=self.device)


class Binary(Categorical):
    """``n`` bits (0 or 1): ``Binary(n=None, shape=None, device=None, dtype=int8)``; ``shape[-1] == n``."""
    _feature_dims = 1

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

    def cardinality(self):
        """The number of bit patterns: ``2 ** n`` (torchrl 0.14.1 returns 2, the outcomes of one bit)."""
        return 2 ** self.n

    def _enumerate_rows(self):
        return np.array(list(itertools.product((0, 1), repeat=self.n)))

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        return Binary(self.n, shape=self.shape if shape is None else shape,
                      device=self.device if device is None else device,
                      dtype=self.dtype if dtype is None else dtype)

    def rand(self, shape=None):
        """Random 0/1 values of the spec's shape (``shape``: extra leading dims)."""
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

    def _validate_host(self, arr):
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise ValueError(f"Binary.encode: values must be 0 or 1, got {arr}")
        return arr

    def to_numpy(self, val, safe=None):
        """The bits as an array of this dtype (Gymnasium's ``MultiBinary`` format)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return np.asarray(host_array(val), dtype=self.dtype.np)


class OneHot(MaskSupport, TensorSpec):
    """A one-hot vector over ``n`` categories: ``OneHot(n, shape=None, device=None, dtype=bool)``,
    ``shape`` defaulting to ``[n]`` (its last dim must be ``n``)."""
    domain = "discrete"
    _feature_dims = 1

    def __init__(self, n, shape=None, device=None, dtype=None, use_register=False, mask=None):
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
        self.update_mask(mask)

    def cardinality(self):
        """The number of categories ``n``."""
        return self.n

    def _mask_sizes(self):
        return [self.n]

    def _mask_shape(self, shape=None):
        return tuple(self.shape if shape is None else shape)

    def _mask_indices(self, values):
        return one_hot_indices(values, [self.n])

    def _mask_values(self, indices):
        return one_hot_values(indices, [self.n])

    def _one_hot(self, index):
        return _ops.one_hot(index.to(_dtypes.int64), self.n).to(self.dtype)

    def rand(self, shape=None):
        """Random one-hot vectors (one category per row; only allowed ones under a mask)."""
        if self.mask is not None:
            return self._masked_rand(shape)
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
                          dtype=self.dtype if dtype is None else dtype, mask=self._mask_like(shape, reshape))

    def _encode_plan(self, val):
        return [self._encode_indices], self._encode_indices(val)

    def _encode_indices(self, val):
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
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return _int_scalar_or_array(np.argmax(host_array(val), axis=-1))

    def to_categorical(self, val, safe=None):
        """The category index (argmax over the last dim)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return val.to(_dtypes.int64).argmax(-1)  # (argmax takes no bool)

    def to_categorical_spec(self):
        """The matching ``Categorical`` spec."""
        return Categorical(self.n, shape=self.shape[:-1], device=self.device)

    def to_one_hot(self, val, safe=None):
        """``val`` itself: a one-hot value is already one-hot."""
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


class MultiCategorical(MaskSupport, TensorSpec):
    """One integer in ``{0, ..., nvec[i] - 1}`` per element: ``MultiCategorical(nvec, shape=None,
    device=None, dtype=int64)``; ``shape`` defaults to ``nvec``'s shape (``nvec`` broadcasts to it)."""
    domain = "discrete"
    _feature_dims = 1

    def __init__(self, nvec, shape=None, device=None, dtype=None, mask=None, remove_singleton=True):
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
        if self.dtype is _dtypes.bool:
            raise ValueError(f"MultiCategorical requires an integer or float dtype, got {self.dtype}")
        if arr.max() > _iinfo_range(self.dtype)[1] + 1:
            raise ValueError(f"MultiCategorical: nvec={arr.tolist()} does not fit in dtype {self.dtype}")
        self.remove_singleton = remove_singleton
        self.nvec = _tensor(arr, dtype=_dtypes.int64, device=self.device)
        self._nvec_f = self.nvec.to(_dtypes.float64)
        self.space = BoxList.from_nvec(arr)
        self.update_mask(mask)

    def cardinality(self):
        """The number of index combinations of one row: ``prod(nvec)``."""
        return math.prod(self._mask_sizes())

    def _mask_sizes(self):
        return [int(n) for n in self.nvec._host().reshape(-1, self.shape[-1])[0]]

    def _mask_shape(self, shape=None):
        shape = tuple(self.shape if shape is None else shape)
        return shape[:-1] + (builtins.sum(self._mask_sizes()),)

    def _mask_indices(self, values):
        return values.astype(np.int64)

    def _mask_values(self, indices):
        return indices

    def rand(self, shape=None):
        """Uniform random indices, each in [0, nvec[i]) (only the allowed ones under a mask). A spec of shape
        ``[1]`` with ``remove_singleton`` (the default) gives samples without that dim, as torchrl's."""
        if self.mask is not None:
            return self._masked_rand(shape)
        shape = _extra_shape(shape) + self.shape
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        out = _ops.minimum((u * self._nvec_f).floor(), self._nvec_f - 1).to(self.dtype)
        return out.squeeze(-1) if self._squeezes_samples() else out

    def _squeezes_samples(self):
        return self.remove_singleton and tuple(self.shape) == (1,)

    def is_in(self, val):
        """As every spec's; a sample without the singleton dim (``remove_singleton``) is in the spec too."""
        if self._squeezes_samples() and isinstance(val, Tensor) and (val.ndim == 0 or val.shape[-1] != 1):
            val = val.unsqueeze(-1)
        return super().is_in(val)

    def _values_in(self, val):
        return _index_in(val, self.nvec.to(val.device)).all()

    def _project(self, val):
        shape = val.shape
        val = val.to(_dtypes.float64)
        val = _ops.where(val.isnan(), zeros_like(val), val).round()
        out = _ops.clamp(val, zeros_like(self._nvec_f), self._nvec_f - 1).to(self.dtype)
        if self._squeezes_samples() and out.shape != shape:  # a sample without the singleton dim keeps its shape
            out = out.reshape(shape)
        return out

    def _indexed(self, index, shape):
        return MultiCategorical(self.nvec._host()[index], shape=shape, device=self.device, dtype=self.dtype,
                                mask=self._indexed_mask(index))

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else shape
        nvec = self.nvec._host()
        nvec = nvec.reshape(tuple(shape)) if reshape else np.broadcast_to(nvec, tuple(shape))
        return type(self)(nvec, shape=shape, device=self.device if device is None else device,
                          dtype=self.dtype if dtype is None else dtype, mask=self._mask_like(shape, reshape))

    def _validate_encoded(self, val):
        if val.numel() and not builtins.bool(self._values_in(val)):
            raise ValueError(f"MultiCategorical.encode: values must be in [0, nvec) with nvec="
                             f"{self.nvec.tolist()}, got {host_array(val).tolist()}")
        return val

    def to_numpy(self, val, safe=None):
        """An int64 array (Gymnasium's ``MultiDiscrete`` format)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return np.asarray(host_array(val)).astype(np.int64, copy=False)

    def _last_nvec(self):
        """The category counts along the last dim (torchrl's one-hot conversions need them equal across the
        leading dims)."""
        nvec = self.nvec._host().reshape(-1, self.shape[-1]) if len(self.shape) else self.nvec._host().reshape(1, 1)
        if (nvec != nvec[:1]).any():
            raise ValueError(f"MultiCategorical: the one-hot conversion needs the same nvec along the leading dims, "
                             f"got nvec={self.nvec.tolist()}")
        return [int(n) for n in nvec[0]]

    def to_one_hot(self, val, safe=None):
        """Indices ``[..., len(nvec)]`` as concatenated one-hot vectors (bool, last dim ``sum(nvec)``)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        val = val.to(_dtypes.int64)
        return _ops.cat([_ops.one_hot(val[..., i], n) for i, n in enumerate(self._last_nvec())], -1).to(_dtypes.bool)

    def to_one_hot_spec(self):
        """The matching ``MultiOneHot`` spec."""
        nvec = self._last_nvec()
        return MultiOneHot(nvec, shape=tuple(self.shape[:-1]) + (sum(nvec),), device=self.device)

    def _eq_fields(self, other):
        return bool(_ops.equal(self.nvec, other.nvec))


class MultiOneHot(MaskSupport, TensorSpec):
    """One one-hot vector per sub-space, concatenated along the last dim:
    ``MultiOneHot(nvec, shape=None, device=None, dtype=bool)``, ``shape[-1] == sum(nvec)``."""
    domain = "discrete"
    _feature_dims = 1

    def __init__(self, nvec, shape=None, device=None, dtype=None, use_register=False, mask=None):
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
        self.update_mask(mask)

    def cardinality(self):
        """The number of one-hot combinations: ``prod(nvec)``."""
        return math.prod(self.nvec)

    def _mask_sizes(self):
        return list(self.nvec)

    def _mask_shape(self, shape=None):
        return tuple(self.shape if shape is None else shape)

    def _mask_indices(self, values):
        return one_hot_indices(values, self.nvec)

    def _mask_values(self, indices):
        return one_hot_values(indices, self.nvec)

    @property
    def n(self):
        """The total number of categories: ``sum(nvec)``."""
        return builtins.sum(self.nvec)

    def _split(self, val):
        return _ops.split(val, self.nvec, -1)

    def _from_indices(self, idx):
        """Indices ``[..., len(nvec)]`` as the concatenated one-hot vectors."""
        return _ops.cat([_ops.one_hot(idx[..., i], n) for i, n in enumerate(self.nvec)], -1).to(self.dtype)

    def rand(self, shape=None):
        """Random concatenated one-hot vectors, one category per sub-space (only allowed ones under a mask)."""
        if self.mask is not None:
            return self._masked_rand(shape)
        shape = _extra_shape(shape) + self.shape[:-1] + (len(self.nvec),)
        u = _rand(*shape, dtype=_dtypes.float64, device=self.device)
        idx = _ops.minimum((u * self._nvec_f).floor(), self._nvec_f - 1).to(_dtypes.int64)
        return self._from_indices(idx)

    def zero(self, shape=None):
        """Concatenated one-hot vectors of category 0 in every sub-space."""
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
                          dtype=self.dtype if dtype is None else dtype, mask=self._mask_like(shape, reshape))

    def _encode_plan(self, val):
        return [self._encode_indices], self._encode_indices(val)

    def _encode_indices(self, val):
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
        out = self._from_indices(_tensor(arr.astype(np.int64), device=self.device))
        # torchrl reshapes to the spec's shape: a batch of indices is refused (a RuntimeError), as there
        return out if tuple(out.shape) == tuple(self.shape) else out.reshape(self.shape)

    def to_numpy(self, val, safe=None):
        """Each sub-space's index (argmax): an int64 array ``[..., len(nvec)]`` (Gymnasium's ``MultiDiscrete``)."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        host = host_array(val)
        bounds = np.cumsum([0] + self.nvec)
        return np.stack([np.argmax(host[..., a:b], axis=-1) for a, b in itertools.pairwise(bounds)],
                        -1).astype(np.int64)

    def to_categorical(self, val, safe=None):
        """Each sub-space's category index (argmax): ``[..., len(nvec)]``."""
        if check_spec_encode(safe):
            self.assert_is_in(val)
        return _ops.stack([part.argmax(-1) for part in self._split(val.to(_dtypes.int64))], -1)

    def to_categorical_spec(self):
        """The matching ``MultiCategorical`` spec."""
        return MultiCategorical(self.nvec, shape=self.shape[:-1] + (len(self.nvec),), device=self.device)

    def _eq_fields(self, other):
        return self.nvec == other.nvec

