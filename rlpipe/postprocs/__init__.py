"""Layer 6: postprocessors of collected batches."""
from .densify import DensifyReward
from .multistep import MultiStep
from .multistep_transform import MultiStepTransform
from .utils import split_trajectories, discounted_cumsum, reward2go

__all__ = ["MultiStep", "MultiStepTransform", "DensifyReward", "split_trajectories", "discounted_cumsum", "reward2go"]
