"""Throughput of 4 CartPole-v1 workers in subprocesses with random actions: rlpipe's
``ParallelEnv(4, GymEnv("CartPole-v1"))`` against Gymnasium's ``AsyncVectorEnv(4,
shared_memory=True)`` and torchrl 0.14.1's ``ParallelEnv`` (run by the peer interpreter, when there
is one) in its own process, in frames/s (4 frames per step). Gymnasium and rlpipe run in one
process, in alternation (best of ``--repeat`` rounds each), so that both see the same load.

rlpipe is measured four ways: its frame loop (``_step_frame``, and ``_continue_frame`` after a
done: what ``SyncDataCollector`` calls), ``SyncDataCollector`` with a random policy and with an
MLP 4-64-64-2 greedy policy (``mlp_policy.py``, categorical actions), and ``rollout`` (one
TensorDict per step); torchrl by ``rollout`` and its ``Collector`` (0.14's ``SyncDataCollector``)
with no policy (random) and with the same MLP. Gymnasium steps with the same precomputed random
actions as rlpipe's frame loop.

    PYTHONPATH=. python benchmarks/bench_parallel_env.py [--frames 20000] [--repeat 3]
"""
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import argparse
import json
import sys
import time

import numpy as np

from mlp_policy import mlp, numpy_weights
from peer_process import peer_python, run_side

WORKERS = 4
GYMNASIUM = "Gymnasium AsyncVectorEnv(4, shared_memory=True), step loop"
TORCHRL = "torchrl 0.14 ParallelEnv, rollout"
MLP_RLPIPE = "rlpipe ParallelEnv, SyncDataCollector, MLP policy"
MLP_TORCHRL = "torchrl 0.14 ParallelEnv, Collector, MLP policy"


def best_fps(runs, frames, repeat):
    """{name: the best frames/s over ``repeat`` rounds} of each ``run(steps)`` in ``runs`` ({name:
    run}, ``frames`` = steps * WORKERS), run in alternation so that all see the same load."""
    steps = frames // WORKERS
    rates = {name: 0.0 for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run(steps)
            rates[name] = max(rates[name], steps * WORKERS / (time.perf_counter() - start))
    return rates


def random_actions(steps):
    return np.random.default_rng(0).integers(0, 2, size=(steps, WORKERS))


def gymnasium_loop():
    """Gymnasium's step loop and its vector env (to close)."""
    import gymnasium as gym
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * WORKERS, shared_memory=True)
    envs.reset(seed=0)

    def run(steps):
        for action in random_actions(steps):
            envs.step(action)
    return run, envs


def local_side(frames, repeat):
    """Gymnasium and rlpipe, measured in alternation."""
    from rlpipe.collectors import RandomPolicy, SyncDataCollector
    from rlpipe.envs import GymEnv, ParallelEnv

    env = ParallelEnv(WORKERS, lambda: GymEnv("CartPole-v1"))
    env.set_seed(0)

    def frame_loop(steps):
        one_hot = np.eye(2, dtype=np.int64)[random_actions(steps)]
        env._reset_frame()
        for action in one_hot:
            next_obs, _, terminated, truncated = env._step_frame(action)
            done = terminated | truncated
            if done.any():
                env._continue_frame(next_obs, done)

    def collector_run(batched, policy):
        def collect(steps):
            collector = SyncDataCollector(batched, policy, frames_per_batch=100 * WORKERS, total_frames=steps * WORKERS)
            for _ in collector:
                pass
        return collect

    import rlpipe
    from rlpipe.tensordict import TensorDictModule
    categorical = ParallelEnv(WORKERS, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))
    categorical.set_seed(0)
    policy = TensorDictModule(mlp(rlpipe, numpy_weights()), in_keys=["observation"], out_keys=["action"])
    gym_loop, gym_envs = gymnasium_loop()
    try:
        return best_fps({GYMNASIUM: gym_loop, "rlpipe ParallelEnv, frame loop": frame_loop,
                         "rlpipe ParallelEnv, rollout": lambda s: env.rollout(s, break_when_any_done=False),
                         "rlpipe ParallelEnv, SyncDataCollector": collector_run(env, RandomPolicy(env.action_spec)),
                         MLP_RLPIPE: collector_run(categorical, policy)}, frames, repeat)
    finally:
        env.close(raise_if_closed=False)
        categorical.close(raise_if_closed=False)
        gym_envs.close()


def torchrl_side(frames, repeat):
    from torchrl.collectors import Collector  # (0.14's name for SyncDataCollector)
    from torchrl.envs import GymEnv, ParallelEnv

    import torch
    from tensordict.nn import TensorDictModule

    env = ParallelEnv(WORKERS, lambda: GymEnv("CartPole-v1"))
    env.set_seed(0)
    categorical = ParallelEnv(WORKERS, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))
    categorical.set_seed(0)
    policy = TensorDictModule(mlp(torch, numpy_weights()), in_keys=["observation"], out_keys=["action"])

    def collector_run(batched, policy):
        def collect(steps):
            collector = Collector(batched, policy, frames_per_batch=100 * WORKERS, total_frames=steps * WORKERS)
            with torch.no_grad():
                for _ in collector:
                    pass
        return collect

    try:
        return best_fps({TORCHRL: lambda s: env.rollout(s, break_when_any_done=False),
                         "torchrl 0.14 ParallelEnv, Collector": collector_run(env, None),
                         MLP_TORCHRL: collector_run(categorical, policy)}, frames, repeat)
    finally:
        env.close(raise_if_closed=False)
        categorical.close(raise_if_closed=False)


SIDES = {"local": local_side, "torchrl": torchrl_side}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--side", choices=sorted(SIDES))
    args = parser.parse_args()
    if args.side:
        print(json.dumps(SIDES[args.side](args.frames, args.repeat)))
        return
    figures = {}
    for side, python in (("local", sys.executable), ("torchrl", peer_python())):
        figures.update(run_side(__file__, python, side, (f"--frames={args.frames}", f"--repeat={args.repeat}")) or {})
    gym_fps, torchrl_fps = figures.get(GYMNASIUM), figures.get(TORCHRL)
    for name, fps in figures.items():
        ratios = []
        if gym_fps and name.startswith("rlpipe"):
            ratios.append(f"{fps / gym_fps:.2f}x Gymnasium")
        if torchrl_fps and name.startswith("rlpipe"):
            ratios.append(f"{fps / torchrl_fps:.1f}x torchrl rollout")
        if name == MLP_RLPIPE and figures.get(MLP_TORCHRL):
            ratios.append(f"{fps / figures[MLP_TORCHRL]:.1f}x torchrl's with the MLP")
        print(f"{name:55s} {fps:10,.0f} frames/s  {'  '.join(ratios)}")


if __name__ == "__main__":
    main()
