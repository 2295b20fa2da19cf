"""Learning-rate schedules: torch.optim.lr_scheduler's classes.

A scheduler rewrites each parameter group's ``lr`` when its ``step()`` is called, once per
epoch (or per iteration), after ``optimizer.step()``. Construction already takes the first
step, to epoch 0, and records each group's starting rate as ``initial_lr``.
"""
import math
import types
import warnings

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "LinearLR"]


class LRScheduler:
    """Base class. Subclasses compute the new rates in ``get_lr()``, usually from the current
    ones (the 'chainable' form), and may give ``_get_closed_form_lr()``, the rates as a
    function of ``last_epoch`` alone, for ``step(epoch)``.

    ``last_epoch=-1`` starts a schedule; any other value resumes one, which needs
    ``initial_lr`` in every group already. Either way construction takes one step (to epoch 0,
    or to ``last_epoch + 1``), during which ``_is_initial`` is true.
    """
    _is_initial = False
    _get_lr_called_within_step = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                   "scheduler with last_epoch >= 0")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The rates for epoch ``last_epoch``, one per group (called by ``step``)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The rates the last ``step()`` set, one per group."""
        return self._last_lr

    def step(self, epoch=None):
        """Moves to the next epoch (or to ``epoch``, deprecated) and sets each group's lr."""
        self._step_count += 1
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                warnings.warn("The epoch parameter in `scheduler.step()` is deprecated: call "
                              "`scheduler.step()` without it", UserWarning, stacklevel=2)
                self.last_epoch = epoch
                values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _warn_outside_step(self):
        """``get_lr`` computes the next rates; called by a user, it is most likely a mistake."""
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def _current_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restores the attributes saved by ``state_dict`` (the schedule's position and settings)."""
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # torch's older name


class StepLR(LRScheduler):
    """Multiplies the rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        lrs = self._current_lrs()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return lrs
        return [lr * self.gamma for lr in lrs]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiplies the rate by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        lrs = self._current_lrs()
        return lrs if self._is_initial else [lr * self.gamma for lr in lrs]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneals the rate from its initial value to ``eta_min`` along half a cosine over
    ``T_max`` epochs, then back up, periodically.

    Like torch, each step updates the current rate by the ratio of consecutive cosine values,
    so a rate changed from outside carries on; undisturbed it follows
    ``eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``.
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        epoch, period, low = self.last_epoch, self.T_max, self.eta_min
        lrs = self._current_lrs()
        if self._is_initial:
            return lrs
        if (epoch - 1 - period) % (2 * period) == 0:  # leaving the minimum: the ratio would be 0/0
            return [lr + (base - low) * (1 - math.cos(math.pi / period)) / 2 for base, lr in zip(self.base_lrs, lrs)]
        ratio = (1 + math.cos(math.pi * epoch / period)) / (1 + math.cos(math.pi * (epoch - 1) / period))
        return [ratio * (lr - low) + low for lr in lrs]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """Sets the rate to ``initial_lr * lr_lambda(epoch)``; ``lr_lambda`` may be a list with one
    function per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As the base class, but functions are not saved: only the attributes of callable
        objects (plain functions and lambdas are None)."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        """Restores the schedule's attributes, and the saved attributes of lambdas that are callable objects (plain
        functions are not saved, as in torch)."""
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class LinearLR(LRScheduler):
    """Scales the rate by a factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs, then keeps it."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        lrs = self._current_lrs()
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        # the ratio of this epoch's factor to the previous one
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [lr * ratio for lr in lrs]

    def _get_closed_form_lr(self):
        span = self.end_factor - self.start_factor
        return [base * (self.start_factor + span * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]
