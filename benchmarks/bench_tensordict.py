"""TensorDict container speed, side by side with tensordict when it is importable.

Measures, on one thread: indexing 256 random rows of a 100 000-row TensorDict (the same int64
index tensor every call), stacking 1 000 single-row TensorDicts (``td[i]``, batch ``[]``) into one
of batch [1000], and ``apply`` of an elementwise function over a nested TensorDict of batch [1000];
then lazy stacks: ``lazy_stack`` of 1 000 heterogeneous TensorDicts (batch ``[]``, an "obs" of 1 to 7
features, a "reward" [1] and a ("next", "obs") like "obs"), indexing 256 of them (an int64 tensor)
and reading the homogeneous "reward" of all 1 000 (a dense [1000, 1] tensor); then tensorclasses (a
``TensorClass`` with the five leaves as fields, "next" a TensorDict): reading a field of a batch-[1000]
instance, and ``stack`` of 1 000 one-row instances; then consolidated transport of the batch-[1000]
TensorDict: ``consolidate()``, ``from_consolidated`` of the file ``consolidate(filename)`` wrote,
and a pickle round trip (dumps + loads) of the consolidated and of the plain TensorDict.
Every TensorDict has the same five leaves: obs [N, 4] float32, action [N, 2] int64, reward [N, 1]
float32, done [N, 1] bool and ("next", "obs") [N, 4] float32. rlpipe never depends on the peer; run
from an environment that also has torch==2.13.0 and tensordict==0.14.3 to get the ratios (each
workload's rlpipe and tensordict runs alternate, the best of each kept):

    python benchmarks/bench_tensordict.py [--repeat 7] [--number 1000]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import atexit
import os
import pickle
import shutil
import tempfile

import numpy as np
from bench_core import measure  # the script's folder is on sys.path

import rlpipe

torch, tensordict = import_peer("tensordict")

# tensordict 0.14.3 figures from DESIGN.md, used when the peer is not importable here
ANCHORS_US = {"index 256 rows of a 100k-row TensorDict": 37.0,
              "stack 1000 one-row TensorDicts": 12_000.0}


def make_td(lib, TensorDict, n, seed=0):
    """A TensorDict of batch [n] with the five leaves, the same values in both libraries."""
    rng = np.random.default_rng(seed)
    return TensorDict({
        "obs": lib.tensor(rng.standard_normal((n, 4)).astype(np.float32)),
        "action": lib.tensor(rng.integers(0, 2, (n, 2)).astype(np.int64)),
        "reward": lib.tensor(rng.standard_normal((n, 1)).astype(np.float32)),
        "done": lib.tensor(rng.random((n, 1)) < 0.05),
        "next": {"obs": lib.tensor(rng.standard_normal((n, 4)).astype(np.float32))},
    }, batch_size=[n])


def make_ragged(lib, TensorDict, n, seed=3):
    """n TensorDicts of batch [] whose "obs" and ("next", "obs") have 1 to 7 features."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        obs = rng.standard_normal(i % 7 + 1).astype(np.float32)
        out.append(TensorDict({"obs": lib.tensor(obs), "reward": lib.tensor(rng.standard_normal(1).astype(np.float32)),
                               "next": {"obs": lib.tensor(obs + 1)}}, batch_size=[]))
    return out


def workloads(lib, td_module):
    """name -> (callable, result of one call) for one library (rlpipe, or torch with tensordict)."""
    TensorDict, lazy_stack = td_module.TensorDict, td_module.lazy_stack
    big = make_td(lib, TensorDict, 100_000)
    idx = lib.tensor(np.random.default_rng(1).integers(0, 100_000, 256).astype(np.int64))
    rows = [big[i] for i in range(1000)]
    small = make_td(lib, TensorDict, 1000, seed=2)
    fns = {
        "index 256 rows of a 100k-row TensorDict": lambda: big[idx],
        "stack 1000 one-row TensorDicts": lambda: lib.stack(rows, 0),
        "apply(lambda x: x * 2), nested, batch [1000]": lambda: small.apply(lambda x: x * 2),
    }
    ragged = make_ragged(lib, TensorDict, 1000)
    lazy = lazy_stack(ragged, 0)
    pick = lib.tensor(np.random.default_rng(4).integers(0, 1000, 256).astype(np.int64))
    fns.update({
        "lazy_stack 1000 heterogeneous TensorDicts": lambda: lazy_stack(ragged, 0),
        "index 256 of a 1000-TensorDict lazy stack": lambda: lazy[pick],
        'lazy stack of 1000: get("reward")': lambda: lazy.get("reward"),
    })
    fns.update(tensorclass_workloads(lib, td_module, small))
    fns.update(consolidated_workloads(td_module, small))
    return {name: (fn, fn()) for name, fn in fns.items()}


