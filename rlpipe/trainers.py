"""torchrl 0.14's ``torchrl.trainers``: a ``Trainer`` loop over a collector (optimization steps per batch,
gradient clipping, logging at intervals, a progress bar) with hooks registered at torchrl's stages, and
the usual hooks: ``ReplayBufferTrainer``, ``UpdateWeights``, ``LogScalar``, ``LogValidationReward``.

Stages (``register_op(dest, op, **kwargs)``): ``"batch_process"`` (the collected batch, may return a new
one), ``"pre_optim_steps"``, ``"process_optim_batch"`` (gives each optimization step its batch),
``"post_loss"``, ``"post_optim"``, ``"post_steps"``, ``"pre_steps_log"``, ``"post_steps_log"`` and
``"post_optim_log"`` (return a dict of values to log), ``"setup"`` and ``"shutdown"``. Not provided:
``OptimizationStepper``, the ``"process_loss"``/``"optimizer"`` stages, mixed precision, Ray learners,
asynchronous collection and the trainer's own checkpoint files (use ``rlpipe.checkpoint``).
"""
import collections

from . import nn
from .autograd.grad_mode import no_grad
from .envs.utils import ExplorationType, set_exploration_type
from .postprocs import split_trajectories
from .tensordict import TensorDictBase

__all__ = ["LogScalar", "LogValidationReward", "ReplayBufferTrainer", "Trainer", "TrainerHookBase", "UpdateWeights"]

_STAGES = ("batch_process", "pre_optim_steps", "process_optim_batch", "post_loss", "post_steps", "post_optim",
           "pre_steps_log", "post_steps_log", "post_optim_log", "setup", "shutdown")
_TYPE_DESCR = {float: "4.4f", int: ""}


class TrainerHookBase:
    """A hook with a state (``state_dict``/``load_state_dict``) that ``register``\\ s its ops on a trainer."""

    def state_dict(self):
        """The hook's state (none by default)."""
        return {}

    def load_state_dict(self, state_dict):
        """Restores ``state_dict()``."""

    def register(self, trainer, name=None):
        """Registers the hook's ops on ``trainer``."""
        raise NotImplementedError(f"{type(self).__name__}.register is not written")


