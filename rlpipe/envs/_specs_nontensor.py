"""torchrl's specs of non-tensor data and of choices (``rlpipe.envs.specs`` is their public home):
``NonTensor`` (any Python object, as ``NonTensorData``/``NonTensorStack``) and ``Choice`` (a random
pick among specs, or among fixed non-tensor values).
"""
import numpy as np

from ..random import randint
from ..tensordict import NonTensorData, NonTensorStack, is_tensor_collection
from ..tensordict.utils import is_non_tensor
from .._device import resolve
from .._tensor import Size, Tensor
from ._specs_base import TensorSpec, _extra_shape, _size


def _same(a, b):
    """Whether two example values are equal (False when the comparison is not a plain bool)."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return a is b


class NonTensor(TensorSpec):
    """Non-tensor data (strings, objects): ``NonTensor(shape=(1,), device=None, dtype=None,
    example_data=None, batched=None, feature_dims=None)``. ``rand``/``zero``/``one`` give
    ``example_data`` as ``NonTensorData`` over the last ``feature_dims`` dims (all by default,
    none when ``batched``), stacked into a ``NonTensorStack`` over the leading ones."""
    domain = None

    def __init__(self, shape=(1,), device=None, dtype=None, example_data=None, batched=None, feature_dims=None):
        self.shape = Size((shape,)) if isinstance(shape, int) else _size(shape)
        self.device = None if device is None else resolve(device)
        self.dtype = dtype
        self.example_data = example_data
        if batched is not None and feature_dims is not None:
            raise ValueError(f"NonTensor: give batched or feature_dims, not both (got batched={batched}, "
                             f"feature_dims={feature_dims})")
        self.batched = bool(batched)
        self.feature_dims = (0 if self.batched else len(self.shape)) if feature_dims is None else feature_dims

    def _filled(self, value, shape=None):
        """``value`` as non-tensor data of ``shape`` extra leading dims plus the spec's shape."""
        total = tuple(_extra_shape(shape) + self.shape)
        split = len(total) - min(0 if self.batched else self.feature_dims, len(total))
        out = NonTensorData(value, batch_size=total[split:], device=self.device)
        for size in reversed(total[:split]):
            out = NonTensorStack(*[out.clone() for _ in range(size)])
        return out

    def rand(self, shape=None):
        """``example_data`` as non-tensor data of the spec's shape (``shape``: extra leading dims)."""
        return self._filled(self.example_data, shape)

    def zero(self, shape=None):
        """``rand(shape)``: a non-tensor spec has one example value."""
        return self.rand(shape)

    def one(self, shape=None):
        """``rand(shape)``: a non-tensor spec has one example value."""
        return self.rand(shape)

    def is_in(self, val):
        """True for any Python object; a tensor or TensorDict must be non-tensor data of a shape
        the spec's shape broadcasts to."""
        if not isinstance(val, Tensor) and not is_tensor_collection(val):
            return True
        if not is_non_tensor(val) or getattr(val, "dtype", None) != self.dtype:
            return False
        try:
            return np.broadcast_shapes(tuple(self.shape), tuple(val.shape)) == tuple(val.shape)
        except ValueError:
            return False

    def cardinality(self):
        """Not defined for non-tensor data (NotImplementedError)."""
        raise NotImplementedError("Cannot enumerate a NonTensor spec.")

    def project(self, val):
        """Not defined for non-tensor data (NotImplementedError)."""
        raise NotImplementedError("Cannot project a NonTensor spec.")

    def _encode_plan(self, val):
        return [self._filled], self._filled(val)

    def to_numpy(self, val, safe=None):
        """``val`` itself (non-tensor data has no array form)."""
        return val

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        shape = self.shape if shape is None else _size(shape)
        return NonTensor(shape, device=self.device if device is None else device, dtype=self.dtype,
                         example_data=self.example_data, feature_dims=min(self.feature_dims, len(shape)))

    def _eq_fields(self, other):
        return _same(self.example_data, other.example_data)

    def __repr__(self):
        return (f"NonTensor(\n    shape={self.shape},\n    device={self.device},\n    dtype={self.dtype},\n"
                f"    example_data={self.example_data!r})")


