"""torchrl.objectives.sac: ``SACLoss`` and ``DiscreteSACLoss``, the soft actor-critic losses.

Differences from torchrl 0.14, where rlpipe's stateful networks make them unavoidable:

* the ``num_qvalue_nets`` Q-networks are ordinary modules held in ``loss.qvalue_network`` (a
  ``QValueEnsemble``, a ``ModuleList`` with the in- and out-keys of its members); as in torchrl they
  run under ``vmap`` over their stacked parameters (stacked at each call, so the trained tensors stay
  the members' own), or one after the other with ``deactivate_vmap=True``. From one module, the
  loss makes ``num_qvalue_nets`` deep copies and redraws every parameter uniformly between the
  smallest and the largest value of the original, as torchrl does when it expands the parameters;
  from a list of modules, it uses those modules themselves (torchrl stacks copies of their
  parameters), so training updates them;
* ``loss.qvalue_network_params`` nests the copies' parameters under ``"0"``, ``"1"``, ... instead of
  stacking them along a leading dimension (``flatten_keys().values()`` still lists the trainable
  parameters);
* with ``value_network`` (SAC v1) the priorities written into the input (squared TD errors) are
  detached;
* ``separate_losses=True`` with a Q-network that shares parameters with the actor is not supported
  (the deep copies could not keep sharing them); without shared parameters it changes nothing, as
  in torchrl.
"""
import copy
import dataclasses
import math
import warnings

from .. import _creation
from ..primitives import stack, where
from ..autograd.grad_mode import no_grad
from ..func import functional_call, vmap
from ..func._functional_call import named_tensors
from ..func._ensemble import StackedStates
from ..nn import Module, ModuleList, Parameter
from ..tensordict import TensorDict
from ..tensordict.nn.probabilistic import InteractionType, set_interaction_type
from .common import LossModule
from .dqn import _find_action_space
from .utils import distance_loss, hold_out_net
from .value.advantages import ValueEstimators

__all__ = ["DiscreteSACLoss", "QValueEnsemble", "SACLoss"]

_GAMMA_ERROR = ("Passing gamma / lambda parameters through the loss constructor is deprecated and has been "
                "removed. Use loss.make_value_estimator(gamma=...) instead.")


def _rsample_and_log_prob(dist):
    """A reparameterized draw from ``dist`` and its log-probability (scored at the exact pre-tanh
    value where the distribution offers ``rsample_and_log_prob``)."""
    if hasattr(dist, "rsample_and_log_prob"):
        return dist.rsample_and_log_prob()
    sample = dist.rsample()
    return sample, dist.log_prob(sample)


def _prob_module(actor):
    """The module of ``actor`` that knows its sample and log-probability keys (the actor itself or
    the last module of a probabilistic sequence)."""
    if hasattr(actor, "log_prob_keys"):
        return actor
    modules = getattr(actor, "module", None)
    if isinstance(modules, Module) and hasattr(modules, "__getitem__") and hasattr(modules[-1], "log_prob_keys"):
        return modules[-1]
    return None


def _redrawn_copy(module):
    """A deep copy of ``module`` whose parameters are drawn uniformly between the smallest and the
    largest value of the original's (its buffers are copied)."""
    clone = copy.deepcopy(module)
    with no_grad():
        for p in clone.parameters():
            if p.numel():
                p.uniform_(p.min().item(), p.max().item())
    return clone


