"""Collector throughput on TransformedEnv(GymEnv("CartPole-v1"), StepCounter()), as DESIGN.md's torchrl
anchors were measured, side by side with a bare Gymnasium loop (and torchrl 0.14.1 when it is
importable): frames/s for a random policy, an MLP 4-64-64-2 policy, and 8 vectorized envs.

Then the seed's example (DESIGN.md): the same env and random policy, ``frames_per_batch=10``, with
``MultiStep(n_steps=4, gamma=0.99)`` as postproc, against the same collector without postproc, and
with the same math in plain NumPy as postproc (``bench_multistep.numpy_multistep`` on the batch's
arrays, nothing written back: the floor for any implementation on arrays); the three run in
alternation (``--seed-rounds`` rounds, best of each), so that all see the same load, and are shown
in frames/s and in frames per CPU-second (which the time other processes hold the cores does not
count).

    python benchmarks/bench_collector.py [--frames 20000] [--repeat 3] [--seed-rounds 7]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import time

import gymnasium as gym

import rlpipe
from rlpipe.collectors import RandomPolicy, SyncDataCollector
from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
from rlpipe.postprocs import MultiStep

from bench_multistep import numpy_multistep  # the script's folder is on sys.path

torch, torchrl = import_peer("torchrl")

# torchrl 0.14.1 and bare-loop figures from DESIGN.md, used when torchrl is not importable
ANCHORS = {"bare Gymnasium loop": 155_000, "collector, random policy": 4_100, "collector, MLP policy": 3_000}


def best_fps(run, frames, repeat):
    """The best frames/s over ``repeat`` runs of ``run(frames)``."""
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(frames)
        rates.append(frames / (time.perf_counter() - start))
    return max(rates)


def bare_loop(frames):
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    sample = env.action_space.sample
    for _ in range(frames):
        _, _, terminated, truncated, _ = env.step(sample())
        if terminated or truncated:
            env.reset()


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))


def rlpipe_collect(policy_kind, num_envs=None):
    def run(frames, fpb=1000):
        env = TransformedEnv(GymEnv("CartPole-v1", num_envs=num_envs), StepCounter())  # as the torchrl anchor
        env.set_seed(0)
        if policy_kind == "random":
            policy = RandomPolicy(env.action_spec)
        else:
            net = mlp(rlpipe)

            def policy(td):  # logits -> one-hot greedy action, as an MLP policy would
                logits = net(td.get("observation"))
                td.set("action", rlpipe.nn.functional.one_hot(logits.argmax(-1), 2))
                return td
        collector = SyncDataCollector(env, policy, frames_per_batch=fpb, total_frames=frames)
        for _ in collector:
            pass
        collector.shutdown()
    return run


def numpy_postproc(td):
    """The floor for any postproc on arrays: ``bench_multistep.numpy_multistep`` (the same math in
    plain NumPy) on the batch's arrays, its result dropped (no TensorDict built or written)."""
    numpy_multistep({"next": {key: value.numpy() for key, value in td.get("next").items()}}, 0.99, 4)
    return td


def seed_example(postproc):
    """The seed's example: frames_per_batch=10, a random policy, and ``postproc``: None,
    "multistep" (``MultiStep(n_steps=4, gamma=0.99)``) or "numpy" (``numpy_postproc``)."""
    post = {None: None, "numpy": numpy_postproc}.get(postproc) if postproc != "multistep" else \
        MultiStep(n_steps=4, gamma=0.99)

    def run(frames):
        env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
        env.set_seed(0)
        collector = SyncDataCollector(env, policy=RandomPolicy(env.action_spec), frames_per_batch=10,
                                      total_frames=frames, postproc=post)
        for _ in collector:
            pass
        collector.shutdown()
    return run


