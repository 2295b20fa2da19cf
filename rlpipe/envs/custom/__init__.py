"""torchrl.envs.custom's environments written on rlpipe's tensors (torchrl-style ``_step``/``_reset``)."""
from .pendulum import PendulumEnv

__all__ = ["PendulumEnv"]
