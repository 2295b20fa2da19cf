"""torchrl's ``torchrl.data.replay_buffers.utils``: trajectory boundaries in storage order
(``find_start_stop_traj``, which ``SliceSampler`` uses) and the pytree iterator."""
import math
import numbers

import numpy as np

from ..._tensor import Tensor, wrap
from ..._utils import unavailable
from ...utils._pytree import tree_leaves

__all__ = ["DEFAULT_DONE_KEYS", "find_start_stop_traj", "tree_iter", "TED2Flat", "Flat2TED", "TED2Nested", "Nested2TED",
           "H5Split",
           "H5Combine"]

# the done entries a trajectory-aware sampler reads, as torchrl
DEFAULT_DONE_KEYS = ("done", "truncated", "terminated")


def _array(value, what):
    if isinstance(value, Tensor):
        return value.detach().cpu()._data
    if isinstance(value, np.ndarray):
        return value
    raise TypeError(f"find_start_stop_traj: {what} must be a Tensor, got {type(value).__name__}")


def _cursor_position(cursor):
    if isinstance(cursor, Tensor):
        cursor = cursor.detach().cpu()._data
    if isinstance(cursor, (np.ndarray, range)):
        flat = np.asarray(cursor).reshape(-1)
        if not flat.size:
            raise RuntimeError(f"cursor must not be an empty {'range' if isinstance(cursor, range) else 'tensor'}.")
        cursor = flat[-1]
    if isinstance(cursor, bool) or not isinstance(cursor, (numbers.Integral, np.integer)):
        raise RuntimeError("cursor should be an integer or a 1d tensor or a range.")
    return int(cursor)


def end_flags(*, trajectory=None, end=None, at_capacity, cursor=None):
    """A ``[T, *B]`` bool array (NumPy) where every trajectory has an end: the last row unless the
    storage is ``at_capacity`` (then a trajectory may run on at row 0), and the ``cursor`` row
    (the newest item: what followed it was overwritten)."""
    if (trajectory is None) == (end is None):
        raise TypeError(f"Exactly one of `trajectory` and `end` must be provided, got trajectory={trajectory} and "
                        f"end={end}.")
    signal = _array(trajectory if trajectory is not None else end, "trajectory" if end is None else "end")
    if signal.ndim == 0:
        raise RuntimeError("Expected the end-of-trajectory signal to be at least 1-dimensional.")
    if signal.shape[0] == 0:
        raise RuntimeError("Cannot recover trajectory boundaries from an empty (T=0) input.")
    if trajectory is not None:
        last = signal[-1:] != signal[:1] if at_capacity else np.ones_like(signal[:1], dtype=bool)
        flags = np.concatenate([signal[:-1] != signal[1:], last], 0)
    else:
        flags = signal.astype(bool, copy=True)
        if not at_capacity:
            flags[-1] = True
    if at_capacity:
        if cursor is not None:
            flags[_cursor_position(cursor)] = True
        flags[-1] |= ~flags.any(0)  # a lane without any end ends at its last row
    return flags


def start_stop(flags):
    """(start, stop, lengths) NumPy arrays from ``end_flags``: ``[N, 1 + len(B)]`` time-then-batch
    coordinates of each trajectory's first and last (inclusive) step, lane by lane, and ``[N]``
    lengths; a trajectory's start follows the previous end in its lane, cyclically."""
    steps = flags.shape[0]
    lanes = flags.reshape(steps, -1)
    lane, stop_t = np.nonzero(lanes.T)
    first = np.r_[True, lane[1:] != lane[:-1]]
    last = np.r_[first[1:], True]
    previous = np.roll(stop_t, 1)
    previous[first] = stop_t[last]
    start_t = (previous + 1) % steps
    lengths = stop_t - start_t + 1
    lengths[lengths <= 0] += steps
    batch = np.stack(np.unravel_index(lane, flags.shape[1:]), 1) if flags.ndim > 1 else np.zeros((len(lane), 0),
                                                                                                  np.int64)
    return (np.column_stack([start_t, batch]).astype(np.int64), np.column_stack([stop_t, batch]).astype(np.int64),
            lengths.astype(np.int64))


