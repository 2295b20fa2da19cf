"""torchrl.objectives.common: ``LossModule``, the base of every loss.

A loss module takes a TensorDict of data and returns a TensorDict of loss terms (``loss_*`` entries,
which the caller sums, plus detached diagnostics). Differences from torchrl, said once here:

* the networks stay ordinary stateful modules: ``convert_to_functional(module, name,
  create_target_params=True)`` registers ``module`` as ``self.<name>`` and a deep copy as
  ``self.target_<name>`` (its parameters are not in ``loss.parameters()`` and never require grad);
  ``loss.functional`` is ``False`` and ``forward`` takes no ``params``;
* ``<name>_params`` / ``target_<name>_params`` are read-only TensorDicts of those parameters.
"""
import copy
import dataclasses
import warnings

from .._utils import rl_warnings
from ..nn import Module
from ..nn.modules.dropout import _DropoutNd
from ..tensordict import TensorDict, unravel_key
from .value.advantages import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, ValueEstimatorBase, \
    ValueEstimators

__all__ = ["LossModule"]

_ESTIMATORS = {ValueEstimators.TD0: TD0Estimator, ValueEstimators.TD1: TD1Estimator,
               ValueEstimators.TDLambda: TDLambdaEstimator, ValueEstimators.GAE: GAE}

_DEFAULT_VALUE_KWARGS = {
    ValueEstimators.TD0: {"gamma": 0.99, "differentiable": True},
    ValueEstimators.TD1: {"gamma": 0.99, "differentiable": True},
    ValueEstimators.TDLambda: {"gamma": 0.99, "lmbda": 0.95, "differentiable": True},
    ValueEstimators.GAE: {"gamma": 0.99, "lmbda": 0.95, "differentiable": True},
}


def default_value_kwargs(value_type):
    """The keyword arguments a loss module builds an estimator of ``value_type`` with by default
    (``{"gamma": 0.99, "lmbda": 0.95, "differentiable": True}`` for TD(lambda))."""
    try:
        return dict(_DEFAULT_VALUE_KWARGS[ValueEstimators(value_type) if isinstance(value_type, str) else
                                          value_type])
    except (KeyError, ValueError):
        raise NotImplementedError(f"No value estimator registered for {value_type!r}.") from None


