"""Envs that reset themselves, as torchrl 0.14's ``AutoResetTransform`` and ``AutoResetEnv``
(``SomeEnv(..., auto_reset=True)`` builds the pair).

Such an env's step, when it ends an episode, already returns the first observation of the next one
under ``"next"``. ``AutoResetTransform`` keeps the done flags, writes a filling value over the
observations of the envs that are done (NaN for floats, -1 for signed integers, False for booleans:
they are not the episode's last observation), and the next step starts from the observation the
env returned. ``AutoResetEnv`` never asks its base env for a reset after the first one: a partial
reset takes that observation instead.
"""
import numpy as np

from .common import EnvBase
from .step_protocol import STEP_EXTRAS, TERMINATED, TRUNCATED, _done_like
from .transformed_env import Transform, TransformedEnv

__all__ = ["AutoResetTransform", "AutoResetEnv"]


class AutoResetTransform(Transform):
    """Marks the observations of a self-resetting env's done steps as invalid (module docstring).

    Keyword Args:
        replace: False writes no filling value (the observations are left as the env gave them).
        fill_float: the value for floating-point entries (``"nan"``, the default, or a number; None: none).
        fill_int: the value for signed integer entries (default -1; None: none).
        fill_bool: the value for boolean entries (default False; None: none).
    """

    def __init__(self, *, replace=None, fill_float="nan", fill_int=-1, fill_bool=False):
        super().__init__()
        if replace is False:
            fill_float = fill_int = fill_bool = None
        self.fill_float = float("nan") if fill_float == "nan" else fill_float
        self.fill_int = fill_int
        self.fill_bool = fill_bool

    def _fill_for(self, dtype):
        if dtype.kind == "f":
            return self.fill_float
        if dtype.kind == "i":
            return self.fill_int
        return self.fill_bool if dtype.kind == "b" else None

    def _check_container(self):
        if not isinstance(self.container, AutoResetEnv):
            raise RuntimeError(f"The {type(self).__name__} container must be of type AutoResetEnv, got "
                               f"{type(self.container).__name__} (build the env with auto_reset=True, or wrap it in "
                               "AutoResetEnv)")

    def _frame_reset(self, frame):
        self._check_container()
        return frame

    def _frame_step(self, root, next_frame, action):
        done = np.logical_or(next_frame[TERMINATED], next_frame[TRUNCATED])
        if not done.any():
            return next_frame
        out = dict(next_frame)
        for key, value in next_frame.items():
            fill = None if key in STEP_EXTRAS else self._fill_for(np.asarray(value).dtype)
            if fill is not None:
                out[key] = np.where(_done_like(done, value), np.asarray(fill, dtype=value.dtype), value)
        return out

    def _frame_continue(self, next_frame, frame, done):
        return frame  # the base env's observations: the new episodes' first ones where it reset itself

    def forward(self, tensordict):
        """Refused, as torchrl's: the transform only runs inside an ``AutoResetEnv``."""
        raise RuntimeError(f"{type(self).__name__} cannot be called on a TensorDict: it runs inside an "
                           "AutoResetEnv only")


class AutoResetEnv(TransformedEnv):
    """The ``TransformedEnv`` of a self-resetting env and its ``AutoResetTransform`` (module docstring):
    after a done step, the next step starts from the observations the env returned, with no reset."""

    def _base_continue(self, done):
        return self.base_env._continue_frame(self._base_next, np.zeros_like(done))

    def insert_transform(self, index, transform):
        """Refused, as torchrl's: the ``AutoResetTransform`` stays first."""
        raise RuntimeError(f"Cannot insert a transform in {type(self).__name__}.")


def _auto_reset_env(env, replace):
    """``AutoResetEnv(env, AutoResetTransform(replace=replace))``: what ``EnvBase(..., auto_reset=True)`` builds."""
    return AutoResetEnv(env, AutoResetTransform(replace=replace))


EnvBase._auto_reset_env = staticmethod(_auto_reset_env)  # (common cannot import this module)
