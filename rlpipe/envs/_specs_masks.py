"""torchrl's action masks, shared by the discrete leaf specs (``OneHot``, ``Categorical``,
``MultiOneHot``, ``MultiCategorical``): ``mask`` holds one bool per category, in the last dim. A
spec with a mask draws (``rand``) only allowed categories, ``is_in`` refuses the others and
``project`` replaces them by a random allowed one.

The logic works on category indices, one per sub-space (``[..., k]``, k = 1 except for the multi
specs): each spec class converts its values to indices and back (``_mask_indices`` and
``_mask_values``) and names its sub-space sizes (``_mask_sizes``) and mask shape.
"""
import copy

import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._tensor import host_array
from ..random import rand as _rand


def _random_allowed(mask):
    """A random allowed category of each row of the host bool ``mask`` (int64, ``mask.shape[:-1]``)."""
    counts = mask.sum(-1)
    if (counts == 0).any():
        raise RuntimeError("rand: the action mask allows no category in some row (every outcome is masked)")
    pick = (host_array(_rand(*counts.shape, dtype=_dtypes.float64)) * counts).astype(np.int64)
    return (mask.cumsum(-1) > pick[..., None]).argmax(-1)


def one_hot_indices(values, sizes):
    """Host concatenated one-hot ``values`` as the index of each sub-space ``[..., len(sizes)]``."""
    bounds = np.cumsum([0] + list(sizes))
    return np.stack([values[..., a:b].argmax(-1) for a, b in zip(bounds[:-1], bounds[1:])], -1)


def one_hot_values(indices, sizes):
    """Host indices ``[..., len(sizes)]`` as concatenated one-hot vectors."""
    return np.concatenate([np.eye(n, dtype=bool)[indices[..., i]] for i, n in enumerate(sizes)], -1)


