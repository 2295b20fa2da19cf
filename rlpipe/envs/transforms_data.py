"""torchrl's data-side transforms for replay buffers and datasets: ``ActionChunkTransform`` (chunked
action targets of VLA policies) and ``NextObservationDelta``'s sample-side reconstruction."""
import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._tensor import host_array
from ..tensordict import unravel_key_to_tuple
from .transformed_env import Transform

__all__ = ["ActionChunkTransform", "NextObservationDelta"]


def _trajectory_ends(done, length):
    """For each step of ``done`` ``[*B, T]`` (bool array), the index of the last step of its trajectory
    inside the window: the first done at or after it, else ``length - 1``."""
    steps = np.where(done, np.arange(length), length - 1)
    return np.minimum.accumulate(steps[..., ::-1], axis=-1)[..., ::-1]


class ActionChunkTransform(Transform):
    """Builds chunked action targets: for each step ``t`` of an action ``[*B, T, action_dim]``, the next
    ``chunk_size`` actions ``a[t..t+H-1]`` at ``chunk_key`` (``[*B, T, H, action_dim]``), repeating the
    last action of the trajectory past its end, with those slots True in ``pad_key`` (``[*B, T, H]``).
    A ``("next", done_key)`` entry (``[*B, T]`` or ``[*B, T, 1]``) cuts the chunks at trajectory
    boundaries inside the window (``done_key=None``: ignored). A pure data transform, as torchrl's: in
    an env it changes nothing."""

    def __init__(self, chunk_size, *, action_key="action", chunk_key=("vla_action", "chunk"),
                 pad_key="action_is_pad", time_dim=-2, done_key="done"):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}.")
        super().__init__()
        self.chunk_size = int(chunk_size)
        self.time_dim = int(time_dim)
        self.action_key = action_key
        self.chunk_key = chunk_key
        self.pad_key = pad_key
        self.done_key = done_key

    def _done(self, tensordict, action, dim):
        """The done state as a ``[*B, T]`` bool array, or None when there is none to follow."""
        if self.done_key is None:
            return None
        done = tensordict.get(("next",) + unravel_key_to_tuple(self.done_key), None)
        if done is None:
            return None
        lead = tuple(action.shape[:dim + 1])
        if tuple(done.shape) not in (lead, lead + (1,)):
            raise ValueError(f"{type(self).__name__}: the ('next', {self.done_key!r}) entry of shape "
                             f"{tuple(done.shape)} does not line up with the action of shape {tuple(action.shape)}: "
                             f"expected {lead + (1,)} or {lead}. Pass done_key=None to chunk without "
                             "trajectory-boundary information.")
        return host_array(done).reshape(lead).astype(bool)

    def forward(self, tensordict):
        """Writes ``chunk_key`` and ``pad_key`` into ``tensordict`` from its ``action_key`` entry."""
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise KeyError(f"{type(self).__name__}: '{self.action_key}' not found in tensordict {tensordict}.")
        dim = self.time_dim if self.time_dim >= 0 else action.dim() + self.time_dim
        if dim != action.dim() - 2 or dim < 0:
            raise ValueError(f"{type(self).__name__} expects the action dimension to immediately follow the time "
                             f"dimension (action shaped [..., T, action_dim]); got action.shape="
                             f"{tuple(action.shape)} with time_dim={self.time_dim}.")
        length = action.shape[dim]
        lead = tuple(action.shape[:dim + 1])
        done = self._done(tensordict, action, dim)
        ends = _trajectory_ends(done, length) if done is not None else np.full(lead, length - 1)
        wanted = np.arange(length)[:, None] + np.arange(self.chunk_size)  # [T, H]: t + h
        index = np.minimum(wanted, ends[..., None])  # [*B, T, H]
        flat_index = index.reshape(*lead[:-1], length * self.chunk_size, 1)
        flat_index = np.broadcast_to(flat_index, flat_index.shape[:-1] + (action.shape[-1],))
        gathered = action.gather(dim, as_tensor(np.ascontiguousarray(flat_index), dtype=_dtypes.int64,
                                                device=action.device))
        tensordict.set(self.chunk_key, gathered.reshape(*lead, self.chunk_size, action.shape[-1]))
        tensordict.set(self.pad_key, as_tensor(wanted > ends[..., None], device=action.device))
        return tensordict


