"""tensordict.nn.distributions: ``NormalParamExtractor`` (the interaction types are re-exported here,
as tensordict does)."""
from ...nn.modules.module import Module
from .probabilistic import InteractionType, set_interaction_type
from .utils import mappings

__all__ = ["NormalParamExtractor", "InteractionType", "set_interaction_type"]


class NormalParamExtractor(Module):
    """Splits the last dimension of its (first) input in two halves: a location and a scale, the scale
    made positive by ``scale_mapping`` (default ``"biased_softplus_1.0"``: zero maps to 1) and held at
    least ``scale_lb``. Further inputs are passed through after them."""

    def __init__(self, scale_mapping="biased_softplus_1.0", scale_lb=1e-4):
        super().__init__()
        self.scale_mapping = mappings(scale_mapping)
        self.scale_lb = scale_lb

    def forward(self, *tensors):
        """Splits the last dim in two halves: the location and a positive scale."""
        tensor, *others = tensors
        loc, scale = tensor.chunk(2, -1)
        scale = self.scale_mapping(scale).clamp_min(self.scale_lb)
        return (loc, scale, *others)
