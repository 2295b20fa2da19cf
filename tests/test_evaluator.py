"""torchrl 0.14's ``Evaluator`` (``rlpipe.collectors.Evaluator``) and ``Logger.log_metrics``.

The env is ``Counter``: an episode of 5 steps whose rewards are ``t + 10 * action`` (t = 1..5), so
a return is 15 with action 0 and 65 with action 1 (by hand)."""
import functools
import os
import threading

import pytest

import rlpipe
from rlpipe import nn
from rlpipe.collectors import Evaluator
from rlpipe.envs import GymEnv
from rlpipe.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
from rlpipe.record.loggers import CSVLogger, Logger
from rlpipe.tensordict import TensorDict, TensorDictModule
from test_collector import COUNTER


class _Choice(nn.Module):
    """Plays the action whose score is highest, whatever the observation."""

    def __init__(self, action):
        super().__init__()
        self.scores = nn.Parameter(rlpipe.nn.functional.one_hot(rlpipe.tensor(action), 2).float())

    def forward(self, observation):
        index = self.scores.argmax().expand(observation.shape[:-1])
        return rlpipe.nn.functional.one_hot(index, 2)


def _policy(action):
    return TensorDictModule(_Choice(action), ["observation"], ["action"])


def _counter_env():
    return GymEnv(COUNTER)


def test_evaluate_returns_torchrl_metrics():
    evaluator = Evaluator(_counter_env, _policy(1), num_trajectories=2)
    result = evaluator.evaluate()
    assert {k: v for k, v in result.items() if k != "eval/fps"} == {
        "eval/reward": 65.0, "eval/reward_std": 0.0, "eval/num_episodes": 2, "eval/episode_length": 5.0,
        "eval/step": 0}
    assert result["eval/fps"] > 0
    assert evaluator.evaluate(step=40)["eval/step"] == 40 and evaluator.evaluate()["eval/step"] == 1
    evaluator.shutdown()


def test_evaluate_reads_reward_sum_and_step_counter():
    """With RewardSum and StepCounter the return and length are theirs (same values here); max_steps
    truncates the episodes at 3 steps: return 11 + 12 + 13."""
    env = TransformedEnv(_counter_env(), Compose(StepCounter(), RewardSum()))
    assert Evaluator(env, _policy(1), num_trajectories=1).evaluate()["eval/reward"] == 65.0
    result = Evaluator(_counter_env(), _policy(1), num_trajectories=3, max_steps=3, log_prefix="test").evaluate()
    assert (result["test/reward"], result["test/episode_length"], result["test/num_episodes"]) == (36.0, 3.0, 3)


def test_weights_are_loaded_before_the_rollout():
    policy = _policy(0)
    evaluator = Evaluator(_counter_env(), policy, num_trajectories=1)
    assert evaluator.evaluate()["eval/reward"] == 15.0
    assert evaluator.evaluate(weights=_policy(1))["eval/reward"] == 65.0
    assert evaluator.evaluate(weights=TensorDict.from_module(_policy(0)))["eval/reward"] == 15.0
    assert policy.training  # back in train mode after the evaluation


def test_trigger_eval_poll_wait_and_busy_policies():
    gate = threading.Event()

    class Gated(_Choice):
        def forward(self, observation):
            gate.wait(10)
            return super().forward(observation)

    evaluator = Evaluator(_counter_env(), TensorDictModule(Gated(1), ["observation"], ["action"]),
                          num_trajectories=1)
    assert evaluator.trigger_eval(step=7) is True
    assert evaluator.pending and evaluator.poll() is None
    assert evaluator.trigger_eval() is False  # skip: one is pending
    gate.set()
    result = evaluator.wait(timeout=30)
    assert result["eval/reward"] == 65.0 and result["eval/step"] == 7 and not evaluator.pending
    evaluator.shutdown()
    queued = Evaluator(_counter_env(), _policy(1), num_trajectories=1, busy_policy="queue")
    assert queued.trigger_eval(step=1) and queued.trigger_eval(step=2)
    steps = [queued.wait(timeout=30)["eval/step"], queued.wait(timeout=30)["eval/step"]]
    assert steps == [1, 2]
    queued.shutdown()