def tensorclass_workloads(lib, td_module, td):
    """Field read and stacking of a TensorClass holding ``td``'s five leaves."""
    class Transition(td_module.TensorClass):
        obs: lib.Tensor
        action: lib.Tensor
        reward: lib.Tensor
        done: lib.Tensor
        next: td_module.TensorDict

    tc = Transition.from_tensordict(td)
    rows = [tc[i] for i in range(1000)]
    return {"TensorClass field read (tc.obs), batch [1000]": lambda: tc.obs,
            "stack 1000 one-row TensorClasses": lambda: lib.stack(rows, 0)}


def consolidated_workloads(td_module, td):
    """Consolidating ``td``, reading it back from a consolidated file, and pickle round trips."""
    folder = tempfile.mkdtemp(prefix="bench-consolidated-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "batch.bin")
    consolidated = td.consolidate(path)
    return {"consolidate(), batch [1000]": td.consolidate,
            "from_consolidated(file), batch [1000]": lambda: td_module.TensorDict.from_consolidated(path),
            "pickle round trip, consolidated [1000]": lambda: pickle.loads(pickle.dumps(consolidated)),
            "pickle round trip, plain [1000]": lambda: pickle.loads(pickle.dumps(td))}


def calls_per_run(name, number):
    """How many calls one timed run makes: ``number`` for the cheap workloads, fewer for the costly."""
    if name.startswith(("index 256 rows", "TensorClass field")):
        return number
    return max(number // (100 if name.split()[0] == "stack" else 10), 3)


def alternated(mine, theirs, number, repeat):
    """(rlpipe us, peer us) per call, each the best of ``repeat`` runs taken in turn, so that a
    change in the machine's load reaches both (``theirs`` None: no peer run)."""
    best_mine = best_theirs = float("inf")
    for _ in range(repeat):
        best_mine = min(best_mine, measure(mine, number, 1))
        if theirs is not None:
            best_theirs = min(best_theirs, measure(theirs, number, 1))
    return best_mine, best_theirs


def leaves(td):
    """{key: NumPy array} of a TensorDict's leaves (a tensor: itself; a lazy stack: each stacked
    TensorDict's, keyed by position), to check both libraries did the same work."""
    if hasattr(td, "tensordicts"):
        return {(i, k): v for i, part in enumerate(td.tensordicts) for k, v in leaves(part).items()}
    if not hasattr(td, "items"):
        return {(): np.asarray(td.numpy())}
    return {k: np.asarray(v.numpy()) for k, v in td.items(include_nested=True, leaves_only=True)}


def same(a, b):
    la, lb = leaves(a), leaves(b)
    return la.keys() == lb.keys() and all(la[k].shape == lb[k].shape and np.array_equal(la[k], lb[k]) for k in la)


def main():
    p = argparse.ArgumentParser(description="rlpipe TensorDict benchmark")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=1000, help="calls per run of the indexing workload "
                   "(stacking runs number/100 calls, apply number/10)")
    args = p.parse_args()

    ours = workloads(rlpipe, rlpipe.tensordict)
    theirs = workloads(torch, tensordict) if torch is not None else {}
    if torch is not None:
        print(f"peer: tensordict {tensordict.__version__} on torch {torch.__version__} (measured now)")
    else:
        print("peer: DESIGN.md anchors for tensordict 0.14.3 (torch/tensordict not importable)")
    print(f"{'workload':46s} {'rlpipe us':>10s} {'peer us':>10s} {'peer/rlpipe':>12s}  same result")
    for name, (fn, out) in ours.items():
        number = calls_per_run(name, args.number)
        mine, peer = alternated(fn, theirs[name][0] if name in theirs else None, number, args.repeat)
        peer = peer if name in theirs else ANCHORS_US.get(name)
        ratio = f"{peer / mine:11.2f}x" if peer else f"{'':>12s}"
        check = ("yes" if same(out, theirs[name][1]) else "NO") if name in theirs else "-"
        print(f"{name:46s} {mine:10.2f} {peer if peer else float('nan'):10.2f} {ratio}  {check}")


if __name__ == "__main__":
    main()
