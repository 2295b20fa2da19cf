"""``python -m rlpipe.cuda.selfcheck``: a clear exit without a GPU; on a GPU (or the CuPy stand-in)
a report with every section, the GPU's results equal to the CPU's."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlpipe
from rlpipe.cuda import selfcheck

REPO = Path(__file__).resolve().parents[1]
needs_cuda = pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")


@pytest.mark.skipif(rlpipe.cuda.is_available(), reason="a GPU is available")
def test_without_a_gpu_it_exits_1_saying_what_is_missing(capsys):
    assert selfcheck.main(["--quick"]) == 1
    err = capsys.readouterr().err
    assert "no usable GPU" in err and "pip install 'rlpipe[cuda12]'" in err
    proc = subprocess.run([sys.executable, "-m", "rlpipe.cuda.selfcheck", "--quick"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "no usable GPU" in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_tests_or_examples_folder_is_reported_not_failed(tmp_path):
    report = selfcheck.Report()
    selfcheck.run_cuda_tests(report, tmp_path / "tests")
    assert selfcheck.run_dqn(report, tmp_path / "examples") is None
    assert not report.failed
    assert sum("skipped: no " in line for line in report.lines) == 2


@pytest.mark.cuda
@needs_cuda
def test_quick_report_has_every_section_and_gpu_results_equal_the_cpus(tmp_path, capsys):
    out = tmp_path / "report.txt"
    assert selfcheck.main(["--quick", "--skip-tests", "--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out
    for heading in ("== device ==", "== MultiStep(0.99, 4) benchmark ==",
                    "== MLP train step (forward, backward, Adam) benchmark ==", "self-check: all passed"):
        assert heading in text
    assert "gpu/cpu" in text and "cuda-marked tests" not in text and "DQN" not in text

    outputs = selfcheck.bench_multistep(selfcheck.Report(), [(4, 50)], repeat=1)
    assert outputs["cuda"].device.type == "cuda"
    assert selfcheck.multistep_mismatches(outputs["cpu"], outputs["cuda"]) == []
    np.testing.assert_array_equal(outputs["cuda"]["steps_to_next_obs"].cpu().numpy(),
                                  outputs["cpu"]["steps_to_next_obs"].numpy())


@pytest.mark.cuda
@needs_cuda
def test_a_section_that_raises_is_reported_as_failed_and_the_next_ones_still_run(monkeypatch, capsys):
    def broken(report, shapes, repeat):
        report.section("MultiStep(0.99, 4) benchmark")
        raise RuntimeError("out of memory")
    monkeypatch.setattr(selfcheck, "bench_multistep", broken)
    assert selfcheck.main(["--quick", "--skip-tests"]) == 1
    text = capsys.readouterr().out
    assert "FAILED: RuntimeError: out of memory" in text and "MLP train step" in text
    assert text.endswith("self-check: FAILED (MultiStep(0.99, 4) benchmark)\n")


@pytest.mark.cuda
@needs_cuda
def test_a_gpu_result_that_differs_from_the_cpus_fails_the_section():
    cpu = selfcheck.multistep_batch(2, 10, "cpu")
    gpu = cpu.to("cuda")
    gpu.set(("next", "reward"), gpu.get(("next", "reward")) + 1)
    assert selfcheck.multistep_mismatches(cpu, gpu) == [("next", "reward")]


@pytest.mark.cuda
@needs_cuda
def test_a_short_dqn_runs_on_cuda():
    # the subprocess gets the stand-in as well when this session runs under it
    python = (sys.executable,)
    if "cupy_standin" in sys.modules:
        python += ("-c", "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); import cupy_standin._install as s; "
                   "s.install(); sys.argv.pop(0); runpy.run_path(sys.argv[0], run_name='__main__')",
                   str(REPO / "tests"))
    report = selfcheck.Report()
    flags = ["--total-frames", 40, "--frames-per-batch", 10, "--learning-starts", 20, "--batch-size", 8,
             "--eval-every", 40, "--eval-episodes", 1]
    last_return = selfcheck.run_dqn(report, REPO / "examples", flags, python)
    assert not report.failed, "\n".join(report.lines)
    assert 1 <= last_return <= 500  # a CartPole-v1 episode's return
