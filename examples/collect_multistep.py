"""The torchrl MultiStep reference example, with rlpipe: collect CartPole with a random policy and
n-step returns, and print the step counts that MultiStep shifted.

    python examples/collect_multistep.py --n-steps 4 --frames-per-batch 10 [--device cpu]

Writes the first batch (step_count, next step_count, reward, n-step reward, gamma) to
runs/collect_multistep.csv.
"""
import argparse
import csv
import os

import rlpipe
from rlpipe.collectors import RandomPolicy, SyncDataCollector
from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
from rlpipe.postprocs import MultiStep


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--env", default="CartPole-v1", help="the Gymnasium environment id")
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator and of the environment")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--frames-per-batch", type=int, default=10,
                   help="frames in the collected batch (the one written to the CSV)")
    p.add_argument("--total-frames", type=int, default=2000,
                   help="the collector's total frames (only the first batch is used)")
    p.add_argument("--n-steps", type=int, default=4, help="how many steps MultiStep looks ahead")
    p.add_argument("--gamma", type=float, default=0.99, help="the discount factor")
    p.add_argument("--out-dir", default="runs", help="where collect_multistep.csv goes")
    return p.parse_args()


def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    env = TransformedEnv(GymEnv(args.env, device=args.device), StepCounter())
    env.set_seed(args.seed)
    collector = SyncDataCollector(env, policy=RandomPolicy(env.action_spec), frames_per_batch=args.frames_per_batch,
                                  total_frames=args.total_frames,
                                  postproc=MultiStep(n_steps=args.n_steps, gamma=args.gamma))
    data = next(iter(collector))
    print(data["step_count"])
    # the next step count is shifted by n_steps - 1 steps into the future
    print(data["next", "step_count"])
    collector.shutdown()

    columns = {"step_count": data["step_count"], "next_step_count": data["next", "step_count"],
               "reward": data["next", "original_reward"], "n_step_reward": data["next", "reward"],
               "gamma": data["gamma"], "steps_to_next_obs": data["steps_to_next_obs"]}
    rows = zip(*(c.reshape(-1).tolist() for c in columns.values()))
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "collect_multistep.csv")
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([tuple(columns), *rows])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
