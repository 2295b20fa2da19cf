"""GymEnv without ale-py: an Atari id raises an ImportError naming the package and rlpipe's ``atari`` extra;
an RGB observation space (ALE's kind) goes to "pixels" whatever the env."""
import sys

import pytest

pytest.importorskip("gymnasium")

from rlpipe.envs import GymEnv  # noqa: E402


@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "PongNoFrameskip-v4", "ale_py:Pong-v5"])
def test_atari_id_without_ale_py_names_the_extra(monkeypatch, env_id):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if not installed: ``import ale_py`` fails
    with pytest.raises(ImportError, match=rf"GymEnv\('{env_id}'\) needs ale-py, .*pip install 'rlpipe\[atari\]'"):
        GymEnv(env_id)


def test_other_ids_do_not_import_ale_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)
    GymEnv("CartPole-v1").close()


def test_rgb_observation_goes_to_pixels_and_is_not_rendered_again():
    """torchrl's ``_is_from_pixels``: a [H, W, 3] Box from 0 to 255 is "pixels" (and ``from_pixels`` adds
    nothing); a [H, W] one, or one with other bounds, stays "observation"."""
    import gymnasium as gym
    import numpy as np

    from rlpipe.envs import GymWrapper

    class Screen(gym.Env):
        def __init__(self, shape, high=255):
            self.observation_space = gym.spaces.Box(0, high, shape, np.uint8)
            self.action_space = gym.spaces.Discrete(2)
            self.render_mode = "rgb_array"

        def reset(self, seed=None, options=None):
            return np.full(self.observation_space.shape, 7, np.uint8), {}

        def step(self, action):
            return np.full(self.observation_space.shape, 8, np.uint8), 0.0, False, False, {}

        def render(self):
            raise AssertionError("an RGB observation is not rendered again")

    env = GymWrapper(Screen((4, 5, 3)), from_pixels=True, pixels_only=False)
    assert list(env.observation_spec.keys()) == ["pixels"]
    td = env.rollout(2)
    assert tuple(td["next", "pixels"].shape) == (2, 4, 5, 3) and int(td["next", "pixels"][1, 0, 0, 0]) == 8
    assert list(GymWrapper(Screen((4, 5))).observation_spec.keys()) == ["observation"]
    assert list(GymWrapper(Screen((4, 5, 3), high=254)).observation_spec.keys()) == ["observation"]
