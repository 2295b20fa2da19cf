"""PPO (clipped surrogate, GAE) on CartPole-v1, in one file.

    python examples/ppo_cartpole.py --seed 0 [--total-frames 150000] [--num-envs 8] [--device cpu]

A SyncDataCollector steps --num-envs vectorized CartPoles with a categorical policy (a
ProbabilisticActor sampling from its logits); GAE writes advantages and value targets into each
[num_envs, steps] batch; ClipPPOLoss trains actor and critic for --epochs passes over minibatches
of the batch, with the learning rate annealed linearly to zero. The greedy
policy (the most likely action) is evaluated every --eval-every frames; training stops once its
mean return over --eval-episodes episodes reaches --target-return.
Writes runs/ppo_cartpole_seed{seed}.csv row by row (and redraws a .png when matplotlib is installed); Ctrl-C
stops the run and keeps them.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: small matrices only lose time to threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.distributions import Categorical
from rlpipe.envs import GymEnv
from rlpipe.modules import MLP, ProbabilisticActor, ValueOperator
from rlpipe.objectives import ClipPPOLoss
from rlpipe.objectives.value import GAE
from rlpipe.record import RunLog
from rlpipe.tensordict import TensorDictModule
from rlpipe.tensordict.nn import InteractionType, set_interaction_type


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator and of the environments")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--total-frames", type=int, default=150_000, help="environment frames to collect at most")
    p.add_argument("--num-envs", type=int, default=8, help="CartPoles stepped together (a Gymnasium vector env)")
    p.add_argument("--steps", type=int, default=32, help="steps per env in each collected batch")
    p.add_argument("--epochs", type=int, default=20, help="passes over each batch")
    p.add_argument("--minibatch-size", type=int, default=256, help="transitions per gradient step")
    p.add_argument("--gamma", type=float, default=0.98, help="the discount factor")
    p.add_argument("--lmbda", type=float, default=0.8, help="GAE's lambda")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate at the start (annealed to 0)")
    p.add_argument("--clip-epsilon", type=float, default=0.2, help="PPO's clip range")
    p.add_argument("--entropy-coeff", type=float, default=0.0, help="weight of the entropy bonus")
    p.add_argument("--critic-coeff", type=float, default=0.5, help="weight of the critic loss")
    p.add_argument("--max-grad-norm", type=float, default=0.5, help="gradient norm clipping")
    p.add_argument("--hidden", type=int, default=64, help="units in each of the two hidden layers")
    p.add_argument("--eval-every", type=int, default=10_000,
                   help="evaluate the greedy policy each time the frame count passes a multiple of this")
    p.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation")
    p.add_argument("--target-return", type=float, default=475.0,
                   help="stop once an evaluation's mean return reaches this")
    p.add_argument("--out-dir", default="runs", help="where the CSV (and the plot) go")
    p.add_argument("--no-progress", action="store_true",
                   help="print evaluations instead of showing a tqdm progress bar")
    return p.parse_args()


def make_modules(n_obs, n_actions, hidden, device):
    policy_net = MLP(in_features=n_obs, out_features=n_actions, num_cells=[hidden, hidden], activation_class=nn.Tanh)
    actor = ProbabilisticActor(TensorDictModule(policy_net, in_keys=["observation"], out_keys=["logits"]),
                               in_keys=["logits"], distribution_class=Categorical, return_log_prob=True,
                               default_interaction_type=InteractionType.RANDOM)
    value_net = MLP(in_features=n_obs, out_features=1, num_cells=[hidden, hidden], activation_class=nn.Tanh)
    return actor.to(device), ValueOperator(value_net, in_keys=["observation"]).to(device)


def evaluate(actor, episodes, seed, device):
    """Mean return of the greedy policy over ``episodes`` episodes of a separate env."""
    env = GymEnv("CartPole-v1", categorical_action_encoding=True, device=device)
    env.set_seed(seed)
    returns = []
    with rlpipe.no_grad(), set_interaction_type(InteractionType.MODE):
        for _ in range(episodes):
            rollout = env.rollout(1_000, policy=actor)
            returns.append(rollout["next", "reward"].sum().item())
    env.close()
    return sum(returns) / len(returns)



def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    env = GymEnv("CartPole-v1", num_envs=args.num_envs, categorical_action_encoding=True, device=device)
    env.set_seed(args.seed)
    actor, critic = make_modules(env.observation_spec["observation"].shape[-1], env.action_spec.n, args.hidden, device)
    advantage = GAE(gamma=args.gamma, lmbda=args.lmbda, value_network=critic)
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=args.clip_epsilon, entropy_coeff=args.entropy_coeff,
                              critic_coeff=args.critic_coeff, loss_critic_type="l2", normalize_advantage=True)
    optimizer = rlpipe.optim.Adam(loss_module.parameters(), lr=args.lr)
    frames_per_batch = args.num_envs * args.steps
    collector = SyncDataCollector(env, actor, frames_per_batch=frames_per_batch, total_frames=args.total_frames,
                                  device=device)  # policy, env and the batches it returns

    frames, solved_at = 0, None
    with RunLog(args.out_dir, f"ppo_cartpole_seed{args.seed}", ["frames", "eval_return", "seconds"],
                plot=("frames", "eval_return"), title="PPO, CartPole-v1: greedy return",
                total=args.total_frames, progress=not args.no_progress) as log:
        for batch in collector:
            frames += batch.numel()
            progress_left = max(0.0, 1 - frames / args.total_frames)
            for group in optimizer.param_groups:
                group["lr"] = args.lr * progress_left
            with rlpipe.no_grad():
                advantage(batch)  # advantage and value_target, once per batch
            flat = batch.reshape(-1)
            for _ in range(args.epochs):
                order = rlpipe.randperm(flat.numel(), device=device)
                for i in range(0, flat.numel(), args.minibatch_size):
                    losses = loss_module(flat[order[i:i + args.minibatch_size]])
                    loss = losses["loss_objective"] + losses["loss_critic"]
                    if "loss_entropy" in losses.keys():
                        loss = loss + losses["loss_entropy"]
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(loss_module.parameters(), args.max_grad_norm)
                    optimizer.step()
            log.advance(batch.numel())
            if frames // args.eval_every > (frames - batch.numel()) // args.eval_every:  # passed a multiple of it
                score = evaluate(actor, args.eval_episodes, args.seed + frames, device)
                log.write(frames=frames, eval_return=score, seconds=round(log.seconds, 2))
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
