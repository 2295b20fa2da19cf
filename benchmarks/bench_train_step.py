"""CleanRL's SAC update step (sac_continuous_action.py) on rlpipe and on torch, side by side.

The networks are HalfCheetah-sized: two Q-networks 17+6 -> 256 -> 256 -> 1 with Polyak-averaged
targets, an actor 17 -> 256 -> 256 -> (6 means, 6 log-stds) with a tanh-squashed Normal
``rsample``, Adam for each, and the entropy temperature tuned automatically; batch 256. One
"step" is what CleanRL does per environment step on average with its defaults
(``policy_frequency=2`` runs two actor updates every other step): a critic update, an actor
update, an alpha update and the target soft update.

For each library it prints the CPU time (user + system) and the wall time per step, and the minor
page faults per step (``ru_minflt``) after warm-up. The torch side runs in its own process (page
faults are per process), in an interpreter that has torch 2.13:

    python3 benchmarks/bench_train_step.py [--steps 300] [--repeat 3] [--peer-python PATH]

``--peer-python`` defaults to /work/peervenv/bin/python when it exists, else this interpreter;
the torch column is left out when that interpreter cannot import torch. The last column is rlpipe
with its malloc tuning switched off (``RLPIPE_MALLOPT=0``, glibc's defaults). ``--side rlpipe``
or ``--side torch`` measures one library in this process and prints JSON (what the main run
calls).
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse
import json
import resource
import sys
import time

import numpy as np
from peer_process import peer_python, run_side

OBS, ACT, HIDDEN, BATCH = 17, 6, 256, 256
GAMMA, TAU, Q_LR, POLICY_LR = 0.99, 0.005, 1e-3, 3e-4
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def make_sac(lib, seed=0):
    """CleanRL's SAC networks, optimizers and one update step, written once against ``lib``
    (rlpipe or torch, which share these names). Returns ``update()``."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(seed)

    class SoftQNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(OBS + ACT, HIDDEN)
            self.fc2 = nn.Linear(HIDDEN, HIDDEN)
            self.fc3 = nn.Linear(HIDDEN, 1)

        def forward(self, x, a):
            x = lib.cat([x, a], 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(OBS, HIDDEN)
            self.fc2 = nn.Linear(HIDDEN, HIDDEN)
            self.fc_mean = nn.Linear(HIDDEN, ACT)
            self.fc_logstd = nn.Linear(HIDDEN, ACT)
            self.register_buffer("action_scale", lib.ones(ACT))
            self.register_buffer("action_bias", lib.zeros(ACT))

        def forward(self, x):
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            mean = self.fc_mean(x)
            log_std = lib.tanh(self.fc_logstd(x))
            log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
            return mean, log_std

        def get_action(self, x):
            mean, log_std = self(x)
            normal = lib.distributions.Normal(mean, log_std.exp())
            x_t = normal.rsample()
            y_t = lib.tanh(x_t)
            action = y_t * self.action_scale + self.action_bias
            log_prob = normal.log_prob(x_t)
            log_prob -= lib.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
            return action, log_prob.sum(1, keepdim=True)

    actor, qf1, qf2, qf1_target, qf2_target = Actor(), SoftQNetwork(), SoftQNetwork(), SoftQNetwork(), SoftQNetwork()
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_optimizer = lib.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=Q_LR)
    actor_optimizer = lib.optim.Adam(list(actor.parameters()), lr=POLICY_LR)
    target_entropy = -float(ACT)
    log_alpha = lib.zeros(1, requires_grad=True)
    a_optimizer = lib.optim.Adam([log_alpha], lr=Q_LR)
    state = {"alpha": log_alpha.exp().item()}

    rng = np.random.default_rng(seed)
    batches = [{k: lib.tensor(rng.standard_normal(shape).astype(np.float32)) for k, shape in
                (("obs", (BATCH, OBS)), ("next_obs", (BATCH, OBS)), ("actions", (BATCH, ACT)),
                 ("rewards", (BATCH, 1)))} for _ in range(4)]
    for b in batches:
        b["dones"] = lib.tensor((rng.random((BATCH, 1)) < 0.01).astype(np.float32))
    counter = [0]

    def update():
        data = batches[counter[0] % len(batches)]
        counter[0] += 1
        alpha = state["alpha"]
        with lib.no_grad():
            next_actions, next_log_pi = actor.get_action(data["next_obs"])
            qf1_next = qf1_target(data["next_obs"], next_actions)
            qf2_next = qf2_target(data["next_obs"], next_actions)
            min_qf_next = lib.min(qf1_next, qf2_next) - alpha * next_log_pi
            next_q_value = data["rewards"].flatten() + (1 - data["dones"].flatten()) * GAMMA * min_qf_next.view(-1)
        qf1_a = qf1(data["obs"], data["actions"]).view(-1)
        qf2_a = qf2(data["obs"], data["actions"]).view(-1)
        qf_loss = F.mse_loss(qf1_a, next_q_value) + F.mse_loss(qf2_a, next_q_value)
        q_optimizer.zero_grad()
        qf_loss.backward()
        q_optimizer.step()

        pi, log_pi = actor.get_action(data["obs"])
        min_qf_pi = lib.min(qf1(data["obs"], pi), qf2(data["obs"], pi))
        actor_loss = (alpha * log_pi - min_qf_pi).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        with lib.no_grad():
            _, log_pi = actor.get_action(data["obs"])
        alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()
        a_optimizer.zero_grad()
        alpha_loss.backward()
        a_optimizer.step()
        state["alpha"] = log_alpha.exp().item()

        for net, target in ((qf1, qf1_target), (qf2, qf2_target)):
            for param, target_param in zip(net.parameters(), target.parameters()):
                target_param.data.copy_(TAU * param.data + (1 - TAU) * target_param.data)

    return update


