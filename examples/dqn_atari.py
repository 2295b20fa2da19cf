"""DQN on Atari (Nature CNN, 3-step returns from a FrameStackReplayBuffer), in one file, CleanRL style.

    python examples/dqn_atari.py --env-id Breakout --seed 0 [--total-frames 10000000] [--device cuda]

Environments: envpool's Atari (``--backend envpool``: its C++ preprocessing, 84x84 gray frames, frame
skip 4 with max-pooling, 30 no-op starts, a life lost ends a training episode) or ale-py through
``GymEnv`` (``--backend ale``: frame skip 4, ``NoopResetEnv``, ``GrayScale``, ``Resize(84, 84)``).
``auto`` takes envpool when it is installed. Either way the env gives one uint8 frame a step;
``CatFrames(4)`` stacks the last four for the policy, and the replay buffer stores each frame once
and rebuilds the stacks, and the 3-step returns, when it samples. Rewards are clipped to [-1, 1]
for training; evaluations report the game's score (greedy with epsilon 0.05, no life-loss ends).

"Frames" count agent steps (4 emulator frames each), as torchrl's collectors count them. Writes
``{out-dir}/dqn_atari_{env}_seed{seed}.csv`` a row per evaluation (as they come) and a ``.png`` of the
evaluation curve (refreshed at each one, when matplotlib is installed). Ctrl-C stops with a summary.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: one thread, as on a shared machine
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import csv
import importlib.util
import time

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import FrameStackReplayBuffer
from rlpipe.envs import (CatFrames, Compose, GrayScale, GymEnv, MultiThreadedEnv, NoopResetEnv, Resize, ToTensorImage,
                         TransformedEnv)

STACK = "stack"  # the key of the policy's [4, 84, 84] input; the env's own frame key holds one frame
COLUMNS = ["frames", "eval_return", "epsilon", "seconds", "collect_fps", "train_fps", "updates"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--env-id", default="Breakout", help="the game: Breakout, Pong, ...")
    p.add_argument("--backend", default="auto", choices=["auto", "envpool", "ale"], help="where the game runs")
    p.add_argument("--num-envs", type=int, default=4, help="envpool envs stepped together (ale: always 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's generator and of the environments")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--total-frames", type=int, default=10_000_000, help="agent steps to collect at most")
    p.add_argument("--frames-per-batch", type=int, default=16, help="agent steps between training phases")
    p.add_argument("--train-frequency", type=int, default=4, help="agent steps per gradient step")
    p.add_argument("--n-steps", type=int, default=3, help="steps of the n-step return")
    p.add_argument("--gamma", type=float, default=0.99, help="the discount factor")
    p.add_argument("--lr", type=float, default=1e-4, help="Adam's learning rate")
    p.add_argument("--batch-size", type=int, default=32, help="transitions per gradient step")
    p.add_argument("--buffer-size", type=int, default=1_000_000, help="replay capacity, in frames")
    p.add_argument("--eps-start", type=float, default=1.0, help="epsilon at the start")
    p.add_argument("--eps-end", type=float, default=0.01, help="epsilon once the decay is over")
    p.add_argument("--eps-fraction", type=float, default=0.1, help="fraction of --total-frames epsilon decays over")
    p.add_argument("--learning-starts", type=int, default=80_000, help="random agent steps before training")
    p.add_argument("--target-update", type=int, default=1_000, help="gradient steps between target-net copies")
    p.add_argument("--eval-every", type=int, default=100_000, help="agent steps between evaluations")
    p.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation")
    p.add_argument("--eval-max-steps", type=int, default=27_000, help="agent steps an evaluation episode lasts at most")
    p.add_argument("--out-dir", default="runs", help="where the CSV and the plot go")
    p.add_argument("--no-progress", action="store_true", help="print evaluations instead of a tqdm progress bar")
    return p.parse_args(argv)


# ---- environments ----------------------------------------------------------------------------------------

def backend_of(name):
    if name != "auto":
        return name
    return "envpool" if importlib.util.find_spec("envpool") is not None else "ale"


def make_env(args, seed, training):
    """The env (one uint8 frame a step under its frame key) with ``CatFrames(4)`` into ``STACK``, on the
    CPU (the replay buffer's side); returns (env, frame key)."""
    if backend_of(args.backend) == "envpool":
        base = MultiThreadedEnv(args.num_envs if training else 1, f"{args.env_id}-v5",
                                create_env_kwargs={"seed": seed, "stack_num": 1, "episodic_life": training,
                                                   "max_episode_steps": args.eval_max_steps})
        key, prep = "observation", []
    else:
        base = GymEnv(f"{args.env_id}NoFrameskip-v4", frame_skip=4, categorical_action_encoding=True,
                      max_episode_steps=args.eval_max_steps)
        base.set_seed(seed)
        key = "pixels"
        prep = [NoopResetEnv(30), ToTensorImage(from_int=False, dtype=rlpipe.uint8), GrayScale(), Resize(84, 84)]
    stack = CatFrames(4, dim=-3, in_keys=[key], out_keys=[STACK])
    return TransformedEnv(base, Compose(*prep, stack)), key


def nature_cnn(n_actions):
    """Mnih et al. (2015): three convolutions and a 512-unit layer, on frames scaled to [0, 1]."""
    return nn.Sequential(nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, n_actions))


