"""Value estimators as TensorDict modules: torchrl.objectives.value's ``TD0Estimator``,
``TD1Estimator``, ``TDLambdaEstimator`` and ``GAE``.

An estimator reads a ``[*B, T]`` TensorDict of transitions (an observation, ``("next", "reward")``,
``("next", "done")``, ``("next", "terminated")`` and the next observation), runs its value network
on the current and the next observations (writing ``"state_value"`` and ``("next", "state_value")``),
and writes ``"advantage"`` and ``"value_target"``. ``set_keys`` renames any of these entries.
The value network runs without recording gradients unless ``differentiable=True``; the next values
are always detached. Differences from torchrl: no functional ``params``/``target_params`` (a target
network is a module of its own, see ``rlpipe.objectives.LossModule``).

``value_chunk_size``/``num_chunks`` (along ``value_chunk_dim``) call the value network on pieces of
the batch, which bounds its memory without changing any result. ``shifted=True`` gets the value and
the next value from one network call over a ``T + shifted_budget`` long sequence (the observations,
with the true next observation inserted after each truncation and at the end), as torchrl does: the
samples pushed past the budget are marked False in ``"shifted_valid"`` and their advantage and value
target are 0, and the last kept sample is bootstrapped as a truncation.
"""
import dataclasses
import enum

from ... import _creation
from ...primitives.elementwise import where
from ...primitives.shape import cat
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad, set_grad_enabled
from ...tensordict.nn import TensorDictModuleBase
from ...tensordict import TensorDict, unravel_key
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


def _key_property(field):
    """A read-only property: the estimator's ``tensor_keys.<field>``."""
    return property(lambda self: getattr(self.tensor_keys, field),
                    doc=f"The key of the ``{field}`` entry (``tensor_keys.{field}``).")


