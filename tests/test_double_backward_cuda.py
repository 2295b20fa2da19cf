"""create_graph=True on the CUDA backend (the CuPy stand-in in CI): second-order gradients through a critic
(linear, relu, tanh, norm), softmax/logsumexp/gather and a Hessian-vector product equal the CPU's, and stay on
the device."""
import numpy as np
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe.autograd import grad
from rlpipe.autograd.functional import hvp

pytestmark = pytest.mark.cuda

if not rlpipe.cuda.is_available():
    pytest.skip("CUDA unavailable (CuPy or a GPU missing)", allow_module_level=True)


def pair(shape, seed):
    """The same float64 leaf on the CPU and on CUDA."""
    values = np.random.default_rng(seed).uniform(-1.5, 1.5, shape)
    return (rlpipe.tensor(values, requires_grad=True),
            rlpipe.tensor(values, device="cuda", requires_grad=True))


def penalty_grads(x, w1, b1, w2):
    """d/d(weights) of a gradient penalty through relu and tanh layers."""
    score = F.linear(F.relu(F.linear(x, w1, b1)).tanh(), w2).sum()
    g, = grad(score, x, create_graph=True)
    return grad(((g.norm(dim=1) - 1) ** 2).mean(), (w1, b1, w2))


def softmax_grads(logits):
    """The second derivative of a log-prob and logsumexp path (log_softmax, gather, softmax, logsumexp)."""
    picked = F.log_softmax(logits, dim=1).gather(1, rlpipe.tensor([[1], [0]], device=logits.device)).sum()
    value = picked + (F.softmax(logits, dim=1) * logits).sum() + logits.logsumexp(dim=1).sum()
    g, = grad(value, logits, create_graph=True)
    return grad((g * g).sum(), logits)


@pytest.mark.parametrize("which", ["penalty", "softmax"])
def test_second_order_gradients_on_cuda_match_the_cpu(which):
    if which == "penalty":
        leaves = [pair((3, 2), 0), pair((4, 2), 1), pair((4,), 2), pair((1, 4), 3)]
        fn = penalty_grads
    else:
        leaves = [pair((2, 3), 4)]
        fn = softmax_grads
    on_cpu = fn(*(c for c, _ in leaves))
    on_cuda = fn(*(g for _, g in leaves))
    for c, g in zip(on_cpu, on_cuda):
        assert g.device.type == "cuda"
        np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-10, atol=1e-12)


def test_hvp_on_cuda():
    x = rlpipe.tensor([0.5, -1.0, 2.0], device="cuda", dtype=rlpipe.float64)
    v = rlpipe.tensor([1.0, 2.0, 3.0], device="cuda", dtype=rlpipe.float64)
    _, product = hvp(lambda t: (t.exp() * t).sum(), x, v)
    assert product.device.type == "cuda"
    expected = np.exp([0.5, -1.0, 2.0]) * (np.array([0.5, -1.0, 2.0]) + 2) * [1.0, 2.0, 3.0]
    np.testing.assert_allclose(product.cpu().numpy(), expected)


def test_second_order_through_a_device_copy():
    x = rlpipe.tensor([0.5, -1.0, 2.0], dtype=rlpipe.float64, requires_grad=True)
    g, = grad((x.cuda() ** 3).sum(), x, create_graph=True)
    assert g.device.type == "cpu"
    g2, = grad((g.cuda() * g.cuda()).sum(), x)  # d/dx of 9 x^4
    np.testing.assert_allclose(g2.numpy(), 36 * np.array([0.5, -1.0, 2.0]) ** 3)


def test_conv_gradient_penalty_on_cuda_matches_the_cpu():
    (x_cpu, x_gpu), (w_cpu, w_gpu), (b_cpu, b_gpu) = pair((2, 2, 6, 6), 10), pair((3, 2, 3, 3), 11), pair((3,), 12)

    def grads(x, w, b):
        g, = grad(F.conv2d(x, w, b, stride=2, padding=1).tanh().sum(), x, create_graph=True)
        return grad((g * g).sum(), (w, b))
    for c, g in zip(grads(x_cpu, w_cpu, b_cpu), grads(x_gpu, w_gpu, b_gpu)):
        assert g.device.type == "cuda"
        np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-10, atol=1e-12)
