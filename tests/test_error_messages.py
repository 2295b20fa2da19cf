"""Errors that say what went wrong and what to do: each test checks the error's type and that its
message names the offending thing and the fix (issue 31, item 6)."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from td_helpers import arr, leaves, make_td
from test_collector import COUNTER, collect, constant_policy

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, TensorDictReplayBuffer
from rlpipe.envs import GymEnv, SerialEnv
from rlpipe.postprocs import MultiStep

# ---- MultiStep applied to data that was n-stepped already -------------------------------------------


def trajectory(T=8):
    """One episode of T steps: reward t, observation t, done at the last step."""
    t = np.arange(T)
    return make_td({("observation",): t[:, None].astype(np.float32),
                    ("next", "observation"): (t + 1)[:, None].astype(np.float32),
                    ("next", "reward"): t[:, None].astype(np.float32),
                    ("next", "done"): (t == T - 1)[:, None],
                    ("next", "terminated"): (t == T - 1)[:, None]}, [T])


def snapshot(td):
    return {key: arr(value).copy() for key, value in leaves(td).items()}


def assert_same(before, td):
    after = snapshot(td)
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=str(key))


def assert_double_n_step_error(excinfo):
    message = str(excinfo.value)
    assert "steps_to_next_obs" in message  # what was found
    assert "n-stepped before" in message  # what it means
    assert "allow_repeated=True" in message  # how to opt in


@pytest.mark.parametrize("streaming", [False, True])
def test_multistep_refuses_n_stepped_input(streaming):
    stepped = MultiStep(0.99, 4)(trajectory())
    again = MultiStep(0.99, 3, streaming=streaming)
    before = snapshot(stepped)
    with pytest.raises(ValueError, match="already has a 'steps_to_next_obs' entry") as excinfo:
        again(stepped)
    assert_double_n_step_error(excinfo)
    assert_same(before, stepped)  # the data is untouched
    # the MultiStep stays usable: fresh data goes through (streaming: nothing of the refused batch was kept)
    out = again(trajectory())
    if streaming:
        out = rlpipe.cat([out, again.flush()], 0)
    expected = MultiStep(0.99, 3)(trajectory())
    assert_same(snapshot(expected), out)


def test_multistep_allow_repeated_applies_again():
    stepped = MultiStep(0.99, 4)(trajectory())
    twice = MultiStep(0.99, 3, allow_repeated=True)(stepped)
    # windows of 3 over data whose next observation is already 4 steps ahead: observation 6 at t=0 (1 + 3 + 2)
    assert arr(twice["next", "observation"])[0, 0] == 6
    assert arr(twice["steps_to_next_obs"])[0] == 3


def test_collector_multistep_into_replay_buffer_multistep():
    """The issue's case: a collector's postproc=MultiStep(4) feeding a buffer with transform=MultiStep(3)."""
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=7, total_frames=14,
                                  postproc=MultiStep(0.99, 4))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), transform=MultiStep(0.99, 3), batch_size=4)
    batch, fresh = (b.clone() for b in collect(collector))
    with pytest.raises(ValueError, match="already has a 'steps_to_next_obs' entry") as excinfo:
        rb.extend(batch)
    assert_double_n_step_error(excinfo)
    assert len(rb) == 0
    # the buffer still takes plain collector batches
    fresh = fresh.exclude("steps_to_next_obs", "gamma", "nonterminal", ("next", "original_reward"))
    rb.extend(fresh)
    rb.flush()
    assert len(rb) == 7


# ---- a policy that writes no "action" ---------------------------------------------------------------


def logits_policy(td):
    """Writes "logits" but forgets "action"."""
    td.set("logits", rlpipe.zeros(tuple(td.batch_size) + (2,)))
    return td


def assert_missing_action_error(excinfo):
    message = str(excinfo.value)
    assert "'logits_policy'" in message  # the policy
    assert "wrote no 'action' entry" in message  # the key it must write
    assert "wrote ['logits']" in message  # what it wrote instead


@pytest.mark.parametrize("num_envs", [None, 2])
def test_collector_names_a_policy_without_action(num_envs):
    env = GymEnv(COUNTER) if num_envs is None else GymEnv(COUNTER, num_envs=num_envs)
    collector = SyncDataCollector(env, logits_policy, frames_per_batch=4, total_frames=4)
    with pytest.raises(KeyError) as excinfo:
        next(iter(collector))
    assert_missing_action_error(excinfo)
    collector.shutdown()


def test_rollout_names_a_policy_without_action():
    with pytest.raises(KeyError) as excinfo:
        GymEnv(COUNTER).rollout(3, logits_policy)
    assert_missing_action_error(excinfo)
    assert "inputs ['done', 'observation', 'terminated', 'truncated']" in str(excinfo.value)


# ---- a NumPy array where an op wants a Tensor ----------------------------------------------------------


def assert_not_a_tensor_error(excinfo, op, argument):
    message = str(excinfo.value)
    assert f"{op}(): argument '{argument}' must be rlpipe.Tensor" in message  # the op, the expected type
    assert "got numpy.ndarray" in message  # the actual one
    assert "rlpipe.as_tensor(x)" in message and "rlpipe.from_numpy(x)" in message  # the fix


def test_linear_module_on_a_numpy_array():
    layer = nn.Linear(3, 2)
    x = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError) as excinfo:
        layer(x)
    assert_not_a_tensor_error(excinfo, "linear", "input")
    # the fix the message gives works
    expected = x @ arr(layer.weight).T + arr(layer.bias)
    np.testing.assert_allclose(arr(layer(rlpipe.as_tensor(x))), expected, rtol=1e-6)
    np.testing.assert_allclose(arr(layer(rlpipe.from_numpy(x))), expected, rtol=1e-6)


def test_functional_linear_names_the_numpy_argument():
    with pytest.raises(TypeError) as excinfo:
        nn.functional.linear(rlpipe.ones(1, 3), np.ones((2, 3), np.float32))
    assert_not_a_tensor_error(excinfo, "linear", "weight")


def test_an_unrelated_attribute_error_passes_through():
    class NotATensor:
        """Has the hook, so linear hands it the call, whose AttributeError must stay as it is."""
        @classmethod
        def __torch_function__(cls, func, types, args, kwargs):
            raise AttributeError("from the hook")
    with pytest.raises(AttributeError, match="from the hook"):
        nn.functional.linear(NotATensor(), rlpipe.ones(2, 3))


MODULES_ON_ARRAYS = [  # (module, a valid input's shape and dtype): every input path of the layers
    (lambda: nn.Conv2d(3, 4, 3), (1, 3, 5, 5), np.float32),
    (lambda: nn.ReLU(), (2, 3), np.float32),
    (lambda: nn.LayerNorm(3), (2, 3), np.float32),
    (lambda: nn.Embedding(5, 2), (4,), np.int64),
    (lambda: nn.MaxPool2d(2), (1, 3, 4, 4), np.float32),
    (lambda: nn.AvgPool2d(2), (1, 3, 4, 4), np.float32),
    (lambda: nn.Flatten(), (2, 3, 4), np.float32),
    (lambda: nn.Dropout(0.5), (2, 3), np.float32),
    (lambda: nn.Hardswish(), (2, 3), np.float32),
    (lambda: nn.LSTM(3, 4), (5, 3), np.float32),
]


# modules whose functional op checks its tensor arguments first names that op, as torch's message does
NAMED_BY_ITS_OP = {"LayerNorm": "layer_norm"}


@pytest.mark.parametrize("make, shape, dtype", MODULES_ON_ARRAYS)
def test_module_on_a_numpy_array_says_to_convert_it(make, shape, dtype):
    module = make()
    x = np.ones(shape, dtype)
    with pytest.raises(TypeError) as excinfo:
        module(x)
    name = type(module).__name__
    assert_not_a_tensor_error(excinfo, NAMED_BY_ITS_OP.get(name, f"{name}.forward"), "input")
    module(rlpipe.as_tensor(x))  # the fix the message gives works, and the failed call left the module usable


def test_module_with_hooks_on_a_numpy_array_says_to_convert_it():
    module = nn.Conv2d(3, 4, 3)
    seen = []
    module.register_forward_pre_hook(lambda m, args: seen.append(type(args[0]).__name__))
    with pytest.raises(TypeError) as excinfo:
        module(np.ones((1, 3, 5, 5), np.float32))
    assert_not_a_tensor_error(excinfo, "Conv2d.forward", "input")
    assert seen == ["ndarray"]


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_module_on_a_cupy_array_says_to_convert_it():
    import cupy
    module = nn.Conv2d(3, 4, 3).cuda()
    x = cupy.ones((1, 3, 5, 5), dtype=cupy.float32)
    with pytest.raises(TypeError) as excinfo:
        module(x)
    message = str(excinfo.value)
    assert "Conv2d.forward(): argument 'input' must be rlpipe.Tensor" in message and "ndarray" in message
    assert "rlpipe.as_tensor(x)" in message
    assert module(rlpipe.as_tensor(x, device="cuda")).shape == (1, 4, 3, 3)  # the fix works


class TwoInputs(nn.Module):
    """A user's module whose second input is the array."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Conv2d(3, 2, 1)

    def forward(self, obs, action):
        return self.layer(obs) * action.unsqueeze(-1)