def seed_example_rows(frames, rounds):
    """{postproc: [frames/s, frames per CPU-second]} for no postproc, MultiStep and the NumPy floor:
    the best of ``rounds`` alternated runs of each (CPU time, unlike wall time, does not count the
    time other processes hold the cores; both are shown)."""
    best = {kind: [0.0, 0.0] for kind in (None, "multistep", "numpy")}
    for _ in range(rounds):
        for kind, row in best.items():
            run = seed_example(kind)
            wall, cpu = time.perf_counter(), time.process_time()
            run(frames)
            row[0] = max(row[0], frames / (time.perf_counter() - wall))
            row[1] = max(row[1], frames / (time.process_time() - cpu))
    return best


def torchrl_collect(policy_kind):
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector as TorchrlCollector, RandomPolicy as TorchrlRandom
    from torchrl.envs import GymEnv as TorchrlGymEnv, StepCounter as TorchrlStepCounter
    from torchrl.envs import TransformedEnv as TorchrlTransformedEnv

    def run(frames, fpb=1000):
        env = TorchrlTransformedEnv(TorchrlGymEnv("CartPole-v1"), TorchrlStepCounter())
        env.set_seed(0)
        if policy_kind == "random":
            policy = TorchrlRandom(env.action_spec)
        else:
            net = mlp(torch)

            class Greedy(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = net

                def forward(self, obs):
                    return torch.nn.functional.one_hot(self.net(obs).argmax(-1), 2)
            policy = TensorDictModule(Greedy(), in_keys=["observation"], out_keys=["action"])
        collector = TorchrlCollector(env, policy, frames_per_batch=fpb, total_frames=frames)
        for _ in collector:
            pass
        collector.shutdown()
    return run


def main():
    p = argparse.ArgumentParser(description="collector throughput")
    p.add_argument("--frames", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed-rounds", type=int, default=7, help="alternated runs of the seed's example (0: skip)")
    args = p.parse_args()
    rlpipe.manual_seed(0)

    bare = best_fps(bare_loop, args.frames, args.repeat)
    rows = [("bare Gymnasium loop", bare, None),
            ("collector, random policy", best_fps(rlpipe_collect("random"), args.frames, args.repeat),
             best_fps(torchrl_collect("random"), args.frames // 4, 1) if torch
             else ANCHORS["collector, random policy"]),
            ("collector, MLP policy", best_fps(rlpipe_collect("mlp"), args.frames, args.repeat),
             best_fps(torchrl_collect("mlp"), args.frames // 4, 1) if torch else ANCHORS["collector, MLP policy"]),
            ("collector, random policy, 8 vectorized envs",
             best_fps(rlpipe_collect("random", num_envs=8), args.frames, args.repeat), None)]
    print(f"peer: {'torchrl ' + torchrl.__version__ + ' (measured now)' if torch else 'DESIGN.md anchors'}")
    print(f"{'workload':46s} {'rlpipe fps':>12s} {'% of bare':>10s} {'peer fps':>10s} {'rlpipe/peer':>12s}")
    for name, fps, peer in rows:
        ratio = f"{fps / peer:11.1f}x" if peer else ""
        print(f"{name:46s} {fps:12,.0f} {100 * fps / bare:9.1f}% {peer if peer else float('nan'):10,.0f} {ratio}")
    if args.seed_rounds:
        best = seed_example_rows(args.frames // 2, args.seed_rounds)
        plain, multistep, floor = best[None], best["multistep"], best["numpy"]
        print()
        print(f"the seed's example (CartPole, random policy, frames_per_batch=10), best of {args.seed_rounds} "
              "alternated runs (goal: with MultiStep >= 80% of without); NumPy floor: the same math in plain "
              "NumPy as postproc, nothing written back")
        print(f"{'':22s} {'without postproc':>17s} {'MultiStep(0.99, 4)':>19s} {'with / without':>15s} "
              f"{'NumPy floor':>12s} {'floor / without':>16s}")
        for i, unit in enumerate(("frames/s", "frames per CPU-second")):
            print(f"{unit:22s} {plain[i]:17,.0f} {multistep[i]:19,.0f} {100 * multistep[i] / plain[i]:14.1f}% "
                  f"{floor[i]:12,.0f} {100 * floor[i] / plain[i]:15.1f}%")

if __name__ == "__main__":
    main()
