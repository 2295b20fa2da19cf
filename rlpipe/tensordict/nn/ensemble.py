"""tensordict.nn's ``EnsembleModule``: ``num_copies`` independently initialised copies of a module,
run as one batched computation (``vmap`` over their stacked parameters)."""
import copy

from ...func import vmap
from .._td import TensorDict
from .common import TensorDictModuleBase

__all__ = ["EnsembleModule"]


class EnsembleModule(TensorDictModuleBase):
    """``num_copies`` copies of ``module`` (a TensorDictModule), each with parameters reset by
    ``reset_parameters``; calling it on a TensorDict of batch ``B`` returns one of batch
    ``[num_copies, *B]`` holding every copy's inputs and outputs. ``expand_input=False`` expects the
    input already to carry the copies' dim first (chaining ensembles).

    The stacked parameters (leading dim ``num_copies``) are registered parameters of the
    ``ensemble_parameters`` submodule, a copy of ``module`` (tensordict keeps them in a
    TensorDictParams instead, so the parameter names differ); ``params_td`` shows them as a TensorDict."""

    def __init__(self, module, num_copies, expand_input=True):
        super().__init__()
        if not isinstance(num_copies, int) or num_copies < 1:
            raise ValueError(f"EnsembleModule: num_copies must be a positive integer, got {num_copies!r}")
        self.in_keys, self.out_keys = module.in_keys, module.out_keys
        self.module = module
        copies = [copy.deepcopy(module) for _ in range(num_copies)]
        for member in copies:
            member.reset_parameters_recursive()
        self.ensemble_parameters = copy.deepcopy(module)
        TensorDict.from_modules(*copies, lock=False).to_module(self.ensemble_parameters)
        self.vmapped_forward = vmap(self._func_module_call, (None, 0) if expand_input else 0)

    @property
    def params_td(self):
        """The copies' parameters and buffers, stacked: a TensorDict of batch size ``[num_copies]``."""
        td = TensorDict.from_module(self.ensemble_parameters)
        return td.auto_batch_size_(1)

    def _func_module_call(self, tensordict, params):
        with params.to_module(self.module):
            return self.module(tensordict)

    def forward(self, tensordict):
        """Every copy run on ``tensordict``: their inputs and outputs, stacked along a new first dim."""
        return self.vmapped_forward(tensordict, self.params_td)