class MaskSupport:
    """Mixin of the maskable discrete specs: ``mask`` (a bool Tensor or None), ``update_mask``
    and the masked ``rand``/``is_in``/``project`` helpers their methods call."""

    mask = None

    def _mask_sizes(self):
        """The number of categories of each sub-space."""
        raise NotImplementedError

    def _mask_shape(self, shape=None):
        """The shape of a mask for a spec of ``shape`` (default: this spec's)."""
        raise NotImplementedError

    def _mask_indices(self, values):
        """Host values in the spec's format as category indices ``[..., k]`` (one per sub-space)."""
        raise NotImplementedError

    def _mask_values(self, indices):
        """Host indices ``[..., k]`` as host values in the spec's format."""
        raise NotImplementedError

    def update_mask(self, mask):
        """Allows only the categories where ``mask`` (bool, broadcasting to the spec's mask shape:
        the one-hot shape, ``sum(nvec)`` per row for the multi specs) is True; None allows all."""
        if mask is None:
            self.mask = None
            return
        array = host_array(mask).astype(bool)
        expected = tuple(self._mask_shape())
        try:
            array = np.broadcast_to(array, expected)
        except ValueError:
            if array.size != expected[-1]:
                raise ValueError(f"update_mask: a mask of shape {list(array.shape)} does not broadcast to the "
                                 f"spec's {list(expected)}") from None
            array = np.broadcast_to(array.reshape(-1), expected)
        self.mask = as_tensor(np.ascontiguousarray(array), device=self.device)

    def is_in(self, val):
        """The spec's ``is_in``, refusing the categories the mask forbids."""
        return super().is_in(val) and (val.numel() == 0 or self._mask_allows(host_array(val)))

    def host_membership_test(self):
        """The spec's host test, also refusing the categories the mask forbids (as it is at each call)."""
        test = super().host_membership_test()
        return lambda array: test(array) and self._mask_allows(array)

    def project(self, val):
        """The spec's ``project``, then a random allowed category for each forbidden one."""
        return self._mask_project(super().project(val))

    def __eq__(self, other):
        return super().__eq__(other) and self._mask_equal(other)

    __hash__ = None

    def _indexed_mask(self, index):
        """The host mask of ``value[index]`` (None without a mask)."""
        return None if self.mask is None else host_array(self.mask)[index]

    def _indexed(self, index, shape):
        unmasked = copy.copy(self)
        unmasked.mask = None
        out = super(MaskSupport, unmasked)._indexed(index, shape)
        out.update_mask(self._indexed_mask(index))
        return out

    def _enumerate_rows(self):
        """Every possible row value (host, ``[K, *row_shape]``): all category combinations."""
        sizes = self._mask_sizes()
        combos = np.stack(np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij"), -1).reshape(-1, len(sizes))
        return self._mask_values(combos)

    def enumerate(self, use_mask=False):
        """Every value of the spec, stacked along a new first dim (each repeated over the leading
        dims); ``use_mask``: only the values the mask allows in every row."""
        rows = np.asarray(self._enumerate_rows())
        lead = len(self.shape) - (rows.ndim - 1)
        values = np.broadcast_to(rows.reshape((len(rows),) + (1,) * lead + rows.shape[1:]),
                                 (len(rows),) + tuple(self.shape))
        if use_mask and self.mask is not None:
            allowed = ~self._disallowed(self._mask_indices(values)).any(-1)
            values = values[allowed.reshape(len(rows), -1).all(-1)]
        return as_tensor(np.ascontiguousarray(values).astype(self.dtype.np), device=self.device)

    def _mask_parts(self, extra):
        """The host mask of each sub-space, broadcast to ``extra`` leading dims."""
        mask = host_array(self.mask)
        mask = np.broadcast_to(mask, tuple(extra) + mask.shape)
        bounds = np.cumsum([0] + self._mask_sizes())
        return [mask[..., a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def _masked_rand(self, shape):
        """``rand(shape)`` drawing only allowed categories."""
        extra = () if shape is None else tuple(shape)
        indices = np.stack([_random_allowed(part) for part in self._mask_parts(extra)], -1)
        return as_tensor(self._mask_values(indices).astype(self.dtype.np), device=self.device)

    def _extra_dims(self, indices):
        """The leading dims of host ``indices`` beyond the spec's own."""
        return indices.shape[:indices.ndim - len(self._mask_shape())]

    def _disallowed(self, indices):
        """Host bool ``[..., k]``: which of the ``indices`` the mask forbids."""
        return np.stack([~np.take_along_axis(part, indices[..., i:i + 1], -1)[..., 0]
                         for i, part in enumerate(self._mask_parts(self._extra_dims(indices)))], -1)

    def _mask_allows(self, values):
        """Whether host ``values`` (in the space, spec format) pick only allowed categories."""
        if self.mask is None:
            return True
        return not self._disallowed(self._mask_indices(np.asarray(values))).any()

    def _mask_project(self, val):
        """Tensor ``val`` (already projected into the unmasked space) with each forbidden category
        replaced by a random allowed one."""
        if self.mask is None:
            return val
        indices = self._mask_indices(host_array(val)).copy()
        bad = self._disallowed(indices)
        if not bad.any():
            return val
        for i, part in enumerate(self._mask_parts(self._extra_dims(indices))):
            indices[..., i] = np.where(bad[..., i], _random_allowed(part), indices[..., i])
        return as_tensor(self._mask_values(indices).astype(self.dtype.np), device=val.device)

    def _mask_like(self, shape, reshape):
        """This spec's mask for a copy of shape ``shape`` (reshaped or expanded as the spec is)."""
        if self.mask is None:
            return None
        target = tuple(self._mask_shape(shape))
        array = host_array(self.mask)
        array = array.reshape(target) if reshape else np.broadcast_to(array, target)
        return np.ascontiguousarray(array)

    def _mask_equal(self, other):
        """Whether ``other`` has the same mask (both None, or equal arrays)."""
        mine, theirs = self.mask, getattr(other, "mask", None)
        if mine is None or theirs is None:
            return mine is None and theirs is None
        mine, theirs = host_array(mine), host_array(theirs)
        return mine.shape == theirs.shape and bool((mine == theirs).all())