def measure(update, steps, repeat, warmup=20):
    """Per step, best of ``repeat`` runs of ``steps`` updates after ``warmup`` updates: CPU seconds
    (user + system), wall seconds and minor page faults."""
    for _ in range(warmup):
        update()
    best = None
    for _ in range(repeat):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(steps):
            update()
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        run = {"cpu_s": (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / steps,
               "sys_s": (r1.ru_stime - r0.ru_stime) / steps,
               "wall_s": (t1 - t0) / steps, "minflt": (r1.ru_minflt - r0.ru_minflt) / steps}
        if best is None or run["cpu_s"] < best["cpu_s"]:
            best = run
    return best


def measure_side(side, steps, repeat):
    """The figures for ``side`` in this process, with the library's version."""
    if side == "torch":
        lib, = import_peer()
        if lib is None:
            sys.exit("torch is not importable")
    else:
        import rlpipe as lib
    return {**measure(make_sac(lib), steps, repeat), "version": lib.__version__}


ROWS = (("cpu_s", "CPU time (user+sys), ms", 1e3), ("sys_s", "  of which system, ms", 1e3),
        ("wall_s", "wall time, ms", 1e3), ("minflt", "minor page faults", 1))


def main():
    p = argparse.ArgumentParser(description="CleanRL SAC update step, rlpipe vs torch")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--peer-python", default=peer_python())
    p.add_argument("--side", choices=("rlpipe", "torch"), help="measure one library only and print JSON")
    args = p.parse_args()
    if args.side:
        print(json.dumps(measure_side(args.side, args.steps, args.repeat)))
        return

    sizes = ("--steps", args.steps, "--repeat", args.repeat)
    ours = run_side(__file__, sys.executable, "rlpipe", sizes)
    untuned = run_side(__file__, sys.executable, "rlpipe", sizes, RLPIPE_MALLOPT="0")
    theirs = run_side(__file__, args.peer_python, "torch", sizes)
    print(f"CleanRL SAC update step (17-256-256, batch 256), per step, best of {args.repeat} x {args.steps} steps, "
          f"each side in its own process")
    print(f"peer: torch {theirs['version']}" if theirs else "peer: not measured")
    print(f"{'':26s} {'rlpipe':>9s} {'torch':>9s} {'rlpipe/torch':>13s} {'rlpipe, RLPIPE_MALLOPT=0':>25s}")
    for key, label, scale in ROWS:
        mine, off = ours[key] * scale, untuned[key] * scale
        peer = theirs[key] * scale if theirs else float("nan")
        ratio = f"{mine / peer:12.2f}x" if theirs and peer > 0 else f"{'':>13s}"
        print(f"{label:26s} {mine:9.2f} {peer:9.2f} {ratio} {off:25.2f}")


if __name__ == "__main__":
    main()