class NextObservationDelta(Transform):
    """Stores the next observations as low-precision deltas, as torchrl 0.14's (both sides).

    In an env: the steps it stores (``rollout``, ``step_and_maybe_reset``, the collectors' batches)
    hold ``("next", "delta", k) = (next_k - k).to(delta_dtype)`` instead of ``("next", k)``, for each
    of ``in_keys`` (by default every floating observation of the env whose dtype is not in
    ``excluded_dtypes``); ``step`` keeps ``("next", k)`` beside the delta, and the policy always sees
    full-precision observations. The specs are unchanged (the delta is not an observation).
    On a replay buffer (``transform=...``, ``in_keys`` given): rebuilds ``("next", k) = k + delta``
    in the root entry's dtype (``restore_dtype="root"``) or ``restore_dtype``; ``drop_delta`` removes
    the delta. Keys missing either side are skipped. Lossy: the delta has ``delta_dtype``'s precision.
    """

    _rewrites_stored_steps = True  # TransformedEnv and the collectors call _stepped and _stored_step

    def __init__(self, in_keys=None, *, delta_dtype=_dtypes.float16, restore_dtype="root", drop_delta=True,
                 excluded_dtypes=(_dtypes.uint8, _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64,
                                  _dtypes.bool)):
        if not delta_dtype.is_floating_point:
            raise ValueError(f"delta_dtype must be a floating-point dtype, got {delta_dtype}.")
        if not (isinstance(restore_dtype, str) and restore_dtype == "root") and not (
                isinstance(restore_dtype, _dtypes.dtype) and restore_dtype.is_floating_point):
            raise ValueError(f"restore_dtype must be a floating-point dtype or 'root', got {restore_dtype!r}.")
        if isinstance(in_keys, (str, tuple)):
            in_keys = [in_keys]
        self._auto_keys = in_keys is None  # the env's floating observations, picked from its spec
        super().__init__(in_keys=in_keys or [])
        self.delta_dtype = delta_dtype
        self.restore_dtype = restore_dtype
        self.drop_delta = drop_delta
        self.excluded_dtypes = tuple(excluded_dtypes)

    def forward(self, tensordict):
        """Writes each reconstructable ``("next", k)`` into ``tensordict`` and returns it."""
        for key in self.in_keys:
            key = unravel_key_to_tuple(key)
            delta_key = ("next", "delta") + key
            obs, delta = tensordict.get(key, None), tensordict.get(delta_key, None)
            if obs is None or delta is None:
                continue
            dtype = obs.dtype if isinstance(self.restore_dtype, str) else self.restore_dtype
            tensordict.set(("next",) + key, obs.to(dtype) + delta.to(dtype))
            if self.drop_delta:
                del tensordict[delta_key]
        return tensordict

    def transform_observation_spec(self, observation_spec):
        """The env's observation spec, unchanged; without ``in_keys``, picks its floating leaves."""
        if self._auto_keys:
            self.in_keys = [key for key, spec in observation_spec.items(True, True)
                            if spec.dtype.is_floating_point and spec.dtype not in self.excluded_dtypes]
        return observation_spec

    def _call(self, next_tensordict):
        """Nothing per step in an env: the policy sees the full observations (the deltas are written
        into the steps handed out, by ``_stepped``/``_stored_step``)."""
        return next_tensordict

    def _stepped(self, tensordict):
        """Adds ``("next", "delta", k)`` to a stepped TensorDict (any batch shape) for each key it holds
        on both sides; returns it."""
        for key in map(unravel_key_to_tuple, self.in_keys):
            obs, next_obs = tensordict.get(key, None), tensordict.get(("next",) + key, None)
            if obs is not None and next_obs is not None:
                tensordict.set(("next", "delta") + key, (next_obs - obs).to(self.delta_dtype))
        return tensordict

    def _stored_step(self, tensordict):
        """A stepped TensorDict as it is stored: the deltas written, the full ``("next", k)`` dropped."""
        self._stepped(tensordict)
        for key in map(unravel_key_to_tuple, self.in_keys):
            if tensordict.get(("next",) + key, None) is not None:
                del tensordict[("next",) + key]
        return tensordict

    def __repr__(self):
        keys = [key[0] if len(key) == 1 else key for key in map(unravel_key_to_tuple, self.in_keys)]
        return f"{type(self).__name__}(in_keys={keys}, delta_dtype={self.delta_dtype})"