def test_busy_policy_error_raises_while_pending():
    gate = threading.Event()
    evaluator = Evaluator(_counter_env(), lambda td: (gate.wait(10), _policy(1)(td))[1], num_trajectories=1,
                          busy_policy="error")
    evaluator.trigger_eval()
    with pytest.raises(RuntimeError, match="Evaluation already pending"):
        evaluator.trigger_eval()
    gate.set()
    assert evaluator.wait(timeout=30)["eval/reward"] == 65.0
    evaluator.shutdown()


def test_on_result_gets_a_tensordict_and_a_failing_callback_is_logged(caplog):
    seen = []
    Evaluator(_counter_env(), _policy(1), num_trajectories=1, on_result=seen.append).evaluate()
    assert isinstance(seen[0], TensorDict) and seen[0]["eval/reward"].item() == 65.0

    def broken(result):
        raise KeyError("oops")

    result = Evaluator(_counter_env(), _policy(1), num_trajectories=1, on_result=broken).evaluate()
    assert result["eval/reward"] == 65.0


def test_process_backend_runs_in_a_worker_process():
    evaluator = Evaluator(_counter_env, policy_factory=functools.partial(_policy, 1), num_trajectories=2,
                          backend="process")
    try:
        assert evaluator.evaluate()["eval/reward"] == 65.0
        assert evaluator.evaluate(weights=_policy(0))["eval/reward"] == 15.0
    finally:
        evaluator.shutdown()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"busy_policy": "later"}, ValueError, "Unknown busy_policy 'later'"),
    ({"backend": "ray"}, ValueError, "unknown backend 'ray'"),
    ({"policy_factory": _policy}, ValueError, "Provide either `policy` or `policy_factory`, not both."),
    ({"policy": None}, ValueError, "Either `policy` or `policy_factory` must be provided."),
    ({"backend": "process"}, ValueError, "The 'process' backend requires `env` to be a callable"),
    ({"weight_sync_schemes": {}}, ValueError, "weight_sync_schemes are not supported"),
])
def test_bad_arguments(kwargs, error, message):
    kwargs = {"policy": _policy(1), **kwargs}
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        Evaluator(_counter_env, **kwargs)


def test_bad_weights_and_shut_down_evaluator():
    evaluator = Evaluator(_counter_env(), _policy(1), num_trajectories=1)
    with pytest.raises(TypeError, match="weights must be an nn.Module or a TensorDict of its parameters, got list"):
        evaluator.evaluate(weights=[1.0])
    with pytest.raises(ValueError, match=r"weights_dict can only hold 'policy' in rlpipe, got \['env'\]"):
        evaluator.evaluate(weights_dict={"env": _policy(1)})
    assert evaluator.evaluate()["eval/reward"] == 65.0  # still usable
    evaluator.shutdown()
    with pytest.raises(RuntimeError, match="was shut down"):
        evaluator.trigger_eval()


def test_logger_log_metrics(tmp_path):
    logger = CSVLogger("exp", log_dir=str(tmp_path))
    out = logger.log_metrics({"a/x": rlpipe.tensor(1.5), "b": 2}, step=3)
    assert out == {"a/x": 1.5, "b": 2}
    nested = logger.log_metrics(TensorDict({"c": {"d": rlpipe.tensor(4.0)}}, []), step=4)
    assert nested == {"c/d": 4.0}
    with open(os.path.join(tmp_path, "exp", "scalars", "a", "x.csv")) as f:
        assert f.read().strip() == "3,1.5"


def test_logger_log_metrics_turns_tensors_into_python_values():
    class Recording(Logger):
        def _create_experiment(self):
            return []

        def log_scalar(self, name, value, step=None):
            self.experiment.append((name, value, step))

    logger = Recording("exp", "unused")
    assert logger.log_metrics({"v": rlpipe.tensor([1.0, 2.0]), "s": rlpipe.tensor([3])}) == {"v": [1.0, 2.0], "s": 3}
    assert logger.experiment == [("v", [1.0, 2.0], None), ("s", 3, None)]
