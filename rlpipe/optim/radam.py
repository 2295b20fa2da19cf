"""RAdam: Adam whose adaptive step is switched on only once the variance estimate is reliable."""
import math

from .._creation import zeros_like
from .adam import _check_adam_options
from .optimizer import Optimizer, _advance, _step_counter


class RAdam(Optimizer):
    """torch.optim.RAdam (Liu et al., 2019): the averages of Adam, but while the length of the
    approximated simple moving average ``rho_t`` is at most 5 the step is plain momentum SGD
    (``lr * m_hat``); after that it is Adam's step times the rectification term ``r_t``.

    ``weight_decay`` adds ``weight_decay * p`` to the gradient, or with
    ``decoupled_weight_decay=True`` shrinks ``p`` by ``lr * weight_decay`` first. ``foreach`` is
    accepted and ignored. The update is written with tensor ops, so it runs on any device.
    """
    _late_defaults = {"maximize": False, "decoupled_weight_decay": False}
    _counts_steps = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False):
        _check_adam_options(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _init_state(self, param, state, group):
        state["step"] = _step_counter()
        state["exp_avg"] = zeros_like(param)
        state["exp_avg_sq"] = zeros_like(param)

    def _update(self, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay = group["weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1
        for p, state in self._params_with_grad(group):
            step = _advance(state["step"])
            grad = -p.grad if group["maximize"] else p.grad
            if weight_decay and group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            elif weight_decay:
                grad = grad + weight_decay * p
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).add_(grad * grad * (1 - beta2))
            bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
            rho_t = rho_inf - 2 * step * beta2 ** step / bias2
            m_hat = exp_avg / bias1
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                p.sub_(m_hat * lr * (math.sqrt(bias2) / (exp_avg_sq.sqrt() + eps)) * rect)
            else:
                p.sub_(m_hat * lr)
