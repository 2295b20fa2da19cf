"""``TensorDictBase``: the contract every kind of TensorDict fulfils, as tensordict 0.14's abstract base
class states it, and the behaviour all kinds share, written against that contract.

A kind implements the abstract methods below (storage: ``get``/``set``/``keys``/``batch_size``...;
batch ops: ``_index``, ``reshape``, ``permute``...); the rest of this class and ``TensorDictMath``
(``_math.py``) work through them, so a lazy stack or a tensorclass can sit beside ``TensorDict``
(``_td.py``, the dense kind). ``isinstance(x, TensorDictBase)`` holds for every kind.

The abstract methods make the class uninstantiable through ``__abstractmethods__``, as ``abc`` does,
but without ``ABCMeta``: that metaclass puts a Python-level ``__instancecheck__`` behind every
``isinstance(x, TensorDictBase)``, which the per-leaf loops run on every leaf.
"""
import abc

import numpy as np

from .. import _dtypes, primitives as _ops
from .._tensor import Tensor, size_repr as _shape_str
from ._common import _NO_DEFAULT, _RAISE
from ._math import TensorDictMath
from ._torch_func import TD_HANDLED_FUNCTIONS
from .keys import unravel_key_to_tuple

__all__ = ["TensorDictBase", "is_tensor_collection", "is_leaf_nontensor"]


