"""Layer 6: postprocessors of collected batches."""
from .multistep import MultiStep
from .utils import split_trajectories, discounted_cumsum, reward2go

__all__ = ["MultiStep", "split_trajectories", "discounted_cumsum", "reward2go"]
