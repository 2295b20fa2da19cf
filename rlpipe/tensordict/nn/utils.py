"""Positive mappings for distribution scales, as tensordict.nn.utils: ``mappings(key)``,
``biased_softplus``, ``inv_softplus`` and ``expln``."""
import math

from ... import primitives as _ops
from ...nn.modules.module import Module

__all__ = ["mappings", "biased_softplus", "inv_softplus", "expln", "add_custom_mapping"]


def inv_softplus(bias):
    """The x with softplus(x) == bias (a float; tensors go through the same formula)."""
    if isinstance(bias, (int, float)):
        return math.log(max(math.expm1(bias), 1e-6))
    return bias.expm1().clamp_min(1e-6).log()


class biased_softplus(Module):
    """``softplus(x + b) + min_val`` with ``b`` chosen so that a zero input maps to ``bias``."""

    def __init__(self, bias, min_val=0.01):
        super().__init__()
        self.bias = inv_softplus(bias - min_val)
        self.min_val = min_val

    def forward(self, x):
        """``softplus(x + bias) + min_val``, so that ``x = 0`` maps to the chosen value."""
        return _ops.softplus(x + self.bias) + self.min_val


def expln(x):
    """``exp(x)`` for x <= 0, ``log1p(x) + 1`` above: smooth, positive, and linear-ish growth."""
    negative = x <= 0
    return _ops.where(negative, x.clamp_max(0).exp(), x.clamp_min(0).log1p() + 1)


_MAPPINGS = {
    "softplus": _ops.softplus,
    "exp": _ops.exp,
    "relu": _ops.relu,
    "biased_softplus": biased_softplus(1.0),
    "none": lambda x: x,
    "expln": expln,
}


def add_custom_mapping(name, mapping):
    """Registers ``mapping`` (a callable R -> R+) under ``name`` for ``mappings``."""
    if not callable(mapping):
        raise ValueError(f"the mapping for {name!r} must be callable, got {type(mapping).__name__}")
    _MAPPINGS[name] = mapping


def mappings(key):
    """The positive mapping named ``key``: ``"softplus"``, ``"exp"``, ``"relu"``, ``"expln"``, ``"none"``,
    ``"biased_softplus"`` (zero maps to 1) or ``"biased_softplus_{bias}"`` / ``"biased_softplus_{bias}_{min}"``."""
    if key in _MAPPINGS:
        return _MAPPINGS[key]
    if key.startswith("biased_softplus"):
        parts = key.split("_")
        if len(parts) == 3:
            return biased_softplus(float(parts[-1]))
        if len(parts) == 4:
            return biased_softplus(float(parts[-2]), min_val=float(parts[-1]))
        raise ValueError(f"Invalid number of args in  {key}")
    raise NotImplementedError(f"Unknown mapping {key}")