def find_start_stop_traj(*, trajectory=None, end=None, at_capacity, cursor=None, device=None):
    """torchrl's trajectory boundaries in storage order, from trajectory ids or end flags
    (``[T, *B]``, time first): ``(start, stop, lengths)`` with ``start``/``stop`` of shape
    ``[N, 1 + len(B)]`` (time index, then batch coordinates; ``start > stop`` in time for a
    trajectory that wraps around a full, ``at_capacity`` storage) and ``lengths`` of shape ``[N]``.
    ``cursor`` (the newest row) ends a trajectory when ``at_capacity``. ``device`` is accepted
    for torchrl's signature; results are on the input's device."""
    signal = trajectory if trajectory is not None else end
    flags = end_flags(trajectory=trajectory, end=end, at_capacity=at_capacity, cursor=cursor)
    dev = signal.device if isinstance(signal, Tensor) else None
    out = start_stop(flags)
    return tuple(wrap(a, dev) if dev is None or dev.type == "cpu" else wrap(a).to(dev) for a in out)


def tree_iter(pytree):
    """The leaves of ``pytree``, in order."""
    yield from tree_leaves(pytree)


def _np(value):
    return value.detach().cpu()._data if isinstance(value, Tensor) else np.asarray(value)


def _boundary_distances_1d(anchor, start, stop, length):
    """(steps since the start, steps to the stop) of each anchor's trajectory, modulo ``length``."""
    anchor, start, stop = _np(anchor), _np(start), _np(stop)
    trajectory = np.searchsorted(stop, anchor) % stop.shape[0]
    return (wrap(((anchor - start[trajectory]) % length).astype(np.int64)),
            wrap(((stop[trajectory] - anchor) % length).astype(np.int64)))


def _boundary_distances_nd(anchor, start, stop, stop_key, boundary_index, lane_stride, length):
    """``_boundary_distances_1d`` for ``[N, 1 + len(B)]`` anchors, searched lane by lane."""
    anchor, start, stop = _np(anchor), _np(start), _np(stop)
    lane = (anchor[:, 1:] * _np(lane_stride)).sum(-1)
    trajectory = _np(boundary_index)[np.searchsorted(_np(stop_key), lane * (2 * length) + anchor[:, 0])]
    return (wrap(((anchor[:, 0] - start[trajectory, 0]) % length).astype(np.int64)),
            wrap(((stop[trajectory, 0] - anchor[:, 0]) % length).astype(np.int64)))


def _make_boundary_search_nd(start, stop, storage_shape):
    """(sorted lane-aware stop keys, the trajectory of each key, lane strides) for
    ``_boundary_distances_nd``; each lane gets a sentinel key one storage length past its first stop
    so that anchors after a lane's last stop find the trajectory that wraps around."""
    stop = _np(stop)
    lane_shape = tuple(storage_shape[1:])
    lane_stride = np.array([math.prod(lane_shape[i + 1:]) for i in range(len(lane_shape))], dtype=np.int64)
    lane = (stop[:, 1:] * lane_stride).sum(-1)
    key = lane * (2 * storage_shape[0]) + stop[:, 0]
    order = np.argsort(key, kind="stable")
    key, ordered_lane = key[order], lane[order]
    first = np.r_[True, ordered_lane[1:] != ordered_lane[:-1]]
    stop_key = np.concatenate([key, key[first] + storage_shape[0]])
    boundary_index = np.concatenate([order, order[first]])
    sort = np.argsort(stop_key, kind="stable")
    return wrap(stop_key[sort]), wrap(boundary_index[sort]), wrap(lane_stride)


_WHY_FORMAT = "rlpipe has no TED/flat/nested/H5 storage format conversions"
TED2Flat = unavailable("TED2Flat", _WHY_FORMAT)
Flat2TED = unavailable("Flat2TED", _WHY_FORMAT)
TED2Nested = unavailable("TED2Nested", _WHY_FORMAT)
Nested2TED = unavailable("Nested2TED", _WHY_FORMAT)
H5Split = unavailable("H5Split", _WHY_FORMAT)
H5Combine = unavailable("H5Combine", _WHY_FORMAT)
_ReplayBoundaryIndex = unavailable("_ReplayBoundaryIndex", "the cached boundary index of torchrl's sequence sample "
                                   "units is not implemented")
