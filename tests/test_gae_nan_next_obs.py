"""Value estimators on data whose next observations are NaN at trajectory ends (what
``NextStateReconstructor`` rebuilds from ``compact_obs`` batches): as torchrl 0.14, the NaN next
input is replaced by the root one before the value network runs. Expectations by hand: value
``V(x) = x``, rewards 1, gamma 0.5, lambda 1, observations 1, 2, 3, 4."""
import math

import numpy as np
import pytest

import rlpipe
from rlpipe.objectives.value import GAE
from rlpipe.tensordict import TensorDict, TensorDictModule


def _batch(terminated):
    done = rlpipe.tensor([[False], [False], [False], [True]])
    return TensorDict({
        "observation": rlpipe.tensor([[1.0], [2.0], [3.0], [4.0]]),
        "next": {"observation": rlpipe.tensor([[2.0], [3.0], [4.0], [math.nan]]),
                 "reward": rlpipe.ones(4, 1), "done": done,
                 "terminated": done if terminated else rlpipe.zeros(4, 1, dtype=rlpipe.bool)},
    }, [4])


def _gae(**kwargs):
    value = TensorDictModule(lambda x: x.sum(-1, keepdim=True), in_keys=["observation"], out_keys=["state_value"])
    return GAE(gamma=0.5, lmbda=1.0, value_network=value, **kwargs)


@pytest.mark.parametrize("shifted", [False, True])
def test_terminated_nan_next_observation_is_masked_out(shifted):
    """deltas 1, 0.5, 0, -3 (the terminal next value is masked): advantages 0.875, -0.25, -1.5, -3."""
    data = _batch(terminated=True)
    out = _gae(shifted=shifted)(data)
    np.testing.assert_allclose(out["advantage"].numpy()[:, 0], [0.875, -0.25, -1.5, -3.0])
    assert math.isnan(data["next", "observation"][3, 0].item())  # the input keeps its NaN


def test_truncated_nan_next_observation_bootstraps_from_the_root():
    """At a truncation the substitute V(obs[3]) = 4 bootstraps: delta_3 = 1 + 0.5 * 4 - 4 = -1."""
    out = _gae()(_batch(terminated=False))
    np.testing.assert_allclose(out["advantage"].numpy()[:, 0], [1.125, 0.25, -0.5, -1.0])


def test_finite_next_observations_are_used_as_they_are():
    data = _batch(terminated=True)
    data["next", "observation"][3] = 10.0
    out = _gae()(data)
    np.testing.assert_allclose(out["advantage"].numpy()[:, 0], [0.875, -0.25, -1.5, -3.0])  # masked anyway
    assert out["next", "state_value"][3, 0].item() == 10.0
