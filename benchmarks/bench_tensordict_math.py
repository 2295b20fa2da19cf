"""TensorDict math speed, side by side with tensordict when it is importable.

Measures, on one thread, over a TensorDict of batch [256] with four float32 leaves (obs [N, 4],
reward [N, 1], ("next", "obs") [N, 4], ("next", "reward") [N, 1]): ``td + td``, ``td * 0.5``,
a target-network soft update ``target.lerp_(source, 0.005)``, ``td.mean(0)``,
``td.sum(reduce=True)`` and ``rlpipe.where(mask, td, 0.)`` (the top-level function dispatching on
the TensorDict). Run from an environment that also has torch==2.13.0 and tensordict==0.14.3 to get
the ratios:

    python benchmarks/bench_tensordict_math.py [--repeat 7] [--number 1000]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse

import numpy as np
from bench_core import measure  # the script's folder is on sys.path

import rlpipe

torch, tensordict = import_peer("tensordict")


def make_td(lib, TensorDict, n=256, seed=0):
    rng = np.random.default_rng(seed)
    leaf = lambda *shape: lib.tensor(rng.standard_normal(shape).astype(np.float32))  # noqa: E731
    return TensorDict({"obs": leaf(n, 4), "reward": leaf(n, 1),
                       "next": {"obs": leaf(n, 4), "reward": leaf(n, 1)}}, batch_size=[n])


def workloads(lib, TensorDict):
    a, b, target = make_td(lib, TensorDict), make_td(lib, TensorDict, seed=1), make_td(lib, TensorDict, seed=2)
    mask = lib.tensor(np.arange(256) % 3 == 0)
    return {
        "td + td (batch 256, 4 leaves)": lambda: a + b,
        "td * 0.5": lambda: a * 0.5,
        "target.lerp_(source, 0.005)": lambda: target.lerp_(a, 0.005),
        "td.mean(0)": lambda: a.mean(0),
        "td.sum(reduce=True)": lambda: a.sum(reduce=True),
        "where(mask, td, 0.)": lambda: lib.where(mask, a, 0.),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=1000)
    args = parser.parse_args()
    mine = {k: measure(f, args.number, args.repeat) for k, f in workloads(rlpipe, rlpipe.TensorDict).items()}
    peer = {} if tensordict is None else {
        k: measure(f, args.number, args.repeat) for k, f in workloads(torch, tensordict.TensorDict).items()}
    print("peer:", "tensordict " + tensordict.__version__ if tensordict is not None else "not importable")
    print(f"{'workload':40s} {'rlpipe us':>10s} {'peer us':>10s} {'peer/rlpipe':>12s}")
    for key, us in mine.items():
        other = peer.get(key, float("nan"))
        print(f"{key:40s} {us:10.2f} {other:10.2f} {other / us:11.2f}x")


if __name__ == "__main__":
    main()
