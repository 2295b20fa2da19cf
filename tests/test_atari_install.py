"""Atari ids without ale-py: an ImportError naming the package and rlpipe's ``atari`` extra."""
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
