"""``MultiStep(0.99, 4)`` speed, side by side with torchrl when it is importable.

Times ``ms(td.clone())`` (as ``bench/peer_anchors.py`` timed torchrl) on a TensorDict of batch
[B, T] with observation [B, T, 4], done [B, T, 1] and next/{observation [B, T, 4], done,
terminated, truncated [B, T, 1], reward [B, T, 1]}, 2% of the steps done, at [1, 10] (a collector's
small batch: the per-call overhead), [1, 1000], [32, 1000], [256, 1000] and [32, 10000], on one
thread. Both libraries get the same values (built with NumPy). Beside them, ``numpy_multistep``: the
same math written in plain NumPy on the same arrays (a copy of them timed with it, as td.clone()
is), the floor for an implementation on arrays; its output must equal rlpipe's, every entry, or the
script stops. rlpipe and the NumPy reference are timed in alternation (best of ``--repeat`` runs
each). Besides the ratios it prints rlpipe's time per element (per step of B*T), which stays flat
when the time grows linearly in B*T, and whether both libraries agree on ("next", "reward"), gamma,
steps_to_next_obs and ("next", "observation") (done, terminated and nonterminal differ on purpose:
DESIGN.md, "MultiStep semantics"). rlpipe never depends on the peer; run from an environment that
also has torch==2.13.0 and torchrl==0.14.1 to get the ratios:

    python benchmarks/bench_multistep.py [--repeat 7] [--number 20] [--device cuda]

``--device cuda`` also times rlpipe on the GPU against the CPU at [256, 10000] (skipped, with a
message, without CuPy or a GPU). A peer call that takes over a second (torchrl at [32, 10000]) is
timed best of 3 rather than of ``--repeat``.
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import functools
import time

import numpy as np
from bench_core import measure  # the script's folder is on sys.path

import rlpipe
from rlpipe.postprocs import MultiStep

torch, tensordict, torchrl, _peer_postprocs = import_peer("tensordict", "torchrl", "torchrl.data.postprocs")
PeerMultiStep = _peer_postprocs.MultiStep if _peer_postprocs else None

GAMMA, N_STEPS, DONE_RATE = 0.99, 4, 0.02
SHAPES = [(1, 10), (1, 1000), (32, 1000), (256, 1000), (32, 10000)]
CUDA_SHAPE = (256, 10000)
# torchrl 0.14.1 figures from DESIGN.md (ms per call), used when torchrl is not importable here
ANCHORS_MS = {(32, 1000): 51.0, (256, 1000): 540.0}
COMPARED = [("next", "reward"), ("gamma",), ("steps_to_next_obs",), ("next", "observation")]


def make_arrays(B, T, seed=0):
    """The batch as NumPy arrays, nested like the TensorDict (peer_anchors.py's layout)."""
    rng = np.random.default_rng(seed)
    done = rng.random((B, T, 1)) < DONE_RATE
    return {"observation": rng.standard_normal((B, T, 4)).astype(np.float32),
            "done": np.zeros((B, T, 1), dtype=bool),
            "next": {"observation": rng.standard_normal((B, T, 4)).astype(np.float32),
                     "done": done, "terminated": done.copy(),
                     "truncated": np.zeros((B, T, 1), dtype=bool),
                     "reward": rng.standard_normal((B, T, 1)).astype(np.float32)}}


def to_td(lib, TensorDict, arrays, batch, device="cpu"):
    def convert(tree):
        return {k: convert(v) if isinstance(v, dict) else lib.tensor(v) for k, v in tree.items()}
    td = TensorDict(convert(arrays), batch_size=list(batch))
    return td if device == "cpu" else td.to(device)


def workload(lib, TensorDict, make, arrays, batch, device="cpu"):
    """(callable timing ms(td.clone()), the transformed TensorDict of one call)."""
    td = to_td(lib, TensorDict, arrays, batch, device)
    ms = make(GAMMA, N_STEPS)
    if device == "cpu":
        def run():
            return ms(td.clone())
    else:
        def run():
            out = ms(td.clone())
            rlpipe.cuda.synchronize()
            return out
    return run, run()


def picked(td, key, batch):
    """The entry as a NumPy array of shape [B, T, features] (a trailing 1 where it has none)."""
    value = td.get(key)
    value = value.cpu() if hasattr(value, "cpu") else value
    a = np.asarray(value.numpy())
    return a.reshape(tuple(batch) + (-1,))


def agreement(ours, theirs, batch):
    """'yes' when every compared entry is equal; 'yes (floats ...)' when the integer entries are equal
    and the float ones within 1e-6 (relative, the golden-data tolerance, and absolute near 0); else
    'NO' with the entries that differ."""
    bad, worst = [], 0.0
    for key in COMPARED:
        a, b = picked(ours, key, batch), picked(theirs, key, batch)
        name = ".".join(key)
        if a.shape != b.shape:
            bad.append(f"{name} (shape {list(a.shape)} vs {list(b.shape)})")
            continue
        if np.array_equal(a, b):
            continue
        diff = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
        if np.issubdtype(a.dtype, np.floating) and np.allclose(a, b, rtol=1e-6, atol=1e-6):
            worst = max(worst, diff)
        else:
            bad.append(f"{name} (max |diff| {diff:.2g})")
    if bad:
        return "NO: " + ", ".join(bad)
    return "yes" if worst == 0 else f"yes (floats within 1e-6, max |diff| {worst:.1g})"


def numpy_multistep(arrays, gamma, n):
    """The same math in plain NumPy on a nested dict like ``make_arrays``' (done, terminated, reward
    of shape [*B, T, 1]; no mask): the floor an implementation on arrays could reach. Returns the new
    nested dict; the input is left as it is."""
    nxt = arrays["next"]
    batch = nxt["reward"].shape[:-1]
    T = batch[-1]
    n = min(n, T)
    ends = nxt["done"][..., 0].copy()  # a window that reaches step j stops there
    ends[..., -1] = True
    m = np.full(batch, n, np.int64)
    for k in range(n - 1, -1, -1):  # the smallest k that stops the window wins
        m[..., :T - k][ends[..., k:]] = k + 1
    reward = nxt["reward"][..., 0]
    total = reward + np.float32(0)
    for k in range(1, n):
        total[..., :T - k] += np.where(m[..., :T - k] > k, reward[..., k:] * np.float32(gamma ** k), np.float32(0))
    rows = (np.arange(m.size).reshape(batch) + m - 1).reshape(-1)
    out = {key: value.reshape((-1,) + value.shape[len(batch):])[rows].reshape(value.shape)
           for key, value in nxt.items() if key != "reward"}
    out["reward"], out["original_reward"] = total[..., None], nxt["reward"]
    gammas = np.power(gamma, np.arange(n + 1, dtype=np.float64)).astype(np.float32)[m]
    return {**arrays, "next": out, "gamma": gammas, "steps_to_next_obs": m,
            "nonterminal": ~out["terminated"][..., 0]}


def copied(tree):
    """A deep copy of a nested dict of arrays (what ``td.clone()`` is to the TensorDict)."""
    return {k: copied(v) if isinstance(v, dict) else v.copy() for k, v in tree.items()}


def numpy_reference_call(arrays):
    """What is timed on the NumPy side: a copy of the input (as ``td.clone()``), then the math."""
    return numpy_multistep(copied(arrays), GAMMA, N_STEPS)


def same_as_numpy(td, tree, prefix=()):
    """Whether every leaf of the NumPy reference's output equals rlpipe's, dtype and value."""
    for key, value in tree.items():
        if isinstance(value, dict):
            if not same_as_numpy(td, value, prefix + (key,)):
                return False
            continue
        ours = np.asarray(td.get(prefix + (key,)).numpy())
        if ours.dtype != value.dtype or not np.array_equal(ours, value.reshape(ours.shape)):
            return False
    return True


def calls(number, batch):
    """Calls per timed run: ``number`` at 1 000 elements, fewer for bigger batches (at least 1)."""
    return max(number * 1000 // (batch[0] * batch[1]), 1)


def main():
    p = argparse.ArgumentParser(description="rlpipe MultiStep benchmark")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=20, help="calls per run at [1, 1000]; bigger batches run "
                   "proportionally fewer (at least one)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda: also time rlpipe on the "
                   f"GPU against the CPU at {list(CUDA_SHAPE)}")
    args = p.parse_args()

    if torch is not None:
        print(f"peer: torchrl {torchrl.__version__} on torch {torch.__version__} (measured now)")
    else:
        print("peer: DESIGN.md anchors for torchrl 0.14.1 (torch/torchrl not importable)")
    print(f"MultiStep(gamma={GAMMA}, n_steps={N_STEPS}), {DONE_RATE:.0%} done, one thread, timing ms(td.clone()); "
          "NumPy: the same math on plain arrays (numpy_multistep(copy of the arrays))")
    print(f"{'batch':>12s} {'rlpipe ms':>10s} {'ns/elem':>8s} {'NumPy ms':>9s} {'rlpipe/NumPy':>13s} {'peer ms':>10s} "
          f"{'peer/rlpipe':>12s}  same result")
    ours = {}
    for batch in SHAPES:  # rlpipe first: torch's large buffers, once freed, slow later allocations down
        arrays = make_arrays(*batch)
        fn, out = workload(rlpipe, rlpipe.TensorDict, MultiStep, arrays, batch)
        number = calls(args.number, batch)
        plain = numpy_multistep(arrays, GAMMA, N_STEPS)
        if not same_as_numpy(out, plain):
            raise AssertionError(f"rlpipe and the NumPy reference disagree at {list(batch)}")
        reference = functools.partial(numpy_reference_call, arrays)
        mine, floor = float("inf"), float("inf")
        for _ in range(args.repeat):  # interleaved, so that both sides see the same load
            mine = min(mine, measure(fn, number, 1) / 1e3)
            floor = min(floor, measure(reference, number, 1) / 1e3)
        ours[batch] = (mine, floor, out)
    for batch in SHAPES:
        mine, floor, out = ours[batch]
        per_elem = mine * 1e6 / (batch[0] * batch[1])
        if torch is not None:
            start = time.perf_counter()
            peer_fn, peer_out = workload(torch, tensordict.TensorDict, PeerMultiStep, make_arrays(*batch), batch)
            slow = time.perf_counter() - start > 1.0  # seconds a call: best of 3 is enough
            peer = measure(peer_fn, calls(args.number, batch), min(args.repeat, 3) if slow else args.repeat) / 1e3
            check = agreement(out, peer_out, batch)
        else:
            peer, check = ANCHORS_MS.get(batch), "-"
        ratio = f"{peer / mine:11.1f}x" if peer else f"{'':>12s}"
        peer_ms = f"{peer:10.2f}" if peer else f"{'-':>10s}"
        print(f"{str(list(batch)):>12s} {mine:10.3f} {per_elem:8.2f} {floor:9.3f} {mine / floor:12.2f}x {peer_ms} "
              f"{ratio}  {check}")

    if args.device == "cuda":
        print()
        try:
            rlpipe.backends.cuda_backend()
        except RuntimeError as e:
            print(f"cuda: skipped, no usable GPU: {e}")
            return
        batch = CUDA_SHAPE
        arrays = make_arrays(*batch)
        number = max(calls(args.number, batch), 3)
        cpu_fn, cpu_out = workload(rlpipe, rlpipe.TensorDict, MultiStep, arrays, batch)
        gpu_fn, gpu_out = workload(rlpipe, rlpipe.TensorDict, MultiStep, arrays, batch, device="cuda")
        cpu = measure(cpu_fn, number, args.repeat) / 1e3
        gpu = measure(gpu_fn, number, args.repeat) / 1e3
        same = agreement(gpu_out, cpu_out, batch)
        elems = batch[0] * batch[1]
        print(f"rlpipe on cuda against cpu at {list(batch)} (cuda synchronized after each call)")
        print(f"{'batch':>12s} {'cpu ms':>10s} {'ns/elem':>8s} {'cuda ms':>10s} {'ns/elem':>8s} {'cpu/cuda':>9s}  "
              "same result")
        print(f"{str(list(batch)):>12s} {cpu:10.3f} {cpu * 1e6 / elems:8.2f} {gpu:10.3f} {gpu * 1e6 / elems:8.3f} "
              f"{cpu / gpu:8.1f}x  {same}")


if __name__ == "__main__":
    main()
