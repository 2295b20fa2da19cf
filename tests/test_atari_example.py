"""Smoke test of examples/dqn_atari.py: a few hundred agent steps with training and two evaluations,
on envpool's Atari where installed, else ale-py (skipped without either); the CSV rows come as the
evaluations do, with the documented columns."""
import importlib.util

import pytest

from test_examples import REPO, floats, read_csv, run_example

HAVE_ENVPOOL = importlib.util.find_spec("envpool") is not None
HAVE_ALE = importlib.util.find_spec("ale_py") is not None
COLUMNS = ["frames", "eval_return", "epsilon", "seconds", "collect_fps", "train_fps", "updates"]


@pytest.mark.skipif(not (HAVE_ENVPOOL or HAVE_ALE), reason="needs envpool or ale-py (rlpipe[atari])")
@pytest.mark.slow
def test_dqn_atari_smoke(tmp_path):
    proc = run_example("dqn_atari.py", "--total-frames", 320, "--frames-per-batch", 16, "--learning-starts", 160,
                       "--eval-every", 160, "--eval-episodes", 1, "--eval-max-steps", 40, "--buffer-size", 2000,
                       "--batch-size", 8, "--target-update", 10, "--out-dir", tmp_path, "--no-progress")
    rows = read_csv(tmp_path / "dqn_atari_Breakout_seed0.csv", COLUMNS)
    assert [int(r["frames"]) for r in rows] == [160, 320]
    updates = [int(r["updates"]) for r in rows]
    assert updates[0] == 0 < updates[1] == 40  # one gradient step per 4 agent steps after learning starts
    assert all(v > 0 for v in floats(rows, "collect_fps"))
    assert "Breakout seed 0: 320 agent steps" in proc.stdout


@pytest.mark.cuda
@pytest.mark.skipif(not (HAVE_ENVPOOL or HAVE_ALE), reason="needs envpool or ale-py (rlpipe[atari])")
def test_dqn_atari_trains_on_cuda(tmp_path, monkeypatch):
    """``--device cuda``: the networks, the sampled batches and the policy's inputs on the GPU (in
    process, so that the CuPy stand-in of a cuda session applies)."""
    import rlpipe

    if not rlpipe.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import dqn_atari

    flags = ["--device", "cuda", "--total-frames", 64, "--frames-per-batch", 16, "--learning-starts", 32,
             "--eval-every", 64, "--eval-episodes", 1, "--eval-max-steps", 20, "--buffer-size", 500, "--batch-size", 4,
             "--out-dir", tmp_path, "--no-progress"]
    rows = dqn_atari.main([str(flag) for flag in flags])
    assert [r["frames"] for r in rows] == [64] and rows[0]["updates"] == 8
