"""Fit y = sin(x) with a two-hidden-layer MLP built from raw rlpipe tensors.

The tensor core on its own: parameters are leaf tensors, the loss is built from ops, backward()
fills .grad, and the update runs under no_grad. Writes the loss curve to runs/fit_sine.csv step by step
(and runs/fit_sine.png when matplotlib is installed); Ctrl-C stops the run and keeps them.

    python examples/fit_sine.py --steps 2000 --device cpu
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: these small matrices only lose
os.environ.setdefault("OMP_NUM_THREADS", "1")       # time to more BLAS threads (badly so on a busy machine)

import argparse
import math

import rlpipe
from rlpipe.record import RunLog


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=2000, help="number of Adam steps")
    p.add_argument("--hidden", type=int, default=64, help="units in each of the two hidden layers")
    p.add_argument("--batch", type=int, default=256, help="points of x drawn per step")
    p.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--out-dir", default="runs", help="where fit_sine.csv (step, loss) and the plot go")
    p.add_argument("--no-progress", action="store_true", help="print the loss every 10%% of the steps instead of "
                                                                "showing a tqdm progress bar")
    return p.parse_args()


def init_layer(n_in, n_out, device):
    """PyTorch's default Linear initialization: uniform in +-1/sqrt(n_in)."""
    bound = 1 / math.sqrt(n_in)
    w = rlpipe.empty(n_in, n_out, device=device).uniform_(-bound, bound).requires_grad_()
    b = rlpipe.empty(n_out, device=device).uniform_(-bound, bound).requires_grad_()
    return w, b


def mlp(params, x):
    (w1, b1), (w2, b2), (w3, b3) = params
    h = (x @ w1 + b1).tanh()
    h = (h @ w2 + b2).tanh()
    return h @ w3 + b3


def adam_update(params, state, step, lr, betas=(0.9, 0.999), eps=1e-8):
    """Adam, written with in-place tensor ops under no_grad."""
    b1, b2 = betas
    with rlpipe.no_grad():
        for p in (p for layer in params for p in layer):
            m, v = state.setdefault(id(p), (rlpipe.zeros_like(p), rlpipe.zeros_like(p)))
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).add_(p.grad * p.grad, alpha=1 - b2)
            m_hat = m / (1 - b1 ** step)
            v_hat = v / (1 - b2 ** step)
            p.sub_(lr * m_hat / (v_hat.sqrt() + eps))
            p.grad = None


def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    params = [init_layer(1, args.hidden, args.device), init_layer(args.hidden, args.hidden, args.device),
              init_layer(args.hidden, 1, args.device)]
    state = {}
    with RunLog(args.out_dir, "fit_sine", ["step", "loss"], total=args.steps, unit="steps",
                progress=not args.no_progress, echo=False) as log:
        for step in range(1, args.steps + 1):
            x = rlpipe.rand(args.batch, 1, device=args.device) * (2 * math.pi) - math.pi
            loss = ((mlp(params, x) - x.sin()) ** 2).mean()
            loss.backward()
            adam_update(params, state, step, args.lr)
            log.write(step=step, loss=loss.item())
            log.advance(1)
            if log.bar is None and step % max(args.steps // 10, 1) == 0:
                print(f"step {step:5d}  loss {loss.item():.5f}", flush=True)
    steps, seconds = len(log.rows), log.seconds
    final = log.rows[-1]["loss"] if log.rows else float("nan")
    log.plotted = plot_loss(log.rows, log.stem + ".png")
    log.finish(f"{steps} steps ({1e6 * seconds / max(steps, 1):.0f} us/step), final loss {final:.5f}")


def plot_loss(rows, path):
    """The loss on a log scale (skipped without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    plt.semilogy([r["step"] for r in rows], [r["loss"] for r in rows])
    plt.xlabel("step")
    plt.ylabel("MSE loss")
    plt.title("fit_sine: MLP on the rlpipe tensor core")
    plt.savefig(path, dpi=100)
    return True


if __name__ == "__main__":
    main()
