"""RMSprop."""
from .. import kernels
from .._creation import zeros_like
from .optimizer import Optimizer, _advance, _step_counter


class RMSprop(Optimizer):
    """torch.optim.RMSprop: divides the gradient by the root of a running average of its square
    (``square_avg``, decay ``alpha``), less the squared running mean of the gradient
    (``grad_avg``) when ``centered``; ``momentum`` accumulates these steps in a buffer.
    """
    _late_defaults = {"momentum": 0, "centered": False, "maximize": False}
    _counts_steps = True

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, param, state, group):
        state["step"] = _step_counter()
        state["square_avg"] = zeros_like(param)
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(param)
        if group["centered"]:
            state["grad_avg"] = zeros_like(param)

    def _update(self, group):
        lr, alpha, eps, weight_decay = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
        momentum, centered, maximize = group["momentum"], group["centered"], group["maximize"]
        for p, state in self._params_with_grad(group):
            _advance(state["step"])
            kernels.get("rmsprop_step", p._device._backend)(
                p._data, p.grad._data, state["square_avg"]._data,
                state["momentum_buffer"]._data if momentum > 0 else None,
                state["grad_avg"]._data if centered else None,
                lr, alpha, eps, weight_decay, momentum, centered, maximize)
            p._vc[0] += 1