class QValueEnsemble(ModuleList):
    """``num_qvalue_nets`` Q-networks with one set of in- and out-keys; ``values(td)`` runs each on
    ``td`` and stacks their first output along a new leading dimension ``[N, *B, 1]``.

    As torchrl's losses do, the members run as one batched computation: ``vmap`` over
    ``functional_call`` of the first member with the members' parameters stacked (a differentiable
    stack, so gradients reach each member). ``use_vmap = False`` (the loss's ``deactivate_vmap``)
    runs them one after the other instead; ``randomness`` is vmap's mode for random ops inside."""
    use_vmap = True
    randomness = "error"

    @property
    def in_keys(self):
        """The entries every member reads."""
        return list(self[0].in_keys)

    @property
    def out_keys(self):
        """The entries every member writes."""
        return list(self[0].out_keys)

    def values(self, tensordict, key=None):
        """The members' ``key`` output (the first out-key by default), stacked: ``[N, *B, ...]``."""
        key = self.out_keys[0] if key is None else key
        return self._outputs(tensordict, [key])[0]

    def forward(self, tensordict):
        """Writes every network's outputs, stacked along a new leading dimension, into a TensorDict
        of batch size ``[N, *tensordict.batch_size]`` and returns it."""
        keys = self.out_keys
        batch = [len(self), *tensordict.batch_size]
        return TensorDict(dict(zip(keys, self._outputs(tensordict, keys))), batch_size=batch)

    def chunk_values(self, chunks, key=None):
        """Member ``i`` on ``chunks[i]`` (a TensorDict whose first dim has one entry per member): their
        ``key`` outputs stacked, ``[N, *B, ...]``."""
        key = self.out_keys[0] if key is None else key
        return self._outputs(chunks, [key], input_dim=0)[0]

    def _outputs(self, tensordict, keys, input_dim=None):
        """The members' ``keys`` outputs on ``tensordict`` (the same for all, or with ``input_dim=0``
        member i's input is ``tensordict[i]``), each stacked along a new leading dim."""
        data = tensordict.select(*self.in_keys, strict=False)
        if not self.use_vmap:
            outs = [net((data if input_dim is None else data[i]).copy()) for i, net in enumerate(self)]
            return [stack([o[k] for o in outs]) for k in keys]
        base = self[0]

        def member(params, inputs):  # (inputs: a TensorDict vmap built for this call, free to write into)
            out = functional_call(base, params, (inputs,), tie_weights=False)  # the state holds every alias
            return tuple(out[k] for k in keys)
        return list(vmap(member, (0, input_dim), randomness=self.randomness)(self._stacked_state(), data))

    def _stacked_state(self):
        """{name: the members' parameter or buffer ``name`` stacked along a new first dim}."""
        states = [dict(named_tensors(net, remove_duplicate=False)) for net in self]
        names = list(states[0])
        stacks = StackedStates.apply(*[state[name] for name in names for state in states], members=len(states))
        return dict(zip(names, stacks))


