"""torchrl's ``StackedComposite``: the lazy stack of ``Composite`` specs that differ (other keys,
other leaf shapes), as ``rlpipe.stack(specs, dim)`` gives it. It keeps the stacked specs
themselves (``spec[i]`` along the stack dim is the i-th one) and samples lazily stacked
TensorDicts; a key shared by all the stacked specs gives their stack.
"""
from .._tensor import Size
from ..tensordict import lazy_stack
from ._specs_base import TensorSpec, _extra_shape, _size, check_spec_encode, stack_specs


def _normalized_index(index, ndim):
    """``index`` as a tuple of ``ndim`` entries (Ellipsis expanded, trailing ``slice(None)``s added),
    and whether it was ``[..., int]``."""
    index = index if isinstance(index, tuple) else (index,)
    ellipsis_int = len(index) >= 2 and index[-2] is Ellipsis and isinstance(index[-1], int)
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (ndim - len(index) + 1) + index[at + 1:]
    return index + (slice(None),) * (ndim - len(index)), ellipsis_int


def _everything(item):
    return isinstance(item, slice) and item == slice(None)


class _LazyStack(TensorSpec):
    """What torchrl's lazy stacks of specs share: the stacked specs themselves, a stack dim, and the
    shape and copies of the stack (``StackedComposite``, ``Stacked``)."""

    space = None

    def __init__(self, specs, dim=0):
        self._specs = list(specs)
        first = self._specs[0]
        ndim = len(first.shape) + 1
        if not -ndim <= dim < ndim:
            raise IndexError(f"StackedComposite: dim {dim} out of range for specs of shape {list(first.shape)}")
        self.dim = dim + ndim if dim < 0 else dim
        shape = [size if all(spec.shape[d] == size for spec in self._specs) else -1  # torchrl's -1: sizes differ
                 for d, size in enumerate(first.shape)]
        shape.insert(self.dim, len(self._specs))
        self._shape = Size(shape)
        self.device = first.device

    @property
    def shape(self):
        """The stack's shape: the stacked specs' dims (-1 where their sizes differ), the stack dim inserted."""
        return self._shape

    @property
    def stack_dim(self):
        """The stack dim (torchrl's other name of ``dim``)."""
        return self.dim

    def __len__(self):
        return self.shape[0]

    def _restacked(self, specs, dim=None):
        return type(self)(specs, self.dim if dim is None else dim)

    # ---- indexing ----
    def __getitem__(self, index):
        index, ellipsis_int = _normalized_index(index, len(self.shape))
        picked = index[self.dim]
        if ellipsis_int and self.dim != len(self.shape) - 1:
            raise IndexError("Indexing with an ellipsis followed by an int is only permitted if the stack dimension "
                             f"is the last dimension (the stack dimension is {self.dim} of {len(self.shape)})")
        for d, item in enumerate(index):
            if d != self.dim and not _everything(item):
                raise IndexError(f"StackedComposite: cannot index along dimension {d} when the stack dimension is "
                                 f"{self.dim}; index along dimension {self.dim} only (got {index})")
        if isinstance(picked, int):
            return self._specs[picked]
        return self._restacked(self._specs[picked])

    # ---- shape and copies ----
    def expand(self, *shape):
        """The stack with new leading dims (``shape`` ends with the current shape)."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        shape = [int(size) for size in shape]
        lead = len(shape) - len(self.shape)
        if lead < 0 or tuple(shape[lead:]) != tuple(self.shape):  # (the -1 dims of different sizes included)
            raise ValueError(f"{type(self).__name__}.expand: the new shape {shape} must end with the spec's shape "
                             f"{list(self.shape)}")
        _size(shape[:lead])  # the new dims: non-negative sizes
        return self._restacked([spec.expand(tuple(shape[:lead]) + tuple(spec.shape)) for spec in self._specs],
                               self.dim + lead)

    def unbind(self, dim=0):
        """The stacked specs, along the stack dim (the only one a lazy stack unbinds)."""
        n = len(self.shape)
        d = dim + n if dim < 0 else dim
        if d != self.dim:
            raise ValueError(f"{type(self).__name__}.unbind: only the stack dim {self.dim} unbinds, got dim {dim} of "
                             f"shape {list(self.shape)}")
        return tuple(self._specs)

    def _with(self, shape=None, device=None, dtype=None, reshape=False):
        """The stack expanded to ``shape`` (new leading dims only: a lazy stack is not reshaped), on
        ``device``, with ``dtype``: what a Composite holding it asks of its entries."""
        out = self
        if shape is not None and tuple(shape) != tuple(self.shape):
            if reshape:
                raise NotImplementedError(f"{type(self).__name__}: a lazy stack of specs cannot be reshaped (from "
                                          f"{list(self.shape)} to {list(shape)})")
            out = out.expand(shape)
        for dest in (device, dtype):
            if dest is not None:
                out = out.to(dest)
        return self.clone() if out is self else out

    def unsqueeze(self, dim):
        """The stack with a new dim of size 1 at ``dim``."""
        n = len(self.shape) + 1
        if not -n <= dim < n:
            raise IndexError(f"unsqueeze: dim {dim} out of range for a spec of shape {list(self.shape)}")
        dim = dim + n if dim < 0 else dim
        if dim <= self.dim:
            return self._restacked([spec.unsqueeze(dim) for spec in self._specs], self.dim + 1)
        return self._restacked([spec.unsqueeze(dim - 1) for spec in self._specs])

    def squeeze(self, dim=None):
        """The stack without its size-1 dims (only ``dim``, when given); a stack of one spec squeezed
        along the stack dim is that spec."""
        if dim is None:
            out = self
            for d in reversed(range(len(self.shape))):
                if self.shape[d] == 1:
                    out = out.squeeze(d)
            return out
        n = len(self.shape)
        if not -n <= dim < n:
            raise IndexError(f"squeeze: dim {dim} out of range for a spec of shape {list(self.shape)}")
        dim = dim + n if dim < 0 else dim
        if self.shape[dim] != 1:
            return self
        if dim == self.dim:
            return self._specs[0]
        if dim < self.dim:
            return self._restacked([spec.squeeze(dim) for spec in self._specs], self.dim - 1)
        return self._restacked([spec.squeeze(dim - 1) for spec in self._specs])

    def clone(self):
        """A copy of the stack (each stacked spec cloned)."""
        return self._restacked([spec.clone() for spec in self._specs])

    def to(self, dest):
        """The stack with each stacked spec on ``dest`` (a device, or a dtype)."""
        return self._restacked([spec.to(dest) for spec in self._specs])

    def __eq__(self, other):
        return (type(other) is type(self) and self.dim == other.dim
                and len(self._specs) == len(other._specs)
                and all(a == b for a, b in zip(self._specs, other._specs)))

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}(\n    specs={self._specs!r},\n    shape={self.shape},\n    stack_dim={self.dim})"


def _is_key(index):
    return isinstance(index, str) or (isinstance(index, tuple) and bool(index) and all(isinstance(k, str)
                                                                                    for k in index))


class _LazyComposite(_LazyStack):
    """What ``StackedComposite`` (``specs.py``, where it is also a ``Composite``) does as a lazy stack
    of Composite specs stacked along ``dim`` without being merged (torchrl's lazy stack)."""

    dtype = None
    domain = "composite"

    def __getitem__(self, index):
        if _is_key(index):
            return stack_specs([spec[index] for spec in self._specs], self.dim)
        return super().__getitem__(index)

    def __setitem__(self, key, value):
        if not _is_key(key):  # (torchrl's unravel_key error)
            raise RuntimeError(f"key should be a Sequence<NestedKey>: {type(self).__name__} sets entries at str or "
                               f"tuple of str keys, got {key!r}")
        self.set(key, value)

    def __iter__(self):
        """The entries' specs (torchrl's: a lazy stack iterates over its values, not its keys)."""
        return (self[key] for key in self.keys())

    def update(self, dict_or_spec):
        """Sets every entry of ``dict_or_spec``; a Composite entry at a key every stacked spec has is
        unbound along the stack dim and merged into each one's (torchrl's)."""
        for key, value in dict_or_spec.items():
            if key in self.keys() and getattr(value, "domain", None) == "composite":
                for spec, part in zip(self._specs, value.unbind(self.dim)):
                    spec[key].update(part)
            else:
                self[key] = value
        return self

    def is_empty(self, recurse=False):
        """Whether every stacked spec is empty."""
        return all(spec.is_empty(recurse) for spec in self._specs)

    def select(self, *keys, strict=True):
        """The stack of each stacked spec's ``select``."""
        return self._restacked([spec.select(*keys, strict=strict) for spec in self._specs])

    def empty(self):
        """The stack of each stacked spec's empty copy."""
        return self._restacked([spec.empty() for spec in self._specs])

    def clear_device_(self):
        """Forgets the device of the stack and of each stacked spec; returns the stack."""
        for spec in self._specs:
            spec.clear_device_()
        self.device = None
        return self

    def _set_device(self, device):
        self._specs = [spec.to(device) for spec in self._specs]
        self.device = device

    def cardinality(self):
        """Refused, as torchrl's."""
        raise NotImplementedError(f"`cardinality` is not implemented for {type(self).__name__} specs.")

    def enumerate(self, use_mask=False):
        """Each stacked spec's ``enumerate``, stacked lazily after the enumeration dim."""
        return lazy_stack([spec.enumerate(use_mask) for spec in self._specs], self.dim + 1)

    def encode(self, vals, ignore_device=False):
        """Each slice of ``vals`` along the stack dim encoded by its stacked spec, stacked lazily."""
        parts = vals.unbind(self.dim) if hasattr(vals, "unbind") else vals
        return lazy_stack([spec.encode(part, ignore_device) for spec, part in zip(self._specs, parts)], self.dim)

    def memoize_encode(self, mode=True):
        """Turns the cached ``encode`` steps on (or off) in every stacked spec."""
        for spec in self._specs:
            spec.memoize_encode(mode)

    def erase_memoize_cache(self):
        """Drops the cached ``encode`` steps of every stacked spec."""
        for spec in self._specs:
            spec.erase_memoize_cache()

    def set(self, key, spec):
        """Sets ``spec`` unbound along the stack dim: its i-th part under ``key`` in the i-th stacked spec."""
        parts = spec.unbind(self.dim)
        if len(parts) != len(self._specs):
            raise ValueError(f"{type(self).__name__}.set: {key!r} has {len(parts)} entries along the stack dim "
                             f"{self.dim}, expected {len(self._specs)}")
        for sub, part in zip(self._specs, parts):
            sub[key] = part
        return self

    def keys(self, include_nested=False, leaves_only=False, is_leaf=None):
        """The keys every stacked spec has (in the first one's order)."""
        others = [set(spec.keys(include_nested, leaves_only)) for spec in self._specs[1:]]
        return [key for key in self._specs[0].keys(include_nested, leaves_only)
                if all(key in keys for keys in others)]

    def __contains__(self, key):
        return all(key in spec for spec in self._specs)

    def __delitem__(self, key):
        holders = [spec for spec in self._specs if key in spec.keys(True)]
        if not holders:
            raise KeyError(f"StackedComposite: no key {key!r} in any of the stacked specs")
        for spec in holders:
            del spec[key]

    # ---- samples ----
    def _build_td(self, fn, shape):
        """What a Composite holding this stack asks of it: each stacked spec's TensorDict, stacked lazily."""
        return self._stacked(lambda spec, extra: spec._build_td(fn, extra), shape)

    def _erase_names(self):
        for spec in self._specs:
            if getattr(spec, "_names", None) is not None:
                spec._erase_names()

    def _stacked(self, fn, shape):
        extra = _extra_shape(shape)
        return lazy_stack([fn(spec, extra) for spec in self._specs], len(extra) + self.dim)

    def rand(self, shape=None):
        """A lazily stacked TensorDict of each stacked spec's random sample."""
        return self._stacked(lambda spec, extra: spec.rand(extra), shape)

    def zero(self, shape=None):
        """A lazily stacked TensorDict of each stacked spec's zero."""
        return self._stacked(lambda spec, extra: spec.zero(extra), shape)

    def one(self, shape=None):
        """A lazily stacked TensorDict of each stacked spec's one."""
        return self._stacked(lambda spec, extra: spec.one(extra), shape)

    def _parts(self, val):
        """``val`` unbound along the stack dim (counted from the end, so leading batch dims pass)."""
        return val.unbind(len(val.shape) - len(self.shape) + self.dim)

    def is_in(self, val):
        """Whether each slice of ``val`` along the stack dim lies in its stacked spec (KeyError
        when a key is missing, as a Composite's)."""
        if tuple(val.shape[len(val.shape) - len(self.shape):]) != tuple(self.shape):
            return False
        parts = self._parts(val)
        for spec, part in zip(self._specs, parts):
            missing = set(spec.keys(True, True)) - set(part.keys(True, True))
            if missing:
                raise KeyError(f"StackedComposite.is_in: the value lacks the keys {sorted(map(str, missing))}")
        return all(spec.is_in(part) for spec, part in zip(self._specs, parts))

    def _holds(self, val):
        """``is_in(val)``, False (not a KeyError) when ``val`` lacks keys."""
        try:
            return self.is_in(val)
        except KeyError:
            return False

    def project(self, val):
        """Each slice of ``val`` projected into its stacked spec, stacked lazily again."""
        parts = [spec.project(part) for spec, part in zip(self._specs, self._parts(val))]
        return lazy_stack(parts, len(val.shape) - len(self.shape) + self.dim)

    def type_check(self, value, selected_keys=None):
        """Checks each slice of ``value`` against its stacked spec (``selected_keys``: one key)."""
        for spec, part in zip(self._specs, self._parts(value)):
            spec.type_check(part, selected_keys)

    def to_numpy(self, val, safe=None):
        """The shared keys of ``val`` as NumPy values (``safe``: checks ``val`` is in the spec first)."""
        if check_spec_encode(safe) and not self._holds(val):
            raise AssertionError(f"StackedComposite.to_numpy: the value is not in the spec (value={val!r})")
        return {key: self[key].to_numpy(val[key], safe=safe) for key in self.keys()}


class Stacked(_LazyStack):
    """Leaf specs of one type and dtype stacked along ``dim`` although their shapes differ (torchrl's lazy
    stack of leaves): the dims where they differ are -1 in ``shape``; ``spec[i]`` along the stack dim is
    the i-th one. Samples would be nested tensors, which rlpipe lacks: draw them from the stacked
    specs (or from the ``StackedComposite`` holding this entry)."""

    def __init__(self, specs, dim=0):
        super().__init__(specs, dim)
        self.dtype = self._specs[0].dtype
        self.domain = self._specs[0].domain

    def _no_samples(self, what):
        raise NotImplementedError(f"{type(self).__name__}.{what}: the stacked specs have different shapes "
                                  f"{[list(spec.shape) for spec in self._specs]}, whose samples torchrl makes nested "
                                  "tensors (rlpipe has none); sample each stacked spec (spec[i]) instead")

    def rand(self, shape=None):
        """Refused: the samples would be nested tensors (see the class docstring)."""
        self._no_samples("rand")

    def zero(self, shape=None):
        """Refused: the samples would be nested tensors (see the class docstring)."""
        self._no_samples("zero")

    def one(self, shape=None):
        """Refused: the samples would be nested tensors (see the class docstring)."""
        self._no_samples("one")

    def is_in(self, val):
        """Whether each slice of ``val`` along the stack dim (a sequence of tensors) lies in its stacked spec."""
        parts = list(val)
        return len(parts) == len(self._specs) and all(spec.is_in(part) for spec, part in zip(self._specs, parts))


def _is_composite(spec):
    return getattr(spec, "domain", None) == "composite"


def consolidate_spec(spec, recurse_through_entries=True, recurse_through_stack=True):
    """A copy of ``spec`` whose lazily stacked Composites have no exclusive keys, as torchrl's
    ``torchrl.data.utils.consolidate_spec``: a key some stacked specs lack is added to them with an
    empty spec like the others' (its dims 0, or the differing ones). ``recurse_through_entries``: the
    nested Composites too; ``recurse_through_stack``: the stacked specs themselves first."""
    spec = spec.clone()
    if not _is_composite(spec):
        return spec
    if isinstance(spec, _LazyComposite):
        if recurse_through_stack:
            spec._specs = [consolidate_spec(sub, recurse_through_entries, recurse_through_stack) for sub in spec._specs]
        shared = set(spec.keys())
        examples = {}
        for sub in spec._specs:
            for key in sub.keys():
                if key not in shared:
                    examples.setdefault(key, []).append(sub[key])
        for sub in spec._specs:
            for key, specs in examples.items():
                if key not in sub.keys():
                    sub[key] = _empty_like_spec(specs, sub.shape)
    if recurse_through_entries:  # (a lazy stack's entries too: their stacked specs gain each other's keys)
        for key in list(spec.keys()):
            if _is_composite(spec[key]):
                spec[key] = consolidate_spec(spec[key], recurse_through_entries, recurse_through_stack)
    return spec


def _empty_like_spec(specs, shape):
    """An empty spec standing for an exclusive key in the stacked specs that lack it (torchrl's)."""
    first = specs[0]
    if any(type(spec) is not type(first) for spec in specs[1:]):
        raise ValueError("Found same key in lazy specs corresponding to entries with different classes: "
                         f"{sorted({type(spec).__name__ for spec in specs})}")
    if isinstance(first, _LazyStack):
        inner = list(shape[:first.dim]) + list(shape[first.dim + 1:])
        return type(first)([_empty_like_spec(first._specs, inner) for _ in first._specs], first.dim)
    if _is_composite(first):
        return first.empty()
    sizes = [size if all(spec.shape[d] == size for spec in specs) else 0 for d, size in enumerate(first.shape)]
    if 0 not in sizes:  # the same shape everywhere: the batch dims kept, the others 0
        sizes = [size if d < len(shape) else 0 for d, size in enumerate(sizes)]
    return first[(0,) * len(first.shape)].expand(sizes)


def check_no_exclusive_keys(spec, recurse=True):
    """Whether no lazily stacked Composite in ``spec`` has keys some of its stacked specs lack (torchrl's)."""
    if isinstance(spec, _LazyComposite):
        keys = set(spec.keys())
        return all((not recurse or check_no_exclusive_keys(sub)) and set(sub.keys()) == keys for sub in spec._specs)
    if _is_composite(spec) and recurse:
        return all(check_no_exclusive_keys(spec[key]) for key in spec.keys())
    return True


def contains_lazy_spec(spec):
    """Whether ``spec`` is or holds a lazy stack of specs (torchrl's)."""
    if isinstance(spec, _LazyStack):
        return True
    return _is_composite(spec) and any(contains_lazy_spec(spec[key]) for key in spec.keys())


TensorSpec._lazy_stack_class = Stacked  # what stack_specs builds for leaves that differ (_specs_base cannot import us)
