"""Multi-process collection throughput, side by side, on two scenarios:

- Pendulum-v1 with an MLP policy (3-64-64-1, Tanh between layers and a final Tanh that keeps actions
  inside Pendulum's [-2, 2] bounds);
- Acrobot-v1 with a random policy (the environment's own step is nearly all the work).

For each scenario, these collectors:

- ``SyncDataCollector`` on one env in this process (the baseline of the ratios);
- ``RayCollector`` with 2 actors, ``sync=True`` (needs ``pip install "rlpipe[ray]"``);
- the same with ``sync=False`` (each actor's batch yielded alone, first ready first);
- ``MultiSyncDataCollector`` and ``MultiaSyncDataCollector`` with 2 worker processes;
- a hand-written Gymnasium ``AsyncVectorEnv`` loop with 2 envs: one batched policy forward (or
  random draw) per step, the yardstick for "two env processes, one policy".

Frames/s counts the collection loop only; the start-up (actors, worker processes) is printed apart.
"main CPU" is the CPU time this process spends per frame inside the loop (``time.process_time``):
what the main process takes from the cores the workers need; unlike frames/s it hardly depends on
what else runs on the machine. The workloads run in rounds (each once per round, best of
``--repeat`` rounds), so the ratios compare runs made under the same load. A workload is one entry
of ``WORKLOADS`` (name -> function(scenario, frames, frames_per_batch) returning ``(frames,
loop_seconds, startup_seconds, main_cpu_seconds)``): add one there.

    python benchmarks/bench_distributed.py [--frames 20000] [--frames-per-batch 1000] [--repeat 3]
                                           [--scenario pendulum acrobot] [--no-ray]
"""
import one_thread  # noqa: F401  first: pins BLAS to one thread before NumPy loads (Ray's workers inherit it)

import argparse
import time

import gymnasium as gym
import numpy as np

import rlpipe
from rlpipe import nn
from rlpipe.collectors import MultiaSyncDataCollector, MultiSyncDataCollector, RandomPolicy, SyncDataCollector
from rlpipe.envs import GymEnv

try:
    import ray
except ImportError:
    ray = None

NUM_WORKERS = 2


class Scenario:
    """An environment id and a policy kind ("mlp" or "random"); ``make_env`` is picklable (Ray)."""

    def __init__(self, key, env_id, policy):
        self.key, self.env_id, self.policy = key, env_id, policy

    def make_env(self):
        return GymEnv(self.env_id)

    def make_policy(self):
        """The same policy for every workload (seeded, so every row runs the same weights)."""
        if self.policy == "random":
            return RandomPolicy(self.make_env().action_spec)
        rlpipe.manual_seed(0)
        return nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1), nn.Tanh())

    def title(self):
        policy = "MLP 3-64-64-1 policy" if self.policy == "mlp" else "random policy"
        return f"{self.env_id}, {policy}"


SCENARIOS = {s.key: s for s in (Scenario("pendulum", "Pendulum-v1", "mlp"),
                                Scenario("acrobot", "Acrobot-v1", "random"))}


def run_collector(build):
    """Builds a collector (timed as start-up), drains it (timed as the loop, wall and this process's
    CPU), shuts it down."""
    start = time.perf_counter()
    collector = build()
    ready = time.perf_counter()
    cpu = time.process_time()
    collected = 0
    for batch in collector:
        collected += batch.numel()
    end = time.perf_counter()
    cpu = time.process_time() - cpu
    collector.shutdown()
    return collected, end - ready, ready - start, cpu


def sync_collector(sc, frames, fpb):
    return run_collector(lambda: SyncDataCollector(sc.make_env(), sc.make_policy(), frames_per_batch=fpb,
                                                   total_frames=frames))


def ray_collector(sc, frames, fpb, sync=True):
    from rlpipe.collectors.distributed import RayCollector
    return run_collector(lambda: RayCollector(sc.make_env, sc.make_policy(), num_collectors=NUM_WORKERS,
                                              frames_per_batch=fpb, total_frames=frames, sync=sync))


def ray_collector_async(sc, frames, fpb):
    return ray_collector(sc, frames, fpb, sync=False)


def multi_sync_collector(sc, frames, fpb):
    """torchrl's signature: one env constructor per worker."""
    return run_collector(lambda: MultiSyncDataCollector([sc.make_env] * NUM_WORKERS, sc.make_policy(),
                                                        frames_per_batch=fpb, total_frames=frames))


