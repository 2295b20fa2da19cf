"""torchrl's ``torchrl.envs.libs.gym`` path for rlpipe's Gymnasium envs (``rlpipe/envs/gym.py``), with
torchrl's backend selectors: rlpipe has one backend, Gymnasium."""
import importlib

from ..gym import GymEnv, GymWrapper, from_gym_space
from ..utils import FixedSwitch

__all__ = ["GymEnv", "GymWrapper", "from_gym_space", "gym_backend", "set_gym_backend"]

_BACKEND = "gymnasium"


def gym_backend(submodule=None):
    """The Gymnasium module (or its ``submodule``, e.g. ``"wrappers"``), as torchrl's ``gym_backend``."""
    module = importlib.import_module(_BACKEND)
    return module if submodule is None else importlib.import_module(f"{_BACKEND}.{submodule}")


class set_gym_backend(FixedSwitch):  # noqa: N801 - torchrl's name
    """torchrl's backend selector (a context manager and decorator): rlpipe takes ``"gymnasium"`` or
    the gymnasium module; any other backend is a ValueError."""

    def __init__(self, backend):
        name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
        if name != _BACKEND:
            raise ValueError(f"set_gym_backend: rlpipe runs on Gymnasium only; expected 'gymnasium', got {name!r}")
        self.backend = name
