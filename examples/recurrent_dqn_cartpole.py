"""Recurrent DQN (an LSTMModule Q-network) on CartPole-v1 without its velocities, in one file.

    python examples/recurrent_dqn_cartpole.py --net lstm --seed 0 [--total-frames 50000] [--device cpu]
    python examples/recurrent_dqn_cartpole.py --net mlp --seed 0      # the feed-forward baseline

The Q-network sees only the cart position and the pole angle (observation indices 0 and 2): the
velocities must be inferred from what came before, which a feed-forward net cannot do. As in torchrl's
recurrent tutorial, the env gets an InitTracker ("is_init": an episode's first step) and the LSTMModule's
make_tensordict_primer() (the state as an observation, zeros at each reset); a SyncDataCollector steps it
with the epsilon-greedy network step by step, handing ("next", "recurrent_state_h"/"_c") to the next step,
and each batch of --seq-len frames is kept whole as one training sequence (with the state stored at each
step). Training replays sampled sequences in recurrent mode (set_recurrent_mode(True): one LSTM run per
sequence, cut where an episode starts, each piece from its stored first state), with 1-step targets from a
target network on the same sequences.

Every --eval-every frames the greedy policy plays --eval-episodes episodes. Writes
runs/recurrent_dqn_cartpole_{net}_seed{seed}.csv row by row and redraws its .png (matplotlib), and at the end
runs/recurrent_dqn_cartpole_seed{seed}.png with both nets' curves when both CSVs are there; Ctrl-C stops the run
and keeps them.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: these small matrices only lose
os.environ.setdefault("OMP_NUM_THREADS", "1")       # time to more BLAS threads

import argparse
import copy
import csv

import rlpipe
from rlpipe import nn
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import GymEnv, InitTracker, RewardSum, TransformedEnv
from rlpipe.modules import EGreedyModule, LSTMModule, QValueModule, set_recurrent_mode
from rlpipe.record import RunLog
from rlpipe.tensordict import TensorDictModule, TensorDictSequential

STATE_KEYS = ["recurrent_state_h", "recurrent_state_c"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--net", choices=["lstm", "mlp"], default="lstm", help="recurrent or feed-forward Q-network")
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator and of the environments")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--total-frames", type=int, default=50_000, help="environment frames to collect")
    p.add_argument("--seq-len", type=int, default=20, help="frames per collected batch = per training sequence")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per gradient step")
    p.add_argument("--updates-per-frame", type=float, default=0.1,
                   help="gradient steps per collected frame (0.1: 2 after each sequence of 20)")
    p.add_argument("--buffer-size", type=int, default=2_500, help="sequences the replay keeps")
    p.add_argument("--hidden", type=int, default=64, help="units of the LSTM (or first layer) and of the head")
    p.add_argument("--gamma", type=float, default=0.99, help="the discount factor")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    p.add_argument("--eps-end", type=float, default=0.05, help="epsilon once the decay is over (it starts at 1)")
    p.add_argument("--eps-frames", type=int, default=15_000, help="frames over which epsilon decays linearly")
    p.add_argument("--learning-starts", type=int, default=2_000, help="frames before training")
    p.add_argument("--target-update", type=int, default=250, help="gradient steps between target-net copies")
    p.add_argument("--eval-every", type=int, default=5_000, help="frames between evaluations of the greedy policy")
    p.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation")
    p.add_argument("--out-dir", default="runs", help="where the CSV (and the plot) go")
    p.add_argument("--no-progress", action="store_true",
                   help="print evaluations instead of showing a tqdm progress bar")
    return p.parse_args()


def make_env(device, seed, q_net):
    """CartPole with InitTracker, RewardSum and, for a recurrent q_net, its LSTM's primer."""
    env = TransformedEnv(GymEnv("CartPole-v1", device=device, categorical_action_encoding=True), InitTracker())
    env.append_transform(RewardSum())
    for module in q_net.modules():
        if isinstance(module, LSTMModule):
            env.append_transform(module.make_tensordict_primer())
    env.set_seed(seed)
    return env


def hide_velocities(observation):
    """The cart position and pole angle (indices 0 and 2)."""
    return observation[..., 0::2]


def make_q_net(net, hidden, device):
    """The Q-network on sequences or steps: reads "position" (and the LSTM state), writes "action_value"."""
    if net == "lstm":
        features = LSTMModule(input_size=2, hidden_size=hidden, in_key="position", out_key="features", device=device)
    else:
        features = TensorDictModule(nn.Sequential(nn.Linear(2, hidden), nn.ReLU()).to(device),
                                    in_keys=["position"], out_keys=["features"])
    head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2)).to(device)
    return TensorDictSequential(features, TensorDictModule(head, in_keys=["features"], out_keys=["action_value"]))


def greedy_policy(q_net):
    """Acts step by step on the env's tensordicts: hides the velocities, runs q_net, picks the argmax."""
    observe = TensorDictModule(hide_velocities, in_keys=["observation"], out_keys=["position"])
    return TensorDictSequential(observe, q_net, QValueModule(action_space="categorical"))


