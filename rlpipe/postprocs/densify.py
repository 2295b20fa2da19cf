"""``DensifyReward``: spread a sparse end-of-trajectory reward over the steps before it."""
from ..tensordict.keys import unravel_key
from ..tensordict.nn import TensorDictModuleBase
from .utils import reward2go

__all__ = ["DensifyReward"]


class DensifyReward(TensorDictModuleBase):
    """Replaces ``("next", reward_key)`` by its return to go (torchrl's ``reward2go``): each step
    gets the discounted sum of the rewards from it to the end of its trajectory, trajectories
    ending at ``("next", done_key)``. With a reward only at the done step and ``discount=1``
    every step of a trajectory gets that reward.

    The time dimension is the second to last of the reward (``[..., T, 1]``), as in torchrl,
    whose ``time_dim`` argument is stored but not used. ``reward_key_out`` (default
    ``reward_key``) names where the result goes, under ``"next"``.
    """

    def __init__(self, *, reward_key="reward", done_key="done", reward_key_out=None, time_dim=2, discount=1.0):
        super().__init__()
        self.in_keys = [unravel_key(reward_key), unravel_key(done_key)]
        self.out_keys = [unravel_key(reward_key if reward_key_out is None else reward_key_out)]
        self.time_dim = time_dim
        self.discount = discount

    def forward(self, tensordict):
        done = tensordict[("next", self.in_keys[1])]
        reward = tensordict[("next", self.in_keys[0])]
        if reward.shape != done.shape:
            raise RuntimeError(f"DensifyReward: reward and done state are expected to have the same shape. Got "
                               f"reward.shape={list(reward.shape)} and done.shape={list(done.shape)}.")
        tensordict.set(("next", self.out_keys[0]), reward2go(reward, done, gamma=self.discount, time_dim=-2))
        return tensordict
