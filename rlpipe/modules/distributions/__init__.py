"""torchrl's distributions (``torchrl.modules.distributions``): action distributions built on
``rlpipe.distributions``."""
from .continuous import Delta, IndependentNormal, SafeTanhTransform, TanhNormal
from .discrete import MaskedCategorical, OneHotCategorical, ReparamGradientStrategy
from ...tensordict.nn.probabilistic import register_distributions

register_distributions(IndependentNormal, TanhNormal, MaskedCategorical, OneHotCategorical)

__all__ = ["Delta", "IndependentNormal", "MaskedCategorical", "OneHotCategorical", "ReparamGradientStrategy",
           "SafeTanhTransform", "TanhNormal"]
