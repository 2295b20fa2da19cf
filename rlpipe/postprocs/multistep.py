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

Everything is computed on the backend's arrays (NumPy or CuPy, wherever the TensorDict lives),
with no loop over batch or time, and each result is wrapped as a tensor once. The windows depend
only on where they stop: their plan (lengths, rows to shift, gather indices) is kept per done
pattern for small batches, so a collector's postproc costs about twenty array calls whatever n.
On a GPU the window lengths and discounted sums are one fused kernel launch per reward key.
"""
import collections
import functools
import math
import numbers

import numpy as np

from .. import _dtypes, kernels, primitives as _ops
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
    """m[t] = min(n, T - t, 1 + first_done - t) for done/valid tensors of shape [..., T], where
    first_done is the first done at or after t and the batch ends early at the first invalid step
    after t; 1 on invalid steps themselves (their windows are never used)."""
    xp = done.device._backend.xp
    return wrap(xp.array(_plan_of(xp, _ends(done._data, valid._data), n, 1.0).m), done.device)


def windowed_discounted_sum(reward, m, gamma, n):
    """sum_{k < m[t]} gamma**k * reward[..., t + k] (tensors of shape [..., T])."""
    xp = reward.device._backend.xp
    return wrap(_sum_in_passes(xp, _float_reward(reward._data), m._data, gamma, n), reward.device)


def n_step_returns(done, valid, reward, gamma, n):
    """``(m, windowed_discounted_sum(reward, m, gamma, n))`` with ``m = window_lengths(done, valid, n)``,
    for [..., T] tensors of one shape."""
    m, total = _n_step_returns(done.device._backend, done._data, valid._data, reward._data, gamma, n)
    return wrap(m, done.device), wrap(total, done.device)


# ---- the math, on backend arrays (NumPy or CuPy: ``xp`` is the backend's namespace) --------------
# The windows depend only on where they stop: their lengths m, the rows of their last steps and,
# for small batches, the flat indices of their steps form a plan, kept per done pattern (a
# collector's postproc meets the same few patterns again and again). A small batch's sum is then
# one gather of the rewards, one product and one sum over k: a few array calls whatever n. A large
# batch's sum takes n passes over the rewards instead (no [n, *B, T] temporaries); both add the
# same terms in the same order, so they agree bit for bit.

def _ends(done, valid):
    """Where windows stop ([*B, T] bool): at a done step, and, with a ``valid`` mask, at an invalid
    step (its own window is one step) and just before one (the batch ends early there)."""
    if valid is None:
        return done
    ends = done | ~valid
    ends[..., :-1] |= ~valid[..., 1:]
    return ends


@functools.lru_cache(maxsize=64)
def _gather_tables(shape, n):
    """``(ks, steps)`` for windows of n steps over a [*B, T] array seen flat (read-only): ``ks`` the
    column k = 0..n-1, ``steps[..., k, t]`` the flat index of step t + k. Only small batches gather."""
    T = shape[-1]
    ks = np.arange(n)[:, None]
    rows = shape[:-1]
    starts = (np.arange(math.prod(rows)) * T).reshape(rows + (1, 1))  # each row's first flat index
    steps = starts + ks + np.arange(T)
    ks.flags.writeable = steps.flags.writeable = False
    return ks, steps


@functools.lru_cache(maxsize=256)
def _full_windows(T, n):
    """min(n, T - t) for t < T (the windows only the batch's end cuts), as a read-only NumPy array."""
    row = np.minimum(np.arange(T, 0, -1, dtype=np.int64), n)
    row.flags.writeable = False
    return row


_Plan = collections.namedtuple("_Plan", "m rows gammas gather")


def _plan(xp, ends, n, gamma, gather):
    """For stops ``ends``: the windows' lengths ``m``, the flat ``rows`` of their last steps
    (``t + m[t] - 1``: one gather of whole rows per "next" entry), ``gammas`` (``gamma ** m``) and,
    if ``gather``, their gather indices (else None)."""
    T = ends.shape[-1]
    m = xp.empty(ends.shape, dtype=xp.int64)
    m[...] = xp.asarray(_full_windows(T, n))
    for k in reversed(range(n)):  # downward, so the smallest k that ends the window is written last
        m[..., :T - k][ends[..., k:]] = k + 1
    return _Plan(m, _last_rows(xp, m), _gammas(xp, m, gamma, n), _gather_index(m, n) if gather else None)


def _gammas(xp, m, gamma, n):
    """``float32(gamma ** m)`` for the window lengths ``m``."""
    return xp.asarray(_gamma_table(gamma, n)).take(m)


def _last_rows(xp, m):
    """``t + m[t] - 1`` for every step t of the [*B, T] windows ``m``, t counted flat."""
    return (xp.arange(-1, m.size - 1, dtype=xp.int64).reshape(m.shape) + m).reshape(-1)


def _gather_index(m, n):
    """[*B, n, T] flat indices into the [*B, T] values seen flat with one 0 appended: step t + k
    where k < m[t], else that 0 (at index ``m.size``). NumPy only (small batches)."""
    ks, steps = _gather_tables(m.shape, n)
    return np.where(ks < m[..., None, :], steps, m.size)


@functools.lru_cache(maxsize=512)
def _cached_plan(shape, n, gamma, ends_bytes):
    plan = _plan(np, np.frombuffer(ends_bytes, dtype=bool).reshape(shape), n, gamma, gather=True)
    for array in plan:
        array.flags.writeable = False  # shared by every batch with these stops
    return plan


def _plan_of(xp, ends, n, gamma):
    """The plan for the stops ``ends``: kept when the batch is small and on the host, else built
    anew, without gather indices."""
    if xp is np and n * ends.size <= 1024:
        return _cached_plan(ends.shape, n, gamma, ends.tobytes())
    return _plan(xp, ends, n, gamma, gather=False)


def _is_float(array):
    return array.dtype.kind == "f" or array.dtype == _dtypes.bfloat16.np


def _float_reward(reward):
    """An integer or bool reward summed as torch would: in the default float dtype."""
    return reward if _is_float(reward) else reward.astype(_dtypes.get_default_dtype().np)


def _discounted_sum(xp, reward, plan, gamma, n):
    """``sum_{k < m[t]} gamma**k * reward[..., t + k]`` for the windows of ``plan``: term by term in
    k's order from 0, each product and partial sum rounded to the reward's dtype (as the fused
    kernel does), through the plan's gather indices where it has them (a sum over an outer axis
    adds whole rows one after the other), else in n passes."""
    if plan.gather is None:
        return _sum_in_passes(xp, reward, plan.m, gamma, n)
    flat = xp.concatenate((reward.reshape(-1), _zero(reward.dtype) if xp is np else xp.zeros(1, dtype=reward.dtype)))
    terms = flat.take(plan.gather)
    terms *= xp.asarray(_discounts(gamma, n, reward.shape[-1], reward.dtype))
    return xp.add.reduce(terms, axis=-2) if xp is np else terms.sum(axis=-2)


def _sum_in_passes(xp, reward, m, gamma, n):
    """``_discounted_sum`` as n passes over ``reward``: ``total[t] += gamma**k * reward[t + k]``
    where ``k < m[t]``, from ``total = reward + 0`` (``0 + 1 * r`` is exactly ``r + 0``)."""
    total = reward + reward.dtype.type(0)
    T = reward.shape[-1]
    for k, discount in enumerate(_discounts(gamma, n, 1, reward.dtype)[1:, 0], 1):
        term = reward[..., k:] * discount
        term[m[..., :T - k] <= k] = 0  # beyond the window
        total[..., :T - k] += term
    return total


@functools.lru_cache(maxsize=16)
def _zero(dtype):
    """A read-only NumPy array [0] of ``dtype`` (the value gathered outside the windows)."""
    zero = np.zeros(1, dtype=dtype)
    zero.flags.writeable = False
    return zero


@functools.lru_cache(maxsize=256)
def _discounts(gamma, n, T, dtype):
    """[n, T]: ``gamma ** k`` in row k (a Python float rounded to ``dtype``), read-only."""
    rows = np.repeat(np.array([gamma ** k for k in range(n)], dtype=dtype)[:, None], T, axis=1)
    rows.flags.writeable = False
    return rows


@functools.lru_cache(maxsize=256)
def _gamma_table(gamma, n):
    """float32(gamma ** m) for m = 0..n, as a read-only NumPy array. gamma is a Python float:
    raising it in float64 and rounding once gives float32(gamma ** m) on every backend; a float32
    power would round gamma itself first and be an ulp or more off for most m."""
    table = np.power(gamma, np.arange(n + 1, dtype=np.float64)).astype(np.float32)
    table.flags.writeable = False
    return table


def _n_step_returns(backend, done, valid, reward, gamma, n):
    """(m, discounted sums) for [..., T] arrays of one shape."""
    m, _, _, (total,) = _n_step(backend, done, valid, [reward], gamma, n)
    return m, total


def _n_step(backend, done, valid, rewards, gamma, n):
    """``(m, rows, gammas, sums)`` for [*B, T] arrays: the windows' lengths, the flat rows of their
    last steps, ``gamma ** m`` and each reward's discounted sums (m and gammas new arrays). From the
    backend's one-launch kernel where it has one (cuda) for every reward, else from the plan's gathers."""
    xp = backend.xp
    fused = kernels.get("n_step_returns", backend)
    if fused is None or not rewards or not all(_is_float(reward) and reward.size for reward in rewards):
        plan = _plan_of(xp, _ends(done, valid), n, gamma)
        sums = [_discounted_sum(xp, _float_reward(reward), plan, gamma, n) for reward in rewards]
        return xp.array(plan.m), plan.rows, xp.array(plan.gammas), sums
    if valid is None:
        valid = xp.ones(done.shape, dtype=bool)
    flat = (-1, done.shape[-1])
    sums = []
    for reward in rewards:
        m, total = fused(done.reshape(flat), valid.reshape(flat), reward.reshape(flat), gamma, n)
        sums.append(total.reshape(done.shape))
    m = m.reshape(done.shape)
    return m, _last_rows(xp, m), _gammas(xp, m, gamma, n), sums


class MultiStep(Module):
    """Rewrites a ``[*B, T]`` TensorDict with n-step returns (see the module docstring).

    ``MultiStep(gamma, n_steps)`` returns a new TensorDict, as torchrl's does: the input keeps its
    entries (the output shares the tensors it does not rewrite; ``n_steps=0`` returns the input
    itself). On bad input it raises before changing anything. ``streaming=True`` keeps the last ``n_steps - 1`` frames
    of every batch and completes their windows with the next batch (``flush()`` emits the rest):
    each frame comes out exactly once with its exact return, ``n_steps - 1`` frames late.

    ``allow_repeated`` (rlpipe only; torchrl has no such check): data that already holds a
    ``"steps_to_next_obs"`` entry was n-stepped before (say by a collector's ``postproc=MultiStep``
    and then a replay buffer's ``transform=MultiStep``). Stepping it again compounds the windows
    silently, so by default it raises a ``ValueError``; ``allow_repeated=True`` applies it anyway.
    """

    def __init__(self, gamma, n_steps, *, reward_keys=(("next", "reward"),), done_key=("next", "done"),
                 terminated_key=("next", "terminated"), mask_key=("collector", "mask"), streaming=False,
                 allow_repeated=False):
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
        self.allow_repeated = allow_repeated
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
        if not self.allow_repeated:
            self._refuse_n_stepped(tensordict)
        if self.streaming:
            return self._stream(tensordict)
        # a new TensorDict, as torchrl's: the input keeps its entries (the copy shares their tensors)
        return self._transform(tensordict.clone(recurse=False))

    def _refuse_n_stepped(self, td):
        """Raises when ``td`` holds a previous MultiStep's output (its ``"steps_to_next_obs"`` entry)."""
        previous = td.get("steps_to_next_obs", None)
        if previous is not None:
            raise ValueError(
                f"MultiStep(n_steps={self.n_steps}): the input already has a 'steps_to_next_obs' entry (shape "
                f"{list(previous.shape)}), a MultiStep output: it was n-stepped before, for example by a collector's "
                "postproc=MultiStep feeding a replay buffer with transform=MultiStep. Applying n-step again would "
                "compound the windows (the next observation and the discounted reward would reach over both "
                "windows). Keep only one MultiStep, or pass MultiStep(..., allow_repeated=True) to apply it again "
                "on purpose")

    def _transform(self, td):
        """Transforms ``td`` (a TensorDict with a time dimension, as forward checked; a copy of the
        caller's) in place."""
        if self.n_steps == 0:
            return td
        done = _lookup(td, self.done_key)  # KeyError naming the key when missing
        rewards = [_lookup(td, key) for key in self.reward_keys]
        work, restore = self._time_last(td, done)
        if work is not td:
            done, rewards = work[self.done_key], [work[key] for key in self.reward_keys]
        for parent, key, value in self._compute(work, done, rewards):  # nothing was written before this point
            parent.set(key, value)
        if restore is not None:
            td.update(restore(work))
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

    def _compute(self, td, done, rewards):
        """Every new value, as ``(parent TensorDict, key, tensor)`` writes into ``td`` (whose ``done``
        and reward entries are given), computed without touching it: on the backend's arrays, each
        result wrapped once."""
        batch = tuple(td.batch_size)
        n = min(self.n_steps, batch[-1])  # no window is longer than the batch: the same result
        device = done.device
        done = _bool(self._as_batch_shaped(done._data, batch, self.done_key))
        mask = _lookup(td, self.mask_key, None)
        valid = None if mask is None else _bool(self._as_batch_shaped(mask._data, batch, self.mask_key))
        arrays = [self._as_batch_shaped(reward._data, batch, key) for key, reward in zip(self.reward_keys, rewards)]
        m, rows, gammas, sums = _n_step(device._backend, done, valid, arrays, self.gamma, n)
        writes, written = [], []
        for key, reward, summed in zip(self.reward_keys, rewards, sums):
            parent, original = _lookup(td, key[:-1]), "original_" + key[-1]
            writes += [(parent, key[-1], wrap(summed.reshape(reward._data.shape), device)), (parent, original, reward)]
            written += [key, key[:-1] + (original,)]
        shifted = {}  # every other "next" entry, from the last step of each window
        for key, parent, value in _leaves(td["next"], ("next",)):
            if key not in written:
                data = value._data
                if len(batch) > 1:  # whole rows of the [B*T, ...] view
                    data = data.reshape((-1,) + data.shape[len(batch):]).take(rows, 0).reshape(data.shape)
                else:
                    data = data.take(rows, 0)
                shifted[key] = wrap(data, device)
                writes.append((parent, key[-1], shifted[key]))
        terminal = shifted.get(self.terminated_key, shifted.get(self.done_key))
        nonterminal = ~_bool(self._as_batch_shaped(terminal._data, batch, self.terminated_key))
        if valid is not None:
            nonterminal &= valid
        return writes + [(td, "gamma", wrap(gammas, device)), (td, "steps_to_next_obs", wrap(m, device)),
                         (td, "nonterminal", wrap(nonterminal, device))]

    @staticmethod
    def _as_batch_shaped(value, batch, key):
        """The array ``value`` with the batch shape: as it is, or without a trailing 1."""
        shape = value.shape
        if shape == batch:
            return value
        if shape[:-1] == batch and shape[-1] == 1:
            return value.reshape(batch)
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


def _lookup(td, key, *default):
    """``td.get(key, *default)`` for a tuple key, walked one plain key at a time (``get``'s fast path)."""
    node = td
    for part in key:
        node = node.get(part, None) if isinstance(node, TensorDict) else None
        if node is None:
            return default[0] if default else td[key]  # the default, or the KeyError naming the key
    return node


def _leaves(td, prefix):
    """(key tuple, parent TensorDict, tensor) of every leaf under ``td``, whose own key is ``prefix``."""
    for key, value in td.items():
        if isinstance(value, TensorDict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), td, value


def _bool(array):
    return array if array.dtype == bool else array.astype(bool)
