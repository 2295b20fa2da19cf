"""torchrl's ``torchrl.envs.libs`` paths: ``gym`` (``GymEnv``, ``GymWrapper``, in ``rlpipe/envs/gym.py``)
and ``envpool`` (``MultiThreadedEnv``, ``MultiThreadedEnvWrapper``; needs the optional envpool package)."""
