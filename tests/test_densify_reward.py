"""DensifyReward and the torchrl module paths of the postprocessors; expected values measured on
torchrl 0.14.1 (and checked by hand: G[t] = r[t] + discount * (1 - done[t]) * G[t + 1])."""
import numpy as np
import pytest

import rlpipe
from rlpipe._utils import _ends_with, _replace_last
from rlpipe.tensordict import TensorDict


def _batch(done_shape=(2, 6, 1)):
    reward = rlpipe.tensor([[0., 1, 0, 2, 0, 3], [1, 0, 0, 0, 5, 0]]).unsqueeze(-1)
    done = np.zeros((2, 6, 1), dtype=bool)
    done[0, 1] = done[0, 3] = done[1, 4] = True
    return TensorDict({"next": {"reward": reward, "done": rlpipe.tensor(done.reshape(done_shape))}}, [2, 6])


def test_densify_reward_spreads_the_return_to_go_as_torchrl():
    from rlpipe.postprocs import DensifyReward
    out = DensifyReward()(_batch())
    np.testing.assert_array_equal(out["next", "reward"].squeeze(-1).numpy(),
                                  [[1, 1, 2, 2, 3, 3], [6, 5, 5, 5, 5, 0]])


def test_densify_reward_discount_and_output_key():
    from rlpipe.data import DensifyReward
    td = _batch()
    out = DensifyReward(discount=0.9, reward_key_out="dense")(td)
    assert out is td
    np.testing.assert_allclose(out["next", "dense"].squeeze(-1).numpy(),
                               [[0.9, 1.0, 1.8, 2.0, 2.7, 3.0], [4.2805, 3.645, 4.05, 4.5, 5.0, 0.0]], rtol=1e-6)
    np.testing.assert_array_equal(out["next", "reward"].squeeze(-1).numpy(), [[0, 1, 0, 2, 0, 3], [1, 0, 0, 0, 5, 0]])
    assert DensifyReward(reward_key_out="dense").out_keys == ["dense"]


def test_densify_reward_refuses_mismatched_shapes():
    from rlpipe.postprocs import DensifyReward
    with pytest.raises(RuntimeError, match=r"same shape.*\[2, 6, 1\].*\[2, 6\]"):
        DensifyReward()(_batch(done_shape=(2, 6)))


def test_torchrl_module_paths():
    from rlpipe.collectors.utils import split_trajectories
    from rlpipe.data.postprocs import DensifyReward, MultiStep
    from rlpipe.data.postprocs.postprocs import MultiStep as MultiStep2
    from rlpipe.postprocs import MultiStep as MultiStep3, split_trajectories as split3
    assert MultiStep is MultiStep2 is MultiStep3 and split_trajectories is split3
    assert DensifyReward.__module__ == "rlpipe.postprocs.densify"


def test_key_helpers():
    assert _ends_with("mask", "mask") and not _ends_with("done", "mask")
    assert _ends_with(("collector", "mask"), "mask") and not _ends_with(("mask", "x"), "mask")
    assert _replace_last("a", "b") == "b" and _replace_last(("x", "a"), "b") == ("x", "b")
