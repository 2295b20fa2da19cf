"""Throughput of 4 CartPole-v1 workers in subprocesses with random actions: rlpipe's
``ParallelEnv(4, GymEnv("CartPole-v1"))`` against Gymnasium's ``AsyncVectorEnv(4,
shared_memory=True)`` and torchrl 0.14.1's ``ParallelEnv`` (run by the peer interpreter, when there
is one), each side in its own process, in frames/s (4 frames per step).

rlpipe is measured three ways: its frame loop (``_step_frame``, and ``_continue_frame`` after a
done: what ``SyncDataCollector`` calls), ``SyncDataCollector`` with a random policy, and
``rollout`` (one TensorDict per step); torchrl by ``rollout`` and its ``Collector`` (0.14's ``SyncDataCollector``).
Gymnasium steps with the same precomputed random actions as rlpipe's frame loop.

    PYTHONPATH=. python benchmarks/bench_parallel_env.py [--frames 20000] [--repeat 3]
"""
import one_thread  # noqa: F401 - first: pins BLAS to one thread before NumPy loads

import argparse
import json
import sys
import time

import numpy as np

from peer_process import peer_python, run_side

WORKERS = 4


def best_fps(run, frames, repeat):
    """The best frames/s over ``repeat`` runs of ``run(steps)`` (``frames`` = steps * WORKERS)."""
    steps = frames // WORKERS
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(steps)
        rates.append(steps * WORKERS / (time.perf_counter() - start))
    return max(rates)


def random_actions(steps):
    return np.random.default_rng(0).integers(0, 2, size=(steps, WORKERS))


def gymnasium_side(frames, repeat):
    import gymnasium as gym
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * WORKERS, shared_memory=True)
    envs.reset(seed=0)

    def run(steps):
        for action in random_actions(steps):
            envs.step(action)
    try:
        return {"Gymnasium AsyncVectorEnv(4, shared_memory=True), step loop": best_fps(run, frames, repeat)}
    finally:
        envs.close()


def rlpipe_side(frames, repeat):
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

    def collect(steps):
        collector = SyncDataCollector(env, RandomPolicy(env.action_spec), frames_per_batch=100 * WORKERS,
                                      total_frames=steps * WORKERS)
        for _ in collector:
            pass

    try:
        return {"rlpipe ParallelEnv, frame loop": best_fps(frame_loop, frames, repeat),
                "rlpipe ParallelEnv, rollout": best_fps(lambda s: env.rollout(s, break_when_any_done=False),
                                                        frames, repeat),
                "rlpipe ParallelEnv, SyncDataCollector": best_fps(collect, frames, repeat)}
    finally:
        env.close(raise_if_closed=False)


def torchrl_side(frames, repeat):
    from torchrl.collectors import Collector  # (0.14's name for SyncDataCollector)
    from torchrl.envs import GymEnv, ParallelEnv

    env = ParallelEnv(WORKERS, lambda: GymEnv("CartPole-v1"))
    env.set_seed(0)

    def collect(steps):
        collector = Collector(env, None, frames_per_batch=100 * WORKERS, total_frames=steps * WORKERS)
        for _ in collector:
            pass

    try:
        return {"torchrl 0.14 ParallelEnv, rollout": best_fps(lambda s: env.rollout(s, break_when_any_done=False),
                                                              frames, repeat),
                "torchrl 0.14 ParallelEnv, Collector": best_fps(collect, frames, repeat)}
    finally:
        env.close(raise_if_closed=False)


SIDES = {"gymnasium": gymnasium_side, "rlpipe": rlpipe_side, "torchrl": torchrl_side}


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
    for side, python in (("gymnasium", sys.executable), ("rlpipe", sys.executable), ("torchrl", peer_python())):
        figures.update(run_side(__file__, python, side, (f"--frames={args.frames}", f"--repeat={args.repeat}")) or {})
    gym_fps = figures.get("Gymnasium AsyncVectorEnv(4, shared_memory=True), step loop")
    torchrl_fps = figures.get("torchrl 0.14 ParallelEnv, rollout")
    for name, fps in figures.items():
        ratios = []
        if gym_fps and name.startswith("rlpipe"):
            ratios.append(f"{fps / gym_fps:.2f}x Gymnasium")
        if torchrl_fps and name.startswith("rlpipe"):
            ratios.append(f"{fps / torchrl_fps:.1f}x torchrl rollout")
        print(f"{name:55s} {fps:10,.0f} frames/s  {'  '.join(ratios)}")


if __name__ == "__main__":
    main()
