"""Actors and value operators (torchrl.modules.tensordict_module.actors): ``Actor``, ``ValueOperator``,
``ProbabilisticActor``, ``QValueModule`` and ``QValueActor``, with torchrl 0.14's keys and defaults."""
import warnings

import numpy as np

from ... import primitives as _ops
from ..._dtypes import int64
from ...envs.specs import Binary, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, TensorSpec
from ...tensordict import TensorDictModule, TensorDictSequential
from ...tensordict.keys import unravel_key
from ...tensordict.nn.common import TensorDictModuleBase
from ...tensordict.nn.probabilistic import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
from .common import SafeModule, register_spec

__all__ = ["Actor", "ValueOperator", "ProbabilisticActor", "SafeProbabilisticModule",
           "SafeProbabilisticTensorDictSequential", "QValueModule", "QValueActor", "ActorValueOperator",
           "ActorCriticWrapper"]


def _action_spec(out_keys, spec):
    if spec is not None and "action" in out_keys and not isinstance(spec, Composite):
        return Composite(action=spec)
    return spec


class Actor(SafeModule):
    """A deterministic policy: ``module`` reads ``in_keys`` (default ``["observation"]``) and writes
    ``out_keys`` (default ``["action"]``); ``spec`` is the action spec."""

    def __init__(self, module, in_keys=None, out_keys=None, *, spec=None, **kwargs):
        in_keys = ["observation"] if in_keys is None else in_keys
        out_keys = ["action"] if out_keys is None else out_keys
        super().__init__(module, in_keys=in_keys, out_keys=out_keys, spec=_action_spec(out_keys, spec), **kwargs)


class ValueOperator(TensorDictModule):
    """A value network: reads ``in_keys`` (default ``["observation"]``) and writes ``"state_value"``, or
    ``"state_action_value"`` when ``"action"`` is among the in-keys."""

    def __init__(self, module, in_keys=None, out_keys=None):
        in_keys = ["observation"] if in_keys is None else in_keys
        if out_keys is None:
            out_keys = ["state_action_value"] if "action" in in_keys else ["state_value"]
        super().__init__(module=module, in_keys=in_keys, out_keys=out_keys)


class SafeProbabilisticModule(ProbabilisticTensorDictModule):
    """A ``ProbabilisticTensorDictModule`` carrying the specs of its outputs (``safe``: projected)."""

    def __init__(self, in_keys, out_keys=None, spec=None, safe=False, **kwargs):
        super().__init__(in_keys=in_keys, out_keys=out_keys, **kwargs)
        if spec is not None and not isinstance(spec, Composite):
            spec = Composite({self.dist_sample_keys[0]: spec})
        register_spec(self, safe, spec)

    spec = SafeModule.spec

    def random(self, tensordict):
        """Writes a random value of the first sampled key's spec into ``tensordict``."""
        key = self.dist_sample_keys[0]
        tensordict.set(key, self.spec[key].rand(tensordict.batch_size))
        return tensordict


class SafeProbabilisticTensorDictSequential(ProbabilisticTensorDictSequential):
    """A ``ProbabilisticTensorDictSequential`` whose ``spec`` gathers the specs of its modules."""

    @property
    def spec(self):
        """The specs of every inner module that has one, gathered in one Composite."""
        spec = Composite()
        for module in self.module:
            for key, value in getattr(module, "spec", Composite()).items(True, True):
                spec[key] = value
        return spec


class ProbabilisticActor(SafeProbabilisticTensorDictSequential):
    """A stochastic policy: ``module`` writes the distribution's parameters, a ``SafeProbabilisticModule``
    reads them (``in_keys``, named as the distribution's arguments, e.g. ``["loc", "scale"]``) and writes
    ``out_keys`` (default ``["action"]``). Keyword arguments (``distribution_class``, ``distribution_kwargs``,
    ``return_log_prob``, ``default_interaction_type``, ``log_prob_key``...) go to that module."""

    def __init__(self, module, in_keys, out_keys=None, *, spec=None, **kwargs):
        out_keys = ["action"] if out_keys is None else out_keys
        if isinstance(out_keys, (str, tuple)):
            out_keys = [out_keys]
        spec = _action_spec(out_keys, spec)
        super().__init__(module, SafeProbabilisticModule(in_keys=in_keys, out_keys=out_keys, spec=spec, **kwargs))


