"""torchrl.envs.transforms.transforms's path (custom transforms import from it, ``_apply_to_composite``
included): the same names as ``rlpipe.envs.transforms``, the package whose code this re-exports."""
from . import *  # noqa: F401,F403
from . import __all__, _apply_to_composite  # noqa: F401
