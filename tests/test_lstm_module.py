"""``LSTMModule`` and ``GRUModule`` against torchrl 0.14.1's outputs (tests/fixtures/lstm_module_golden.json,
written by make_lstm_module_golden.py), step-by-step runs against whole-sequence runs on random episodes, the
``is_init`` resets, the keys, the recurrent mode, bad inputs, and a policy in ``SyncDataCollector`` whose
batches replay in recurrent mode."""
import json
import os
import threading

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import GymEnv, Transform, TransformedEnv
from rlpipe.envs.specs import Categorical
from rlpipe.modules import GRUModule, LSTMModule, recurrent_mode, set_recurrent_mode
from rlpipe.tensordict import TensorDict, TensorDictModule, TensorDictSequential
from test_gym_env import Counter

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
with open(os.path.join(FIXTURES, "lstm_module_golden.json")) as _f:
    GOLDEN = json.load(_f)
STATES = {"lstm": ["recurrent_state_h", "recurrent_state_c"], "gru": ["recurrent_state"]}
MODULES = {"lstm": LSTMModule, "gru": GRUModule}


def t(x, dtype=rlpipe.float32, device="cpu"):
    return rlpipe.tensor(np.asarray(x), dtype=dtype, device=device)


def arr(x):
    return np.asarray(x.detach().cpu().numpy(), dtype=np.float64)


def module_with_params(kind, params, device="cpu", **kwargs):
    module = MODULES[kind](input_size=2, hidden_size=3, num_layers=2, in_key="obs", out_key="y", device=device,
                           **kwargs)
    layer = getattr(module, kind)
    for name, p in layer.named_parameters():
        p.data = t(params[name], device=device)
    return module


def check_golden(case, device):
    module = module_with_params(case["kind"], case["params"], device)
    inputs = {k: t(v, rlpipe.bool if k == "is_init" else rlpipe.float32, device)
              for k, v in case["inputs"].items()}
    obs = inputs["obs"].requires_grad_(True)
    td = TensorDict(inputs, batch_size=case["batch"])
    with set_recurrent_mode(case["recurrent"]):
        out = module(td)
    assert out is td and td["y"].device.type == device
    np.testing.assert_allclose(arr(td["y"]), case["outputs"]["y"], atol=2e-6)
    for name in STATES[case["kind"]]:
        np.testing.assert_allclose(arr(td["next", name]), case["outputs"][f"next.{name}"], atol=2e-6)
    (td["y"] * t(case["y_weight"], device=device)).sum().backward()
    np.testing.assert_allclose(arr(obs.grad), case["obs_grad"], atol=2e-6)


def _case_id(case):
    return f"{case['kind']}-{'seq' if case['recurrent'] else 'step'}"


