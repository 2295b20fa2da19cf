"""The differentiable primitives: every built-in op on the autograd graph, one module per kind.

``base`` holds ``Op`` and the shared helpers; ``elementwise``, ``activations``, ``reductions``,
``shape``, ``indexing``, ``sorting``, ``linalg``, ``windows``, ``normalization`` and ``losses`` hold the ops,
each a ``Function`` with its forward and backward. Every primitive is importable from here by
name: ``from rlpipe import primitives as P; P.Add.apply(x, y)``.
"""
from .base import Op, unbroadcast, shape_of, along_dim, expand_reduced, sign_of  # noqa: F401
from .elementwise import *  # noqa: F401,F403
from .activations import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .windows import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