class ValueEstimatorBase(TensorDictModuleBase):
    """What the estimators share: the keys, the value-network calls, the ``forward`` that writes the
    advantage and the value target. Every estimator takes torchrl's value-call options
    (``value_chunk_size``, ``num_chunks`` or its alias ``num_chunk``, ``value_chunk_dim``,
    ``shifted_budget``; see the module docstring). Subclasses define ``_estimate(gamma, value, next_value, reward,
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
                 average_rewards=False, value_chunk_size=None, num_chunks=None, num_chunk=None, value_chunk_dim=0,
                 shifted_budget=1):
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
        if shifted is not True and shifted is not False:
            raise ValueError(f"shifted must be a boolean, got {shifted!r}.")
        self.shifted = shifted
        self.value_chunk_size = _positive_int(value_chunk_size, "value_chunk_size")
        self.num_chunks = _positive_int(num_chunks, "num_chunks")
        alias = _positive_int(num_chunk, "num_chunk")
        if alias is not None and self.num_chunks is not None and alias != self.num_chunks:
            raise ValueError("num_chunks and num_chunk cannot both be set to different values.")
        self.num_chunks = self.num_chunks if alias is None else alias
        if self.value_chunk_size is not None and self.num_chunks is not None:
            raise ValueError("value_chunk_size and num_chunks cannot both be set. Use value_chunk_size to specify a "
                             "chunk size or num_chunks to specify a number of chunks.")
        if isinstance(value_chunk_dim, bool) or not isinstance(value_chunk_dim, int):
            raise TypeError(f"value_chunk_dim must be an integer, got {type(value_chunk_dim)}.")
        self.value_chunk_dim = value_chunk_dim
        if shifted_budget < 1:
            raise ValueError(f"shifted_budget must be >= 1, got {shifted_budget}.")
        self.shifted_budget = shifted_budget
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
        """The entry names the estimator reads and writes (set with ``set_keys``)."""
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

    advantage_key = _key_property("advantage")
    value_key = _key_property("value")
    value_target_key = _key_property("value_target")
    reward_key = _key_property("reward")
    done_key = _key_property("done")
    terminated_key = _key_property("terminated")
    steps_to_next_obs_key = _key_property("steps_to_next_obs")
    sample_log_prob_key = _key_property("sample_log_prob")

    @property
    def in_keys(self):
        """The entries the estimator reads: its value network's inputs, now and at the next step, and the
        next reward, done and terminated flags."""
        net_keys = list(getattr(self.value_network, "in_keys", []))
        keys = self.tensor_keys
        return net_keys + [("next", keys.reward), ("next", keys.done), ("next", keys.terminated)] + \
            [("next",) + (k if isinstance(k, tuple) else (k,)) for k in net_keys]

    @property
    def out_keys(self):
        """The entries the estimator writes: the advantage and the value target."""
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

    def _values(self, tensordict, time_dim, shifted=False):
        """(value, next_value, valid): the value network's outputs on the tensordict and on its
        "next" entry (written there), or the entries already present when there is no network (or
        ``skip_existing`` and both are there). The next value is detached. ``valid``: which samples
        the ``shifted`` single call kept (None without it)."""
        key = self.tensor_keys.value
        next_key = ("next",) + (key if isinstance(key, tuple) else (key,))
        present = tensordict.get(key, None) is not None and tensordict.get(next_key, None) is not None
        if self.value_network is None or (self.skip_existing and present):
            value, next_value = tensordict.get(key, None), tensordict.get(next_key, None)
            for k, v in ((key, value), (next_key, next_value)):
                if v is None:
                    raise ValueError(f"The tensor with key {k} is missing, and no value network was provided.")
            return value, next_value.detach(), None
        valid = None
        data = _nan_next_inputs_filled(tensordict, self.value_network.in_keys)
        if shifted:
            value, next_value, valid = self._shifted_values(data, time_dim)
        else:
            value = self._network_value(data)
            with no_grad():
                next_value = self._network_value(data["next"])
        tensordict.set(key, value)
        tensordict.set(next_key, next_value)
        return value, next_value.detach(), valid

    def _network_value(self, data):
        """The value network's value on ``data``, called chunk by chunk when chunking is asked for."""
        key = self.tensor_keys.value
        chunks = self._chunks(data)
        if len(chunks) == 1:
            return self.value_network(data)[key]
        return cat([self.value_network(chunk)[key] for chunk in chunks], self._chunk_dim(data.batch_dims))

    def _chunk_dim(self, ndim):
        if not -ndim <= self.value_chunk_dim < ndim:
            raise ValueError(f"value_chunk_dim={self.value_chunk_dim} is out of bounds for ndim={ndim}.")
        return self.value_chunk_dim % ndim

    def _chunks(self, data):
        """torchrl's pieces: ``num_chunks`` near-equal ones or pieces of ``value_chunk_size``."""
        if self.num_chunks is None and self.value_chunk_size is None:
            return (data,)
        dim = self._chunk_dim(data.batch_dims)
        size = data.batch_size[dim]
        if self.num_chunks is not None:
            n = min(self.num_chunks, size)
            return (data,) if n <= 1 else tuple(data.tensor_split(n, dim))
        return (data,) if size <= self.value_chunk_size else tuple(data.split(self.value_chunk_size, dim))

    def _shifted_values(self, tensordict, time_dim):
        """torchrl's single call: the value network on one ``[..., T + shifted_budget]`` sequence
        holding each step's input at its slot, the true next input inserted after every truncation
        (done and not terminated) and after the last kept step; the values at each step's slot and
        the next one. Steps pushed past the budget are not kept (``valid`` False)."""
        keys = self.tensor_keys
        in_keys = list(self.value_network.in_keys)
        n = tensordict.batch_size[time_dim]
        length = n + self.shifted_budget
        reset = (_flat_signal(tensordict[("next", keys.done)], tensordict.batch_dims)
                 & ~_flat_signal(tensordict.get(("next", keys.terminated), tensordict[("next", keys.done)]),
                                 tensordict.batch_dims))
        reset = reset.clone()
        reset.narrow(time_dim, n - 1, 1).fill_(False)
        resets_before = reset.long().cumsum(time_dim) - reset.long()
        steps = _creation.arange(n, device=reset.device).reshape([-1 if d == time_dim else 1
                                                                   for d in range(reset.ndim)])
        root_slot = steps + resets_before
        next_slot = root_slot + 1
        valid = next_slot < length
        inserted = (reset & valid) | _last_valid(valid, time_dim)
        boundary_slot = n + reset.long().sum(time_dim, keepdim=True)
        root, nxt = tensordict, tensordict["next"]
        sequence = {}
        for key in in_keys:
            value = root.get(key, None)
            if value is None:
                continue
            next_value = nxt.get(key, value)
            slots = value.new_zeros(value.shape[:time_dim] + (length + 1,) + value.shape[time_dim + 1:])
            slots = _scatter_time(slots, root_slot, value, root_slot < length, time_dim)
            slots = _scatter_time(slots, next_slot, next_value, inserted, time_dim)
            slots = _scatter_time(slots, boundary_slot, next_value.narrow(time_dim, n - 1, 1), boundary_slot < length,
                                  time_dim)
            sequence[key] = slots.narrow(time_dim, 0, length)
        batch = list(tensordict.batch_size)
        batch[time_dim] = length
        values = self._network_value(TensorDict(sequence, batch_size=batch))
        done_shape = tensordict[("next", keys.done)].shape
        value = _gather_time(values, root_slot.clamp_max(length - 1), time_dim)
        next_value = _gather_time(values, next_slot.clamp_max(length - 1), time_dim)
        if value.shape != done_shape and value.numel() == done_shape.numel():
            value, next_value = value.reshape(done_shape), next_value.reshape(done_shape)
        return value, next_value, valid

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
        time_dim = self._get_time_dim(time_dim, tensordict)
        with set_grad_enabled(self.differentiable):
            value, next_value, valid = self._values(tensordict, time_dim, self.shifted)
            reward, done, terminated = self._signals(tensordict)
            if valid is not None:  # the last kept step of each row ends it as a truncation
                last = _like(_last_valid(valid, time_dim), done.shape)
                done, terminated = done.masked_fill(last, True), terminated.masked_fill(last, False)
            advantage, target = self._estimate(self._gamma(tensordict, reward), value, next_value, reward, done,
                                               terminated, time_dim)
            advantage = self._post_advantage(advantage, valid)
        if valid is not None:
            tensordict.set("shifted_valid", valid)
            advantage = advantage.masked_fill(~_like(valid, advantage.shape), 0)
            target = target.masked_fill(~_like(valid, target.shape), 0)
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

    def _post_advantage(self, advantage, valid):
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
            value, found, _ = self._values(tensordict, self._get_time_dim(time_dim, tensordict))
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
                 deactivate_vmap=False, **value_calls):
        super().__init__(value_network=value_network, shifted=shifted, differentiable=differentiable,
                         advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                         skip_existing=skip_existing, device=device, average_rewards=average_rewards, **value_calls)
        self._register_coefficient("gamma", gamma)

    def _estimate(self, gamma, value, next_value, reward, done, terminated, time_dim):
        target = td0_return_estimate(gamma, next_value, reward, terminated)
        return (None if value is None else target - value), target


