"""torchrl.objectives.utils: target-network updaters, ``distance_loss``, the value estimators' defaults
(``default_value_kwargs``, defined beside ``LossModule``, which builds estimators with them)."""
import warnings

from ..autograd.grad_mode import no_grad
from ..nn import functional as F
from .common import LossModule, default_value_kwargs
from .value.advantages import ValueEstimators

__all__ = ["HardUpdate", "SoftUpdate", "TargetNetUpdater", "ValueEstimators", "default_value_kwargs",
           "distance_loss", "hold_out_net", "group_optimizers"]

def distance_loss(v1, v2, loss_function, strict_shape=True):
    """The elementwise distance ``"l2"`` (squared error), ``"l1"`` or ``"smooth_l1"`` between two
    tensors of one shape (no reduction)."""
    if strict_shape and v1.shape != v2.shape:
        raise RuntimeError(f"The input tensors or tensordicts have shapes {v1.shape} and {v2.shape} which are "
                           "incompatible.")
    if loss_function == "l2":
        return F.mse_loss(v1, v2, reduction="none")
    if loss_function == "l1":
        return F.l1_loss(v1, v2, reduction="none")
    if loss_function == "smooth_l1":
        return F.smooth_l1_loss(v1, v2, reduction="none")
    raise NotImplementedError(f"Unknown loss {loss_function}.")


class hold_out_net:
    """A context (or decorator) in which ``network``'s parameters do not collect gradients
    (gradients still flow through the network to its inputs)."""

    def __init__(self, network):
        self.network = network
        self._saved = []

    def __enter__(self):
        self._saved = [(p, p.requires_grad) for p in self.network.parameters()]
        for p, _ in self._saved:
            p.requires_grad_(False)

    def __exit__(self, *exc):
        for p, flag in self._saved:
            p.requires_grad_(flag)


class TargetNetUpdater:
    """Updates a loss module's target networks (``target_<name>``, made by ``convert_to_functional``
    with ``create_target_params=True``) from their sources; subclasses define ``_step(source, target)``.

    The constructor copies every source into its target (``init_``); ``step()`` updates them."""

    def __init__(self, loss_module):
        if not isinstance(loss_module, LossModule):
            raise ValueError("The loss_module must be a LossModule instance.")
        pairs = loss_module._target_pairs()
        if not pairs:
            raise RuntimeError("Did not find any target parameters or buffers in the loss module.")
        self.loss_module = loss_module
        self.initialized = False
        self.init_()
        for name in loss_module._has_update_associated:  # the loss stops warning about its targets
            loss_module._has_update_associated[name] = True

    def _tensor_pairs(self):
        for source, target in self.loss_module._target_pairs():
            if source is target:
                continue
            yield from zip(list(source.parameters()) + list(source.buffers()),
                           list(target.parameters()) + list(target.buffers()))

    def init_(self):
        """Copies every source network into its target."""
        if self.initialized:
            warnings.warn("Updated already initialized.", stacklevel=2)
        pairs = list(self._tensor_pairs())
        if not pairs:
            raise RuntimeError(
                "The target and source data are identical for all params. Have you created proper target "
                "parameters? If the loss has a ``delay_value`` kwarg, make sure to set it to True if it is not done "
                f"by default. If no target parameter is needed, do not use a target updater such as {type(self)}.")
        with no_grad():
            for source, target in pairs:
                target.copy_(source)
        self.initialized = True

    def step(self):
        """One update of every target network."""
        if not self.initialized:
            raise RuntimeError(f"{type(self).__name__} must be initialized (`{type(self).__name__}.init_()`) "
                               "before calling step()")
        with no_grad():
            for source, target in self._tensor_pairs():
                if target.requires_grad:
                    raise RuntimeError("the target parameter is part of a graph.")
                self._step(source, target)

    def _step(self, source, target):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(loss_module={type(self.loss_module).__name__})"


class SoftUpdate(TargetNetUpdater):
    """Polyak averaging after every ``step()``: ``target = eps * target + (1 - eps) * source``.
    Give exactly one of ``eps`` and ``tau = 1 - eps``."""

    def __init__(self, loss_module, *, eps=None, tau=None):
        if eps is None and tau is None:
            raise RuntimeError("Neither eps nor tau was provided. This behavior is deprecated.")
        if eps is not None and tau is not None:
            raise ValueError("One and only one argument (tau or eps) can be specified.")
        eps = 1 - tau if eps is None else eps
        if eps < 0.5:
            warnings.warn("Found an eps value < 0.5, which is unexpected. You may want to use the `tau` keyword "
                          "argument instead.", stacklevel=2)
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"Got eps = {eps} when it was supposed to be between 0 and 1.")
        super().__init__(loss_module)
        self.eps = eps

    def _step(self, source, target):
        if target.is_floating_point():
            target.mul_(self.eps).add_(source * (1 - self.eps))
        else:
            target.copy_(source)


class HardUpdate(TargetNetUpdater):
    """Copies the sources into the targets every ``value_network_update_interval`` calls of ``step()``."""

    def __init__(self, loss_module, *, value_network_update_interval=1000):
        super().__init__(loss_module)
        self.value_network_update_interval = value_network_update_interval
        self.counter = 0

    def _step(self, source, target):
        if self.counter == self.value_network_update_interval:
            target.copy_(source)

    def step(self):
        super().step()
        self.counter = 0 if self.counter == self.value_network_update_interval else self.counter + 1


def group_optimizers(*optimizers):
    """One optimizer over the parameter groups of ``optimizers`` (``None`` ones skipped), each group
    keeping its own options, as torchrl's: all must be of one type; their state (e.g. Adam's moments)
    is not carried over."""
    groups, kind = [], None
    for optimizer in optimizers:
        if optimizer is None:
            continue
        kind = kind or type(optimizer)
        if type(optimizer) is not kind:
            raise ValueError(f"group_optimizers: every optimizer must be a {kind.__name__}, "
                             f"got a {type(optimizer).__name__}")
        groups.extend(optimizer.param_groups)
    if kind is None:
        raise ValueError("group_optimizers: expected at least one optimizer, got none")
    return kind(groups)
