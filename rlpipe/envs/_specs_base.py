"""The base of the tensor specs (``rlpipe.envs.specs`` is their public home): the shared helpers that
check shapes, dtypes and devices, the spaces (``ContinuousBox``, ``CategoricalBox``, ``BinaryBox``,
``BoxList``) and ``TensorSpec``, the base class every spec derives from.
"""
import builtins
import functools
import math
import sys
import warnings

import numpy as np

from .. import _dtypes, primitives as _ops
from .._creation import as_tensor, from_numpy, full, zeros
from .._device import CPU, resolve
from .._tensor import Size, Tensor, host_array, size_repr as _shape_str


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


def check_spec_encode(safe=None):
    """Whether encode and to_numpy check values against the spec (AssertionError when outside): ``safe``
    when given, else torchrl's module switch ``_CHECK_SPEC_ENCODE`` of ``rlpipe.envs.specs`` (from the
    environment variable ``CHECK_SPEC_ENCODE``; ``torchrl.data.tensor_specs`` is that module too)."""
    if safe is not None:
        return safe
    # read from the public module (set there by users and torchrl's tests), which imports this one
    return getattr(sys.modules.get(__package__ + ".specs"), "_CHECK_SPEC_ENCODE", False)


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

def _dim_index(dim, ndim, what):
    """``dim`` (negative from the end) as an index into ``ndim`` dims; an IndexError out of range."""
    if not -ndim <= dim < max(ndim, 1):
        raise IndexError(f"{what}: dim {dim} out of range for a spec with {ndim} dims")
    return dim % max(ndim, 1)

