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
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import numpy as np
from peer_process import side_by_side_main

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


def workloads(lib, number):
    """name -> (callable, calls per timing: ``number``, fewer for the whole loop) for one library (rlpipe or
    torch, same names)."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((BATCH, ATOMS)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((BATCH, ATOMS)).astype(np.float32))
    target = lib.zeros(BATCH, ATOMS)
    idx = lib.tensor(rng.integers(0, ATOMS, ATOMS))
    src = lib.tensor(rng.random(ATOMS).astype(np.float32))
    floats = lib.tensor(rng.integers(0, ATOMS, (BATCH, ATOMS)).astype(np.float32))
    row = x[3]
    ops = {
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
    }
    return {**{name: (fn, number) for name, fn in ops.items()},
            "c51.py projection loop (128 rows)": (c51_projection(lib, rng), max(number // 500, 5))}


def main():
    side_by_side_main(__file__, workloads, "small-op overhead, rlpipe vs torch",
                      f"small ops on C51-sized tensors ({BATCH}x{ATOMS} float32), no grad, us per call", label="op",
                      number_format="9.2f", number=20000, no_grad=True)


if __name__ == "__main__":
    main()