class _SACBase(LossModule):
    """What SACLoss and DiscreteSACLoss share: the critics' ensemble, the temperature, the keys,
    the reduction of the losses and the assembly of the output."""

    default_value_estimator = ValueEstimators.TD0
    SUPPORTED_VALUE_ESTIMATORS = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
    _base_out_keys = ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")

    def _setup(self, actor_network, qvalue_network, *, num_qvalue_nets, loss_function, alpha_init, min_alpha,
               max_alpha, fixed_alpha, delay_actor, delay_qvalue, separate_losses, reduction, skip_done_states,
               deactivate_vmap, use_prioritized_weights, scalar_output_mode, value_network=None, delay_value=True):
        """Checks the arguments and registers the networks (actor, value network, critics), the
        temperature and the settings."""
        if loss_function not in ("l2", "l1", "smooth_l1"):
            raise NotImplementedError(f"Unknown loss {loss_function}.")
        reduction = "mean" if reduction is None else reduction
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        if scalar_output_mode not in (None, "exclude", "non_tensor"):
            raise ValueError(f"scalar_output_mode must be None, 'exclude' or 'non_tensor', got {scalar_output_mode!r}")
        if scalar_output_mode == "non_tensor" and not hasattr(TensorDict, "set_non_tensor"):
            raise NotImplementedError("scalar_output_mode='non_tensor' needs non-tensor entries, which rlpipe's "
                                      "TensorDict does not hold; use scalar_output_mode='exclude'.")
        if not isinstance(num_qvalue_nets, int) or num_qvalue_nets < 1:
            raise ValueError(f"num_qvalue_nets must be a positive integer, got {num_qvalue_nets!r}")
        ensemble = self._ensemble(qvalue_network, num_qvalue_nets)
        if separate_losses and _shares_parameters(actor_network, qvalue_network):
            raise NotImplementedError(f"separate_losses=True with a qvalue network that shares parameters with the "
                                      f"actor is not supported by rlpipe's {type(self).__name__} (its critics are "
                                      "deep copies).")
        self.use_prioritized_weights = use_prioritized_weights
        self.delay_actor, self.delay_qvalue, self.delay_value = delay_actor, delay_qvalue, delay_value
        self.separate_losses, self.deactivate_vmap = separate_losses, deactivate_vmap
        self.num_qvalue_nets = num_qvalue_nets
        self.loss_function = loss_function
        self.skip_done_states = skip_done_states
        self.convert_to_functional(actor_network, "actor_network", create_target_params=delay_actor)
        self._version = 1 if value_network is not None else 2
        if value_network is not None:
            self.convert_to_functional(value_network, "value_network", create_target_params=delay_value)
        self.convert_to_functional(ensemble, "qvalue_network", create_target_params=delay_qvalue)
        self._make_vmap()
        self._init_alpha(alpha_init, min_alpha, max_alpha, fixed_alpha)
        self.reduction = reduction
        if reduction == "none" and scalar_output_mode is None:
            warnings.warn(f"{type(self).__name__} with reduction='none' cannot include scalar values (alpha, entropy) "
                          "in the output TensorDict without changing their shape. These values will be excluded from "
                          "the output. To suppress this warning, pass `scalar_output_mode='exclude'` to the "
                          "constructor.", UserWarning, stacklevel=3)
            scalar_output_mode = "exclude"
        self.scalar_output_mode = scalar_output_mode
        self.__dict__["_in_keys"] = None
        self.__dict__["_out_keys"] = None

    def _make_vmap(self):
        """The critics' ensembles (trained and target) run under vmap unless ``deactivate_vmap``, with
        the loss's ``vmap_randomness``."""
        for ensemble in (self.qvalue_network, self.target_qvalue_network):
            ensemble.use_vmap, ensemble.randomness = not self.deactivate_vmap, self.vmap_randomness

    @staticmethod
    def _ensemble(qvalue_network, n):
        """The ``QValueEnsemble`` of ``n`` critics made from one module or a list of ``n`` modules."""
        if isinstance(qvalue_network, (list, tuple)):
            if len(qvalue_network) != n:
                raise RuntimeError("The ``expand_dim`` value must match the length of the module list/tuple if a "
                                   f"single module isn't provided (got {len(qvalue_network)} modules and "
                                   f"num_qvalue_nets={n}).")
            return QValueEnsemble(list(qvalue_network))
        if not isinstance(qvalue_network, Module):
            raise TypeError("qvalue_network must be a module or a list of modules, got "
                            f"{type(qvalue_network).__name__}")
        return QValueEnsemble([_redrawn_copy(qvalue_network) for _ in range(n)])

    def _init_alpha(self, alpha_init, min_alpha, max_alpha, fixed_alpha):
        """``alpha_init``, ``log_alpha`` (a parameter unless ``fixed_alpha``) and its clamping bounds."""
        device = next(iter(self.parameters()), _creation.zeros(())).device
        self.register_buffer("alpha_init", _creation.tensor(float(alpha_init), device=device))
        if bool(min_alpha) ^ bool(max_alpha):
            min_alpha = min_alpha if min_alpha else 0.0
            if max_alpha == 0:
                raise ValueError("max_alpha must be either None or greater than 0.")
            max_alpha = max_alpha if max_alpha else 1e9
        for name, bound in (("min_log_alpha", min_alpha), ("max_log_alpha", max_alpha)):
            if bound:
                self.register_buffer(name, _creation.tensor(float(bound), device=device).log())
            else:
                self.__dict__[name] = None
        self.fixed_alpha = fixed_alpha
        log_alpha = _creation.tensor(math.log(alpha_init), device=device)
        if fixed_alpha:
            self.register_buffer("log_alpha", log_alpha)
        else:
            self.register_parameter("log_alpha", Parameter(log_alpha))

    # ---- keys -----------------------------------------------------------------------------------
    def _estimator_value_network(self):
        return None  # the loss hands the estimator its next values

    def _forward_value_estimator_keys(self, **kwargs):
        super()._forward_value_estimator_keys(**kwargs)
        self.__dict__["_in_keys"] = None

    @property
    def device(self):
        for p in self.parameters():
            return p.device
        raise RuntimeError(f"At least one of the networks of {type(self).__name__} must have trainable parameters.")

    @property
    def in_keys(self):
        if self.__dict__.get("_in_keys") is None:
            keys = self.tensor_keys
            actor_keys = list(self.actor_network.in_keys)
            found = [keys.action, ("next", keys.reward), ("next", keys.done), ("next", keys.terminated), *actor_keys,
                     *[("next",) + (k if isinstance(k, tuple) else (k,)) for k in actor_keys],
                     *self.qvalue_network.in_keys]
            if self._version == 1:
                found += list(self.value_network.in_keys)
            self.__dict__["_in_keys"] = list(dict.fromkeys(found))
        return self.__dict__["_in_keys"]

    @in_keys.setter
    def in_keys(self, values):
        self.__dict__["_in_keys"] = values

    @property
    def out_keys(self):
        if self.__dict__.get("_out_keys") is None:
            keys = list(self._base_out_keys)
            self.__dict__["_out_keys"] = keys + (["loss_value"] if self._version == 1 else [])
        return self.__dict__["_out_keys"]

    @out_keys.setter
    def out_keys(self, values):
        self.__dict__["_out_keys"] = values

    # ---- the losses -----------------------------------------------------------------------------
    def _weights(self, tensordict):
        if self.use_prioritized_weights in (True, "auto"):
            return tensordict.get(self.tensor_keys.priority_weight, None)
        return None

    @property
    def _alpha(self):
        """``exp(log_alpha)``, detached, after clamping ``log_alpha`` in place into its bounds."""
        if self.min_log_alpha is not None or self.max_log_alpha is not None:
            with no_grad():
                self.log_alpha.clamp_(self.min_log_alpha, self.max_log_alpha)
        with no_grad():
            return self.log_alpha.exp()

    def alpha_loss(self, log_prob):
        """The temperature's loss per sample, ``-log_alpha * (log_prob + target_entropy)``."""
        return self._alpha_loss(log_prob)

    def _alpha_loss(self, log_prob):
        return -self.log_alpha * (log_prob + self.target_entropy)

    def _q_values(self, ensemble, tensordict):
        return ensemble.values(tensordict, self.tensor_keys.state_action_value)

    def _output(self, tensordict, td_error, loss_actor, loss_qvalue, log_prob, loss_value=None):
        """The TensorDict of loss terms (``td_error`` written into ``tensordict`` as the priority)."""
        loss_alpha = self._reduce(self._alpha_loss(log_prob), self._weights(tensordict))
        if loss_actor.shape != loss_qvalue.shape or (loss_value is not None and loss_actor.shape != loss_value.shape):
            raise RuntimeError(f"Losses shape mismatch: {loss_actor.shape}, {loss_qvalue.shape} and "
                               f"{None if loss_value is None else loss_value.shape}")
        tensordict.set(self.tensor_keys.priority, td_error)
        out = {"loss_actor": loss_actor, "loss_qvalue": loss_qvalue, "loss_alpha": loss_alpha}
        if loss_value is not None:
            out["loss_value"] = loss_value
        if self.reduction != "none":
            out.update(alpha=self._alpha, entropy=-log_prob.mean())
            return TensorDict(out, batch_size=[])
        td_out = TensorDict(out, batch_size=tensordict.batch_size)
        if self.scalar_output_mode == "non_tensor":
            td_out.set_non_tensor("alpha", self._alpha)
            td_out.set_non_tensor("entropy", -log_prob.mean())
        return td_out


