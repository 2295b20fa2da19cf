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


def test_the_env_side_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="cannot yet store the next observations as deltas"):
        TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta()).rollout(2)