def multi_async_collector(sc, frames, fpb):
    return run_collector(lambda: MultiaSyncDataCollector([sc.make_env] * NUM_WORKERS, sc.make_policy(),
                                                         frames_per_batch=fpb // NUM_WORKERS, total_frames=frames))


def async_vector_loop(sc, frames, fpb):
    """Gymnasium's AsyncVectorEnv (one subprocess per env), the policy run on the batched observation
    (or the batched action space sampled)."""
    start = time.perf_counter()
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make(sc.env_id)] * NUM_WORKERS)
    net = sc.make_policy() if sc.policy == "mlp" else None
    obs, _ = envs.reset(seed=0)
    envs.action_space.seed(0)
    ready = time.perf_counter()
    cpu = time.process_time()
    steps = -(-frames // NUM_WORKERS)
    with rlpipe.no_grad():
        for _ in range(steps):
            if net is None:
                action = envs.action_space.sample()
            else:
                action = net(rlpipe.from_numpy(np.asarray(obs, np.float32))).numpy()
            obs, _, _, _, _ = envs.step(action)
    end = time.perf_counter()
    cpu = time.process_time() - cpu
    envs.close()
    return steps * NUM_WORKERS, end - ready, ready - start, cpu


WORKLOADS = {
    "SyncDataCollector, 1 env": sync_collector,
    f"RayCollector, {NUM_WORKERS} actors, sync=True": ray_collector,
    f"RayCollector, {NUM_WORKERS} actors, sync=False": ray_collector_async,
    f"MultiSyncDataCollector, {NUM_WORKERS} workers": multi_sync_collector,
    f"MultiaSyncDataCollector, {NUM_WORKERS} workers": multi_async_collector,
    f"Gymnasium AsyncVectorEnv loop, {NUM_WORKERS} envs": async_vector_loop,
}
RAY_ROWS = {f"RayCollector, {NUM_WORKERS} actors, sync=True", f"RayCollector, {NUM_WORKERS} actors, sync=False"}
BASELINE = "SyncDataCollector, 1 env"
YARDSTICK = f"Gymnasium AsyncVectorEnv loop, {NUM_WORKERS} envs"


def best_of_rounds(sc, names, args):
    """{name: (frames/s, start-up s, main CPU us/frame)} of the fastest of ``args.repeat`` rounds,
    each round running every workload once."""
    best = {}
    for _ in range(args.repeat):
        for name in names:
            frames, loop_s, startup_s, cpu_s = WORKLOADS[name](sc, args.frames, args.frames_per_batch)
            fps = frames / loop_s
            if name not in best or fps > best[name][0]:
                best[name] = (fps, startup_s, cpu_s / frames * 1e6)
    return best


def report(sc, names, best, args):
    print(f"{sc.title()}, {args.frames} frames, frames_per_batch={args.frames_per_batch}, best of {args.repeat} "
          "rounds")
    print(f"{'workload':42s} {'frames/s':>10s} {'start-up s':>11s} {'main CPU us/frame':>18s} {'vs Sync':>8s} "
          f"{'vs AsyncVec':>12s}")
    base, yard = best.get(BASELINE), best.get(YARDSTICK)
    for name in WORKLOADS:
        if name not in names:
            print(f"{name:42s} {'(not run)':>10s}")
            continue
        fps, startup_s, cpu_us = best[name]
        vs_base = f"{fps / base[0]:7.2f}x" if base else ""
        vs_yard = f"{fps / yard[0]:11.2f}x" if yard else ""
        print(f"{name:42s} {fps:10,.0f} {startup_s:11.2f} {cpu_us:18.2f} {vs_base:>8s} {vs_yard:>12s}")
    print()


def main():
    p = argparse.ArgumentParser(description="multi-process collection throughput")
    p.add_argument("--frames", type=int, default=20_000)
    p.add_argument("--frames-per-batch", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3, help="rounds; each workload's best round is reported")
    p.add_argument("--scenario", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    p.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    args = p.parse_args()
    use_ray = ray is not None and not args.no_ray
    if use_ray and not ray.is_initialized():
        ray.init(num_cpus=NUM_WORKERS, include_dashboard=False, log_to_driver=False)
    names = [name for name in WORKLOADS if use_ray or name not in RAY_ROWS]
    for key in args.scenario:
        sc = SCENARIOS[key]
        report(sc, names, best_of_rounds(sc, names, args), args)
    if use_ray:
        ray.shutdown()


if __name__ == "__main__":
    main()
