"""torchrl 0.14's ``Evaluator``: evaluation rollouts of whole episodes, blocking (``evaluate``) or in
the background (``trigger_eval`` then ``poll``/``wait``), on a collector with ``trajs_per_batch``.

Backends: ``"thread"`` (a ``SyncDataCollector`` in this process; the background work runs in a
daemon thread) and ``"process"`` (a ``MultiSyncDataCollector`` with one worker process: the env and
the policy, made by ``env`` and ``policy_factory()``, step there). torchrl's ``"ray"`` backend and
``weight_sync_schemes`` are not provided."""
import collections
import math
import threading
import time

import numpy as np

from .._tensor import Tensor
from .._utils import logger
from ..autograd.grad_mode import no_grad
from .._creation import as_tensor
from ..envs.common import EnvBase
from ..envs.utils import ExplorationType, set_exploration_type
from ..nn import Module
from ..tensordict import TensorDict, is_tensor_collection
from .collectors import SyncDataCollector
from .multi import MultiSyncDataCollector

__all__ = ["Evaluator"]

_BUSY_POLICIES = ("skip", "error", "queue")
_METRICS = ("reward", "reward_std", "num_episodes", "episode_length", "fps")


def _trajectories(batch):
    """The trajectories of a ``trajs_per_batch`` batch: its padded rows cut to their mask."""
    mask = batch.get(("collector", "mask"), None)
    if mask is None:
        return [batch]
    lengths = mask.reshape(mask.shape[0], -1).sum(-1).tolist()
    return [batch[i, :int(n)] for i, n in enumerate(lengths) if n]


def _episode_metrics(trajectory, reward_key):
    """(return, length) of one trajectory: RewardSum's ``("next", "episode_reward")`` and StepCounter's
    ``("next", "step_count")`` at its last step where the env has them, else the summed reward and the
    number of steps (torchrl's rule)."""
    last = trajectory.shape[0] - 1
    episode_reward = trajectory.get(("next", "episode_reward"), None)
    if episode_reward is not None:
        ret = episode_reward[last].sum().item()
    else:
        ret = trajectory.get(reward_key).sum().item()
    step_count = trajectory.get(("next", "step_count"), None)
    length = step_count[last].sum().item() if step_count is not None else float(trajectory.shape[0])
    return ret, length


def trajectory_metrics(batch, reward_key=("next", "reward"), metrics_fn=None, seconds=None):
    """torchrl's evaluation metrics of a batch of whole trajectories: mean and (unbiased) std of the
    returns, the number of episodes, the mean length, frames per second, and ``metrics_fn(batch)``'s
    entries under ``custom/``."""
    episodes = [_episode_metrics(t, reward_key) for t in _trajectories(batch)]
    returns = np.array([r for r, _ in episodes], dtype=np.float64)
    frames = sum(t.shape[0] for t in _trajectories(batch))
    metrics = {"reward": float(returns.mean()) if len(returns) else math.nan,
               "reward_std": float(returns.std(ddof=1)) if len(returns) > 1 else (0.0 if len(returns) else math.nan),
               "num_episodes": len(episodes),
               "episode_length": float(np.mean([n for _, n in episodes])) if episodes else math.nan,
               "frame_count": frames}
    if seconds:
        metrics["fps"] = frames / seconds
    for key, value in (metrics_fn(batch) if metrics_fn is not None else {}).items():
        metrics[f"custom/{key}"] = value
    return metrics


def _weights_of(source):
    """A detached copy of ``source``'s weights (a Module, or a TensorDict of them), safe to hand to
    another thread."""
    if isinstance(source, Module):
        source = TensorDict.from_module(source)
    if not is_tensor_collection(source):
        raise TypeError(f"Evaluator: weights must be an nn.Module or a TensorDict of its parameters, got "
                        f"{type(source).__name__}")
    return source.detach().clone()


