"""Atari through ale-py: ``GymEnv`` on ALE ids with torchrl's options, the preprocessing stack
(``GrayScale``, ``Resize(84, 84)``, ``CatFrames(4)``, frame skip 4) checked against a plain ALE loop
preprocessed by hand and against Gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation``,
``EndOfLifeTransform`` on ALE's lives, and envpool's Atari through ``MultiThreadedEnv``.

Skips without ale-py (``pip install rlpipe[atari]``); the Gymnasium comparison also needs OpenCV,
which ``AtariPreprocessing`` resizes with.
"""
import importlib.util
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.envs import (CatFrames, Compose, EndOfLifeTransform, GrayScale, GymEnv, NoopResetEnv, OneHot, Resize,
                         ToTensorImage, TransformedEnv)
from rlpipe.tensordict import TensorDict

gym = pytest.importorskip("gymnasium")
PONG = "PongNoFrameskip-v4"


HAVE_ALE = importlib.util.find_spec("ale_py") is not None
if HAVE_ALE:
    import ale_py

    gym.register_envs(ale_py)
pytestmark = pytest.mark.skipif(not HAVE_ALE, reason="needs ale-py (pip install rlpipe[atari])")


def preprocessed(env_name, **kwargs):
    """torchrl's Atari stack: frame skip 4 in ALE, grayscale, 84x84, 4 frames."""
    base = GymEnv(env_name, frame_skip=4, categorical_action_encoding=True, **kwargs)
    return TransformedEnv(base, Compose(ToTensorImage(), GrayScale(), Resize(84, 84), CatFrames(4, dim=-3)))


def pixels(td, key="pixels"):
    return np.asarray(td[key].numpy())


def actions(n, n_actions, seed=0):
    return np.random.default_rng(seed).integers(n_actions, size=n).tolist()


def run(env, acts, seed):
    """The observations (reset one first) and rewards of ``env`` under the given actions."""
    env.set_seed(seed)
    td = env.reset()
    frames, rewards = [pixels(td)], []
    for a in acts:
        td["action"] = rlpipe.tensor(a)
        nxt = env.step(td)["next"]
        frames.append(pixels(nxt))
        rewards.append(float(nxt["reward"].item()))
        assert not nxt["done"].item()
        td = nxt
    return np.stack(frames), rewards


# ---- GymEnv on ALE ids ---------------------------------------------------------------------------------

def test_ale_v5_as_torchrl():
    env = GymEnv("ALE/Pong-v5")
    spec = env.observation_spec["pixels"]
    assert list(env.observation_spec.keys()) == ["pixels"]  # an RGB observation is "pixels", as torchrl's
    assert tuple(spec.shape) == (210, 160, 3) and spec.dtype is rlpipe.uint8
    assert isinstance(env.action_spec, OneHot) and tuple(env.action_spec.shape) == (6,)
    assert env.env.unwrapped._frameskip == 1  # torchrl passes frameskip=frame_skip (1), replacing v5's 4
    td = env.rollout(3)
    assert tuple(td["next", "pixels"].shape) == (3, 210, 160, 3)
    env.close()


def test_no_frameskip_id_with_frame_skip_and_options():
    env = GymEnv(PONG, frame_skip=4, categorical_action_encoding=True, from_pixels=True, pixels_only=False)
    assert env.env.unwrapped._frameskip == 4 and (env.frame_skip, env.wrapper_frame_skip) == (4, 1)
    assert env.env.render_mode == "rgb_array"
    assert list(env.observation_spec.keys()) == ["pixels"]  # the observation is the frame: nothing rendered twice
    assert tuple(env.action_spec.shape) == () and env.action_spec.space.n == 6
    env.close()


def test_explicit_frameskip_kwarg_is_kept():
    env = GymEnv("ALE/Pong-v5", frameskip=3)
    assert env.env.unwrapped._frameskip == 3
    env.close()
    with pytest.raises(ValueError, match="give frame_skip or frameskip, not both"):
        GymEnv("ALE/Pong-v5", frame_skip=2, frameskip=3)


def test_vector_ale_env():
    env = GymEnv("ALE/Breakout-v5", num_envs=2, frame_skip=4)
    td = env.rollout(3)
    assert tuple(td["next", "pixels"].shape) == (2, 3, 210, 160, 3)
    env.close()


def test_frames_equal_a_plain_ale_loop():
    acts = actions(20, 6)
    ref = gym.make(PONG, frameskip=4)
    obs, _ = ref.reset(seed=5)
    expected, expected_rewards = [obs], []
    for a in acts:
        obs, reward, *_ = ref.step(a)
        expected.append(obs)
        expected_rewards.append(float(reward))
    env = GymEnv(PONG, frame_skip=4, categorical_action_encoding=True)
    frames, rewards = run(env, acts, seed=5)
    np.testing.assert_array_equal(frames, np.stack(expected))
    assert rewards == expected_rewards
    env.close()


# ---- the preprocessing stack ---------------------------------------------------------------------------

def by_hand(rgb_frames):
    """torchvision's grayscale of each frame, Pillow's bilinear (antialiased) resize to 84x84, then
    stacks of the last 4 frames padded with the first: the stack as written out in NumPy and Pillow (an
    independent implementation of the filter rlpipe computes as banded matrix products)."""
    Image = pytest.importorskip("PIL.Image")

    x = rgb_frames.astype(np.float32) / 255
    gray = 0.2989 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]
    small = np.stack([np.asarray(Image.fromarray(g, mode="F").resize((84, 84), Image.BILINEAR)) for g in gray])
    padded = np.concatenate([np.repeat(small[:1], 3, axis=0), small])
    return np.stack([padded[t:t + 4] for t in range(len(small))])


