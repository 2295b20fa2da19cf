"""Names of the batch dims (``names``, ``refine_names``, ``rename_``) and the rules by which an op's
result inherits them (``_names_like_source`` wraps the ops; ``_indexed_names`` for indexing)."""
import numbers
from functools import wraps

import numpy as np

from .. import primitives as _ops
from ._common import _NAMES_USED
from ._math import _NO_DIM
from .base import TensorDictBase


class _NamesMixin:
    """Dim names (see the module docstring)."""
    __slots__ = ()

    @property
    def names(self):
        """The batch dims' names (None for an unnamed dim), as a new list."""
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        return list(names) if names is not None else [None] * len(self._batch_size)

    @names.setter
    def names(self, value):
        """Names the batch dims (nested TensorDicts' leading dims too); None erases every name."""
        if value is None:
            self._set_names(None)
            return
        value = list(value)
        if len(value) != len(self._batch_size):
            raise ValueError(f"the length of the dimension names must equate the tensordict batch_dims attribute. "
                             f"Got {value} for batch_dims {len(self._batch_size)}.")
        named = [n for n in value if n is not None]
        if len(set(named)) != len(named):
            raise ValueError(f"Some dimension names are non-unique: {value}.")
        self._set_names(value)

    def _set_names(self, names):
        """Stores ``names`` (already checked; None erases) here and on every nested TensorDict, whose
        dims past ours lose their names (as in tensordict)."""
        if names is None:
            if (getattr(self, "_names", None) if _NAMES_USED[0] else None) is not None:
                self._names = None
            for value in self._tensordict.values():
                if isinstance(value, TensorDictBase):
                    value._set_names(None)
            return
        _NAMES_USED[0] = True
        self._names = list(names)
        for value in self._tensordict.values():
            if isinstance(value, TensorDictBase):
                value._set_names(list(names) + [None] * (len(value._batch_size) - len(names)))

    def _has_names(self):
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        return names is not None and any(n is not None for n in names)

    def refine_names(self, *names):
        """Names the unnamed batch dims (``...`` stands for the dims left); a dim that has a name
        must be given that same name (RuntimeError otherwise). Returns self."""
        if any(n is Ellipsis for n in names):
            at = names.index(Ellipsis)
            names = names[:at] + (None,) * (len(self._batch_size) - len(names) + 1) + names[at + 1:]
        current = self.names
        if len(names) != len(current):
            raise ValueError(f"the length of the dimension names must equate the tensordict batch_dims attribute. "
                             f"Got {list(names)} for batch_dims {len(current)}.")
        if any(old is not None and new != old for old, new in zip(current, names)):
            raise RuntimeError(f"refine_names: cannot coerce TensorDict names {current} with {list(names)}.")
        self.names = [old if old is not None else new for old, new in zip(current, names)]
        return self

    def rename(self, *names, **rename_map):
        """rename_ on a shallow copy (new TensorDicts, the same tensors)."""
        return self.copy().rename_(*names, **rename_map)

    def rename_(self, *names, **rename_map):
        """Names the batch dims: ``rename_("time", None)`` gives every dim a name (None erases one),
        ``rename_(time="t")`` renames the named ones. Returns self."""
        if names and rename_map:
            raise ValueError("Passed both a name map and a name list. Only one is accepted.")
        if not names and not rename_map:
            raise ValueError("Neither a name map nor a name list was passed. Only one is accepted.")
        if names:
            self.names = names
            return self
        current = self.names
        missing = [k for k in rename_map if k not in current]
        if missing:
            raise ValueError(f"Some names to be renamed were not part of the tensordict names: {rename_map.keys()} "
                             f"vs {current}.")
        self.names = [rename_map.get(n, n) if n is not None else None for n in current]
        return self


def _names_like_source(rule):
    """A method wrapper: the TensorDict result (or each one of a tuple of results) of a named
    TensorDict gets the names ``rule(self, names, args, kwargs)`` gives (None: left unnamed)."""
    def wrap_method(method):
        @wraps(method)
        def named(self, *args, **kwargs):
            out = method(self, *args, **kwargs)
            names = getattr(self, "_names", None) if _NAMES_USED[0] else None
            if names is None or out is self:
                return out
            new = rule(self, names, args, kwargs)
            for one in (out if isinstance(out, tuple) else (out,)):
                if isinstance(one, TensorDictBase) and new is not None and len(new) == len(one._batch_size) \
                        and getattr(one, "_names", None) != new:  # equal: set level by level already
                    one._set_names(new)
            return out
        return named
    return wrap_method