class Trainer:
    """torchrl's training loop: for each batch of ``collector``, the ``batch_process`` hooks, then (once
    ``init_random_frames`` are collected) ``optim_steps_per_batch`` steps of ``loss_module`` on what the
    ``process_optim_batch`` hooks give (the batch itself without one): the ``"loss*"`` entries summed,
    backward, the gradient norm (clipped to ``clip_norm`` when ``clip_grad_norm``), ``optimizer.step()``;
    until ``total_frames`` frames (times ``frame_skip``). Logged values go to ``logger`` at most once per
    ``log_interval`` frames per name, and to the progress bar where a hook asks (``log_pbar``)."""

    def __init__(self, *, collector, total_frames, frame_skip, optim_steps_per_batch, loss_module, optimizer=None,
                 logger=None, clip_grad_norm=True, clip_norm=None, progress_bar=True, seed=None,
                 save_trainer_interval=10000, log_interval=10000, save_trainer_file=None, num_epochs=1,
                 **unsupported):
        if unsupported:
            raise TypeError(f"Trainer: {sorted(unsupported)} are not supported by rlpipe's Trainer")
        self.collector, self.total_frames, self.frame_skip = collector, int(total_frames), int(frame_skip)
        self.optim_steps_per_batch, self.num_epochs = optim_steps_per_batch, int(num_epochs)
        self.loss_module, self.optimizer, self.logger = loss_module, optimizer, logger
        self.clip_grad_norm, self.clip_norm = clip_grad_norm, clip_norm
        self.progress_bar, self.seed, self._log_interval = progress_bar, seed, log_interval
        self.collected_frames = 0
        self._optim_count = 0
        self._ops = {stage: [] for stage in _STAGES}
        self._modules = {}
        self._log_dict = collections.defaultdict(list)
        self._last_log = {}
        self._pbar, self._pbar_str = None, {}
        if seed is not None:
            self.collector.set_seed(seed)

    def register_op(self, dest, op, **kwargs):
        """Runs ``op(..., **kwargs)`` at stage ``dest``."""
        if dest not in self._ops:
            raise RuntimeError(f"The hook collection {dest} is not recognised. Choose from: {', '.join(_STAGES)}")
        self._ops[dest].append((op, kwargs))

    register_hook = register_op

    def register_module(self, module_name, module):
        """Keeps ``module`` (a hook with a state) under ``module_name`` for ``state_dict``."""
        if module_name in self._modules:
            raise RuntimeError(f"{module_name} is already registered, choose a different name.")
        self._modules[module_name] = module

    def state_dict(self):
        """The frame and step counters and every registered module's state."""
        return {"collected_frames": self.collected_frames, "_optim_count": self._optim_count,
                **{name: module.state_dict() for name, module in self._modules.items()}}

    def load_state_dict(self, state_dict):
        """Restores ``state_dict()``."""
        self.collected_frames = state_dict["collected_frames"]
        self._optim_count = state_dict["_optim_count"]
        for name, module in self._modules.items():
            module.load_state_dict(state_dict[name])

    # ---- the loop --------------------------------------------------------------------------------
    def _run(self, stage, *args):
        """The ops of ``stage`` in order; a TensorDict one returns replaces the argument passed on."""
        out = args[0] if args else None
        for op, kwargs in self._ops[stage]:
            result = op(*((out,) if args else ()), **kwargs)
            if isinstance(result, TensorDictBase):
                out = result
        return out

    def _run_logs(self, stage, batch):
        for op, kwargs in self._ops[stage]:
            result = op(batch, **kwargs)
            if result is not None:
                self._log(**result)

    def train(self):
        """Collects and optimizes until ``total_frames``; then the ``shutdown`` hooks and the collector's."""
        if self.progress_bar:
            self._pbar = _progress_bar(self.total_frames)
        self._run("setup")
        for batch in self.collector:
            batch = self._run("batch_process", batch)
            mask = batch.get(("collector", "mask"), None)
            frames = (int(mask.sum().item()) if mask is not None else batch.numel()) * self.frame_skip
            self.collected_frames += frames
            self._run_logs("pre_steps_log", batch)
            if self.collected_frames >= getattr(self.collector, "init_random_frames", 0):
                self.optim_steps(batch)
            self._run("post_steps")
            self._run_logs("post_steps_log", batch)
            if self._pbar is not None:
                self._pbar.update(frames)
                self._describe_pbar()
            if self.collected_frames >= self.total_frames:
                break
        self._run("shutdown")
        self.collector.shutdown()
        if self._pbar is not None:
            self._pbar.close()

    def optim_steps(self, batch):
        """``optim_steps_per_batch`` optimization steps (per epoch) on the batches the hooks give."""
        self._run("pre_optim_steps")
        totals, steps = collections.Counter(), 0
        for _ in range(self.num_epochs):
            for _ in range(self.optim_steps_per_batch):
                self._optim_count += 1
                sub_batch = self._run("process_optim_batch", batch)
                losses = self._optimizer_step(sub_batch)
                self._run("post_optim")
                self._run_logs("post_optim_log", sub_batch)
                steps += 1
                totals.update({key: float(value) for key, value in losses.items()})
        if steps:  # the mean of each loss entry (and of the gradient norm) over the steps
            self._log(optim_steps=self._optim_count, **{key: total / steps for key, total in totals.items()})

    def _optimizer_step(self, sub_batch):
        losses = self.loss_module(sub_batch)
        self._run("post_loss", sub_batch)
        loss = sum(value for key, value in losses.items() if key.startswith("loss"))
        loss.backward()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if self.clip_grad_norm and self.clip_norm is not None:
            grad_norm = nn.utils.clip_grad_norm_(params, self.clip_norm)
        else:
            with no_grad():
                grad_norm = sum(p.grad.pow(2).sum() for p in params if p.grad is not None) ** 0.5
            if self.clip_norm is not None:
                nn.utils.clip_grad_value_(params, self.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        out = {key: value.detach().item() for key, value in losses.items() if value.numel() == 1}
        out["grad_norm"] = float(grad_norm)
        return out

    def _log(self, log_pbar=False, **values):
        for key, value in values.items():
            self._log_dict[key].append(value)
            if self.collected_frames - self._last_log.get(key, 0) > self._log_interval:
                self._last_log[key] = self.collected_frames
                if self.logger is not None and not (hasattr(value, "ndim") and value.ndim > 0):
                    self.logger.log_scalar(key, value, step=self.collected_frames)
            if log_pbar and self._pbar is not None:
                self._pbar_str[key] = value.item() if hasattr(value, "item") else value

    def _describe_pbar(self):
        self._pbar.set_description(", ".join(f"{key}: {value:{_TYPE_DESCR.get(type(value), '4.4f')}}"
                                              for key, value in sorted(self._pbar_str.items())))

    def shutdown(self):
        """Shuts the collector down."""
        self.collector.shutdown()


def _progress_bar(total):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total)


