"""Soft actor-critic with n-step targets (MultiStep) on Pendulum-v1, in one file.

    python examples/sac_pendulum.py --seed 0 [--total-frames 30000] [--device cpu]

A tanh-squashed Gaussian actor, two Q-networks with Polyak-averaged targets and a learned entropy
temperature. A SyncDataCollector steps the env with the stochastic actor, MultiStep turns each batch
into n-step transitions and a replay buffer stores them; each collected frame is followed by
--updates-per-frame gradient steps. The deterministic actor (tanh of the mean) is evaluated every
--eval-every frames. Writes runs/sac_pendulum_seed{seed}.csv (and a .png when matplotlib is installed).
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: these small matrices only lose
os.environ.setdefault("OMP_NUM_THREADS", "1")       # time to more BLAS threads (badly so on a busy machine)

import argparse
import csv
import math
import time

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, TensorDictReplayBuffer
from rlpipe.envs import GymEnv
from rlpipe.postprocs import MultiStep


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator and of the environments")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--total-frames", type=int, default=30_000, help="environment frames to collect")
    p.add_argument("--frames-per-batch", type=int, default=50,
                   help="frames the collector gathers between training phases")
    p.add_argument("--updates-per-frame", type=float, default=1.0,
                   help="gradient steps per collected frame (fractions carry over)")
    p.add_argument("--n-steps", type=int, default=3, help="steps of the n-step return (MultiStep)")
    p.add_argument("--gamma", type=float, default=0.99, help="the discount factor")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (actor, critics and temperature)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="transitions per gradient step, sampled from the replay buffer")
    p.add_argument("--buffer-size", type=int, default=100_000, help="capacity of the replay buffer, in transitions")
    p.add_argument("--hidden", type=int, default=128, help="units in each hidden layer of the actor and the critics")
    p.add_argument("--tau", type=float, default=0.005, help="Polyak rate of the target critics")
    p.add_argument("--learning-starts", type=int, default=1_000, help="random frames before training")
    p.add_argument("--eval-every", type=int, default=2_000,
                   help="evaluate the deterministic actor each time the frame count passes a multiple of this")
    p.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    p.add_argument("--target-return", type=float, default=-250.0,
                   help="the mean evaluation return that counts as solved (reported, training goes on)")
    p.add_argument("--out-dir", default="runs", help="where the CSV (and the plot) go")
    p.add_argument("--no-progress", action="store_true",
                   help="print evaluations instead of showing a tqdm progress bar")
    return p.parse_args()


def mlp(n_in, n_out, hidden):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_out))


class Actor(nn.Module):
    """A Gaussian over pre-squash actions; ``sample`` returns tanh-squashed, rescaled actions and
    their log-probabilities (with the change-of-variables correction)."""

    def __init__(self, n_obs, n_act, hidden, low, high):
        super().__init__()
        self.net = mlp(n_obs, 2 * n_act, hidden)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("center", (high + low) / 2)

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, -1)
        return mean, log_std.clamp(-5.0, 2.0)

    def sample(self, obs):
        mean, log_std = self(obs)
        std = log_std.exp()
        noise = rlpipe.randn_like(mean)
        squashed = (mean + std * noise).tanh()
        log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)
                    - (1 - squashed.pow(2) + 1e-6).log()).sum(-1)
        return self.center + self.scale * squashed, log_prob

    def greedy(self, obs):
        return self.center + self.scale * self(obs)[0].tanh()


class Critic(nn.Module):
    """Two independent Q-networks Q(s, a); the smaller estimate curbs overestimation."""

    def __init__(self, n_obs, n_act, hidden):
        super().__init__()
        self.q1, self.q2 = mlp(n_obs + n_act, 1, hidden), mlp(n_obs + n_act, 1, hidden)

    def forward(self, obs, action):
        x = rlpipe.cat([obs, action], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def evaluate(actor, episodes, seed, device):
    """Mean return of the deterministic actor over ``episodes`` episodes of a separate env."""
    env = GymEnv("Pendulum-v1", device=device)
    env.set_seed(seed)
    returns = []
    with rlpipe.no_grad():
        for _ in range(episodes):
            rollout = env.rollout(1_000, policy=lambda td: td.set("action", actor.greedy(td.get("observation"))))
            returns.append(rollout["next", "reward"].sum().item())
    env.close()
    return sum(returns) / len(returns)


def progress(total, disabled):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return None if disabled else tqdm(total=total, unit="frames")


def save_plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["frames"] for r in rows], [r["eval_return"] for r in rows], marker="o")
    ax.set(xlabel="environment frames", ylabel="deterministic return (mean of eval episodes)",
           title="SAC, Pendulum-v1")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return True


def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    env = GymEnv("Pendulum-v1", device=device)
    env.set_seed(args.seed)
    n_obs, n_act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    actor = Actor(n_obs, n_act, args.hidden, env.action_spec.low, env.action_spec.high).to(device)
    critic, target_critic = Critic(n_obs, n_act, args.hidden).to(device), Critic(n_obs, n_act, args.hidden).to(device)
    target_critic.load_state_dict(critic.state_dict())
    log_alpha = rlpipe.zeros((), device=device, requires_grad=True)
    target_entropy = -float(n_act)
    actor_opt = rlpipe.optim.Adam(actor.parameters(), lr=args.lr)
    critic_opt = rlpipe.optim.Adam(critic.parameters(), lr=args.lr)
    alpha_opt = rlpipe.optim.Adam([log_alpha], lr=args.lr)

    def explore(td):
        return td.set("action", actor.sample(td.get("observation"))[0])

    collector = SyncDataCollector(env, explore, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames,
                                  policy_device=device,
                                  init_random_frames=args.learning_starts,
                                  postproc=MultiStep(gamma=args.gamma, n_steps=args.n_steps))
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(args.buffer_size, device=device),
                                    batch_size=args.batch_size)

    def update(batch):
        obs, action = batch["observation"], batch["action"]
        alpha = log_alpha.exp().detach()
        with rlpipe.no_grad():
            next_action, next_log_prob = actor.sample(batch["next", "observation"])
            next_q = rlpipe.minimum(*target_critic(batch["next", "observation"], next_action))
            alive = batch["next", "terminated"].squeeze(-1).logical_not().float()
            target = batch["next", "reward"].squeeze(-1) + batch["gamma"] * alive * (next_q - alpha * next_log_prob)
        q1, q2 = critic(obs, action)
        critic_loss = nn.functional.mse_loss(q1, target) + nn.functional.mse_loss(q2, target)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()

        new_action, log_prob = actor.sample(obs)
        actor_loss = (alpha * log_prob - rlpipe.minimum(*critic(obs, new_action))).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()

        alpha_loss = -(log_alpha * (log_prob.detach() + target_entropy)).mean()
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()

        with rlpipe.no_grad():
            for p, tp in zip(critic.parameters(), target_critic.parameters()):
                tp.mul_(1 - args.tau).add_(p, alpha=args.tau)

    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"sac_pendulum_seed{args.seed}")
    rows, frames, owed, solved_at = [], 0, 0.0, None
    bar = progress(args.total_frames, args.no_progress)
    start = time.perf_counter()
    for batch in collector:
        frames += batch.numel()
        buffer.extend(batch.reshape(-1))
        if frames >= args.learning_starts:
            owed += args.updates_per_frame * batch.numel()
            while owed >= 1:
                update(buffer.sample())
                owed -= 1
        if bar is not None:
            bar.update(batch.numel())
        if frames // args.eval_every > (frames - batch.numel()) // args.eval_every:  # passed a multiple of it
            score = evaluate(actor, args.eval_episodes, args.seed + frames, device)
            rows.append({"frames": frames, "eval_return": round(score, 2), "alpha": round(log_alpha.exp().item(), 4),
                         "seconds": round(time.perf_counter() - start, 2)})
            if bar is not None:
                bar.set_postfix(eval_return=score)
            else:
                print(f"frames {frames:>7d}  eval return {score:8.1f}  alpha {rows[-1]['alpha']:.3f}", flush=True)
            if solved_at is None and score > args.target_return:
                solved_at = frames
    collector.shutdown()
    if bar is not None:
        bar.close()

    with open(stem + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["frames", "eval_return", "alpha", "seconds"])
        writer.writeheader()
        writer.writerows(rows)
    seconds = time.perf_counter() - start
    outcome = f"first above {args.target_return} at {solved_at} frames" if solved_at else \
        f"never above {args.target_return} within {frames} frames"
    print(f"seed {args.seed}: {outcome}, final eval {rows[-1]['eval_return'] if rows else float('nan')}, "
          f"{seconds:.1f} s; wrote {stem}.csv" + (" and .png" if save_plot(rows, stem + ".png") else ""))
    return solved_at


if __name__ == "__main__":
    main()