def _squeezed_names(self, names, args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    sizes = self._batch_size
    if dim is None:
        return [n for n, size in zip(names, sizes) if size != 1]
    d = dim % len(sizes)
    return names[:d] + names[d + 1:] if sizes[d] == 1 else names


def _unsqueezed_names(self, names, args, kwargs):
    dim = args[0] if args else kwargs["dim"]
    d = dim if dim >= 0 else dim + len(names) + 1
    return names[:d] + [None] + names[d:]


def _permuted_names(self, names, args, kwargs):
    dims = tuple(_ops._shape_arg(args if args else (kwargs["dims"],)))
    return [names[d % len(names)] for d in dims]


def _expanded_names(self, names, args, kwargs):
    shape = _ops._shape_arg(args if args else (kwargs.get("shape", ()),))
    return [None] * (len(shape) - len(names)) + names


def _indexed_names(names, index):
    """The names left by indexing the batch dims with ``index`` (its '...' expanded), as tensordict
    0.14.3 names them: an int drops its dim; a slice or a 1-D boolean mask keeps it, an N-D index
    tensor repeats it N times (later index tensors, broadcast into the first one's dims, drop
    theirs); None or True adds an unnamed dim; an N-D mask merges the dims it covers into an
    unnamed one. None (an unnamed result) for anything else."""
    out, pos, gathered = [], 0, False
    for i in (index if isinstance(index, tuple) else (index,)):
        ndim = getattr(i, "ndim", None)
        if i is None or i is True or i is False:
            out.append(None)
        elif isinstance(i, slice):
            out.append(names[pos])
            pos += 1
        elif isinstance(i, numbers.Integral) or ndim == 0:
            pos += 1
        elif ndim is not None and getattr(i, "dtype", None) is not None and i.dtype.name == "bool":
            out.append(names[pos] if ndim == 1 else None)
            pos += ndim
        elif ndim or isinstance(i, list):  # index tensors broadcast into the first one's dims,
            if not gathered:  # which all take the indexed dim's name
                out += [names[pos]] * (ndim or np.ndim(i))
            pos += 1
            gathered = True
        else:
            return None
    return out + names[pos:]


def _same_names(self, names, args, kwargs):
    return names


def _reduced_names(self, names, args, kwargs):
    """The names a reduction (``_reduce(name, dim, keepdim, ...)``) leaves: the dims it removes go."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim", _NO_DIM)
    keepdim = (args[2] if len(args) > 2 else kwargs.get("keepdim", False)) is True
    if isinstance(dim, str) or keepdim:
        return names
    if dim is None or dim is _NO_DIM:
        return []
    dims = self._reduction_dims(dim)
    return [n for i, n in enumerate(names) if i not in dims]


def _bool_reduced_names(self, names, args, kwargs):
    """The names all(dim)/any(dim) (``_reduce_bool(how, dim)``) leave."""
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    return None if dim is None else names[:dim % len(names)] + names[dim % len(names) + 1:]


def _flattened_names(self, names, args, kwargs):
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    if not names:
        return None
    start, end = (0 if start is None else start) % len(names), (-1 if end is None else end) % len(names)
    return names[:start] + [None] + names[end + 1:]


def _unflattened_names(self, names, args, kwargs):
    dim = (args[0] if args else kwargs["dim"]) % len(names)
    sizes = args[1] if len(args) > 1 else kwargs["unflattened_size"]
    return names[:dim] + [None] * (len(sizes) - 1) + names[dim:]  # the last new dim keeps the name (tensordict)


def _no_names(self, names, args, kwargs):
    return [None] * len(names)


def _names_if_same_batch(method):
    """``method`` (apply, view, reshape) whose result keeps self's names when its batch size is self's."""
    @wraps(method)
    def named(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        names = getattr(self, "_names", None) if _NAMES_USED[0] else None
        if names is not None and isinstance(out, TensorDictBase) and out is not self \
                and out._batch_size == self._batch_size and getattr(out, "_names", None) != names:
            out._set_names(names)
        return out
    return named
