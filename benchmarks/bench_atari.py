"""Atari at scale, each figure beside its reference in one run (issue 29):

1. collection with torchrl's preprocessing stack (``NoopResetEnv(30)``, ``ToTensorImage``, ``GrayScale``,
   ``Resize(84, 84)``, ``CatFrames(4)``, frame skip 4 in ALE) through ``GymEnv`` and ``SyncDataCollector``
   over ale-py's ``PongNoFrameskip-v4``, against a plain loop over Gymnasium's ``AtariPreprocessing`` +
   ``FrameStackObservation`` (random actions on both; frames/s counts agent steps, 4 emulator frames each);
2. ``SyncDataCollector`` over envpool's ``Pong-v5`` (``MultiThreadedEnv``, 8 envs) against envpool's own
   loop of random actions;
3. ``FrameStackReplayBuffer`` bytes per transition and ``sample(32)`` against a ``LazyTensorStorage`` of
   pre-stacked pixels (``bench_frame_stack.py``, a smaller ring);
4. the Nature-DQN CNN (84x84x4 -> 3x conv -> 512 -> 6): a DQN train step (batch 32: forward, target
   network's max, Huber loss, backward, Adam) and batch-1 inference, against torch 2.13 on the CPU in its own
   process (``--peer-python``, default /work/peervenv/bin/python);
5. with ``--only cnn-layers`` (not by default), each of that CNN's layers called alone without grad, and
   the whole network, at batch 1 and 32, against torch's.

Everything on one thread. Gymnasium's ``AtariPreprocessing`` needs OpenCV: where this interpreter lacks it,
the peer interpreter's site-packages are appended to ``sys.path`` for it.

    python benchmarks/bench_atari.py [--steps 2000] [--repeat 3] [--only ale,envpool,buffer,cnn,cnn-layers]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import glob
import json
import os
import sys
import time

import timeit

import numpy as np
from peer_process import peer_python, print_side_by_side, run_side

PONG, N_ACTIONS, ENVPOOL_ENVS = "PongNoFrameskip-v4", 6, 8


def cpu_measure(fn, number, repeat):
    """Microseconds of CPU time per call (this process): the best of ``repeat`` runs of ``number`` calls."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6


