"""AdamW: Adam with decoupled weight decay."""
from .adam import Adam


class AdamW(Adam):
    """torch.optim.AdamW: Adam whose weight decay shrinks the parameters directly
    (``p *= 1 - lr * weight_decay``) instead of entering the gradient averages."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:  # whatever was loaded, AdamW stays decoupled
            group["decoupled_weight_decay"] = True