def q_values(q_net, stacks):
    return q_net(stacks.float() / 255)


class EpsilonGreedy:
    """The collector's policy: greedy actions of the Q-network (on ``device``), each replaced by a random
    one with probability ``eps``; the actions go where the observations came from."""

    def __init__(self, q_net, n_actions, device, eps=1.0):
        self.q_net, self.n_actions, self.device, self.eps = q_net, n_actions, device, eps

    def __call__(self, td):
        stacks = td.get(STACK)
        batch = stacks.shape[:-3]
        with rlpipe.no_grad():
            greedy = q_values(self.q_net, stacks.to(self.device).reshape(-1, 4, 84, 84)).argmax(-1).reshape(batch)
        explore = rlpipe.rand(batch, device=self.device) < self.eps
        random = rlpipe.randint(0, self.n_actions, batch, device=self.device)
        td.set("action", rlpipe.where(explore, random, greedy).to(stacks.device))
        return td


# ---- training --------------------------------------------------------------------------------------------

def replay_batch(batch, key):
    """A collector batch as the replay buffer takes it: [num_envs, T] (or [T]) single frames, [84, 84],
    rewards clipped to [-1, 1]."""
    frames = batch.get(key)
    out = batch.select("action", ("next", "done"), ("next", "terminated"), ("collector", "traj_ids"), strict=False)
    out.set("frame", frames.reshape(*frames.shape[:-3], 84, 84))
    out.set(("next", "frame"), batch.get(("next", key)).reshape(*frames.shape[:-3], 84, 84))
    out.set(("next", "reward"), batch.get(("next", "reward")).clamp(-1, 1))
    return out


def dqn_step(q_net, target_net, optimizer, sample, device):
    """One gradient step of the Huber loss between Q(s, a) and r_n + gamma^m (1 - terminated) max Q'(s_m)."""
    sample = sample.to(device)
    with rlpipe.no_grad():
        next_q = q_values(target_net, sample.get(("next", "frame"))).max(-1)[0]
        alive = 1.0 - sample.get(("next", "terminated")).reshape(-1).float()
        target = sample.get(("next", "reward")).reshape(-1) + sample.get("gamma").reshape(-1) * alive * next_q
    action = sample.get("action").reshape(-1, 1)
    q = q_values(q_net, sample.get("frame")).gather(1, action).squeeze(1)
    loss = nn.functional.smooth_l1_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def evaluate(q_net, args, seed, device):
    """The mean game score of ``args.eval_episodes`` episodes (epsilon 0.05, unclipped rewards)."""
    env, _ = make_env(args, seed, training=False)
    policy = EpsilonGreedy(q_net, env.action_spec.space.n, device, eps=0.05)
    scores = []
    for _ in range(args.eval_episodes):
        rollout = env.rollout(args.eval_max_steps, policy=policy)
        scores.append(rollout.get(("next", "reward")).sum().item())
    env.close()
    return sum(scores) / len(scores)


# ---- output ----------------------------------------------------------------------------------------------

