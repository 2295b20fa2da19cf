"""Smoke tests for examples/: each script runs as a subprocess from the repository root, on a few
frames or steps, and must exit 0 and write its CSV with the expected columns.

One slow test runs examples/dqn_cartpole.py with its default flags and checks that DQN learns
CartPole-v1 (mean greedy return >= 475).
"""
import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMOKE_TIMEOUT_S = 300  # generous: a hang fails the test instead of blocking CI
SLOW_TIMEOUT_S = 900


def run_example(script, *args, timeout=SMOKE_TIMEOUT_S):
    """Runs ``python examples/<script> <args>`` from the repository root and returns the finished
    process; fails the test, with the script's output, unless it exits 0 within ``timeout``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    cmd = [sys.executable, str(Path("examples") / script), *map(str, args)]
    try:
        proc = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s\nstdout:\n{_tail(e.stdout)}"
                    f"\nstderr:\n{_tail(e.stderr)}")
    assert proc.returncode == 0, (f"{' '.join(cmd)} exited with {proc.returncode}\nstdout:\n{_tail(proc.stdout)}"
                                  f"\nstderr:\n{_tail(proc.stderr)}")
    return proc


def _tail(text, n=4000):
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-n:]


def read_csv(path, columns):
    """The CSV's rows as dicts, after checking that it exists and has exactly ``columns``."""
    assert path.is_file(), f"{path} was not written"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        assert reader.fieldnames == columns, f"{path.name}: columns {reader.fieldnames}, expected {columns}"
    return rows


def floats(rows, key):
    values = [float(r[key]) for r in rows]
    assert all(math.isfinite(v) for v in values), f"{key}: {values}"
    return values


# ---------------------------------------------------------------------------------------------------
# smoke tests
# ---------------------------------------------------------------------------------------------------
def test_dqn_cartpole_smoke(tmp_path):
    run_example("dqn_cartpole.py", "--total-frames", 2000, "--learning-starts", 500, "--eval-every", 1000,
                "--eval-episodes", 2, "--seed", 0, "--out-dir", tmp_path, "--no-progress")
    rows = read_csv(tmp_path / "dqn_cartpole_seed0.csv", ["frames", "eval_return", "epsilon", "seconds"])
    assert [int(r["frames"]) for r in rows] == [1000, 2000]
    assert all(1 <= v <= 500 for v in floats(rows, "eval_return"))  # a CartPole-v1 episode's return
    eps = floats(rows, "epsilon")
    assert 0 < eps[1] < eps[0] <= 1



def test_dqn_cartpole_evaluates_when_eval_every_is_not_a_multiple_of_the_batch(tmp_path):
    """Batches of 10 frames, --eval-every 25: an evaluation each time the frame count passes 25, 50, 75, 100."""
    run_example("dqn_cartpole.py", "--total-frames", 100, "--frames-per-batch", 10, "--learning-starts", 50,
                "--batch-size", 16, "--eval-every", 25, "--eval-episodes", 1, "--seed", 0, "--out-dir", tmp_path,
                "--no-progress")
    rows = read_csv(tmp_path / "dqn_cartpole_seed0.csv", ["frames", "eval_return", "epsilon", "seconds"])
    assert [int(r["frames"]) for r in rows] == [30, 50, 80, 100]

@pytest.mark.slow
def test_sac_pendulum_smoke(tmp_path):
    run_example("sac_pendulum.py", "--total-frames", 1500, "--learning-starts", 500, "--eval-every", 500,
                "--eval-episodes", 1, "--seed", 0, "--hidden", 32, "--batch-size", 64, "--out-dir", tmp_path,
                "--no-progress")
    rows = read_csv(tmp_path / "sac_pendulum_seed0.csv", ["frames", "eval_return", "alpha", "seconds"])
    assert [int(r["frames"]) for r in rows] == [500, 1000, 1500]
    # Pendulum-v1: 200 steps, each reward in [-16.3, 0]
    assert all(-16.3 * 200 <= v <= 0 for v in floats(rows, "eval_return"))
    assert all(v > 0 for v in floats(rows, "alpha"))



def test_sac_pendulum_evaluates_when_eval_every_is_not_a_multiple_of_the_batch(tmp_path):
    """Batches of 50 frames, --eval-every 120: an evaluation each time the frame count passes 120, 240."""
    run_example("sac_pendulum.py", "--total-frames", 250, "--learning-starts", 200, "--eval-every", 120,
                "--eval-episodes", 1, "--seed", 0, "--hidden", 16, "--batch-size", 16, "--out-dir", tmp_path,
                "--no-progress")
    rows = read_csv(tmp_path / "sac_pendulum_seed0.csv", ["frames", "eval_return", "alpha", "seconds"])
    assert [int(r["frames"]) for r in rows] == [150, 250]

