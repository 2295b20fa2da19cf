"""Per-call time of indexing, views and in-place ops on small tensors, rlpipe and torch side by side.

The tensors are C51-sized (CleanRL's c51.py: batch 128, 101 atoms); the last workload is c51.py's
whole projection loop, two ``target_pmfs[i].index_add_(0, l[i].long(), d_m_l[i])`` per row. No
gradients are recorded, as in that loop. The torch side runs in its own process, in an
interpreter that has torch 2.13:

    python3 benchmarks/bench_small_ops.py [--repeat 5] [--number 20000] [--peer-python PATH]

``--peer-python`` defaults to /work/peervenv/bin/python when it exists, else this interpreter;
the torch column is left out when that interpreter cannot import torch. ``--side rlpipe`` or
``--side torch`` measures one library in this process and prints JSON.
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import json
import sys
import time
import timeit

import numpy as np
from peer_process import peer_python, print_side_by_side, run_side

BATCH, ATOMS = 128, 101


def c51_projection(lib, rng):
    """c51.py's target projection loop over the rows, with its inputs."""
    b = lib.tensor(rng.uniform(0, ATOMS - 1, (BATCH, ATOMS)).astype(np.float32))
    lower, upper = b.floor(), b.ceil()
    pmfs = lib.softmax(lib.tensor(rng.standard_normal((BATCH, ATOMS)).astype(np.float32)), 1)
    d_m_l = (upper + (lower == upper).float() - b) * pmfs
    d_m_u = (b - lower) * pmfs

    def loop():
        target_pmfs = lib.zeros_like(pmfs)
        for i in range(target_pmfs.size(0)):
            target_pmfs[i].index_add_(0, lower[i].long(), d_m_l[i])
            target_pmfs[i].index_add_(0, upper[i].long(), d_m_u[i])
    return loop


def workloads(lib):
    """name -> (callable, calls per timing) for one library (rlpipe or torch, same names)."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((BATCH, ATOMS)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((BATCH, ATOMS)).astype(np.float32))
    target = lib.zeros(BATCH, ATOMS)
    idx = lib.tensor(rng.integers(0, ATOMS, ATOMS))
    src = lib.tensor(rng.random(ATOMS).astype(np.float32))
    floats = lib.tensor(rng.integers(0, ATOMS, (BATCH, ATOMS)).astype(np.float32))
    row = x[3]
    return {
        "target[i].index_add_(0, idx, src)": lambda: target[3].index_add_(0, idx, src),
        "row.index_add_(0, idx, src)": lambda: row.index_add_(0, idx, src),
        "l[i].long()": lambda: floats[3].long(),
        "x[i]": lambda: x[3],
        "x[:, j]": lambda: x[:, 5],
        "x[i, j]": lambda: x[3, 5],
        "x[i:j]": lambda: x[2:10],
        "x.view(-1)": lambda: x.view(-1),
        "x.view(101, 128)": lambda: x.view(ATOMS, BATCH),
        "x.unsqueeze(0)": lambda: x.unsqueeze(0),
        "x.add_(y)": lambda: x.add_(y),
        "x.sub_(y)": lambda: x.sub_(y),
        "x.mul_(1.0)": lambda: x.mul_(1.0),
        "x.copy_(y)": lambda: x.copy_(y),
        "x + y": lambda: x + y,
        "zeros_like(x)": lambda: lib.zeros_like(x),
        "c51.py projection loop (128 rows)": c51_projection(lib, rng),
    }


def measure_side(side, number, repeat):
    """CPU microseconds per call of each workload for ``side``, best of ``repeat`` timings (CPU
    time, not wall time: the machine is shared, and waiting for a core is not the op's cost)."""
    if side == "torch":
        lib, = import_peer()
        if lib is None:
            sys.exit("torch is not importable")
    else:
        import rlpipe as lib
    out = {}
    with lib.no_grad():
        for name, fn in workloads(lib).items():
            n = number if "loop" not in name else max(number // 500, 5)
            fn()
            out[name] = min(timeit.repeat(fn, number=n, repeat=repeat, timer=time.process_time)) / n * 1e6
    return {"us": out, "version": lib.__version__}


def main():
    p = argparse.ArgumentParser(description="small-op overhead, rlpipe vs torch")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--number", type=int, default=20000)
    p.add_argument("--peer-python", default=peer_python())
    p.add_argument("--side", choices=("rlpipe", "torch"), help="measure one library only and print JSON")
    args = p.parse_args()
    if args.side:
        print(json.dumps(measure_side(args.side, args.number, args.repeat)))
        return

    ours = measure_side("rlpipe", args.number, args.repeat)
    theirs = run_side(__file__, args.peer_python, "torch", ("--number", args.number, "--repeat", args.repeat))
    print(f"small ops on C51-sized tensors ({BATCH}x{ATOMS} float32), no grad, us per call, best of {args.repeat}")
    print_side_by_side(ours, theirs, "op", "9.2f")


if __name__ == "__main__":
    main()
