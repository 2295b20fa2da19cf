"""torchrl's parameter schedulers: change a sampler attribute (e.g. a PrioritizedSampler's
``beta``) on every ``step()``, clipped to ``[min_value, max_value]``."""
import abc
import operator

import numpy as np

from ..._tensor import Tensor
from .replay_buffers import ReplayBuffer
from .samplers import Sampler

__all__ = ["ParameterScheduler", "LambdaScheduler", "LinearScheduler", "StepScheduler", "SchedulerList"]


class ParameterScheduler(abc.ABC):
    """Schedules ``param_name`` of ``obj`` (a sampler, or a replay buffer's sampler)."""

    def __init__(self, obj, param_name, min_value=None, max_value=None):
        if not isinstance(obj, (ReplayBuffer, Sampler)):
            raise TypeError(f"ParameterScheduler only supports Sampler class. Pass either `ReplayBuffer` or `Sampler` "
                            f"object. Got {type(obj)} instead.")
        self.sampler = obj.sampler if isinstance(obj, ReplayBuffer) else obj
        self.param_name = param_name
        self._min_val = float("-inf") if min_value is None else min_value
        self._max_val = float("inf") if max_value is None else max_value
        if not hasattr(self.sampler, param_name):
            raise ValueError(f"Provided class {type(obj).__name__} does not have an attribute {param_name}")
        initial = getattr(self.sampler, param_name)
        self.initial_val = initial.clone() if isinstance(initial, Tensor) else initial
        self._step_cnt = 0

    def state_dict(self):
        """Every attribute but the sampler."""
        state = dict(self.__dict__)
        del state["sampler"]
        return state

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``."""
        self.__dict__.update(state_dict)

    def step(self):
        """Advances one step and writes the new value to the sampler's parameter."""
        self._step_cnt += 1
        value = self._step()
        if isinstance(value, Tensor):
            value = value.clamp(self._min_val, self._max_val)
        else:
            value = type(value)(np.clip(value, self._min_val, self._max_val)) if isinstance(value, (int, float)) \
                else np.clip(value, self._min_val, self._max_val)
        setattr(self.sampler, self.param_name, value)

    @abc.abstractmethod
    def _step(self):
        ...


class LambdaScheduler(ParameterScheduler):
    """The initial value times ``lambda_fn(step_count)``."""

    def __init__(self, obj, param_name, lambda_fn, min_value=None, max_value=None):
        super().__init__(obj, param_name, min_value, max_value)
        self.lambda_fn = lambda_fn

    def _step(self):
        return self.initial_val * self.lambda_fn(self._step_cnt)


class LinearScheduler(ParameterScheduler):
    """From the initial value to ``final_value`` in ``num_steps`` equal steps, then constant."""

    def __init__(self, obj, param_name, final_value, num_steps):
        super().__init__(obj, param_name)
        self.final_val = final_value
        self.num_steps = num_steps
        self._delta = (self.final_val - self.initial_val) / self.num_steps

    def _step(self):
        if self._step_cnt < self.num_steps:
            return self.initial_val + self._delta * self._step_cnt
        return self.final_val


class StepScheduler(ParameterScheduler):
    """Every ``n_steps`` steps, the value times ``gamma`` (``mode="multiplicative"``) or plus
    ``gamma`` (``"additive"``)."""

    def __init__(self, obj, param_name, gamma=0.9, n_steps=1, mode="multiplicative", min_value=None,
                 max_value=None):
        super().__init__(obj, param_name, min_value, max_value)
        if mode not in ("additive", "multiplicative"):
            raise ValueError(f"Invalid mode: {mode}. Choose 'multiplicative' or 'additive'.")
        self.gamma, self.n_steps, self.mode = gamma, n_steps, mode
        self.operator = operator.add if mode == "additive" else operator.mul

    def _step(self):
        current = getattr(self.sampler, self.param_name)
        return self.operator(current, self.gamma) if self._step_cnt % self.n_steps == 0 else current


class SchedulerList:
    """Steps several schedulers together."""

    def __init__(self, schedulers):
        self.schedulers = [schedulers] if isinstance(schedulers, ParameterScheduler) else schedulers

    def append(self, scheduler):
        """Adds a scheduler to the list."""
        self.schedulers.append(scheduler)

    def step(self):
        """Steps every scheduler of the list."""
        for scheduler in self.schedulers:
            scheduler.step()
