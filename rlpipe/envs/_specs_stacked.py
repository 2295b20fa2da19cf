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


class StackedComposite(TensorSpec):
    """Composite specs stacked along ``dim`` without being merged (torchrl's lazy stack)."""

    dtype = None
    space = None
    domain = "composite"

    def __init__(self, specs, dim=0):
        self._specs = list(specs)
        first = self._specs[0]
        ndim = len(first.shape) + 1
        if not -ndim <= dim < ndim:
            raise IndexError(f"StackedComposite: dim {dim} out of range for specs of shape {list(first.shape)}")
        self.dim = dim + ndim if dim < 0 else dim
        shape = list(first.shape)
        shape.insert(self.dim, len(self._specs))
        self.shape = Size(shape)
        self.device = first.device

    @property
    def stack_dim(self):
        """The stack dim (torchrl's other name of ``dim``)."""
        return self.dim

    def __len__(self):
        return self.shape[0]

    def _restacked(self, specs, dim=None):
        return StackedComposite(specs, self.dim if dim is None else dim)

    # ---- indexing ----
    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(k, str) for k in index)):
            return stack_specs([spec[index] for spec in self._specs], self.dim)
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

    # ---- shape and copies ----
    def expand(self, *shape):
        """The stack with new leading dims (``shape`` ends with the current shape)."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        shape = _size(shape)
        lead = len(shape) - len(self.shape)
        if lead < 0 or tuple(shape[lead:]) != tuple(self.shape):
            raise ValueError(f"StackedComposite.expand: the new shape {list(shape)} must end with the spec's shape "
                             f"{list(self.shape)}")
        return self._restacked([spec.expand(tuple(shape[:lead]) + tuple(spec.shape)) for spec in self._specs],
                               self.dim + lead)

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
        return (isinstance(other, StackedComposite) and self.dim == other.dim
                and len(self._specs) == len(other._specs)
                and all(a == b for a, b in zip(self._specs, other._specs)))

    __hash__ = None

    def __repr__(self):
        return f"StackedComposite(\n    specs={self._specs!r},\n    shape={self.shape},\n    stack_dim={self.dim})"
