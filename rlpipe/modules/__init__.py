"""torchrl's ``torchrl.modules``: policy building blocks."""
# ---- distributions (dist) ----
from .distributions import Delta, IndependentNormal, TanhNormal  # noqa: F401
