"""Per-leaf transformations: ``_map``/``apply``/``named_apply``, copies and clones, key flattening,
device and dtype moves (``to``), ``contiguous``, ``new_zeros`` and its kin, ``data`` and ``grad``."""
import warnings

import numpy as np

from .. import _dtypes, primitives as _ops
from .._creation import as_tensor
from .._device import device as _device_cls, resolve
from .._tensor import Size, Tensor
from ._common import _NAMES_USED, _NO_DEFAULT, _RAISE, _as_batch_size
from .base import TensorDictBase
from .utils import is_tensorclass


class _ApplyMixin:
    """Functions over every leaf, copies, device and dtype moves (see the module docstring)."""
    __slots__ = ()

    def _map(self, fn, batch_size=None, device=_NO_DEFAULT):
        """A new TensorDict with ``fn`` applied to every leaf (nested TensorDicts recursed)."""
        batch_size = self._batch_size if batch_size is None else batch_size
        device = self._device if device is _NO_DEFAULT else device
        entries = {}
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDictBase):
                nested = batch_size + value._batch_size[len(self._batch_size):]
                entries[key] = value._map(fn, nested, device)
            else:
                entries[key] = fn(value)
        out = self._build(entries, batch_size, device)
        self._names_to(out)
        return out

    def _names_to(self, out):
        """Gives ``out`` self's dim names, if any, when it has self's batch size (each nested
        TensorDict keeps its own)."""
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        if names is not None and out._batch_size == self._batch_size:
            out._names = list(names)

    def apply(self, fn, *others, batch_size=None, device=_NO_DEFAULT, inplace=False, names=None,
              filter_empty=None, default=_NO_DEFAULT, call_on_nested=False, out=None, is_leaf=None,
              propagate_lock=False, num_threads=0, checked=False, **constructor_kwargs):
        """Calls ``fn(leaf, *other_leaves)`` on every leaf (the same key of each TensorDict of
        ``others``; ``default`` where one lacks it). Leaves where fn returns None are dropped, and so
        are the nested TensorDicts left empty unless ``filter_empty=False``; None when nothing is
        left. ``inplace`` writes the results into self's leaves; ``out`` receives them as its new leaves."""
        return self._apply_named(lambda key, value, *rest: fn(value, *rest), others, batch_size, device,
                                 inplace, False, default, filter_empty, out)

    def named_apply(self, fn, *others, nested_keys=False, batch_size=None, device=_NO_DEFAULT, inplace=False,
                    default=_NO_DEFAULT, filter_empty=None, out=None, **kwargs):
        """Like apply, with the key passed first: ``fn(key, leaf, *other_leaves)`` (the full nested
        key with ``nested_keys``)."""
        return self._apply_named(fn, others, batch_size, device, inplace, nested_keys, default, filter_empty, out)

    def _fast_apply(self, fn, *others, named=False, nested_keys=False, batch_size=None, device=_NO_DEFAULT,
                    inplace=False, default=_NO_DEFAULT, filter_empty=None, out=None, **kwargs):
        """tensordict's internal apply (its threads are not used: one thread, the same results)."""
        if named:
            return self.named_apply(fn, *others, nested_keys=nested_keys, batch_size=batch_size, device=device,
                                    inplace=inplace, default=default, filter_empty=filter_empty, out=out)
        return self.apply(fn, *others, batch_size=batch_size, device=device, inplace=inplace, default=default,
                          filter_empty=filter_empty, out=out)

    def _apply_named(self, fn, others, batch_size, device, inplace, nested_keys, default, filter_empty=None,
                     out=None):
        produced = [0]
        result = self._apply_tree(fn, others, batch_size, device, inplace, nested_keys, default,
                                  filter_empty is not False, (), produced)
        if out is not None:
            # tensordict sets the results into out: they replace its leaves (new dtype included), and a
            # locked out is a RuntimeError
            out.update(result)
            return out
        if filter_empty is not False and not produced[0] and not self.is_empty():
            return None  # fn returned None for every leaf
        return result

    def _apply_tree(self, fn, others, batch_size, device, inplace, nested_keys, default, drop_empty, prefix,
                    produced):
        """apply's walk; ``produced[0]`` counts the leaves where fn returned a value."""
        batch_size = self._batch_size if batch_size is None else _as_batch_size(batch_size)
        device = self._device if device is _NO_DEFAULT else device
        entries = {}
        for key, value in self._tensordict.items():
            # an "other" that is not a TensorDict is the default standing in for a missing nested one
            rest = [o.get(key, _RAISE if default is _NO_DEFAULT else default) if isinstance(o, TensorDictBase)
                    else o for o in others] if others else ()
            if isinstance(value, TensorDictBase) or is_tensorclass(value):  # a tensorclass: wraps its result
                sub = value._apply_tree(fn, rest, batch_size + value._batch_size[len(self._batch_size):],
                                        device, inplace, nested_keys, default, drop_empty, prefix + (key,), produced)
                if drop_empty and sub.is_empty() and not value.is_empty():
                    continue
                entries[key] = sub
                continue
            new = fn(prefix + (key,) if nested_keys and prefix else key, value, *rest)
            if new is None:
                continue
            produced[0] += 1
            if inplace and new is not value:
                value.copy_(new)
                new = value
            entries[key] = new
        if inplace:
            self._tensordict.update(entries)
            return self
        out = self._build(entries, batch_size, device)
        self._names_to(out)
        return out

    def copy(self):
        """A shallow copy: new TensorDicts, the same tensors."""
        entries = {key: value.copy() if isinstance(value, TensorDictBase) else value
                   for key, value in self._tensordict.items()}
        out = self._build(entries, self._batch_size, self._device)
        self._names_to(out)
        return out

    def clone(self, recurse=True):
        return self._map(lambda t: t.clone()) if recurse else self.copy()

    def detach(self):
        """A TensorDict of the leaves detached from the graph."""
        return self._map(lambda t: t.detach())

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, TensorDictBase) else v for k, v in self._tensordict.items()}

    def numpy(self):
        """A nested dict of NumPy arrays (copied from a GPU)."""
        return {k: v.numpy() if isinstance(v, TensorDictBase) else v.detach().cpu().numpy()
                for k, v in self._tensordict.items()}

    def flatten_keys(self, separator=".", inplace=False, is_leaf=None):
        """A TensorDict whose nested keys are joined with ``separator`` (``("a", "b")`` -> ``"a.b"``);
        KeyError when two keys flatten to the same string. A locked TensorDict returns the same result
        every call (tensordict caches it too)."""
        if not inplace:
            return self._cached("flatten_keys", separator, lambda: self._flat_keys(separator))
        self._check_unlocked()
        self._tensordict = self._flat_keys(separator)._tensordict
        return self

    def _flat_keys(self, separator):
        entries = {}
        for key, value in self.items(include_nested=True, leaves_only=True):
            flat = separator.join(key) if isinstance(key, tuple) else key
            if flat in entries:
                raise KeyError(f"Flattening keys in tensordict causes keys [{flat!r}] to collide.")
            entries[flat] = value
        return self._build(entries, self._batch_size, self._device)

    def unflatten_keys(self, separator=".", inplace=False):
        """The inverse of flatten_keys: ``"a.b"`` becomes the entry ``b`` of a nested TensorDict ``a``
        (cached while locked, like flatten_keys)."""
        if not inplace:
            return self._cached("unflatten_keys", separator, lambda: self._unflat_keys(separator))
        self._check_unlocked()
        self._tensordict = self._unflat_keys(separator)._tensordict
        return self

    def _unflat_keys(self, separator):
        out = self._build({}, self._batch_size, self._device)
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDictBase):  # a copy: merging more keys into it must not touch a cached result
                value = value.unflatten_keys(separator).copy()
            out._merge_at(tuple(key.split(separator)), value, key)
        return out

    def _merge_at(self, path, value, flat_key):
        """Puts ``value`` at ``path`` for unflatten_keys, merging TensorDicts; KeyError when it would
        replace an entry (or needs a tensor to be a TensorDict), as tensordict does."""
        message = (f"Unflattening key(s) in tensordict will override an existing for unflattened key "
                   f"{flat_key!r} ({path!r})")
        try:
            parent = self._parent_of(path, create=True)
        except (KeyError, ValueError):
            raise KeyError(message) from None
        existing = parent._tensordict.get(path[-1])
        if existing is None:
            parent._tensordict[path[-1]] = value
        elif isinstance(existing, TensorDictBase) and isinstance(value, TensorDictBase):
            for key, sub in value._tensordict.items():
                existing._merge_at((key,), sub, flat_key)
        else:
            raise KeyError(message)

    # ---- devices and dtypes ------------------------------------------------------------------------
    def to(self, *args, device=None, dtype=None, other=None, batch_size=None, inplace=False,
           non_blocking=False, non_blocking_pin=False, num_threads=None, **kwargs):
        """``to(device)`` moves every leaf and sets ``device``; ``to(dtype)`` casts every leaf;
        ``to(tensor)`` takes both from a tensor, ``to(other=td)`` from a TensorDict (its dtype only
        when all its leaves share one); ``batch_size=`` re-batches the result. Self when nothing
        changes; ``inplace=True`` swaps the leaves of self (RuntimeError when it is locked)."""
        for a in args:
            if isinstance(a, TensorDictBase):
                other = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, bool) or a is None:  # the positional non_blocking flag; None: no device (torch's)
                continue
            elif isinstance(a, (_dtypes.dtype, type, np.dtype)):
                dtype = a
            elif isinstance(a, (str, int, _device_cls)):
                device = a
            else:
                raise TypeError(f"TensorDict.to() received an invalid argument: {a!r}")
        if kwargs:
            raise TypeError(f"TensorDict.to() got unexpected keyword arguments {sorted(kwargs)}")
        if other is not None:
            device, dtype = other.device, other.dtype
        device = None if device is None else resolve(device)
        moves = device is not None and (device != self._device or any(
            t.device != device for t in self.values(True, True)))
        if not moves and dtype is None and batch_size is None:
            return self
        if moves and dtype is None and batch_size is None and not inplace and self.is_consolidated():
            return self.consolidate(device=device)  # one storage moved, still consolidated and locked

        def convert(t):
            return t.to(device=device if moves else None, dtype=dtype)
        if inplace:
            if moves or dtype is not None:
                self._check_unlocked()
            for td in self._all_tensordicts():
                for key, value in td._tensordict.items():
                    if not isinstance(value, TensorDictBase):
                        td._tensordict[key] = convert(value)
                if moves:
                    td._device = device
            if batch_size is not None:
                self.batch_size = batch_size
            return self
        out = self._map(convert, device=device if moves else self._device)
        if batch_size is not None:
            out.batch_size = batch_size
        return out

    def contiguous(self, *, canonical=False, inplace=False):
        """A new TensorDict whose leaves are contiguous (a contiguous leaf is kept, not copied);
        ``canonical=True`` also copies a leaf whose strides are not the row-major ones of its shape
        (a contiguous tensor may have odd strides on its size-1 dims); ``inplace=True`` swaps the
        leaves of self instead."""
        fix = _canonical if canonical else _ops.contiguous
        if inplace:
            for key, value in self._tensordict.items():
                if isinstance(value, TensorDictBase):
                    value.contiguous(canonical=canonical, inplace=True)
                else:
                    self._tensordict[key] = fix(value)
            return self
        return self._map(fix)

    def _new_filled(self, make, size, dtype, device):
        """A TensorDict of batch size ``size`` whose leaves are ``make(shape, leaf)`` (the leaf's
        feature dims kept)."""
        size = Size(_ops._shape_arg(size))
        device = self._device if device is _NO_DEFAULT else None if device is None else resolve(device)

        def one(t):
            out = make(size + self._feature(t), t)
            out = out if dtype is None else out.to(dtype)
            return out if device is None else out.to(device)
        return self._map(one, size, device)

    def new_zeros(self, *size, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        """A TensorDict of batch size ``size`` with zero leaves of the same dtypes and feature shapes."""
        return self._new_filled(lambda shape, t: t.new_zeros(shape, requires_grad=requires_grad), size, dtype,
                                device)

    def new_ones(self, *size, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        return self._new_filled(lambda shape, t: t.new_ones(shape, requires_grad=requires_grad), size, dtype,
                                device)

    def new_empty(self, *size, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        return self._new_filled(lambda shape, t: t.new_empty(shape, requires_grad=requires_grad), size, dtype,
                                device)

    def new_full(self, size, fill_value, *, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        return self._new_filled(lambda shape, t: t.new_full(shape, fill_value, requires_grad=requires_grad),
                                (size,), dtype, device)

    def new_tensor(self, data, *, dtype=None, device=_NO_DEFAULT, requires_grad=False, **kwargs):
        """A TensorDict with this one's keys: ``data`` (a tensor) copied into every leaf with the
        leaf's dtype, or, for a TensorDict ``data``, its leaves copied with self's leaves' dtypes."""
        if isinstance(data, (Tensor, TensorDictBase)):
            warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() "
                          "or sourceTensor.clone().detach().requires_grad_(True), rather than "
                          "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        if isinstance(data, TensorDictBase):
            return self.apply(lambda t, other: t.new_tensor(other, dtype=dtype, requires_grad=requires_grad),
                              data, batch_size=data.batch_size,
                              device=data.device if device is _NO_DEFAULT else device)
        data = data if isinstance(data, Tensor) else as_tensor(data)
        batch = Size(data.shape)
        target = (self._device if self._device is not None else data.device) if device is _NO_DEFAULT else device

        def one(t):
            return t.new_tensor(data, dtype=dtype, requires_grad=requires_grad, device=target)
        return self._map(one, batch, None if target is None else resolve(target))

    @property
    def data(self):
        """The leaves without their autograd history (``t.data`` of each), sharing memory; locked
        when self is."""
        return self._locked_if_self(self._map(lambda t: t.data))

    @property
    def grad(self):
        """A TensorDict of the leaves' gradients (a leaf without one is left out; None when no leaf
        has one); locked when self is."""
        return self._locked_if_self(self.apply(lambda t: t.grad))

    def __copy__(self):
        return self.copy()


def _canonical(t):
    """``t`` when its strides are the row-major ones of its shape, else a row-major copy."""
    strides, step = [], 1
    for n in reversed(t.shape):
        strides.append(step)
        step *= n
    return t if t.stride() == tuple(reversed(strides)) else t.clone()
