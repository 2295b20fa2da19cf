"""FrameStackReplayBuffer: memory per transition and sample time, against pre-stacked storage.

The classic Atari pipeline: 84x84 uint8 frames, stacks of 4, n-step returns (n=3, gamma=0.99).
``FrameStackReplayBuffer(100_000)`` is filled by collector-like batches (8 envs x 250 steps,
episodes of 400 to 1600 steps) until its ring has wrapped; the script reports the bytes it holds
per sampleable transition and projects them to 1M transitions. Beside it, in the same run, a
``TensorDictReplayBuffer`` over a ``LazyTensorStorage`` holding pre-stacked ``"pixels"`` and
``("next", "pixels")`` ([4, 84, 84] each, torchrl's layout: 56 KB a transition), so it holds
fewer rows (``--stacked-rows``, default 10_000: 565 MB); the time of sampling 32 random rows
barely depends on how many rows there are. Both sample 32 transitions per call, on one thread.

    python benchmarks/bench_frame_stack.py [--capacity 100000] [--repeat 5] [--number 200]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse

import numpy as np
from bench_core import measure  # the script's folder is on sys.path

import rlpipe
from rlpipe import TensorDict
from rlpipe.data import FrameStackReplayBuffer, LazyTensorStorage, TensorDictReplayBuffer

import_peer()  # nothing to compare with outside rlpipe: only the thread pinning is wanted

FRAME, STACK, N_STEPS, ENVS, T, BATCH = (84, 84), 4, 3, 8, 250, 32
POOL = np.random.default_rng(0).integers(0, 256, (512,) + FRAME).astype(np.uint8)  # frames to draw from


class Collector:
    """Batches [ENVS, T] of single frames from ENVS endless streams of episodes."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.left = self.rng.integers(400, 1600, ENVS)  # steps left in each env's episode

    def batch(self):
        done = np.zeros((ENVS, T), bool)
        for e in range(ENVS):
            for t in range(T):
                self.left[e] -= 1
                if self.left[e] == 0:
                    done[e, t] = True
                    self.left[e] = self.rng.integers(400, 1600)
        frames = POOL[self.rng.integers(0, len(POOL), (ENVS, T))]
        nxt = POOL[self.rng.integers(0, len(POOL), (ENVS, T))]
        t = rlpipe.tensor
        return TensorDict({"pixels": t(frames), "action": t(self.rng.integers(0, 18, (ENVS, T))),
                           "next": {"pixels": t(nxt), "reward": t(self.rng.random((ENVS, T, 1), dtype=np.float32)),
                                    "done": t(done[..., None]), "terminated": t(done[..., None]),
                                    "truncated": t(np.zeros((ENVS, T, 1), bool))}}, [ENVS, T])


def frame_stack_buffer(capacity):
    rb = FrameStackReplayBuffer(capacity, frame_stack=STACK, n_steps=N_STEPS, gamma=0.99, batch_size=BATCH)
    collector = Collector(1)
    while rb.write_count < capacity + ENVS * T * 2:  # past one full turn of the ring
        rb.extend(collector.batch())
    return rb


def stacked_buffer(rows):
    """A TensorDictReplayBuffer over a LazyTensorStorage of pre-stacked transitions."""
    rng = np.random.default_rng(2)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(rows), batch_size=BATCH)
    t = rlpipe.tensor
    for start in range(0, rows, 1000):
        n = min(1000, rows - start)
        rb.extend(TensorDict({
            "pixels": t(POOL[rng.integers(0, len(POOL), (n, STACK))]), "action": t(rng.integers(0, 18, n)),
            "gamma": t(np.full(n, 0.99 ** N_STEPS, np.float32)), "steps_to_next_obs": t(np.full(n, N_STEPS)),
            "nonterminal": t(np.ones(n, bool)),
            "next": {"pixels": t(POOL[rng.integers(0, len(POOL), (n, STACK))]),
                     "reward": t(rng.random((n, 1), dtype=np.float32)),
                     "original_reward": t(rng.random((n, 1), dtype=np.float32)),
                     "done": t(np.zeros((n, 1), bool)), "terminated": t(np.zeros((n, 1), bool)),
                     "truncated": t(np.zeros((n, 1), bool))}}, [n]))
    return rb


def main():
    p = argparse.ArgumentParser(description="FrameStackReplayBuffer memory and sample-time benchmark")
    p.add_argument("--capacity", type=int, default=100_000)
    p.add_argument("--stacked-rows", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--number", type=int, default=200, help="calls per timed run")
    args = p.parse_args()

    rb = frame_stack_buffer(args.capacity)
    per = rb.nbytes / len(rb)
    frame = np.prod(FRAME)
    print(f"FrameStackReplayBuffer({args.capacity:_}), {FRAME[0]}x{FRAME[1]} uint8 frames, stack {STACK}, "
          f"n_steps {N_STEPS}, {ENVS} envs x {T} steps a batch, episodes of 400-1600 steps")
    print(f"  holds {rb.nbytes / 2**20:.1f} MiB for {len(rb):_} sampleable transitions: {per:,.0f} B each "
          f"({per / frame:.3f} frames); 1M transitions: {per * 1e6 / 2**30:.2f} GiB")
    stacked_bytes = 2 * STACK * frame
    print(f"  pre-stacked (torchrl layout): {stacked_bytes:,} B each, 1M: {stacked_bytes * 1e6 / 2**30:.1f} GiB")
    stacked = stacked_buffer(args.stacked_rows)
    ours = measure(rb.sample, args.number, args.repeat)
    theirs = measure(stacked.sample, args.number, args.repeat)
    print(f"sample({BATCH}), one thread:")
    print(f"  FrameStackReplayBuffer (stacks built now, {N_STEPS}-step windows kept): {ours:8.1f} us")
    print(f"  TensorDictReplayBuffer(LazyTensorStorage({args.stacked_rows:_})), pre-stacked: {theirs:8.1f} us")
    print(f"  ratio: {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
