"""torchrl's getting-started DQN loop (its sixth tutorial) on rlpipe, in one file.

    python examples/dqn_getting_started.py --seed 0 [--out-dir runs/getting_started] [--no-video] [--device cpu]

A SyncDataCollector runs CartPole-v1 (with a StepCounter) under an epsilon-greedy Q-value policy
(MLP -> QValueModule -> EGreedyModule); after --init-random-frames random frames, each batch of
--frames-per-batch frames is followed by --optim-steps Adam steps on DQNLoss, epsilon annealed by the
frames seen and the target network soft-updated (SoftUpdate, eps=0.99). Training stops once an episode in
the replay buffer lasts longer than --solved-length steps (or after --total-frames). The greedy policy then
plays one episode in a rendering env whose VideoRecorder writes an mp4.

Writes, under <out-dir>/<exp-name>/ (torchrl's CSVLogger layout): scalars/*.csv (frames, max episode
length, loss, epsilon) as they come, training.png (needs matplotlib; redrawn every 10 batches),
videos/video_0.mp4 (needs `pip install rlpipe[video]`). Ctrl-C stops training and keeps them.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # render without a display

import argparse
import csv

import rlpipe as torch
from rlpipe.collectors import SyncDataCollector
from rlpipe.data import LazyTensorStorage, ReplayBuffer
from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
from rlpipe.envs.utils import ExplorationType, set_exploration_type
from rlpipe.modules import MLP, EGreedyModule, QValueModule
from rlpipe.objectives import DQNLoss, SoftUpdate
from rlpipe.record import CSVLogger, VideoRecorder, progress_bar
from rlpipe.tensordict import TensorDictModule as Mod
from rlpipe.tensordict import TensorDictSequential as Seq


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's generator and of the environment")
    p.add_argument("--frames-per-batch", type=int, default=100, help="frames the collector gathers per batch")
    p.add_argument("--init-random-frames", type=int, default=5000, help="random frames before training starts")
    p.add_argument("--optim-steps", type=int, default=10, help="Adam steps after each batch")
    p.add_argument("--batch-size", type=int, default=128, help="transitions per Adam step")
    p.add_argument("--buffer-size", type=int, default=100_000, help="replay buffer capacity")
    p.add_argument("--lr", type=float, default=0.02, help="Adam's learning rate")
    p.add_argument("--eps-init", type=float, default=0.5, help="initial epsilon of the epsilon-greedy policy")
    p.add_argument("--annealing-steps", type=int, default=100_000, help="frames over which epsilon anneals")
    p.add_argument("--target-eps", type=float, default=0.99, help="SoftUpdate's eps (target = eps*target + ...)")
    p.add_argument("--solved-length", type=int, default=200, help="stop once an episode lasts longer than this")
    p.add_argument("--total-frames", type=int, default=200_000, help="stop after this many frames in any case")
    p.add_argument("--video-steps", type=int, default=1000, help="steps of the recorded greedy episode at most")
    p.add_argument("--no-video", action="store_true", help="skip the rendered episode and its mp4")
    p.add_argument("--out-dir", default="runs/getting_started", help="where the logger writes")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--no-progress", action="store_true",
                   help="print every 10th batch instead of showing a tqdm progress bar")
    p.add_argument("--exp-name", default=None, help="experiment name (default dqn_seed<seed>)")
    return p.parse_args()


def write_plot(scalars_dir, path):
    """Max episode length and loss against frames, from the logger's CSV files (skipped without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return

    def series(name):
        with open(os.path.join(scalars_dir, name + ".csv"), newline="") as f:
            return [(int(step), float(value)) for step, value in csv.reader(f)]

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, name in zip(axes, ("max_episode_length", "loss")):
        points = series(name) if os.path.exists(os.path.join(scalars_dir, name + ".csv")) else []
        ax.plot([s for s, _ in points], [v for _, v in points])
        ax.set_xlabel("frames")
        ax.set_title(name)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    env = TransformedEnv(GymEnv("CartPole-v1", device=device), StepCounter())
    env.set_seed(args.seed)

    value_mlp = MLP(out_features=env.action_spec.shape[-1], num_cells=[64, 64], device=device)
    value_net = Mod(value_mlp, in_keys=["observation"], out_keys=["action_value"])
    policy = Seq(value_net, QValueModule(spec=env.action_spec))
    exploration_module = EGreedyModule(env.action_spec, annealing_num_steps=args.annealing_steps,
                                       eps_init=args.eps_init, device=device)
    policy_explore = Seq(policy, exploration_module)

    collector = SyncDataCollector(env, policy_explore, frames_per_batch=args.frames_per_batch, total_frames=-1,
                                  init_random_frames=args.init_random_frames)
    rb = ReplayBuffer(storage=LazyTensorStorage(args.buffer_size, device=device))
    loss = DQNLoss(value_network=policy, action_space=env.action_spec, delay_value=True)
    optim = torch.optim.Adam(loss.parameters(), lr=args.lr)
    updater = SoftUpdate(loss, eps=args.target_eps)

    exp_name = args.exp_name or f"dqn_seed{args.seed}"
    logger = CSVLogger(exp_name=exp_name, log_dir=args.out_dir, video_format="mp4")
    logger.log_hparams(vars(args))
    experiment_dir = os.path.join(args.out_dir, exp_name)
    bar = None if args.no_progress else progress_bar(args.total_frames)

    frames, max_length, interrupted = 0, 0, False
    try:
        for data in collector:
            rb.extend(data)
            frames += data.numel()
            max_length = int(rb[:]["next", "step_count"].max())
            if len(rb) > args.init_random_frames:
                for _ in range(args.optim_steps):
                    loss_vals = loss(rb.sample(args.batch_size))
                    loss_vals["loss"].backward()
                    optim.step()
                    optim.zero_grad()
                    exploration_module.step(data.numel())
                    updater.step()
                logger.log_scalar("loss", loss_vals["loss"].item(), step=frames)
            logger.log_scalar("max_episode_length", max_length, step=frames)
            logger.log_scalar("epsilon", exploration_module.eps.item(), step=frames)
            if bar is not None:
                bar.update(data.numel())
                bar.set_postfix(max_episode_length=max_length, eps=round(exploration_module.eps.item(), 3))
            if frames % (10 * args.frames_per_batch) == 0:
                write_plot(os.path.join(experiment_dir, "scalars"), os.path.join(experiment_dir, "training.png"))
                if bar is None:
                    print(f"frames {frames}  max episode length {max_length}  eps {exploration_module.eps.item():.3f}",
                          flush=True)
            if max_length > args.solved_length or frames >= args.total_frames:
                break
    except KeyboardInterrupt:
        interrupted = True
    if bar is not None:
        bar.close()
    collector.shutdown()
    write_plot(os.path.join(experiment_dir, "scalars"), os.path.join(experiment_dir, "training.png"))
    outcome = "interrupted" if interrupted else "solved" if max_length > args.solved_length else "stopped"
    print(f"{outcome} after {frames} frames (longest episode in the buffer: {max_length} steps); "
          f"logs in {experiment_dir}")

    if not args.no_video and not interrupted:
        recorder = VideoRecorder(logger, tag="video", skip=1)
        record_env = TransformedEnv(GymEnv("CartPole-v1", from_pixels=True, pixels_only=False, device=device),
                                    recorder)
        record_env.set_seed(args.seed + 1)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            episode = record_env.rollout(max_steps=args.video_steps, policy=policy)
        recorder.dump()
        print(f"greedy episode: {episode.batch_size[0]} steps, video in {os.path.join(experiment_dir, 'videos')}")
        record_env.close()
    env.close()


if __name__ == "__main__":
    main()
