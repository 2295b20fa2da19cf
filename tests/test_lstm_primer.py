"""``LSTMModule.make_tensordict_primer()`` / ``GRUModule.make_tensordict_primer()`` (torchrl 0.14's primer) and the
recurrent state they declare carried through ``SyncDataCollector``, ``MultiSyncDataCollector`` and
``EnvBase.rollout``, resets included (single and batched envs, episodes ending at different steps).

The independent reference: the LSTM equations in NumPy (float64) with the module's weights, run over each
recorded episode from zeros; the recorded root state of a step must be the state before it, the recorded
``("next", state)`` the state after it."""
import gymnasium as gym
import numpy as np
import pytest
from scipy.special import expit

import rlpipe
from rlpipe import nn
from rlpipe.collectors import MultiSyncDataCollector, SyncDataCollector
from rlpipe.envs import GymEnv, InitTracker, SerialEnv, TensorDictPrimer, TransformedEnv
from rlpipe.modules import GRUModule, LSTMModule
from rlpipe.tensordict import TensorDictModule, TensorDictSequential
from test_gym_env import Counter

COUNTER = "rlpipe_test/PrimerCounter-v0"
if COUNTER not in gym.registry:
    gym.register(COUNTER, entry_point=Counter)  # observation [t]; episodes end at terminate_at (5 by default)
HIDDEN = 3


def arr(x):
    return np.asarray(x.detach().cpu().numpy(), dtype=np.float64)


# ---- the primer itself ------------------------------------------------------------------------------

def test_lstm_primer_declares_both_states_with_the_layers_shapes():
    module = LSTMModule(input_size=2, hidden_size=5, num_layers=2, in_key="x", out_key="y")
    primer = module.make_tensordict_primer()
    assert isinstance(primer, TensorDictPrimer) and primer.expand_specs is True
    specs = dict(primer.primers.items(True, True))
    assert set(specs) == {"recurrent_state_h", "recurrent_state_c"}
    assert specs["recurrent_state_h"].shape == (2, 5) and specs["recurrent_state_c"].shape == (2, 5)
    assert specs["recurrent_state_h"].dtype == rlpipe.float32


def test_lstm_primer_shapes_with_projection_and_two_directions():
    lstm = nn.LSTM(2, 6, num_layers=3, proj_size=2, bidirectional=True, batch_first=True)
    specs = dict(LSTMModule(lstm=lstm, in_key="x", out_key="y").make_tensordict_primer().primers.items(True, True))
    assert specs["recurrent_state_h"].shape == (6, 2) and specs["recurrent_state_c"].shape == (6, 6)


def test_gru_primer_declares_its_state():
    module = GRUModule(input_size=2, hidden_size=4, in_keys=["x", ("nest", "h")], out_keys=["y", ("next", "nest", "h")])
    specs = dict(module.make_tensordict_primer().primers.items(True, True))
    assert list(specs) == [("nest", "h")] and specs[("nest", "h")].shape == (1, 4)


@pytest.mark.parametrize("make", [
    lambda: LSTMModule(input_size=2, hidden_size=3, in_keys=["x", "h", "c"], out_keys=["y", ("next", "h"), "c2"]),
    lambda: GRUModule(input_size=2, hidden_size=3, in_keys=["x", "h"], out_keys=["y", "h_out"]),
], ids=["lstm", "gru"])
def test_primer_refuses_out_keys_not_named_after_the_in_keys(make):
    module = make()
    with pytest.raises(RuntimeError, match=r"out_keys should be named after \('next', <in_key>\)"):
        module.make_tensordict_primer()
    assert module.in_keys[1] == "h"  # still usable


def test_primed_env_declares_and_resets_the_states_batched():
    module = LSTMModule(input_size=1, hidden_size=HIDDEN, in_key="observation", out_key="embed")
    env = TransformedEnv(SerialEnv(2, lambda: GymEnv(COUNTER)), InitTracker())
    env.append_transform(module.make_tensordict_primer())
    assert env.observation_spec["recurrent_state_h"].shape == (2, 1, HIDDEN)
    td = env.reset()
    assert td["recurrent_state_c"].shape == (2, 1, HIDDEN) and not td["recurrent_state_c"].any()
    env.close()


# ---- the state carried from step to step ------------------------------------------------------------

def recurrent_policy(seed=0):
    rlpipe.manual_seed(seed)
    lstm = LSTMModule(input_size=1, hidden_size=HIDDEN, in_key="observation", out_key="embed")
    head = TensorDictModule(nn.Linear(HIDDEN, 2), in_keys=["embed"], out_keys=["logits"])
    pick = TensorDictModule(lambda logits: nn.functional.one_hot(logits.argmax(-1), 2), in_keys=["logits"],
                            out_keys=["action"])
    return lstm, TensorDictSequential(lstm, head, pick)