class SACLoss(_SACBase):
    """The soft actor-critic losses (torchrl 0.14's ``SACLoss``; see the module docstring for what
    differs).

    ``actor_network`` is a ``ProbabilisticActor`` with a reparameterizable distribution (e.g.
    ``TanhNormal``); ``qvalue_network`` reads the observation and the action and writes
    ``"state_action_value"`` (one module, copied ``num_qvalue_nets`` times with fresh weights, or a
    list of ``num_qvalue_nets`` modules). Without ``value_network`` (SAC v2, the default) the critics
    regress on ``r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))`` with
    ``a' ~ pi(s')`` and the target critics ``Q'`` (``delay_qvalue=True``); with one (v1) the critics
    regress on the target value network and the value network on ``min_i Q'_i(s, a) - alpha log pi(a|s)``,
    each critic on its own slice of the batch.

    ``forward`` returns ``loss_actor`` (``alpha * log pi(a|s) - min_i Q_i(s, a)``, whose gradient reaches
    only the actor), ``loss_qvalue`` (the critics' distances, summed over the critics), ``loss_alpha``
    (``-log_alpha * (log pi + target_entropy)``), ``loss_value`` (v1), the detached ``alpha`` and
    ``entropy``; it writes the TD errors (absolute, the largest over the critics; squared in v1) into
    the input under ``"td_error"``. ``target_entropy="auto"`` is minus the number of action elements
    per sample. A ``"priority_weight"`` entry weights the losses. Targets come from the value
    estimator (TD(0) with ``gamma=0.99`` by default; ``make_value_estimator``).
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        action: object = "action"
        value: object = "state_value"
        state_action_value: object = "state_action_value"
        log_prob: object = "action_log_prob"
        priority: object = "td_error"
        reward: object = "reward"
        done: object = "done"
        terminated: object = "terminated"
        priority_weight: object = "priority_weight"

    default_keys = _AcceptedKeys

    def __init__(self, actor_network, qvalue_network, value_network=None, *, num_qvalue_nets=2,
                 loss_function="smooth_l1", alpha_init=1.0, min_alpha=None, max_alpha=None, action_spec=None,
                 fixed_alpha=False, target_entropy="auto", delay_actor=False, delay_qvalue=True, delay_value=True,
                 gamma=None, priority_key=None, separate_losses=False, reduction=None, skip_done_states=False,
                 deactivate_vmap=False, use_prioritized_weights="auto", scalar_output_mode=None):
        super().__init__()
        if gamma is not None:
            raise TypeError(_GAMMA_ERROR)
        self._setup(actor_network, qvalue_network, num_qvalue_nets=num_qvalue_nets, loss_function=loss_function,
                    alpha_init=alpha_init, min_alpha=min_alpha, max_alpha=max_alpha, fixed_alpha=fixed_alpha,
                    delay_actor=delay_actor, delay_qvalue=delay_qvalue, separate_losses=separate_losses,
                    reduction=reduction, skip_done_states=skip_done_states, deactivate_vmap=deactivate_vmap,
                    use_prioritized_weights=use_prioritized_weights, scalar_output_mode=scalar_output_mode,
                    value_network=value_network, delay_value=delay_value)
        self.__dict__["_target_entropy_arg"] = target_entropy
        self.__dict__["_action_spec"] = action_spec
        prob = _prob_module(actor_network)
        if prob is not None:
            self.set_keys(log_prob=prob.log_prob_keys[0], action=prob.dist_sample_keys[0])
        if priority_key is not None:
            self.set_keys(priority=priority_key)

    # ---- target entropy -----------------------------------------------------------------------
    @property
    def target_entropy(self):
        """The entropy the temperature aims at (a 0-d buffer, worked out on first use)."""
        found = self._buffers.get("_target_entropy", None)
        if found is not None:
            return found
        value = self._target_entropy_arg
        if value == "auto":
            value = self._auto_target_entropy()
        self.register_buffer("_target_entropy", _creation.tensor(float(value), device=self.device))
        return self._buffers["_target_entropy"]

    target_entropy_buffer = target_entropy

    def _auto_target_entropy(self):
        """Minus the number of action elements per sample, read from the action spec."""
        from rlpipe.envs.specs import Composite
        spec = self._action_spec if self._action_spec is not None else getattr(self.actor_network, "spec", None)
        if spec is None:
            raise RuntimeError("Cannot infer the dimensionality of the action. Consider providing the target entropy "
                               "explicitly or provide the spec of the action tensor in the actor network.")
        key = self.tensor_keys.action
        if not isinstance(spec, Composite):
            spec = Composite({key: spec})
        container = spec[key[:-1]].shape if isinstance(key, tuple) and len(key) > 1 else spec.shape
        leaf = spec[key] if key in spec.keys(True) else None
        if leaf is None:
            raise RuntimeError(f"Cannot infer the dimensionality of the action. The action spec for key '{key}' is "
                               "None. Consider providing the 'action_spec' or 'target_entropy' argument explicitly "
                               "to the loss.")
        return -float(_spec_numel(leaf, len(container)))

    def state_dict(self, *args, **kwargs):
        _ = self.target_entropy  # registers the buffer, as torchrl does before saving or loading
        return super().state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        _ = self.target_entropy
        return super().load_state_dict(*args, **kwargs)

    # ---- the losses -----------------------------------------------------------------------------
    def forward(self, tensordict):
        if self._version == 1:
            loss_qvalue, metadata = self.qvalue_v1_loss(tensordict)
            loss_value, _ = self.value_loss(tensordict)
        else:
            loss_qvalue, metadata = self.qvalue_v2_loss(tensordict)
            loss_value = None
        loss_actor, actor_metadata = self.actor_loss(tensordict)
        return self._output(tensordict, metadata["td_error"], loss_actor, loss_qvalue, actor_metadata["log_prob"],
                            loss_value)

    def actor_loss(self, tensordict):
        """``alpha * log pi(a|s) - min_i Q_i(s, a)`` with ``a`` drawn (reparameterized) from the actor;
        the critics' parameters get no gradient. Returns the loss and ``{"log_prob": ...}`` (detached)."""
        dist = self.actor_network.get_dist(tensordict)
        action, log_prob = _rsample_and_log_prob(dist)
        td_q = tensordict.select(*self.qvalue_network.in_keys, strict=False)
        td_q.set(self.tensor_keys.action, action)
        with hold_out_net(self.qvalue_network):
            min_q = self._q_values(self.qvalue_network, td_q).min(0).values.squeeze(-1)
        if log_prob.shape != min_q.shape:
            raise RuntimeError(f"Losses shape mismatch: {log_prob.shape} and {min_q.shape}")
        loss = self._alpha * log_prob - min_q
        return self._reduce(loss, self._weights(tensordict)), {"log_prob": log_prob.detach()}

    def _compute_target_v2(self, tensordict):
        """The critics' regression target: the value estimator over
        ``min_i Q'_i(s', a') - alpha * log pi(a'|s')`` with ``a' ~ pi(s')`` (no gradient)."""
        keys = self.tensor_keys
        with no_grad():
            next_td = tensordict["next"].copy()
            next_action, next_log_prob = self._next_action(next_td)
            next_td.set(keys.action, next_action)
            q = self._q_values(self.target_qvalue_network, next_td)
            if tuple(q.shape[q.ndim - next_log_prob.ndim:]) != tuple(next_log_prob.shape):
                next_log_prob = next_log_prob.unsqueeze(-1)
            next_value = (q - self._alpha * next_log_prob).min(0).values
            return self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)

    def _next_action(self, next_td):
        """An action and its log-probability drawn from the actor in every next state; with
        ``skip_done_states`` only in the states that are not done (zeros elsewhere)."""
        done = next_td.get(self.tensor_keys.done, None) if self.skip_done_states else None
        if done is None or not bool(done.any()):
            return _rsample_and_log_prob(self.actor_network.get_dist(next_td))
        alive = done.squeeze(-1).logical_not()
        action, log_prob = _rsample_and_log_prob(self.actor_network.get_dist(next_td[alive]))
        return _scatter(action, alive), _scatter(log_prob, alive)

    def qvalue_v2_loss(self, tensordict):
        """The critics' loss (summed over the critics) and ``{"td_error": ...}``: the largest absolute
        TD error over the critics, detached."""
        target = self._compute_target_v2(tensordict)
        pred = self._q_values(self.qvalue_network, tensordict).squeeze(-1)
        td_error = (pred.detach() - target).abs().max(0).values
        loss = distance_loss(pred, target.expand_as(pred), self.loss_function).sum(0)
        return self._reduce(loss, self._weights(tensordict)), {"td_error": td_error}

    def qvalue_v1_loss(self, tensordict):
        """SAC v1: each critic regresses, on its own slice of the batch, on the target value network's
        bootstrapped target. ``{"td_error": ...}`` holds the squared TD errors."""
        n = self.num_qvalue_nets
        shape = tuple(tensordict.shape)
        if not shape or shape[0] % n != 0:
            raise RuntimeError(f"Batch size={tensordict.shape} is incompatible with num_qvqlue_nets={n}.")
        with no_grad():
            next_td = tensordict["next"].copy()
            with set_interaction_type(InteractionType.DETERMINISTIC):
                self.target_actor_network(next_td)
            next_value = self.target_value_network(next_td)[self.tensor_keys.value]
            target = self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)
        chunks = tensordict.reshape(n, -1, *shape[1:])
        targets = target.reshape(n, -1, *target.shape[1:])
        pred = self.qvalue_network.chunk_values(chunks, self.tensor_keys.state_action_value).squeeze(-1)
        loss = distance_loss(pred, targets, self.loss_function).reshape(shape)
        td_error = (pred.detach() - targets).pow(2).flatten(0, 1)
        return self._reduce(loss, self._weights(tensordict)), {"td_error": td_error}

    def value_loss(self, tensordict):
        """SAC v1's value loss: ``V(s)`` regresses on ``min_i Q'_i(s, a) - alpha * log pi'(a|s)`` with
        ``a`` drawn from the target actor."""
        keys = self.tensor_keys
        td_copy = tensordict.select(*self.value_network.in_keys, strict=False).detach()
        pred = self.value_network(td_copy)[keys.value].squeeze(-1)
        with no_grad():
            action, log_prob = _rsample_and_log_prob(self.target_actor_network.get_dist(td_copy))
            td_copy.set(keys.action, action)
            min_q = self._q_values(self.target_qvalue_network, td_copy).squeeze(-1).min(0).values
            if log_prob.shape != min_q.shape:
                raise RuntimeError(f"Losses shape mismatch: {min_q.shape} and {log_prob.shape}")
            target = min_q - self._alpha * log_prob
        loss = distance_loss(pred, target, self.loss_function)
        return self._reduce(loss, self._weights(tensordict)), {}


