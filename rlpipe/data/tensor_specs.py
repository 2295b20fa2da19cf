"""torchrl's ``torchrl.data.tensor_specs`` module path: the specs themselves live in ``rlpipe.envs.specs``
(layer 5); this module only names them where torchrl's code imports them from."""
from ..envs.specs import *  # noqa: F401,F403
from ..envs.specs import __all__  # noqa: F401
