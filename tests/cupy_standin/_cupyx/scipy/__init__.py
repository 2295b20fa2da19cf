"""The stand-in's ``cupyx.scipy``: only ``special``."""
from . import special
