"""Non-tensor data in a TensorDict: ``NonTensorData`` (one Python object for the whole batch) and
``NonTensorStack`` (one object per batch element), tensordict 0.14's leaves for strings and other
Python objects.

Both are TensorDicts with no keys of their own, so every batch operation of a parent TensorDict
(indexing, reshape, expand, stack, clone, ``to``...) carries them along. A ``NonTensorData`` keeps its
object whatever the batch op. A ``NonTensorStack`` keeps its objects in a list and, as its only
(hidden) leaf, an int64 tensor of the batch's shape holding each element's position in that list:
batch ops move that tensor, so the objects follow.

``td["key"] = "a string"`` stores a ``NonTensorData``; ``td["key"]`` gives the object back (a list of
them for a stack) and ``td.get("key")`` the ``NonTensorData``/``NonTensorStack``. Memory maps store
the objects as JSON only (never pickled, nothing executed on load): an object JSON cannot carry
unchanged is refused with a TypeError naming its key.
"""
import json

import numpy as np

from .. import _dtypes, primitives as _ops
from .._creation import as_tensor, zeros as _zeros
from .._tensor import Size, Tensor
from ._common import _NO_DEFAULT, _as_batch_size
from ._io import _LOADERS
from ._td import TensorDict
from .base import TensorDictBase
from .utils import capture_non_tensor_stack, list_to_stack

__all__ = ["NonTensorDataBase", "NonTensorData", "NonTensorStack", "MetaData"]

_CODES = "__non_tensor_positions__"  # the hidden leaf of a NonTensorStack
_KIND = "non_tensor"


class _Carried:
    """``_build`` for the non-tensor kinds: called on an instance (a batch op's result), the result
    carries the instance's objects; called on the class, it builds a plain TensorDict."""

    def __get__(self, obj, cls):
        if obj is None:
            return TensorDict._build
        return lambda entries, batch_size, device: obj._rebuilt(entries, batch_size, device)


class NonTensorDataBase(TensorDict):
    """What NonTensorData and NonTensorStack share: a TensorDict whose payload is Python objects."""
    __slots__ = ()
    _is_non_tensor = True
    _build = _Carried()

    def _walk_tree(self, leaves_only, include_nested=True, prefix=()):
        return iter(())  # no keys of its own (a stack's positions stay hidden)

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        return []

    def _check_json(self, key):
        """TypeError naming ``key`` unless JSON carries every object unchanged."""
        for obj in self._objects():
            try:
                same = json.loads(json.dumps(obj, allow_nan=False)) == obj
            except (TypeError, ValueError):
                same = False
            if not same:
                raise TypeError(f"memmap: the non-tensor entry {key!r} holds a {type(obj).__name__} ({obj!r:.60}) "
                                f"that JSON cannot store unchanged; rlpipe stores non-tensor data as JSON only "
                                f"(never pickled): use str, int, float, bool, None, lists or dicts of those")

    def _object_array(self):
        """The objects as a NumPy object array of the batch's shape."""
        positions, objects = self._positions()
        table = np.empty(len(objects), dtype=object)
        for i, obj in enumerate(objects):
            table[i] = obj
        codes = np.asarray(positions.tolist(), dtype=np.int64)
        return table[codes.reshape(-1)].reshape(codes.shape)  # an array even for batch [] (not the object)

    def _compare_objects(self, other, op):
        """``self == other`` (or !=, |, ^...) object by object: a bool tensor of the batch's shape, as
        tensordict gives for non-tensor entries."""
        theirs = other._object_array() if getattr(other, "_is_non_tensor", False) else other
        mine = self._object_array()
        return as_tensor(np.asarray(_OBJECT_OPS[op](mine, theirs), dtype=bool), device=self._device)

    def __eq__(self, other):
        return self._compare_objects(other, _ops.eq)

    def __ne__(self, other):
        return self._compare_objects(other, _ops.ne)

    __hash__ = object.__hash__

    def get_non_tensor(self, key=None, default=None):
        return self.value() if key is None else super().get_non_tensor(key, default)

    def where(self, condition, other, *, out=None, pad=None):
        """``condition ? self : other`` element by element (``other``: non-tensor data or one object),
        as a NonTensorStack; with ``out`` (a NonTensorStack), written into it."""
        if not isinstance(other, NonTensorDataBase):
            other = NonTensorData(other, batch_size=self._batch_size, device=self._device)
        mine, my_objects = self._positions()
        theirs, their_objects = other._positions()
        picked = _ops.where(condition, mine, theirs + len(my_objects))
        result = NonTensorStack._make(picked, list(my_objects) + list(their_objects), self._device)
        if out is None:
            return result
        if not isinstance(out, NonTensorStack):
            raise TypeError(f"where: out must be a NonTensorStack for non-tensor data, got {type(out).__name__}")
        out[...] = result
        return out

    def contiguous(self, *args, **kwargs):
        return self  # the objects are their own contiguous form

    def to_dict(self, *args, **kwargs):
        """The object(s) held, as tensordict's ``to_dict`` gives non-tensor data."""
        return self.value()

    def __repr__(self):
        return (f"{type(self).__name__}(data={self.value()!r}, batch_size={self._batch_size}, "
                f"device={self._device})")


