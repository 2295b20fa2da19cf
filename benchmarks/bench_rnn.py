"""LSTM(64 -> 128, one layer) in rlpipe and torch side by side: forward + backward over a sequence
[T=32, B=64], and one batch-1 step with no grad (a recurrent policy acting in a collector).

    python3 benchmarks/bench_rnn.py [--repeat 5] [--peer-python PATH]

The torch side runs in its own process, in an interpreter that has torch 2.13 (``--peer-python``
defaults to /work/peervenv/bin/python when it exists, else this interpreter); its column is left
out when that interpreter cannot import torch. ``--side rlpipe`` or ``--side torch`` measures one
library in this process and prints JSON. Times are CPU time per call (the machine is shared).
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import json
import sys
import time
import timeit

import numpy as np
from peer_process import peer_python, print_side_by_side, run_side

INPUT, HIDDEN, STEPS, BATCH = 64, 128, 32, 64


def workloads(lib):
    """name -> (callable, calls per timing) for one library (rlpipe or torch, same names)."""
    lib.manual_seed(0)
    lstm = lib.nn.LSTM(INPUT, HIDDEN)
    rng = np.random.default_rng(0)
    seq = lib.tensor(rng.standard_normal((STEPS, BATCH, INPUT)).astype(np.float32))
    step = lib.tensor(rng.standard_normal((1, 1, INPUT)).astype(np.float32))
    state = (lib.zeros(1, 1, HIDDEN), lib.zeros(1, 1, HIDDEN))

    def train_sequence():
        for p in lstm.parameters():
            p.grad = None
        out, (h, c) = lstm(seq)
        (out.sum() + c.sum()).backward()

    def act_one_step():
        with lib.no_grad():
            return lstm(step, state)

    return {f"LSTM fwd+bwd, [T={STEPS}, B={BATCH}]": (train_sequence, 5),
            "LSTM one step, batch 1, no grad": (act_one_step, 2000)}


def measure_side(side, repeat):
    """CPU microseconds per call of each workload for ``side``, best of ``repeat`` timings."""
    if side == "torch":
        lib, = import_peer()
        if lib is None:
            sys.exit("torch is not importable")
    else:
        import rlpipe as lib
    out = {}
    for name, (fn, number) in workloads(lib).items():
        fn()
        out[name] = min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6
    return {"us": out, "version": lib.__version__}


def main():
    p = argparse.ArgumentParser(description="LSTM, rlpipe vs torch")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--peer-python", default=peer_python())
    p.add_argument("--side", choices=("rlpipe", "torch"), help="measure one library only and print JSON")
    args = p.parse_args()
    if args.side:
        print(json.dumps(measure_side(args.side, args.repeat)))
        return
    ours = measure_side("rlpipe", args.repeat)
    theirs = run_side(__file__, args.peer_python, "torch", ("--repeat", args.repeat))
    print(f"LSTM({INPUT} -> {HIDDEN}), float32, one thread, us per call, best of {args.repeat}")
    print_side_by_side(ours, theirs, "workload", "10.1f")


if __name__ == "__main__":
    main()