class _Backend:
    """Runs one evaluation at a time on its collector, made at the first evaluation."""

    def __init__(self, env, policy, policy_factory, options, in_process):
        self.env, self.policy, self.policy_factory = env, policy, policy_factory
        self.options, self.in_process = options, in_process
        self.collector = None

    def _make_collector(self):
        opts = self.options
        if not self.in_process:
            policy = self.policy_factory()
            return MultiSyncDataCollector([self.env], policy, frames_per_batch=opts["frames_per_batch"],
                                          total_frames=-1, max_frames_per_traj=opts["max_steps"],
                                          trajs_per_batch=opts["num_trajectories"],
                                          exploration_type=opts["exploration_type"], **opts["collector_kwargs"])
        env = self.env() if not isinstance(self.env, EnvBase) else self.env
        if self.policy is None:
            self.policy = self.policy_factory(env)
        has_step_count = any("step_count" in (key if isinstance(key, tuple) else (key,))
                             for key in env.full_observation_spec.keys(True, True))
        return opts["collector_cls"](env, self.policy, frames_per_batch=opts["frames_per_batch"], total_frames=-1,
                                     max_frames_per_traj=None if has_step_count else opts["max_steps"],
                                     trajs_per_batch=opts["num_trajectories"],
                                     exploration_type=opts["exploration_type"], **opts["collector_kwargs"])

    def _load(self, weights):
        if self.in_process:
            TensorDict.from_module(self.policy).data.update_(weights)
        else:
            self.collector.update_policy_weights_(dict(weights.flatten_keys(".").items()))

    def run(self, weights, reward_key, metrics_fn):
        """Loads ``weights`` (if any), collects ``num_trajectories`` whole episodes and returns their metrics."""
        if self.collector is None:
            self.collector = self._make_collector()
        if weights is not None:
            self._load(weights)
        training = isinstance(self.policy, Module) and self.policy.training
        if training:
            self.policy.eval()
        start = time.perf_counter()
        try:
            with set_exploration_type(self.options["exploration_type"]), no_grad():
                self.collector.reset()  # each evaluation starts new episodes, with the weights just loaded
                batch = next(iter(self.collector))
        finally:
            if training:
                self.policy.train()
        return trajectory_metrics(batch, reward_key, metrics_fn, time.perf_counter() - start)

    def shutdown(self):
        """Shuts the collector down (its worker process, with the process backend)."""
        if self.collector is not None:
            self.collector.shutdown()
            self.collector = None