@pytest.mark.parametrize("case", GOLDEN, ids=_case_id)
def test_matches_torchrl(case):
    check_golden(case, "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("case", GOLDEN, ids=_case_id)
def test_matches_torchrl_on_cuda(case):
    check_golden(case, "cuda")


def random_episodes(rng, envs, steps):
    """is_init [envs, steps]: each row starts a new episode at step 0 with probability 1/2 (else it starts
    mid-episode), and at later steps with probability 0.3."""
    is_init = rng.random((envs, steps)) < 0.3
    is_init[:, 0] = rng.random(envs) < 0.5
    return is_init


def run_step_by_step(module, kind, obs, is_init, first_states):
    """Calls the module once per step on [envs] tensordicts, carrying ("next", state) to the root as the
    collector does; returns the outputs [envs, steps, H], the stored input states and the next states."""
    states = dict(first_states)
    ys, stored, nexts = [], {k: [] for k in states}, {k: [] for k in states}
    for step in range(obs.shape[1]):
        td = TensorDict({"obs": t(obs[:, step]), "is_init": t(is_init[:, step, None], rlpipe.bool),
                         **{k: t(v) for k, v in states.items()}}, batch_size=[obs.shape[0]])
        module(td)
        ys.append(arr(td["y"]))
        for k in STATES[kind]:
            # as a primer-reset env stores it: zeros where an episode starts, else the carried state
            stored[k].append(np.where(is_init[:, step, None, None], 0.0, states[k]))
            nexts[k].append(arr(td["next", k]))
            states[k] = nexts[k][-1]
    stack = lambda xs: np.stack(xs, 1)  # noqa: E731
    return stack(ys), {k: stack(v) for k, v in stored.items()}, {k: stack(v) for k, v in nexts.items()}


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_by_step_equals_whole_sequences(kind, seed):
    rng = np.random.default_rng(seed)
    rlpipe.manual_seed(seed)
    envs, steps = 4, 9
    module = MODULES[kind](input_size=3, hidden_size=5, num_layers=2, in_key="obs", out_key="y")
    obs = rng.normal(size=(envs, steps, 3)).astype(np.float32)
    is_init = random_episodes(rng, envs, steps)
    first = {k: np.where(is_init[:, 0, None, None], 0.0, rng.normal(size=(envs, 2, 5))).astype(np.float32)
             for k in STATES[kind]}
    ys, stored, nexts = run_step_by_step(module, kind, obs, is_init, first)
    td = TensorDict({"obs": t(obs), "is_init": t(is_init[..., None], rlpipe.bool),
                     **{k: t(v) for k, v in stored.items()}}, batch_size=[envs, steps])
    with set_recurrent_mode(True):
        module(td)
    np.testing.assert_allclose(arr(td["y"]), ys, atol=1e-5)
    # whole sequences give the next state at the end of each piece (before a reset or at the row's end)
    ends = np.ones((envs, steps), bool)
    ends[:, :-1] = is_init[:, 1:]
    for k in STATES[kind]:
        expected = np.where(ends[..., None, None], nexts[k], 0.0)
        np.testing.assert_allclose(arr(td["next", k]), expected, atol=1e-5)


def test_whole_sequences_give_step_by_step_gradients():
    rng = np.random.default_rng(5)
    module = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="y")
    obs = rng.normal(size=(3, 6, 3)).astype(np.float32)
    is_init = random_episodes(rng, 3, 6)
    is_init[:, 0] = True
    td = TensorDict({"obs": t(obs), "is_init": t(is_init[..., None], rlpipe.bool)}, batch_size=[3, 6])
    with set_recurrent_mode(True):
        module(td)["y"].pow(2).sum().backward()
    sequence_grads = [arr(p.grad) for p in module.parameters()]
    module.zero_grad()
    states, total = {}, 0
    for step in range(6):
        step_td = TensorDict({"obs": t(obs[:, step]), "is_init": t(is_init[:, step, None], rlpipe.bool), **states},
                             batch_size=[3])
        module(step_td)
        total = total + step_td["y"].pow(2).sum()
        states = {k: step_td["next", k] for k in STATES["lstm"]}
    total.backward()
    for got, expected in zip(sequence_grads, [arr(p.grad) for p in module.parameters()]):
        np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_is_init_zeroes_the_state_step_by_step(kind):
    rlpipe.manual_seed(0)
    module = MODULES[kind](input_size=2, hidden_size=3, in_key="obs", out_key="y")
    obs = rlpipe.randn(2, 2)
    stale = {k: rlpipe.randn(2, 1, 3) for k in STATES[kind]}
    zero = {k: rlpipe.zeros(2, 1, 3) for k in STATES[kind]}

    def y(states, is_init):
        td = TensorDict({"obs": obs, "is_init": rlpipe.tensor([[is_init], [is_init]]), **states}, batch_size=[2])
        return arr(module(td)["y"])

    np.testing.assert_array_equal(y(stale, True), y(zero, True))
    assert np.abs(y(stale, False) - y(zero, False)).min() > 1e-4
    # a missing state is a zero state
    np.testing.assert_array_equal(y({}, False), y(zero, False))


def test_recurrent_mode_keeps_the_stored_state_at_a_piece_start():
    # in recurrent mode the state stored at each piece's first step is used as given (torchrl's "pad" path)
    module = GRUModule(input_size=2, hidden_size=3, in_key="obs", out_key="y", default_recurrent_mode=True)
    obs = rlpipe.randn(1, 4, 2)
    is_init = rlpipe.tensor([[[True], [False], [True], [False]]])
    state = rlpipe.randn(1, 4, 1, 3)
    td = TensorDict({"obs": obs, "is_init": is_init, "recurrent_state": state}, batch_size=[1, 4])
    y = arr(module(td)["y"])
    second = TensorDict({"obs": obs[:, 2:], "is_init": is_init[:, 2:], "recurrent_state": state[:, 2:]},
                        batch_size=[1, 2])
    np.testing.assert_allclose(y[:, 2:], arr(module(second)["y"]), atol=1e-6)