def test_module_names_the_numpy_argument():
    module = TwoInputs()
    obs = rlpipe.ones(1, 3, 2, 2)
    with pytest.raises(TypeError) as excinfo:
        module(obs, np.ones((1, 2, 2), np.float32))
    assert_not_a_tensor_error(excinfo, "TwoInputs.forward", "action")
    with pytest.raises(TypeError) as excinfo:
        module(obs, action=np.ones((1, 2, 2), np.float32))
    assert_not_a_tensor_error(excinfo, "TwoInputs.forward", "action")
    assert module(obs, rlpipe.ones(1, 2, 2)).shape == (1, 2, 2, 2)


def test_module_keeps_the_error_that_is_not_about_an_array():
    class Broken(nn.Module):
        def forward(self, x):
            raise AttributeError("from forward")

    with pytest.raises(AttributeError, match="from forward"):
        Broken()(rlpipe.ones(2))


def test_module_keeps_the_other_failure_as_the_cause():
    """A TypeError raised on something else while an input is an array: the message suggests the
    conversion and the original failure stays attached."""
    class Picky(nn.Module):
        def forward(self, x):
            raise TypeError("picky")

    with pytest.raises(TypeError) as excinfo:
        Picky()(np.ones(2))
    assert_not_a_tensor_error(excinfo, "Picky.forward", "x")
    assert str(excinfo.value.__cause__) == "picky"


