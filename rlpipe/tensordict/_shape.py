"""Batch-shape operations of the dense TensorDict: reshape/view/flatten/squeeze/permute/expand, split,
gather, stack and cat, comparisons, all/any, repeat/roll/flip and ``pad``. The ones that only need
other ops (``transpose``, ``chunk``, ``unbind``, ``narrow``, ``tile``...) are on ``TensorDictBase``."""
import math
import numbers
from functools import wraps

import numpy as np

from .. import _dtypes, primitives as _ops
from .._creation import full as _full
from .._tensor import Size, Tensor, wrap, size_repr as _shape_str
from ._common import _NAMES_USED
from .base import TensorDictBase
from .utils import is_tensorclass


def _join_leaves(values, dim, how):
    """rlpipe.stack/rlpipe.cat (``how``) of tensors along ``dim``; without a graph to record, one
    backend call on the arrays (several times faster for many small tensors). ValueError when the
    shapes do not fit."""
    device = values[0]._device
    if all(not v._requires_grad and v._device is device for v in values):
        xp = device._backend.xp
        arrays = [v._data for v in values]
        if how == "stack" and dim == 0 and arrays[0].ndim:  # concatenate + reshape: several times faster
            shapes = {a.shape for a in arrays}
            if len(shapes) > 1:
                raise ValueError(f"stack: the shapes differ: {sorted(shapes)}")
            shape = arrays[0].shape
            return wrap(xp.concatenate(arrays).reshape((len(arrays), *shape)), device)
        return wrap(xp.stack(arrays, dim) if how == "stack" else xp.concatenate(arrays, dim), device)
    return (_ops.stack if how == "stack" else _ops.cat)(values, dim)


