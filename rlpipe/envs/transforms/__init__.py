"""torchrl.envs.transforms's path: every transform class, ``Transform``, ``Compose`` and ``TransformedEnv``.

The code sits in ``transforms.py`` (torchrl users also import ``torchrl.envs.transforms.transforms``)
and in the ``rlpipe.envs.transforms_*`` modules it re-exports.
"""
from .transforms import *  # noqa: F401,F403
from .transforms import __all__  # noqa: F401
