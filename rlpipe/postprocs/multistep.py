"""``MultiStep``: n-step returns over a TensorDict whose last batch dimension is time.

For a window of at most ``n`` steps starting at ``t`` that stops after a done and at the end of
the batch (or of the valid steps, with a ``("collector", "mask")``):

- ``m[t]`` (``steps_to_next_obs``) is the window's length;
- ``("next", "reward")[t]`` becomes ``sum_{k < m[t]} gamma**k * r[t + k]``, the old value kept as
  ``("next", "original_reward")``; ``gamma[t]`` is ``gamma ** m[t]``;
- every other ``"next"`` entry at ``t`` is taken from step ``t + m[t] - 1``, the done entries
  included (torchrl 0.14 leaves those unshifted);
- ``nonterminal[t]`` is ``not ("next", "terminated")[t]`` after the shift (``done`` without a
  ``terminated`` entry), so ``r + gamma * nonterminal * V(next_obs)`` is the n-step target. Unlike
  torchrl, the last step of a batch is not marked terminal.

Everything is computed with tensor ops in ``min(n, T)`` vectorized passes (no loop over batch or
time), on whatever device the TensorDict lives; on a GPU the window lengths and discounted sums are
one fused kernel launch per reward key.
"""
import numbers

from .. import _ops
from .._creation import arange, full, ones, zeros
from .. import _dtypes
from .._tensor import wrap
from ..nn import Module
from ..tensordict import TensorDict, unravel_key_to_tuple

__all__ = ["MultiStep"]


def _check_arguments(gamma, n_steps):
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral):
        raise TypeError(f"MultiStep: n_steps must be an int, got {type(n_steps).__name__} ({n_steps!r})")
    if n_steps < 0:
        raise ValueError(f"MultiStep: n_steps must be a non-negative integer, got n_steps={n_steps}")
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 < gamma <= 1:
        raise ValueError(f"MultiStep: gamma must be in (0, 1], got gamma={gamma!r}")


def window_lengths(done, valid, n):
    """m[t] = min(n, T - t, 1 + first_done - t) for done/valid of shape [..., T], where first_done is
    the first done at or after t and the batch ends early at the first invalid step after t; 1 on
    invalid steps themselves (their windows are never used)."""
    T = done.shape[-1]
    batch = tuple(done.shape[:-1])
    done_padded = _ops.cat([done, zeros(*batch, n, dtype=_dtypes.bool, device=done.device)], -1)
    invalid_padded = _ops.cat([valid.logical_not(), ones(*batch, n, dtype=_dtypes.bool, device=done.device)], -1)
    # last[j]: a window that reaches step j ends there (j is done, or j + 1 is invalid or past the batch)
    last = done_padded[..., :-1] | invalid_padded[..., 1:]
    m = full(tuple(done.shape), n, dtype=_dtypes.int64, device=done.device)
    for k in reversed(range(n)):  # downward, so the smallest k that ends the window is written last
        m = _ops.where(last[..., k:k + T], k + 1, m)
    return _ops.where(valid, m, 1)


def windowed_discounted_sum(reward, m, gamma, n):
    """sum_{k < m[t]} gamma**k * reward[..., t + k], in ``n`` passes."""
    T = reward.shape[-1]
    padded = _ops.cat([reward, zeros(*reward.shape[:-1], n, dtype=reward.dtype, device=reward.device)], -1)
    total = zeros(tuple(reward.shape), dtype=reward.dtype, device=reward.device)
    for k in range(n):
        total = total + _ops.where(m > k, padded[..., k:k + T] * float(gamma ** k), 0.0)
    return total


def n_step_returns(done, valid, reward, gamma, n):
    """``(m, windowed_discounted_sum(reward, m, gamma, n))`` with ``m = window_lengths(done, valid, n)``,
    for [..., T] tensors of one shape."""
    fused = done.device._backend.fused.get("n_step_returns")  # a one-launch kernel where a backend has one (cuda)
    if fused is None or not reward.is_floating_point() or reward.numel() == 0:
        m = window_lengths(done, valid, n)
        return m, windowed_discounted_sum(reward, m, gamma, n)
    rows = (-1, reward.shape[-1])
    m, total = fused(done._data.reshape(rows), valid._data.reshape(rows), reward._data.reshape(rows), gamma, n)
    shape = tuple(reward.shape)
    return wrap(m.reshape(shape), reward.device), wrap(total.reshape(shape), reward.device)