class TDLambdaEstimator(ValueEstimatorBase):
    """TD(lambda) targets (``td_lambda_return_estimate``): bootstrapped at truncations and at the end
    of the batch, not at terminations."""

    def __init__(self, *, gamma, lmbda, value_network, average_rewards=False, differentiable=False,
                 vectorized=True, skip_existing=None, advantage_key=None, value_target_key=None, value_key=None,
                 shifted=False, device=None, time_dim=None, deactivate_vmap=False, **value_calls):
        super().__init__(value_network=value_network, shifted=shifted, differentiable=differentiable,
                         advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                         skip_existing=skip_existing, device=device, time_dim=time_dim,
                         average_rewards=average_rewards, **value_calls)
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
                 time_dim=None, deactivate_vmap=False, **value_calls):
        super().__init__(gamma=gamma, lmbda=1.0, value_network=value_network, average_rewards=average_rewards,
                         differentiable=differentiable, skip_existing=skip_existing, advantage_key=advantage_key,
                         value_target_key=value_target_key, value_key=value_key, shifted=shifted, device=device,
                         time_dim=time_dim, **value_calls)


class GAE(ValueEstimatorBase):
    """Generalized advantage estimation (``generalized_advantage_estimate``); ``average_gae=True``
    standardizes the advantage over the batch (mean 0, std 1, the std clamped below at 1e-4)."""

    def __init__(self, *, gamma, lmbda, value_network, average_gae=False, differentiable=False, vectorized=None,
                 skip_existing=None, advantage_key=None, value_target_key=None, value_key=None, shifted=False,
                 device=None, time_dim=None, auto_reset_env=False, deactivate_vmap=False, **value_calls):
        super().__init__(value_network=value_network, shifted=shifted, differentiable=differentiable,
                         advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                         skip_existing=skip_existing, device=device, time_dim=time_dim, **value_calls)
        self._register_coefficient("gamma", gamma)
        self._register_coefficient("lmbda", lmbda)
        self.average_gae = average_gae
        self.vectorized = vectorized
        self.auto_reset_env = auto_reset_env

    needs_value = True

    def _estimate(self, gamma, value, next_value, reward, done, terminated, time_dim):
        return generalized_advantage_estimate(gamma, self.lmbda, value, next_value, reward, done, terminated,
                                              time_dim=time_dim)

    def _post_advantage(self, advantage, valid):
        if not self.average_gae:
            return advantage
        if valid is None:
            return (advantage - advantage.mean()) / advantage.std().clamp_min(1e-4)
        kept = _like(valid, advantage.shape).to(advantage.dtype)  # torchrl: the kept samples' mean and (biased) std
        count = kept.sum().clamp_min(1)
        mean = (advantage * kept).sum() / count
        std = (((advantage - mean) ** 2 * kept).sum() / count).sqrt().clamp_min(1e-4)
        return (advantage - mean) / std