def test_batch_dims_are_flattened():
    module = LSTMModule(input_size=2, hidden_size=3, in_key="obs", out_key="y")
    obs = rlpipe.randn(2, 3, 4, 2)
    is_init = rlpipe.zeros(2, 3, 4, 1, dtype=rlpipe.bool)
    td = TensorDict({"obs": obs, "is_init": is_init}, batch_size=[2, 3, 4])
    with set_recurrent_mode(True):
        module(td)
    flat = TensorDict({"obs": obs.reshape(6, 4, 2), "is_init": is_init.reshape(6, 4, 1)}, batch_size=[6, 4])
    with set_recurrent_mode(True):
        module(flat)
    np.testing.assert_allclose(arr(td["y"]).reshape(6, 4, 3), arr(flat["y"]), atol=1e-6)
    assert td["next", "recurrent_state_c"].shape == (2, 3, 4, 1, 3)
    step = TensorDict({"obs": obs[:, :, 0], "is_init": is_init[:, :, 0]}, batch_size=[2, 3])
    module(step)  # step by step, any batch shape
    np.testing.assert_allclose(arr(step["y"]).reshape(6, 3), arr(flat["y"][:, 0]), atol=1e-6)
    single = TensorDict({"obs": obs[0, 0, 0], "is_init": is_init[0, 0, 0]}, batch_size=[])
    assert module(single)["next", "recurrent_state_h"].shape == (1, 3)


def test_keys():
    lstm = LSTMModule(input_size=2, hidden_size=3, in_key="obs", out_key="y")
    assert lstm.in_keys == ["obs", "recurrent_state_h", "recurrent_state_c", "is_init"]
    assert lstm.out_keys == ["y", ("next", "recurrent_state_h"), ("next", "recurrent_state_c")]
    gru = GRUModule(input_size=2, hidden_size=3, in_key="obs", out_key="y")
    assert gru.in_keys == ["obs", "recurrent_state", "is_init"]
    assert gru.out_keys == ["y", ("next", "recurrent_state")]
    custom = LSTMModule(input_size=2, hidden_size=3, in_keys=[("agent", "obs"), "h", "c", "is_init"],
                        out_keys=[("agent", "y"), ("next", "h"), ("next", "c")])
    assert custom.in_keys == [("agent", "obs"), "h", "c", "is_init"]
    td = TensorDict({"agent": TensorDict({"obs": rlpipe.randn(3, 2)}, batch_size=[3]),
                     "is_init": rlpipe.ones(3, 1, dtype=rlpipe.bool)}, batch_size=[3])
    custom(td)
    assert td["agent", "y"].shape == (3, 3) and td["next", "h"].shape == (3, 1, 3)
    assert sorted(td.keys()) == ["agent", "is_init", "next"]


def test_layer_given():
    lstm = nn.LSTM(2, 3, num_layers=2, batch_first=True)
    module = LSTMModule(lstm=lstm, in_key="obs", out_key="y")
    assert module.lstm is lstm and list(module.parameters()) == list(lstm.parameters())
    gru = nn.GRU(2, 3, batch_first=True)
    assert GRUModule(gru=gru, in_key="obs", out_key="y").gru is gru
    with pytest.raises(ValueError, match="the lstm given must have batch_first=True"):
        LSTMModule(lstm=nn.LSTM(2, 3), in_key="obs", out_key="y")
    with pytest.raises(ValueError, match=r"give either gru= or input_size/hidden_size, not both \(got input_size=2"):
        GRUModule(2, gru=gru, in_key="obs", out_key="y")
    # python_based is accepted; the layer is the same
    assert isinstance(LSTMModule(2, 3, python_based=True, in_key="obs", out_key="y").lstm, nn.LSTM)


