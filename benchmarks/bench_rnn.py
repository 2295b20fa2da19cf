"""LSTM(64 -> 128, one layer) in rlpipe and torch side by side: forward + backward over a sequence
[T=32, B=64], and one batch-1 step with no grad (a recurrent policy acting in a collector).

    python3 benchmarks/bench_rnn.py [--repeat 5] [--peer-python PATH]

The torch side runs in its own process, in an interpreter that has torch 2.13 (``--peer-python``
defaults to /work/peervenv/bin/python when it exists, else this interpreter); its column is left
out when that interpreter cannot import torch. ``--side rlpipe`` or ``--side torch`` measures one
library in this process and prints JSON. Times are CPU time per call (the machine is shared).
"""
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import numpy as np
from peer_process import side_by_side_main

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


if __name__ == "__main__":
    side_by_side_main(__file__, workloads, "LSTM, rlpipe vs torch",
                      f"LSTM({INPUT} -> {HIDDEN}), float32, one thread, us per call")
