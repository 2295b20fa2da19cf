"""DQN with n-step targets (MultiStep) on CartPole-v1, in one file.

    python examples/dqn_cartpole.py --seed 0 [--total-frames 100000] [--device cpu]

A SyncDataCollector steps the env with an epsilon-greedy Q-network; MultiStep turns each batch into
n-step transitions; a replay buffer stores them; every batch is followed by a few Adam steps on
DQNLoss (the Huber loss against a target network, the n-step discount read from MultiStep's
steps_to_next_obs), the target network copied by HardUpdate. The greedy policy is evaluated every --eval-every frames;
training stops once its mean return over --eval-episodes episodes reaches --target-return.
Writes runs/dqn_cartpole_seed{seed}.csv row by row (and redraws a .png when matplotlib is installed); Ctrl-C stops
the run and keeps them.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: these small matrices only lose
os.environ.setdefault("OMP_NUM_THREADS", "1")       # time to more BLAS threads (badly so on a busy machine)

import argparse

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, TensorDictReplayBuffer
from rlpipe.envs import GymEnv
from rlpipe.objectives import DQNLoss, HardUpdate
from rlpipe.postprocs import MultiStep
from rlpipe.record import RunLog


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator and of the environments")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--total-frames", type=int, default=100_000, help="environment frames to collect at most")
    p.add_argument("--frames-per-batch", type=int, default=10,
                   help="frames the collector gathers between training phases")
    p.add_argument("--updates-per-frame", type=float, default=0.5,
                   help="gradient steps per collected frame (0.5: 5 after each batch of 10)")
    p.add_argument("--n-steps", type=int, default=3, help="steps of the n-step return (MultiStep)")
    p.add_argument("--gamma", type=float, default=0.99, help="the discount factor")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    p.add_argument("--batch-size", type=int, default=128,
                   help="transitions per gradient step, sampled from the replay buffer")
    p.add_argument("--buffer-size", type=int, default=50_000, help="capacity of the replay buffer, in transitions")
    p.add_argument("--hidden", type=int, default=128, help="units in each of the Q-network's two hidden layers")
    p.add_argument("--eps-start", type=float, default=1.0, help="epsilon of the epsilon-greedy policy at the start")
    p.add_argument("--eps-end", type=float, default=0.02, help="epsilon once the decay is over")
    p.add_argument("--eps-frames", type=int, default=20_000, help="frames over which epsilon decays linearly")
    p.add_argument("--learning-starts", type=int, default=1_000, help="random frames before training")
    p.add_argument("--target-update", type=int, default=500, help="gradient steps between target-net copies")
    p.add_argument("--eval-every", type=int, default=5_000,
                   help="evaluate the greedy policy each time the frame count passes a multiple of this")
    p.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    p.add_argument("--target-return", type=float, default=475.0,
                   help="stop once an evaluation's mean return reaches this")
    p.add_argument("--out-dir", default="runs", help="where the CSV (and the plot) go")
    p.add_argument("--no-progress", action="store_true",
                   help="print evaluations instead of showing a tqdm progress bar")
    return p.parse_args()


class EpsilonGreedy:
    """The collector's policy: the Q-network's greedy action, or a random one with probability eps."""

    def __init__(self, q_net, n_actions, device):
        self.q_net, self.n_actions, self.device, self.eps = q_net, n_actions, device, 1.0

    def __call__(self, td):
        if rlpipe.rand(()).item() < self.eps:
            action = rlpipe.randint(0, self.n_actions, (), device=self.device)
        else:
            action = self.q_net(td.get("observation")).argmax(-1)
        td.set("action", action)
        return td


def evaluate(q_net, episodes, seed, device):
    """Mean return of the greedy policy over ``episodes`` episodes of a separate env."""
    env = GymEnv("CartPole-v1", device=device, categorical_action_encoding=True)
    env.set_seed(seed)
    returns = []
    with rlpipe.no_grad():
        for _ in range(episodes):
            rollout = env.rollout(1_000, policy=lambda td: td.set("action", q_net(td.get("observation")).argmax(-1)))
            returns.append(rollout["next", "reward"].sum().item())
    env.close()
    return sum(returns) / len(returns)



def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    env = GymEnv("CartPole-v1", device=device, categorical_action_encoding=True)
    env.set_seed(args.seed)
    n_obs, n_actions = env.observation_spec["observation"].shape[-1], env.action_spec.n

    def make_q_net():
        return nn.Sequential(nn.Linear(n_obs, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden),
                             nn.ReLU(), nn.Linear(args.hidden, n_actions)).to(device)

    q_net = make_q_net()
    # r_n + gamma ** n * (1 - terminated) * max_a Q_target(s_n, a), against Q(s, a) with the Huber loss
    loss_module = DQNLoss(q_net, loss_function="smooth_l1", action_space="categorical", delay_value=True)
    loss_module.make_value_estimator(gamma=args.gamma)
    target_updater = HardUpdate(loss_module, value_network_update_interval=args.target_update - 1)
    optimizer = rlpipe.optim.Adam(loss_module.parameters(), lr=args.lr)
    policy = EpsilonGreedy(q_net, n_actions, device)
    collector = SyncDataCollector(env, policy, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames,
                                  policy_device=device,
                                  init_random_frames=args.learning_starts,
                                  postproc=MultiStep(gamma=args.gamma, n_steps=args.n_steps))
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(args.buffer_size, device=device),
                                    batch_size=args.batch_size)

    frames, owed, solved_at = 0, 0.0, None
    with RunLog(args.out_dir, f"dqn_cartpole_seed{args.seed}", ["frames", "eval_return", "epsilon", "seconds"],
                plot=("frames", "eval_return"), title="DQN, CartPole-v1: greedy return",
                total=args.total_frames, progress=not args.no_progress) as log:
        for batch in collector:
            frames += batch.numel()
            buffer.extend(batch.reshape(-1))
            policy.eps = max(args.eps_end, args.eps_start - (args.eps_start - args.eps_end) * frames / args.eps_frames)
            if frames >= args.learning_starts:
                owed += args.updates_per_frame * batch.numel()
                while owed >= 1:
                    loss = loss_module(buffer.sample())["loss"]
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    target_updater.step()  # a copy every --target-update gradient steps
                    owed -= 1
            log.advance(batch.numel())
            if frames // args.eval_every > (frames - batch.numel()) // args.eval_every:  # passed a multiple of it
                score = evaluate(q_net, args.eval_episodes, args.seed + frames, device)
                log.write(frames=frames, eval_return=score, epsilon=round(policy.eps, 4), seconds=round(log.seconds, 2))
                if score >= args.target_return:
                    solved_at = frames
                    break
    collector.shutdown()
    outcome = f"reached {args.target_return} at {solved_at} frames" if solved_at else \
        f"did not reach {args.target_return} within {frames} frames"
    log.finish(f"seed {args.seed}: {outcome}", frames)
    return solved_at


if __name__ == "__main__":
    main()
