"""Soft actor-critic with n-step targets (MultiStep) on Pendulum-v1, in one file.

    python examples/sac_pendulum.py --seed 0 [--total-frames 30000] [--device cpu]

A tanh-squashed Gaussian actor (a ProbabilisticActor with TanhNormal), two Q-networks and a learned
entropy temperature, trained by SACLoss (squared TD errors against the Polyak-averaged target critics
of SoftUpdate, the n-step discount read from MultiStep's steps_to_next_obs). A SyncDataCollector steps
the env with the stochastic actor, MultiStep turns each batch into n-step transitions and a replay
buffer stores them; each collected frame is followed by --updates-per-frame gradient steps. The
deterministic actor (tanh of the mean) is evaluated every --eval-every frames. Writes
runs/sac_pendulum_seed{seed}.csv row by row (and redraws a .png when matplotlib is installed); Ctrl-C stops the
run and keeps them.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: these small matrices only lose
os.environ.setdefault("OMP_NUM_THREADS", "1")       # time to more BLAS threads (badly so on a busy machine)

import argparse

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, TensorDictReplayBuffer
from rlpipe.envs import ExplorationType, GymEnv, set_exploration_type
from rlpipe.modules import ProbabilisticActor, TanhNormal, ValueOperator
from rlpipe.objectives import SACLoss, SoftUpdate
from rlpipe.postprocs import MultiStep
from rlpipe.record import RunLog
from rlpipe.tensordict import TensorDictModule


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
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


class GaussianHead(nn.Module):
    """Splits a network's output into the location and the scale of a Gaussian (the log-scale
    clamped to [-5, 2])."""

    def forward(self, out):
        loc, log_std = out.chunk(2, -1)
        return loc, log_std.clamp(-5.0, 2.0).exp()


def make_actor(n_obs, n_act, hidden, action_spec):
    """A policy drawing from tanh(Normal(loc, scale)) rescaled to the action bounds."""
    net = TensorDictModule(nn.Sequential(mlp(n_obs, 2 * n_act, hidden), GaussianHead()), in_keys=["observation"],
                           out_keys=["loc", "scale"])
    return ProbabilisticActor(net, in_keys=["loc", "scale"], spec=action_spec, distribution_class=TanhNormal,
                              distribution_kwargs={"low": action_spec.low, "high": action_spec.high},
                              return_log_prob=True)


class Concat(nn.Module):
    """Runs ``net`` on its inputs joined along the last dimension."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, *inputs):
        return self.net(rlpipe.cat(inputs, -1))


def make_critic(n_obs, n_act, hidden):
    """Q(s, a): reads the observation and the action, writes "state_action_value"."""
    return ValueOperator(Concat(mlp(n_obs + n_act, 1, hidden)), in_keys=["observation", "action"])


def evaluate(actor, episodes, seed, device):
    """Mean return of the deterministic actor (tanh of the mean) over ``episodes`` episodes of a separate env."""
    env = GymEnv("Pendulum-v1", device=device)
    env.set_seed(seed)
    returns = []
    with rlpipe.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        for _ in range(episodes):
            rollout = env.rollout(1_000, policy=actor)
            returns.append(rollout["next", "reward"].sum().item())
    env.close()
    return sum(returns) / len(returns)



def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    env = GymEnv("Pendulum-v1", device=device)
    env.set_seed(args.seed)
    n_obs, n_act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    actor = make_actor(n_obs, n_act, args.hidden, env.action_spec).to(device)
    critics = [make_critic(n_obs, n_act, args.hidden).to(device) for _ in range(2)]
    loss_module = SACLoss(actor, critics, num_qvalue_nets=2, loss_function="l2", alpha_init=1.0)
    loss_module.make_value_estimator(gamma=args.gamma)  # gamma ** steps_to_next_obs per n-step transition
    target_updater = SoftUpdate(loss_module, tau=args.tau)
    optimizer = rlpipe.optim.Adam(loss_module.parameters(), lr=args.lr)  # actor, critics and log_alpha

    collector = SyncDataCollector(env, actor, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames,
                                  policy_device=device,
                                  init_random_frames=args.learning_starts,
                                  postproc=MultiStep(gamma=args.gamma, n_steps=args.n_steps))
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(args.buffer_size, device=device),
                                    batch_size=args.batch_size)

    def update(batch):
        losses = loss_module(batch)
        optimizer.zero_grad()
        (losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]).backward()
        optimizer.step()
        target_updater.step()

    frames, owed, solved_at = 0, 0.0, None
    with RunLog(args.out_dir, f"sac_pendulum_seed{args.seed}", ["frames", "eval_return", "alpha", "seconds"],
                plot=("frames", "eval_return"), title="SAC, Pendulum-v1: deterministic return",
                total=args.total_frames, progress=not args.no_progress) as log:
        for batch in collector:
            frames += batch.numel()
            buffer.extend(batch.reshape(-1))
            if frames >= args.learning_starts:
                owed += args.updates_per_frame * batch.numel()
                while owed >= 1:
                    update(buffer.sample())
                    owed -= 1
            log.advance(batch.numel())
            if frames // args.eval_every > (frames - batch.numel()) // args.eval_every:  # passed a multiple of it
                score = evaluate(actor, args.eval_episodes, args.seed + frames, device)
                log.write(frames=frames, eval_return=round(score, 2),
                          alpha=round(loss_module.log_alpha.exp().item(), 4), seconds=round(log.seconds, 2))
                if solved_at is None and score > args.target_return:
                    solved_at = frames
    collector.shutdown()
    outcome = f"first above {args.target_return} at {solved_at} frames" if solved_at else \
        f"never above {args.target_return} within {frames} frames"
    final = log.rows[-1]["eval_return"] if log.rows else float("nan")
    log.finish(f"seed {args.seed}: {outcome}, final eval {final}", frames)
    return solved_at


if __name__ == "__main__":
    main()