class ContinuousBox:
    """The box ``[low, high]`` of a ``Bounded`` (or ``Unbounded``) spec; ``low``/``high`` are tensors."""

    def __init__(self, low, high):
        self.low, self.high = low, high

    @property
    def device(self):
        """The device of the bounds."""
        return self.low.device

    def to(self, device):
        """The box with its bounds on ``device``."""
        return ContinuousBox(self.low.to(device), self.high.to(device))

    def clone(self):
        """A copy of the box (bounds cloned)."""
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
        """The box on ``device`` (it holds no tensor: the same object)."""
        return self

    def clone(self):
        """A copy of the box."""
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
        """A ``BoxList`` of one ``CategoricalBox`` per entry of ``nvec``."""
        return cls(CategoricalBox(builtins.int(n)) for n in np.asarray(nvec).reshape(-1))

    def to(self, device):
        """The boxes on ``device`` (they hold no tensors: the same object)."""
        return self

    def clone(self):
        """A copy of the boxes."""
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
    _feature_dims = 0  # trailing dims that hold one value together (one-hot rows): an index stops before them

    # ---- to override ----
    def rand(self, shape=None):
        """A random value in the spec, with ``shape`` as extra leading dims."""
        raise NotImplementedError

    def zero(self, shape=None):
        """Zeros of the spec's shape and dtype, with ``shape`` as extra leading dims."""
        return zeros(_extra_shape(shape) + self.shape, dtype=self.dtype, device=self.device)

    def zeros(self, shape=None):
        """``zero(shape)`` (torchrl's other name)."""
        return self.zero(shape)

    def one(self, shape=None):
        """Ones of the spec's shape and dtype, with ``shape`` as extra leading dims."""
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
        """The number of dims of the spec's shape."""
        return len(self.shape)

    def ndimension(self):
        """The number of dims of the spec's shape (``ndim``)."""
        return len(self.shape)

    def numel(self):
        """The number of elements of the spec's shape."""
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
        """``is_in(val)`` (torchrl's other name)."""
        return self.is_in(val)

    def assert_is_in(self, val):
        """An AssertionError naming the value and the spec when ``val`` is not in the spec."""
        if not self.is_in(val):
            got = (f"shape={_shape_str(val.shape)}, dtype={val.dtype}" if isinstance(val, Tensor)
                   else f"a {type(val).__name__}")
            raise AssertionError(f"Encoding failed because value is not in space. Consider calling "
                                 f"project(val) first. value={val!r} ({got}), spec={self!r}")

    def type_check(self, value, key=None):
        """A TypeError when ``value`` is not a Tensor of the spec's dtype (``key`` names the entry)."""
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
        return val if self._has_shape(val) else self._reshape_to_spec(val)

    def project(self, val):
        """``val`` mapped into the space (clamped, rounded, cast); returned unchanged when already in it."""
        val = self._shaped(val)
        if self.is_in(val):
            return val
        return self._project(val)

    # ---- encode: eager, or through cached conversion steps (memoize_encode) ----
    def encode(self, val, ignore_device=False):
        """A host value (NumPy array, number, list, tensor) as a tensor of this dtype and shape on
        ``device`` (a value of another shape is reshaped, or a RuntimeError "Shape mismatch", as
        torchrl's). Under ``memoize_encode`` the conversion steps chosen for the first value of a
        given type and shape are cached and replayed for the next ones. Under torchrl's
        ``_CHECK_SPEC_ENCODE`` a value outside the spec is an AssertionError."""
        try:
            return self._encode_memoized(val, ignore_device)
        except ValueError as error:
            if check_spec_encode():
                raise AssertionError(f"Encoding failed because value is not in space: {error}") from error
            raise

    def _encode_memoized(self, val, ignore_device):
        memo = self.__dict__.get("_encode_memo_dict")
        if memo is None:
            return self._encode_plan(val)[1]
        key = (ignore_device, type(val), getattr(val, "shape", None))
        encoder = memo.get(key)
        if encoder is not None:
            return encoder(val)
        steps, out = self._encode_plan(val)
        memo[key] = functools.partial(_run_steps, tuple(steps))
        return out

    def memoize_encode(self, mode=True):
        """Caches ``encode``'s conversion steps per input type and shape (``mode=False``: back to the
        eager encode, cache dropped). Worth it when an env encodes values of one format every step."""
        warnings.warn("memoized encoding is an experimental feature. Use at your own risks.", stacklevel=2)
        if mode:
            self.__dict__.setdefault("_encode_memo_dict", {})
        else:
            self.__dict__.pop("_encode_memo_dict", None)

    def erase_memoize_cache(self):
        """Drops the cached ``encode`` steps (memoization stays on when it was)."""
        memo = self.__dict__.get("_encode_memo_dict")
        if memo is not None:
            memo.clear()

    def __getstate__(self):
        state = dict(self.__dict__)
        if "_encode_memo_dict" in state:
            state["_encode_memo_dict"] = {}  # cached steps are rebuilt after unpickling
        return state

    def _encode_plan(self, val):
        """``(steps, encoded)``: the conversion steps ``encode`` takes for values like ``val``, and
        ``val`` encoded by them. The steps: host conversion and check (non-tensors), tensor of
        this dtype on this device, a reshape to the spec's shape when needed, the value check."""
        steps = [] if isinstance(val, Tensor) else [np.asarray, self._validate_host]
        steps.append(self._to_spec_tensor)
        out = _run_steps(steps, val)
        if tuple(out.shape) != tuple(self.shape):
            steps.append(self._reshape_to_spec)
            out = self._reshape_to_spec(out)
        steps.append(self._validate_encoded)
        out = self._validate_encoded(out)
        if check_spec_encode():
            steps.append(self._asserted_in)
            out = self._asserted_in(out)
        return steps, out

    def _asserted_in(self, val):
        self.assert_is_in(val)
        return val

    def _validate_host(self, arr):
        """``arr`` (a host array to encode), checked against the space (raises ValueError)."""
        return arr

    def _validate_encoded(self, val):
        """``val`` (an encoded tensor), checked against the space (raises ValueError)."""
        return val

    def _to_spec_tensor(self, val):
        return _tensor(val, dtype=self.dtype, device=self.device)

    def _reshape_to_spec(self, val):
        if val.numel() != self.shape.numel():
            raise RuntimeError(f"Shape mismatch: the value has shape {_shape_str(val.shape)} which is incompatible "
                               f"with the spec shape {_shape_str(self.shape)}.")
        return val.reshape(self.shape)

    def to_numpy(self, val, safe=None):
        """A tensor of this spec as a NumPy array of its dtype (what a Gymnasium env takes)."""
        if check_spec_encode(safe):
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
        """The spec with another shape of as many elements (one dim may be -1)."""
        if len(shape) == 1 and not isinstance(shape[0], (builtins.int, np.integer)):
            shape = shape[0]
        shape = list(shape)
        if shape.count(-1) == 1:
            known = builtins.int(np.prod([s for s in shape if s != -1]))
            shape[shape.index(-1)] = self.shape.numel() // known if known else 0
        return self._check_reshape(_size(shape))

    view = reshape

    def unsqueeze(self, dim):
        """The spec with a new dim of size 1 at ``dim``."""
        n = len(self.shape) + 1
        if not -n <= dim < n:
            raise IndexError(f"unsqueeze: dim {dim} out of range for a spec of shape {list(self.shape)}")
        dim = dim + n if dim < 0 else dim
        return self._check_reshape(Size(self.shape[:dim] + (1,) + self.shape[dim:]))

    def flatten(self, start_dim=0, end_dim=-1):
        """The spec with dims ``start_dim`` to ``end_dim`` merged into one."""
        n = len(self.shape)
        start, end = _dim_index(start_dim, n, "flatten"), _dim_index(end_dim, n, "flatten")
        if start > end:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        merged = builtins.int(np.prod(self.shape[start:end + 1], dtype=np.int64))
        return self._check_reshape(Size(self.shape[:start] + (merged,) + self.shape[end + 1:]))

    def unflatten(self, dim, sizes):
        """The spec with dim ``dim`` split into ``sizes``."""
        dim = _dim_index(dim, len(self.shape), "unflatten")
        return self._check_reshape(Size(self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:]))

    def squeeze(self, dim=None):
        """The spec without its size-1 dims (only ``dim``, when given)."""
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
        """A copy of the spec."""
        return self._with()

    def __getitem__(self, index):
        """The spec of ``value[index]`` for values of this spec (ints, slices, lists, tensors,
        Ellipsis and None over the leading dims; the dims holding one value stay whole)."""
        items = index if isinstance(index, tuple) else (index,)
        index = tuple(host_array(item) if isinstance(item, Tensor) else item for item in items)
        kept = len(self.shape) - self._feature_dims
        try:
            lead = np.broadcast_to(np.empty((), dtype=bool), tuple(self.shape[:kept]))[index]
        except IndexError as err:
            raise IndexError(f"{type(self).__name__}: the index {index} does not fit the spec's indexable dims "
                             f"{list(self.shape[:kept])} (shape {list(self.shape)}): {err}") from None
        return self._indexed(index, Size(lead.shape + tuple(self.shape[kept:])))

    def _indexed(self, index, shape):
        """The spec of ``value[index]``, of shape ``shape``: a uniform space only changes shape."""
        return self._with(shape=shape, reshape=True)

    def unbind(self, dim=0):
        """The specs of ``value.unbind(dim)``: one per index along ``dim``."""
        n = len(self.shape)
        if not -n <= dim < n:
            raise IndexError(f"unbind: dim {dim} out of range for a spec of shape {list(self.shape)}")
        dim = dim + n if dim < 0 else dim
        if dim >= n - self._feature_dims:
            raise ValueError(f"{type(self).__name__}.unbind: dim {dim} of shape {list(self.shape)} must remain whole "
                             f"(the last {self._feature_dims} dims hold each value)")
        return tuple(self[(slice(None),) * dim + (i,)] for i in range(self.shape[dim]))

    def to(self, dest):
        """The spec on another device, or (given an rlpipe dtype) with another dtype."""
        if isinstance(dest, _dtypes.dtype):
            return self if dest is self.dtype else self._with(dtype=dest)
        dev = resolve(dest)
        if dev is self.device:
            return self
        return self._with(device=dev)

    def cpu(self):
        """The spec on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None):
        """The spec on a CUDA device (``device``, default the current one)."""
        return self.to("cuda" if device is None else device)

    def _eq_fields(self, other):
        return True

    def enumerate(self, use_mask=False):
        """Every value of the spec, stacked along a new first dim: the discrete specs only."""
        raise NotImplementedError(f"{type(self).__name__}.enumerate: only discrete specs (Categorical, OneHot, "
                                  "MultiCategorical, MultiOneHot, Binary and Composites of them) can be enumerated")

    def _stack_different(self, specs, dim):
        """The stack of ``specs`` (this one first) when they differ: torchrl's lazy ``Stacked``."""
        return self._lazy_stack_class(specs, dim)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """``rlpipe.stack(specs, dim)`` stacks specs (``stack_specs``), ``rlpipe.index_select(spec, dim, index)``
        selects along a dim (``index_select_spec``); other functions are not for specs."""
        if func is _ops.stack:
            return stack_specs(*args, **(kwargs or {}))
        if func is _ops.index_select:
            return index_select_spec(*args, **(kwargs or {}))
        return NotImplemented

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