def _nan_next_inputs_filled(data, in_keys):
    """``data`` with each NaN of a value-network input's ``("next", k)`` replaced by the root ``k``
    (a shallow copy; ``data`` itself when there is none), as torchrl: ``NextStateReconstructor``
    leaves NaN next observations at trajectory ends, and ``V(NaN) * (1 - done)`` would still be NaN.
    Where the step terminated the substitute is masked out; at a truncation it is an approximate
    bootstrap."""
    out = data
    for key in in_keys:
        root = data.get(key, None)
        next_key = ("next",) + (key if isinstance(key, tuple) else (key,))
        nxt = data.get(next_key, None)
        if root is None or nxt is None or not root.is_floating_point() or nxt.shape != root.shape:
            continue
        nan = nxt.isnan()
        if bool(nan.any()):
            out = out.copy() if out is data else out
            out.set(next_key, where(nan, root, nxt))
    return out


def _positive_int(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer or None, got {type(value)}.")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}.")
    return value


def _flat_signal(signal, batch_dims):
    """A done-like entry ``[*B, T, ...]`` as one flag per step (any of its trailing entries)."""
    return signal.reshape(tuple(signal.shape[:batch_dims]) + (-1,)).any(-1)


def _last_valid(valid, time_dim):
    """The last kept step along the time dim: valid, with its successor not (or the row's end)."""
    following = cat([valid.narrow(time_dim, 1, valid.shape[time_dim] - 1),
                     valid.new_ones(valid.shape[:time_dim] + (1,) + valid.shape[time_dim + 1:])], time_dim)
    return valid & ~following


def _like(mask, shape):
    """``mask`` (batch-shaped) broadcast to ``shape``, over its trailing dims."""
    return mask.reshape(tuple(mask.shape) + (1,) * (len(shape) - mask.ndim)).expand(tuple(shape))


def _scatter_time(slots, index, source, keep, time_dim):
    """``source`` written into ``slots`` at the time positions ``index`` where ``keep``; the others go to
    the spare last slot (which the caller drops)."""
    spare = slots.shape[time_dim] - 1
    index = where(keep, index, spare)
    return slots.scatter(time_dim, _like(index, source.shape), source)


def _gather_time(values, index, time_dim):
    shape = list(values.shape)
    shape[time_dim] = index.shape[time_dim]
    return values.gather(time_dim, _like(index, shape))


# torchrl's older names, kept as aliases there
TD0Estimate = TD0Estimator
TD1Estimate = TD1Estimator
TDLambdaEstimate = TDLambdaEstimator
