"""Multi-process collection throughput on Pendulum-v1 with an MLP policy (3-64-64-1, Tanh between
layers and a final Tanh that keeps actions inside Pendulum's [-2, 2] bounds), side by side:

- ``SyncDataCollector`` on one env in this process (the baseline of the ratios);
- ``RayCollector`` with 2 actors, ``sync=True`` (needs ``pip install "rlpipe[ray]"``);
- the same with ``sync=False`` (each actor's batch yielded alone, first ready first);
- ``MultiSyncDataCollector`` and ``MultiaSyncDataCollector`` with 2 worker processes;
- a hand-written Gymnasium ``AsyncVectorEnv`` loop with 2 envs: one batched policy forward per step,
  the yardstick for "two env processes, one policy".

Frames/s counts the collection loop only; the start-up (actors, worker processes) is printed apart.
A workload is one entry of ``WORKLOADS`` (name -> function(frames, frames_per_batch) returning
``(frames, loop_seconds, startup_seconds)``): add one there.

    python benchmarks/bench_distributed.py [--frames 20000] [--frames-per-batch 1000] [--repeat 2]
"""
import one_thread  # noqa: F401  first: pins BLAS to one thread before NumPy loads (Ray's workers inherit it)

import argparse
import time

import gymnasium as gym
import numpy as np

import rlpipe
from rlpipe import nn
from rlpipe.collectors import MultiaSyncDataCollector, MultiSyncDataCollector, SyncDataCollector
from rlpipe.envs import GymEnv

try:
    import ray
except ImportError:
    ray = None

ENV_ID = "Pendulum-v1"
NUM_WORKERS = 2


def make_env():
    return GymEnv(ENV_ID)


def make_policy():
    """The same MLP for every workload (seeded, so every row runs the same weights)."""
    rlpipe.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1), nn.Tanh())


def run_collector(build, frames):
    """Builds a collector (timed as start-up), drains it (timed as the loop), shuts it down."""
    start = time.perf_counter()
    collector = build()
    ready = time.perf_counter()
    collected = 0
    for batch in collector:
        collected += batch.numel()
    end = time.perf_counter()
    collector.shutdown()
    return collected, end - ready, ready - start


def sync_collector(frames, fpb):
    return run_collector(lambda: SyncDataCollector(make_env(), make_policy(), frames_per_batch=fpb,
                                                   total_frames=frames), frames)


def ray_collector(frames, fpb):
    from rlpipe.collectors.distributed import RayCollector
    return run_collector(lambda: RayCollector(make_env, make_policy(), num_collectors=NUM_WORKERS,
                                              frames_per_batch=fpb, total_frames=frames, sync=True), frames)


def ray_collector_async(frames, fpb):
    from rlpipe.collectors.distributed import RayCollector
    return run_collector(lambda: RayCollector(make_env, make_policy(), num_collectors=NUM_WORKERS,
                                              frames_per_batch=fpb, total_frames=frames, sync=False), frames)


def multi_sync_collector(frames, fpb):
    """torchrl's signature: one env constructor per worker."""
    return run_collector(lambda: MultiSyncDataCollector([make_env] * NUM_WORKERS, make_policy(),
                                                        frames_per_batch=fpb, total_frames=frames), frames)


def multi_async_collector(frames, fpb):
    return run_collector(lambda: MultiaSyncDataCollector([make_env] * NUM_WORKERS, make_policy(),
                                                         frames_per_batch=fpb // NUM_WORKERS, total_frames=frames),
                         frames)


def async_vector_loop(frames, fpb):
    """Gymnasium's AsyncVectorEnv (one subprocess per env), the policy run on the batched observation."""
    start = time.perf_counter()
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make(ENV_ID)] * NUM_WORKERS)
    net = make_policy()
    obs, _ = envs.reset(seed=0)
    ready = time.perf_counter()
    steps = -(-frames // NUM_WORKERS)
    with rlpipe.no_grad():
        for _ in range(steps):
            action = net(rlpipe.from_numpy(np.asarray(obs, np.float32))).numpy()
            obs, _, _, _, _ = envs.step(action)
    end = time.perf_counter()
    envs.close()
    return steps * NUM_WORKERS, end - ready, ready - start


WORKLOADS = {
    "SyncDataCollector, 1 env": sync_collector,
    f"RayCollector, {NUM_WORKERS} actors, sync=True": ray_collector if ray is not None else None,
    f"RayCollector, {NUM_WORKERS} actors, sync=False": ray_collector_async if ray is not None else None,
    f"MultiSyncDataCollector, {NUM_WORKERS} workers": multi_sync_collector,
    f"MultiaSyncDataCollector, {NUM_WORKERS} workers": multi_async_collector,
    f"Gymnasium AsyncVectorEnv loop, {NUM_WORKERS} envs": async_vector_loop,
}
BASELINE = "SyncDataCollector, 1 env"
YARDSTICK = f"Gymnasium AsyncVectorEnv loop, {NUM_WORKERS} envs"


def main():
    p = argparse.ArgumentParser(description="multi-process collection throughput")
    p.add_argument("--frames", type=int, default=20_000)
    p.add_argument("--frames-per-batch", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=2, help="best of this many runs per workload")
    args = p.parse_args()
    if ray is not None and not ray.is_initialized():
        ray.init(num_cpus=NUM_WORKERS, include_dashboard=False, log_to_driver=False)

    results = {}
    for name, workload in WORKLOADS.items():
        if workload is None:
            results[name] = None
            continue
        best = None
        for _ in range(args.repeat):
            frames, loop_s, startup_s = workload(args.frames, args.frames_per_batch)
            if best is None or frames / loop_s > best[0]:
                best = (frames / loop_s, startup_s, frames)
        results[name] = best

    print(f"{ENV_ID}, MLP 3-64-64-1 policy, {args.frames} frames, frames_per_batch={args.frames_per_batch}, "
          f"best of {args.repeat}")
    print(f"{'workload':42s} {'frames/s':>10s} {'start-up s':>11s} {'vs Sync':>8s} {'vs AsyncVec':>12s}")
    base = results.get(BASELINE)
    yard = results.get(YARDSTICK)
    for name, best in results.items():
        if best is None:
            print(f"{name:42s} {'(not available)':>10s}")
            continue
        fps, startup_s, _ = best
        vs_base = f"{fps / base[0]:7.2f}x" if base else ""
        vs_yard = f"{fps / yard[0]:11.2f}x" if yard else ""
        print(f"{name:42s} {fps:10,.0f} {startup_s:11.2f} {vs_base:>8s} {vs_yard:>12s}")
    if ray is not None:
        ray.shutdown()


if __name__ == "__main__":
    main()
