"""NextObservationDelta's replay-buffer side against torchrl 0.14.1 (values recorded there)."""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import GymEnv, NextObservationDelta, TransformedEnv
from rlpipe.tensordict import TensorDict

OBS = rlpipe.tensor([[0.1, 100.3], [1.0 / 3, -2.5]])
DELTA = rlpipe.tensor([[0.001, 0.25], [1e-5, -3.0]]).to(rlpipe.float16)
# torchrl 0.14.1: obs + delta, in float32 and float64
RECORDED = [[0.10100040584802628, 100.55000305175781], [0.33334335684776306, -5.5]]


def stored():
    return TensorDict({"observation": OBS.clone(), ("nested", "pos"): OBS[:, :1].double(),
                       ("next", "delta", "observation"): DELTA.clone(),
                       ("next", "delta", "nested", "pos"): DELTA[:, :1],
                       ("next", "reward"): rlpipe.ones(2, 1)}, [2])


def key_set(td):
    return {k if isinstance(k, str) else tuple(k) for k in td.keys(True, True)}


def test_rebuilds_next_in_the_root_dtype_and_drops_the_delta():
    out = NextObservationDelta(in_keys=["observation", ("nested", "pos")])(stored())
    assert out["next", "observation"].dtype == rlpipe.float32 and out["next", "nested", "pos"].dtype == rlpipe.float64
    np.testing.assert_allclose(out["next", "observation"].numpy(), RECORDED, rtol=1e-7)
    np.testing.assert_allclose(out["next", "nested", "pos"].numpy()[:, 0], [RECORDED[0][0], RECORDED[1][0]], rtol=1e-7)
    assert key_set(out) == {("nested", "pos"), ("next", "nested", "pos"), ("next", "observation"), ("next", "reward"),
                            "observation"}


def test_restore_dtype_and_keeping_the_delta():
    out = NextObservationDelta(in_keys="observation", restore_dtype=rlpipe.float64, drop_delta=False)(stored())
    assert out["next", "observation"].dtype == rlpipe.float64
    np.testing.assert_allclose(out["next", "observation"].numpy(), RECORDED, rtol=1e-12)
    assert ("next", "delta", "observation") in key_set(out)


def test_missing_keys_and_no_keys_leave_the_data_alone():
    assert key_set(NextObservationDelta(in_keys=["missing"])(stored())) == key_set(stored())
    assert key_set(NextObservationDelta()(stored())) == key_set(stored())
    assert repr(NextObservationDelta(in_keys=["observation"])) == \
        "NextObservationDelta(in_keys=['observation'], delta_dtype=rlpipe.float16)"


@pytest.mark.parametrize("kwargs, message", [
    ({"delta_dtype": rlpipe.int32}, "delta_dtype must be a floating-point dtype, got rlpipe.int32"),
    ({"restore_dtype": rlpipe.int64}, "restore_dtype must be a floating-point dtype or 'root', got rlpipe.int64"),
    ({"restore_dtype": "x"}, "restore_dtype must be a floating-point dtype or 'root', got 'x'"),
])
def test_bad_dtypes_as_torchrl(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NextObservationDelta(**kwargs)


def _keys(td):
    return sorted(map(str, td.keys(True, True)))


# torchrl 0.14.1's key sets for TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta())
STEP_KEYS = ["('next', 'delta', 'observation')", "('next', 'done')", "('next', 'observation')", "('next', 'reward')",
             "('next', 'terminated')", "('next', 'truncated')", "action", "done", "observation", "terminated",
             "truncated"]
STORED_KEYS = [k for k in STEP_KEYS if k != "('next', 'observation')"]


def test_env_side_keys_as_torchrl():
    """step keeps ("next", obs) beside the delta; rollout and step_and_maybe_reset store the delta only,
    and the next root holds the full observation."""
    env = TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta())
    td = env.reset()
    td["action"] = env.action_spec.rand()
    assert _keys(env.step(td.clone())) == STEP_KEYS
    stepped, root = env.step_and_maybe_reset(td.clone())
    assert _keys(stepped) == STORED_KEYS and _keys(root) == ["done", "observation", "terminated", "truncated"]
    assert root["observation"].dtype == rlpipe.float32
    rollout = env.rollout(4)
    assert _keys(rollout) == STORED_KEYS and rollout["next", "delta", "observation"].dtype == rlpipe.float16
    expected = (rollout["observation"][1:] - rollout["observation"][:-1]).half()
    assert rlpipe.equal(rollout["next", "delta", "observation"][:-1], expected)
    assert env.observation_spec.keys() == GymEnv("Pendulum-v1").observation_spec.keys()  # specs unchanged


def test_collector_stores_deltas_and_a_buffer_rebuilds_the_next_observations():
    """Counter's observation grows by one per step (5-step episodes, reset to 0): every delta is 1."""
    from rlpipe.collectors import SyncDataCollector
    from rlpipe.data import LazyTensorStorage, ReplayBuffer
    from test_collector import COUNTER, constant_policy

    collector = SyncDataCollector(TransformedEnv(GymEnv(COUNTER), NextObservationDelta()), constant_policy(1),
                                  frames_per_batch=8, total_frames=8)
    batch = next(iter(collector))
    assert ("next", "observation") not in batch.keys(True, True)
    assert batch["next", "delta", "observation"].dtype == rlpipe.float16
    assert batch["next", "delta", "observation"].float().eq(1).all()
    rb = ReplayBuffer(storage=LazyTensorStorage(8), transform=NextObservationDelta(in_keys=["observation"]))
    rb.extend(batch)
    rebuilt = rb[:]
    assert rlpipe.equal(rebuilt["next", "observation"], batch["observation"] + 1)
    assert ("next", "delta", "observation") not in rebuilt.keys(True, True)


def test_env_side_in_keys_limit_the_deltas():
    env = TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta(in_keys=["missing"]))
    rollout = env.rollout(2)
    assert ("next", "observation") in rollout.keys(True, True) and "delta" not in rollout["next"].keys()
