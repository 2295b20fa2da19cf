"""Attention in rlpipe and torch side by side: a TransformerEncoderLayer (d_model 128, 4 heads, feed-forward
512, causal mask) forward + backward over [B=32, T=60] (a decision-transformer-sized context), the same
layer's forward with no grad at batch 1, and scaled_dot_product_attention alone (forward + backward).

    python3 benchmarks/bench_attention.py [--repeat 5] [--peer-python PATH]

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

D_MODEL, HEADS, FEEDFORWARD, BATCH, STEPS = 128, 4, 512, 32, 60


def workloads(lib):
    """name -> (callable, calls per timing) for one library (rlpipe or torch, same names)."""
    lib.manual_seed(0)
    layer = lib.nn.TransformerEncoderLayer(D_MODEL, HEADS, FEEDFORWARD, dropout=0.0, batch_first=True)
    rng = np.random.default_rng(0)
    tokens = lib.tensor(rng.standard_normal((BATCH, STEPS, D_MODEL)).astype(np.float32))
    one = tokens[:1]
    causal = lib.nn.Transformer.generate_square_subsequent_mask(STEPS)
    q, k, v = (lib.tensor(rng.standard_normal((BATCH, HEADS, STEPS, D_MODEL // HEADS)).astype(np.float32),
                          requires_grad=True) for _ in range(3))

    def train_layer():
        for p in layer.parameters():
            p.grad = None
        layer(tokens, src_mask=causal, is_causal=True).sum().backward()

    def act_batch_1():
        with lib.no_grad():
            return layer(one, src_mask=causal, is_causal=True)

    def sdpa_fwd_bwd():
        lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    return {f"encoder layer fwd+bwd, [B={BATCH}, T={STEPS}]": (train_layer, 3),
            f"encoder layer fwd, no grad, [B=1, T={STEPS}]": (act_batch_1, 50),
            f"sdpa causal fwd+bwd, [B={BATCH}, H={HEADS}, T={STEPS}]": (sdpa_fwd_bwd, 5)}


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
    p = argparse.ArgumentParser(description="attention, rlpipe vs torch")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--peer-python", default=peer_python())
    p.add_argument("--side", choices=("rlpipe", "torch"), help="measure one library only and print JSON")
    args = p.parse_args()
    if args.side:
        print(json.dumps(measure_side(args.side, args.repeat)))
        return
    ours = measure_side("rlpipe", args.repeat)
    theirs = run_side(__file__, args.peer_python, "torch", ("--repeat", args.repeat))
    print(f"TransformerEncoderLayer({D_MODEL}, {HEADS}, {FEEDFORWARD}), float32, one thread, us per call, "
          f"best of {args.repeat}")
    print_side_by_side(ours, theirs, "workload", "10.1f")


if __name__ == "__main__":
    main()
