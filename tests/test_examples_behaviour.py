"""How the examples behave, beyond what they compute: the same flags everywhere with their defaults in --help, rows
on disk as they come, Ctrl-C ending with one line instead of a traceback, --device cuda (under the CuPy stand-in
in the cuda-marked run), and rlpipe.record.RunLog, which they share."""
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlpipe.record import RunLog
from test_examples import REPO, read_csv, run_example

EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.py"))
TRAINING = ["dqn_cartpole.py", "ppo_cartpole.py", "sac_pendulum.py"]


@pytest.mark.parametrize("script", EXAMPLES)
def test_help_shows_every_default_and_the_common_flags(script):
    text = run_example(script, "--help").stdout
    assert "(default: " in text, f"{script} --help shows no default"
    for flag in ("--seed", "--device", "--out-dir"):
        assert flag in text, f"{script} has no {flag}"
    description = text.split("options:")[0]
    assert description.rstrip().endswith((".", ")")), f"{script}: description cut mid-sentence: {description!r}"


@pytest.mark.parametrize("script", TRAINING + ["dqn_getting_started.py", "fit_sine.py"])
def test_long_runs_take_no_progress(script):
    assert "--no-progress" in run_example(script, "--help").stdout


@pytest.mark.parametrize("script", TRAINING + ["dqn_getting_started.py"])
def test_frame_budget_is_total_frames(script):
    assert "--total-frames" in run_example(script, "--help").stdout


def test_ppo_cartpole_smoke(tmp_path):
    run_example("ppo_cartpole.py", "--total-frames", 512, "--num-envs", 4, "--steps", 64, "--epochs", 1,
                "--eval-every", 256, "--eval-episodes", 1, "--out-dir", tmp_path, "--no-progress")
    rows = read_csv(tmp_path / "ppo_cartpole_seed0.csv", ["frames", "eval_return", "seconds"])
    assert [int(r["frames"]) for r in rows] == [256, 512]
    assert all(1 <= float(r["eval_return"]) <= 500 for r in rows)


def _sigint_as_in_a_terminal():
    # a shell starts background jobs with SIGINT ignored, and an ignored signal survives exec: Python would then
    # install no KeyboardInterrupt handler and the Ctrl-C below would go unseen (CI runs pytest that way)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_the_rows_and_ends_with_one_line(tmp_path):
    """SIGINT once the first evaluation is on disk: exit status 0, no traceback, a closing line, the rows kept."""
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    path = tmp_path / "dqn_cartpole_seed0.csv"
    proc = subprocess.Popen([sys.executable, "examples/dqn_cartpole.py", "--total-frames", "10000000",
                             "--eval-every", "200", "--eval-episodes", "1", "--learning-starts", "100",
                             "--target-return", "1e9", "--out-dir", str(tmp_path), "--no-progress"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while not (path.is_file() and path.read_text().count("\n") >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert "interrupted after" in err and str(path) in err
    assert "(interrupted)" in out.splitlines()[-1]
    rows = read_csv(path, ["frames", "eval_return", "epsilon", "seconds"])
    assert rows and int(rows[0]["frames"]) == 200


@pytest.mark.cuda
@pytest.mark.parametrize("script, args", [
    ("collect_multistep.py", []),
    ("fit_sine.py", ["--steps", 5, "--hidden", 8, "--batch", 16, "--no-progress"]),
    ("dqn_cartpole.py", ["--total-frames", 60, "--learning-starts", 30, "--batch-size", 8, "--eval-every", 60,
                         "--eval-episodes", 1, "--no-progress"]),
    ("ppo_cartpole.py", ["--total-frames", 64, "--num-envs", 2, "--steps", 32, "--epochs", 1, "--minibatch-size", 32,
                         "--eval-every", 64, "--eval-episodes", 1, "--no-progress"]),
    ("sac_pendulum.py", ["--total-frames", 100, "--learning-starts", 50, "--batch-size", 8, "--hidden", 8,
                         "--eval-every", 100, "--eval-episodes", 1, "--no-progress"]),
    ("dqn_getting_started.py", ["--init-random-frames", 100, "--total-frames", 200, "--batch-size", 8,
                                "--no-video", "--no-progress"]),
])
def test_examples_run_with_device_cuda(tmp_path, script, args):
    """Each example on --device cuda, in a subprocess that installs the CuPy stand-in as this session did (CI's
    cuda run), or on a real GPU."""
    import rlpipe

    if not rlpipe.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing; RLPIPE_CUPY_STANDIN=1 runs the stand-in)")
    standin = os.environ.get("RLPIPE_CUPY_STANDIN") == "1"
    runner = ("import sys, runpy; sys.path.insert(0, 'tests'); "
              + ("from cupy_standin._install import install; install(); " if standin else "")
              + "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    cmd = [sys.executable, "-c", runner, f"examples/{script}", "--device", "cuda", "--out-dir", str(tmp_path),
           *map(str, args)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]


# ---------------------------------------------------------------------------------------------------
# RunLog
# ---------------------------------------------------------------------------------------------------
def test_run_log_writes_each_row_at_once(tmp_path, capsys):
    log = RunLog(tmp_path / "out", "run", ["frames", "score"], progress=False)
    assert (tmp_path / "out" / "run.csv").read_text() == "frames,score\n"
    log.write(frames=10, score=1.5)
    with open(log.csv_path, newline="") as f:
        assert list(csv.reader(f)) == [["frames", "score"], ["10", "1.5"]]
    log.write(score=2.0, frames=20)
    with open(log.csv_path, newline="") as f:
        assert list(csv.reader(f))[-1] == ["20", "2.0"]
    assert capsys.readouterr().out.splitlines() == ["frames       10  score 1.5", "frames       20  score 2"]


def test_run_log_refuses_a_row_with_other_columns_and_stays_usable(tmp_path):
    log = RunLog(tmp_path, "run", ["frames", "score"], progress=False, echo=False)
    with pytest.raises(KeyError, match=r"expected the columns \['frames', 'score'\], got \['frames', 'loss'\]"):
        log.write(frames=1, loss=0.5)
    log.write(frames=1, score=0.5)
    assert Path(log.csv_path).read_text().splitlines() == ["frames,score", "1,0.5"]


def test_run_log_redraws_the_plot_with_each_row(tmp_path):
    pytest.importorskip("matplotlib")
    log = RunLog(tmp_path, "run", ["frames", "score"], plot=("frames", "score"), progress=False, echo=False)
    log.write(frames=1, score=0.0)
    first = (tmp_path / "run.png").stat().st_mtime_ns, (tmp_path / "run.png").stat().st_size
    time.sleep(0.01)
    log.write(frames=2, score=5.0)
    assert ((tmp_path / "run.png").stat().st_mtime_ns, (tmp_path / "run.png").stat().st_size) != first
    assert log.outputs() == f"{log.csv_path} and .png"
    assert not list(tmp_path.glob("*.tmp.png"))


def test_run_log_turns_ctrl_c_into_interrupted(tmp_path, capsys):
    with RunLog(tmp_path, "run", ["step"], progress=False, echo=False) as log:
        log.write(step=1)
        raise KeyboardInterrupt
    assert log.interrupted
    log.finish("done", frames=10)
    out, err = capsys.readouterr()
    assert err.startswith("interrupted after") and log.csv_path in err
    assert out.startswith("done (interrupted), ") and "frames/s" in out


def test_run_log_lets_other_errors_through(tmp_path):
    with pytest.raises(ValueError, match="boom"):
        with RunLog(tmp_path, "run", ["step"], progress=False) as log:
            raise ValueError("boom")
    assert not log.interrupted
