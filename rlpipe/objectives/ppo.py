"""torchrl.objectives.ppo: ``PPOLoss``, ``ClipPPOLoss`` and ``KLPENPPOLoss``."""
import dataclasses
import math

from .. import primitives as _ops
from .._creation import tensor as _tensor
from ..autograd.grad_mode import no_grad
from ..tensordict import TensorDict
from .common import LossModule
from .utils import distance_loss
from .value.advantages import ValueEstimators

__all__ = ["ClipPPOLoss", "KLPENPPOLoss", "PPOLoss"]

_FLOAT32_RESOLUTION = 1e-6


def _standardize(advantage):
    return (advantage - advantage.mean()) / advantage.std().clamp_min(_FLOAT32_RESOLUTION)


class PPOLoss(LossModule):
    """The PPO policy-gradient loss without clipping: ``loss_objective = -ratio * advantage``, with an
    entropy bonus (``loss_entropy = -entropy_coeff * entropy``) and a critic loss
    (``loss_critic = critic_coeff * distance(value_target, V(s))``, optionally clipped around the
    stored values by ``clip_value``).

    ``actor_network`` is a probabilistic actor (``get_dist(td)``; the data must hold the sampling
    log-probability, ``"action_log_prob"``); ``critic_network`` a TensorDictModule writing
    ``"state_value"``. Without an ``"advantage"`` entry the loss runs its value estimator (GAE by
    default) first. The output also holds ``entropy``, ``kl_approx`` and ``ESS`` (detached).
    torchrl 0.14's argument names: ``entropy_coeff``/``critic_coeff`` (``entropy_coef``/``critic_coef``
    raise a TypeError there and here).
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        advantage: object = "advantage"
        value_target: object = "value_target"
        value: object = "state_value"
        sample_log_prob: object = "action_log_prob"
        action: object = "action"
        reward: object = "reward"
        done: object = "done"
        terminated: object = "terminated"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.GAE

    def __init__(self, actor_network=None, critic_network=None, *, entropy_bonus=True, samples_mc_entropy=1,
                 entropy_coeff=None, critic_coeff=None, loss_critic_type="smooth_l1", normalize_advantage=False,
                 normalize_advantage_exclude_dims=(), gamma=None, separate_losses=False, advantage_key=None,
                 value_target_key=None, value_key=None, functional=True, actor=None, critic=None, reduction=None,
                 clip_value=None, device=None, **kwargs):
        for old, new in (("critic_coef", "critic_coeff"), ("entropy_coef", "entropy_coeff")):
            if old in kwargs:
                raise TypeError(f"'{old}' has been removed in torchrl v0.11. Please use '{new}' instead.")
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        actor_network = actor if actor_network is None else actor_network
        critic_network = critic if critic_network is None else critic_network
        if critic_coeff is None and critic_network is not None:
            critic_coeff = 1.0
        elif critic_coeff in (None, 0) and critic_network is not None:
            critic_coeff = None
        if actor_network is None or (critic_network is None and critic_coeff not in (None, 0.0)):
            raise TypeError("Missing positional arguments actor_network or critic_network.")
        if gamma is not None:
            raise TypeError("Passing gamma / lambda parameters through the loss constructor is deprecated and "
                            "has been removed. Use loss.make_value_estimator(gamma=...) instead.")
        if loss_critic_type not in ("l2", "l1", "smooth_l1"):
            raise NotImplementedError(f"Unknown loss {loss_critic_type}.")
        super().__init__()
        self.convert_to_functional(actor_network, "actor_network")
        if critic_network is not None:
            self.convert_to_functional(critic_network, "critic_network")
        else:
            self.critic_network = None
        self.entropy_bonus = entropy_bonus
        self.samples_mc_entropy = samples_mc_entropy
        self.entropy_coeff = 0.01 if entropy_coeff is None else float(entropy_coeff)
        self.critic_coeff = None if critic_coeff is None else float(critic_coeff)
        self._has_critic = bool(self.critic_coeff is not None and self.critic_coeff > 0)
        self.loss_critic_type = loss_critic_type
        self.normalize_advantage = normalize_advantage
        self.separate_losses = separate_losses
        self.reduction = "mean" if reduction is None else reduction
        self.clip_value = None if clip_value is None or clip_value is False else float(clip_value)
        for name, key in (("advantage", advantage_key), ("value_target", value_target_key), ("value", value_key)):
            if key is not None:
                self.set_keys(**{name: key})

    def _estimator_value_network(self):
        return self.critic_network

    @property
    def out_keys(self):
        """The entries ``forward`` returns (loss terms and diagnostics)."""
        keys = ["loss_objective"]
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        if self._has_critic:
            keys.append("loss_critic")
        return keys

    # ---- pieces -------------------------------------------------------------------------------
    def _advantage(self, tensordict):
        advantage = tensordict.get(self.tensor_keys.advantage, None)
        if advantage is None:
            if self.critic_network is None:
                raise RuntimeError("Critic network is not specified, cannot compute advantage within forward.")
            self.value_estimator(tensordict)
            advantage = tensordict[self.tensor_keys.advantage]
        if self.normalize_advantage and advantage.numel() > 1:
            advantage = _standardize(advantage)
        return advantage

    def _log_weight(self, tensordict):
        """(log(pi / pi_old) [..., 1], the current distribution, kl_approx [..., 1])."""
        prev_log_prob = tensordict.get(self.tensor_keys.sample_log_prob, None)
        if prev_log_prob is None:
            raise KeyError(f"Couldn't find the log-prob {self.tensor_keys.sample_log_prob} in the input data.")
        if prev_log_prob.requires_grad:
            raise RuntimeError(f"tensordict stored {self.tensor_keys.sample_log_prob} requires grad.")
        dist = self.actor_network.get_dist(tensordict)
        log_prob = dist.log_prob(tensordict[self.tensor_keys.action])
        log_weight = (log_prob - prev_log_prob).unsqueeze(-1)
        return log_weight, dist, (prev_log_prob - log_prob).unsqueeze(-1)

    def _entropy(self, dist):
        try:
            entropy = dist.entropy()
        except NotImplementedError:  # Monte-Carlo estimate, as torchrl
            sample = dist.rsample((self.samples_mc_entropy,)) if getattr(dist, "has_rsample", False) else \
                dist.sample((self.samples_mc_entropy,))
            entropy = -dist.log_prob(sample).mean(0)
        return entropy.unsqueeze(-1)

    def loss_critic(self, tensordict):
        """(critic_coeff * distance(value_target, V(s)), the clipped fraction or None)."""
        if self.separate_losses:
            tensordict = tensordict.detach()
        target = tensordict.get(self.tensor_keys.value_target, None)
        if target is None:
            raise KeyError(f"the key {self.tensor_keys.value_target} was not found in the input tensordict. "
                           "Make sure you provided the right key and the value_target (i.e. the target return) has "
                           "been retrieved accordingly. Advantage classes such as GAE, TDLambdaEstimate and "
                           "TDEstimate all return a 'value_target' entry that can be used for the value loss.")
        old_value = None
        if self.clip_value:
            old_value = tensordict.get(self.tensor_keys.value, None)
            if old_value is None:
                raise KeyError(f"clip_value is set to {self.clip_value}, but the key {self.tensor_keys.value} was "
                               "not found in the input tensordict.")
        value = self.critic_network(tensordict.copy()).get(self.tensor_keys.value, None)
        if value is None:
            raise KeyError(f"the key {self.tensor_keys.value} was not found in the critic output tensordict. Make "
                           "sure that the 'value_key' passed to PPO is accurate.")
        loss = distance_loss(target, value, self.loss_critic_type)
        clip_fraction = None
        if self.clip_value:
            change = value - old_value
            clipped = change.clamp(-self.clip_value, self.clip_value)
            with no_grad():
                clip_fraction = (change != clipped).to(value.dtype).mean()
            loss = _ops.maximum(loss, distance_loss(target, old_value + clipped, self.loss_critic_type))
        if self._has_critic:
            loss = self.critic_coeff * loss
        return loss, clip_fraction

    def _finish(self, out, tensordict, dist, advantage, log_weight):
        """Adds the entropy, critic and ESS entries and reduces the ``loss_*`` ones."""
        if self.entropy_bonus:
            entropy = self._entropy(dist)
            out.set("entropy", entropy.detach().mean())
            out.set("loss_entropy", -self.entropy_coeff * entropy)
        if self._has_critic:
            loss_critic, clip_fraction = self.loss_critic(tensordict)
            out.set("loss_critic", loss_critic)
            if clip_fraction is not None:
                out.set("value_clip_fraction", clip_fraction)
        with no_grad():
            lw = log_weight.squeeze(-1)
            ess = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp()
            out.set("ESS", ess / log_weight.shape[0])
        for key in list(out.keys()):
            if key.startswith("loss_"):
                out.set(key, self._reduce(out.get(key)))
        return out

    def forward(self, tensordict):
        tensordict = tensordict.copy()
        advantage = self._advantage(tensordict)
        log_weight, dist, kl_approx = self._log_weight(tensordict)
        out = TensorDict({"loss_objective": -log_weight.exp() * advantage,
                          "kl_approx": kl_approx.detach().mean()}, batch_size=[])
        return self._finish(out, tensordict, dist, advantage, log_weight)


class ClipPPOLoss(PPOLoss):
    """PPO's clipped surrogate: ``loss_objective = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)``,
    with ``clip_fraction`` (the share of clipped ratios). ``clip_epsilon`` is a float or an
    ``(eps_low, eps_high)`` pair; ``clip_value=True`` clips the critic with ``clip_epsilon``."""

    def __init__(self, actor_network=None, critic_network=None, *, clip_epsilon=0.2, entropy_bonus=True,
                 samples_mc_entropy=1, entropy_coeff=None, critic_coeff=None, loss_critic_type="smooth_l1",
                 normalize_advantage=False, normalize_advantage_exclude_dims=(), gamma=None, separate_losses=False,
                 reduction=None, clip_value=None, device=None, **kwargs):
        low, high = _clip_bounds(clip_epsilon)
        if isinstance(clip_value, bool):
            if clip_value and isinstance(clip_epsilon, (tuple, list)):
                raise ValueError("clip_value=True cannot infer the value-clip threshold from an asymmetric "
                                 "clip_epsilon tuple. Pass an explicit float threshold instead, e.g. clip_value=0.2.")
            clip_value = clip_epsilon if clip_value else None
        super().__init__(actor_network, critic_network, entropy_bonus=entropy_bonus,
                         samples_mc_entropy=samples_mc_entropy, entropy_coeff=entropy_coeff,
                         critic_coeff=critic_coeff, loss_critic_type=loss_critic_type,
                         normalize_advantage=normalize_advantage, gamma=gamma, separate_losses=separate_losses,
                         reduction=reduction, clip_value=clip_value, device=device, **kwargs)
        self.clip_epsilon = _tensor(float(clip_epsilon) if not isinstance(clip_epsilon, (tuple, list)) else high)
        self._clip_bounds = (math.log1p(-low), math.log1p(high))

    @property
    def out_keys(self):
        """PPOLoss's entries and ``clip_fraction``."""
        return super().out_keys + ["clip_fraction"]

    def forward(self, tensordict):
        tensordict = tensordict.copy()
        advantage = self._advantage(tensordict)
        log_weight, dist, kl_approx = self._log_weight(tensordict)
        gain = log_weight.exp() * advantage
        clipped_log_weight = log_weight.clamp(*self._clip_bounds)
        clip_fraction = (clipped_log_weight != log_weight).to(log_weight.dtype).mean()
        clipped_gain = clipped_log_weight.exp() * advantage
        out = TensorDict({"loss_objective": -_ops.minimum(gain, clipped_gain),
                          "clip_fraction": clip_fraction.detach(),
                          "kl_approx": kl_approx.detach().mean()}, batch_size=[])
        return self._finish(out, tensordict, dist, advantage, log_weight)


