"""torchrl's ``torchrl.collectors.utils`` path: ``split_trajectories``."""
from ..postprocs import split_trajectories

__all__ = ["split_trajectories"]