def reference_states(lstm, observations, is_init):
    """(h, c) before and after each step of each env ([envs, T, H] each), by the equations from zeros at
    every episode start."""
    p = {name: arr(value) for name, value in lstm.lstm.named_parameters()}
    envs, steps = is_init.shape
    before = np.zeros((2, envs, steps, HIDDEN))
    after = np.zeros((2, envs, steps, HIDDEN))
    for e in range(envs):
        h, c = np.zeros(HIDDEN), np.zeros(HIDDEN)
        for t in range(steps):
            if is_init[e, t]:
                h, c = np.zeros(HIDDEN), np.zeros(HIDDEN)
            before[:, e, t] = h, c
            gates = p["weight_ih_l0"] @ observations[e, t] + p["bias_ih_l0"] + p["weight_hh_l0"] @ h + p["bias_hh_l0"]
            i, f, g, o = np.split(gates, 4)
            c = expit(f) * c + expit(i) * np.tanh(g)
            h = expit(o) * np.tanh(c)
            after[:, e, t] = h, c
    return before, after


def check_carried(lstm, data, batched):
    """The recorded states against the reference; ``data`` is [T] or [envs, T]."""
    if not batched:
        data = data.unsqueeze(0)
    is_init = arr(data["is_init"])[..., 0].astype(bool)
    assert is_init[:, 0].all() and is_init[:, 1:].any()  # the batch crosses resets
    before, after = reference_states(lstm, arr(data["observation"]), is_init)
    for k, key in enumerate(("recurrent_state_h", "recurrent_state_c")):
        np.testing.assert_allclose(arr(data[key])[:, :, 0], before[k], atol=1e-5, err_msg=key)
        np.testing.assert_allclose(arr(data["next", key])[:, :, 0], after[k], atol=1e-5, err_msg=key)


def single_env(lstm):
    env = TransformedEnv(GymEnv(COUNTER), InitTracker())
    return env.append_transform(lstm.make_tensordict_primer())


def batched_env(lstm):
    """Two envs whose episodes end at different steps (3 and 5): partial resets."""
    env = TransformedEnv(SerialEnv(2, [lambda: GymEnv(COUNTER, terminate_at=3), lambda: GymEnv(COUNTER)]),
                         InitTracker())
    return env.append_transform(lstm.make_tensordict_primer())


@pytest.mark.parametrize("make_env,batched", [(single_env, False), (batched_env, True)], ids=["single", "batched"])
def test_sync_collector_carries_the_primed_state(make_env, batched):
    lstm, policy = recurrent_policy()
    env = make_env(lstm)
    collector = SyncDataCollector(env, policy, frames_per_batch=24, total_frames=48)
    batches = list(collector)
    collector.shutdown()
    check_carried(lstm, rlpipe.cat(batches, -1), batched)


@pytest.mark.parametrize("make_env,batched", [(single_env, False), (batched_env, True)], ids=["single", "batched"])
def test_rollout_carries_the_primed_state_across_resets(make_env, batched):
    lstm, policy = recurrent_policy()
    env = make_env(lstm)
    data = env.rollout(14, policy, break_when_any_done=False)
    check_carried(lstm, data, batched)
    env.close()


def test_rollout_carries_a_state_without_primer_as_step_mdp():
    """No primer: the policy's ("next", k) stays in the step and is the next step's k (is_init zeroes it inside
    the module at a reset); as torchrl's stack, the result keeps ("next", k) but not k, which the first step
    lacks."""
    lstm, policy = recurrent_policy()
    env = TransformedEnv(GymEnv(COUNTER), InitTracker())
    data = env.rollout(8, policy, break_when_any_done=False)
    assert "recurrent_state_h" not in data.keys() and ("next", "recurrent_state_h") in data.keys(True)
    is_init = arr(data["is_init"])[None, :, 0].astype(bool)
    _, after = reference_states(lstm, arr(data["observation"])[None], is_init)
    np.testing.assert_allclose(arr(data["next", "recurrent_state_h"])[None, :, 0], after[0], atol=1e-5)
    np.testing.assert_allclose(arr(data["next", "recurrent_state_c"])[None, :, 0], after[1], atol=1e-5)


def test_random_batches_leave_the_primed_state_alone():
    lstm, policy = recurrent_policy()
    collector = SyncDataCollector(single_env(lstm), policy, frames_per_batch=10, total_frames=20,
                                  init_random_frames=10)
    random_batch, policy_batch = list(collector)
    collector.shutdown()
    assert not random_batch["next", "recurrent_state_h"].any()  # the primer's zeros, carried
    assert policy_batch["next", "recurrent_state_h"].any()


def make_primed_counter_env():
    lstm, _ = recurrent_policy()
    return single_env(lstm)


def test_multi_sync_collector_carries_the_primed_state():
    lstm, policy = recurrent_policy()
    collector = MultiSyncDataCollector([make_primed_counter_env, make_primed_counter_env], policy,
                                       frames_per_batch=24, total_frames=24)
    try:
        batch = next(iter(collector))
    finally:
        collector.shutdown()
    check_carried(lstm, batch, batched=batch.ndim == 2)
