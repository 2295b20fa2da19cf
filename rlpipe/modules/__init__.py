"""torchrl's ``torchrl.modules``: policy building blocks."""
# ---- distributions (dist) ----
from .distributions import (Delta, IndependentNormal, MaskedCategorical, OneHotCategorical,  # noqa: F401
                            TanhNormal)
