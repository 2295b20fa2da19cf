"""torchrl.objectives.dqn: ``DQNLoss``."""
import dataclasses
import warnings

from ..autograd.grad_mode import no_grad
from ..envs.specs import Composite
from ..nn import Module
from ..tensordict import TensorDict, TensorDictModule
from .common import LossModule
from .utils import distance_loss
from .value.advantages import ValueEstimators

__all__ = ["DQNLoss"]


def _find_action_space(action_space):
    """'one-hot' or 'categorical' from a name or an action spec."""
    if isinstance(action_space, str):
        names = {"one-hot": "one-hot", "one_hot": "one-hot", "onehot": "one-hot", "categorical": "categorical"}
        if action_space not in names:
            raise ValueError(f"action_space must be 'one-hot' or 'categorical', got {action_space!r}")
        return names[action_space]
    if isinstance(action_space, Composite):  # a QValueActor's spec: the "action" entry, as torchrl
        action_space = _action_entry(action_space)
    kind = type(action_space).__name__
    for name, space in (("OneHot", "one-hot"), ("Categorical", "categorical")):
        if kind.startswith(name) or kind.startswith("Discrete" if space == "categorical" else name):
            return space
    raise ValueError(f"action_space must be 'one-hot', 'categorical' or a OneHot/Categorical spec, got {kind}")


def _action_entry(spec):
    """The action spec inside a Composite: its "action" entry, else the first nested key ending in "action"."""
    if "action" in spec.keys():
        return spec["action"]
    for key in spec.keys(True, True):
        if isinstance(key, tuple) and key[-1] == "action":
            return spec[key]
    raise KeyError(f"action_space: the Composite spec has no 'action' entry (keys {list(spec.keys(True, True))})")


class DQNLoss(LossModule):
    """The DQN loss: ``distance(Q(s, a), r + gamma * (1 - terminated) * max_a' Q_target(s', a'))``.

    ``value_network`` is a TensorDictModule writing ``"action_value"`` (a QValueActor, or e.g.
    ``TensorDictModule(q_net, in_keys=["observation"], out_keys=["action_value"])``), or a plain
    module mapping the observation to action values. ``loss_function`` is ``"l2"`` (default),
    ``"smooth_l1"`` or ``"l1"``; ``delay_value`` (default True) keeps a target network (update it with
    ``SoftUpdate``/``HardUpdate``); ``double_dqn`` picks the next action with the online network and
    values it with the target. ``action_space``: ``"one-hot"`` or ``"categorical"`` (or a spec).
    The target comes from the value estimator (TD(0) by default; ``make_value_estimator(gamma=...)``),
    which reads ``steps_to_next_obs`` when present (n-step data from ``MultiStep``).
    Returns ``TensorDict(loss=...)`` and writes ``"td_error"`` (the squared TD errors, detached) into
    the input for prioritized replay; a ``"priority_weight"`` entry weights the loss.
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        advantage: object = "advantage"
        value_target: object = "value_target"
        value: object = "chosen_action_value"
        action_value: object = "action_value"
        action: object = "action"
        priority: object = "td_error"
        reward: object = "reward"
        done: object = "done"
        terminated: object = "terminated"
        priority_weight: object = "priority_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
    out_keys = ["loss"]

    def __init__(self, value_network, *, loss_function="l2", delay_value=True, double_dqn=False, gamma=None,
                 action_space=None, priority_key=None, reduction=None, use_prioritized_weights="auto"):
        super().__init__()
        if double_dqn and not delay_value:
            raise ValueError("double_dqn=True requires delay_value=True.")
        if gamma is not None:
            raise TypeError("Passing gamma / lambda parameters through the loss constructor is deprecated and "
                            "has been removed. Use loss.make_value_estimator(gamma=...) instead.")
        if loss_function not in ("l2", "l1", "smooth_l1"):
            raise NotImplementedError(f"Unknown loss {loss_function}.")
        if not isinstance(value_network, Module) and not callable(value_network):
            raise TypeError(f"value_network must be a module, got {type(value_network).__name__}")
        if not hasattr(value_network, "in_keys"):  # a plain network: observation -> action values
            value_network = TensorDictModule(value_network, in_keys=["observation"], out_keys=["action_value"])
        if action_space is None:
            action_space = getattr(value_network, "spec", None) or getattr(value_network, "action_space", None)
        if action_space is None:
            warnings.warn("action_space was not specified. DQNLoss will default to 'one-hot'.", stacklevel=2)
            action_space = "one-hot"
        self.action_space = _find_action_space(action_space)
        self.double_dqn = double_dqn
        self.delay_value = delay_value
        self.loss_function = loss_function
        self.reduction = "mean" if reduction is None else reduction
        self.use_prioritized_weights = use_prioritized_weights
        self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.value_network_in_keys = list(value_network.in_keys)
        if priority_key is not None:
            self.set_keys(priority=priority_key)

    def _estimator_value_network(self):
        return None  # forward always hands the estimator the next values

    @property
    def in_keys(self):
        """The entries the loss reads: the action, the next reward and done flags and the value
        network's inputs (now and at the next step)."""
        keys = self.tensor_keys
        net = list(self.value_network.in_keys)
        return [keys.action, ("next", keys.reward), ("next", keys.done), ("next", keys.terminated), *net,
                *[("next",) + (k if isinstance(k, tuple) else (k,)) for k in net]]

    def _chosen(self, action_values, action):
        """Q(s, a) for the taken actions (one-hot or integer)."""
        if self.action_space == "categorical":
            if action.ndim != action_values.ndim:
                action = action.unsqueeze(-1)
            return action_values.gather(-1, action.long()).squeeze(-1)
        return (action_values * action.to(action_values.dtype)).sum(-1)

    def _action_values(self, network, td):
        return network(td.copy())[self.tensor_keys.action_value]

    def forward(self, tensordict):
        keys = self.tensor_keys
        td_copy = tensordict.copy()
        action_values = self._action_values(self.value_network, td_copy)
        td_copy.set(keys.action_value, action_values)
        predicted = self._chosen(action_values, tensordict[keys.action])
        with no_grad():
            next_td = tensordict["next"]
            next_values = self._action_values(self.target_value_network, next_td)
            if self.double_dqn:
                greedy = self._action_values(self.value_network, next_td).argmax(-1, keepdim=True)
                next_value = next_values.gather(-1, greedy)
            else:
                next_value = next_values.max(-1, keepdim=True).values
            target = self.value_estimator.value_estimate(td_copy, next_value=next_value).squeeze(-1)
            td_error = (predicted.detach() - target).pow(2).unsqueeze(-1)
        tensordict.set(keys.priority, td_error)
        loss = distance_loss(predicted, target, self.loss_function)
        weights = None
        if self.use_prioritized_weights in (True, "auto"):
            weights = tensordict.get(keys.priority_weight, None)
        return TensorDict({"loss": self._reduce(loss, weights)}, batch_size=[])