class DiscreteSACLoss(_SACBase):
    """Soft actor-critic for discrete actions (torchrl 0.14's ``DiscreteSACLoss``; the critics are
    handled as in ``SACLoss``, see the module docstring).

    ``actor_network`` is a ``ProbabilisticActor`` over a categorical distribution (``Categorical`` or
    ``OneHotCategorical``); ``qvalue_network`` reads the observation and writes ``"action_value"``, one
    value per action. The expectations over actions are exact: the critics regress on
    ``r + gamma * (1 - terminated) * sum_a' pi(a'|s') (min_i Q'_i(s', a') - alpha log pi(a'|s'))``,
    ``loss_actor`` is ``sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a))`` (its gradient reaches
    only the actor), ``loss_alpha`` is ``-log_alpha * (sum_a pi log pi + target_entropy)`` and
    ``entropy`` the mean policy entropy. ``action_space`` (``"one-hot"`` by default, with a warning, or
    ``"categorical"``, or a spec) says how ``"action"`` is stored; ``target_entropy="auto"`` is
    ``target_entropy_weight * log(num_actions)``. The absolute TD errors (the largest over the critics)
    are written into the input under ``"td_error"``.
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        action: object = "action"
        value: object = "state_value"
        action_value: object = "action_value"
        priority: object = "td_error"
        reward: object = "reward"
        done: object = "done"
        terminated: object = "terminated"
        log_prob: object = "log_prob"
        priority_weight: object = "priority_weight"

    default_keys = _AcceptedKeys

    def __init__(self, actor_network, qvalue_network, *, action_space=None, num_actions=None, num_qvalue_nets=2,
                 loss_function="smooth_l1", alpha_init=1.0, min_alpha=None, max_alpha=None, fixed_alpha=False,
                 target_entropy_weight=0.98, target_entropy="auto", delay_qvalue=True, priority_key=None,
                 separate_losses=False, reduction=None, skip_done_states=False, deactivate_vmap=False,
                 use_prioritized_weights="auto", scalar_output_mode=None):
        super().__init__()
        if target_entropy == "auto" and num_actions is None:
            raise ValueError("num_actions needs to be provided if target_entropy == 'auto'")
        if action_space is None:
            warnings.warn("action_space was not specified. DiscreteSACLoss will default to 'one-hot'.",
                          stacklevel=2)
            action_space = "one-hot"
        action_space = _find_action_space(action_space)
        self._setup(actor_network, qvalue_network, num_qvalue_nets=num_qvalue_nets, loss_function=loss_function,
                    alpha_init=alpha_init, min_alpha=min_alpha, max_alpha=max_alpha, fixed_alpha=fixed_alpha,
                    delay_actor=False, delay_qvalue=delay_qvalue, separate_losses=separate_losses,
                    reduction=reduction, skip_done_states=skip_done_states, deactivate_vmap=deactivate_vmap,
                    use_prioritized_weights=use_prioritized_weights, scalar_output_mode=scalar_output_mode)
        self.action_space = action_space
        if target_entropy == "auto":
            target_entropy = -math.log(1.0 / num_actions) * target_entropy_weight
        self.register_buffer("target_entropy", _creation.tensor(float(target_entropy), device=self.device))
        if priority_key is not None:
            self.set_keys(priority=priority_key)

    def forward(self, tensordict):
        loss_qvalue, metadata = self.qvalue_loss(tensordict)
        loss_actor, actor_metadata = self.actor_loss(tensordict)
        return self._output(tensordict, metadata["td_error"], loss_actor, loss_qvalue, actor_metadata["log_prob"])

    def _action_values(self, ensemble, tensordict):
        return ensemble.values(tensordict, self.tensor_keys.action_value)

    def _compute_target(self, tensordict):
        """The critics' target: the value estimator over the exact expectation, under the policy,
        of ``min_i Q'_i(s', .) - alpha log pi(.|s')`` (no gradient)."""
        with no_grad():
            next_td = tensordict["next"].copy()
            done = next_td.get(self.tensor_keys.done, None) if self.skip_done_states else None
            alive = None if done is None or not bool(done.any()) else done.squeeze(-1).logical_not()
            if alive is not None:
                next_td = next_td[alive]
            dist = self.actor_network.get_dist(next_td)
            if alive is not None:
                log_prob = dist.logits
                prob = log_prob.exp()
            else:
                prob = dist.probs
                log_prob = where(prob == 0, 1e-8, prob).log()
            next_q = self._action_values(self.target_qvalue_network, next_td).min(0).values
            next_value = (prob * (next_q - self._alpha * log_prob)).sum(-1).unsqueeze(-1)
            if alive is not None:
                next_value = _scatter(next_value, alive)
            return self.value_estimator.value_estimate(tensordict, next_value=next_value).squeeze(-1)

    def _chosen(self, action_values, action):
        """The values of the taken actions, ``[N, *B]`` from ``[N, *B, num_actions]``."""
        action = action.expand(action_values.shape[0], *action.shape)
        if self.action_space == "categorical":
            if tuple(action.shape) != tuple(action_values.shape):
                action = action.unsqueeze(-1)
            return action_values.gather(-1, action.long()).squeeze(-1)
        return (action_values * action.to(action_values.dtype)).sum(-1)

    def qvalue_loss(self, tensordict):
        """The critics' loss (summed over the critics) and ``{"td_error": ...}``."""
        target = self._compute_target(tensordict)
        action_values = self._action_values(self.qvalue_network, tensordict)
        chosen = self._chosen(action_values, tensordict[self.tensor_keys.action])
        td_error = (chosen.detach() - target).abs().max(0).values
        loss = distance_loss(chosen, target.expand_as(chosen), self.loss_function).sum(0)
        return self._reduce(loss, self._weights(tensordict)), {"td_error": td_error}

    def actor_loss(self, tensordict):
        """The expected ``alpha log pi - min_i Q_i`` under the policy, and ``{"log_prob": sum_a pi log pi}``."""
        dist = self.actor_network.get_dist(tensordict.copy())
        prob, log_prob = dist.probs, dist.logits
        with hold_out_net(self.qvalue_network):
            min_q = self._action_values(self.qvalue_network, tensordict).min(0).values
        if log_prob.shape != min_q.shape:
            raise RuntimeError(f"Losses shape mismatch: {log_prob.shape} and {min_q.shape}")
        loss = (prob * (self._alpha * log_prob - min_q)).sum(-1)
        return self._reduce(loss, self._weights(tensordict)), {"log_prob": (log_prob * prob).sum(-1).detach()}


def _scatter(values, mask):
    """Zeros of ``mask``'s shape (plus ``values``' trailing dims) with ``values`` where ``mask`` holds."""
    full = _creation.zeros(tuple(mask.shape) + tuple(values.shape[1:]), dtype=values.dtype, device=values.device)
    full[mask] = values
    return full


def _spec_numel(spec, skip):
    """Elements of one sample of ``spec`` past its first ``skip`` (container) dimensions; the sum
    over the leaves of a Composite."""
    from rlpipe.envs.specs import Composite
    if isinstance(spec, Composite):
        return sum(_spec_numel(s, skip) for s in spec.values() if s is not None)
    return math.prod(tuple(spec.shape)[skip:])


def _shares_parameters(a, b):
    ids = {id(p) for p in a.parameters()}
    modules = b if isinstance(b, (list, tuple)) else [b]
    return any(id(p) in ids for m in modules for p in m.parameters())
