"""torchrl's use of the image transforms outside an env: ``CatFrames._call`` keeps each key's window
in the transform (step by step, restarted by ``_reset`` masks), and a leaf spec (not a Composite)
goes through ``transform_observation_spec`` itself. Values worked out by hand."""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs import Bounded, CatFrames, ToTensorImage
from rlpipe.tensordict import TensorDict


def frames(*rows):
    """A batch of 2-vector frames, each row filled with its value."""
    return TensorDict({"obs": rlpipe.tensor(np.repeat(np.array(rows, np.float32)[:, None], 2, axis=1))}, [len(rows)])


def window(td, key="obs"):
    return np.asarray(td[key].numpy()).tolist()


def test_call_appends_to_a_window_that_starts_as_padding_value():
    cat = CatFrames(N=3, dim=-1, in_keys=["obs"], out_keys=["stack"], padding_value=-1)
    assert window(cat._call(frames(1.0)), "stack") == [[-1, -1, -1, -1, 1, 1]]
    assert window(cat._call(frames(2.0)), "stack") == [[-1, -1, 1, 1, 2, 2]]
    assert window(cat._call(frames(3.0)), "stack") == [[1, 1, 2, 2, 3, 3]]
    out = cat._call(frames(4.0))
    assert window(out, "stack") == [[2, 2, 3, 3, 4, 4]]
    out["stack"][0, 0] = 99.0  # the result is a copy: the kept window is unchanged
    assert window(cat._call(frames(5.0)), "stack") == [[3, 3, 4, 4, 5, 5]]


def test_reset_mask_restarts_only_its_rows():
    same = CatFrames(N=2, dim=-1, in_keys=["obs"])
    constant = CatFrames(N=2, dim=-1, in_keys=["obs"], padding="constant", padding_value=-1)
    for cat in (same, constant):
        cat._call(frames(1.0, 1.0))
        cat._call(frames(2.0, 2.0))
    reset = rlpipe.tensor([[True], [False]])  # [batch, 1], as an env's "_reset"
    assert window(same._call(frames(7.0, 3.0), _reset=reset)) == [[7, 7, 7, 7], [1, 1, 2, 2]]
    assert window(constant._call(frames(7.0, 3.0), _reset=reset)) == [[-1, -1, 7, 7], [1, 1, 2, 2]]
    assert window(same._call(frames(8.0, 3.0))) == [[7, 7, 8, 8], [2, 2, 3, 3]]
    assert window(same._call(frames(9.0, 9.0), _reset=True)) == [[9, 9, 9, 9], [9, 9, 9, 9]]


def test_leaf_spec_goes_through_the_transform():
    spec = ToTensorImage().transform_observation_spec(Bounded(0, 255, (16, 16, 3), dtype=rlpipe.uint8))
    assert tuple(spec.shape) == (3, 16, 16) and spec.dtype is rlpipe.float32
    assert float(spec.space.low.min()) == 0.0 and float(spec.space.high.max()) == 1.0


# ---- the base-env transforms' TensorDict hooks outside an env: torchrl's errors ----------------------

def test_base_env_transforms_outside_an_env_raise_torchrl_errors():
    from rlpipe.envs import Compose, EndOfLifeTransform, FrameSkipTransform, NoopResetEnv

    td = TensorDict({"next": {}}, [])
    for skip in (FrameSkipTransform(2), Compose(FrameSkipTransform(2))):
        with pytest.raises(RuntimeError, match="parent not found for FrameSkipTransform"):
            skip._step(td, td.get("next"))
    for noop in (NoopResetEnv(), Compose(NoopResetEnv())):
        with pytest.raises(RuntimeError, match=r"NoopResetEnv.parent not found. Make sure that the parent is set."):
            noop._reset(td, td.empty())
        assert noop._step(td, td.get("next")) is td.get("next")  # a step passes through
    eol = EndOfLifeTransform()
    for call in (lambda: eol._step(TensorDict(), TensorDict()), lambda: eol._reset(TensorDict(), TensorDict())):
        with pytest.raises(RuntimeError, match="EndOfLifeTransform'> transform is being executed without a parent env"):
            call()
    with pytest.raises(RuntimeError, match="EndOfLifeTransform'> cannot be executed without a parent environment"):
        eol(TensorDict())


# ---- CatFrames(future=True, mask_key=...): torchrl 0.14's offline windows --------------------------------

def unfold(cat, done_at=None):
    """``cat`` over one row of 4 steps whose frame t is t ([1, 4, 1, 1]), done after ``done_at``."""
    td = TensorDict({"obs": rlpipe.tensor(np.arange(4.0, dtype=np.float32).reshape(1, 4, 1, 1))}, [1, 4])
    if done_at is not None:
        done = np.zeros((1, 4, 1), bool)
        done[0, done_at] = True
        td.set(("next", "done"), rlpipe.tensor(done))
    out = cat(td.refine_names(None, "time"))
    mask = np.asarray(out["mask"].numpy()).astype(int).tolist()[0] if cat.mask_key else None
    return np.asarray(out["obs_cat"].numpy())[0, :, :, 0].tolist(), mask


def test_future_windows_read_the_upcoming_frames():
    cat = CatFrames(N=3, dim=-2, in_keys=["obs"], out_keys=["obs_cat"], future=True, mask_key="mask")
    assert unfold(cat) == ([[0, 1, 2], [1, 2, 3], [2, 3, 3], [3, 3, 3]],
                           [[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 1]])
    # a trajectory ends after step 1: its windows stop there
    assert unfold(cat, done_at=1) == ([[0, 1, 1], [1, 1, 1], [2, 3, 3], [3, 3, 3]],
                                      [[0, 0, 1], [0, 1, 1], [0, 0, 1], [0, 1, 1]])
    constant = CatFrames(N=3, dim=-2, in_keys=["obs"], out_keys=["obs_cat"], future=True, padding="constant",
                         padding_value=-1.0)
    assert unfold(constant)[0] == [[0, 1, 2], [1, 2, 3], [2, 3, -1], [3, -1, -1]]


def test_mask_of_history_windows():
    cat = CatFrames(N=3, dim=-2, in_keys=["obs"], out_keys=["obs_cat"], mask_key="mask")
    assert unfold(cat, done_at=1) == ([[0, 0, 0], [0, 0, 1], [2, 2, 2], [2, 2, 3]],
                                      [[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]])


def test_future_and_mask_are_offline_only():
    from rlpipe.envs import GymEnv, TransformedEnv

    for kwargs in ({"future": True}, {"mask_key": "mask"}):
        env = TransformedEnv(GymEnv("CartPole-v1"), CatFrames(N=2, dim=-1, in_keys=["observation"], **kwargs))
        with pytest.raises(RuntimeError, match="only available offline"):
            env.reset()
    cat = CatFrames(N=2, dim=-1, in_keys=["obs", ("next", "obs")], out_keys=["obs_cat", ("next", "obs_cat")],
                    future=True)
    td = TensorDict({"obs": rlpipe.zeros(1, 4, 2), ("next", "obs"): rlpipe.zeros(1, 4, 2),
                     ("next", "done"): rlpipe.zeros(1, 4, 1, dtype=rlpipe.bool)}, [1, 4]).refine_names(None, "time")
    with pytest.raises(NotImplementedError, match=r"future=True\) does not support .* history"):
        cat(td)
    with pytest.raises(KeyError, match="or use forward-looking windows"):
        CatFrames(N=2, dim=-1, in_keys=["obs"])(TensorDict({"obs": rlpipe.zeros(1, 4, 2)}, [1, 4]).refine_names(
            None, "time"))