class TensorDictBase(TensorDictMath):
    """A dict of tensors sharing leading batch dims, acting like one tensor: the contract (abstract
    methods) and the behaviour written against it (see the module docstring)."""
    __slots__ = ()
    _is_non_tensor = False  # True for NonTensorData and NonTensorStack

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__abstractmethods__ = frozenset(
            name for name in TensorDictBase.__abstractmethods__
            if getattr(getattr(cls, name, None), "__isabstractmethod__", False))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """rlpipe's top-level functions called with a TensorDict (``rlpipe.stack(tds)``,
        ``rlpipe.where(mask, td, 0)``, ``rlpipe.zeros_like(td)`` ...) run the TensorDict's own method."""
        handler = TD_HANDLED_FUNCTIONS.get(func)
        if handler is None:
            return NotImplemented
        return handler(*args, **(kwargs or {}))

    # ---- the contract ----------------------------------------------------------------------------
    # Each kind implements these; the names tensordict 0.14 gives the same duty are in brackets.
    # storage
    @property
    @abc.abstractmethod
    def batch_size(self):
        """The leading dims every entry shares (a settable property) [batch_size]."""

    @property
    @abc.abstractmethod
    def device(self):
        """The device every leaf lives on, or None [device]."""

    @property
    @abc.abstractmethod
    def names(self):
        """The batch dims' names, None for an unnamed dim (a settable property) [names]."""

    @abc.abstractmethod
    def _has_names(self):
        """Whether a batch dim has a name [_has_names]."""

    @abc.abstractmethod
    def _set_names(self, names):
        """Names the batch dims, nested TensorDicts' leading dims too (None erases) [_set_names]."""

    @classmethod
    @abc.abstractmethod
    def _build(cls, entries, batch_size, device):
        """A TensorDict over already-checked entries (a dict) [_new_unsafe]."""

    @abc.abstractmethod
    def get(self, key, default=_NO_DEFAULT):
        """The entry under ``key`` (a string or a nested tuple) [_get_str, _get_tuple]."""

    @abc.abstractmethod
    def set(self, key, value, inplace=False, non_blocking=False):
        """Stores ``value`` under ``key``; returns self [_set_str, _set_tuple]."""

    @abc.abstractmethod
    def update_(self, input_dict_or_td=None, clone=False, *, non_blocking=False, keys_to_update=None, **kwargs):
        """Copies every entry of the argument into the existing entry of the same key [update_]."""

    @abc.abstractmethod
    def pop(self, key, default=_NO_DEFAULT):
        """Removes the entry ``key`` and returns it [pop]."""

    @abc.abstractmethod
    def rename_key_(self, old_key, new_key, safe=False):
        """Moves the entry ``old_key`` to ``new_key`` [rename_key_]."""

    @abc.abstractmethod
    def popitem(self):
        """Removes and returns the (key, value) pair set last [popitem]."""

    @abc.abstractmethod
    def keys(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        """The keys, nested ones depth first before their TensorDict's [keys]."""

    @abc.abstractmethod
    def values(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        """The entries, in the order of ``keys`` [values]."""

    @abc.abstractmethod
    def items(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
        """(key, entry) pairs, in the order of ``keys`` [items]."""

    # per-leaf functions, copies and moves
    @abc.abstractmethod
    def _map(self, fn, batch_size=None, device=_NO_DEFAULT):
        """A TensorDict of ``fn(leaf)`` for every leaf, nested TensorDicts kept [_apply_nest]."""

    @abc.abstractmethod
    def apply(self, fn, *others, batch_size=None, **kwargs):
        """``fn(leaf, *other_leaves)`` for every leaf [apply]."""

    @abc.abstractmethod
    def clone(self, recurse=True):
        """A copy of every leaf (``recurse=False``: a shallow copy) [_clone]."""

    @abc.abstractmethod
    def copy(self):
        """A shallow copy: new TensorDicts, the same tensors [copy]."""

    @abc.abstractmethod
    def to(self, *args, **kwargs):
        """Every leaf moved to a device and/or cast to a dtype [to]."""

    # batch dims
    @abc.abstractmethod
    def __getitem__(self, index):
        """The entry ``td[key]``, or the TensorDict at a batch index ``td[index]`` [_index_tensordict]."""

    @abc.abstractmethod
    def __setitem__(self, index, value):
        """Sets the entry ``td[key] = v``, or writes at a batch index ``td[index] = other`` [__setitem__]."""

    @abc.abstractmethod
    def update_at_(self, input_dict_or_td, idx, clone=False, *, non_blocking=False, keys_to_update=None):
        """Writes every entry of the argument into self's at batch index ``idx`` [update_at_]."""

    @abc.abstractmethod
    def reshape(self, *shape, size=None):
        """The batch dims reshaped [reshape]."""

    @abc.abstractmethod
    def permute(self, *dims, **kwargs):
        """The batch dims reordered [_permute]."""

    @abc.abstractmethod
    def unsqueeze(self, dim):
        """A new batch dim of size 1 at ``dim`` [_unsqueeze]."""

    @abc.abstractmethod
    def expand(self, *shape):
        """Every leaf expanded to the batch size ``shape`` [expand]."""

    @abc.abstractmethod
    def split(self, split_size, dim=0):
        """Pieces along batch dim ``dim`` [split]."""

    @abc.abstractmethod
    def repeat(self, *repeats):
        """Every leaf tiled along the batch dims [_repeat]."""

    @abc.abstractmethod
    def flip(self, dims):
        """The batch dims ``dims`` reversed [flip]."""

    @abc.abstractmethod
    def __eq__(self, other):
        """A TensorDict of bools, leaf by leaf [__eq__]."""

    @abc.abstractmethod
    def __ne__(self, other):
        """A TensorDict of bools, leaf by leaf [__ne__]."""

    @abc.abstractmethod
    def all(self, dim=None):
        """Whether every element of every leaf is True (with ``dim``: reduced over it) [all]."""

    @abc.abstractmethod
    def any(self, dim=None):
        """Whether an element of a leaf is True (with ``dim``: reduced over it) [any]."""

    # locking and storage
    @abc.abstractmethod
    def lock_(self):
        """Locks self and every nested TensorDict: in-place writes only [lock_]."""

    @abc.abstractmethod
    def unlock_(self):
        """Unlocks self and every nested TensorDict [unlock_]."""

    @abc.abstractmethod
    def share_memory_(self):
        """Moves every leaf into shared memory and locks [share_memory_]."""

    @abc.abstractmethod
    def memmap(self, prefix=None, copy_existing=False, *, num_threads=0, return_early=False, **kwargs):
        """A memory-mapped copy, in files under ``prefix`` when given [memmap]."""

    @classmethod
    @abc.abstractmethod
    def load_memmap(cls, prefix, device=None, non_blocking=False, *, out=None, **kwargs):
        """What ``memmap(prefix)`` stored [_load_memmap]."""

    # ---- shared behaviour ------------------------------------------------------------------------
    def dim(self):
        """The number of batch dims."""
        return len(self.batch_size)

    def numel(self):
        """The number of batch elements (the product of the batch size)."""
        return self.batch_size.numel()

    def size(self, dim=None):
        """The batch size, or its size along ``dim``."""
        return self.batch_size if dim is None else self.batch_size[dim]

    def setdefault(self, key, default, inplace=False):
        """The entry ``key``, set to ``default`` first when missing."""
        if self.get(key, None) is None:
            self.set(key, default)
        return self.get(key)

    def __delitem__(self, key):
        self.pop(key)

    def del_(self, key):
        """Removes ``key`` and returns the TensorDict."""
        self.pop(key)
        return self

    def __len__(self):
        return self.batch_size[0] if self.batch_size else 0

    def __iter__(self):
        return iter(self.unbind(0) if self.batch_size else ())

    def __bool__(self):
        raise RuntimeError("Converting a tensordict to boolean value is not permitted")

    def apply_(self, fn, *others):
        """Replaces every leaf by ``fn(leaf)`` in place."""
        return self.apply(fn, *others, inplace=True)

    def cpu(self):
        """The TensorDict on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None):
        """The TensorDict on a CUDA device (``device``, default the first)."""
        return self.to("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")

    def _batch_dim(self, dim, extra=0, what=None):
        n = len(self.batch_size) + extra
        if not -n <= dim < max(n, 1):
            message = f"dim {dim} is out of range for a TensorDict with batch_size {_shape_str(self.batch_size)}"
            if what is not None:  # tensordict's wording for squeeze, unsqueeze and gather
                raise RuntimeError(f"{what} is allowed for dims comprised between -td.batch_dims and "
                                   f"td.batch_dims{'' if extra == 0 else ' + 1'} only. Got dim={dim} ({message})")
            raise IndexError(message)
        return dim % n if n else 0

    def transpose(self, dim0, dim1):
        """Batch dims ``dim0`` and ``dim1`` swapped."""
        """Batch dims swapped (``transpose``)."""
        order = list(range(len(self.batch_size)))
        n = len(self.batch_size)
        if not (-n <= dim0 < n and -n <= dim1 < n):
            raise ValueError(f"dim0 and dim1 must be within the range of the number of dimensions of the "
                             f"tensordict ({n}), got dim0={dim0} and dim1={dim1}.")
        a, b = self._batch_dim(dim0), self._batch_dim(dim1)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def _pieces(self, sizes, dim):
        d = self._batch_dim(dim)
        out, at = [], 0
        for n in sizes:
            out.append(self[(slice(None),) * d + (slice(at, at + n),)])
            at += n
        return tuple(out)

    def chunk(self, chunks, dim=0):
        """The TensorDict split into ``chunks`` parts along batch dim ``dim``."""
        n = self.batch_size[self._batch_dim(dim)]
        return self.split(max(-(-n // chunks), 1), dim)

    def unbind(self, dim=0):
        """The TensorDicts along batch dim ``dim``."""
        d = self._batch_dim(dim)
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.batch_size[d]))

    def _expanded(self, t, like):
        """``t`` (shaped like a batch prefix) broadcast over ``like``'s feature dims."""
        extra = like.ndim - t.ndim
        return t.reshape(tuple(t.shape) + (1,) * extra).expand(tuple(t.shape) + tuple(like.shape[t.ndim:]))

    def masked_fill_(self, mask, value):
        """Writes ``value`` where the batch ``mask`` is True, in place."""
        for t in self.values(True, True):
            t.masked_fill_(self._expanded(mask, t), value)
        return self

    def zero_(self):
        """Sets every leaf to zero in place."""
        for t in self.values(True, True):
            t.zero_()
        return self

    def fill_(self, key, value):
        """Fills the entry ``key`` (every leaf under it) with ``value``."""
        target = self.get(key, _RAISE)
        for t in (target.values(True, True) if isinstance(target, TensorDictBase) else [target]):
            t.fill_(value)
        return self

    # ---- copies and in-place writes -------------------------------------------------------------
    def to_tensordict(self, *, retain_none=None):
        """A plain, unlocked TensorDict holding copies of every leaf."""
        return self._map(lambda t: t.clone())

    def is_contiguous(self):
        """Whether every leaf is contiguous."""
        return all(t.is_contiguous() for t in self.values(True, True))

    def copy_(self, tensordict, non_blocking=False):
        """Copies the leaves of ``tensordict`` into the leaves of self (same keys); returns self."""
        return self.update_(tensordict, non_blocking=non_blocking)

    def copy_at_(self, tensordict, idx, non_blocking=False):
        """Writes ``src`` into the batch elements at ``index``."""
        return self.update_at_(tensordict, idx, non_blocking=non_blocking)

    def entry_class(self, key):
        """The type of the entry ``key``: TensorDict for a nested TensorDict, else Tensor (NoneType
        for a missing key, as ``get`` gives None, in tensordict 0.14)."""
        return type(self.get(key))

    def ndimension(self):
        """The number of batch dims."""
        return len(self.batch_size)

    def param_count(self, *, count_duplicates=True):
        """The number of elements of all leaves (each distinct leaf once unless ``count_duplicates``)."""
        return sum(t.numel() for t in self._distinct_leaves(count_duplicates))

    def bytes(self, *, count_duplicates=True):
        """The number of bytes of all leaves (each distinct leaf once unless ``count_duplicates``)."""
        return sum(t.numel() * t.element_size() for t in self._distinct_leaves(count_duplicates))

    def _distinct_leaves(self, count_duplicates):
        leaves = self.values(True, True)
        return leaves if count_duplicates else list({id(t): t for t in leaves}.values())

    def is_floating_point(self):
        """Whether every leaf holds floats."""
        return all(t.is_floating_point() for t in self.values(True, True))

    def as_tensor(self):
        """A TensorDict of the same leaves (tensordict's turns memory-mapped leaves into plain tensors;
        rlpipe's memory-mapped leaves already are Tensors)."""
        return self._map(lambda t: t)

    def is_non_tensor(self, key):
        """Whether the entry ``key`` is non-tensor data (NonTensorData/NonTensorStack); KeyError for a
        missing key."""
        value = self.get(key, _RAISE)
        return isinstance(value, TensorDictBase) and value._is_non_tensor

    def set_non_tensor(self, key, value):
        """Stores ``value`` (any Python object, a number too) as NonTensorData under ``key``."""
        return self.set(key, self._non_tensor_types[0](value, batch_size=self.batch_size, device=self.device))

    def get_non_tensor(self, key, default=_NO_DEFAULT):
        """The object(s) stored under ``key`` (a list for a NonTensorStack); other entries as ``get``."""
        return _non_tensor_value(self.get(key, default))

    def pin_memory_(self, num_threads=0):
        """No pinned memory in rlpipe: returns self."""
        return self

    def load_memmap_(self, prefix, *args, **kwargs):
        """Copies what ``memmap_(prefix)`` stored into the existing leaves; returns self."""
        return self.load_(prefix)

    def to_lazystack(self, dim=0):
        """A ``LazyStackedTensorDict`` of this TensorDict's parts along batch dim ``dim`` (a lazy stack
        along another dim: its stack dim moved there)."""
        d = self._batch_dim(dim)
        if getattr(self, "stack_dim", None) == d:
            return self
        return self._lazy_type.lazy_stack(list(self.unbind(d)), d)

    @classmethod
    def lazy_stack(cls, input, dim=0, *, out=None, **kwargs):
        """The TensorDicts stacked into a ``LazyStackedTensorDict`` (see its ``lazy_stack``)."""
        return cls._lazy_type.lazy_stack(input, dim, out=out, **kwargs)

    # ---- batch-shape operations written with other ops ------------------------------------------
    def _dims_tuple(self, dims):
        """``dims`` (an int or a sequence) as non-negative batch dims, IndexError out of range."""
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        n = len(self.batch_size)
        for d in dims:
            if not -n <= d < n:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
        return tuple(d % n for d in dims)

    def tile(self, dims):
        """Like repeat, with ``dims`` padded with leading 1s (or new leading batch dims) as torch.tile."""
        dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
        td = self
        while len(dims) > len(td._batch_size):
            td = td.unsqueeze(0)
        return td.repeat(*(1,) * (len(td._batch_size) - len(dims)), *dims)

    def fliplr(self):
        """Batch dim 1 reversed."""
        if len(self.batch_size) < 2:
            raise RuntimeError("fliplr requires at least 2 batch dimensions")
        return self.flip(1)

    def flipud(self):
        """Batch dim 0 reversed."""
        if len(self.batch_size) < 1:
            raise RuntimeError("flipud requires at least 1 batch dimension")
        return self.flip(0)

    def movedim(self, source, destination):
        """Moves batch dims ``source`` to positions ``destination`` (ints or sequences), as torch."""
        source, destination = self._dims_tuple(source), self._dims_tuple(destination)
        if len(source) != len(destination):
            raise ValueError(f"movedim: source and destination must have the same number of elements, got "
                             f"{len(source)} and {len(destination)}")
        if len(set(source)) != len(source):
            raise RuntimeError(f"movedim: repeated dim in source {source}")
        if len(set(destination)) != len(destination):
            raise RuntimeError(f"movedim: repeated dim in destination {destination}")
        order = [d for d in range(len(self.batch_size)) if d not in source]
        if source == destination:
            return self
        for dst, src in sorted(zip(destination, source)):
            order.insert(dst, src)
        return self.permute(order)

    moveaxis = movedim

    def swapaxes(self, axis0, axis1):
        """Batch dims swapped (``transpose``)."""
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def narrow(self, dim, start, length):
        """``length`` entries of batch dim ``dim`` from ``start``."""
        d = self._dims_tuple(dim)[0]
        size = self.batch_size[d]
        start = start + size if start < 0 else start
        if not 0 <= start <= size or length < 0 or start + length > size:
            raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}).")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def expand_as(self, other):
        """Expanded to a tensor's shape, or to another TensorDict leaf by leaf (each leaf takes the
        shape of the other's leaf under the same key)."""
        if isinstance(other, TensorDictBase):
            return self.apply(lambda t, o: t.expand_as(o), other, batch_size=other.batch_size, device=other.device)
        return self.expand(other.shape)

    def broadcast_to(self, shape):
        """Every leaf broadcast to the batch shape ``shape``."""
        return self.expand(shape)

    def tensor_split(self, indices_or_sections, dim=0):
        """torch.tensor_split over batch dim ``dim``: a number of near-equal pieces or split indices."""
        d = self._batch_dim(dim)
        n = self.batch_size[d]
        if isinstance(indices_or_sections, Tensor):  # a 0-d tensor is a number of sections, a 1-d one indices
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, (int, np.integer)):
            k = int(indices_or_sections)
            if k <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {k}")
            return self._pieces([n // k + (1 if i < n % k else 0) for i in range(k)], dim)
        bounds = [int(i) for i in indices_or_sections]  # Python slicing: negative, past-the-end, descending
        return tuple(self[(slice(None),) * d + (slice(a, b),)] for a, b in zip([0] + bounds, bounds + [None]))

    def atleast_1d(self):
        """The TensorDict with at least one batch dim."""
        return self if self.batch_size else self.unsqueeze(0)

    # ---- dtype casts -----------------------------------------------------------------------------
    def type(self, dst_type):
        """Every leaf cast with ``Tensor.type`` (a dtype or a name such as ``"torch.FloatTensor"``)."""
        return self._map(lambda t: t.type(dst_type))

    def _cast(self, name):
        return self.type(getattr(_dtypes, name))

    def float(self):
        """Every float leaf cast to float32."""
        return self._cast("float32")

    def double(self):
        """Every leaf cast to float64."""
        return self._cast("float64")

    def half(self):
        """Every leaf cast to float16."""
        return self._cast("float16")

    def bfloat16(self):
        """Every leaf cast to bfloat16."""
        return self._cast("bfloat16")

    def int(self):
        """Every leaf cast to int32."""
        return self._cast("int32")

    def long(self):
        """Every leaf cast to int64."""
        return self._cast("int64")

    def bool(self):
        """Every leaf cast to bool."""
        return self._cast("bool")

    @property
    def _has_non_tensor(self):
        """Whether an entry (nested ones included) is non-tensor data (a property, as in tensordict)."""
        return any(getattr(v, "_is_non_tensor", False) for v in self.values(True))

    @property
    def requires_grad(self):
        """Whether any leaf requires a gradient."""
        return any(t.requires_grad for t in self.values(True, True))

    def requires_grad_(self, requires_grad=True):
        """Sets ``requires_grad`` on every float leaf."""
        for t in self.values(True, True):
            t.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Clears the gradients of the leaves (``set_to_none`` as torch)."""
        for t in self.values(True, True):
            if set_to_none:
                t.grad = None
            elif t.grad is not None:
                t.grad.zero_()
        return self

    def detach_(self):
        """Detaches every leaf in place."""
        for t in self.values(True, True):
            t.detach_()
        return self

    @property
    def dtype(self):
        """The dtype every leaf shares, or None when they differ (or there is no leaf)."""
        dtypes = {t.dtype for t in self.values(True, True)}
        return dtypes.pop() if len(dtypes) == 1 else None

    @property
    def is_cuda(self):
        """Whether the TensorDict lives on a CUDA device."""
        return self.device is not None and self.device.type == "cuda"

    @property
    def is_cpu(self):
        """Whether the TensorDict lives on the CPU."""
        return self.device is not None and self.device.type == "cpu"

    @property
    def is_meta(self):
        """Always False: rlpipe has no meta device."""
        return False

    def get_item_shape(self, key):
        """The shape of the entry ``key`` (a nested TensorDict's batch size)."""
        value = self.get(key, _RAISE)
        return value.batch_size if isinstance(value, TensorDictBase) else value.shape

    def replace(self, *args, **kwargs):
        """A shallow copy with the entries of the dict/TensorDict argument and of ``kwargs`` set
        (self is left unchanged)."""
        if len(args) > 1:
            raise RuntimeError(f"Only a single argument containing a dictionary-like structure of entries to "
                               f"replace can be passed to replace. Received {len(args)} arguments instead.")
        entries = dict(args[0].items()) if args else {}
        if args and not isinstance(args[0], (dict, TensorDictBase)):
            raise RuntimeError(f"Cannot use object type {type(args[0])} to update values in tensordict.")
        entries.update(kwargs)
        if not entries:
            return self
        return self.copy().update(entries)

    def _join_entries(self, keys, out_key, dim, keep_entries, how):
        entries = [self.get(key, _RAISE) for key in keys]
        if not keep_entries:
            for key in keys:
                self.pop(key)
        return self.set(out_key, how(entries, dim))

    def cat_tensors(self, *keys, out_key, dim=0, keep_entries=False):
        """Stores ``rlpipe.cat`` of the entries ``keys`` under ``out_key`` (removing them unless
        ``keep_entries``); returns self."""
        return self._join_entries(keys, out_key, dim, keep_entries, _ops.cat)

    def stack_tensors(self, *keys, out_key, dim=0, keep_entries=False):
        """Like cat_tensors, with ``rlpipe.stack``."""
        return self._join_entries(keys, out_key, dim, keep_entries, _ops.stack)

    def cat_from_tensordict(self, dim=0, *, sorted=None, out=None):
        """``rlpipe.cat`` of every leaf along ``dim`` (alphabetical order with ``sorted=True``, or the
        order of a list of keys)."""
        return _ops.cat(self._ordered_leaves(sorted), dim)

    def stack_from_tensordict(self, dim=0, *, sorted=None, out=None):
        """One tensor stacking the leaves along ``dim`` (they must share a shape)."""
        return _ops.stack(self._ordered_leaves(sorted), dim)

    def _ordered_leaves(self, order):
        keys = list(self.keys(True, True))
        if order is True:
            keys.sort(key=lambda k: (k,) if isinstance(k, str) else k)
        elif order not in (None, False):
            wanted = [unravel_key_to_tuple(k) for k in order]
            if sorted(wanted) != sorted(unravel_key_to_tuple(k) for k in keys):
                raise RuntimeError("The provided set of keys differs from the tensordict list of keys.")
            keys = order
        return [self.get(k) for k in keys]

    def filter_non_tensor_data(self):
        """A shallow copy without the non-tensor entries."""
        keys = [k for k, _ in self.non_tensor_items(True)]
        return self.exclude(*keys) if keys else self.copy()

    def non_tensor_items(self, include_nested=False):
        """(key, NonTensorData/NonTensorStack) for every non-tensor entry (nested ones too with
        ``include_nested``); like tensordict, ``keys(leaves_only=True)`` leaves them out."""
        return [(k, v) for k, v in self.items(include_nested) if getattr(v, "_is_non_tensor", False)]

    def _values_list(self, include_nested=False, leaves_only=False, **kwargs):
        return self.values(include_nested, leaves_only)

    def atleast_2d(self):
        """The TensorDict with at least two batch dims."""
        td = self
        while len(td._batch_size) < 2:
            td = td.unsqueeze(0)
        return td

    def atleast_3d(self):
        """The TensorDict with at least three batch dims."""
        td = self
        while len(td._batch_size) < 3:
            td = td.unsqueeze(0)
        return td

    def rot90(self, k=1, dims=(0, 1)):
        """Rotates the batch dims ``dims`` by 90 degrees ``k`` times (torch.rot90 over the batch)."""
        if len(self.batch_size) < 2:
            raise RuntimeError("rot90 requires at least 2 batch dimensions")
        if len(dims) != 2:
            raise RuntimeError("rot90 requires exactly 2 dims")
        a, b = self._dims_tuple(dims)
        if a == b:
            raise RuntimeError(f"rot90: the dims must differ, got {tuple(dims)}")
        k %= 4
        if k == 0:
            return self.clone()
        if k == 2:
            return self.flip((a, b))
        return self.flip(b).transpose(a, b) if k == 1 else self.transpose(a, b).flip(b)

    def save(self, prefix=None, copy_existing=False, num_threads=0):
        """tensordict's save: memmap's files under ``prefix``; returns the memory-mapped copy (this
        TensorDict is left as it is)."""
        return self.memmap(prefix)

    dumps = save

    @classmethod
    def load(cls, prefix, *args, **kwargs):
        """A TensorDict read back from ``prefix`` (``load_memmap``)."""
        return cls.load_memmap(prefix)

    def load_(self, prefix, *args, **kwargs):
        """Copies what ``save(prefix)`` stored into the existing leaves; returns self."""
        return self.update_(type(self).load_memmap(prefix))

    def pin_memory(self, num_threads=None, inplace=False):
        """No pinned memory in rlpipe: returns self."""
        return self

    def __deepcopy__(self, memo=None):
        return self.clone()

    # dtype casts under torch's dtype names (td.float32() is td.float())
    def float32(self):
        """Every leaf cast to float32."""
        return self._cast("float32")

    def float64(self):
        """Every leaf cast to float64."""
        return self._cast("float64")

    def float16(self):
        """Every leaf cast to float16."""
        return self._cast("float16")

    def int8(self):
        """Every leaf cast to int8."""
        return self._cast("int8")

    def int16(self):
        """Every leaf cast to int16."""
        return self._cast("int16")

    def int32(self):
        """Every leaf cast to int32."""
        return self._cast("int32")

    def int64(self):
        """Every leaf cast to int64."""
        return self._cast("int64")

    def uint8(self):
        """Every leaf cast to uint8."""
        return self._cast("uint8")


TensorDictBase.__abstractmethods__ = frozenset(
    name for name, member in vars(TensorDictBase).items() if getattr(member, "__isabstractmethod__", False))


def _non_tensor_value(value):
    """What ``td[key]`` gives for the entry ``value``: a non-tensor entry's object(s), else itself."""
    return value.value() if getattr(value, "_is_non_tensor", False) else value


def is_tensor_collection(obj):
    """Whether ``obj`` (an instance or a class) is a TensorDict or a tensorclass."""
    return _is_tensor_collection(obj if isinstance(obj, type) else type(obj))


def _is_leaf_nontensor(cls):
    """``is_leaf`` test for ``keys``/``items``/``apply``: a class is a leaf when it is a Tensor class
    (rlpipe has no non-tensor data, tensordict's other kind of leaf)."""
    return issubclass(cls, Tensor)


is_leaf_nontensor = _is_leaf_nontensor


def _is_tensor_collection(cls):
    """Whether the class ``cls`` is a tensor collection: TensorDict and its subclasses, tensorclasses
    (marked by their ``_is_tensorclass`` attribute: tensorclass.py sits above this module)."""
    return issubclass(cls, TensorDictBase) or getattr(cls, "_is_tensorclass", False) is True


# tensordict's is_leaf that also treats nested (jagged) tensors as leaves: rlpipe has no nested tensors
_NESTED_TENSORS_AS_LISTS = _is_leaf_nontensor