class LossModule(Module):
    """Base class of the losses: keys (``set_keys``/``tensor_keys``), the value estimator
    (``make_value_estimator``/``value_estimator``), target networks and loss reduction."""

    @dataclasses.dataclass
    class _AcceptedKeys:
        pass

    default_keys = _AcceptedKeys
    default_value_estimator = None
    SUPPORTED_VALUE_ESTIMATORS = None
    functional = False  # the networks are stateful modules (see the module docstring)
    TARGET_NET_WARNING = (
        "No target network updater has been associated "
        "with this loss module, but target parameters have been found. "
        "While this is supported, it is expected that the target network "
        "updates will be manually performed. You can deactivate this warning "
        "by turning the RL_WARNINGS env variable to False."
    )

    def __init__(self):
        super().__init__()
        self.__dict__["_tensor_keys"] = None
        self.__dict__["_value_estimator"] = None
        self.__dict__["_targets"] = {}  # name -> target name
        # name -> whether a target updater (SoftUpdate/HardUpdate) looks after its target copy
        self.__dict__["_has_update_associated"] = {}
        self.reduction = "mean"
        self.register_forward_pre_hook(_updater_check_forward_prehook)

    # ---- keys ---------------------------------------------------------------------------------
    @property
    def tensor_keys(self):
        """The entry names the loss reads and writes (a dataclass; change them with ``set_keys``)."""
        if self._tensor_keys is None:
            self.__dict__["_tensor_keys"] = self._AcceptedKeys()
        return self._tensor_keys

    def set_keys(self, **kwargs):
        """Renames the entries the loss reads and writes (``set_keys(action="my_action")``); the
        value estimator's keys follow."""
        accepted = {f.name for f in dataclasses.fields(self._AcceptedKeys)}
        for key, value in kwargs.items():
            if key not in accepted:
                raise ValueError(f"{key} is not an accepted tensordict key")
            if value is None or not isinstance(value, (str, tuple)):
                raise ValueError(f"key name must be of type NestedKey (Union[str, Tuple[str]]) but got {value!r}")
        current = dataclasses.asdict(self.tensor_keys)
        current.update({k: unravel_key(v) for k, v in kwargs.items()})
        self.__dict__["_tensor_keys"] = self._AcceptedKeys(**current)
        self._forward_value_estimator_keys(**kwargs)
        return self

    def _forward_value_estimator_keys(self, **kwargs):
        if self._value_estimator is None:
            return
        names = {f.name for f in dataclasses.fields(self._value_estimator._AcceptedKeys)}
        keys = dataclasses.asdict(self.tensor_keys)
        self._value_estimator.set_keys(**{k: v for k, v in keys.items() if k in names})

    # ---- value estimator ----------------------------------------------------------------------
    @property
    def value_estimator(self):
        """The estimator of the value targets (made with ``make_value_estimator()`` on first use)."""
        if self._value_estimator is None:
            self.make_value_estimator()
        return self._value_estimator

    @value_estimator.setter
    def value_estimator(self, value):
        self.__dict__["_value_estimator"] = value

    def _estimator_value_network(self):
        return getattr(self, "critic_network", None) or getattr(self, "value_network", None)

    def make_value_estimator(self, value_type=None, **hyperparams):
        """Builds the value estimator: a ``ValueEstimators`` member (with ``default_value_kwargs``
        updated by ``hyperparams``), an estimator class, or an estimator instance."""
        if value_type is None:
            value_type = self.default_value_estimator
        if isinstance(value_type, ValueEstimatorBase):
            estimator = value_type
        else:
            if isinstance(value_type, type) and issubclass(value_type, ValueEstimatorBase):
                cls, kwargs = value_type, {}
            else:
                try:
                    value_type = ValueEstimators(value_type) if isinstance(value_type, str) else value_type
                    cls = _ESTIMATORS[value_type]
                except (KeyError, ValueError):
                    raise NotImplementedError(f"Unknown value type {value_type}") from None
                if self.SUPPORTED_VALUE_ESTIMATORS is not None and value_type not in self.SUPPORTED_VALUE_ESTIMATORS:
                    raise NotImplementedError(f"Value type {value_type} is not implemented for loss "
                                              f"{type(self).__name__}.")
                kwargs = default_value_kwargs(value_type)
            kwargs.update(hyperparams)
            kwargs.setdefault("value_network", self._estimator_value_network())
            estimator = cls(**kwargs)
        self.__dict__["_value_estimator"] = estimator
        self._forward_value_estimator_keys()
        return self

    # ---- networks -----------------------------------------------------------------------------
    def convert_to_functional(self, module, module_name, expand_dim=None, create_target_params=False,
                              compare_against=None, **kwargs):
        """Registers ``module`` as ``self.<module_name>``; with ``create_target_params`` also a deep
        copy as ``self.target_<module_name>``, whose parameters never require gradients."""
        setattr(self, module_name, module)
        target_name = "target_" + module_name
        if create_target_params:
            target = copy.deepcopy(module)
            for p in target.parameters():
                p.requires_grad_(False)
            setattr(self, target_name, target)
        else:
            self.__dict__[target_name] = module  # the source itself (no separate target)
        self._targets[module_name] = target_name
        self._has_update_associated[module_name] = not create_target_params

    def _target_pairs(self):
        return [(getattr(self, name), getattr(self, target)) for name, target in self._targets.items()]

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """The trained parameters: those of the target networks are left out (torchrl keeps them as
        buffers)."""
        skip = tuple((prefix + "." if prefix else "") + t + "." for t in self._targets.values())
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            if not name.startswith(skip):
                yield name, p

    def __getattr__(self, name):
        if name.endswith("_params") and "_targets" in self.__dict__:
            module_name = name[:-len("_params")]
            if module_name in self._targets or module_name in self._targets.values():
                return _params_td(getattr(self, module_name))
        return super().__getattr__(name)

    # ---- vmap over ensembles -------------------------------------------------------------------
    @property
    def vmap_randomness(self):
        """vmap's mode for random ops in the loss's vmapped networks (torchrl's): ``"different"`` when
        a network holds a random module (dropout), else ``"error"``, unless set with
        ``set_vmap_randomness``."""
        if self.__dict__.get("_vmap_randomness") is None:
            random = any(isinstance(m, _DropoutNd) for m in self.modules())
            self.__dict__["_vmap_randomness"] = "different" if random else "error"
        return self.__dict__["_vmap_randomness"]

    def set_vmap_randomness(self, value):
        """Sets ``vmap_randomness`` to ``"error"``, ``"same"`` or ``"different"``."""
        if value not in ("error", "same", "different"):
            raise ValueError(f"Wrong vmap randomness, should be one of 'error', 'same' or 'different', got {value!r}.")
        self.__dict__["_vmap_randomness"] = value
        self._make_vmap()

    def _make_vmap(self):
        """Hands the vmap settings to the loss's vmapped networks (none in the base class)."""

    # ---- reduction ----------------------------------------------------------------------------
    def _reduce(self, loss, weights=None):
        """``loss`` reduced by ``self.reduction``; with importance ``weights`` the mean is the weighted
        mean ``sum(w * loss) / sum(w)`` (torchrl's), the sum ``sum(w * loss)``."""
        if weights is not None:
            weights = weights.reshape(tuple(loss.shape))
            loss = loss * weights
            if self.reduction == "mean":
                return loss.sum() / weights.sum()
        if self.reduction == "mean":
            return loss.mean()
        if self.reduction == "sum":
            return loss.sum()
        if self.reduction == "none":
            return loss
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {self.reduction!r}")

    def forward(self, tensordict):
        """The loss terms for the data in ``tensordict``: a TensorDict of ``loss_*`` entries (to sum
        and backpropagate) and detached diagnostics."""
        raise NotImplementedError(f"{type(self).__name__} must define forward(tensordict)")


def _updater_check_forward_prehook(module, args):
    """As torchrl: a loss with target networks that no updater looks after warns (a UserWarning,
    silenced by ``RL_WARNINGS=0``) each time it is called; the targets are then the user's to update."""
    if not all(module._has_update_associated.values()) and rl_warnings():
        # stacklevel: the caller's line (hook <- run <- _call_impl <- __call__)
        warnings.warn(module.TARGET_NET_WARNING, category=UserWarning, stacklevel=4)


def _params_td(module):
    """The parameters of ``module`` as a TensorDict nested by submodule (``td["0", "weight"]``)."""
    td = TensorDict({}, batch_size=[])
    for name, p in module.named_parameters():
        td.set(tuple(name.split(".")), p)
    return td
