"""Value estimators as TensorDict modules: torchrl.objectives.value's ``TD0Estimator``,
``TD1Estimator``, ``TDLambdaEstimator`` and ``GAE``.

An estimator reads a ``[*B, T]`` TensorDict of transitions (an observation, ``("next", "reward")``,
``("next", "done")``, ``("next", "terminated")`` and the next observation), runs its value network
on the current and the next observations (writing ``"state_value"`` and ``("next", "state_value")``),
and writes ``"advantage"`` and ``"value_target"``. ``set_keys`` renames any of these entries.
The value network runs without recording gradients unless ``differentiable=True``; the next values
are always detached. Differences from torchrl: no functional ``params``/``target_params`` (a target
network is a module of its own, see ``rlpipe.objectives.LossModule``), no ``shifted=True`` single
call (accepted and computed as two calls), no value-network chunking.
"""
import dataclasses
import enum

from ... import _creation
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad, set_grad_enabled
from ...tensordict.nn import TensorDictModuleBase
from ...tensordict import unravel_key
from .functional import (td0_return_estimate, td_lambda_return_estimate, generalized_advantage_estimate)

__all__ = ["GAE", "TD0Estimate", "TD0Estimator", "TD1Estimate", "TD1Estimator", "TDLambdaEstimate",
           "TDLambdaEstimator", "ValueEstimatorBase", "ValueEstimators"]


class ValueEstimators(enum.Enum):
    """The value estimators a loss module can be given by name (``loss.make_value_estimator(...)``)."""
    TD0 = "Bootstrapped TD (1-step return)"
    TD1 = "TD(1) (infinity-step return)"
    TDLambda = "TD(lambda)"
    GAE = "Generalized advantage estimate"
    VTrace = "V-trace"


