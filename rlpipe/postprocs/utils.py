"""Trajectory utilities: split a batch into padded trajectories; discounted returns with resets."""
from .. import primitives as _ops
from .._creation import arange, ones_like, zeros
from .. import _dtypes
from ..tensordict import unravel_key_to_tuple

__all__ = ["split_trajectories", "discounted_cumsum", "reward2go"]


def split_trajectories(tensordict, *, prefix=None, trajectory_key=None, done_key=None, as_nested=False):
    """A ``[num_trajectories, max_length]`` TensorDict with one trajectory per row, zero-padded, and
    ``(prefix, "mask")`` telling the real steps (prefix defaults to "collector").

    Trajectories are the runs of equal ``trajectory_key`` values (default
    ``("collector", "traj_ids")``) in row-major order, or, without that entry, the runs that end at
    each ``done_key`` (default ``("next", "done")``) and at the end of each batch row."""
    if as_nested:
        raise NotImplementedError("split_trajectories(as_nested=True): rlpipe has no nested (jagged) tensors")
    prefix = "collector" if prefix is None else prefix
    trajectory_key = (prefix, "traj_ids") if trajectory_key is None else unravel_key_to_tuple(trajectory_key)
    done_key = ("next", "done") if done_key is None else unravel_key_to_tuple(done_key)
    flat = tensordict.reshape(-1) if tensordict.batch_dims != 1 else tensordict
    n = flat.batch_size[0]
    if n == 0:
        out = flat.apply(lambda leaf: leaf.reshape((0, 0) + tuple(leaf.shape[1:])), batch_size=[0, 0])
        out.set((prefix if prefix is not None else "collector", "mask"), zeros(0, 0, dtype=_dtypes.bool))
        return out
    ids = flat.get(trajectory_key, None)
    if ids is not None:
        ids = ids.reshape(n)
        starts = _ops.cat([ids.new_ones(1, dtype=_dtypes.bool), ids[1:] != ids[:-1]]) if n else ids.bool()
    else:
        done = tensordict[done_key].reshape(tuple(tensordict.batch_size)).bool()
        row_start = zeros(tuple(done.shape), dtype=_dtypes.bool, device=done.device)
        row_start[..., 0] = True
        starts = (row_start | _ops.cat([row_start[..., :1], done[..., :-1]], -1)).reshape(n)
    trajectory = starts.long().cumsum(0) - 1
    first = _ops.nonzero(starts).reshape(-1)
    position = arange(n, device=starts.device) - first[trajectory]
    lengths = _ops.cat([first[1:], first.new_full((1,), n)]) - first
    count, longest = first.shape[0], int(lengths.max().item()) if n else 0

    def pad(leaf):
        out = leaf.new_zeros((count, longest) + tuple(leaf.shape[1:]))
        out[trajectory, position] = leaf
        return out

    out = flat.apply(pad, batch_size=[count, longest])
    mask = zeros(count, longest, dtype=_dtypes.bool, device=starts.device)
    mask[trajectory, position] = True
    out.set((prefix, "mask"), mask)
    return out


def discounted_cumsum(reward, done, gamma, *, time_dim=-2):
    """G[t] = reward[t] + gamma * (1 - done[t]) * G[t + 1] along ``time_dim``: the discounted return
    to go, restarting after every done. A doubling scan: log2(T) vectorized passes."""
    r = reward.movedim(time_dim, -1)
    d = _ops.broadcast_to(done.bool(), tuple(reward.shape)).movedim(time_dim, -1)
    carry = _ops.where(d, 0.0, ones_like(r) * float(gamma))  # how much of G[t+1] reaches G[t], in r's dtype
    T = r.shape[-1]
    span = 1
    while span < T:
        r = r + carry * _shift_left(r, span)
        carry = carry * _shift_left(carry, span)
        span *= 2
    return r.movedim(-1, time_dim)


def reward2go(reward, done, gamma=1.0, *, time_dim=-2):
    """torchrl's name for the discounted return to go; see discounted_cumsum."""
    return discounted_cumsum(reward, done, gamma, time_dim=time_dim)


def _shift_left(x, k):
    """x[..., t + k], zero past the end."""
    tail = zeros(*x.shape[:-1], min(k, x.shape[-1]), dtype=x.dtype, device=x.device)
    return _ops.cat([x[..., k:], tail], -1)
