"""GPU self-check: does rlpipe work, and pay off, on this machine's GPU?

    python -m rlpipe.cuda.selfcheck [--quick] [--skip-tests] [--out FILE]

Runs the cuda-marked tests (from a source checkout), times MultiStep and an MLP training step on
the GPU against the CPU, runs a short DQN on ``--device cuda`` (examples/dqn_cartpole.py), and
prints a plain-text report. Exits 1 when any part failed, or when there is no usable GPU.
"""
import argparse
import csv
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import rlpipe
from rlpipe import TensorDict, backends, nn
from rlpipe.postprocs import MultiStep

SOURCE_ROOT = Path(rlpipe.__file__).resolve().parents[1]  # the checkout, for an editable or source install
MULTISTEP_SHAPES = {"full": [(256, 1000), (32, 10000)], "quick": [(8, 100)]}
MLP_CASES = {"full": [((4, 64, 64, 2), 256), ((256, 256, 256, 256), 4096)],
             "quick": [((4, 64, 64, 2), 256), ((256, 256, 256, 256), 64)]}
REPEATS = {"full": 5, "quick": 3}
DQN_FLAGS = ["--total-frames", 2000, "--learning-starts", 500, "--eval-every", 1000, "--eval-episodes", 2]
SUBPROCESS_TIMEOUT_S = 1800


class Report:
    """The lines of the report, and whether any section failed."""

    def __init__(self):
        self.lines, self.failed, self.title = [], [], None

    def section(self, title):
        """Starts a new titled section; later failures are counted against it."""
        self.lines += ["", f"== {title} =="]
        self.title = title

    def add(self, text):
        """Appends a line to the report."""
        self.lines.append(text)

    def fail(self, text):
        """Appends a FAILED line and marks the current section failed."""
        self.add(f"FAILED: {text}")
        self.failed.append(self.title)

    def text(self):
        """The whole report, ending with the verdict (all passed, or the failed sections)."""
        verdict = f"FAILED ({', '.join(dict.fromkeys(self.failed))})" if self.failed else "all passed"
        return "\n".join(self.lines + ["", f"self-check: {verdict}"]) + "\n"


# ---------------------------------------------------------------------------------------------------
# the device
# ---------------------------------------------------------------------------------------------------
def _ask(question):
    """The answer, or 'unknown' where this CuPy (or CUDA) cannot tell."""
    try:
        return question()
    except (AttributeError, KeyError, RuntimeError, OSError):
        return "unknown"


def describe_device(report, backend):
    """Device name, compute capability, CuPy and CUDA runtime versions, as the backend's CuPy reports them."""
    cupy, index = backend.xp, backend.current_device()
    capability = _ask(lambda: cupy.cuda.Device(index).compute_capability)  # e.g. "90"
    runtime = _ask(lambda: cupy.cuda.runtime.runtimeGetVersion())  # e.g. 12040
    report.section("device")
    report.add(f"device        cuda:{index} of {backend.device_count()}: "
               f"{_ask(lambda: cupy.cuda.runtime.getDeviceProperties(index)['name'].decode())}")
    report.add(f"compute cap.  {capability[:-1]}.{capability[-1]}" if capability.isdigit()
               else f"compute cap.  {capability}")
    report.add(f"CuPy          {_ask(lambda: cupy.__version__)}")
    report.add(f"CUDA runtime  {runtime // 1000}.{runtime % 1000 // 10}" if isinstance(runtime, int)
               else f"CUDA runtime  {runtime}")


# ---------------------------------------------------------------------------------------------------
# the cuda-marked tests
# ---------------------------------------------------------------------------------------------------
def run_subprocess(command, cwd):
    """(exit status, its stdout and stderr together); status None when it ran past the time limit."""
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"did not finish within {SUBPROCESS_TIMEOUT_S} s"
    return proc.returncode, proc.stdout + proc.stderr


def last_lines(text, n=15):
    """The last ``n`` lines of ``text``, indented for the report."""
    return ["  | " + line for line in text.strip().splitlines()[-n:]]


