"""The layout of a storage with ``ndim > 1`` (torchrl's ``ndim``): its items are ``[rows, *inner]``,
kept flat inside (rows of ``prod(inner)`` consecutive items); here the mapping between that
layout's indices and the flat positions, and torchrl's names for its shape."""
import math
import numbers

import numpy as np

from ... import random as _random
from ..._tensor import Tensor
from ...tensordict import TensorDict


def _broadcast_rows(data, shape, rest_dims):
    """``data`` broadcast to ``[*shape, *rest]`` (its last ``rest_dims`` dims are ``rest``) and
    flattened to one row per item."""
    full = tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)
    rest = full[len(full) - rest_dims:] if rest_dims else ()
    if full[:len(full) - rest_dims] != tuple(shape):
        data = data.expand(*shape, *rest)
    return data.reshape(-1, *rest)


def _numpy_index(index):
    """An index for a NumPy array of positions: Tensors (also inside a tuple) as arrays."""
    if isinstance(index, tuple):
        return tuple(_numpy_index(i) for i in index)
    if isinstance(index, Tensor):
        return index.detach().cpu()._data
    return np.asarray(index) if isinstance(index, list) else index


class _Layout:
    """Shape and index helpers of a storage; ``ndim == 1`` makes them the identity."""

    ndim = 1
    _inner = ()  # ndim > 1: the storage's dims 1..ndim-1 (items per row), fixed by the first write

    # ---- layout: torchrl's names for the storage's shape ------------------------------------------------
    @property
    def _row_items(self):
        """Items per row along dim 0 (1 when ndim == 1 or before the first write)."""
        return math.prod(self._inner or ())

    @property
    def _len_along_dim0(self):
        """Rows written (``len()`` when ndim == 1)."""
        return -(len(self) // -self._row_items)

    def _max_size_along_dim0(self, *, single_data=None, batched_data=None):
        """How many rows the storage holds (``max_size`` when ndim == 1), as torchrl's."""
        if self.ndim == 1:
            return self.max_size
        inner = self._inner if self._inner is not None else self._data_inner(single_data, batched_data is not None
                                                                              and batched_data)
        return -(self.max_size // -math.prod(inner)) if self._inner is None else self.max_size // self._row_items

    def _data_inner(self, single, batched):
        data = batched if batched is not False else single
        if data is None:
            raise ValueError("single_data or batched_data must be passed.")
        shape = tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)
        return shape[1:self.ndim] if batched is not False else shape[:self.ndim - 1]

    @property
    def _is_full(self):
        return len(self) == self.max_size

    @property
    def shape(self):
        """``[rows written, *items per row]`` (``[len()]`` when ndim == 1), as torchrl's."""
        if self.ndim > 1 and self._inner is None:
            return None
        return (self._len_along_dim0,) + tuple(self._inner)

    def _grid(self, rows=None):
        """The flat position of each item, shaped ``[rows, *inner]`` (the rows written by default)."""
        rows = self._len_along_dim0 if rows is None else rows
        return np.arange(rows * self._row_items, dtype=np.int64).reshape((rows,) + tuple(self._inner))

    def _coordinates(self, positions):
        """Flat positions as ``[N, ndim]`` coordinates (the positions themselves when ndim == 1)."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.ndim == 1:
            return positions
        shape = (self.max_size // self._row_items,) + tuple(self._inner)
        return np.stack(np.unravel_index(positions.reshape(-1), shape), -1)

    def _flat_positions(self, index):
        """Flat positions from an index a sampler or a user gives: a tuple of per-dim arrays or a
        ``[N, ndim]`` array of coordinates (ndim > 1), else flat positions."""
        index = _numpy_index(index)
        if self.ndim == 1:
            return index
        shape = (self.max_size // self._row_items,) + tuple(self._inner)
        if isinstance(index, tuple):
            return np.ravel_multi_index(tuple(np.asarray(i, dtype=np.int64) for i in index), shape)
        index = np.asarray(index, dtype=np.int64)
        if index.ndim >= 2 and index.shape[-1] == self.ndim:
            return np.ravel_multi_index(tuple(np.moveaxis(index, -1, 0)), shape)
        return index

    def _next_rows(self, data):
        """The rows along dim 0 a write of ``data`` from the cursor fills (its positions when ndim == 1)."""
        if self.ndim == 1:
            return self._positions(data.shape[0])[0]
        rows = self._max_size_along_dim0(batched_data=data)
        return (self._cursor // self._row_items + np.arange(data.shape[0], dtype=np.int64)) % rows

    def _rand_given_ndim(self, batch_size):
        """``batch_size`` uniform positions: flat, or one array per dim when ndim > 1 (torchrl's)."""
        flat = _random.randint(0, len(self), (batch_size,), generator=getattr(self, "_rng", None))._data
        return flat if self.ndim == 1 else tuple(self._coordinates(flat).T)

    def __init__(self):
        self._meta = np.zeros(2, dtype=np.int64)  # [length, write cursor]

    def _set_items(self, index, data):
        """``set`` on a storage with ndim > 1: the items ``index`` selects in the ``[rows, *inner]``
        layout (the storage's capacity), ``data`` broadcast to them."""
        index = _numpy_index(index)
        if self._inner is None:  # the first write fixes the items per row
            one_row = isinstance(index, (numbers.Integral, np.integer)) or (
                isinstance(index, np.ndarray) and not index.ndim)
            shape = tuple(data.batch_size if isinstance(data, TensorDict) else data.shape)
            self._fix_inner(shape[:self.ndim - 1] if one_row else shape[1:self.ndim], "set")
        self._set_at(self._grid(self.max_size // self._row_items)[index], data)

    def _set_at(self, positions, data):
        """Writes ``data``, broadcast to the array ``positions``' shape, at those flat positions."""
        positions = np.asarray(positions)
        data = self._untyped(data)
        self._commit(self._prepare(_broadcast_rows(data, positions.shape, self._rest_dims(data, positions.ndim)),
                                   what="set", at=positions.reshape(-1), flat=True))

    def _rest_dims(self, data, selected_dims):
        """How many trailing dims of ``data`` are per-item (feature, or item batch) dims."""
        spec = getattr(self, "_spec", None)
        if spec is not None:
            return len(spec.item_batch) if spec.kind == "tensordict" else len(spec.shapes[0])
        full = data.batch_size if isinstance(data, TensorDict) else data.shape
        return max(len(full) - selected_dims, 0)

    def _fix_inner(self, inner, what):
        """Fixes the items per row (ndim > 1) and rounds ``max_size`` up to whole rows, as torchrl."""
        inner = tuple(int(d) for d in inner)
        if len(inner) != self.ndim - 1 or not all(inner):
            raise ValueError(f"{what}: a storage with ndim={self.ndim} needs data with {self.ndim} non-empty batch "
                             f"dimensions (rows, then {self.ndim - 1} of items per row), got items per row "
                             f"{list(inner)}")
        self._inner = inner
        self.max_size = -(self._max_size_asked // -math.prod(inner)) * math.prod(inner)
