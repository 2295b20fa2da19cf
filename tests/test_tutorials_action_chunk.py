"""ActionChunkTransform against torchrl 0.14.1 (values recorded there with the same inputs)."""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import ActionChunkTransform, GymEnv, TransformedEnv
from rlpipe.tensordict import TensorDict

ROWS = rlpipe.arange(20).view(2, 5, 2).float()
DONE = rlpipe.tensor([[False, False, True, False, False], [True, False, False, True, False]])


def test_window_end_is_padded_as_torchrl():
    td = ActionChunkTransform(chunk_size=3)(TensorDict({"action": rlpipe.arange(4).view(1, 4, 1).float()}, [1, 4]))
    assert td["vla_action", "chunk"][0, :, :, 0].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 3], [3, 3, 3]]
    assert td["action_is_pad"].shape == (1, 4, 3)
    assert td["action_is_pad"][0].tolist() == [[False, False, False], [False, False, False], [False, False, True],
                                               [False, True, True]]


def test_done_cuts_chunks_inside_the_window_as_torchrl():
    out = ActionChunkTransform(chunk_size=4)(TensorDict({"action": ROWS, ("next", "done"): DONE}, [2, 5]))
    assert out["vla_action", "chunk"].shape == (2, 5, 4, 2)
    assert out["vla_action", "chunk"][..., 0].tolist() == [
        [[0, 2, 4, 4], [2, 4, 4, 4], [4, 4, 4, 4], [6, 8, 8, 8], [8, 8, 8, 8]],
        [[10, 10, 10, 10], [12, 14, 16, 16], [14, 16, 16, 16], [16, 16, 16, 16], [18, 18, 18, 18]]]
    F, T = False, True
    assert out["action_is_pad"].tolist() == [
        [[F, F, F, T], [F, F, T, T], [F, T, T, T], [F, F, T, T], [F, T, T, T]],
        [[F, T, T, T], [F, F, F, T], [F, F, T, T], [F, T, T, T], [F, T, T, T]]]
    with_singleton = ActionChunkTransform(chunk_size=4)(
        TensorDict({"action": ROWS, ("next", "done"): DONE.unsqueeze(-1)}, [2, 5]))
    assert rlpipe.equal(with_singleton["vla_action", "chunk"], out["vla_action", "chunk"])


def test_custom_keys_on_a_flat_tensordict_ignoring_done():
    td = TensorDict({"act": ROWS, ("next", "done"): DONE}, [])
    out = ActionChunkTransform(2, action_key="act", chunk_key="ch", pad_key="pad", done_key=None)(td)
    assert out["ch"][..., 1].tolist() == [[[1, 3], [3, 5], [5, 7], [7, 9], [9, 9]],
                                          [[11, 13], [13, 15], [15, 17], [17, 19], [19, 19]]]
    assert out["pad"].shape == (2, 5, 2)


def test_gradients_flow_back_to_the_actions():
    action = ROWS.clone().requires_grad_(True)
    out = ActionChunkTransform(3)(TensorDict({"action": action}, []))
    out["vla_action", "chunk"].sum().backward()
    # chunks (T=5, H=3): 012 123 234 344 444: a[t] is counted 1, 2, 3, 3 and 6 times
    np.testing.assert_array_equal(action.grad[0, :, 0].numpy(), [1, 2, 3, 3, 6])


@pytest.mark.parametrize("make, error, message", [
    (lambda: ActionChunkTransform(0), ValueError, "chunk_size must be >= 1, got 0"),
    (lambda: ActionChunkTransform(2, time_dim=-3)(TensorDict({"action": ROWS}, [])), ValueError,
     r"action shaped \[..., T, action_dim\]\); got action.shape=\(2, 5, 2\) with time_dim=-3"),
    (lambda: ActionChunkTransform(2)(TensorDict({"action": ROWS, ("next", "done"): DONE[:, :4]}, [])), ValueError,
     r"entry of shape \(2, 4\) does not line up with the action of shape \(2, 5, 2\): expected \(2, 5, 1\) or"),
    (lambda: ActionChunkTransform(2)(TensorDict({"obs": ROWS}, [])), KeyError, "'action' not found"),
])
def test_errors_as_torchrl(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_in_an_env_it_changes_nothing():
    env = TransformedEnv(GymEnv("Pendulum-v1"), ActionChunkTransform(3))
    rollout = env.rollout(3)
    assert "action_is_pad" not in rollout.keys() and rollout["observation"].shape == (3, 3)