class Evaluator:
    """Evaluation rollouts of ``num_trajectories`` whole episodes per evaluation, as torchrl 0.14's.

    ``evaluate(weights=None, step=None)`` blocks and returns the metrics: ``"<log_prefix>/reward"``
    (mean return), ``/reward_std``, ``/num_episodes``, ``/episode_length``, ``/fps`` and ``/step``
    (``step``, or a counter of the evaluations). ``trigger_eval`` starts one in a background thread
    (returns False when one is already pending and ``busy_policy="skip"``; ``"error"`` raises a
    RuntimeError; ``"queue"`` queues it); ``poll(timeout=0)`` returns its result or None and
    ``wait(timeout=None)`` blocks for it. ``on_result`` receives every result as a TensorDict.
    ``weights`` (a Module or a TensorDict from ``from_module``) are copied into the policy first.

    The policy runs in eval mode under ``exploration_type`` (deterministic by default). A return is
    ``("next", "episode_reward")`` at an episode's end where the env has a ``RewardSum``, else the
    sum of ``reward_keys``; a length is StepCounter's count, else the steps collected.
    """

    def __init__(self, env, policy=None, *, policy_factory=None, num_trajectories=10, max_steps=None,
                 frames_per_batch=None, collector_cls=None, collector_kwargs=None, weight_sync_schemes=None,
                 log_prefix="eval", reward_keys=("next", "reward"), done_keys=("next", "done"), device=None,
                 exploration_type=ExplorationType.DETERMINISTIC, metrics_fn=None, dump_video=True, on_result=None,
                 busy_policy="skip", backend="thread", init_fn=None, num_gpus=1, ray_kwargs=None):
        if busy_policy not in _BUSY_POLICIES:
            raise ValueError(f"Unknown busy_policy {busy_policy!r}. Choose 'skip', 'error' or 'queue'.")
        if backend not in ("thread", "process"):
            raise ValueError(f"Evaluator: unknown backend {backend!r}; rlpipe has 'thread' and 'process' "
                             "(torchrl's 'ray' backend is not provided)")
        if weight_sync_schemes is not None:
            raise ValueError("Evaluator: weight_sync_schemes are not supported; pass weights to evaluate() or "
                             "trigger_eval() instead")
        if policy is not None and policy_factory is not None:
            raise ValueError("Provide either `policy` or `policy_factory`, not both.")
        if policy is None and policy_factory is None:
            raise ValueError("Either `policy` or `policy_factory` must be provided.")
        if backend == "process" and (isinstance(env, EnvBase) or not callable(env) or policy_factory is None):
            raise ValueError("The 'process' backend requires `env` to be a callable (factory function) and "
                             "`policy_factory`, because the env and the policy are created inside a child process.")
        self._log_prefix, self._reward_key, self._metrics_fn = log_prefix, reward_keys, metrics_fn
        self._on_result, self._busy_policy = on_result, busy_policy
        self._step_counter = 0
        options = {"num_trajectories": int(num_trajectories), "max_steps": max_steps,
                   "frames_per_batch": frames_per_batch or max_steps or 1000,
                   "collector_cls": collector_cls or SyncDataCollector, "exploration_type": exploration_type,
                   "collector_kwargs": dict(collector_kwargs or {})}
        self._backend = _Backend(env, policy, policy_factory, options, in_process=backend == "thread")
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._requests = collections.deque()  # (weights, step) not yet started
        self._running = False
        self._results = collections.deque()
        self._result_ready = threading.Event()
        self._thread = None
        self._closed = False

    # ---- synchronous ------------------------------------------------------------------------------------
    def evaluate(self, weights=None, step=None, *, weights_dict=None):
        """Runs an evaluation now and returns its metrics (a dict)."""
        result = self._evaluate(self._prepared(weights, weights_dict), self._next_step(step))
        self._invoke_on_result(result)
        return result

    def _evaluate(self, weights, step):
        raw = self._backend.run(weights, self._reward_key, self._metrics_fn)
        prefix = self._log_prefix
        out = {f"{prefix}/{key}": raw[key] for key in _METRICS if key in raw}
        out[f"{prefix}/step"] = step
        out.update({f"{prefix}/{key[7:]}": value for key, value in raw.items() if key.startswith("custom/")})
        return out

    # ---- asynchronous -----------------------------------------------------------------------------------
    def trigger_eval(self, weights=None, step=None, *, weights_dict=None):
        """Starts an evaluation in the background; False when skipped (one is pending, ``busy_policy="skip"``)."""
        prepared, step = self._prepared(weights, weights_dict), self._next_step(step)
        with self._lock:
            self._check_open()
            busy = self._running or bool(self._requests)
            if busy and self._busy_policy == "error":
                raise RuntimeError("Evaluation already pending. Wait for completion or set busy_policy='skip' or "
                                   "busy_policy='queue'.")
            if busy and self._busy_policy == "skip":
                return False
            self._requests.append((prepared, step))
            self._wake.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="evaluator", daemon=True)
                self._thread.start()
        return True

    def poll(self, timeout=0):
        """The oldest finished result not yet read, or None (after waiting up to ``timeout`` seconds)."""
        if timeout > 0:
            self._result_ready.wait(timeout)
        return self._pop_result()

    def wait(self, timeout=None):
        """Blocks until a result is there (or ``timeout`` seconds passed) and returns it (or None)."""
        self._result_ready.wait(timeout)
        return self._pop_result()

    @property
    def pending(self):
        """Whether an evaluation is running or queued."""
        with self._lock:
            return self._running or bool(self._requests)

    def _serve(self):
        while True:
            with self._lock:
                while not self._requests and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                weights, step = self._requests.popleft()
                self._running = True
            try:
                result = self._evaluate(weights, step)
            except Exception as err:  # the caller reads it from poll()/wait(), rather than a dead thread
                result = err
            if not isinstance(result, Exception):
                self._invoke_on_result(result)
            with self._lock:
                self._running = False
                self._results.append(result)
                self._result_ready.set()

    def _pop_result(self):
        with self._lock:
            result = self._results.popleft() if self._results else None
            if not self._results:
                self._result_ready.clear()
        if isinstance(result, Exception):
            raise RuntimeError(f"Evaluator: the background evaluation failed: {result!r}") from result
        return result

    # ---- lifecycle -------------------------------------------------------------------------------------
    def shutdown(self, timeout=5.0):
        """Stops the background thread (after the evaluation it runs, up to ``timeout`` seconds) and the
        collector; safe to call twice."""
        with self._lock:
            self._closed = True
            self._requests.clear()
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        self._backend.shutdown()

    def state_dict(self):
        """The evaluation counter (torchrl's checkpoint of an evaluator with nothing pending)."""
        with self._lock:
            if self._running or self._requests or self._results:
                raise RuntimeError("Evaluator checkpointing requires no pending, queued, or unread evaluation results.")
            return {"step_counter": self._step_counter}

    def load_state_dict(self, state_dict):
        """Restores ``state_dict()``'s counter."""
        self._step_counter = int(state_dict.get("step_counter", 0))

    # ---- helpers ---------------------------------------------------------------------------------------
    @staticmethod
    def extract_weights(policy):
        """A detached copy of ``policy``'s parameters and buffers as a TensorDict."""
        return _weights_of(policy)

    def _prepared(self, weights, weights_dict):
        if weights_dict:
            unknown = sorted(set(weights_dict) - {"policy"})
            if unknown:
                raise ValueError(f"Evaluator: weights_dict can only hold 'policy' in rlpipe, got {unknown}")
            weights = weights if weights is not None else weights_dict["policy"]
        return None if weights is None else _weights_of(weights)

    def _next_step(self, step):
        if step is not None:
            return step
        self._step_counter += 1
        return self._step_counter - 1

    def _check_open(self):
        if self._closed:
            raise RuntimeError("Evaluator: this evaluator was shut down")

    def _invoke_on_result(self, result):
        if self._on_result is None:
            return
        try:
            self._on_result(TensorDict({key: value if isinstance(value, Tensor) else as_tensor(value)
                                        for key, value in result.items()}, []))
        except Exception:  # as torchrl: a failing logging callback must not stop the evaluations
            logger.warning("Evaluator on_result callback failed", exc_info=True)