def rates(run, steps):
    """(steps per wall second, steps per CPU second of this process, all its threads) of one ``run(steps)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(steps)
    return steps / (time.perf_counter() - wall), steps / (time.process_time() - cpu)


def side_by_side(label, ours, theirs, steps, repeat, unit="steps/s"):
    """Both runs alternated ``repeat`` times (the same load for both); prints the best rates per wall
    second and per CPU second (which the time other processes hold the cores does not count), and the
    ratios."""
    mine, peer = [], []
    for _ in range(repeat):
        mine.append(rates(ours, steps))
        peer.append(rates(theirs, steps))
    print(f"{label}:")
    for name, runs in (("rlpipe", mine), ("reference", peer)):
        wall, cpu = max(r[0] for r in runs), max(r[1] for r in runs)
        print(f"  {name:10s} {wall:10,.0f} {unit} wall, {cpu:10,.0f} per CPU-second   "
              f"(wall runs: {', '.join(f'{r[0]:,.0f}' for r in runs)})")
    print(f"  ratio rlpipe/reference: {max(r[0] for r in mine) / max(r[0] for r in peer):.2f}x wall, "
          f"{max(r[1] for r in mine) / max(r[1] for r in peer):.2f}x CPU")


# ---- 1. ALE through GymEnv ------------------------------------------------------------------------------

def import_cv2():
    """OpenCV for Gymnasium's AtariPreprocessing, from the peer interpreter's packages if need be."""
    try:
        import cv2  # noqa: F401
    except ImportError:
        prefix = os.path.dirname(os.path.dirname(peer_python()))
        sys.path.extend(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")))
        import cv2  # noqa: F401


def gymnasium_loop(steps):
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    env = FrameStackObservation(AtariPreprocessing(gym.make(PONG), noop_max=30, frame_skip=4, screen_size=84), 4)
    env.reset(seed=0)
    sample = env.action_space.sample
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(sample())
        if terminated or truncated:
            env.reset()
    env.close()


def preprocessed_pong(kind):
    """The env with the stack. ``kind`` "uint8": ``ToTensorImage(from_int=False, dtype=uint8)`` only moves
    the channels first, so the stack stays uint8 as Gymnasium's; "float32": torchrl's default, frames
    divided by 255 in float32 (4x the bytes); "ale-gray": ALE's own grayscale screen (``obs_type="grayscale"``,
    as AtariPreprocessing reads it), resized and stacked."""
    import rlpipe
    from rlpipe.envs import (CatFrames, Compose, GrayScale, GymEnv, NoopResetEnv, Resize, ToTensorImage,
                             TransformedEnv, UnsqueezeTransform)

    if kind == "ale-gray":
        base = GymEnv(PONG, frame_skip=4, categorical_action_encoding=True, obs_type="grayscale")
        keys = ["observation"]
        prep = [Resize(84, 84, in_keys=keys), UnsqueezeTransform(-3, in_keys=keys)]
    else:
        base = GymEnv(PONG, frame_skip=4, categorical_action_encoding=True)
        keys = ["pixels"]
        prep = [ToTensorImage(from_int=False, dtype=rlpipe.uint8) if kind == "uint8" else ToTensorImage(), GrayScale(),
                Resize(84, 84)]
    return TransformedEnv(base, Compose(NoopResetEnv(30), *prep, CatFrames(4, dim=-3, in_keys=keys)))


def rlpipe_ale_collect(kind):
    """A run of the collector over ``preprocessed_pong(kind)`` with random actions."""
    from rlpipe.collectors import RandomPolicy, SyncDataCollector

    def run(steps):
        env = preprocessed_pong(kind)
        env.set_seed(0)
        collector = SyncDataCollector(env, RandomPolicy(env.action_spec), frames_per_batch=200, total_frames=steps)
        for _ in collector:
            pass
        collector.shutdown()
    return run


# ---- 2. envpool -----------------------------------------------------------------------------------------

def envpool_loop(steps):
    import envpool

    env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=ENVPOOL_ENVS, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(steps // ENVPOOL_ENVS):
        env.step(rng.integers(0, N_ACTIONS, ENVPOOL_ENVS))
    env.close()


def rlpipe_envpool_collect(steps):
    from rlpipe.collectors import RandomPolicy, SyncDataCollector
    from rlpipe.envs import MultiThreadedEnv

    env = MultiThreadedEnv(ENVPOOL_ENVS, "Pong-v5", create_env_kwargs={"seed": 0})
    collector = SyncDataCollector(env, RandomPolicy(env.action_spec), frames_per_batch=ENVPOOL_ENVS * 50,
                                  total_frames=steps)
    for _ in collector:
        pass
    collector.shutdown()


# ---- 3. FrameStackReplayBuffer --------------------------------------------------------------------------

def buffer_figures(capacity, stacked_rows, repeat):
    from bench_frame_stack import FRAME, frame_stack_buffer, stacked_buffer

    rb = frame_stack_buffer(capacity)
    per = rb.nbytes / len(rb)
    frame = int(np.prod(FRAME))
    stacked = stacked_buffer(stacked_rows)
    ours, theirs = cpu_measure(rb.sample, 100, repeat), cpu_measure(stacked.sample, 100, repeat)
    print(f"FrameStackReplayBuffer({capacity:_}), stack 4, 3-step returns (bench_frame_stack.py's batches):")
    print(f"  {per:,.0f} B per transition = {per / frame:.3f} frames (goal <= 1.2); pre-stacked: {8 * frame:,} B")
    print(f"  sample(32), CPU time: {ours:.0f} us vs {theirs:.0f} us from pre-stacked rows: "
          f"{ours / theirs:.2f}x (goal <= 2x)")


# ---- 4. Nature CNN --------------------------------------------------------------------------------------

def nature_cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, N_ACTIONS))


def cnn_side(lib, number, repeat):
    """Microseconds of a DQN train step (batch 32) and of batch-1 inference, written once against ``lib``
    (CPU time of this process: the other processes on a shared machine do not count)."""
    lib.manual_seed(0)
    q_net, target = nature_cnn(lib), nature_cnn(lib)
    target.load_state_dict(q_net.state_dict())
    opt = lib.optim.Adam(q_net.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    obs = lib.tensor(rng.integers(0, 256, (32, 4, 84, 84), dtype=np.uint8))
    next_obs = lib.tensor(rng.integers(0, 256, (32, 4, 84, 84), dtype=np.uint8))
    action = lib.tensor(rng.integers(0, N_ACTIONS, (32, 1)))
    reward, not_done = lib.tensor(rng.random(32, dtype=np.float32)), lib.ones(32)
    single = lib.tensor(rng.integers(0, 256, (1, 4, 84, 84), dtype=np.uint8))

    def train_step():
        with lib.no_grad():
            target_q = reward + 0.99 * not_done * target(next_obs.float() / 255).max(1)[0]
        q = q_net(obs.float() / 255).gather(1, action).squeeze(1)
        loss = lib.nn.functional.smooth_l1_loss(q, target_q)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def act():
        with lib.no_grad():
            return int(q_net(single.float() / 255).argmax(1).item())

    return {"train step (batch 32)": cpu_measure(train_step, number, repeat),
            "inference (batch 1)": cpu_measure(act, number * 5, repeat)}


LAYER_NAMES = ("conv1", "relu1", "conv2", "relu2", "conv3", "relu3", "flatten", "fc1", "relu4", "fc2")


def cnn_layer_side(lib, number, repeat):
    """Microseconds of each layer of the Nature CNN called alone without grad, and of the whole network,
    at batch 1 and 32 (the whole is less than the sum: a Sequential skips per-module work where it can)."""
    lib.manual_seed(0)
    net = nature_cnn(lib)
    figures = {}
    for batch, calls in ((1, number * 15), (32, max(1, number // 2))):
        x = lib.tensor(np.random.default_rng(0).random((batch, 4, 84, 84), dtype=np.float32))
        h = x
        with lib.no_grad():
            for name, layer in zip(LAYER_NAMES, net):
                if name != "flatten":
                    figures[f"batch {batch}: {name}"] = cpu_measure(lambda f=layer, a=h: f(a), calls, repeat)
                h = layer(h)
            figures[f"batch {batch}: whole network"] = cpu_measure(lambda a=x: net(a), calls, repeat)
    return figures


def run_one_side(side, number, repeat, layers):
    if side == "torch":
        lib, = import_peer()
    else:
        import rlpipe as lib
    measure = cnn_layer_side if layers else cnn_side
    print(json.dumps({"version": lib.__version__, "us": measure(lib, number, repeat)}))


def cnn_figures(peer, number, repeat, layers=False):
    script = os.path.abspath(__file__)
    args = ["--cnn-number", number, "--repeat", repeat] + (["--layers"] if layers else [])
    ours = run_side(script, sys.executable, "rlpipe", args)
    theirs = run_side(script, peer, "torch", args)
    print("Nature CNN" + (", each layer alone without grad" if layers else "") +
          ", one thread, microseconds of CPU time per call:")
    print_side_by_side(ours, theirs, "Nature CNN", "10.0f")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=2000, help="agent steps per collection run")
    p.add_argument("--repeat", type=int, default=3, help="alternated runs of each side (best kept)")
    p.add_argument("--capacity", type=int, default=50_000, help="FrameStackReplayBuffer capacity")
    p.add_argument("--stacked-rows", type=int, default=5_000, help="rows of the pre-stacked storage")
    p.add_argument("--cnn-number", type=int, default=20, help="train steps per timed CNN run")
    p.add_argument("--only", default="ale,envpool,buffer,cnn",
                   help="comma-separated parts to run (also: cnn-layers, the CNN's layers one by one)")
    p.add_argument("--peer-python", default=peer_python(), help="interpreter with torch for the CNN's torch side")
    p.add_argument("--side", choices=["rlpipe", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--layers", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        return run_one_side(args.side, args.cnn_number, args.repeat, args.layers)
    parts = set(args.only.split(","))
    if "ale" in parts:
        import_cv2()
        for kind in ("uint8", "float32", "ale-gray"):
            side_by_side(f"ALE Pong, GymEnv + {kind} preprocessing stack + SyncDataCollector vs Gymnasium's "
                         "AtariPreprocessing + FrameStackObservation loop", rlpipe_ale_collect(kind), gymnasium_loop,
                         args.steps, args.repeat)
    if "envpool" in parts:
        side_by_side(f"envpool Pong-v5, {ENVPOOL_ENVS} envs: SyncDataCollector(MultiThreadedEnv) vs envpool's loop",
                     rlpipe_envpool_collect, envpool_loop, args.steps * 4, args.repeat, unit="frames/s")
    if "buffer" in parts:
        buffer_figures(args.capacity, args.stacked_rows, args.repeat)
    if "cnn" in parts:
        cnn_figures(args.peer_python, args.cnn_number, args.repeat)
    if "cnn-layers" in parts:
        cnn_figures(args.peer_python, args.cnn_number, args.repeat, layers=True)


if __name__ == "__main__":
    main()
