"""torchrl's distributions (``torchrl.modules.distributions``): action distributions built on
``rlpipe.distributions``."""
from .continuous import Delta, IndependentNormal, SafeTanhTransform, TanhNormal
from .discrete import MaskedCategorical, OneHotCategorical, ReparamGradientStrategy

__all__ = ["Delta", "IndependentNormal", "MaskedCategorical", "OneHotCategorical", "ReparamGradientStrategy",
           "SafeTanhTransform", "TanhNormal"]
