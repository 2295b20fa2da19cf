"""GAE speed: rlpipe's ``generalized_advantage_estimate`` against torchrl's
``vec_generalized_advantage_estimate``, side by side when both import.

Inputs [B, T, 1] float32 (values, next values, rewards) with 1% of the steps done and half of those
terminated, at [32, 1000] and [256, 1000]; both libraries get the same NumPy-built values and the
script checks they agree. One thread. Either library may be missing: the script times what imports
(run it once with rlpipe's environment and once with torchrl's, with ``PYTHONPATH`` pointing at the
checkout when that environment has rlpipe's dependencies, to get both columns):

    python benchmarks/bench_value.py [--repeat 7] [--number 10] [--device cuda]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import timeit

import numpy as np

torch, torchrl_functional = import_peer("torchrl.objectives.value.functional")
try:
    import rlpipe
    from rlpipe.objectives.value.functional import generalized_advantage_estimate
except ImportError:  # a peer-only environment
    rlpipe = None

SHAPES = [(32, 1000), (256, 1000)]
GAMMA, LMBDA = 0.99, 0.95


def make_arrays(B, T, seed=0):
    rng = np.random.default_rng(seed)
    v, nv, r = (rng.standard_normal((B, T, 1)).astype(np.float32) for _ in range(3))
    done = rng.random((B, T, 1)) < 0.01
    return v, nv, r, done, done & (rng.random((B, T, 1)) < 0.5)


def best_ms(fn, number, repeat):
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"{'shape':>12} {'rlpipe ms':>10} {'torchrl ms':>11} {'speedup':>8}")
    for B, T in SHAPES:
        arrays = make_arrays(B, T)
        ours = peer = None
        if rlpipe is not None:
            inputs = [rlpipe.tensor(a, device=args.device) for a in arrays]

            def run(inputs=inputs):
                out = generalized_advantage_estimate(GAMMA, LMBDA, *inputs)
                if args.device != "cpu":
                    rlpipe.cuda.synchronize()
                return out
            ours = best_ms(run, args.number, args.repeat)
            ours_adv = run()[0].cpu().numpy()
        if torchrl_functional is not None:
            tensors = [torch.tensor(a) for a in arrays]
            peer = best_ms(lambda t=tensors: torchrl_functional.vec_generalized_advantage_estimate(GAMMA, LMBDA, *t),
                           args.number, args.repeat)
            if rlpipe is not None:
                peer_adv = torchrl_functional.vec_generalized_advantage_estimate(GAMMA, LMBDA, *tensors)[0].numpy()
                assert np.allclose(ours_adv, peer_adv, rtol=1e-4, atol=1e-4), "rlpipe and torchrl disagree"
        ratio = f"{peer / ours:7.1f}x" if ours and peer else "      -"
        print(f"{str([B, T]):>12} {ours if ours else float('nan'):10.3f} {peer if peer else float('nan'):11.3f} "
              f"{ratio}")


if __name__ == "__main__":
    main()