class NonTensorData(NonTensorDataBase):
    """One Python object standing for every element of the batch.

    >>> NonTensorData("hello", batch_size=[3])[0].data
    'hello'
    """
    __slots__ = ("_nt_data",)

    def __init__(self, data=None, batch_size=None, device=None, names=None, **kwargs):
        super().__init__({}, batch_size=batch_size, device=device, names=names)
        self._nt_data = data.value() if isinstance(data, NonTensorDataBase) else data

    def _rebuilt(self, entries, batch_size, device):
        out = TensorDict._build.__func__(type(self), {}, batch_size, device)
        out._nt_data = self._nt_data
        return out

    @property
    def data(self):
        return self._nt_data

    @data.setter
    def data(self, value):
        self._nt_data = value

    def value(self):
        """The object held (``data``'s other name)."""
        return self._nt_data

    def _objects(self):
        return [self._nt_data]

    def _positions(self):
        """(positions, objects): this data as a stack's positions tensor and object list."""
        return _zeros(tuple(self._batch_size), dtype="int64", device=self._device), [self._nt_data]

    def tolist(self, *args, **kwargs):
        return _as_nested_list(np.zeros(tuple(self._batch_size), np.int64), [self._nt_data])

    def __call__(self, *args, **kwargs):
        """Calls the object held (a function stored as non-tensor data, as ``apply`` may pass it)."""
        return self._nt_data(*args, **kwargs)

    def expand(self, *shape):
        """A NonTensorStack holding this object at every element of the expanded batch (tensordict's
        expand of non-tensor data)."""
        positions, objects = self._positions()
        return NonTensorStack._make(positions, objects, self._device).expand(*shape)

    def _write_memmap_meta(self, prefix, **entries):
        super()._write_memmap_meta(prefix, **entries, kind=_KIND, data=self._nt_data)


