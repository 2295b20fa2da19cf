"""Gradients of gradients (create_graph=True), side by side with PyTorch when it is importable.

Three RL workloads, float32, one thread: a WGAN-GP critic step (the gradient penalty's backward reaches
the weights through d critic / d input), a TRPO Fisher-vector product (the Hessian of a Categorical KL
times a vector) and a MAML step (the outer loss's gradients through one SGD step on the inner loss),
plus the same critic's plain loss backward for scale. Run where torch is importable to get the ratios:

    PYTHONPATH=. /work/peervenv/bin/python benchmarks/bench_double_backward.py [--repeat 7] [--number 50]
"""
from one_thread import import_peer  # first: pins BLAS to one thread before NumPy loads

import argparse

import numpy as np

import rlpipe

from bench_core import mlp_params, print_in_process  # the script's folder is on sys.path

torch, = import_peer()


def mlp(lib, params, x, act):
    """Linear layers with ``act`` between them, through each library's functional linear."""
    linear = lib.nn.functional.linear
    for i in range(0, len(params), 2):
        x = linear(x, params[i], params[i + 1])
        if i + 2 < len(params):
            x = act(x)
    return x


def data(lib, *shape, seed=1):
    return lib.tensor(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def workloads(lib):
    """name -> a callable running one step of each workload with ``lib`` (rlpipe or torch)."""
    F, grad = lib.nn.functional, lib.autograd.grad
    leaky = lambda t: F.leaky_relu(t, 0.2)  # noqa: E731
    critic = mlp_params(lib, (8, 64, 64, 1))
    real, fake, mix = data(lib, 256, 8), data(lib, 256, 8, seed=2), lib.rand(256, 1)
    policy = mlp_params(lib, (8, 64, 64, 4), seed=3)
    obs = data(lib, 256, 8, seed=4)
    vector = [data(lib, *p.shape, seed=5 + i) for i, p in enumerate(policy)]
    learner = mlp_params(lib, (1, 40, 40, 1), seed=6)
    xs, xq = data(lib, 10, 1, seed=7), data(lib, 10, 1, seed=8)
    ys, yq = xs.sin(), xq.sin()

    def critic_loss():
        return mlp(lib, critic, fake, leaky).mean() - mlp(lib, critic, real, leaky).mean()

    def plain_critic_step():
        grads = grad(critic_loss(), critic)
        return grads

    def gradient_penalty_step():
        x = (mix * real + (1 - mix) * fake).requires_grad_(True)
        g, = grad(mlp(lib, critic, x, leaky).sum(), x, create_graph=True)
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        return grad(critic_loss() + 10 * penalty, critic)

    def fisher_vector_product():
        logits = mlp(lib, policy, obs, lib.tanh)
        logp = F.log_softmax(logits, dim=1)
        old = logp.detach()
        kl = (old.exp() * (old - logp)).sum(dim=1).mean()
        grads = grad(kl, policy, create_graph=True)
        dot = sum((g * v).sum() for g, v in zip(grads, vector))
        return grad(dot, policy)

    def maml_step():
        inner = F.mse_loss(mlp(lib, learner, xs, lib.relu), ys)
        grads = grad(inner, learner, create_graph=True)
        fast = [p - 0.01 * g for p, g in zip(learner, grads)]
        return grad(F.mse_loss(mlp(lib, fast, xq, lib.relu), yq), learner)

    return {
        "critic loss backward (plain), MLP 8-64-64-1, batch 256": plain_critic_step,
        "WGAN-GP critic step (gradient penalty), batch 256": gradient_penalty_step,
        "TRPO Fisher-vector product, tanh MLP 8-64-64-4, batch 256": fisher_vector_product,
        "MAML step (inner SGD + outer grads), MLP 1-40-40-1, 10 shots": maml_step,
    }


def main():
    p = argparse.ArgumentParser(description="rlpipe double-backward benchmark")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=50)
    args = p.parse_args()
    ours = workloads(rlpipe)
    theirs = workloads(torch) if torch is not None else {}
    print(f"peer: {'torch ' + torch.__version__ if torch else 'none (torch not importable)'}")
    print_in_process(ours, theirs, lambda name: args.number, args.repeat, ".1f")


if __name__ == "__main__":
    main()
