"""tensordict.nn.params' TensorDictParams (a TensorDict whose leaves are registered as a Module's
parameters): not available in rlpipe yet; the name exists for code that imports it and raises
NotImplementedError when built."""
from ..._utils import unavailable

__all__ = ["TensorDictParams"]

TensorDictParams = unavailable("TensorDictParams", "wrap the TensorDict's tensors in rlpipe.nn.Parameter and "
                               "register them on a Module instead")