class MultiStep(Module):
    """Rewrites a ``[*B, T]`` TensorDict with n-step returns (see the module docstring).

    ``MultiStep(gamma, n_steps)`` returns the input TensorDict, transformed in place; on bad input
    it raises before changing anything. ``streaming=True`` keeps the last ``n_steps - 1`` frames
    of every batch and completes their windows with the next batch (``flush()`` emits the rest):
    each frame comes out exactly once with its exact return, ``n_steps - 1`` frames late.
    """

    def __init__(self, gamma, n_steps, *, reward_keys=(("next", "reward"),), done_key=("next", "done"),
                 terminated_key=("next", "terminated"), mask_key=("collector", "mask"), streaming=False):
        super().__init__()
        _check_arguments(gamma, n_steps)
        self.gamma = float(gamma)
        self.n_steps = int(n_steps)
        one_key = isinstance(reward_keys, str) or isinstance(reward_keys, tuple) and all(
            isinstance(k, str) for k in reward_keys)  # ("next", "reward") is one nested key
        self.reward_keys = [unravel_key_to_tuple(k) for k in ([reward_keys] if one_key else reward_keys)]
        self.done_key = unravel_key_to_tuple(done_key)
        self.terminated_key = unravel_key_to_tuple(terminated_key)
        self.mask_key = unravel_key_to_tuple(mask_key)
        self.streaming = streaming
        self._tail = None

    def extra_repr(self):
        return f"gamma={self.gamma}, n_steps={self.n_steps}" + (", streaming=True" if self.streaming else "")

    # ---- batch transform ------------------------------------------------------------------------
    def forward(self, tensordict):
        if not isinstance(tensordict, TensorDict):
            raise TypeError(f"MultiStep expects a TensorDict, got {type(tensordict).__name__}")
        if self.n_steps == 0 and not self.streaming:
            return tensordict  # unchanged, whatever its batch size
        if tensordict.batch_dims == 0:
            raise ValueError("MultiStep needs a TensorDict with a time dimension (batch_size [*B, T]), got "
                             f"batch_size={list(tensordict.batch_size)}")
        if self.streaming:
            return self._stream(tensordict)
        return self._transform(tensordict)

    def _transform(self, td):
        """Transforms ``td`` (a TensorDict with a time dimension, as forward checked) in place."""
        if self.n_steps == 0:
            return td
        done = td.get(self.done_key)  # KeyError naming the key when missing
        for key in self.reward_keys:
            td.get(key)
        work, restore = self._time_last(td, done)
        updates = self._compute(work)
        for key, value in updates.items():  # nothing was written before this point
            work.set(key, value)
        if restore is not None:
            td.update(restore(work))
        elif work is not td:
            td.update(work)
        return td

    def _time_last(self, td, done):
        """The TensorDict to compute on, with done of the batch shape and time last; and how to map
        results back (None when td itself is that TensorDict)."""
        shape = tuple(td.batch_size)
        dshape = tuple(done.shape)
        if dshape == shape or dshape == shape + (1,):
            return td, None
        if len(dshape) > len(shape) + 1 and dshape[-1] == 1:  # [*B, T, A, 1]: the trailing 1 is a feature dim
            dshape = dshape[:-1]
        if dshape[:len(shape)] != shape:
            raise ValueError(f"MultiStep: the done entry {self.done_key} has shape {list(dshape)}, incompatible with "
                             f"the TensorDict's batch_size {list(shape)}")
        # multi-dimensional done (several agents): the batch follows the done shape, time moved last
        work = td.copy()
        mask = work.pop(self.mask_key, None)  # a [*B, T] collector mask covers every agent
        try:
            work.batch_size = dshape
        except RuntimeError as e:
            raise ValueError(f"MultiStep: every entry must follow the done shape {list(dshape)} ({e})") from None
        if mask is not None:
            per_agent = mask.reshape(shape + (1,) * (len(dshape) - len(shape))).expand(dshape)
            work.set(self.mask_key, per_agent)
        time = len(shape) - 1
        order = [d for d in range(len(dshape)) if d != time] + [time]
        inverse = [order.index(d) for d in range(len(dshape))]
        permuted = work.permute(order)

        def restore(result):
            back = result.permute(inverse)
            if mask is not None:  # the input's own [*B, T] mask stays as it was
                back = back.exclude(self.mask_key)
            back.batch_size = shape
            return back
        return permuted, restore

    def _compute(self, td):
        """Every new value, computed without touching ``td``."""
        batch = tuple(td.batch_size)
        n = min(self.n_steps, batch[-1])  # no window is longer than the batch: the same result, in at most T passes
        done = self._as_batch_shaped(td.get(self.done_key), batch, self.done_key).bool()
        mask = td.get(self.mask_key, None)
        valid = ones(batch, dtype=_dtypes.bool, device=done.device) if mask is None else \
            self._as_batch_shaped(mask, batch, self.mask_key).bool()
        m = None
        updates = {}
        for key in self.reward_keys:
            reward = td.get(key)
            m, summed = n_step_returns(done, valid, self._as_batch_shaped(reward, batch, key), self.gamma, n)
            updates[key[:-1] + ("original_" + key[-1],)] = reward
            updates[key] = summed.reshape(tuple(reward.shape))
        if m is None:  # no reward keys: the windows still shift the "next" entries
            m = window_lengths(done, valid, n)
        last = arange(batch[-1], device=done.device) + m - 1  # the step whose "next" entries are kept
        rows = _flat_rows(last)
        untouched = set(self.reward_keys) | {k[:-1] + ("original_" + k[-1],) for k in self.reward_keys}
        next_td = td.get("next")
        for key in next_td.keys(include_nested=True, leaves_only=True):
            full_key = ("next",) + unravel_key_to_tuple(key)
            if full_key in untouched:
                continue
            value = next_td.get(key)
            features = tuple(value.shape[len(batch):])
            updates[full_key] = value.reshape((-1,) + features)[rows].reshape(tuple(value.shape))
        terminal = updates.get(self.terminated_key, updates.get(self.done_key))
        nonterminal = self._as_batch_shaped(terminal, batch, self.terminated_key).bool().logical_not() & valid
        # gamma is a Python float: raising it in float64 and rounding once gives float32(gamma ** m) on every
        # backend; a float32 power would round gamma itself first and be an ulp or more off for most m
        updates["gamma"] = (_ops.pow(self.gamma, m.to(_dtypes.float64))).to(_dtypes.float32)
        updates["steps_to_next_obs"] = m
        updates["nonterminal"] = nonterminal
        return updates

    @staticmethod
    def _as_batch_shaped(value, batch, key):
        shape = tuple(value.shape)
        if shape == batch:
            return value
        if shape == batch + (1,):
            return value.squeeze(-1)
        raise ValueError(f"MultiStep: the entry {key} has shape {list(shape)}; expected the batch shape "
                         f"{list(batch)}, possibly with a trailing 1")

    # ---- streaming ----------------------------------------------------------------------------------
    def _stream(self, td):
        """Holds back the last n - 1 frames and emits the rest with exact windows."""
        keep = max(self.n_steps - 1, 0)
        if self._tail is not None:
            if self._tail.batch_size[:-1] != td.batch_size[:-1]:
                raise ValueError(f"MultiStep(streaming=True): batch {list(td.batch_size)} does not continue the "
                                 f"previous one {list(self._tail.batch_size)} (environment dims differ)")
            td = _ops.cat([self._tail, td], td.batch_dims - 1)
        T = td.batch_size[-1]
        ready = T - keep if T > keep else 0
        time = td.batch_dims - 1
        index = (slice(None),) * time
        out = self._transform(td.clone())  # first: a batch it rejects leaves the stream as it was
        self._tail = td[index + (slice(ready, T),)].clone()
        return out[index + (slice(0, ready),)]

    def flush(self):
        """The frames still held back, transformed as the end of their trajectories; resets the stream."""
        if self._tail is None:
            return None
        tail, self._tail = self._tail, None
        return self._transform(tail)

    def reset(self):
        """Forgets the held-back frames (for example when the environments are reset)."""
        self._tail = None


def _flat_rows(last):
    """Row numbers, in the [B*T, ...] view of a [*B, T, ...] entry, of the steps ``last`` picks: one
    gather of whole rows per entry (much faster than gathering element by element)."""
    T = last.shape[-1]
    if T == 0:
        return last.reshape(-1)
    offsets = arange(last.numel() // T, device=last.device).reshape(-1, 1) * T
    return (last.reshape(-1, T) + offsets).reshape(-1)