class ReplayBufferTrainer(TrainerHookBase):
    """Extends ``replay_buffer`` with each collected batch (flattened, or its valid steps where it has
    a ``("collector", "mask")``, with ``flatten_tensordicts``) and samples each optimization step's batch
    from it (``batch_size`` or the buffer's own); updates priorities after the loss where the buffer can."""

    def __init__(self, replay_buffer, batch_size=None, memmap=False, device=None, flatten_tensordicts=False,
                 max_dims=None, iterate=False):
        self.replay_buffer, self.batch_size, self.device = replay_buffer, batch_size, device
        self.flatten_tensordicts = flatten_tensordicts
        self._update_priority = getattr(replay_buffer, "update_tensordict_priority", None)

    def extend(self, batch):
        """Writes ``batch`` into the buffer; returns what was written."""
        if self.flatten_tensordicts:
            mask = batch.get(("collector", "mask"), None)
            if mask is not None:
                batch = batch[mask]
            else:
                if "truncated" in batch["next"].keys():
                    batch["next", "truncated"][..., -1] = True  # as torchrl: a batch's end cuts the trajectory
                batch = batch.reshape(-1)
        self.replay_buffer.extend(batch)
        return batch

    def sample(self, batch):
        """A batch sampled from the buffer (on ``device`` when given)."""
        sample = self.replay_buffer.sample(batch_size=self.batch_size)
        return sample.to(self.device) if self.device is not None else sample

    def update_priority(self, batch):
        """The buffer's ``update_tensordict_priority(batch)``, where it has one."""
        if self._update_priority is not None:
            self._update_priority(batch)

    def state_dict(self):
        """The buffer's state."""
        return {"replay_buffer": self.replay_buffer.state_dict()}

    def load_state_dict(self, state_dict):
        """Restores the buffer's state."""
        self.replay_buffer.load_state_dict(state_dict["replay_buffer"])

    def register(self, trainer, name="replay_buffer"):
        """extend at ``batch_process``, sample at ``process_optim_batch``, priorities at ``post_loss``."""
        trainer.register_op("batch_process", self.extend)
        trainer.register_op("process_optim_batch", self.sample)
        trainer.register_op("post_loss", self.update_priority)
        trainer.register_module(name, self)


class UpdateWeights(TrainerHookBase):
    """Calls ``collector.update_policy_weights_()`` every ``update_weights_interval`` batches."""

    def __init__(self, collector, update_weights_interval=1):
        if update_weights_interval < 1:
            raise ValueError(f"update_weights_interval must be >= 1, got {update_weights_interval}")
        self.collector, self.update_weights_interval, self.counter = collector, update_weights_interval, 0

    def __call__(self):
        self.counter += 1
        if self.counter % self.update_weights_interval == 0:
            self.collector.update_policy_weights_()

    def state_dict(self):
        """The batch counter."""
        return {"counter": self.counter}

    def load_state_dict(self, state_dict):
        """Restores the batch counter."""
        self.counter = state_dict["counter"]

    def register(self, trainer, name="update_weights"):
        """Runs at ``post_steps``."""
        trainer.register_op("post_steps", self)
        trainer.register_module(name, self)