def _run_steps(steps, val):
    """``val`` passed through each of ``steps`` in turn."""
    for step in steps:
        val = step(val)
    return val


def index_select_spec(input, dim, index):
    """The spec of ``rlpipe.index_select`` of its samples: ``input`` indexed by the 1-d ``index`` along ``dim``
    (bounds, masks and the entries of a Composite with it), as torchrl's. The last dim of a one-hot, binary
    (its domain) or multi-categorical spec (torchrl selects among its nvec) and lazily stacked specs are refused."""
    ndim = len(input.shape)
    dim = dim + ndim if dim < 0 else dim
    if not 0 <= dim < ndim:
        raise IndexError(f"index_select: dim {dim} out of range for a spec of shape {list(input.shape)}")
    values = host_array(index).reshape(-1)
    if values.size and (values.min() < 0 or values.max() >= input.shape[dim]):
        raise IndexError(f"index {values.tolist()} is out of bounds for dimension {dim} with size {input.shape[dim]}")
    if getattr(input, "stack_dim", None) is not None:  # a lazy stack
        raise NotImplementedError(f"index_select is not supported for {type(input).__name__} specs")
    if dim >= ndim - input._feature_dims:  # one-hot and binary rows (rlpipe: MultiCategorical's too)
        raise ValueError(f"Cannot index_select along the last dimension of {type(input).__name__} spec, as it "
                         "represents the domain.")
    return input[(slice(None),) * dim + (as_tensor(values.astype(np.int64)),)]