# ---- the NVRTC check under the CuPy stand-in -------------------------------------------------------------


def test_nvrtc_check_skip_says_the_stand_in_hides_cupy():
    """Under RLPIPE_CUPY_STANDIN=1 the NVRTC module is skipped because the stand-in replaces CuPy, which
    its reason says, instead of asking to install packages that may well be installed."""
    root = pathlib.Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "tests/test_kernels_nvrtc.py"], cwd=root, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RLPIPE_CUPY_STANDIN": "1"})
    assert "1 skipped" in run.stdout, run.stdout + run.stderr
    assert "the CuPy stand-in (RLPIPE_CUPY_STANDIN=1) replaces CuPy" in run.stdout  # what is the case
    assert "without RLPIPE_CUPY_STANDIN" in run.stdout  # what to do
    assert "pip install" not in run.stdout


# ---- saving a whole Module -------------------------------------------------------------------------------


@pytest.mark.parametrize("nested", [False, True])
def test_save_a_module_suggests_its_state_dict(tmp_path, nested):
    layer = nn.Linear(3, 2)
    path = tmp_path / "layer.pt"
    with pytest.raises(TypeError) as excinfo:
        rlpipe.save({"policy": layer} if nested else layer, path)
    message = str(excinfo.value)
    assert "cannot store object of type 'rlpipe.nn.modules.linear.Linear'" in message  # what it got
    assert "save(module.state_dict(), path)" in message and "load_state_dict" in message  # the fix
    assert ("at ['policy']" if nested else "at the top level") in message
    assert not path.exists()
    # the fix the message gives works
    rlpipe.save(layer.state_dict(), path)
    copy = nn.Linear(3, 2)
    copy.load_state_dict(rlpipe.load(path))
    np.testing.assert_array_equal(arr(copy.weight), arr(layer.weight))


# ---- categorical actions against a one-hot action spec ---------------------------------------------


def categorical_policy(td):
    """Writes action indices (what a Categorical distribution samples), not one-hot vectors."""
    td.set("action", rlpipe.ones(tuple(td.batch_size), dtype=rlpipe.int64))
    return td


def assert_categorical_hint(excinfo):
    message = str(excinfo.value)
    assert "one-hot" in message and "categorical_action_encoding=True" in message


@pytest.mark.parametrize("num_envs", [None, 2])
def test_collector_suggests_categorical_action_encoding(num_envs):
    kwargs = {} if num_envs is None else {"num_envs": num_envs}
    collector = SyncDataCollector(GymEnv(COUNTER, **kwargs), categorical_policy, frames_per_batch=4, total_frames=4)
    with pytest.raises(ValueError, match=r"the policy returned an action of shape") as excinfo:
        next(iter(collector))
    assert_categorical_hint(excinfo)
    collector.shutdown()
    # the fix the message gives works: the counter's reward is t + 10 * action
    env = GymEnv(COUNTER, categorical_action_encoding=True, **kwargs)
    (batch,) = collect(SyncDataCollector(env, categorical_policy, frames_per_batch=4, total_frames=4))
    assert (arr(batch["next", "reward"]) >= 10).all()


@pytest.mark.parametrize("num_envs", [None, 2])
def test_env_step_suggests_categorical_action_encoding(num_envs):
    env = GymEnv(COUNTER) if num_envs is None else GymEnv(COUNTER, num_envs=num_envs)
    with pytest.raises(ValueError, match=r"expected an action of shape") as excinfo:
        env.rollout(3, categorical_policy)
    assert_categorical_hint(excinfo)


def test_batched_env_suggests_categorical_action_encoding():
    env = SerialEnv(2, lambda: GymEnv(COUNTER))
    with pytest.raises(ValueError, match=r"SerialEnv: expected an action of shape") as excinfo:
        env.rollout(3, categorical_policy)
    assert_categorical_hint(excinfo)
    env.close()


def test_a_wrong_one_hot_width_gets_no_categorical_hint():
    env = GymEnv(COUNTER, num_envs=2)
    td = env.reset()
    td.set("action", rlpipe.zeros(2, 3, dtype=rlpipe.int64))
    with pytest.raises(ValueError, match=r"expected an action of shape") as excinfo:
        env.step(td)
    assert "categorical_action_encoding" not in str(excinfo.value)
