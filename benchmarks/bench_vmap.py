"""An ensemble of 10 critics (MLP 4-64-64-1) on a batch of 256 observations: ``vmap`` over their
stacked parameters (``functional_call`` on one base module) against a Python loop over the critics,
forward with no grad and forward + backward; prints CPU ms per call and the ratio vmap / loop
(the goal: 0.5x or less). Under vmap, functional_call runs each critic (a plain MLP) as one
EnsembleMLP node for all members: one stacked matmul per layer (the shared first input one GEMM
against all weights side by side, the hidden bias against a column of ones it adds), ReLU in
place, a backward in NumPy alone, and no node at all with grad off; the loop does the same BLAS
work critic by critic.

Where the time goes (2-core machine, one BLAS thread, OpenBLAS unpinned): the node's own NumPy
work is about 0.18 ms forward and 0.37 ms backward (with its autograd walk), most of it the three
10 x 256x64x64 products (forward, weight gradient, input gradient; about 0.10-0.12 ms each, 0.18 ms
with the Haswell pin); the rest is ReLU and its mask (each mask multiply, a bool cast in NumPy,
about 0.035 ms), the output layer's outer product and the bias gradients. vmap and
functional_call around the node add about 0.04 ms of Python, half of it vmap's flattening and
rebuilding of the parameters' TensorDict (four nested TensorDicts); a plain MLP given exactly its
parameters runs as the node straight from them, with nothing swapped into the module. Without
grad the loop already runs on raw arrays, so vmap saves only the per-critic Python. Measured (eight
runs each, alternating, load below 2, 2026-11-29): vmap/loop with backward 0.45-0.46x unpinned,
0.54-0.56x pinned (the previous code: 0.50-0.52x and 0.59x; before the fused node 0.62-0.63x); no
grad 0.65-0.68x, 0.76-0.78x; SACLoss with two critics 1.05-1.07x, 1.05-1.09x its deactivate_vmap
loop. torch 2.13's own vmap against its own loop, same script shape, measured 2.0x and 1.06x on this
machine.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python3 benchmarks/bench_vmap.py
    PYTHONPATH=. python3 benchmarks/bench_vmap.py [--repeat 10]
"""
from one_thread import import_peer  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import argparse
import time

import warnings

import rlpipe
from rlpipe import nn
from rlpipe.data import Bounded
from rlpipe.func import functional_call, vmap
from rlpipe.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
from rlpipe.objectives import SACLoss
from rlpipe.tensordict import TensorDict
from rlpipe.tensordict.nn import TensorDictModule

CRITICS, BATCH = 10, 256


def critic():
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def cpu_ms(runs, repeat, block=5):
    """The best CPU time of one call of each of ``runs``, in ms, over ``repeat`` rounds that run each
    ``block`` times in turn: both see the same load on a busy machine, each with warm caches."""
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, run in enumerate(runs):
            for _ in range(block):
                start = time.process_time()
                run()
                best[i] = min(best[i], time.process_time() - start)
    return [b * 1e3 for b in best]


def sac_step(deactivate_vmap):
    """One SACLoss forward + backward (actor and two critics MLP 64-64, 8 observations, 2 actions,
    batch 256) with its critics under vmap or one after the other."""
    rlpipe.manual_seed(0)
    obs, act = 8, 2
    net = nn.Sequential(MLP(in_features=obs, out_features=2 * act, num_cells=[64, 64]), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               spec=Bounded(-1.0, 1.0, (act,)), return_log_prob=True)
    critic = ValueOperator(MLP(in_features=obs + act, out_features=1, num_cells=[64, 64]),
                           in_keys=["observation", "action"])
    loss = SACLoss(actor, critic, deactivate_vmap=deactivate_vmap)
    data = TensorDict({"observation": rlpipe.randn(BATCH, obs), "action": rlpipe.rand(BATCH, act) * 2 - 1,
                       ("next", "observation"): rlpipe.randn(BATCH, obs), ("next", "reward"): rlpipe.randn(BATCH, 1),
                       ("next", "done"): rlpipe.zeros(BATCH, 1, dtype=rlpipe.bool),
                       ("next", "terminated"): rlpipe.zeros(BATCH, 1, dtype=rlpipe.bool)}, batch_size=[BATCH])

    def step():
        out = loss(data.clone())
        (out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]).backward()
        loss.zero_grad()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
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
    print(f"{CRITICS} critics (MLP 4-64-64-1), batch {BATCH}: CPU ms per call, best of {repeat} x 5 alternating")
    for name, loop, mapped in (("forward, no grad", loop_forward, vmap_forward),
                               ("forward + backward", loop_backward, vmap_backward)):
        t_loop, t_vmap = cpu_ms((loop, mapped), repeat)
        print(f"  {name:20s} loop {t_loop:7.3f}  vmap {t_vmap:7.3f}  ratio vmap/loop {t_vmap / t_loop:.2f}x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (no target updater: the target critics stay as they are)
        t_loop, t_vmap = cpu_ms((sac_step(True), sac_step(False)), repeat)
    print(f"SACLoss, 2 critics MLP 64-64, batch {BATCH}, forward + backward: loop (deactivate_vmap) {t_loop:.3f}  "
          f"vmap {t_vmap:.3f}  ratio {t_vmap / t_loop:.2f}x")


if __name__ == "__main__":
    main()