class Choice(TensorSpec):
    """A random pick among ``choices``: specs (``rand`` samples a random one of them) or fixed
    ``NonTensorData``/``NonTensorStack`` values (``rand`` returns one). All choices share one type,
    shape, dtype and device."""
    space = None
    domain = None

    def __init__(self, choices):
        if not isinstance(choices, list):
            raise TypeError(f"Choice: 'choices' must be a list, got {type(choices).__name__}")
        if not choices:
            raise ValueError("Choice: 'choices' must not be empty")
        first = choices[0]
        if not isinstance(first, (TensorSpec, NonTensorData, NonTensorStack)):
            raise TypeError(f"Choice: each choice must be either a TensorSpec, NonTensorData, or NonTensorStack, "
                            f"got {type(first).__name__}")
        for choice in choices[1:]:
            if not isinstance(choice, type(first)):
                raise TypeError(f"Choice: all choices must be the same type, got {type(first).__name__} and "
                                f"{type(choice).__name__}")
            for attr in ("shape", "dtype", "device"):
                if getattr(choice, attr) != getattr(first, attr):
                    raise ValueError(f"Choice: all choices must have the same {attr}, got {getattr(first, attr)} "
                                     f"and {getattr(choice, attr)}")
        self.shape, self.dtype, self.device = first.shape, first.dtype, first.device
        self._choices = [choice.clone() for choice in choices]

    @property
    def num_choices(self):
        """The number of choices."""
        return len(self._choices)

    def _specs(self):
        return isinstance(self._choices[0], TensorSpec)

    def _pick(self, index, sample):
        choice = self._choices[index]
        return sample(choice) if self._specs() else choice

    def rand(self, shape=None):
        """A sample of a uniformly chosen spec (or the chosen non-tensor value)."""
        index = int(randint(0, self.num_choices, ()).item())
        return self._pick(index, lambda spec: spec.rand(shape))

    def zero(self, shape=None):
        """The first choice's zero (or the first non-tensor value)."""
        return self._pick(0, lambda spec: spec.zero(shape))

    def one(self, shape=None):
        """The second choice's one (the first's when there is only one)."""
        return self._pick(min(1, self.num_choices - 1), lambda spec: spec.one(shape))

    def is_in(self, val):
        """Whether ``val`` lies in one of the specs (or equals one of the non-tensor values)."""
        if self._specs():
            return any(choice.is_in(val) for choice in self._choices)
        return any(_values_equal(choice, val) for choice in self._choices)

    def cardinality(self):
        """The number of non-tensor values, or the sum of the specs' cardinalities."""
        if self._specs():
            return sum(choice.cardinality() for choice in self._choices)
        return self.num_choices

    def project(self, val):
        """Not defined for a choice (NotImplementedError)."""
        raise NotImplementedError("project is not implemented for Choice.")

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        def moved(choice):
            if shape is not None:
                choice = choice.reshape(tuple(shape)) if reshape else choice.expand(tuple(shape))
            if device is not None:
                choice = choice.to(device)
            return choice.to(dtype) if dtype is not None and self._specs() else choice
        return Choice([moved(choice) for choice in self._choices])

    def __eq__(self, other):
        return (isinstance(other, Choice) and self.num_choices == other.num_choices
                and all(_values_equal(a, b) for a, b in zip(self._choices, other._choices)))

    __hash__ = None

    def __repr__(self):
        return f"Choice(num_choices={self.num_choices}, shape={self.shape}, choices={self._choices!r})"


def _values_equal(a, b):
    """Whether two choices (specs or non-tensor values) are equal."""
    if isinstance(a, TensorSpec):
        return a == b
    if type(a) is not type(b) or tuple(a.shape) != tuple(b.shape):
        return False
    equal = a == b
    return bool(equal.all()) if hasattr(equal, "all") else bool(equal)