class NonTensorStack(NonTensorDataBase):
    """One Python object per batch element (what stacking NonTensorData gives).

    >>> s = NonTensorStack("a", "b")
    >>> s.batch_size, s.tolist(), s[1].data
    (rlpipe.Size([2]), ['a', 'b'], 'b')
    """
    __slots__ = ("_nt_items",)

    def __init__(self, *items, stack_dim=0, batch_size=None, device=None, **kwargs):
        parts = [item if isinstance(item, NonTensorDataBase) else NonTensorData(item, device=device) for item in items]
        if parts:
            built = _join(parts, stack_dim, "stack")
        else:
            built = NonTensorStack._make(_zeros(tuple(_as_batch_size(batch_size)), dtype="int64"), [], device)
        TensorDict.__init__(self, {}, batch_size=built._batch_size, device=built._device)
        self._tensordict[_CODES] = built._tensordict[_CODES]
        self._nt_items = built._nt_items
        if batch_size is not None and _as_batch_size(batch_size) != self._batch_size:
            raise RuntimeError(f"batch_size {list(_as_batch_size(batch_size))} does not match the stack's "
                               f"{list(self._batch_size)}")

    @classmethod
    def _make(cls, positions, objects, device):
        out = TensorDict._build.__func__(cls, {_CODES: positions}, Size(positions.shape), device)
        out._nt_items = list(objects)
        return out

    @classmethod
    def from_object_array(cls, array, device=None):
        """A stack of the objects of a NumPy object array, shaped like it (an rlpipe addition: what
        collectors gather an env's non-tensor observations into; unlike ``from_list``, an object
        that is itself a list stays one element)."""
        positions = as_tensor(np.arange(array.size, dtype=np.int64).reshape(array.shape), device=device)
        return cls._make(positions, list(array.reshape(-1)),
                         positions.device if device is not None else None)

    @classmethod
    def from_list(cls, data, device=None, names=None):
        """A stack shaped like the nested lists ``data`` (its leaves: objects or NonTensorData)."""
        objects = []
        shape = _list_shape(data)
        flat = _flatten(data, len(shape))
        for item in flat:
            objects.append(item.value() if isinstance(item, NonTensorDataBase) else item)
        positions = as_tensor(np.arange(len(objects), dtype=np.int64).reshape(shape), device=device)
        return cls._make(positions, objects, positions.device if device is not None else None)

    def _rebuilt(self, entries, batch_size, device):
        positions = entries.get(_CODES)
        if positions is None:
            return TensorDict._build(entries, batch_size, device)
        if not batch_size:
            return NonTensorData(self._nt_items[int(positions.item())], batch_size=[], device=device)
        out = TensorDict._build.__func__(NonTensorStack, {_CODES: positions}, batch_size, device)
        out._nt_items = self._nt_items
        return out

    def _positions(self):
        return self._tensordict[_CODES], self._nt_items

    def _map(self, fn, batch_size=None, device=_NO_DEFAULT):
        """``fn`` (a TensorDict op's per-leaf function) moves the objects when it rearranges the batch
        (index, reshape, flip, expand, a device move...) and leaves them alone when it computes new
        values (``t + 1``, a dtype cast...). It runs on a probe holding a distinct float per object
        (log(i + 2) + pi: no shift, scaling or cast of it gives another); a result holding only probe
        values is a rearrangement."""
        positions = self._tensordict[_CODES]
        table = np.log(np.arange(len(self._nt_items)) + 2.0) + np.pi
        probe = as_tensor(table[np.asarray(positions.tolist(), dtype=np.int64)], device=positions.device)
        moved = fn(probe)
        lookup = {value: i for i, value in enumerate(table.tolist())}
        if isinstance(moved, Tensor) and moved.dtype is _dtypes.float64:
            values = np.asarray(moved.tolist(), dtype=np.float64)
            if all(v in lookup for v in values.ravel().tolist()):
                found = np.vectorize(lookup.__getitem__, otypes=[np.int64])(values) if values.size else \
                    values.astype(np.int64)
                positions = as_tensor(found, device=moved.device)
        batch_size = self._batch_size if batch_size is None else batch_size
        return self._rebuilt({_CODES: positions}, batch_size, self._device if device is _NO_DEFAULT else device)

    def _apply_tree(self, fn, others, batch_size, device, inplace, nested_keys, default, drop_empty, prefix,
                    produced):
        """``apply``'s functions are for tensors: the objects are kept as they are."""
        if inplace:
            return self
        batch_size = self._batch_size if batch_size is None else _as_batch_size(batch_size)
        return self._rebuilt(dict(self._tensordict), batch_size, self._device if device is _NO_DEFAULT else device)

    def value(self):
        """The objects held, as a nested list over the batch dims."""
        return self.tolist()

    data = property(value)

    def _objects(self):
        used = sorted(set(np.asarray(self._tensordict[_CODES].tolist()).ravel().tolist()))
        return [self._nt_items[i] for i in used]

    def tolist(self, *args, **kwargs):
        return _as_nested_list(np.asarray(self._tensordict[_CODES].tolist(), dtype=np.int64), self._nt_items)

    def __setitem__(self, index, value):
        """``stack[index] = obj`` (or a NonTensorData/NonTensorStack) writes objects at ``index``."""
        if isinstance(index, str):
            raise KeyError(f"a NonTensorStack has no keys; cannot set {index!r}")
        given = value if isinstance(value, NonTensorDataBase) else NonTensorData(value)
        positions, objects = given._positions()
        self._tensordict[_CODES][index] = positions + len(self._nt_items)
        self._nt_items = self._nt_items + list(objects)

    def _write_memmap_meta(self, prefix, **entries):
        super()._write_memmap_meta(prefix, **entries, kind=_KIND, items=self._nt_items)

    @classmethod
    def lazy_stack(cls, items, dim=0, **kwargs):
        return _join(list(items), dim, "stack")


class MetaData(NonTensorData):
    """A NonTensorData for metadata: stacking or concatenating MetaData that hold the very same object
    (``is``, not ``==``) gives one MetaData, whatever ``set_capture_non_tensor_stack`` says.
    ``MetaData[str]`` is a subclass whose data must be of that type (TypeError otherwise)."""
    __slots__ = ()
    _typed = {}
    data_type = None

    def __init__(self, data=None, *args, **kwargs):
        wanted = type(self).data_type
        if isinstance(wanted, type) and not isinstance(data, (wanted, NonTensorDataBase)):
            raise TypeError(f"{type(self).__name__}: Expected data of type {wanted.__name__}, got "
                            f"{type(data).__name__}")
        super().__init__(data, *args, **kwargs)

    def expand(self, *shape):
        """Metadata stays one MetaData over the expanded batch."""
        return NonTensorDataBase.expand(self, *shape)

    def __class_getitem__(cls, data_type):
        if data_type not in cls._typed:
            name = f"{cls.__name__}[{getattr(data_type, '__name__', data_type)}]"
            cls._typed[data_type] = type(name, (cls,), {"__slots__": (), "data_type": data_type})
        return cls._typed[data_type]

