"""Adagrad."""
from .. import kernels
from .._creation import full_like
from .optimizer import Optimizer, _advance, _step_counter


class Adagrad(Optimizer):
    """torch.optim.Adagrad: divides the gradient by the root of the sum of its squares so far
    (``sum``, starting at ``initial_accumulator_value``), with the learning rate decayed as
    ``lr / (1 + (step - 1) * lr_decay)``.

    As in torch, the state of the parameters given to the constructor exists from the start;
    that of groups added later is made at their first step. Each ``sum`` starts from its own
    group's ``initial_accumulator_value`` (torch starts every group from the constructor's).
    """
    _late_defaults = {"maximize": False}
    _counts_steps = True

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
                 maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state[p], group)

    def _init_state(self, param, state, group):
        state["step"] = _step_counter()
        state["sum"] = full_like(param, group["initial_accumulator_value"])

    def _update(self, group):
        lr, lr_decay, weight_decay = group["lr"], group["lr_decay"], group["weight_decay"]
        eps, maximize = group["eps"], group["maximize"]
        for p, state in self._params_with_grad(group):
            kernels.get("adagrad_step", p._device._backend)(
                p._data, p.grad._data, state["sum"]._data, _advance(state["step"]), lr, lr_decay, weight_decay, eps,
                maximize)
            p._vc[0] += 1