def test_constructor_errors():
    with pytest.raises(ValueError, match="give either in_keys or in_key, not both or none"):
        LSTMModule(2, 3, out_key="y")
    with pytest.raises(ValueError, match="give either out_keys or out_key, not both or none"):
        LSTMModule(2, 3, in_key="obs", out_key="y", out_keys=["y", "h", "c"])
    with pytest.raises(ValueError, match=r"in_keys must hold a value key and 2 state key\(s\).*got \['obs', 'h'\]"):
        LSTMModule(2, 3, in_keys=["obs", "h"], out_key="y")
    with pytest.raises(ValueError, match=r"out_keys must hold a value key and 1 state key\(s\), got \['y'\]"):
        GRUModule(2, 3, in_key="obs", out_keys=["y"])
    with pytest.raises(ValueError, match="hidden_size must be passed, got None"):
        LSTMModule(2, in_key="obs", out_key="y")
    with pytest.raises(ValueError, match="batch_first must be True, got False"):
        GRUModule(2, 3, batch_first=False, in_key="obs", out_key="y")
    with pytest.raises(ValueError, match="recurrent_backend must be one of .* got 'cudnn'"):
        LSTMModule(2, 3, recurrent_backend="cudnn", in_key="obs", out_key="y")
    with pytest.raises(RuntimeError, match="recurrent_backend='triton' needs Triton kernels"):
        GRUModule(2, 3, recurrent_backend="triton", in_key="obs", out_key="y")
    with pytest.raises(TypeError, match="incompatible function arguments: in_keys must be a list of keys, got 'abc'"):
        LSTMModule(2, 3, in_keys="abc", out_key="y")


def test_recurrent_mode():
    module = LSTMModule(2, 3, in_key="obs", out_key="y")
    assert recurrent_mode() is None and module.recurrent_mode is False
    assert LSTMModule(2, 3, in_key="obs", out_key="y", default_recurrent_mode=True).recurrent_mode is True
    with set_recurrent_mode(True):
        assert module.recurrent_mode is True
        with set_recurrent_mode(None):
            assert module.recurrent_mode is False
    with set_recurrent_mode("sequential"):
        assert GRUModule(2, 3, in_key="obs", out_key="y", default_recurrent_mode=True).recurrent_mode is False
    with pytest.raises(RuntimeError, match="recurrent_mode cannot be changed in-place"):
        module.recurrent_mode = True
    with pytest.raises(RuntimeError, match=r"lstm.set_recurrent_mode\(\) API has been removed in v0.8"):
        module.set_recurrent_mode(True)


def test_recurrent_mode_is_per_thread():
    module = LSTMModule(2, 3, in_key="obs", out_key="y")
    seen = []
    with set_recurrent_mode(True):
        thread = threading.Thread(target=lambda: seen.append((recurrent_mode(), module.recurrent_mode)))
        thread.start()
        thread.join()
        assert module.recurrent_mode is True
    assert seen == [(None, False)]


@pytest.mark.parametrize("recurrent", [False, True], ids=["step", "sequence"])
def test_called_with_tensors_returns_the_output_and_next_states(recurrent):
    """tensordict's dispatch: the in_keys' tensors by position or name; the batch is the input's leading dims."""
    module = LSTMModule(2, 3, num_layers=2, in_keys=["obs", "h0", "c0"], out_keys=["y", ("next", "h0"), ("next", "c0")])
    batch = (4, 5) if recurrent else (4,)
    obs, h0, c0 = rlpipe.randn(*batch, 2), rlpipe.randn(*batch, 2, 3), rlpipe.randn(*batch, 2, 3)
    is_init = rlpipe.zeros(*batch, dtype=rlpipe.bool)
    with set_recurrent_mode(recurrent):
        y, h, c = module(obs=obs, h0=h0, c0=c0, is_init=is_init)
        positional = module(obs, h0, c0, is_init)
        td = module(TensorDict({"obs": obs, "h0": h0, "c0": c0, "is_init": is_init[..., None]}, batch_size=batch))
    for got, key in zip((y, h, c), ["y", ("next", "h0"), ("next", "c0")]):
        np.testing.assert_array_equal(arr(got), arr(td[key]))
    for a, b in zip(positional, (y, h, c)):
        np.testing.assert_array_equal(arr(a), arr(b))
    with pytest.raises(KeyError, match="no 'obs' among the tensors given"):
        module(h0=h0, c0=c0, is_init=is_init)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_python_and_cudnn_based_swap_the_layer_class_and_keep_the_weights(kind):
    module = MODULES[kind](input_size=2, hidden_size=3, num_layers=2, in_key="obs", out_key="y", dropout=0.25)
    torch_class, python_class = (nn.LSTM, rlpipe.modules.LSTM) if kind == "lstm" else (nn.GRU, rlpipe.modules.GRU)
    layer = getattr(module, kind)
    td = TensorDict({"obs": rlpipe.randn(4, 2), "is_init": rlpipe.zeros(4, 1, dtype=rlpipe.bool)}, batch_size=[4])
    module.eval()
    want = arr(module(td.clone())["y"])
    assert module.make_python_based() is module and type(getattr(module, kind)) is python_class
    swapped = getattr(module, kind)
    assert swapped is not layer and swapped.dropout == 0.25 and swapped.num_layers == 2 and swapped.batch_first
    assert module.make_python_based() is module and getattr(module, kind) is swapped  # already Python: kept
    np.testing.assert_array_equal(arr(module(td.clone())["y"]), want)
    assert type(getattr(module.make_cudnn_based(), kind)) is torch_class
    np.testing.assert_array_equal(arr(module(td.clone())["y"]), want)