# the ops a parent's comparison passes down, as NumPy applies them to object arrays
_OBJECT_OPS = {_ops.eq: np.equal, _ops.ne: np.not_equal, _ops.bitwise_and: np.bitwise_and,
               _ops.bitwise_or: np.bitwise_or, _ops.bitwise_xor: np.bitwise_xor}


def _list_shape(data):
    shape = []
    while isinstance(data, (list, tuple)):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return tuple(shape)


def _flatten(data, depth):
    if depth == 0:
        return [data]
    if not isinstance(data, (list, tuple)):
        raise ValueError(f"NonTensorStack.from_list: ragged nested lists (got a {type(data).__name__} where a list "
                         f"was expected)")
    return [leaf for item in data for leaf in _flatten(item, depth - 1)]


def _as_nested_list(positions, objects):
    """``positions`` (an int array) with each position replaced by its object, as nested lists."""
    if positions.ndim == 0:
        return objects[int(positions)]
    return [_as_nested_list(row, objects) for row in positions]


def _join(values, dim, how):
    """rlpipe.stack / rlpipe.cat of NonTensorData/NonTensorStack: a NonTensorStack. As in tensordict,
    a cat of equal NonTensorData is one NonTensorData, and so is a stack of them under
    ``set_capture_non_tensor_stack(True)``."""
    for i, value in enumerate(values):
        if not isinstance(value, NonTensorDataBase):
            raise TypeError(f"{how}: cannot join non-tensor data with a {type(value).__name__} (position {i})")
    parts, objects = [], []
    for value in values:
        positions, items = value._positions()
        parts.append(positions + len(objects))
        objects.extend(items)
    joined = _ops.stack(parts, dim) if how == "stack" else _ops.cat(parts, dim)
    if _joins_to_one(values, how):
        return type(values[0])(values[0].data, batch_size=joined.shape, device=values[0]._device)
    return NonTensorStack._make(joined, objects, values[0]._device)


def _joins_to_one(values, how):
    """Whether joining ``values`` gives one NonTensorData (see ``_join``)."""
    if all(isinstance(v, MetaData) for v in values):
        return all(v.data is values[0].data for v in values)
    return (how == "cat" or capture_non_tensor_stack()) and _all_same_data(values)


def _all_same_data(values):
    """Whether ``values`` are all NonTensorData holding equal objects."""
    if not all(isinstance(v, NonTensorData) for v in values):
        return False
    try:
        return all(bool(v.data == values[0].data) for v in values)
    except (TypeError, ValueError):
        return False


def _written_at(dest, index, value, batch_size, device):
    """The non-tensor entry ``dest`` (None when missing) after ``dest[index] = value``: a missing
    entry takes ``value``'s object everywhere, as tensordict does."""
    if dest is None:
        if isinstance(value, NonTensorData):
            return NonTensorData(value.data, batch_size=batch_size, device=device)
        positions, objects = value._positions()
        dest = NonTensorData(objects[0] if objects else None, batch_size=batch_size, device=device)
    if not isinstance(dest, NonTensorDataBase):
        raise TypeError(f"td[index] = value: a {type(dest).__name__} cannot receive non-tensor data")
    if _all_same_data([dest, value]):
        return dest  # writing the object it already holds everywhere
    positions, objects = dest._positions()
    out = NonTensorStack._make(positions.clone(), objects, device)
    out[index] = value
    return out


def _load(prefix, meta, load_dense):
    """What a NonTensorData/NonTensorStack ``memmap_(prefix)`` stored (objects read from JSON)."""
    dense = load_dense()
    if "items" in meta:
        items = meta["items"]
        if not isinstance(items, list):
            raise ValueError(f"items must be a list, got {type(items).__name__}")
        out = NonTensorStack._make(dense._tensordict[_CODES], items, None)
    else:
        out = NonTensorData(meta.get("data"), batch_size=dense.batch_size)
    return out.lock_()._mark_memmap()


_LOADERS[_KIND] = _load
# the modules below this one reach these through TensorDictBase (they cannot import it)
TensorDictBase._non_tensor_types = (NonTensorData, NonTensorStack, _join, _written_at, list_to_stack)