def run_cuda_tests(report, tests_dir):
    """Runs the cuda-marked tests with pytest in a subprocess and reports their summary (skipped without tests or
    pytest)."""
    report.section("cuda-marked tests")
    if not tests_dir.is_dir():
        report.add(f"skipped: no tests at {tests_dir} (the tests ship with a source checkout, not with a wheel)")
        return
    if importlib.util.find_spec("pytest") is None:
        report.add("skipped: pytest is not installed (pip install pytest)")
        return
    status, output = run_subprocess([sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider",
                                     str(tests_dir)], cwd=tests_dir.parent)
    summary = output.strip().splitlines()[-1] if output.strip() else "(no output)"
    if status == 0:
        report.add(f"ok: {summary}")
    else:
        report.fail(f"pytest exited with {status}")
        report.lines += last_lines(output, 40)


# ---------------------------------------------------------------------------------------------------
# benchmarks
# ---------------------------------------------------------------------------------------------------
def best_time(fn, repeat):
    """Seconds of the fastest of ``repeat`` calls, after one warm-up (compiles the kernels); the GPU
    is synchronized before each reading of the clock."""
    fn()
    rlpipe.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        rlpipe.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def timing_line(what, cpu_s, gpu_s):
    """One aligned report line comparing a CPU and a GPU time, with their ratio."""
    return f"{what:<40s} cpu {cpu_s * 1e3:9.3f} ms   gpu {gpu_s * 1e3:9.3f} ms   gpu/cpu {gpu_s / cpu_s:7.3f}"


def multistep_batch(B, T, device, seed=0):
    """A [B, T] batch with 2% of the steps done (benchmarks/bench_multistep.py's layout)."""
    rng = np.random.default_rng(seed)
    done = rng.random((B, T, 1)) < 0.02
    arrays = {"observation": rng.standard_normal((B, T, 4)).astype(np.float32),
              "done": np.zeros((B, T, 1), dtype=bool),
              "next": {"observation": rng.standard_normal((B, T, 4)).astype(np.float32),
                       "done": done, "terminated": done.copy(), "truncated": np.zeros((B, T, 1), dtype=bool),
                       "reward": rng.standard_normal((B, T, 1)).astype(np.float32)}}

    def tensors(tree):
        return {k: tensors(v) if isinstance(v, dict) else rlpipe.tensor(v, device=device) for k, v in tree.items()}
    return TensorDict(tensors(arrays), batch_size=[B, T], device=device)


def multistep_mismatches(cpu_out, gpu_out):
    """The entries where the GPU's result differs from the CPU's (floats to the tests' rtol/atol)."""
    wrong = []
    for key in cpu_out.keys(True, True):
        want, have = cpu_out[key].numpy(), gpu_out[key].cpu().numpy()
        close = (np.allclose(have, want, rtol=1e-6, atol=1e-5) if want.dtype.kind == "f"
                 else np.array_equal(have, want))
        if have.shape != want.shape or have.dtype != want.dtype or not close:
            wrong.append(key)
    return wrong


def bench_multistep(report, shapes, repeat):
    """Times MultiStep(0.99, 4) on each [B, T]; fails where the GPU's output differs from the CPU's.
    Returns the last shape's outputs, {device: TensorDict}."""
    report.section("MultiStep(0.99, 4) benchmark")
    transform = MultiStep(0.99, 4)
    for B, T in shapes:
        seconds, outputs = {}, {}
        for device in ("cpu", "cuda"):
            td = multistep_batch(B, T, device)
            seconds[device] = best_time(lambda td=td: transform(td.clone()), repeat)
            outputs[device] = transform(td.clone())
        report.add(timing_line(f"[{B}, {T}]", seconds["cpu"], seconds["cuda"]))
        wrong = multistep_mismatches(outputs["cpu"], outputs["cuda"])
        if wrong:
            report.fail(f"[{B}, {T}]: the GPU's output differs from the CPU's at {wrong}")
    return outputs


def mlp_train_step(sizes, batch, device, seed=0):
    """One Adam step of an MLP (Linear + ReLU layers of ``sizes``) on a mean squared error, as a callable."""
    rlpipe.manual_seed(seed)
    layers = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    net = nn.Sequential(*layers[:-1]).to(device)
    optimizer = rlpipe.optim.Adam(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)
    x = rlpipe.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32), device=device)
    y = rlpipe.tensor(rng.standard_normal((batch, sizes[-1])).astype(np.float32), device=device)

    def step():
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        return loss
    return step