_ACTION_SPACES = {OneHot: "one_hot", MultiOneHot: "mult_one_hot", Binary: "binary", Categorical: "categorical",
                  MultiCategorical: "multi_categorical",
                  "one_hot": "one_hot", "one-hot": "one_hot", "mult_one_hot": "mult_one_hot",
                  "mult-one-hot": "mult_one_hot", "multi_one_hot": "mult_one_hot", "multi-one-hot": "mult_one_hot",
                  "binary": "binary", "categorical": "categorical", "multi_categorical": "multi_categorical",
                  "multi-categorical": "multi_categorical", "multi_discrete": "multi_categorical",
                  "multi-discrete": "multi_categorical"}


def _leaf_action_spec(spec):
    if not isinstance(spec, Composite):
        return spec
    if "action" in spec.keys():
        return spec["action"]
    for key in spec.keys(True, True):
        if isinstance(key, tuple) and key[-1] == "action":
            return spec[key]
    raise KeyError("action could not be found in the spec. Make sure you pass a spec that is either a native action "
                   "spec or a composite action spec with a leaf 'action' entry. Otherwise, simply remove the spec and "
                   "use the action_space only.")


def _find_action_space(action_space):
    key = type(_leaf_action_spec(action_space)) if isinstance(action_space, TensorSpec) else action_space
    try:
        return _ACTION_SPACES[key]
    except (KeyError, TypeError):
        raise ValueError(f"action_space was not specified/not compatible and could not be retrieved from the value "
                         f"network. Got action_space={action_space}.") from None


def _action_space_and_spec(action_space, spec):
    """torchrl's ``_process_action_space_spec``: the action-space name, and the spec to keep."""
    leaf = _leaf_action_spec(spec) if spec is not None else None
    if action_space is None:
        if spec is None:
            raise ValueError("Neither action_space nor spec was defined. The action space cannot be inferred.")
        return _find_action_space(leaf), spec
    if isinstance(action_space, Composite):
        raise ValueError("action_space cannot be of type Composite.")
    if isinstance(action_space, TensorSpec):
        if leaf is not None and action_space is not leaf:
            raise ValueError("Passing an action_space as a TensorSpec and a spec isn't allowed, unless they match.")
        spec = action_space if spec is None else spec
        leaf = action_space
    name = _find_action_space(action_space)
    if leaf is not None and _find_action_space(leaf) != name:
        raise ValueError(f"The action spec and the action space do not match: got action_space={name} and "
                         f"spec={spec}.")
    return name, spec


def _spec_in_action_space(action_space, owner):
    if isinstance(action_space, TensorSpec):
        warnings.warn(f"{owner}: a spec passed as action_space is taken as the action spec (torchrl 0.14 refuses it; "
                      "pass it as spec=)", DeprecationWarning, stacklevel=3)


class QValueModule(TensorDictModuleBase):
    """Turns action values into a greedy action: reads ``action_value_key`` (default ``"action_value"``),
    writes ``out_keys`` (default ``["action", "action_value", "chosen_action_value"]``): the argmax action in
    the format of the action space (``"one_hot"``: a one-hot int64 tensor, every maximum marked;
    ``"categorical"``: the int64 index), the values, and the value of the chosen action (shape ``[..., 1]``).

    ``action_space`` is a name or is inferred from ``spec``. Unlike torchrl 0.14, which raises a TypeError, a
    spec given as ``action_space`` is accepted (with a DeprecationWarning) and used as ``spec``, as older
    torchrl and its getting-started tutorial do.
    """

    def __init__(self, action_space=None, action_value_key=None, action_mask_key=None, out_keys=None,
                 var_nums=None, spec=None, safe=False):
        _spec_in_action_space(action_space, "QValueModule")
        action_space, spec = _action_space_and_spec(action_space, spec)
        if action_space not in ("one_hot", "mult_one_hot", "categorical"):
            raise ValueError(f"action_space must be one of ['one_hot', 'mult_one_hot', 'binary', 'categorical'], "
                             f"got {action_space}" + (" (binary is not implemented)" if action_space == "binary"
                                                      else ""))
        action_value_key = "action_value" if action_value_key is None else action_value_key
        self.action_space = action_space
        self.var_nums = var_nums
        self.action_mask_key = action_mask_key
        in_keys = [action_value_key] + ([action_mask_key] if action_mask_key is not None else [])
        if out_keys is None:
            out_keys = ["action", action_value_key, "chosen_action_value"]
        elif action_value_key not in out_keys:
            raise RuntimeError(f"Expected the action-value key to be '{action_value_key}' but got {out_keys[1]} "
                               "instead.")
        super().__init__()
        self.in_keys = in_keys
        self.out_keys = out_keys
        if not isinstance(spec, Composite):
            spec = Composite({out_keys[0]: spec})
        register_spec(self, safe, spec)

    spec = SafeModule.spec

    @property
    def action_value_key(self):
        """The key of the action values the module reads (its first in-key)."""
        return self.in_keys[0]

    def forward(self, tensordict):
        values = tensordict.get(self.action_value_key, None)
        if values is None:
            raise KeyError(f"Action value key {self.action_value_key} not found in {tensordict}.")
        if self.action_mask_key is not None:
            mask = tensordict.get(self.action_mask_key, None)
            if mask is None:
                raise KeyError(f"Action mask key {self.action_mask_key} not found in {tensordict}.")
            values = _ops.where(mask, values, float(np.finfo(values._data.dtype).min))
        if self.action_space == "categorical":
            action = values.argmax(dim=-1).to(int64)
            chosen = values.gather(-1, action.unsqueeze(-1))
        else:
            parts = values.split(self.var_nums, dim=-1) if self.action_space == "mult_one_hot" else (values,)
            if self.action_space == "mult_one_hot" and self.var_nums is None:
                raise ValueError("var_nums must be provided to the constructor for multi one-hot action spaces.")
            action = _ops.cat([(v == v.max(dim=-1, keepdim=True)[0]).to(int64) for v in parts], -1)
            chosen = (action * values).sum(-1, True)
        for key, value in zip(self.out_keys, (action, values, chosen)):
            tensordict.set(key, value)
        return tensordict


