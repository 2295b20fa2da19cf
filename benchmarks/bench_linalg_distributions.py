"""rlpipe.linalg and the multivariate distributions beside torch 2.13, per call with gradients (forward and
backward): a PPO policy's MultivariateNormal with a diagonal covariance (batch 2048, 6 actions: log_prob, entropy,
backward), and batched factorizations of small float64 matrices (64 of 8x8). The torch side runs in its own
process, in an interpreter that has torch:

    python3 benchmarks/bench_linalg_distributions.py [--repeat 5] [--number 50] [--peer-python PATH]

``--side rlpipe`` or ``--side torch`` measures one library in this process and prints JSON.
"""
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import numpy as np
from peer_process import side_by_side_main

BATCH, ACTIONS, MATRICES, SIZE = 2048, 6, 64, 8


def workloads(lib, number):
    """name -> (a callable doing one forward and backward, ``number`` calls per timing), for rlpipe or torch
    (same names)."""
    rng = np.random.default_rng(0)
    loc = lib.zeros(BATCH, ACTIONS, requires_grad=True)
    cov = lib.diag(lib.full((ACTIONS,), 0.36))
    actions = lib.tensor(rng.standard_normal((BATCH, ACTIONS)).astype(np.float32))
    a = rng.standard_normal((MATRICES, SIZE, SIZE))
    spd = lib.tensor(a @ a.transpose(0, 2, 1) + SIZE * np.eye(SIZE), requires_grad=True)
    rhs = lib.tensor(rng.standard_normal((MATRICES, SIZE, 2)))

    def ppo_mvn():
        dist = lib.distributions.MultivariateNormal(loc, cov)
        (dist.log_prob(actions).sum() + dist.entropy().sum()).backward()

    def backward(fn):
        return lambda: fn().sum().backward()
    named = {
        "PPO MultivariateNormal log_prob+entropy": ppo_mvn,
        "linalg.cholesky 64x8x8": backward(lambda: lib.linalg.cholesky(spd)),
        "linalg.solve 64x8x8, 2 rhs": backward(lambda: lib.linalg.solve(spd, rhs)),
        "linalg.inv 64x8x8": backward(lambda: lib.linalg.inv(spd)),
        "linalg.slogdet 64x8x8": backward(lambda: lib.linalg.slogdet(spd).logabsdet),
        "linalg.eigh 64x8x8 (values)": backward(lambda: lib.linalg.eigvalsh(spd)),
    }
    return {name: (fn, number) for name, fn in named.items()}


def main():
    side_by_side_main(__file__, workloads, "linalg and distributions, rlpipe vs torch",
                      "forward + backward, us per call (CPU time)", number_format="9.1f", number=50)


if __name__ == "__main__":
    main()
