"""Exploration modules (torchrl.modules.tensordict_module.exploration): ``EGreedyModule``."""
import warnings

from ... import primitives as _ops
from ..._creation import as_tensor
from ...random import rand
from ..._dtypes import float32
from ...envs.specs import Composite
from ...nn import Module
from ...tensordict.nn.probabilistic import InteractionType, interaction_type

__all__ = ["EGreedyModule"]


class EGreedyModule(Module):
    """Epsilon-greedy exploration: with probability ``eps`` the ``action_key`` entry is replaced by a random
    action from ``spec`` (per batch element). ``eps`` starts at ``eps_init`` and falls linearly to
    ``eps_end`` over ``annealing_num_steps`` calls of ``step(frames)`` (each call counts ``frames`` steps).

    It explores when the exploration type is ``RANDOM`` or unset, and leaves the action alone under
    ``MODE``, ``MEAN``, ``MEDIAN`` or ``DETERMINISTIC``. ``eps`` is a buffer (in ``state_dict``).
    """

    def __init__(self, spec, eps_init=1.0, eps_end=0.1, annealing_num_steps=1000, *, action_key="action",
                 action_mask_key=None, device=None):
        if not isinstance(eps_init, float):
            warnings.warn("eps_init should be a float.", stacklevel=2)
        if eps_end > eps_init:
            raise RuntimeError("eps should decrease over time or be constant")
        super().__init__()
        self.action_key = action_key
        self.action_mask_key = action_mask_key
        self.in_keys = [action_key] + ([action_mask_key] if action_mask_key is not None else [])
        self.out_keys = [action_key]
        self.register_buffer("eps_init", as_tensor(eps_init, device=device))
        self.register_buffer("eps_end", as_tensor(eps_end, device=device))
        self.annealing_num_steps = annealing_num_steps
        self.register_buffer("eps", as_tensor(eps_init, dtype=float32, device=device))
        if spec is not None:
            if not isinstance(spec, Composite):
                spec = Composite({action_key: spec}, shape=spec.shape[:-1])
            if device is not None:
                spec = spec.to(device)
        self._spec = spec

    @property
    def spec(self):
        """The action spec (a Composite holding it under the action key) random actions are drawn from, or None."""
        return self._spec

    def step(self, frames=1):
        """Lowers ``eps`` by ``frames`` annealing steps (never below ``eps_end``)."""
        decrement = (self.eps_init - self.eps_end) / self.annealing_num_steps
        for _ in range(frames):  # one float32 step at a time, as torchrl, so the rounding is the same
            self.eps.copy_(_ops.maximum(self.eps_end, self.eps - decrement))

    def forward(self, tensordict):
        if interaction_type() not in (InteractionType.RANDOM, None):
            return tensordict
        if self._spec is None:
            raise RuntimeError("spec must be provided to the exploration wrapper.")
        key = self.action_key
        target = tensordict
        if isinstance(key, tuple) and len(key) > 1:
            target, key = tensordict[key[:-1]], key[-1]
        action = target[key]
        if action.device != self.eps.device:
            raise RuntimeError(f"Expected action and e-greedy module to be on the same device, but got "
                               f"action.device={action.device} and e-greedy device={self.eps.device}.")
        explore = rand(tuple(target.batch_size), device=self.eps.device) < self.eps
        explore = explore.reshape(tuple(explore.shape) + (1,) * (action.ndim - explore.ndim))
        spec = self._spec[self.action_key]
        if tuple(spec.shape) != tuple(action.shape):
            if not len(spec.shape) or tuple(action.shape[-len(spec.shape):]) == tuple(spec.shape):
                spec = spec.expand(action.shape)
            else:
                raise ValueError("Action spec shape does not match the action shape")
        if self.action_mask_key is not None:
            mask = tensordict.get(self.action_mask_key, None)
            if mask is None:
                raise KeyError(f"Action mask key {self.action_mask_key} not found in {tensordict}.")
            spec.update_mask(mask)
        target.set(key, _ops.where(explore, spec.rand().to(action.device), action))
        return tensordict
