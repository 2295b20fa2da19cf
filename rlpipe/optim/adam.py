"""Adam, and with ``decoupled_weight_decay`` the AdamW variant."""
from .. import kernels
from .._creation import zeros_like
from .optimizer import Optimizer, _advance, _step_counter


def _check_adam_options(lr, betas, eps, weight_decay):
    """torch's checks, in torch's order (tensor betas are not supported here)."""
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if not (isinstance(betas[0], float) and isinstance(betas[1], float)):
        raise ValueError("betas must be either both floats or both Tensors")


class Adam(Optimizer):
    """torch.optim.Adam: running averages of the gradient (``exp_avg``) and of its square
    (``exp_avg_sq``), bias-corrected, give the step ``lr * m / (sqrt(v) + eps)``.

    ``weight_decay`` adds ``weight_decay * p`` to the gradient, or with
    ``decoupled_weight_decay=True`` (AdamW) shrinks ``p`` by ``lr * weight_decay`` first.
    ``amsgrad`` divides by the largest ``exp_avg_sq`` seen so far.
    """
    _late_defaults = {"amsgrad": False, "maximize": False, "decoupled_weight_decay": False}
    _counts_steps = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False):
        _check_adam_options(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _init_state(self, param, state, group):
        state["step"] = _step_counter()
        state["exp_avg"] = zeros_like(param)
        state["exp_avg_sq"] = zeros_like(param)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(param)

    def _update(self, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for p, state in self._params_with_grad(group):
            kernels.get("adam_step", p._device._backend)(
                p._data, p.grad._data, state["exp_avg"]._data, state["exp_avg_sq"]._data,
                state["max_exp_avg_sq"]._data if amsgrad else None, _advance(state["step"]), lr, beta1, beta2,
                eps, weight_decay, amsgrad, maximize, decoupled)
            p._vc[0] += 1
