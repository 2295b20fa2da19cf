"""Replay-buffer speed, side by side with torchrl when it is importable.

A ``TensorDictReplayBuffer`` over a ``LazyTensorStorage(1_000_000)``, filled first, with
CartPole-like transitions: observation [4] float32, action [2] int64, done/terminated/truncated
[1] bool, and next/{observation [4], reward [1] float32, done, terminated, truncated [1] bool}.
Timed on one thread, per call: ``extend`` of a 256-transition batch, ``sample(256)``, and one
training-loop step (``extend`` + ``sample``, plus ``update_priority`` of the 256 sampled items
for the ``PrioritizedSampler(alpha=0.7, beta=0.5)``), for the ``RandomSampler`` and the
``PrioritizedSampler``. rlpipe never depends on the peer; run from an environment that also has
torch==2.13.0 and torchrl==0.14.1 (this project's one is /tmp/torchenv) to get the ratios:

    PYTHONPATH=. /tmp/torchenv/bin/python benchmarks/bench_replay_buffer.py [--repeat 7] [--number 200]

A peer workload that cannot run (torchrl's prioritized sampler needs its C++ extension) is
reported as skipped, with the reason.
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import warnings

import numpy as np
from bench_core import measure  # the script's folder is on sys.path

import rlpipe
from rlpipe import data as rlpipe_data

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torchrl warns at import when its C++ extension does not load
    torch, tensordict, torchrl_data = import_peer("tensordict", "torchrl.data")

CAPACITY, BATCH, ALPHA, BETA = 1_000_000, 256, 0.7, 0.5


def make_batch(lib, TensorDict, n, seed=0):
    """n CartPole-like transitions (the same values in both libraries)."""
    rng = np.random.default_rng(seed)
    done = rng.random((n, 1)) < 0.05

    def t(a):
        return lib.tensor(a)
    return TensorDict({
        "observation": t(rng.standard_normal((n, 4)).astype(np.float32)),
        "action": t(rng.integers(0, 2, (n, 2)).astype(np.int64)),
        "done": t(np.zeros((n, 1), bool)), "terminated": t(np.zeros((n, 1), bool)),
        "truncated": t(np.zeros((n, 1), bool)),
        "next": {"observation": t(rng.standard_normal((n, 4)).astype(np.float32)),
                 "reward": t(np.ones((n, 1), np.float32)), "done": t(done), "terminated": t(done.copy()),
                 "truncated": t(np.zeros((n, 1), bool))},
    }, batch_size=[n])


def workloads(lib, TensorDict, data, prioritized):
    """{name: callable} for one library, on a buffer filled with CAPACITY transitions."""
    sampler = data.PrioritizedSampler(CAPACITY, ALPHA, BETA) if prioritized else data.RandomSampler()
    rb = data.TensorDictReplayBuffer(storage=data.LazyTensorStorage(CAPACITY), sampler=sampler, batch_size=BATCH)
    rb.extend(make_batch(lib, TensorDict, CAPACITY, seed=1))
    batch = make_batch(lib, TensorDict, BATCH)
    priorities = lib.tensor(np.random.default_rng(2).random(BATCH) + 0.1)

    def extend():
        rb.extend(batch)

    def sample():
        return rb.sample()

    def step():
        rb.extend(batch)
        s = rb.sample()
        if prioritized:
            rb.update_priority(s["index"], priorities)

    return {"extend 256": extend, "sample 256": sample,
            "step: extend + sample" + (" + update_priority" if prioritized else ""): step}


def main():
    p = argparse.ArgumentParser(description="rlpipe replay-buffer benchmark")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=200, help="calls per timed run")
    args = p.parse_args()

    if torch is not None:
        print(f"peer: torchrl (torch {torch.__version__}), measured now")
    else:
        print("peer: torch/torchrl not importable here; rlpipe only")
    print(f"TensorDictReplayBuffer, LazyTensorStorage({CAPACITY:_}) filled, batch {BATCH}, one thread")
    print(f"{'sampler':>19s}  {'workload':<40s} {'rlpipe us':>10s} {'samples/s':>10s} {'peer us':>10s} "
          f"{'peer/rlpipe':>11s}")
    for prioritized in (False, True):
        name = "PrioritizedSampler" if prioritized else "RandomSampler"
        ours = {k: measure(fn, args.number, args.repeat) for k, fn in
                workloads(rlpipe, rlpipe.TensorDict, rlpipe_data, prioritized).items()}
        peer, reason = {}, "torch/torchrl not importable"
        if torch is not None:
            try:
                peer = {k: measure(fn, args.number, args.repeat) for k, fn in
                        workloads(torch, tensordict.TensorDict, torchrl_data, prioritized).items()}
            except (RuntimeError, ImportError) as e:  # e.g. torchrl's segment trees need its C++ extension
                reason = f"peer skipped: {str(e).splitlines()[0]}"
        for key, us in ours.items():
            rate = f"{BATCH / us * 1e6:10.0f}" if not key.startswith("extend") else f"{'-':>10s}"
            if key in peer:
                tail = f"{peer[key]:10.1f} {peer[key] / us:10.2f}x"
            else:
                tail = f"{'-':>10s} {'-':>11s}"
            print(f"{name:>19s}  {key:<40s} {us:10.1f} {rate} {tail}")
        if not peer and torch is not None:
            print(f"{'':>19s}  ({reason})")


if __name__ == "__main__":
    main()
