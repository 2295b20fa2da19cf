"""torchrl 0.14's transforms that choose, stack or drop entries: ``ExcludeTransform``,
``SelectTransform``, ``RemoveEmptySpecs`` and ``Stack``, written against TensorDicts and specs as
torchrl's (``step_protocol.py``, THE RULE).

Where rlpipe differs: an rlpipe env always has its reward, its done flags and one action, so
these transforms never drop them, and ``Stack`` inverts (unstacks) only outside an env.
"""
from .. import primitives
from ..tensordict import TensorDictBase, unravel_key_to_tuple
from .specs import Bounded, Composite
from .step_protocol import ACTION, REWARD, key_list
from .transformed_env import Transform, _key_str
from .transforms_tensors import _tolerant_call

__all__ = ["ExcludeTransform", "RemoveEmptySpecs", "SelectTransform", "Stack"]

_DONE_KEYS = (("done",), ("terminated",), ("truncated",))


def _names(keys):
    return [_key_str(k) for k in keys]


def _spec_keys(spec):
    return {unravel_key_to_tuple(k) for k in spec.keys(True, True)}


# ---- keys --------------------------------------------------------------------------------------------

def _check_not_protocol(keys, owner):
    kept = [k for k in keys if k in _DONE_KEYS or k in (REWARD, ACTION)]
    if kept:
        raise NotImplementedError(f"{owner}: {_names(kept)} cannot be removed: an rlpipe env always has its "
                                  "reward, done flags and action")


class ExcludeTransform(Transform):
    """Removes the ``excluded_keys`` observations (absent ones are ignored). ``inverse=True``: they
    would be removed from an env's input, which on rlpipe holds only the action: nothing to do."""

    def __init__(self, *excluded_keys, inverse=False):
        super().__init__()
        try:
            self.excluded_keys = key_list(list(excluded_keys), "excluded_keys")
        except TypeError:
            raise TypeError("excluded keys must be a list or tuple of strings or tuples of strings.") from None
        _check_not_protocol(self.excluded_keys, "ExcludeTransform")
        self.inverse = bool(inverse)

    def _call(self, next_tensordict):
        return next_tensordict if self.inverse else next_tensordict.exclude(*self.excluded_keys)

    forward = _call

    def _inv_call(self, tensordict):
        return tensordict.exclude(*self.excluded_keys) if self.inverse else tensordict

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        if self.inverse:
            return observation_spec
        keys = _spec_keys(observation_spec)
        for key in self.excluded_keys:
            if key not in keys:
                raise KeyError(f"Key {_key_str(key)!r} not found in the environment outputs "
                               f"{sorted(map(str, keys))}.")
            del observation_spec[key]
        return observation_spec

    def __repr__(self):
        return f"ExcludeTransform(excluded_keys={_names(self.excluded_keys)}, inverse={self.inverse})"


class SelectTransform(Transform):
    """Keeps only the ``selected_keys`` observations (with the reward and the done flags, which an
    rlpipe env always keeps: ``keep_rewards``/``keep_dones`` must stay True)."""

    def __init__(self, *selected_keys, keep_rewards=True, keep_dones=True):
        super().__init__()
        try:
            self.selected_keys = key_list(list(selected_keys), "selected_keys")
        except TypeError:
            raise TypeError("selected keys must be a list or tuple of strings or tuples of strings.") from None
        if not keep_rewards or not keep_dones:
            raise NotImplementedError("SelectTransform: keep_rewards=False/keep_dones=False: an rlpipe env always "
                                      "has its reward and done flags")
        self.keep_reward_keys = self.keep_done_keys = True

    def _call(self, next_tensordict):
        return next_tensordict.select(*self.selected_keys, REWARD, *_DONE_KEYS, strict=False)

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        for key in list(_spec_keys(observation_spec)):
            if key not in self.selected_keys:
                del observation_spec[key]
        return observation_spec

    def __repr__(self):
        return f"SelectTransform(selected_keys={_names(self.selected_keys)})"


def _deepest_first(items):
    return sorted(items, key=lambda kv: len(unravel_key_to_tuple(kv[0])), reverse=True)


class RemoveEmptySpecs(Transform):
    """Removes empty nested entries (TensorDicts with no leaves) from the data and empty
    ``Composite`` specs from the observation spec, deepest first."""

    def _call(self, next_tensordict):
        for key, value in _deepest_first(list(next_tensordict.items(True))):
            if isinstance(value, TensorDictBase) and value.is_empty():
                del next_tensordict[key]
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        for key, spec in _deepest_first(list(observation_spec.items(True))):
            if isinstance(spec, Composite) and spec.is_empty():
                del observation_spec[key]
        return observation_spec


