"""torchrl's ``torchrl.data.postprocs`` path: the postprocessors of ``rlpipe.postprocs``."""
from ...postprocs import DensifyReward, MultiStep

__all__ = ["MultiStep", "DensifyReward"]
