"""Fit y = sin(x) with a two-hidden-layer MLP built from raw rlpipe tensors.

The tensor core on its own: parameters are leaf tensors, the loss is built from ops, backward()
fills .grad, and the update runs under no_grad. Writes the loss curve to a CSV (and a PNG when
matplotlib is installed).

    python examples/fit_sine.py --steps 2000 --device cpu
"""
import argparse
import csv
import math
import time

import rlpipe


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000, help="number of Adam steps")
    p.add_argument("--hidden", type=int, default=64, help="units in each of the two hidden layers")
    p.add_argument("--batch", type=int, default=256, help="points of x drawn per step")
    p.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator")
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--out", default="fit_sine.csv", help="CSV of step, loss")
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
    state, rows = {}, []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x = rlpipe.rand(args.batch, 1, device=args.device) * (2 * math.pi) - math.pi
        loss = ((mlp(params, x) - x.sin()) ** 2).mean()
        loss.backward()
        adam_update(params, state, step, args.lr)
        rows.append((step, loss.item()))
        if step % max(args.steps // 10, 1) == 0:
            print(f"step {step:5d}  loss {loss.item():.5f}")
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps in {elapsed:.2f} s ({1e6 * elapsed / args.steps:.0f} us/step); "
          f"final loss {rows[-1][1]:.5f}")
    with open(args.out, "w", newline="") as f:
        csv.writer(f).writerows([("step", "loss"), *rows])
    print(f"wrote {args.out}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    plt.semilogy([r[0] for r in rows], [r[1] for r in rows])
    plt.xlabel("step")
    plt.ylabel("MSE loss")
    plt.title("fit_sine: MLP on the rlpipe tensor core")
    png = args.out.rsplit(".", 1)[0] + ".png"
    plt.savefig(png, dpi=100)
    print(f"wrote {png}")


if __name__ == "__main__":
    main()