class ValueEstimatorBase(TensorDictModuleBase):
    """What the estimators share: the keys, the value-network calls, the ``forward`` that writes the
    advantage and the value target. Subclasses define ``_estimate(gamma, value, next_value, reward,
    done, terminated, time_dim) -> (advantage, value_target)``."""

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries an estimator reads and writes (``set_keys(name=key)`` renames one)."""
        advantage: object = "advantage"
        value_target: object = "value_target"
        value: object = "state_value"
        reward: object = "reward"
        done: object = "done"
        terminated: object = "terminated"
        steps_to_next_obs: object = "steps_to_next_obs"
        sample_log_prob: object = "action_log_prob"

    default_keys = _AcceptedKeys
    needs_value = False  # whether the value target depends on the current state's value (GAE)

    def __init__(self, *, value_network, shifted=False, differentiable=False, skip_existing=None,
                 advantage_key=None, value_target_key=None, value_key=None, device=None, time_dim=None,
                 average_rewards=False):
        super().__init__()
        for name, given in (("advantage_key", advantage_key), ("value_target_key", value_target_key),
                            ("value_key", value_key)):
            if given is not None:
                raise RuntimeError(f"Setting '{name}' via constructor is deprecated, use "
                                   f".set_keys({name}='some_key') instead.")
        if value_network is not None and not callable(value_network):
            raise TypeError(f"value_network must be a TensorDictModule (or None), got {type(value_network).__name__}")
        self._tensor_keys = None
        self.dep_keys = {}
        self.differentiable = differentiable
        self.skip_existing = skip_existing
        self.shifted = bool(shifted)
        self.time_dim = time_dim
        self.average_rewards = average_rewards
        self._device = device
        self.__dict__["value_network"] = value_network  # not a child: the loss module owns the network

    def _register_coefficient(self, name, value):
        tensor = value.detach().clone() if isinstance(value, Tensor) else _creation.tensor(float(value))
        self.register_buffer(name, tensor if self._device is None else tensor.to(self._device))

    # ---- keys ---------------------------------------------------------------------------------
    @property
    def tensor_keys(self):
        if self._tensor_keys is None:
            self.set_keys()
        return self._tensor_keys

    def set_keys(self, **kwargs):
        """Renames entries: ``set_keys(value="my_value", advantage=("agents", "adv"))``."""
        for key, value in list(kwargs.items()):
            if value is None:
                raise ValueError("tensordict keys cannot be None")
            if not isinstance(value, (str, tuple)):
                raise ValueError(f"key name must be of type NestedKey (Union[str, Tuple[str]]) but got {type(value)}")
            if key not in {f.name for f in dataclasses.fields(self._AcceptedKeys)}:
                raise KeyError(f"{key} is not an accepted tensordict key for advantages")
            value = unravel_key(value)
            out_keys = getattr(self.value_network, "out_keys", None)
            if key == "value" and out_keys is not None and value not in list(out_keys):
                raise KeyError(f"value key '{value}' not found in value network out_keys {list(out_keys)}")
            kwargs[key] = value
        conf = dataclasses.asdict(self.default_keys()) if self._tensor_keys is None else \
            dataclasses.asdict(self._tensor_keys)
        if self._tensor_keys is None:
            conf.update(self.dep_keys)
        conf.update(kwargs)
        self._tensor_keys = self._AcceptedKeys(**conf)

    @property
    def advantage_key(self):
        return self.tensor_keys.advantage

    @property
    def value_key(self):
        return self.tensor_keys.value

    @property
    def value_target_key(self):
        return self.tensor_keys.value_target

    @property
    def reward_key(self):
        return self.tensor_keys.reward

    @property
    def done_key(self):
        return self.tensor_keys.done

    @property
    def terminated_key(self):
        return self.tensor_keys.terminated

    @property
    def steps_to_next_obs_key(self):
        return self.tensor_keys.steps_to_next_obs

    @property
    def sample_log_prob_key(self):
        return self.tensor_keys.sample_log_prob

    @property
    def in_keys(self):
        net_keys = list(getattr(self.value_network, "in_keys", []))
        keys = self.tensor_keys
        return net_keys + [("next", keys.reward), ("next", keys.done), ("next", keys.terminated)] + \
            [("next",) + (k if isinstance(k, tuple) else (k,)) for k in net_keys]

    @property
    def out_keys(self):
        return [self.tensor_keys.advantage, self.tensor_keys.value_target]

    # ---- pieces -------------------------------------------------------------------------------
    def _get_time_dim(self, time_dim, data):
        if time_dim is None:
            time_dim = self.time_dim
        if time_dim is None:
            return data.batch_dims - 1
        return time_dim + data.batch_dims if time_dim < 0 else time_dim

    def _gamma(self, tensordict, reward):
        gamma = self.gamma.to(reward.device) if self.gamma.device != reward.device else self.gamma
        steps = tensordict.get(self.tensor_keys.steps_to_next_obs, None)
        if steps is not None:
            gamma = gamma ** steps.reshape(tuple(reward.shape))
        return gamma

    def _values(self, tensordict):
        """(value, next_value): the value network's outputs on the tensordict and on its "next"
        entry (written there), or the entries already present when there is no network (or
        ``skip_existing`` and both are there). The next value is detached."""
        key = self.tensor_keys.value
        next_key = ("next",) + (key if isinstance(key, tuple) else (key,))
        present = tensordict.get(key, None) is not None and tensordict.get(next_key, None) is not None
        if self.value_network is None or (self.skip_existing and present):
            value, next_value = tensordict.get(key, None), tensordict.get(next_key, None)
            for k, v in ((key, value), (next_key, next_value)):
                if v is None:
                    raise ValueError(f"The tensor with key {k} is missing, and no value network was provided.")
            return value, next_value.detach()
        value = self.value_network(tensordict)[key]
        with no_grad():
            next_value = self.value_network(tensordict["next"])[key]
        return value, next_value

    def _signals(self, tensordict):
        keys = self.tensor_keys
        reward = tensordict[("next", keys.reward)]
        done = tensordict[("next", keys.done)]
        terminated = tensordict.get(("next", keys.terminated), done)
        if self.average_rewards:
            reward = reward - reward.mean()
            reward = reward / reward.std().clamp_min(1e-5)
            tensordict.set(("next", keys.reward), reward)
        return reward, done, terminated

    def _check_time(self, tensordict):
        if tensordict.batch_dims < 1:
            raise RuntimeError("Expected input tensordict to have at least one dimension, got "
                               f"tensordict.batch_size = {tensordict.batch_size}")

    # ---- API ----------------------------------------------------------------------------------
    def forward(self, tensordict=None, *, params=None, target_params=None, time_dim=None, **kwargs):
        """Writes the advantage and the value target into ``tensordict`` (shape ``[*B, T]``) and
        returns it. With tensors as keywords instead (``obs=..., next_reward=...``) it returns
        ``(advantage, value_target)``."""
        if params is not None or target_params is not None:
            raise NotImplementedError("rlpipe's estimators take no functional params: the value network "
                                      "runs with its own parameters")
        dispatched = tensordict is None
        if dispatched:
            tensordict = self._dispatched(kwargs)
        self._check_time(tensordict)
        with set_grad_enabled(self.differentiable):
            value, next_value = self._values(tensordict)
            reward, done, terminated = self._signals(tensordict)
            advantage, target = self._estimate(self._gamma(tensordict, reward), value, next_value, reward, done,
                                               terminated, self._get_time_dim(time_dim, tensordict))
            advantage = self._post_advantage(advantage)
        tensordict.set(self.tensor_keys.advantage, advantage)
        tensordict.set(self.tensor_keys.value_target, target)
        if dispatched:
            return advantage, target
        return tensordict

    def _dispatched(self, kwargs):
        from rlpipe.tensordict import TensorDict
        values = {}
        for key in self.in_keys:
            name = key if isinstance(key, str) else "_".join(key)
            if name in kwargs:
                values[key] = kwargs.pop(name)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        shapes = [tuple(v.shape[:-1]) for v in values.values()]
        td = TensorDict({}, batch_size=list(min(shapes, key=len)) if shapes else [])
        for key, value in values.items():
            td.set(key, value)
        return td

    def _post_advantage(self, advantage):
        return advantage

    def value_estimate(self, tensordict, target_params=None, next_value=None, time_dim=None, **kwargs):
        """The value target alone (the next values from ``next_value`` when given, else from the
        value network or the ``("next", value)`` entry)."""
        self._check_time(tensordict)
        with set_grad_enabled(self.differentiable):
            return self._value_target(tensordict, next_value, time_dim)

    def _value_target(self, tensordict, next_value, time_dim):
        value = None
        if self.needs_value:
            value, found = self._values(tensordict)
            next_value = found if next_value is None else next_value
        elif next_value is None:
            next_value = self._next_value(tensordict)
        reward, done, terminated = self._signals(tensordict)
        _, target = self._estimate(self._gamma(tensordict, reward), value, next_value, reward, done, terminated,
                                   self._get_time_dim(time_dim, tensordict))
        return target

    def _next_value(self, tensordict):
        key = self.tensor_keys.value
        next_td = tensordict["next"]
        if self.value_network is not None:
            with no_grad():
                self.value_network(next_td)
        return next_td[key].detach()


class TD0Estimator(ValueEstimatorBase):
    """Bootstrapped one-step targets: ``value_target = r + gamma * (1 - terminated) * V(s')``."""

    def __init__(self, *, gamma, value_network, shifted=False, average_rewards=False, differentiable=False,
                 advantage_key=None, value_target_key=None, value_key=None, skip_existing=None, device=None,
                 deactivate_vmap=False):
        super().__init__(value_network=value_network, shifted=shifted, differentiable=differentiable,
                         advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                         skip_existing=skip_existing, device=device, average_rewards=average_rewards)
        self._register_coefficient("gamma", gamma)

    def _estimate(self, gamma, value, next_value, reward, done, terminated, time_dim):
        target = td0_return_estimate(gamma, next_value, reward, terminated)
        return (None if value is None else target - value), target


class TDLambdaEstimator(ValueEstimatorBase):
    """TD(lambda) targets (``td_lambda_return_estimate``): bootstrapped at truncations and at the end
    of the batch, not at terminations."""

    def __init__(self, *, gamma, lmbda, value_network, average_rewards=False, differentiable=False,
                 vectorized=True, skip_existing=None, advantage_key=None, value_target_key=None, value_key=None,
                 shifted=False, device=None, time_dim=None, deactivate_vmap=False):
        super().__init__(value_network=value_network, shifted=shifted, differentiable=differentiable,
                         advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                         skip_existing=skip_existing, device=device, time_dim=time_dim,
                         average_rewards=average_rewards)
        self._register_coefficient("gamma", gamma)
        self._register_coefficient("lmbda", lmbda)
        self.vectorized = vectorized  # one implementation serves both (see functional.py)

    def _estimate(self, gamma, value, next_value, reward, done, terminated, time_dim):
        target = td_lambda_return_estimate(gamma, self.lmbda, next_value, reward, done, terminated,
                                           time_dim=time_dim)
        return (None if value is None else target - value), target


class TD1Estimator(TDLambdaEstimator):
    """TD(1) targets: discounted sums of rewards until the trajectory ends, bootstrapped there from
    the next value unless it terminated (TD(lambda) with ``lmbda=1``)."""

    def __init__(self, *, gamma, value_network, average_rewards=False, differentiable=False, skip_existing=None,
                 advantage_key=None, value_target_key=None, value_key=None, shifted=False, device=None,
                 time_dim=None, deactivate_vmap=False):
        super().__init__(gamma=gamma, lmbda=1.0, value_network=value_network, average_rewards=average_rewards,
                         differentiable=differentiable, skip_existing=skip_existing, advantage_key=advantage_key,
                         value_target_key=value_target_key, value_key=value_key, shifted=shifted, device=device,
                         time_dim=time_dim)


class GAE(ValueEstimatorBase):
    """Generalized advantage estimation (``generalized_advantage_estimate``); ``average_gae=True``
    standardizes the advantage over the batch (mean 0, std 1, the std clamped below at 1e-4)."""

    def __init__(self, *, gamma, lmbda, value_network, average_gae=False, differentiable=False, vectorized=None,
                 skip_existing=None, advantage_key=None, value_target_key=None, value_key=None, shifted=False,
                 device=None, time_dim=None, auto_reset_env=False, deactivate_vmap=False):
        super().__init__(value_network=value_network, shifted=shifted, differentiable=differentiable,
                         advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                         skip_existing=skip_existing, device=device, time_dim=time_dim)
        self._register_coefficient("gamma", gamma)
        self._register_coefficient("lmbda", lmbda)
        self.average_gae = average_gae
        self.vectorized = vectorized
        self.auto_reset_env = auto_reset_env

    needs_value = True

    def _estimate(self, gamma, value, next_value, reward, done, terminated, time_dim):
        return generalized_advantage_estimate(gamma, self.lmbda, value, next_value, reward, done, terminated,
                                              time_dim=time_dim)

    def _post_advantage(self, advantage):
        if not self.average_gae:
            return advantage
        return (advantage - advantage.mean()) / advantage.std().clamp_min(1e-4)


# torchrl's older names, kept as aliases there
TD0Estimate = TD0Estimator
TD1Estimate = TD1Estimator
TDLambdaEstimate = TDLambdaEstimator
