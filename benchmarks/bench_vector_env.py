"""256 CartPoles with an MLP 4-64-64-2 policy (tanh, greedy action): frames/s of the SyncDataCollector
against the bare vector loop with the same policy written in NumPy, on the same env, and torchrl
0.14.1 (when importable, e.g. run from a virtualenv that has it) on the env it accepts.

Envs: Gymnasium's native ``CartPoleVectorEnv`` (``vectorization_mode="vector_entry_point"``,
NEXT_STEP autoreset, no partial reset: the collector drops the reset steps), envpool's pool (when
envpool is installed; rlpipe resets done envs through ``reset(env_id)``), and Gymnasium's
``SyncVectorEnv`` of 256 ``CartPole-v1`` with SAME_STEP autoreset. torchrl is tried on all three and
collects from the last one only: its GymWrapper fails on the native env, its MultiThreadedEnv needs
the ``gym`` package and then cannot convert envpool 1.2's gymnasium spaces (the script prints why).
The bare loops count every step of every env, reset steps included, as frames: what a hand-written
loop would report; the collector delivers only transitions (about 1% fewer frames per native step
here, where the untrained policy's episodes last about 85 steps).

    python benchmarks/bench_vector_env.py [--envs 256] [--frames 512000] [--frames-per-batch 25600] [--repeat 5]
                                          [--clock cpu|wall]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import time
import warnings

import gymnasium as gym
import numpy as np

import rlpipe
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import GymEnv, GymWrapper, MultiThreadedEnvWrapper
from rlpipe.tensordict import TensorDictModule
from mlp_policy import mlp, numpy_policy, numpy_weights

torch, torchrl = import_peer("torchrl")
if torch:
    import logging
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
try:
    import envpool
except ImportError:
    envpool = None

warnings.filterwarnings("ignore", message=".*precision lowered.*")  # envpool's Box spaces


def best_fps(runs, frames, repeat, clock):
    """The best frames/s of each of ``runs`` (each ``run(frames)`` builds its env, untimed, and
    returns the timed part) over ``repeat`` rounds, the runs taking turns within a round so that a
    load spike on a shared machine hits both sides of a ratio alike."""
    best = [0.0] * len(runs)
    for _ in range(repeat):
        for i, run in enumerate(runs):
            go = run(frames)
            start = clock()
            go()
            best[i] = max(best[i], frames / (clock() - start))
    return best


# ---- the envs -----------------------------------------------------------------------------------------

def make_native(n):
    return gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")


def make_sync(n):
    return gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


def make_envpool(n):
    return envpool.make("CartPole-v1", env_type="gymnasium", num_envs=n, seed=0)


def bare_loop(make, n, weights):
    def run(frames):
        env = make(n)
        act = numpy_policy(weights)

        def go():
            obs, _ = env.reset() if make is make_envpool else env.reset(seed=0)  # envpool: seeded when made
            for _ in range(frames // n):
                obs, _, _, _, _ = env.step(act(obs))
            env.close()
        return go
    return run


def rlpipe_collect(make, n, weights, fpb):
    def run(frames):
        if make is None:  # GymEnv's own construction of the native env
            env = GymEnv("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point",
                         categorical_action_encoding=True)
        elif make is make_envpool:
            env = MultiThreadedEnvWrapper(make(n), categorical_action_encoding=True)
        else:
            env = GymWrapper(make(n), categorical_action_encoding=True)
        if make is not make_envpool:  # seeded when made
            env.set_seed(0)
        policy = TensorDictModule(mlp(rlpipe, weights), in_keys=["observation"], out_keys=["action"])
        collector = SyncDataCollector(env, policy, frames_per_batch=fpb, total_frames=frames)

        def go():
            for _ in collector:
                pass
            collector.shutdown()
        return go
    return run


def torchrl_collect(make_env, n, weights, fpb):
    """torchrl's Collector on ``make_env(n)`` (a torchrl env), or, when torchrl cannot build it, the
    reason (it refuses Gymnasium's native vector env; its MultiThreadedEnv converts envpool's spaces
    as ``gym`` ones, and envpool 1.2 gives ``gymnasium`` spaces)."""
    from tensordict.nn import TensorDictModule as TorchModule
    from torchrl.collectors import Collector as TorchrlCollector

    try:
        make_env(2).close()
    except Exception as err:
        return f"{type(err).__name__}: {str(err)[:100]}"

    def run(frames):
        env = make_env(n)
        env.set_seed(0)
        policy = TorchModule(mlp(torch, weights), in_keys=["observation"], out_keys=["action"])
        collector = TorchrlCollector(env, policy, frames_per_batch=fpb, total_frames=frames)

        def go():
            with torch.no_grad():
                for _ in collector:
                    pass
            collector.shutdown()
        return go
    return run


def torchrl_envs():
    """torchrl's constructions of the three envs: its GymWrapper (categorical actions, as rlpipe's
    here) over the Gymnasium ones, its MultiThreadedEnv for envpool."""
    from torchrl.envs import GymWrapper as TorchrlGymWrapper, MultiThreadedEnv as TorchrlMultiThreadedEnv
    return {"native": lambda n: TorchrlGymWrapper(make_native(n), categorical_action_encoding=True),
            "envpool": lambda n: TorchrlMultiThreadedEnv(n, "CartPole-v1"),
            "sync": lambda n: TorchrlGymWrapper(make_sync(n), categorical_action_encoding=True)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--frames", type=int, default=512_000)
    parser.add_argument("--frames-per-batch", type=int, default=25_600)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                        help="time the single-threaded runs by this process's CPU time (default) or wall time")
    parser.add_argument("--sync-frames", type=int, default=128_000, help="frames on the (slower) SyncVectorEnv")
    args = parser.parse_args()
    n, fpb, weights = args.envs, args.frames_per_batch, numpy_weights()

    def fps(*runs, frames=args.frames, threads=False):
        # CPU time where everything runs in this thread: what other processes on a shared machine
        # take does not count; wall time for envpool, whose C++ threads' CPU time would count
        cpu = args.clock == "cpu" and not threads
        return best_fps(runs, frames, args.repeat, time.process_time if cpu else time.perf_counter)

    print(f"{n} CartPoles, MLP 4-64-64-2 greedy policy, {args.frames} frames a run ({args.sync_frames} on "
          f"SyncVectorEnv), {fpb} frames per batch, best of {args.repeat} interleaved runs, {args.clock} time "
          f"(envpool: wall); numpy {np.__version__}, "
          f"gymnasium {gym.__version__}" + (f", envpool {envpool.__version__}" if envpool else "")
          + (f", torchrl {torchrl.__version__}" if torch else " (torchrl not importable: no torchrl column)"))
    print(f"{'env':44s} {'bare loop':>11s} {'rlpipe':>11s} {'rlpipe/bare':>12s} {'torchrl':>10s} "
          f"{'rlpipe/torchrl':>15s}")

    def row(name, bare, ours, peer=None):
        peer_cols = f"{peer:10,.0f} {ours / peer:14.1f}x" if peer else f"{'-':>10s} {'-':>15s}"
        print(f"{name:44s} {bare:11,.0f} {ours:11,.0f} {100 * ours / bare:11.1f}% {peer_cols}", flush=True)

    peers = torchrl_envs() if torch else {}
    rows = [("Gymnasium native CartPoleVectorEnv", "native", make_native, None, args.frames),
            ("envpool CartPole-v1", "envpool", make_envpool, make_envpool, args.frames),
            ("Gymnasium SyncVectorEnv, SAME_STEP", "sync", make_sync, make_sync, args.sync_frames)]
    results = {}
    for name, kind, make, make_ours, frames in rows:
        if kind == "envpool" and envpool is None:
            continue
        runs = [bare_loop(make, n, weights), rlpipe_collect(make_ours, n, weights, fpb)]
        peer = torchrl_collect(peers[kind], n, weights, fpb) if kind in peers else None
        if callable(peer):
            runs.append(peer)
        results[kind] = fps(*runs, frames=frames, threads=kind == "envpool")
        row(name, *results[kind])
        if isinstance(peer, str):
            print(f"    torchrl cannot collect from it: {peer}")
    if len(results.get("sync", ())) == 3:
        print(f"rlpipe on the native env vs torchrl on SyncVectorEnv (the fastest CartPole torchrl collects from "
              f"here): {results['native'][1] / results['sync'][2]:.1f}x")

if __name__ == "__main__":
    main()
