"""torchrl's ``torchrl.data.tensor_specs`` module path: the specs themselves live in ``rlpipe.envs.specs``
(layer 5); importing this module gives that module, under the path torchrl's code imports."""
import sys

from ..envs import specs as _specs

# this module is rlpipe.envs.specs itself, so that torchrl's module switches (``_CHECK_SPEC_ENCODE``) set here
# are the ones the specs read
sys.modules[__name__] = _specs
