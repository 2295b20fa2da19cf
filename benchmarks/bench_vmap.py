"""An ensemble of 10 critics (MLP 4-64-64-1) on a batch of 256 observations: ``vmap`` over their
stacked parameters (``functional_call`` on one base module) against a Python loop over the critics,
forward with no grad and forward + backward; prints CPU ms per call and the ratio vmap / loop
(the goal: 0.5x or less). Both do the same BLAS work (ten 256x64 @ 64x64 products per layer), and
the loop's no-grad forward already runs on raw arrays, so the ratio is bounded by Python overhead:
on the 2-core machine rlpipe measured 1.2x (no grad) and 0.8x (with backward); torch 2.13's own
vmap against its own loop, same script shape, measured 2.0x and 1.06x there.

    python3 benchmarks/bench_vmap.py [--repeat 20]
"""
from one_thread import import_peer  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import argparse
import time

import rlpipe
from rlpipe import nn
from rlpipe.func import functional_call, vmap
from rlpipe.tensordict import TensorDict

CRITICS, BATCH = 10, 256


def critic():
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def cpu_ms(run, repeat):
    """The best CPU time of one call of ``run`` over ``repeat`` calls, in ms."""
    run()
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat
    rlpipe.manual_seed(0)
    critics, base = [critic() for _ in range(CRITICS)], critic()
    params = TensorDict.from_modules(*critics)
    obs = rlpipe.randn(BATCH, 4)
    ensemble = vmap(lambda p, x: functional_call(base, p, (x,)), (0, None))

    def loop_forward():
        with rlpipe.no_grad():
            return rlpipe.stack([m(obs) for m in critics])

    def vmap_forward():
        with rlpipe.no_grad():
            return ensemble(params, obs)

    def loop_backward():
        rlpipe.stack([m(obs) for m in critics]).pow(2).mean().backward()

    def vmap_backward():
        ensemble(params, obs).pow(2).mean().backward()

    assert rlpipe.allclose(loop_forward(), vmap_forward(), atol=1e-5)
    print(f"{CRITICS} critics (MLP 4-64-64-1), batch {BATCH}: CPU ms per call, best of {repeat}")
    for name, loop, mapped in (("forward, no grad", loop_forward, vmap_forward),
                               ("forward + backward", loop_backward, vmap_backward)):
        t_loop, t_vmap = cpu_ms(loop, repeat), cpu_ms(mapped, repeat)
        print(f"  {name:20s} loop {t_loop:7.3f}  vmap {t_vmap:7.3f}  ratio vmap/loop {t_vmap / t_loop:.2f}x")


if __name__ == "__main__":
    main()