def progress(total, disabled):
    """A tqdm bar when tqdm is installed and wanted, else None."""
    if disabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="frames", smoothing=0.05)


def save_plot(rows, path, title):
    """The evaluation curve as a PNG; False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["frames"] for r in rows], [r["eval_return"] for r in rows], marker="o")
    ax.set(xlabel="agent steps (4 frames each)", ylabel="evaluation score (mean)", title=title)
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return True


class Timer:
    """Seconds spent collecting and training, for the frames/s columns."""

    def __init__(self):
        self.collect = self.train = 0.0
        self.mark = time.perf_counter()

    def lap(self):
        now = time.perf_counter()
        spent, self.mark = now - self.mark, now
        return spent


def main(argv=None):
    args = parse_args(argv)
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    env, key = make_env(args, args.seed, training=True)
    n_actions = env.action_spec.space.n
    q_net, target_net = nature_cnn(n_actions).to(device), nature_cnn(n_actions).to(device)
    target_net.load_state_dict(q_net.state_dict())
    optimizer = rlpipe.optim.Adam(q_net.parameters(), lr=args.lr)
    policy = EpsilonGreedy(q_net, n_actions, device)
    collector = SyncDataCollector(env, policy, frames_per_batch=args.frames_per_batch,
                                  total_frames=args.total_frames, init_random_frames=args.learning_starts)
    buffer = FrameStackReplayBuffer(args.buffer_size, frame_stack=4, n_steps=args.n_steps, gamma=args.gamma,
                                    frame_key="frame", batch_size=args.batch_size)

    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"dqn_atari_{args.env_id}_seed{args.seed}")
    title = f"DQN (Nature CNN, {args.n_steps}-step), {args.env_id}, rlpipe"
    rows, frames, updates, owed = [], 0, 0, 0.0
    bar = progress(args.total_frames, args.no_progress)
    timer, start = Timer(), time.perf_counter()
    with open(stem + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        try:
            for batch in collector:
                frames += batch.numel()
                buffer.extend(replay_batch(batch, key))
                timer.collect += timer.lap()
                decay = args.eps_fraction * args.total_frames
                policy.eps = max(args.eps_end, args.eps_start - (args.eps_start - args.eps_end) * frames / decay)
                if frames > args.learning_starts and len(buffer):
                    owed += batch.numel() / args.train_frequency
                    while owed >= 1:
                        dqn_step(q_net, target_net, optimizer, buffer.sample(), device)
                        owed, updates = owed - 1, updates + 1
                        if updates % args.target_update == 0:
                            target_net.load_state_dict(q_net.state_dict())
                timer.train += timer.lap()
                if bar is not None:
                    bar.update(batch.numel())
                if frames // args.eval_every > (frames - batch.numel()) // args.eval_every:
                    row = {"frames": frames, "eval_return": evaluate(q_net, args, args.seed + 10_000 + frames, device),
                           "epsilon": round(policy.eps, 4), "seconds": round(time.perf_counter() - start, 1),
                           "collect_fps": round(frames / max(timer.collect, 1e-9), 1),
                           "train_fps": round(updates * args.train_frequency / max(timer.train, 1e-9), 1),
                           "updates": updates}
                    timer.lap()  # the evaluation's time counts for neither
                    rows.append(row)
                    writer.writerow(row)
                    f.flush()
                    save_plot(rows, stem + ".png", title)
                    if bar is not None:
                        bar.set_postfix(eval_return=row["eval_return"])
                    else:
                        print(" ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        except KeyboardInterrupt:
            pass
        finally:
            collector.shutdown()
            if bar is not None:
                bar.close()
    best = max((r["eval_return"] for r in rows), default=float("nan"))
    print(f"{args.env_id} seed {args.seed}: {frames:,} agent steps in {time.perf_counter() - start:,.0f} s "
          f"(collection {frames / max(timer.collect, 1e-9):,.0f} steps/s; {updates:,} updates, "
          f"{updates * args.train_frequency / max(timer.train, 1e-9):,.0f} steps/s of training), {len(rows)} "
          f"evaluations, best score {best:.1f}; wrote {stem}.csv")
    return rows


if __name__ == "__main__":
    main()
