"""torchrl's ``torchrl.envs.libs`` paths: ``gym`` (``GymEnv``, ``GymWrapper``, in ``rlpipe/envs/gym.py``),
``envpool`` (``MultiThreadedEnv``, ``MultiThreadedEnvWrapper``; needs the optional envpool package)
and ``dm_control`` (``DMControlEnv``: the name only, rlpipe does not wrap dm_control yet)."""
