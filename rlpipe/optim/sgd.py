"""Stochastic gradient descent, with momentum, Nesterov momentum and weight decay."""
from .. import kernels
from .._creation import empty_like
from .optimizer import Optimizer


class SGD(Optimizer):
    """torch.optim.SGD: ``p -= lr * d``, where d is the gradient (negated with ``maximize``,
    plus ``weight_decay * p``), or with momentum the buffer ``b = momentum * b + (1 -
    dampening) * d`` (``d`` itself on the first step), or ``d + momentum * b`` with Nesterov.
    """
    _late_defaults = {"nesterov": False, "maximize": False}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _update(self, group):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        states = self.state
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            buffer, first = None, False
            if momentum != 0:  # plain SGD keeps no state at all
                state = states[p]
                buffer = state.get("momentum_buffer")
                if buffer is None:  # the first step copies the gradient in
                    buffer = state["momentum_buffer"] = empty_like(p)
                    first = True
                buffer = buffer._data
            kernels.get("sgd_step", p._device._backend)(p._data, grad._data, buffer, lr, momentum, dampening,
                                                        weight_decay, nesterov, maximize, first)
            p._vc[0] += 1
