"""rlpipe.linalg and the multivariate distributions beside torch 2.13, per call with gradients (forward and
backward): a PPO policy's MultivariateNormal with a diagonal covariance (batch 2048, 6 actions: log_prob, entropy,
backward), and batched factorizations of small float64 matrices (64 of 8x8). The torch side runs in its own
process, in an interpreter that has torch:

    python3 benchmarks/bench_linalg_distributions.py [--repeat 5] [--number 50] [--peer-python PATH]

``--side rlpipe`` or ``--side torch`` measures one library in this process and prints JSON.
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import json
import sys
import time
import timeit

import numpy as np
from peer_process import peer_python, print_side_by_side, run_side

BATCH, ACTIONS, MATRICES, SIZE = 2048, 6, 64, 8


def workloads(lib):
    """name -> a callable doing one forward and backward, for rlpipe or torch (same names)."""
    rng = np.random.default_rng(0)
    loc = lib.zeros(BATCH, ACTIONS, requires_grad=True)
    cov = lib.diag(lib.full((ACTIONS,), 0.36))
    actions = lib.tensor(rng.standard_normal((BATCH, ACTIONS)).astype(np.float32))
    a = rng.standard_normal((MATRICES, SIZE, SIZE))
    spd = lib.tensor(a @ a.transpose(0, 2, 1) + SIZE * np.eye(SIZE), requires_grad=True)
    rhs = lib.tensor(rng.standard_normal((MATRICES, SIZE, 2)))

    def ppo_mvn():
        dist = lib.distributions.MultivariateNormal(loc, cov)
        (dist.log_prob(actions).sum() + dist.entropy().sum()).backward()

    def backward(fn):
        return lambda: fn().sum().backward()
    return {
        "PPO MultivariateNormal log_prob+entropy": ppo_mvn,
        "linalg.cholesky 64x8x8": backward(lambda: lib.linalg.cholesky(spd)),
        "linalg.solve 64x8x8, 2 rhs": backward(lambda: lib.linalg.solve(spd, rhs)),
        "linalg.inv 64x8x8": backward(lambda: lib.linalg.inv(spd)),
        "linalg.slogdet 64x8x8": backward(lambda: lib.linalg.slogdet(spd).logabsdet),
        "linalg.eigh 64x8x8 (values)": backward(lambda: lib.linalg.eigvalsh(spd)),
    }


def measure_side(side, number, repeat):
    """CPU microseconds per call of each workload, best of ``repeat`` timings."""
    if side == "torch":
        lib, = import_peer()
        if lib is None:
            sys.exit("torch is not importable")
    else:
        import rlpipe as lib
    out = {}
    for name, fn in workloads(lib).items():
        fn()
        out[name] = min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6
    return {"us": out, "version": lib.__version__}


def main():
    p = argparse.ArgumentParser(description="linalg and distributions, rlpipe vs torch")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--number", type=int, default=50)
    p.add_argument("--peer-python", default=peer_python())
    p.add_argument("--side", choices=("rlpipe", "torch"), help="measure one library only and print JSON")
    args = p.parse_args()
    if args.side:
        print(json.dumps(measure_side(args.side, args.number, args.repeat)))
        return
    ours = measure_side("rlpipe", args.number, args.repeat)
    theirs = run_side(__file__, args.peer_python, "torch", ("--number", args.number, "--repeat", args.repeat))
    print(f"forward + backward, us per call (CPU time), best of {args.repeat}")
    print_side_by_side(ours, theirs, "workload", "9.1f")


if __name__ == "__main__":
    main()