def bench_mlp(report, cases, repeat):
    """Times an MLP forward + backward + Adam step; fails where the GPU's first loss is not the CPU's."""
    report.section("MLP train step (forward, backward, Adam) benchmark")
    for sizes, batch in cases:
        seconds, first_loss = {}, {}
        for device in ("cpu", "cuda"):
            step = mlp_train_step(sizes, batch, device)
            first_loss[device] = step().item()
            seconds[device] = best_time(step, repeat)
        report.add(timing_line(f"{'-'.join(map(str, sizes))}, batch {batch}", seconds["cpu"], seconds["cuda"]))
        if not np.isclose(first_loss["cuda"], first_loss["cpu"], rtol=1e-4):
            report.fail(f"{sizes}: first loss {first_loss['cuda']} on the GPU, {first_loss['cpu']} on the CPU")


# ---------------------------------------------------------------------------------------------------
# a short DQN
# ---------------------------------------------------------------------------------------------------
def run_dqn(report, examples_dir, flags=DQN_FLAGS, python=(sys.executable,)):
    """Runs examples/dqn_cartpole.py on cuda with ``flags`` (``python`` is the interpreter's command
    line); returns its last evaluation return, or None when it did not run."""
    report.section("DQN on cuda (examples/dqn_cartpole.py)")
    script = examples_dir / "dqn_cartpole.py"
    if not script.is_file():
        report.add(f"skipped: no {script} (the examples ship with a source checkout, not with a wheel)")
        return None
    with tempfile.TemporaryDirectory() as out_dir:
        command = [*python, str(script), "--device", "cuda", "--no-progress", "--out-dir", out_dir, *map(str, flags)]
        status, output = run_subprocess(command, cwd=examples_dir.parent)
        if status != 0:
            report.fail(f"dqn_cartpole.py exited with {status}")
            report.lines += last_lines(output)
            return None
        with open(Path(out_dir) / "dqn_cartpole_seed0.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    if not rows:
        report.fail("dqn_cartpole.py ran but wrote no evaluation")
        return None
    last = float(rows[-1]["eval_return"])
    report.add(f"ok: ran {rows[-1]['frames']} frames in {rows[-1]['seconds']} s; last evaluation return {last:g}")
    return last


# ---------------------------------------------------------------------------------------------------
def parse_args(argv):
    """The command line of ``python -m rlpipe.cuda.selfcheck``: --quick, --skip-tests, --out FILE."""
    p = argparse.ArgumentParser(prog="python -m rlpipe.cuda.selfcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller benchmarks, and no DQN")
    p.add_argument("--skip-tests", action="store_true", help="do not run the cuda-marked test suite")
    p.add_argument("--out", metavar="FILE", help="also write the report to FILE")
    return p.parse_args(argv)


def main(argv=None):
    """Runs the self-check and prints its report; returns the exit status (0 when every part passed)."""
    args = parse_args(argv)
    try:
        backend = backends.cuda_backend()
    except RuntimeError as e:
        print(f"rlpipe GPU self-check: no usable GPU. {e}", file=sys.stderr)
        return 1
    size = "quick" if args.quick else "full"
    report = Report()
    report.add(f"rlpipe GPU self-check ({size}), rlpipe at {Path(rlpipe.__file__).parent}")
    sections = [(describe_device, backend)]
    if not args.skip_tests:
        sections.append((run_cuda_tests, SOURCE_ROOT / "tests"))
    sections += [(bench_multistep, MULTISTEP_SHAPES[size], REPEATS[size]), (bench_mlp, MLP_CASES[size], REPEATS[size])]
    if not args.quick:
        sections.append((run_dqn, SOURCE_ROOT / "examples"))
    for run, *section_args in sections:
        try:
            run(report, *section_args)
        except Exception as e:  # a self-check reports what broke and goes on with the next section
            report.fail(f"{type(e).__name__}: {e}")
    text = report.text()
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