class _ShapeMixin:
    """Batch-shape operations (see the module docstring)."""
    __slots__ = ()

    def _feature(self, value):
        return tuple(value.shape[len(self._batch_size):])

    def _reshaped(self, new_batch, view=False):
        new_batch = Size(_infer_batch(_ops._shape_arg(new_batch), self.numel()))

        def reshape(t):
            shape = new_batch + self._feature(t)
            return t.view(shape) if view else t.reshape(shape)
        return self._map(reshape, new_batch)

    def reshape(self, *shape, size=None):
        """The batch dims reshaped (feature dims stay)."""
        return self._reshaped(shape if size is None else size)

    def view(self, *shape, size=None, batch_size=None, dtype=None):
        """``view(*shape)`` reshapes the batch dims as a view; ``view(dtype, batch_size=...)`` views
        every leaf's bytes as ``dtype`` (tensordict's dtype view: the result has ``batch_size``)."""
        if dtype is None and len(shape) == 1 and isinstance(shape[0], _dtypes.dtype):
            dtype = shape[0]
        if dtype is not None:
            return self._view_dtype(dtype, batch_size)
        return self._reshaped(shape if size is None else size, view=True)

    def _view_dtype(self, dtype, batch_size):
        return self.apply(lambda t: t.view(dtype), batch_size=batch_size)

    def flatten(self, start_dim=0, end_dim=-1):
        """Merges batch dims ``start_dim..end_dim`` into one (None: the defaults); a TensorDict of
        batch size [] becomes one of batch size [1], as torch.flatten does with a 0-d tensor."""
        start_dim, end_dim = 0 if start_dim is None else start_dim, -1 if end_dim is None else end_dim
        if not self._batch_size:
            if start_dim not in (0, -1) or end_dim not in (0, -1):
                raise IndexError(f"flatten: dims ({start_dim}, {end_dim}) out of range for batch size []")
            return self._reshaped((1,))
        s, e = self._batch_dim(start_dim), self._batch_dim(end_dim)
        if e < s:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        n = 1
        for d in range(s, e + 1):
            n *= self._batch_size[d]
        return self._reshaped(self._batch_size[:s] + (n,) + self._batch_size[e + 1:])

    def unflatten(self, dim, unflattened_size):
        """Batch dim ``dim`` split into ``sizes``."""
        d = self._batch_dim(dim)
        inner = _ops._infer_shape(tuple(unflattened_size), self._batch_size[d])
        return self._reshaped(self._batch_size[:d] + tuple(inner) + self._batch_size[d + 1:])

    def squeeze(self, dim=None):
        """The TensorDict without its size-one batch dims (or ``dim`` only)."""
        if dim is None:
            return self._reshaped(tuple(s for s in self._batch_size if s != 1))
        d = self._batch_dim(dim, what="squeezing")
        if self._batch_size[d] != 1:
            return self
        return self._reshaped(self._batch_size[:d] + self._batch_size[d + 1:])

    def unsqueeze(self, dim):
        """The TensorDict with a new size-one batch dim at ``dim``."""
        d = self._batch_dim(dim, extra=1, what="unsqueezing")
        return self._reshaped(self._batch_size[:d] + (1,) + self._batch_size[d:])

    def permute(self, *dims, **kwargs):
        """The batch dims reordered as ``dims`` (feature dims stay)."""
        n = len(self._batch_size)
        dims = tuple(_ops._shape_arg(dims if dims else (kwargs.pop("dims"),)))
        if len(dims) != n or any(not -n <= d < n for d in dims):
            raise ValueError(f"Received an permutation order {dims} incompatible with the tensordict shape "
                             f"{_shape_str(self._batch_size)}.")
        dims = tuple(d % n for d in dims)
        if sorted(dims) != list(range(len(self._batch_size))):
            raise ValueError(f"Received an permutation order {dims} incompatible with the tensordict shape "
                             f"{_shape_str(self._batch_size)}: expected a permutation of the {n} batch dims.")
        new_batch = Size(self._batch_size[d] for d in dims)
        return self._map(lambda t: t.permute(*dims, *range(len(dims), t.ndim)), new_batch)

    def expand(self, *shape):
        """Every leaf broadcast to the new batch shape."""
        new_batch = Size(_ops._shape_arg(shape))
        if len(new_batch) < len(self._batch_size):
            raise RuntimeError(f"the number of sizes provided ({len(new_batch)}) must be greater or equal to the "
                               f"number of batch dimensions ({len(self._batch_size)})")
        return self._map(lambda t: t.expand(new_batch + self._feature(t)), new_batch)

    def split(self, split_size, dim=0):
        """Pieces of ``split_size`` along batch dim ``dim`` (the last one smaller), or of the sizes
        in a list of ints, which must add up to the dim's size."""
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise IndexError(f"Incompatible dim {dim} for tensordict with batch dims {len(self._batch_size)}: "
                             f"dim out of range.")
        n = self._batch_size[self._batch_dim(dim)]
        if isinstance(split_size, (int, np.integer)) and not isinstance(split_size, bool):
            if split_size <= 0:
                raise ValueError(f"TensorDict.split: split_size must be positive, got {split_size}.")
            sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size or not n else [])
        else:
            if isinstance(split_size, (str, bytes)) or not all(
                    isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in split_size):
                raise TypeError(f"split(): argument 'split_size' must be int or list of ints, got {split_size!r}")
            sizes = [int(s) for s in split_size]
            if not sizes:
                raise RuntimeError(f"Insufficient number of elements in split_size: got [] for a dim of size {n}")
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise RuntimeError(f"split_with_sizes expects split_size to sum exactly to {n} (input tensor's "
                                   f"size at dimension {dim}), but got split_sizes={sizes}")
        return self._pieces(sizes, dim)

    def gather(self, dim, index, out=None, inplace=False):
        """torch.gather along batch dim ``dim`` for every leaf; ``inplace=True`` puts the results into
        self (index must then have as many dims as the batch, so that the batch dims stay)."""
        if inplace and out is not None:
            raise ValueError("`out` and `inplace=True` are mutually exclusive in gather.")
        if inplace and index.ndim != len(self._batch_size):
            raise NotImplementedError(f"gather(inplace=True) requires index.ndim == self.batch_dims so the result "
                                      f"keeps the same number of batch dims; got index.ndim={index.ndim} and "
                                      f"batch_dims={len(self._batch_size)}. Use inplace=False instead.")
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise RuntimeError(f"Cannot gather tensordict with shape {_shape_str(self._batch_size)} along dim {dim}.")
        d = self._batch_dim(dim)
        new_batch = Size(index.shape)
        result = self._map(lambda t: t.gather(d, self._expanded(index, t).contiguous()), new_batch)
        if inplace:
            return self._become(result)
        return result if out is None else out.update_(result)

    def masked_fill(self, mask, value):
        """A copy with ``value`` where the batch ``mask`` is True."""
        return self._map(lambda t: t.masked_fill(self._expanded(mask, t), value))

    # ---- joining ------------------------------------------------------------------------------------
    @classmethod
    def _join_tensordicts(cls, tds, dim, how):
        """rlpipe.stack / rlpipe.cat of TensorDicts: every TensorDict needs the same keys."""
        if all(getattr(td, "_is_non_tensor", False) for td in tds):  # NonTensorData/NonTensorStack
            return cls._non_tensor_types[2](tds, dim, how)
        if how == "cat" and any(isinstance(td, cls._lazy_type) for td in tds):  # a lazy stack among them
            return cls._lazy_type.cat(tds, dim)
        first = tds[0]
        keys = list(first._tensordict)
        for i, td in enumerate(tds):
            if not isinstance(td, TensorDictBase):
                raise TypeError(f"{how}: expected TensorDicts, got {type(td).__name__} at position {i}")
            if td._tensordict.keys() != first._tensordict.keys():
                raise KeyError(f"{how}: the TensorDicts have different keys: tensordict {i} has keys "
                               f"{sorted(td._tensordict)} but tensordict 0 has keys {sorted(first._tensordict)}")
        if how == "stack":
            for i, td in enumerate(tds):
                if td._batch_size != first._batch_size:
                    raise RuntimeError(f"stack expects every TensorDict to have the same batch size, got "
                                       f"{_shape_str(first._batch_size)} and {_shape_str(td._batch_size)} "
                                       f"(position {i})")
            d = first._batch_dim(dim, extra=1)
            new_batch = first._batch_size[:d] + (len(tds),) + first._batch_size[d:]
        else:
            d = first._batch_dim(dim)
            new_batch = first._batch_size[:d] + (sum(td._batch_size[d] for td in tds),) + first._batch_size[d + 1:]
        entries = {}
        for key in keys:
            values = [td._tensordict[key] for td in tds]
            if any(getattr(v, "_is_non_tensor", False) for v in values):
                entries[key] = cls._non_tensor_types[2](values, d, how)
            elif any(isinstance(v, cls._lazy_type) for v in values):  # nested lazy stacks stay lazy
                entries[key] = getattr(cls._lazy_type, how)(values, d)
            elif isinstance(values[0], TensorDictBase):
                entries[key] = cls._join_tensordicts(values, d, how)
            elif is_tensorclass(values[0]):  # a tensorclass entry: its class joins them
                entries[key] = values[0]._wrap(cls._join_tensordicts([v._tensordict for v in values], d, how))
            else:
                try:
                    entries[key] = _join_leaves(values, d, how)
                except ValueError:
                    raise RuntimeError(f"{how}: the entries {key!r} have shapes "
                                       f"{[list(v.shape) for v in values]} that cannot be joined") from None
        joined = type(first)._build(entries, Size(new_batch), first._device)
        if any((getattr(td, "_names", None) if _NAMES_USED[0] else None) is not None for td in tds):
            # stack: the new dim has no name, and no dim has one unless all the TensorDicts agree;
            # cat: the first TensorDict's names (tensordict's choices)
            names = first.names
            if how == "stack":
                names = names[:d] + [None] + names[d:] if all(td.names == first.names for td in tds) else None
            if names is not None:
                joined._set_names(names)
        return joined

    @classmethod
    def maybe_dense_stack(cls, items, dim=0, *, out=None, **kwargs):
        """A dense stack where the TensorDicts share keys and shapes, a ``LazyStackedTensorDict``
        otherwise (see ``LazyStackedTensorDict.maybe_dense_stack``)."""
        return cls._lazy_type.maybe_dense_stack(items, dim, out=out)

    @classmethod
    def stack(cls, tds, dim=0, *, out=None):
        """The TensorDicts stacked along a new batch dim ``dim`` (written into ``out``, in place,
        when given)."""
        joined = cls._join_tensordicts(list(tds), dim, "stack")
        return joined if out is None else out.update_(joined)

    @classmethod
    def cat(cls, tds, dim=0, *, out=None):
        """The TensorDicts concatenated along batch dim ``dim`` (into ``out`` when given)."""
        joined = cls._join_tensordicts(list(tds), dim, "cat")
        return joined if out is None else out.update_(joined)

    # ---- comparison ------------------------------------------------------------------------------------
    def _compare(self, other, op):
        if isinstance(other, dict):
            other = self._dense_type(other, batch_size=[], device=self._device)
        if self._is_non_tensor:
            return self._compare_objects(other, op)
        if isinstance(other, TensorDictBase):
            mine, theirs = set(self._tensordict), set(other._tensordict)
            if mine != theirs:
                raise KeyError(f"keys in the two TensorDicts mismatch, got {sorted(mine)} and {sorted(theirs)}")
            return self._object_results(self.apply(op, other, filter_empty=False), other, op)
        return self._map(lambda t: op(t, other))

    def _object_results(self, result, other, op):
        """``result`` (``op`` of self and the TensorDict ``other``, leaf by leaf) with each non-tensor
        entry both hold replaced by ``op`` of their objects, element by element, as tensordict does
        (bitwise ops: for bool objects only; other objects are left as they are)."""
        comparison = op in (_ops.eq, _ops.ne)
        for path in _non_tensor_paths(self, self._lazy_type):
            mine, theirs = self.get(path), other.get(path, None)
            if not getattr(theirs, "_is_non_tensor", False):
                continue
            if comparison or all(type(o) is bool for o in mine._objects() + theirs._objects()):
                result.set(path, mine._compare_objects(theirs, op))
        return result

    def __eq__(self, other):
        """A TensorDict of bools, leaf by leaf; False (not an error) against a string or another
        object that is neither a TensorDict, a dict, a tensor nor a number, as in tensordict."""
        if is_tensorclass(other):
            return NotImplemented  # the tensorclass compares (its result keeps its class)
        if not isinstance(other, _COMPARABLE):
            return False
        return self._compare(other, _ops.eq)

    def __ne__(self, other):
        if is_tensorclass(other):
            return NotImplemented
        if not isinstance(other, _COMPARABLE):
            return True
        return self._compare(other, _ops.ne)

    __hash__ = object.__hash__

    def all(self, dim=None):
        """True when every element of every leaf is; with ``dim``, a TensorDict reduced over that batch dim."""
        return self._reduce_bool("all", dim)

    def any(self, dim=None):
        return self._reduce_bool("any", dim)

    def _reduce_bool(self, how, dim):
        if dim is None:  # nested TensorDicts reduce themselves (a lazy stack one stacked TensorDict at a time)
            return (all if how == "all" else any)(bool(getattr(v, how)()) for v in self.values())
        if not -len(self._batch_size) <= dim < len(self._batch_size):
            raise RuntimeError("dim must be greater than or equal to -tensordict.batch_dims and smaller than "
                               f"tensordict.batch_dims, got dim={dim} with batch_dims={len(self._batch_size)}")
        d = dim % len(self._batch_size)
        return self._map(lambda t: getattr(t, how)(d), self._batch_size[:d] + self._batch_size[d + 1:])

    def repeat(self, *repeats):
        """Tiles every leaf ``repeats[i]`` times along batch dim ``i`` (torch's Tensor.repeat over
        the batch dims; feature dims are not repeated)."""
        if len(repeats) == 1 and not isinstance(repeats[0], (int, np.integer)):
            repeats = tuple(repeats[0].tolist() if isinstance(repeats[0], Tensor) else repeats[0])
        if len(repeats) != len(self._batch_size):
            raise ValueError(f"The number of repeat elements must match the number of dimensions of the "
                             f"tensordict. Got {len(repeats)} but ndim={len(self._batch_size)}.")
        new_batch = Size(s * r for s, r in zip(self._batch_size, repeats))
        return self._map(lambda t: t.repeat(*repeats, *(1,) * (t.ndim - len(repeats))), new_batch)

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        """Repeats each element along batch dim ``dim`` (numpy.repeat's semantics); with ``dim=None``
        over the flattened batch dims."""
        if dim is None:
            return self.reshape(-1).repeat_interleave(repeats, 0)
        d = self._batch_dim(dim)
        if isinstance(repeats, Tensor) and repeats.ndim:
            length = int(repeats.sum())
        else:
            length = self._batch_size[d] * int(repeats)
        new_batch = self._batch_size[:d] + (length,) + self._batch_size[d + 1:]
        return self._map(lambda t: t.repeat_interleave(repeats, dim=d), Size(new_batch))

    def roll(self, shifts, dims=None):
        """Rolls every leaf along batch dims ``dims`` (over the flattened batch when None: rlpipe
        rolls the batch only, where tensordict's leaves would also roll their feature elements)."""
        if dims is None:
            return self.reshape(-1).roll(shifts, 0).reshape(self._batch_size)
        dims = self._dims_tuple(dims)
        if isinstance(shifts, (int, np.integer)) and len(dims) == 1:
            return self._map(lambda t: t.roll(int(shifts), dims[0]))
        shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
        return self._map(lambda t: t.roll(shifts, dims))

    def flip(self, dims):
        """The batch dims ``dims`` reversed."""
        dims = self._dims_tuple(dims)
        return self._map(lambda t: t.flip(dims))

    def pad(self, pad_size, value=0.0, inplace=False, safe=True):
        """Pads the batch dims of every leaf with ``value``: ``pad_size`` holds (before, after) pairs
        from the first batch dim on (``[0, 1, 2, 0]``: one row after dim 0, two before dim 1); negative
        amounts crop, as in torch's F.pad. Unlike F.pad, which starts from the last dim, tensordict's
        pairs start from the first. ``inplace=True`` puts the padded leaves into self."""
        if len(pad_size) % 2 or len(pad_size) > 2 * self.batch_dims:
            raise RuntimeError(f"pad: pad_size must hold (before, after) pairs for at most the "
                               f"{self.batch_dims} batch dims, got {list(pad_size)}")
        pairs = [(int(pad_size[i]), int(pad_size[i + 1])) for i in range(0, len(pad_size), 2)]
        new_batch = list(self.batch_size)
        src, dst = [], []
        for d, (before, after) in enumerate(pairs):
            n = new_batch[d]
            new_batch[d] = n + before + after
            if new_batch[d] < 0:
                raise RuntimeError(f"pad: the padding {list(pad_size)} gives dim {d} (size {n}) a negative output "
                                   f"size {new_batch[d]}")
            kept = max(n - max(-before, 0) - max(-after, 0), 0)
            src.append(slice(max(-before, 0), max(-before, 0) + kept))
            dst.append(slice(max(before, 0), max(before, 0) + kept))
        src, dst = tuple(src), tuple(dst)

        def one(t):
            out = _full(tuple(new_batch) + tuple(t.shape[self.batch_dims:]), value, dtype=t.dtype, device=t.device)
            out[dst] = t[src]
            return out
        padded = self._map(one, Size(new_batch))
        if not inplace:
            return padded  # unnamed, as tensordict's pad
        if self._has_names():  # in place, the dims keep their names (tensordict)
            padded._set_names(self.names)
        return self._become(padded)