def stack_specs(specs, dim=0, *, out=None):
    """torchrl's ``torch.stack`` of specs: equal specs give the first one with a new dim of size
    ``len(specs)`` at ``dim``. Composite specs that differ give torchrl's lazy ``StackedComposite``,
    leaf specs that differ its ``Stacked``."""
    specs = list(specs)
    if not specs:
        raise RuntimeError("Stacking specs cannot occur: expected a non-empty list of specs, got an empty one")
    first = specs[0]
    for spec in specs[1:]:
        if not isinstance(spec, type(first)):
            raise RuntimeError(f"Stacking specs cannot occur: Found more than one type of specs in the list "
                               f"({type(first).__name__} and {type(spec).__name__})")
        if spec.device != first.device and first.device is not None:
            raise RuntimeError(f"Stacking specs cannot occur: found more than one device in the list "
                               f"({first.device} and {spec.device})")
        if spec.dtype != first.dtype and not hasattr(first, "keys"):  # a Composite's dtype is its leaves' own
            raise RuntimeError(f"Stacking specs cannot occur: Dtypes differ, found more than one dtype in the list "
                               f"({first.dtype} and {spec.dtype})")
        if len(spec.shape) != len(first.shape):
            raise RuntimeError(f"Stacking specs cannot occur: Ndims differ, found more than one number of "
                               f"dimensions in the list ({len(first.shape)} and {len(spec.shape)})")
    if out is not None:
        raise TypeError("stack of specs: out= is not supported for specs (got a value for out)")
    if any(spec != first for spec in specs[1:]):
        return first._stack_different(specs, dim)
    shape = list(first.shape)
    dim = dim + len(shape) + 1 if dim < 0 else dim
    if not 0 <= dim <= len(shape):
        raise IndexError(f"stack of specs: dim {dim} out of range for specs of shape {shape}")
    shape.insert(dim, len(specs))
    return first.clone().unsqueeze(dim).expand(shape)