class KLPENPPOLoss(PPOLoss):
    """PPO with an adaptive KL penalty: ``loss_objective = -(ratio * A - beta * KL(pi_old || pi))``;
    after each call ``beta`` is multiplied by ``increment`` when KL > 1.5 * dtarg and by
    ``decrement`` when KL < dtarg / 1.5. ``KL`` is the sample estimate ``log pi_old - log pi``
    (torchrl uses the analytic KL where the data holds the old distribution's parameters)."""

    def __init__(self, actor_network=None, critic_network=None, *, dtarg=0.01, beta=1.0, increment=2,
                 decrement=0.5, samples_mc_kl=1, entropy_bonus=True, samples_mc_entropy=1, entropy_coeff=None,
                 critic_coeff=None, loss_critic_type="smooth_l1", normalize_advantage=False, gamma=None,
                 separate_losses=False, reduction=None, clip_value=None, device=None, **kwargs):
        super().__init__(actor_network, critic_network, entropy_bonus=entropy_bonus,
                         samples_mc_entropy=samples_mc_entropy, entropy_coeff=entropy_coeff,
                         critic_coeff=critic_coeff, loss_critic_type=loss_critic_type,
                         normalize_advantage=normalize_advantage, gamma=gamma, separate_losses=separate_losses,
                         reduction=reduction, clip_value=clip_value, device=device, **kwargs)
        self.dtarg, self.beta = dtarg, _tensor(float(beta))
        self.increment, self.decrement, self.samples_mc_kl = increment, decrement, samples_mc_kl

    def forward(self, tensordict):
        tensordict = tensordict.copy()
        advantage = self._advantage(tensordict)
        log_weight, dist, kl_approx = self._log_weight(tensordict)
        kl = kl_approx.squeeze(-1)
        objective = log_weight.exp() * advantage - self.beta * kl.unsqueeze(-1)
        mean_kl = float(kl.detach().mean())
        if mean_kl > self.dtarg * 1.5:
            self.beta = self.beta * self.increment
        elif mean_kl < self.dtarg / 1.5:
            self.beta = self.beta * self.decrement
        out = TensorDict({"loss_objective": -objective, "kl": kl.detach().mean(),
                          "kl_approx": kl_approx.detach().mean()}, batch_size=[])
        return self._finish(out, tensordict, dist, advantage, log_weight)


def _clip_bounds(clip_epsilon):
    """(eps_low, eps_high) from a float or a pair, checked as torchrl does."""
    if isinstance(clip_epsilon, (tuple, list)):
        if len(clip_epsilon) != 2:
            raise ValueError(f"clip_epsilon tuple must have length 2, got {len(clip_epsilon)}.")
        low, high = (float(e) for e in clip_epsilon)
    else:
        low = high = float(clip_epsilon)
    if low < 0 or high < 0:
        raise ValueError(f"clip_epsilon values must be non-negative, got ({low}, {high}).")
    if low >= 1.0:
        raise ValueError(f"clip_epsilon low must be less than 1 (to keep 1 - eps_low positive), got {low}.")
    return low, high

