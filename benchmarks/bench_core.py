"""Tensor-core speed, side by side with PyTorch when it is importable.

Measures: per-op overhead on small tensors without grad, an MLP 4-64-64-2 forward+backward at
batch 256 (and with an Adam update), and a batch-1 MLP forward without grad. Both libraries run
on one thread. Run from an environment that has torch to get the ratios:

    python benchmarks/bench_core.py [--repeat 7] [--number 2000]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import timeit

import numpy as np

import rlpipe

torch, = import_peer()

# torch 2.13 CPU figures from DESIGN.md, used when torch is not importable here
ANCHORS_US = {"mlp train step (fwd+bwd+adam), batch 256": 369.0, "mlp forward, batch 1, no grad": 18.0,
              "nn.Sequential tanh MLP forward, batch 1, no grad": 18.0,
              "nn + optim.Adam train step (fwd, loss, bwd, step), batch 256": 369.0}


def measure(fn, number, repeat):
    """Microseconds per call: the best of ``repeat`` runs of ``number`` calls (the least disturbed
    by other processes on a shared machine)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def mlp_params(lib, sizes=(4, 64, 64, 2), seed=0):
    """Weights shaped like nn.Linear's ([out, in]), identical in both libraries."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        bound = 1 / np.sqrt(n_in)
        for shape in ((n_out, n_in), (n_out,)):
            params.append(lib.tensor(rng.uniform(-bound, bound, shape).astype(np.float32), requires_grad=True))
    return params


def mlp(lib, params, x):
    """Three linear layers with ReLUs, through each library's functional linear (nn.Linear's op)."""
    linear = torch.nn.functional.linear if lib is torch else rlpipe.primitives.linear
    w1, b1, w2, b2, w3, b3 = params
    h = linear(x, w1, b1).relu()
    h = linear(h, w2, b2).relu()
    return linear(h, w3, b3)


class RlpipeAdam:
    """Adam through the fused update step of ``rlpipe.kernels`` (what rlpipe.optim.Adam will call)."""

    def __init__(self, params, lr=1e-3):
        self.params, self.lr, self.t = params, lr, 0
        self.state = [(np.zeros_like(p._data), np.zeros_like(p._data)) for p in params]
        self.adam_step = rlpipe.kernels.get("adam_step", rlpipe.backends.cpu)

    def step(self):
        self.t += 1
        for p, (m, v) in zip(self.params, self.state):
            self.adam_step(p._data, p.grad._data, m, v, None, self.t, self.lr, 0.9, 0.999, 1e-8,
                           0.0, False, False, False)

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def sequential_mlp(lib, seed=0):
    """Sequential(Linear(4,64), Tanh(), Linear(64,64), Tanh(), Linear(64,2)) with the same weights
    in both libraries."""
    nn = lib.nn
    net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in net.parameters():
            p.copy_(lib.tensor(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    return net


def module_workloads(lib):
    """The nn-level workloads: a Sequential policy at batch 1 and a full Adam training step."""
    rng = np.random.default_rng(2)
    net = sequential_mlp(lib)
    opt = lib.optim.Adam(net.parameters(), lr=1e-3)
    x1 = lib.tensor(rng.standard_normal((1, 4)).astype(np.float32))
    x256 = lib.tensor(rng.standard_normal((256, 4)).astype(np.float32))
    y256 = lib.tensor(rng.standard_normal((256, 2)).astype(np.float32))
    mse = lib.nn.functional.mse_loss

    def policy_b1():
        with lib.no_grad():
            net(x1)

    def adam_step():
        opt.zero_grad()
        mse(net(x256), y256).backward()
        opt.step()

    return {"nn.Sequential tanh MLP forward, batch 1, no grad": policy_b1,
            "nn + optim.Adam train step (fwd, loss, bwd, step), batch 256": adam_step}


def workloads(lib, number):
    """name -> callable for one library (rlpipe or torch)."""
    rng = np.random.default_rng(1)
    small = lib.tensor(rng.standard_normal((4, 4)).astype(np.float32))
    params = mlp_params(lib)
    x256 = lib.tensor(rng.standard_normal((256, 4)).astype(np.float32))
    y256 = lib.tensor(rng.standard_normal((256, 2)).astype(np.float32))
    x1 = lib.tensor(rng.standard_normal((1, 4)).astype(np.float32))
    opt = torch.optim.Adam(params, lr=1e-3) if lib is torch else RlpipeAdam(params)

    def fwd_bwd():
        for p in params:
            p.grad = None
        ((mlp(lib, params, x256) - y256) ** 2).mean().backward()

    def train_step():
        opt.zero_grad()
        ((mlp(lib, params, x256) - y256) ** 2).mean().backward()
        opt.step()

    def forward_b1():
        with lib.no_grad():
            mlp(lib, params, x1)

    def no_grad(fn):
        def run():
            with lib.no_grad():
                fn()
        return run

    return {
        "add (4x4, no grad)": no_grad(lambda: small + small),
        "mul by scalar (4x4, no grad)": no_grad(lambda: small * 2.0),
        "relu (4x4, no grad)": no_grad(lambda: small.relu()),
        "sum (4x4, no grad)": no_grad(lambda: small.sum()),
        "index row (4x4, no grad)": no_grad(lambda: small[1]),
        "mlp forward+backward, batch 256": fwd_bwd,
        "mlp train step (fwd+bwd+adam), batch 256": train_step,
        "mlp forward, batch 1, no grad": forward_b1,
    }


def main():
    p = argparse.ArgumentParser(description="rlpipe tensor-core benchmark")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=2000)
    args = p.parse_args()

    ours = {**workloads(rlpipe, args.number), **module_workloads(rlpipe)}
    theirs = {**workloads(torch, args.number), **module_workloads(torch)} if torch is not None else {}
    a = np.ones((4, 4), np.float32)
    print(f"raw NumPy 4x4 add: {measure(lambda: a + a, args.number, args.repeat):.2f} us")
    peer = f"torch {torch.__version__} (measured now)" if torch else "DESIGN.md anchors (torch not importable)"
    print(f"peer: {peer}")
    print_in_process(ours, theirs, lambda name: args.number if "batch 256" not in name else max(args.number // 10, 50),
                     args.repeat, ".2f", ANCHORS_US)


def print_in_process(ours, theirs, number_for, repeat, number_format, fallback=None):
    """Measures each of ``ours`` and the same name in ``theirs`` (``number_for(name)`` calls, best of ``repeat``)
    in this process and prints them side by side with the peer/rlpipe ratio; a name ``theirs`` lacks takes
    its peer figure from ``fallback``."""
    print(f"{'workload':62s} {'rlpipe us':>10s} {'peer us':>10s} {'peer/rlpipe':>12s}")
    for name, fn in ours.items():
        number = number_for(name)
        mine = measure(fn, number, repeat)
        peer = measure(theirs[name], number, repeat) if name in theirs else (fallback or {}).get(name)
        ratio = f"{peer / mine:11.2f}x" if peer else f"{'':>12s}"
        print(f"{name:62s} {mine:10{number_format}} {peer if peer else float('nan'):10{number_format}} {ratio}")


if __name__ == "__main__":
    main()
