"""torchrl.objectives.ddpg: ``DDPGLoss``."""
import dataclasses

from ..autograd.grad_mode import no_grad
from ..tensordict import TensorDict
from .common import LossModule
from .utils import distance_loss, hold_out_net
from .value.advantages import ValueEstimators

__all__ = ["DDPGLoss"]


class DDPGLoss(LossModule):
    """The DDPG losses (torchrl 0.14's ``DDPGLoss``).

    ``actor_network`` writes the action from the observation (an ``Actor``); ``value_network`` reads the
    observation and the action and writes ``"state_action_value"`` (a ``ValueOperator``). The returned
    TensorDict holds ``loss_value`` (``distance(Q(s, a), r + gamma * (1 - terminated) * Q'(s', mu'(s')))``
    with the target networks ``'``, ``delay_value=True`` by default, ``delay_actor=False``), ``loss_actor``
    (``-Q(s, mu(s))``, whose gradient reaches only the actor) and the detached ``td_error``, ``pred_value``,
    ``target_value``, ``pred_value_max`` and ``target_value_max``. ``td_error`` (the squared TD errors) is
    also written into the input for prioritized replay; a ``"priority_weight"`` entry weights both losses.
    The target comes from the value estimator (TD(0), ``gamma=0.99`` by default; ``make_value_estimator``).
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        state_action_value: object = "state_action_value"
        priority: object = "td_error"
        reward: object = "reward"
        done: object = "done"
        terminated: object = "terminated"
        priority_weight: object = "priority_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
    out_keys = ["loss_actor", "loss_value", "pred_value", "target_value", "pred_value_max", "target_value_max"]

    def __init__(self, actor_network, value_network, *, loss_function="l2", delay_actor=False, delay_value=True,
                 gamma=None, separate_losses=False, reduction=None, use_prioritized_weights="auto"):
        super().__init__()
        if gamma is not None:
            raise TypeError("Passing gamma / lambda parameters through the loss constructor is deprecated and "
                            "has been removed. Use loss.make_value_estimator(gamma=...) instead.")
        if loss_function not in ("l2", "l1", "smooth_l1"):
            raise NotImplementedError(f"Unknown loss {loss_function}.")
        self.delay_actor = delay_actor
        self.delay_value = delay_value
        self.loss_function = loss_function
        self.reduction = "mean" if reduction is None else reduction
        self.use_prioritized_weights = use_prioritized_weights
        self.separate_losses = separate_losses
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.actor_in_keys = list(actor_network.in_keys)

    def _estimator_value_network(self):
        return None  # forward hands the estimator the next values

    @property
    def in_keys(self):
        """The entries the loss reads: the networks' inputs, now and at the next step, and the
        reward and done flags."""
        keys = self.tensor_keys
        own = [*self.actor_in_keys, *self.value_network.in_keys]
        nested = [("next",) + (k if isinstance(k, tuple) else (k,)) for k in own]
        found = {("next", keys.reward), ("next", keys.done), ("next", keys.terminated), *own, *nested}
        return sorted(found, key=str)

    def _weights(self, tensordict):
        if self.use_prioritized_weights in (True, "auto"):
            return tensordict.get(self.tensor_keys.priority_weight, None)
        return None

    def _q(self, actor, value, td):
        """Q(s, actor(s)) through ``value`` (the actor writes the action into a copy of ``td``)."""
        return value(actor(td.copy()))[self.tensor_keys.state_action_value].squeeze(-1)

    def loss_value(self, tensordict):
        """The critic's loss and the detached diagnostics."""
        keys = self.tensor_keys
        td_copy = tensordict.copy()
        predicted = self.value_network(td_copy)[keys.state_action_value].squeeze(-1)
        with no_grad():
            next_value = self._q(self.target_actor_network, self.target_value_network, tensordict["next"])
            target = self.value_estimator.value_estimate(td_copy, next_value=next_value.unsqueeze(-1)).squeeze(-1)
            td_error = (predicted.detach() - target).pow(2)
        tensordict.set(keys.priority, td_error)
        loss = self._reduce(distance_loss(predicted, target, self.loss_function), self._weights(tensordict))
        metadata = {"td_error": td_error, "pred_value": predicted.detach(), "target_value": target,
                    "target_value_max": target.max(), "pred_value_max": predicted.detach().max()}
        return loss, metadata

    def loss_actor(self, tensordict):
        """``-Q(s, mu(s))``; the value network's parameters get no gradient from it."""
        with hold_out_net(self.value_network):
            q = self._q(self.actor_network, self.value_network, tensordict)
        return self._reduce(-q, self._weights(tensordict)), {}

    def forward(self, tensordict):
        loss_value, metadata = self.loss_value(tensordict)
        loss_actor, _ = self.loss_actor(tensordict)
        return TensorDict({"loss_actor": loss_actor, "loss_value": loss_value, **metadata}, batch_size=[])