class LogScalar(TrainerHookBase):
    """Logs a reduction (``"mean"``, ``"sum"``, ``"min"``, ``"max"``) of ``key`` in each collected batch (its
    valid steps), and its standard deviation with ``include_std``, as ``logname`` (default ``str(key)``)."""

    def __init__(self, key=("next", "reward"), logname=None, log_pbar=False, include_std=True, reduction="mean"):
        if reduction not in ("mean", "sum", "min", "max"):
            raise ValueError(f"reduction must be one of ['mean', 'sum', 'min', 'max'], got {reduction}")
        self.key, self.logname = key, str(key) if logname is None else logname
        self.log_pbar, self.include_std, self.reduction = log_pbar, include_std, reduction

    def __call__(self, batch):
        values = batch.get(self.key)
        mask = batch.get(("collector", "mask"), None)
        if mask is not None:
            values = values[mask]
        reduced = values.float().mean() if self.reduction == "mean" else getattr(values, self.reduction)()
        out = {self.logname: reduced.item(), "log_pbar": self.log_pbar}
        if self.include_std and values.numel() > 1:
            out[f"{self.logname}_std"] = values.float().std().item()
        return out

    def register(self, trainer, name=None):
        """Runs at ``pre_steps_log``."""
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(f"log_{self.logname}" if name is None else name, self)


class LogValidationReward(TrainerHookBase):
    """Every ``record_interval`` batches, a rollout of ``record_frames`` steps of ``policy_exploration`` in
    ``environment`` under ``exploration_type`` (episodes restarting), logging the mean reward per step
    (divided by ``frame_skip``) as ``r_evaluation`` and the mean return per trajectory as
    ``total_r_evaluation`` (names from ``out_keys``)."""

    def __init__(self, *, record_interval, record_frames, frame_skip=1, policy_exploration, environment=None,
                 exploration_type=ExplorationType.RANDOM, log_keys=None, out_keys=None, suffix=None,
                 log_pbar=False, recorder=None):
        self.environment = environment if environment is not None else recorder
        self.policy_exploration, self.record_frames, self.frame_skip = policy_exploration, record_frames, frame_skip
        self.record_interval, self.exploration_type = record_interval, exploration_type
        self.log_keys = [("next", "reward")] if log_keys is None else log_keys
        self.out_keys = {("next", "reward"): "r_evaluation", **(out_keys or {})}
        self.suffix, self.log_pbar, self._count = suffix, log_pbar, 0

    def __call__(self, batch):
        out = None
        if self._count % self.record_interval == 0:
            out = self._record()
        self._count += 1
        return out

    def _record(self):
        policy = self.policy_exploration
        training = isinstance(policy, nn.Module) and policy.training
        if training:
            policy.eval()
        try:
            with set_exploration_type(self.exploration_type), no_grad():
                record = self.environment.rollout(self.record_frames, policy, break_when_any_done=False)
        finally:
            if training:
                policy.train()
        trajectories = split_trajectories(record)
        mask = trajectories.get(("collector", "mask"))
        out = {"log_pbar": self.log_pbar}
        for key in self.log_keys:
            name = self.out_keys.get(key, key if isinstance(key, str) else str(key))
            value = trajectories.get(key).float()
            if key == ("next", "reward"):
                out[name] = (value[mask].mean() / self.frame_skip).item()
                out["total_" + name] = value.sum(dim=trajectories.ndim - 1).mean().item()
            else:
                out[name] = value
        return out

    def state_dict(self):
        """The batch counter."""
        return {"_count": self._count}

    def load_state_dict(self, state_dict):
        """Restores the batch counter."""
        self._count = state_dict["_count"]

    def register(self, trainer, name="recorder"):
        """Runs at ``post_steps_log``."""
        trainer.register_module(name, self)
        trainer.register_op("post_steps_log", self)

