"""torchrl's ``DMControlEnv`` name, so that scripts importing it load (torchrl's sota SAC imports it
beside ``GymEnv``). rlpipe does not wrap DeepMind Control yet: without the dm_control package the
constructor raises torchrl's ImportError, with it a NotImplementedError that says to use ``GymEnv``."""
import importlib.util

__all__ = ["DMControlEnv"]

_has_dmc = _has_dm_control = importlib.util.find_spec("dm_control") is not None  # torchrl's flags (tests read them)


class DMControlEnv:
    """torchrl's ``DMControlEnv(env_name, task_name, **kwargs)``. rlpipe has no dm_control wrapper:
    building one raises ImportError when dm_control is missing (torchrl's message, as torchrl does),
    otherwise NotImplementedError naming the environment."""

    def __init__(self, env_name, task_name, **kwargs):
        if not _has_dmc:
            raise ImportError("dm_control python package was not found. Please install this dependency.")
        raise NotImplementedError(f"DMControlEnv({env_name!r}, {task_name!r}): rlpipe does not wrap dm_control yet; "
                                  "use GymEnv with a Gymnasium environment (e.g. the MuJoCo ones)")
