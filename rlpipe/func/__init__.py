"""``rlpipe.func`` (``torch.func``): calling a module with given parameters, mapping a function over
a batch (``vmap``) and gradients as functions (``grad``, ``grad_and_value``)."""
from ._functional_call import functional_call, stack_module_state
from ._grad import grad, grad_and_value
from ._vmap import vmap

__all__ = ["functional_call", "stack_module_state", "vmap", "grad", "grad_and_value"]