def test_modules_tour_smoke(tmp_path):
    proc = run_example("modules_tour.py", "--steps", 200, "--out-dir", tmp_path)
    rows = read_csv(tmp_path / "modules_tour_loss.csv", ["step", "loss"])
    assert [int(r["step"]) for r in rows] == list(range(1, 201))
    assert all(v >= 0 for v in floats(rows, "loss"))
    assert (tmp_path / "modules_tour_net.pt").is_file() and (tmp_path / "modules_tour_mean.pt").is_file()
    out = proc.stdout
    for section in ("1. A simple custom module", "2. Modules as building blocks", "3. Neural network training",
                    "4. Module state", "5. Training and evaluation modes", "6. Module initialization",
                    "7. Module hooks", "8. Advanced features"):
        assert f"=== {section}" in out, f"section {section!r} missing from the output"
    assert "<All keys matched successfully>" in out
    assert "('net.l1', MyLinear())" in out
    assert "True" in out.split("round trip through")[1].splitlines()[0]
    assert "False" not in out.split("=== 7. Module hooks")[1]  # every hook check printed True
    assert "[skipped]" in out


def test_collect_multistep_smoke(tmp_path):
    out_csv = tmp_path / "collect_multistep.csv"
    run_example("collect_multistep.py", "--out-dir", tmp_path)
    rows = read_csv(out_csv, ["step_count", "next_step_count", "reward", "n_step_reward", "gamma",
                              "steps_to_next_obs"])
    assert len(rows) == 10  # one batch of --frames-per-batch 10
    for r in rows:
        m = int(r["steps_to_next_obs"])
        assert 1 <= m <= 4
        assert float(r["gamma"]) == pytest.approx(0.99 ** m)
        assert int(r["next_step_count"]) == int(r["step_count"]) + m  # n-step shift, see DESIGN.md


def test_fit_sine_smoke(tmp_path):
    out_csv = tmp_path / "fit_sine.csv"
    run_example("fit_sine.py", "--steps", 50, "--hidden", 16, "--batch", 64, "--out-dir", tmp_path, "--no-progress")
    rows = read_csv(out_csv, ["step", "loss"])
    assert [int(r["step"]) for r in rows] == list(range(1, 51))
    assert all(v >= 0 for v in floats(rows, "loss"))


# ---------------------------------------------------------------------------------------------------
# slow: DQN learns CartPole
# ---------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_dqn_cartpole_learns(tmp_path):
    """Default flags: up to 100k frames, stopping once the greedy policy's mean return over 10
    evaluation episodes reaches 475."""
    proc = run_example("dqn_cartpole.py", "--seed", 0, "--no-progress", "--out-dir", tmp_path,
                       timeout=SLOW_TIMEOUT_S)
    rows = read_csv(tmp_path / "dqn_cartpole_seed0.csv", ["frames", "eval_return", "epsilon", "seconds"])
    assert rows, "no evaluation was written"
    assert float(rows[-1]["eval_return"]) >= 475, f"DQN did not learn CartPole:\n{_tail(proc.stdout)}"


@pytest.mark.slow
def test_ppo_cartpole_learns(tmp_path):
    """Default flags (the README's command): the greedy policy's mean return reaches 475 within the 150k frames."""
    proc = run_example("ppo_cartpole.py", "--seed", 0, "--no-progress", "--out-dir", tmp_path, timeout=SLOW_TIMEOUT_S)
    rows = read_csv(tmp_path / "ppo_cartpole_seed0.csv", ["frames", "eval_return", "seconds"])
    assert rows, "no evaluation was written"
    assert float(rows[-1]["eval_return"]) >= 475, f"PPO did not learn CartPole:\n{_tail(proc.stdout)}"


def test_dqn_getting_started_smoke(tmp_path):
    pytest.importorskip("gymnasium")
    video = True
    for module in ("imageio", "imageio_ffmpeg", "pygame"):
        try:
            __import__(module)
        except ImportError:
            video = False
    run_example("dqn_getting_started.py", "--out-dir", tmp_path, "--init-random-frames", 300, "--total-frames", 800,
                "--video-steps", 20, *([] if video else ["--no-video"]))
    root = tmp_path / "dqn_seed0"
    lengths = [line.split(",") for line in (root / "scalars" / "max_episode_length.csv").read_text().splitlines()]
    assert [int(step) for step, _ in lengths] == list(range(100, 900, 100))
    assert (root / "scalars" / "loss.csv").read_text().count("\n") == 5  # batches after the random frames
    if video:
        import imageio
        reader = imageio.get_reader(str(root / "videos" / "video_0.mp4"))
        assert 2 <= reader.count_frames() <= 21 and reader.get_meta_data()["size"] == (600, 400)


@pytest.mark.parametrize("net", ["lstm", "mlp"])
def test_recurrent_dqn_cartpole_smoke(tmp_path, net):
    run_example("recurrent_dqn_cartpole.py", "--net", net, "--total-frames", 400, "--learning-starts", 200,
                "--eval-every", 200, "--eval-episodes", 1, "--batch-size", 4, "--out-dir", tmp_path, "--no-progress")
    rows = read_csv(tmp_path / f"recurrent_dqn_cartpole_{net}_seed0.csv",
                    ["frames", "eval_return", "epsilon", "seconds"])
    assert [int(r["frames"]) for r in rows] == [200, 400]
    assert all(1 <= v <= 500 for v in floats(rows, "eval_return"))  # a CartPole-v1 episode's return
    eps = floats(rows, "epsilon")
    assert 0 < eps[1] < eps[0] < 1
