"""tensordict.nn.distributions: ``NormalParamExtractor``, ``AddStateIndependentNormalScale`` (the
interaction types are re-exported here, as tensordict does)."""
from ..._creation import full
from ..._dtypes import get_default_dtype
from ..._tensor import Size
from ...nn.modules.module import Module
from ...nn.parameter import Parameter
from .probabilistic import InteractionType, set_interaction_type
from .utils import mappings

__all__ = ["NormalParamExtractor", "AddStateIndependentNormalScale", "InteractionType", "set_interaction_type"]


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


class AddStateIndependentNormalScale(Module):
    """Adds a trainable scale, the same for every state, to a location: ``forward(loc, *others)``
    returns ``(loc, scale, *others)`` with ``scale = scale_mapping(state_independent_scale)`` expanded
    to ``loc``'s shape and held at least ``scale_lb``. ``scale_shape`` (an int or a shape, default
    ``()``) must match ``loc``'s trailing dims; ``make_param=False`` keeps the scale as a buffer;
    ``init_value`` fills it (0: an ``"exp"`` scale of 1)."""

    def __init__(self, scale_shape=None, *, scale_mapping="exp", scale_lb=1e-4, device=None, make_param=True,
                 init_value=0.0):
        super().__init__()
        scale_shape = () if scale_shape is None else (scale_shape,) if isinstance(scale_shape, int) else scale_shape
        self.scale_lb = scale_lb
        self.scale_shape = Size(scale_shape)
        self.scale_mapping = scale_mapping
        self._mapping = mappings(scale_mapping)  # refuses an unknown mapping now (KeyError)
        scale = full(tuple(self.scale_shape), init_value, dtype=get_default_dtype(), device=device)
        if make_param:
            self.state_independent_scale = Parameter(scale)
        else:
            self.register_buffer("state_independent_scale", scale)

    def forward(self, loc, *others):
        """``(loc, scale, *others)``: the mapped scale expanded to ``loc``'s shape."""
        trailing = loc.shape[-len(self.scale_shape):]  # as tensordict's: a () scale wants a () loc
        if tuple(trailing) != tuple(self.scale_shape):
            raise RuntimeError(f"Last dimensions of loc ({trailing}) do not match the number of dimensions in scale "
                               f"({self.state_independent_scale.shape})")
        scale = self._mapping(self.state_independent_scale.expand_as(loc)).clamp_min(self.scale_lb)
        return (loc, scale, *others)