def _infer_batch(shape, numel):
    """A new batch shape with its -1 filled in. When the -1 cannot be filled, tensordict raises
    AssertionError (its type, kept for code that catches it): 'invalid shape [4, -1] for a batch of 6',
    'only one dimension can be inferred'; other misfits are torch's RuntimeError."""
    if shape.count(-1) > 1:
        raise AssertionError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape and (known == 0 or numel % known):
        raise AssertionError(f"invalid shape {list(shape)} for a batch of {numel}")
    return _ops._infer_shape(shape, numel)


_COMPARABLE = (TensorDictBase, dict, Tensor, numbers.Number, np.ndarray)


def _with_inplace(method):
    """``method`` with tensordict's ``inplace=True``: the result's leaves replace self's, and self
    (with its nested TensorDicts) is returned."""
    @wraps(method)
    def maybe_inplace(self, *args, inplace=False, **kwargs):
        out = method(self, *args, **kwargs)
        return self._become(out) if inplace and out is not self else out
    return maybe_inplace


def _non_tensor_paths(td, lazy_type, prefix=()):
    """The paths of the non-tensor entries of ``td`` (a dense TensorDict; lazy stacks not entered)."""
    for key, value in td._tensordict.items():
        if getattr(value, "_is_non_tensor", False):
            yield prefix + (key,)
        elif isinstance(value, TensorDictBase) and not isinstance(value, lazy_type):
            yield from _non_tensor_paths(value, lazy_type, prefix + (key,))