class QValueActor(TensorDictSequential):
    """A value network followed by a ``QValueModule``: ``module`` (a TensorDictModule writing
    ``action_value_key``, or a plain module reading ``in_keys``, default ``["observation"]``) gives the
    action values, the greedy action is written under ``action_key``."""

    def __init__(self, module, *, in_keys=None, spec=None, safe=False, action_space=None, action_value_key=None,
                 action_key=None, chosen_action_value_key=None, action_mask_key=None):
        _spec_in_action_space(action_space, "QValueActor")
        action_space, spec = _action_space_and_spec(action_space, spec)
        action_value_key = "action_value" if action_value_key is None else action_value_key
        action_key = "action" if action_key is None else action_key
        chosen_action_value_key = "chosen_action_value" if chosen_action_value_key is None \
            else chosen_action_value_key
        out_keys = [action_key, action_value_key, chosen_action_value_key]
        if isinstance(module, TensorDictModuleBase):
            if unravel_key(action_value_key) not in [unravel_key(k) for k in module.out_keys]:
                raise KeyError(f"The key '{action_value_key}' is not part of the module out-keys.")
        else:
            module = TensorDictModule(module, in_keys=["observation"] if in_keys is None else in_keys,
                                      out_keys=[action_value_key])
        self.action_space = action_space
        self.action_value_key = action_value_key
        qvalue = QValueModule(action_value_key=action_value_key, out_keys=out_keys, spec=_leaf_action_spec(spec)
                              if spec is not None else None, safe=safe, action_space=action_space,
                              action_mask_key=action_mask_key)
        super().__init__(module, qvalue)

    @property
    def spec(self):
        """The spec of the last module (the QValueModule's: its action and action values)."""
        return self.module[-1].spec


class ActorValueOperator(TensorDictSequential):
    """A policy and a value network on one shared trunk: ``common_operator`` writes a hidden entry that
    ``policy_operator`` and ``value_operator`` both read. Running it runs all three;
    ``get_policy_operator()`` / ``get_value_operator()`` give the trunk followed by one head, sharing
    the parameters."""

    def __init__(self, common_operator, policy_operator, value_operator):
        super().__init__(common_operator, policy_operator, value_operator)

    def get_policy_operator(self):
        """The trunk then the policy head (probabilistic when the head is)."""
        head = self.module[1]
        if isinstance(head, ProbabilisticTensorDictSequential):
            return SafeProbabilisticTensorDictSequential(self.module[0], *head.module)
        return TensorDictSequential(self.module[0], head)

    def get_value_operator(self):
        """The trunk then the value head."""
        return TensorDictSequential(self.module[0], self.module[2])

    def get_policy_head(self):
        """The policy head alone (reads the hidden entry)."""
        return self.module[1]

    def get_value_head(self):
        """The value head alone (reads the hidden entry)."""
        return self.module[2]


class ActorCriticWrapper(TensorDictSequential):
    """A policy and a value network with no shared trunk, run one after the other; the getters return
    each one as it was given."""

    def __init__(self, policy_operator, value_operator):
        super().__init__(policy_operator, value_operator)

    def get_policy_operator(self):
        """The policy, as given."""
        return self.module[0]

    def get_value_operator(self):
        """The value network, as given."""
        return self.module[1]

    get_policy_head = get_policy_operator
    get_value_head = get_value_operator
