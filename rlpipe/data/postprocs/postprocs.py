"""torchrl's ``torchrl.data.postprocs.postprocs`` path."""
from ...postprocs import DensifyReward, MultiStep

__all__ = ["MultiStep", "DensifyReward"]