def _stacked_spec(specs, dim):
    """Equal specs stacked along ``dim`` (counted on the stacked shape) into one spec."""
    first = specs[0]
    if any(type(s) is not type(first) or s.shape != first.shape or s.dtype is not first.dtype for s in specs):
        raise NotImplementedError(f"Stack: only specs of one type, shape and dtype can be stacked on rlpipe, got "
                                  f"{[(type(s).__name__, list(s.shape), str(s.dtype)) for s in specs]}")
    if isinstance(first, Bounded):
        low = primitives.stack([s.low for s in specs], dim)
        high = primitives.stack([s.high for s in specs], dim)
        return Bounded(low=low, high=high, shape=low.shape, dtype=first.dtype, device=first.device)
    shape = primitives.stack([s.zero() for s in specs], dim).shape
    return first.unsqueeze(dim)._with(shape=shape)


class Stack(Transform):
    """Stacks the ``in_keys`` entries along a new ``dim`` into ``out_key`` (deleting them, and
    parents they leave empty, with ``del_keys``). ``in_key_inv``/``out_keys_inv``: ``inv`` unbinds
    ``in_key_inv`` along ``dim`` into ``out_keys_inv`` (outside an env: an rlpipe env has one action)."""

    def __init__(self, in_keys, out_key, in_key_inv=None, out_keys_inv=None, dim=-1, allow_positive_dim=False, *,
                 del_keys=True):
        if not allow_positive_dim and dim >= 0:
            raise ValueError("dim should be negative to accommodate for envs of different batch_sizes. If you need "
                             f"dim to be positive, set allow_positive_dim=True (got dim={dim}).")
        if (in_key_inv is None) != (out_keys_inv is None):
            raise ValueError("in_key_inv and out_keys_inv must be given together, got "
                             f"in_key_inv={in_key_inv!r} and out_keys_inv={out_keys_inv!r}")
        super().__init__(in_keys=in_keys, out_keys=[out_key], in_keys_inv=None if in_key_inv is None else [in_key_inv],
                         out_keys_inv=out_keys_inv)
        if self.out_keys[0] in self.in_keys:
            raise ValueError(f"Stack: out_key {_key_str(self.out_keys[0])!r} cannot be in in_keys")
        parents = {key[:level] for key in self.in_keys for level in range(1, len(key))}
        self._maybe_del_parent_keys = sorted(parents, key=len, reverse=True)
        self.dim = int(dim)
        self._del_keys = bool(del_keys)

    def _call(self, next_tensordict):
        found = [next_tensordict.get(k, None) for k in self.in_keys]  # tensors, or TensorDicts stacked whole
        missing = [k for k, value in zip(self.in_keys, found) if value is None]
        if missing and not self._missing_tolerance:
            raise KeyError(f"{self}: {_names(missing)} not found in the tensordict (keys: "
                           f"{sorted(map(str, next_tensordict.keys(True, True)))})")
        values = [value for value in found if value is not None]
        if not values:
            return next_tensordict
        next_tensordict.set(self.out_keys[0], primitives.stack(values, self.dim))
        if self._del_keys:
            next_tensordict.exclude(*self.in_keys, inplace=True)
            for parent in self._maybe_del_parent_keys:
                if parent in {k[:len(parent)] for k in _spec_keys(next_tensordict)}:
                    continue
                if next_tensordict.get(parent, None) is not None:
                    del next_tensordict[parent]
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return _tolerant_call(self, tensordict_reset)

    def _inv_call(self, tensordict):
        stacked = tensordict.get(self.in_keys_inv[0], None) if self.in_keys_inv else None
        if stacked is None:
            return tensordict
        values = stacked.unbind(self.dim)
        for value, key in zip(values, self.out_keys_inv):
            tensordict.set(key, value)
        return tensordict.exclude(self.in_keys_inv[0])

    def transform_observation_spec(self, observation_spec):
        keys = [k for k in self.in_keys if k in _spec_keys(observation_spec)]
        if not keys:
            return observation_spec
        observation_spec[self.out_keys[0]] = _stacked_spec([observation_spec[k] for k in keys], self.dim)
        if self._del_keys:
            for key in keys:
                del observation_spec[key]
            for parent in self._maybe_del_parent_keys:
                if parent in observation_spec.keys(True) and observation_spec[parent].is_empty():
                    del observation_spec[parent]
        return observation_spec

    def transform_action_spec(self, action_spec):
        if self.in_keys_inv:
            raise NotImplementedError("Stack: in_key_inv/out_keys_inv in an env: an rlpipe env has one action")
        return action_spec

    def __repr__(self):
        return f"Stack(in_keys={self.in_keys}, out_key={self.out_keys[0]}, dim={self.dim})"
