"""torchrl's ``torchrl.envs.libs.gym`` path for rlpipe's Gymnasium envs (``rlpipe/envs/gym.py``)."""
from ..gym import GymEnv, GymWrapper, from_gym_space

__all__ = ["GymEnv", "GymWrapper", "from_gym_space"]
