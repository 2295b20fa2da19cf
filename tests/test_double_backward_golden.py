"""Second-order gradients against torch 2.13's (recorded by tests/fixtures/make_double_backward_golden.py):
a WGAN-GP gradient penalty through LeakyReLU/Tanh/ReLU critics and a conv critic, TRPO's Fisher-vector products for
Categorical and Normal policies (plus the log_prob/entropy path differentiated twice), a one-step MAML loss."""
import json
import os

import numpy as np
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe.autograd import grad
from rlpipe.distributions import Categorical, Normal, kl_divergence

with open(os.path.join(os.path.dirname(__file__), "fixtures", "double_backward_golden.json")) as _f:
    GOLDEN = json.load(_f)


def f64(values, requires_grad=False):
    return rlpipe.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def as_params(layers):
    return [f64(a, requires_grad=True) for pair in layers for a in pair]


def mlp(params, x, act):
    for i in range(0, len(params), 2):
        x = F.linear(x, params[i], params[i + 1])
        if i + 2 < len(params):
            x = act(x)
    return x


def assert_grads(found, expected):
    for got, want in zip(found, expected):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-9, atol=1e-12)


ACTIVATIONS = {"leaky_relu": lambda t: F.leaky_relu(t, 0.2), "tanh": rlpipe.tanh, "relu": rlpipe.relu}


@pytest.mark.parametrize("case", GOLDEN["gradient_penalty"], ids=lambda c: c["act"])
def test_gradient_penalty_matches_torch(case):
    params = as_params(case["layers"])
    mix = f64(case["mix"])
    x = (mix * f64(case["real"]) + (1 - mix) * f64(case["fake"])).detach().requires_grad_(True)
    score = mlp(params, x, ACTIVATIONS[case["act"]])
    g, = grad(score.sum(), x, create_graph=True)
    penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward()
    assert penalty.item() == pytest.approx(case["penalty"], rel=1e-12)
    assert_grads([p.grad for p in params], case["grads"])


def policy(case, params, obs):
    out = mlp(params[:4], obs, rlpipe.tanh)
    if case["kind"] == "normal":
        return Normal(out, params[4].exp()), Normal(out.detach(), params[4].detach().exp())
    return Categorical(logits=out), Categorical(logits=out.detach())


@pytest.mark.parametrize("case", GOLDEN["fisher_vector_product"], ids=lambda c: c["kind"])
def test_fisher_vector_product_matches_torch(case):
    params = as_params(case["layers"]) + ([f64(case["log_std"], True)] if case["kind"] == "normal" else [])
    new, old = policy(case, params, f64(case["obs"]))
    kl = kl_divergence(old, new).mean()
    grads = grad(kl, params, create_graph=True)
    dot = sum((g * f64(v)).sum() for g, v in zip(grads, case["vector"]))
    products = grad(dot, params)
    assert kl.item() == pytest.approx(case["kl"], abs=1e-15)
    assert_grads(products, case["products"])


@pytest.mark.parametrize("case", GOLDEN["fisher_vector_product"], ids=lambda c: c["kind"])
def test_log_prob_and_entropy_twice_match_torch(case):
    params = as_params(case["layers"]) + ([f64(case["log_std"], True)] if case["kind"] == "normal" else [])
    obs = f64(case["obs"], requires_grad=True)
    dist, _ = policy(case, params, obs)
    actions = f64(case["actions"]) if case["kind"] == "normal" else rlpipe.tensor(case["actions"])
    logp = dist.log_prob(actions).sum() + dist.entropy().sum()
    g_obs, = grad(logp, obs, create_graph=True)
    second = grad((g_obs ** 2).sum(), params, allow_unused=True)
    assert logp.item() == pytest.approx(case["logp"], rel=1e-12)
    assert_grads(second, case["logp_second"])


def test_maml_one_step_matches_torch():
    case = GOLDEN["maml"]
    params = as_params(case["layers"])
    inner = F.mse_loss(mlp(params, f64(case["xs"]), rlpipe.tanh), f64(case["ys"]))
    grads = grad(inner, params, create_graph=True)
    fast = [p - 0.1 * g for p, g in zip(params, grads)]
    outer = F.smooth_l1_loss(mlp(fast, f64(case["xq"]), rlpipe.tanh), f64(case["yq"]), beta=0.5)
    outer.backward()
    assert (inner.item(), outer.item()) == pytest.approx((case["inner"], case["outer"]), rel=1e-12)
    assert_grads([p.grad for p in params], case["grads"])


def test_conv_critic_gradient_penalty_matches_torch():
    case = GOLDEN["conv_gradient_penalty"]
    p = {k: f64(v, requires_grad=True) for k, v in case["params"].items()}
    x = f64(case["images"], requires_grad=True)
    h = F.leaky_relu(F.conv2d(x, p["w1"], p["b1"], stride=2, padding=1), 0.2)
    h = F.leaky_relu(F.conv2d(h, p["w2"], p["b2"]), 0.2)
    score = F.linear(h.flatten(1), p["w3"], p["b3"])
    g, = grad(score.sum(), x, create_graph=True)
    penalty = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward()
    assert penalty.item() == pytest.approx(case["penalty"], rel=1e-12)
    assert_grads([p[k].grad for k in case["grads"]], list(case["grads"].values()))
