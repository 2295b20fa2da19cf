"""torchrl's distributions (``torchrl.modules.distributions``): action distributions built on
``rlpipe.distributions``."""
from .continuous import Delta, IndependentNormal, SafeTanhTransform, TanhNormal

__all__ = ["Delta", "IndependentNormal", "SafeTanhTransform", "TanhNormal"]