def training_sequence(batch, net):
    """What training reads of a collected batch [seq_len] (the primer stored zeros where an episode starts)."""
    keys = ["position", "is_init", "action", ("next", "reward"), ("next", "terminated"), ("next", "truncated")]
    return batch.select(*keys, *(STATE_KEYS if net == "lstm" else [])).clone()


def td_loss(q_net, target_net, batch, gamma):
    """Huber loss of Q(s_t, a_t) against r_t + gamma * (1 - terminated_t) * max_a Q_target(s_t+1, a) on every
    step of the [B, T] sequences that has a next step in the sequence and was not truncated."""
    with set_recurrent_mode(True):
        values = q_net(batch.clone())["action_value"]
        with rlpipe.no_grad():
            next_values = target_net(batch.clone())["action_value"].max(-1).values[:, 1:]
    chosen = values.gather(-1, batch["action"].unsqueeze(-1)).squeeze(-1)[:, :-1]
    reward = batch["next", "reward"].squeeze(-1)[:, :-1]
    alive = (~batch["next", "terminated"].squeeze(-1)[:, :-1]).float()
    target = reward + gamma * alive * next_values
    valid = (~batch["next", "truncated"].squeeze(-1)[:, :-1]).float()
    losses = nn.functional.smooth_l1_loss(chosen, target, reduction="none")
    return (losses * valid).sum() / valid.sum().clamp(min=1.0)


def evaluate(policy, episodes, seed, device):
    """Mean return of ``policy`` over ``episodes`` episodes, collected step by step by a SyncDataCollector."""
    env = make_env(device, seed, policy)
    collector = SyncDataCollector(env, policy, frames_per_batch=500, total_frames=-1)
    returns = []
    for batch in collector:
        done = batch["next", "done"].squeeze(-1)
        returns += batch["next", "episode_reward"][done].squeeze(-1).tolist()
        if len(returns) >= episodes:
            break
    collector.shutdown()
    return sum(returns[:episodes]) / episodes


def save_comparison_plot(out_dir, seed, path):
    """Both nets' curves in one figure, from their CSVs (skipped without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for net in ("lstm", "mlp"):
        csv_path = os.path.join(out_dir, f"recurrent_dqn_cartpole_{net}_seed{seed}.csv")
        if os.path.exists(csv_path):
            with open(csv_path, newline="") as f:
                rows = list(csv.DictReader(f))
            ax.plot([int(r["frames"]) for r in rows], [float(r["eval_return"]) for r in rows], marker="o",
                    label=net)
    ax.set(xlabel="environment frames", ylabel="greedy return (mean of eval episodes)",
           title="DQN, CartPole-v1 without velocities")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return True


def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    q_net = make_q_net(args.net, args.hidden, device)
    env = make_env(device, args.seed, q_net)
    target_net = copy.deepcopy(q_net)
    optimizer = rlpipe.optim.Adam(q_net.parameters(), lr=args.lr)
    explore = EGreedyModule(env.action_spec, eps_init=1.0, eps_end=args.eps_end, annealing_num_steps=args.eps_frames,
                            device=device)
    collector = SyncDataCollector(env, TensorDictSequential(greedy_policy(q_net), explore),
                                  frames_per_batch=args.seq_len, total_frames=args.total_frames, policy_device=device)

    sequences, frames, owed = [], 0, 0.0
    updates = 0
    with RunLog(args.out_dir, f"recurrent_dqn_cartpole_{args.net}_seed{args.seed}",
                ["frames", "eval_return", "epsilon", "seconds"], plot=("frames", "eval_return"),
                title=f"DQN ({args.net}), CartPole-v1 without velocities: greedy return",
                total=args.total_frames, progress=not args.no_progress) as log:
        for batch in collector:
            frames += batch.numel()
            explore.step(batch.numel())
            sequences = (sequences + [training_sequence(batch, args.net)])[-args.buffer_size:]
            if frames >= args.learning_starts:
                owed += args.updates_per_frame * batch.numel()
                while owed >= 1:
                    picks = rlpipe.randint(0, len(sequences), (args.batch_size,)).tolist()
                    loss = td_loss(q_net, target_net, rlpipe.stack([sequences[i] for i in picks]), args.gamma)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    owed -= 1
                    updates += 1
                    if updates % args.target_update == 0:
                        target_net.load_state_dict(q_net.state_dict())
            log.advance(batch.numel())
            if frames // args.eval_every > (frames - batch.numel()) // args.eval_every:  # passed a multiple of it
                with rlpipe.no_grad():
                    score = evaluate(greedy_policy(q_net), args.eval_episodes, args.seed + frames, device)
                log.write(frames=frames, eval_return=score, epsilon=round(float(explore.eps.item()), 4),
                          seconds=round(log.seconds, 2))
    collector.shutdown()
    best = max((r["eval_return"] for r in log.rows), default=float("nan"))
    compared = os.path.join(args.out_dir, f"recurrent_dqn_cartpole_seed{args.seed}.png")
    also = f"; both nets' curves in {compared}" if save_comparison_plot(args.out_dir, args.seed, compared) else ""
    log.finish(f"{args.net}, seed {args.seed}: best greedy return {best:.1f} in {frames} frames", frames)
    if also:
        print(also[2:])


if __name__ == "__main__":
    main()