def test_stack_equals_the_preprocessing_by_hand():
    acts = actions(24, 6, seed=1)
    raw, _ = run(GymEnv(PONG, frame_skip=4, categorical_action_encoding=True), acts, seed=7)
    stacks, _ = run(preprocessed(PONG), acts, seed=7)
    assert stacks.shape == (25, 4, 84, 84) and stacks.dtype == np.float32
    np.testing.assert_allclose(stacks, by_hand(raw), atol=2e-6)


needs_cv2 = pytest.mark.skipif(importlib.util.find_spec("cv2") is None,
                               reason="Gymnasium's AtariPreprocessing resizes with OpenCV")


def gymnasium_stacks(env_name, acts, seed):
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    ref = FrameStackObservation(AtariPreprocessing(gym.make(env_name), noop_max=0, frame_skip=4, screen_size=84), 4)
    obs, _ = ref.reset(seed=seed)
    out, rewards = [obs], []
    for a in acts:
        obs, reward, *_ = ref.step(a)
        out.append(obs)
        rewards.append(float(reward))
    return np.stack(out).astype(np.float32), rewards


@needs_cv2
@pytest.mark.parametrize("env_name", [PONG, "BreakoutNoFrameskip-v4"])
def test_stack_against_gymnasium_atari_preprocessing(env_name):
    """Same seed, same actions: the same rewards and the same frames in the same order, up to the
    documented differences (docs/guides/pixels.md): Gymnasium max-pools the last two emulator frames,
    takes ALE's palette grayscale and resizes with OpenCV's INTER_AREA; torchrl's stack takes the
    last frame, torchvision's grayscale and an antialiased bilinear resize. Measured (40 steps): mean
    difference 0.36 (Pong) and 1.05 (Breakout, its bricks: nearly all from the resize filter) of 255 levels."""
    acts = actions(40, 4, seed=2)
    ours, our_rewards = run(preprocessed(env_name), acts, seed=3)
    theirs, their_rewards = gymnasium_stacks(env_name, acts, seed=3)
    assert our_rewards == their_rewards
    diff = np.abs(ours * 255 - theirs)
    assert diff.mean() < 1.5
    # aligned in time: a stack one step late has many more large (moving-object) differences
    shifted = np.abs(ours[1:] * 255 - theirs[:-1])
    assert (shifted > 32).mean() > 3 * (diff[1:] > 32).mean()


# ---- transforms on ALE ---------------------------------------------------------------------------------

def test_end_of_life_on_breakout():
    env = TransformedEnv(GymEnv("BreakoutNoFrameskip-v4", frame_skip=4, categorical_action_encoding=True),
                         EndOfLifeTransform())
    env.set_seed(0)
    td = env.reset()
    ale = env.base_env.env.unwrapped.ale
    assert int(td["lives"].item()) == 5 and not td["end-of-life"].item()
    losses = 0
    for a in actions(400, 4, seed=3):
        td["action"] = rlpipe.tensor(a)
        nxt = env.step(td)["next"]
        lives = int(nxt["lives"].item())
        assert lives == ale.lives()
        lost = lives < int(td["lives"].item())
        assert bool(nxt["end-of-life"].item()) == (lost or bool(nxt["done"].item()))
        assert not nxt["done"].item() or lives == 0
        losses += lost
        if nxt["done"].item():
            break
        td = nxt
    assert losses >= 1


def test_end_of_life_tensordict_hooks_read_ale_lives():
    env = TransformedEnv(GymEnv("BreakoutNoFrameskip-v4", frame_skip=4, categorical_action_encoding=True),
                         EndOfLifeTransform())
    eol, ale = env.transform, env.base_env.env.unwrapped.ale
    root = eol._reset(TensorDict(), env.base_env.reset())  # torchrl's hook on the base env's TensorDict
    assert int(root["lives"].item()) == ale.lives() == 5 and not root["end-of-life"].item()
    root["lives"] = rlpipe.tensor(6)  # as if a life had been lost by this step
    root["action"] = rlpipe.tensor(1)
    nxt = eol._step(root, env.base_env.step(root)["next"])
    assert int(nxt["lives"].item()) == 5 and nxt["end-of-life"].item()


def test_noop_reset_on_ale_is_seeded_by_rlpipe():
    def first_frame(seed):
        env = TransformedEnv(GymEnv(PONG, frame_skip=4, categorical_action_encoding=True), NoopResetEnv(30))
        env.set_seed(seed)
        return pixels(env.reset())
    np.testing.assert_array_equal(first_frame(1), first_frame(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = GymEnv(PONG, frame_skip=4, categorical_action_encoding=True)
    plain.set_seed(1)
    assert not np.array_equal(first_frame(1), pixels(plain.reset()))  # the noops moved the game on


# ---- envpool's Atari -----------------------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="needs envpool")
def test_envpool_atari_through_multithreaded_env():
    import envpool

    from rlpipe.envs import MultiThreadedEnv

    env = MultiThreadedEnv(2, "Pong-v5", create_env_kwargs={"seed": 0})
    assert tuple(env.observation_spec["observation"].shape) == (2, 4, 84, 84)
    td = env.rollout(5)
    ref = envpool.make("Pong-v5", env_type="gymnasium", num_envs=2, seed=0)
    obs, _ = ref.reset()
    np.testing.assert_array_equal(pixels(td, "observation")[:, 0], obs)
    acts = np.asarray(td["action"].numpy())
    for t in range(5):
        obs, reward, *_ = ref.step(acts[:, t])
        np.testing.assert_array_equal(pixels(td["next"], "observation")[:, t], obs)
    env.close()