def test_torchrls_layer_classes_take_torchrls_arguments():
    lstm = rlpipe.modules.LSTM(2, 3, 2, False, False)  # input, hidden, num_layers, batch_first, bias
    assert (lstm.num_layers, lstm.batch_first, lstm.bias) == (2, False, False)
    assert rlpipe.modules.LSTM(2, 3).batch_first and rlpipe.modules.GRU(2, 3).batch_first
    gru = rlpipe.modules.GRU(2, 3, 1, False)  # input, hidden, num_layers, bias
    assert (gru.bias, gru.batch_first) == (False, True)
    assert repr(rlpipe.modules.LSTM(2, 3, use_scan=True)) == "LSTM(2, 3, batch_first=True)"
    assert isinstance(rlpipe.modules.LSTMCell(2, 3), nn.LSTMCell) and isinstance(rlpipe.modules.GRUCell(2, 3),
                                                                                  nn.GRUCell)


def check_refused(module, td, error, message):
    before = {k: arr(v) for k, v in td.items(True, True)}
    with pytest.raises(error, match=message):
        module(td)
    assert {k: arr(v) for k, v in td.items(True, True)}.keys() == before.keys()


def test_bad_inputs():
    module = LSTMModule(input_size=2, hidden_size=3, in_key="obs", out_key="y")
    init = rlpipe.ones(4, 1, dtype=rlpipe.bool)
    check_refused(module, TensorDict({"is_init": init}, batch_size=[4]), KeyError,
                  r"LSTMModule: the input tensordict has no 'obs' entry")
    check_refused(module, TensorDict({"obs": rlpipe.randn(4, 2)}, batch_size=[4]), KeyError,
                  r"no 'is_init' entry \(add an InitTracker transform")
    check_refused(module, TensorDict({"obs": rlpipe.randn(4, 5), "is_init": init}, batch_size=[4]), ValueError,
                  r"'obs' must have shape \[\*batch, 2\] \(here \[4, 2\]\), got \[4, 5\]")
    check_refused(module, TensorDict({"obs": rlpipe.randn(4), "is_init": init}, batch_size=[4]), ValueError,
                  r"'obs' must have shape \[\*batch, 2\].*got \[4\]")
    check_refused(module, TensorDict({"obs": rlpipe.randn(4, 2), "is_init": rlpipe.ones(4, 2, dtype=rlpipe.bool)},
                                     batch_size=[4]), ValueError,
                  r"'is_init' must have shape \[\*batch, 1\] \(here \[4, 1\]\), got \[4, 2\]")
    states = {"recurrent_state_h": rlpipe.zeros(4, 2, 3), "recurrent_state_c": rlpipe.zeros(4, 2, 3)}
    check_refused(module, TensorDict({"obs": rlpipe.randn(4, 2), "is_init": init, **states}, batch_size=[4]),
                  ValueError, r"the state 'recurrent_state_h' must have shape \[\*batch, 1, 3\] \(here \[4, 1, 3\]\), "
                  r"got \[4, 2, 3\]")
    check_refused(module, TensorDict({"obs": rlpipe.randn(4, 2), "is_init": init,
                                      "recurrent_state_h": rlpipe.zeros(4, 1, 3)}, batch_size=[4]),
                  RuntimeError, r"the state 'recurrent_state_c' is missing")
    with set_recurrent_mode(True):
        check_refused(module, TensorDict({"obs": rlpipe.randn(2), "is_init": rlpipe.ones(1, dtype=rlpipe.bool)}),
                      ValueError, r"needs a tensordict with at least one batch dim \(time\), got batch_size \[\]")
    # the module is still usable
    td = module(TensorDict({"obs": rlpipe.randn(4, 2), "is_init": init}, batch_size=[4]))
    assert td["y"].shape == (4, 3)


# ---- in a collector -----------------------------------------------------------------------------
class IsInit(Transform):
    """Writes ``is_init`` (True at each episode's first step), standing in for torchrl's InitTracker."""

    def __init__(self):
        super().__init__(in_keys=[], out_keys=["is_init"])

    def _flags(self, value):
        return np.full(tuple(self.parent.done_spec["done"].shape), value)

    def _frame_reset(self, frame):
        return {**frame, ("is_init",): self._flags(True)}

    def _frame_step(self, root, next_frame, action):
        return {**next_frame, ("is_init",): self._flags(False)}

    def _frame_continue(self, next_frame, frame, done):
        return {**frame, ("is_init",): done.copy()}

    def transform_observation_spec(self, observation_spec):
        observation_spec["is_init"] = Categorical(2, shape=self.parent.done_spec["done"].shape, dtype=rlpipe.bool)
        return observation_spec


COUNTER = "rlpipe_test/LSTMModuleCounter-v0"
if COUNTER not in gym.registry:
    gym.register(COUNTER, entry_point=Counter)  # observation [t], episodes of 5 steps


def recurrent_policy():
    rlpipe.manual_seed(0)
    lstm = LSTMModule(input_size=1, hidden_size=4, in_key="observation", out_key="embed")
    head = TensorDictModule(nn.Linear(4, 2), in_keys=["embed"], out_keys=["logits"])
    pick = TensorDictModule(lambda logits: nn.functional.one_hot(logits.argmax(-1), 2), in_keys=["logits"],
                            out_keys=["action"])
    return lstm, TensorDictSequential(lstm, head, pick)


def test_collector_carries_the_state_and_sequences_replay_it():
    lstm, policy = recurrent_policy()
    env = TransformedEnv(GymEnv(COUNTER), IsInit())
    collector = SyncDataCollector(env, policy, frames_per_batch=12, total_frames=24)
    first, second = list(collector)
    data = rlpipe.cat([first, second], 0)
    assert data["recurrent_state_h"].shape == (24, 1, 4)
    is_init = arr(data["is_init"])[:, 0]
    np.testing.assert_array_equal(is_init, np.arange(24) % 5 == 0)
    # the recorded states are the ones the policy ran from: replaying step by step gives the same outputs
    states = {}
    for step in range(24):
        td = TensorDict({"observation": data["observation"][step], "is_init": data["is_init"][step], **states},
                        batch_size=[])
        lstm(td)
        np.testing.assert_allclose(arr(td["embed"]), arr(data["embed"][step]), atol=1e-6)
        if step + 1 < 24 and not is_init[step + 1]:
            for key in ("recurrent_state_h", "recurrent_state_c"):
                np.testing.assert_allclose(arr(data[key][step + 1]), arr(td["next", key]), atol=1e-6)
        states = {key: td["next", key] for key in ("recurrent_state_h", "recurrent_state_c")}
    # training on the batch as one sequence (stored states zeroed where an episode starts, as a primer
    # resets them) gives the outputs the collection computed
    for key in ("recurrent_state_h", "recurrent_state_c"):
        data[key] = rlpipe.where(data["is_init"][..., None], rlpipe.zeros_like(data[key]), data[key])
    replay = data.select("observation", "is_init", "recurrent_state_h", "recurrent_state_c").clone()
    with set_recurrent_mode(True):
        lstm(replay)
    np.testing.assert_allclose(arr(replay["embed"]), arr(data["embed"]), atol=1e-5)
    # and gradients flow through whole sequences
    replay["embed"].pow(2).sum().backward()
    assert all(np.abs(arr(p.grad)).sum() > 0 for p in lstm.parameters())
