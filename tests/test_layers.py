"""nn layers: Linear, Bilinear, activations, Flatten/Unflatten, Dropout, LayerNorm, BatchNorm,
Embedding, Conv2d and pooling.

Values are checked against NumPy written out here (naive loops for convolution and pooling, running
statistics by hand for batch norm), gradients with float64 gradcheck with respect to the input and
every parameter, and reprs against the strings torch 2.x prints.
"""
import math
import warnings

import numpy as np
import pytest
from scipy.special import erf

import rlpipe as r
from rlpipe import nn
from rlpipe.autograd import gradcheck


def t64(values, requires_grad=False):
    return r.tensor(np.asarray(values, dtype=np.float64), dtype=r.float64, requires_grad=requires_grad)


def np_of(t):
    return np.array(t.detach().numpy())  # a copy: numpy() shares memory with the tensor


def check_grads(module, *inputs):
    """gradcheck of module(*inputs) with respect to the inputs that require grad and every parameter
    (gradcheck nudges each tensor in place, so the module's own parameters can be passed directly)."""
    params = [p for p in module.parameters() if p.requires_grad]
    n = len(inputs)
    assert gradcheck(lambda *args: module(*args[:n]), (*inputs, *params))


@pytest.fixture(autouse=True)
def _seed():
    r.manual_seed(0)


# ---------------------------------------------------------------------------------------------
# Identity, Linear, Bilinear
# ---------------------------------------------------------------------------------------------

def test_identity_returns_its_input_and_ignores_arguments():
    m = nn.Identity(54, unused_argument1=0.1, unused_argument2=False)
    x = r.randn(3, 2)
    assert m(x) is x
    assert repr(m) == "Identity()"
    assert list(m.parameters()) == []


def test_linear_parameters_shapes_and_repr():
    m = nn.Linear(3, 5)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert m.weight.shape == (5, 3) and m.bias.shape == (5,)
    assert m.weight.dtype is r.float32 and m.weight.requires_grad
    assert repr(m) == "Linear(in_features=3, out_features=5, bias=True)"
    m2 = nn.Linear(2, 2, bias=False)
    assert m2.bias is None and list(m2.state_dict()) == ["weight"]
    assert repr(m2) == "Linear(in_features=2, out_features=2, bias=False)"
    assert repr(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))) == (
        "Sequential(\n  (0): Linear(in_features=2, out_features=2, bias=True)\n"
        "  (1): Linear(in_features=2, out_features=2, bias=True)\n)")


def test_linear_factory_kwargs():
    m = nn.Linear(3, 4, dtype=r.float64, device="cpu")
    assert m.weight.dtype is r.float64 and m.bias.dtype is r.float64
    assert m.weight.device == r.device("cpu")


def test_linear_values_match_numpy():
    m = nn.Linear(3, 4)
    w, b = np_of(m.weight), np_of(m.bias)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    out = m(r.tensor(x))
    assert out.shape == (2, 5, 4) and out.dtype is r.float32
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m(r.tensor(x[0, 0])).detach().numpy(), x[0, 0] @ w.T + b, rtol=1e-5, atol=1e-6)
    nobias = nn.Linear(3, 4, bias=False)
    np.testing.assert_allclose(nobias(r.tensor(x)).detach().numpy(), x @ np_of(nobias.weight).T, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 40), (7, 40), (1, 40), (40,)], ids=str)
def test_linear_weight_first_product_matches_loops(shape):
    """A few rows against a wide weight take ``(w @ x.T).T`` on the CPU (``_weight_first_pays``): values
    against a loop over rows and outputs in float64, contiguous output, gradients by gradcheck."""
    from rlpipe.primitives.linalg import _weight_first_pays
    m = nn.Linear(40, 36).double()
    x = np.random.default_rng(3).standard_normal(shape)
    w, b = np_of(m.weight), np_of(m.bias)
    rows = x.reshape(-1, 40)
    expected = np.array([[sum(rows[i, k] * w[o, k] for k in range(40)) + b[o] for o in range(36)]
                         for i in range(rows.shape[0])]).reshape(shape[:-1] + (36,))
    out = m(t64(x))
    assert _weight_first_pays(shape, (36, 40)) == (rows.shape[0] in (6, 7))
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    assert out.detach().numpy().flags.c_contiguous
    check_grads(m, t64(x, requires_grad=True))


def test_linear_gradients():
    m = nn.Linear(3, 2).double()
    check_grads(m, t64(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True))
    check_grads(nn.Linear(3, 2, bias=False).double(), t64(np.ones((2, 3)), requires_grad=True))


def test_linear_backward_values():
    m = nn.Linear(3, 2).double()
    x = t64(np.random.default_rng(2).standard_normal((4, 3)))
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), np.tile(np_of(x).sum(0), (2, 1)))
    np.testing.assert_allclose(m.bias.grad.numpy(), [4.0, 4.0])


def test_linear_init_bounds():
    """kaiming_uniform_(a=sqrt(5)) makes weight uniform in +-1/sqrt(fan_in); the bias too."""
    m = nn.Linear(64, 300)
    bound = 1 / math.sqrt(64)
    w, b = np_of(m.weight), np_of(m.bias)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    assert abs(w.mean()) < 0.02 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    r.manual_seed(3)
    first = np_of(nn.Linear(4, 4).weight)
    r.manual_seed(3)
    np.testing.assert_array_equal(first, np_of(nn.Linear(4, 4).weight))
    m.reset_parameters()
    assert not np.array_equal(np_of(m.weight), w)


def test_linear_forward_follows_a_replaced_weight():
    """A weight deleted and set again as a plain tensor (what a reparametrization does) is used."""
    m = nn.Linear(2, 1).double()
    del m.weight
    m.weight = t64([[2.0, 3.0]])
    assert "weight" not in m._parameters
    assert m(t64([[1.0, 1.0]])).item() == pytest.approx(5.0 + m.bias.item())


def test_linear_wrong_input_size_raises():
    m = nn.Linear(5, 2)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 5x2\)"):
        m(r.randn(4, 3))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(6x3 and 5x2\)"):
        m(r.randn(2, 3, 3))


def test_bilinear_values_gradients_and_repr():
    m = nn.Bilinear(3, 4, 2)
    assert m.weight.shape == (2, 3, 4) and m.bias.shape == (2,)
    assert repr(m) == "Bilinear(in1_features=3, in2_features=4, out_features=2, bias=True)"
    bound = 1 / math.sqrt(3)
    assert np.abs(np_of(m.weight)).max() <= bound and np.abs(np_of(m.bias)).max() <= bound
    rng = np.random.default_rng(4)
    x1, x2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    m = m.double()
    out = m(t64(x1), t64(x2))
    expected = np.einsum("ni,kij,nj->nk", x1, np_of(m.weight), x2) + np_of(m.bias)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12)
    check_grads(m, t64(x1[:2], True), t64(x2[:2], True))
    assert repr(nn.Bilinear(1, 1, 1, bias=False)) == \
        "Bilinear(in1_features=1, in2_features=1, out_features=1, bias=False)"


# ---------------------------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# (module factory, NumPy reference, repr); the test input stays clear of every kink
ACTIVATIONS = [
    (lambda: nn.ReLU(), lambda x: np.maximum(x, 0), "ReLU()"),
    (lambda: nn.ReLU6(), lambda x: np.clip(x, 0, 6), "ReLU6()"),
    (lambda: nn.Threshold(0.1, 20), lambda x: np.where(x > 0.1, x, 20.0), "Threshold(threshold=0.1, value=20)"),
    (lambda: nn.Hardtanh(-2.0, 2.0), lambda x: np.clip(x, -2, 2), "Hardtanh(min_val=-2.0, max_val=2.0)"),
    (lambda: nn.Sigmoid(), _sigmoid, "Sigmoid()"),
    (lambda: nn.Tanh(), np.tanh, "Tanh()"),
    (lambda: nn.Hardsigmoid(), lambda x: np.clip(x / 6 + 0.5, 0, 1), "Hardsigmoid()"),
    (lambda: nn.Hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6, "Hardswish()"),
    (lambda: nn.SiLU(), lambda x: x * _sigmoid(x), "SiLU()"),
    (lambda: nn.Mish(), lambda x: x * np.tanh(np.log1p(np.exp(x))), "Mish()"),
    (lambda: nn.ELU(), lambda x: np.where(x > 0, x, np.expm1(x)), "ELU(alpha=1.0)"),
    (lambda: nn.ELU(alpha=0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), "ELU(alpha=0.5)"),
    (lambda: nn.CELU(alpha=2.0), lambda x: np.maximum(x, 0) + np.minimum(0, 2 * np.expm1(x / 2)), "CELU(alpha=2.0)"),
    (lambda: nn.SELU(), lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)), "SELU()"),
    (lambda: nn.GELU(), lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), "GELU(approximate='none')"),
    (lambda: nn.GELU("tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), "GELU(approximate='tanh')"),
    (lambda: nn.Hardshrink(), lambda x: np.where(np.abs(x) > 0.5, x, 0), "Hardshrink(0.5)"),
    (lambda: nn.Softshrink(1.0), lambda x: np.sign(x) * np.maximum(np.abs(x) - 1.0, 0), "Softshrink(1.0)"),
    (lambda: nn.LeakyReLU(), lambda x: np.where(x > 0, x, 0.01 * x), "LeakyReLU(negative_slope=0.01)"),
    (lambda: nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x), "LeakyReLU(negative_slope=0.2)"),
    (lambda: nn.LogSigmoid(), lambda x: -np.log1p(np.exp(-x)), "LogSigmoid()"),
    (lambda: nn.Softplus(), lambda x: np.log1p(np.exp(x)), "Softplus(beta=1.0, threshold=20.0)"),
    (lambda: nn.Softplus(beta=2, threshold=5),
     lambda x: np.where(2 * x > 5, x, np.log1p(np.exp(2 * x)) / 2), "Softplus(beta=2, threshold=5)"),
    (lambda: nn.Softsign(), lambda x: x / (1 + np.abs(x)), "Softsign()"),
    (lambda: nn.Tanhshrink(), lambda x: x - np.tanh(x), "Tanhshrink()"),
    (lambda: nn.PReLU(), lambda x: np.where(x > 0, x, 0.25 * x), "PReLU(num_parameters=1)"),
    (lambda: nn.Softmax(dim=1), lambda x: _softmax(x, 1), "Softmax(dim=1)"),
    (lambda: nn.Softmax(dim=0), lambda x: _softmax(x, 0), "Softmax(dim=0)"),
    (lambda: nn.Softmin(dim=1), lambda x: _softmax(-x, 1), "Softmin(dim=1)"),
    (lambda: nn.LogSoftmax(dim=1), lambda x: np.log(_softmax(x, 1)), "LogSoftmax(dim=1)"),
    (lambda: nn.GLU(), lambda x: x[:, :2] * _sigmoid(x[:, 2:]), "GLU(dim=-1)"),
]
X_ACT = np.array([[-2.7, -1.3, -0.8, -0.2], [0.3, 0.7, 1.6, 2.2], [4.1, 7.3, -4.6, 3.4]])


@pytest.mark.parametrize("factory, reference, text", ACTIVATIONS, ids=[c[2] for c in ACTIVATIONS])
def test_activation_values_gradients_and_repr(factory, reference, text):
    m = factory()
    assert repr(m) == text
    out32 = m(r.tensor(X_ACT, dtype=r.float32))
    assert out32.dtype is r.float32
    np.testing.assert_allclose(out32.detach().numpy(), reference(X_ACT), rtol=1e-5, atol=1e-6)
    m = m.double()
    x = t64(X_ACT, requires_grad=True)
    np.testing.assert_allclose(m(x).detach().numpy(), reference(X_ACT), rtol=1e-10, atol=1e-12)
    check_grads(m, x)


@pytest.mark.parametrize("cls, args, text", [
    (nn.ReLU, (), "ReLU(inplace=True)"), (nn.ReLU6, (), "ReLU6(inplace=True)"),
    (nn.LeakyReLU, (0.1,), "LeakyReLU(negative_slope=0.1, inplace=True)"),
    (nn.ELU, (1.0,), "ELU(alpha=1.0, inplace=True)"),
    (nn.CELU, (1.0,), "CELU(alpha=1.0, inplace=True)"), (nn.SELU, (), "SELU(inplace=True)"),
    (nn.SiLU, (), "SiLU(inplace=True)"), (nn.Mish, (), "Mish(inplace=True)"),
    (nn.Hardtanh, (-1.0, 1.0), "Hardtanh(min_val=-1.0, max_val=1.0, inplace=True)"),
    (nn.Threshold, (0.5, 0.0), "Threshold(threshold=0.5, value=0.0, inplace=True)"),
    (nn.Hardsigmoid, (), "Hardsigmoid()"), (nn.Hardswish, (), "Hardswish()"),
])
def test_inplace_activations_overwrite_their_input(cls, args, text):
    m = cls(*args, inplace=True)
    assert repr(m) == text
    x = r.tensor(X_ACT, dtype=r.float32)
    expected = cls(*args)(x.clone()).numpy()
    out = m(x)
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_inplace_relu_in_a_graph_backpropagates():
    x = t64([-1.0, 2.0], requires_grad=True)
    y = nn.ReLU(inplace=True)(x * 3)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 3.0]


def test_prelu_per_channel_parameters():
    m = nn.PReLU(3, init=0.1)
    assert m.weight.shape == (3,) and np.allclose(np_of(m.weight), 0.1)
    assert repr(m) == "PReLU(num_parameters=3)"
    with r.no_grad():
        m.weight.copy_(r.tensor([0.1, 0.2, 0.3]))
    m = m.double()
    x = np.random.default_rng(5).standard_normal((2, 3, 2)) + 0.05
    expected = np.where(x > 0, x, np_of(m.weight)[None, :, None] * x)
    np.testing.assert_allclose(m(t64(x)).detach().numpy(), expected, rtol=1e-12)
    check_grads(m, t64(x, requires_grad=True))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        m(t64(np.ones((2, 4))))
    assert nn.PReLU(dtype=r.float64).weight.dtype is r.float64
    m.weight.data.fill_(0)
    m.reset_parameters()
    assert np.allclose(np_of(m.weight), 0.1)


def test_rrelu_random_slopes_in_training_and_mean_slope_in_eval():
    m = nn.RReLU(0.1, 0.3)
    assert repr(m) == "RReLU(lower=0.1, upper=0.3)"
    assert repr(nn.RReLU()) == "RReLU(lower=0.125, upper=0.3333333333333333)"
    x = -r.ones(1000)
    slopes = -m(x).numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    np.testing.assert_allclose(m(r.ones(5)).numpy(), np.ones(5))
    xg = t64(-np.linspace(1, 2, 20), requires_grad=True)
    out = m(xg)
    out.sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), out.detach().numpy() / xg.detach().numpy(), rtol=1e-12)
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), -0.2 * np.ones(1000), rtol=1e-6)
    check_grads(m, t64(X_ACT, requires_grad=True))


def test_softmax_modules():
    x = np.random.default_rng(6).standard_normal((2, 3, 2, 2))
    np.testing.assert_allclose(nn.Softmax2d()(t64(x)).numpy(), _softmax(x, 1), rtol=1e-12)
    np.testing.assert_allclose(nn.Softmax2d()(t64(x[0])).numpy(), _softmax(x[0], 0), rtol=1e-12)
    assert repr(nn.Softmax2d()) == "Softmax2d()" and repr(nn.Softmax()) == "Softmax(dim=None)"
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        nn.Softmax2d()(t64(x[0, 0]))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = nn.Softmax()(t64(x[0]))
    np.testing.assert_allclose(out.numpy(), _softmax(x[0], 0), rtol=1e-12)
    np.testing.assert_allclose(nn.LogSoftmax(-1)(t64(x)).numpy(), np.log(_softmax(x, -1)), rtol=1e-10)
    check_grads(nn.Softmax2d(), t64(x[:1], requires_grad=True))


def test_activation_argument_errors():
    with pytest.raises(AssertionError):
        nn.Hardtanh(1.0, -1.0)
    with pytest.warns(FutureWarning, match="min_value"):
        m = nn.Hardtanh(min_value=-3.0)
    assert m.min_val == -3.0
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        nn.GELU("exact")(r.randn(2))
    with pytest.raises(RuntimeError):
        nn.GLU()(r.randn(2, 3))  # an odd size cannot be halved


# ---------------------------------------------------------------------------------------------
# Flatten, Unflatten
# ---------------------------------------------------------------------------------------------

def test_flatten_and_unflatten():
    x = r.randn(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Flatten(-2)(x).shape == (2, 3, 20)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    y = nn.Unflatten(1, (3, 20))(nn.Flatten()(x))
    np.testing.assert_array_equal(y.reshape(2, 3, 4, 5).numpy(), x.numpy())
    assert nn.Unflatten(-1, [5, -1])(x).shape == (2, 3, 4, 5, 1)
    assert repr(nn.Unflatten(1, (2, 5, 5))) == "Unflatten(dim=1, unflattened_size=(2, 5, 5))"
    assert repr(nn.Unflatten(1, r.Size([2, 5]))) == "Unflatten(dim=1, unflattened_size=rlpipe.Size([2, 5]))"
    with pytest.raises(TypeError, match="unflattened_size must be tuple of ints, but found element of type float at "
                                        "pos 1"):
        nn.Unflatten(1, (2, 2.5))
    with pytest.raises(TypeError, match="unflattened_size must be a tuple of ints, but found type int"):
        nn.Unflatten(1, 5)
    with pytest.raises(TypeError, match="invalid argument type for dim parameter"):
        nn.Unflatten(1.0, (2, 2))
    with pytest.raises(RuntimeError):
        nn.Unflatten(1, (4, 4))(x)
    xg = t64(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert gradcheck(lambda v: nn.Unflatten(1, (3, 1))(nn.Flatten(0)(v).reshape(2, 3)), (xg,))


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------

def test_dropout_train_and_eval():
    m = nn.Dropout(0.3)
    assert repr(m) == "Dropout(p=0.3, inplace=False)" and repr(nn.Dropout()) == "Dropout(p=0.5, inplace=False)"
    x = r.ones(20000)
    out = m(x).numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    assert not np.array_equal(m(x).numpy(), out)  # a fresh mask per call
    m.eval()
    np.testing.assert_array_equal(m(x).numpy(), np.ones(20000))
    m.train()
    assert np.all(nn.Dropout(1.0)(x).numpy() == 0)
    np.testing.assert_array_equal(nn.Dropout(0.0)(x).numpy(), np.ones(20000))


def test_dropout_gradient_follows_the_mask_and_inplace():
    x = t64(np.ones(50), requires_grad=True)
    out = nn.Dropout(0.5)(x)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), out.detach().numpy())
    y = r.ones(100)
    m = nn.Dropout(0.5, inplace=True)
    assert repr(m) == "Dropout(p=0.5, inplace=True)"
    m(y)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0} and (y.numpy() == 0).any()


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_rejects_bad_probability(p):
    with pytest.raises(ValueError, match=f"dropout probability has to be between 0 and 1, but got {p}"):
        nn.Dropout(p)


# ---------------------------------------------------------------------------------------------
# LayerNorm
# ---------------------------------------------------------------------------------------------

def _layer_norm(x, axes, w=None, b=None, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def test_layer_norm_values_gradients_and_repr():
    m = nn.LayerNorm(4)
    assert m.normalized_shape == (4,)
    assert repr(m) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True)"
    np.testing.assert_array_equal(np_of(m.weight), np.ones(4))
    np.testing.assert_array_equal(np_of(m.bias), np.zeros(4))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 2, 4)) * 3 + 1
    m = m.double()
    with r.no_grad():
        m.weight.copy_(t64(rng.standard_normal(4)))
        m.bias.copy_(t64(rng.standard_normal(4)))
    expected = _layer_norm(x, -1, np_of(m.weight), np_of(m.bias))
    np.testing.assert_allclose(m(t64(x)).detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    check_grads(m, t64(x[:2], requires_grad=True))
    m.eval()  # the same in eval mode: each sample's own statistics
    np.testing.assert_allclose(m(t64(x)).detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def test_layer_norm_variants():
    m = nn.LayerNorm([2, 3], eps=1e-3, elementwise_affine=False)
    assert m.weight is None and m.bias is None and list(m.parameters()) == []
    assert repr(m) == "LayerNorm((2, 3), eps=0.001, elementwise_affine=False)"
    x = np.random.default_rng(8).standard_normal((4, 2, 3))
    np.testing.assert_allclose(m(t64(x)).numpy(), _layer_norm(x, (1, 2), eps=1e-3), rtol=1e-10, atol=1e-12)
    nb = nn.LayerNorm(3, bias=False, dtype=r.float64)
    assert nb.bias is None and [n for n, _ in nb.named_parameters()] == ["weight"] and nb.weight.dtype is r.float64
    check_grads(nb, t64(x[:2], requires_grad=True))
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input with shape \[\*, 3\]"):
        nb(t64(np.ones((2, 4))))


# ---------------------------------------------------------------------------------------------
# BatchNorm
# ---------------------------------------------------------------------------------------------

def test_batch_norm_structure_and_repr():
    m = nn.BatchNorm1d(4)
    assert repr(m) == "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    np.testing.assert_array_equal(np_of(m.weight), np.ones(4))
    np.testing.assert_array_equal(np_of(m.bias), np.zeros(4))
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(4))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(4))
    assert m.num_batches_tracked.dtype is r.int64 and m.num_batches_tracked.item() == 0
    m2 = nn.BatchNorm1d(3, eps=1e-3, momentum=None, affine=False, track_running_stats=False)
    assert repr(m2) == "BatchNorm1d(3, eps=0.001, momentum=None, affine=False, track_running_stats=False)"
    assert m2.weight is None and m2.running_mean is None and list(m2.state_dict()) == []
    m64 = nn.BatchNorm1d(2, dtype=r.float64)
    assert m64.weight.dtype is r.float64 and m64.running_var.dtype is r.float64
    assert m64.num_batches_tracked.dtype is r.int64
    assert m.double().num_batches_tracked.dtype is r.int64  # .double() leaves the integer counter alone


def test_batch_norm_training_and_running_statistics():
    rng = np.random.default_rng(9)
    m = nn.BatchNorm1d(3, momentum=0.1).double()
    with r.no_grad():
        m.weight.copy_(t64([1.0, 2.0, 0.5]))
        m.bias.copy_(t64([0.0, -1.0, 3.0]))
    running_mean, running_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rng.standard_normal((8, 3)) * [1, 2, 3] + [0, 1, -2]
        out = m(t64(x)).detach().numpy()
        mean, var = x.mean(0), x.var(0)
        expected = (x - mean) / np.sqrt(var + 1e-5) * [1.0, 2.0, 0.5] + [0.0, -1.0, 3.0]
        np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
        running_mean = 0.9 * running_mean + 0.1 * mean
        running_var = 0.9 * running_var + 0.1 * x.var(0, ddof=1)
        np.testing.assert_allclose(m.running_mean.numpy(), running_mean, rtol=1e-12)
        np.testing.assert_allclose(m.running_var.numpy(), running_var, rtol=1e-12)
        assert m.num_batches_tracked.item() == step + 1
    m.eval()
    x = rng.standard_normal((5, 3))
    expected = (x - running_mean) / np.sqrt(running_var + 1e-5) * [1.0, 2.0, 0.5] + [0.0, -1.0, 3.0]
    np.testing.assert_allclose(m(t64(x)).detach().numpy(), expected, rtol=1e-10)
    np.testing.assert_allclose(m.running_mean.numpy(), running_mean)  # eval leaves the statistics alone
    assert m.num_batches_tracked.item() == 3
    m.reset_running_stats()
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(3))
    assert m.num_batches_tracked.item() == 0


def test_batch_norm_cumulative_average_and_3d_input():
    """momentum=None: the running statistics are the plain average over the batches seen."""
    rng = np.random.default_rng(10)
    m = nn.BatchNorm1d(2, momentum=None, affine=False).double()
    batches = [rng.standard_normal((4, 2, 3)) + k for k in range(3)]
    for x in batches:
        out = m(t64(x)).numpy()
        expected = (x - x.mean((0, 2), keepdims=True)) / np.sqrt(x.var((0, 2), keepdims=True) + 1e-5)
        np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.running_mean.numpy(), np.mean([x.mean((0, 2)) for x in batches], 0), rtol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), np.mean([x.var((0, 2), ddof=1) for x in batches], 0),
                               rtol=1e-12)


def test_batch_norm_without_running_stats_uses_batch_statistics_in_eval():
    x = np.random.default_rng(11).standard_normal((6, 2))
    m = nn.BatchNorm1d(2, track_running_stats=False).double().eval()
    np.testing.assert_allclose(m(t64(x)).detach().numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-10)
    m2 = nn.BatchNorm1d(2).double()
    m2.running_mean = None  # torch: with neither running statistic, eval normalizes with the batch's
    m2.running_var = None
    m2.eval()
    np.testing.assert_allclose(m2(t64(x)).detach().numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-10)


def test_batch_norm_gradients():
    rng = np.random.default_rng(12)
    m = nn.BatchNorm1d(3).double()
    with r.no_grad():
        m.weight.copy_(t64([0.5, 1.5, -1.0]))
        m.bias.copy_(t64([0.1, 0.2, 0.3]))
    check_grads(m, t64(rng.standard_normal((4, 3)), requires_grad=True))
    check_grads(m, t64(rng.standard_normal((2, 3, 2)), requires_grad=True))
    m.eval()
    check_grads(m, t64(rng.standard_normal((2, 3)), requires_grad=True))


def test_batch_norm_input_errors():
    m = nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        m(r.randn(2, 3, 2, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        m(r.randn(1, 3))
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        m(r.randn(2, 4))
    m.eval()
    assert m(r.randn(1, 3)).shape == (1, 3)
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(r.randn(2, 3, 4))


def test_batch_norm_2d_matches_per_channel_statistics():
    x = np.random.default_rng(13).standard_normal((2, 3, 4, 5))
    m = nn.BatchNorm2d(3).double()
    out = m(t64(x)).detach().numpy()
    expected = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-12)


def test_batch_norm_loads_a_checkpoint_without_num_batches_tracked():
    src = nn.BatchNorm1d(2)
    src(r.randn(4, 2))
    state = src.state_dict()
    del state["num_batches_tracked"]
    state._metadata[""]["version"] = 1  # written before the counter existed
    dst = nn.BatchNorm1d(2)
    dst.num_batches_tracked.fill_(7)
    assert str(dst.load_state_dict(state)) == "<All keys matched successfully>"
    np.testing.assert_array_equal(dst.running_mean.numpy(), src.running_mean.numpy())
    assert dst.num_batches_tracked.item() == 7
    del state._metadata[""]["version"]
    state._metadata[""]["version"] = 2
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "num_batches_tracked"'):
        dst.load_state_dict(state)


# ---------------------------------------------------------------------------------------------
# Embedding
# ---------------------------------------------------------------------------------------------

def test_embedding_init_lookup_and_repr():
    m = nn.Embedding(10, 3)
    assert m.weight.shape == (10, 3) and repr(m) == "Embedding(10, 3)"
    big = np_of(nn.Embedding(1000, 20).weight)
    assert abs(big.mean()) < 0.02 and abs(big.std() - 1) < 0.02
    idx = r.tensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    out = m(idx)
    assert out.shape == (2, 4, 3)
    np.testing.assert_array_equal(out.detach().numpy(), np_of(m.weight)[idx.numpy()])
    assert repr(nn.Embedding(10, 3, padding_idx=0, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)) == \
        "Embedding(10, 3, padding_idx=0, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)"
    assert nn.Embedding(4, 2, dtype=r.float64).weight.dtype is r.float64


def test_embedding_padding_idx():
    m = nn.Embedding(5, 3, padding_idx=-1)
    assert m.padding_idx == 4 and repr(m) == "Embedding(5, 3, padding_idx=4)"
    np.testing.assert_array_equal(np_of(m.weight)[4], np.zeros(3))
    assert np.all(np_of(m.weight)[:4] != 0)
    m(r.tensor([0, 4, 4, 2])).sum().backward()
    expected = np.zeros((5, 3))
    expected[[0, 2]] = 1
    np.testing.assert_array_equal(m.weight.grad.numpy(), expected)  # the padding row gets no gradient
    m.reset_parameters()
    np.testing.assert_array_equal(np_of(m.weight)[4], np.zeros(3))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 3, padding_idx=-6)


def test_embedding_gradients_max_norm_and_errors():
    m = nn.Embedding(4, 2).double()
    idx = r.tensor([0, 2, 2, 3])
    assert gradcheck(lambda w: m(idx), (m.weight,))
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [1.0, 0.0]])
    m = nn.Embedding.from_pretrained(t64(w), freeze=False, max_norm=2.0)
    out = m(r.tensor([0, 1])).detach().numpy()
    np.testing.assert_allclose(out, [[1.2, 1.6], [0.3, 0.4]], rtol=1e-6)
    np.testing.assert_allclose(m.weight.detach().numpy()[2], [6.0, 8.0])  # rows not looked up are left alone
    with pytest.raises(IndexError, match="index out of range in self"):
        m(r.tensor([4]))
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices' to have one of the following "
                                           "scalar types: Long, Int"):
        m(r.tensor([0.0, 1.0]))


def test_embedding_from_pretrained():
    w = r.tensor([[1.0, 2.3, 3.0], [4.0, 5.1, 6.3]])
    m = nn.Embedding.from_pretrained(w)
    assert not m.weight.requires_grad and repr(m) == "Embedding(2, 3)"
    np.testing.assert_allclose(m(r.tensor([1])).numpy(), [[4.0, 5.1, 6.3]], rtol=1e-6)
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    with pytest.raises(AssertionError, match="Embeddings parameter is expected to be 2-dimensional"):
        nn.Embedding.from_pretrained(r.ones(3))
    with pytest.raises(AssertionError, match="Shape of weight does not match num_embeddings and embedding_dim"):
        nn.Embedding(3, 3, _weight=w)


# ---------------------------------------------------------------------------------------------
# Conv2d
# ---------------------------------------------------------------------------------------------

def _conv2d(x, w, b, stride, pads, dilation, groups):
    """Naive loops: x [N, C, H, W], w [O, C/groups, kh, kw], pads (top, bottom, left, right)."""
    x = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for b_ in range(n):
        for oc in range(o):
            g = oc // per_group
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for ci in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                acc += w[oc, ci, p, q] * x[b_, g * cg + ci, i * stride[0] + p * dilation[0],
                                                           j * stride[1] + q * dilation[1]]
                    out[b_, oc, i, j] = acc + (0 if b is None else b[oc])
    return out


@pytest.mark.parametrize("kwargs, pads", [
    (dict(), (0, 0, 0, 0)),
    (dict(stride=2, padding=1), (1, 1, 1, 1)),
    (dict(stride=(1, 2), padding=(2, 0), dilation=(1, 2)), (2, 2, 0, 0)),
    (dict(padding="same", dilation=2), (2, 2, 2, 2)),
    (dict(padding="valid", groups=2, bias=False), (0, 0, 0, 0)),
])
def test_conv2d_matches_naive_loops(kwargs, pads):
    m = nn.Conv2d(4, 6, 3, **kwargs).double()
    x = np.random.default_rng(14).standard_normal((2, 4, 7, 8))
    out = m(t64(x)).detach().numpy()
    stride = kwargs.get("stride", 1)
    stride = stride if isinstance(stride, tuple) else (stride, stride)
    dilation = kwargs.get("dilation", 1)
    dilation = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    expected = _conv2d(x, np_of(m.weight), None if m.bias is None else np_of(m.bias), stride, pads, dilation,
                       kwargs.get("groups", 1))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
    if kwargs.get("padding") == "same":
        assert out.shape[2:] == x.shape[2:]


def test_conv2d_same_padding_with_an_even_kernel_pads_more_after():
    m = nn.Conv2d(1, 1, (2, 4), padding="same", bias=False).double()
    x = np.random.default_rng(15).standard_normal((1, 1, 5, 6))
    out = m(t64(x)).detach().numpy()
    assert out.shape == (1, 1, 5, 6)
    np.testing.assert_allclose(out, _conv2d(x, np_of(m.weight), None, (1, 1), (0, 1, 1, 2), (1, 1), 1), rtol=1e-10)
    assert m._reversed_padding_repeated_twice == [1, 2, 0, 1]


def test_conv2d_unbatched_input_and_reflect_padding():
    m = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect").double()
    assert repr(m) == "Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=reflect)"
    x = np.random.default_rng(16).standard_normal((2, 5, 5))
    out = m(t64(x)).detach().numpy()
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect")
    expected = _conv2d(padded[None], np_of(m.weight), np_of(m.bias), (1, 1), (0, 0, 0, 0), (1, 1), 1)[0]
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_conv2d_gradients():
    rng = np.random.default_rng(17)
    m = nn.Conv2d(2, 2, 2, stride=(2, 1), padding=1).double()
    check_grads(m, t64(rng.standard_normal((1, 2, 3, 3)), requires_grad=True))
    g = nn.Conv2d(2, 4, (1, 2), groups=2, dilation=(1, 2)).double()
    check_grads(g, t64(rng.standard_normal((1, 2, 2, 3)), requires_grad=True))


def test_conv2d_parameters_init_and_repr():
    m = nn.Conv2d(1, 20, 5)
    assert repr(m) == "Conv2d(1, 20, kernel_size=(5, 5), stride=(1, 1))"
    assert m.weight.shape == (20, 1, 5, 5) and m.bias.shape == (20,)
    assert list(m.state_dict()) == ["weight", "bias"]
    assert repr(nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1))) == \
        "Conv2d(16, 33, kernel_size=(3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1))"
    assert repr(nn.Conv2d(4, 8, 3, padding="same", groups=2, bias=False)) == \
        "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=same, groups=2, bias=False)"
    assert repr(nn.Conv2d(4, 8, 3, padding="valid")) == \
        "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=valid)"
    big = nn.Conv2d(8, 64, 3, groups=2)
    assert big.weight.shape == (64, 4, 3, 3)
    bound = 1 / math.sqrt(4 * 9)  # fan_in = in_channels / groups * kh * kw
    w = np_of(big.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert np.abs(np_of(big.bias)).max() <= bound
    assert nn.Conv2d(1, 1, 1, dtype=r.float64).weight.dtype is r.float64


def test_conv2d_errors():
    m = nn.Conv2d(1, 2, 3)
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[2, 1, 3, 3\], expected input\[1, 3, 8, "
                                           r"8\] to have 1 channels, but got 3 channels instead"):
        m(r.randn(1, 3, 8, 8))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to conv2d"):
        m(r.randn(8, 8))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        m(r.randn(1, 1, 2, 2))
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(2, 2, 1, groups=0)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 2, 1, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(2, 3, 1, groups=2)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")


# ---------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------

def _pool(x, k, s, p, reduce, pad_value):
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=pad_value)
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def test_max_pool2d():
    m = nn.MaxPool2d(2)
    assert repr(m) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.MaxPool2d((3, 2), stride=(2, 1), padding=1, ceil_mode=True)) == \
        "MaxPool2d(kernel_size=(3, 2), stride=(2, 1), padding=1, dilation=1, ceil_mode=True)"
    x = np.random.default_rng(18).standard_normal((2, 3, 6, 7))
    np.testing.assert_allclose(m(t64(x)).numpy(), _pool(x, 2, 2, 0, np.max, 0))
    np.testing.assert_allclose(nn.MaxPool2d(3, stride=2, padding=1)(t64(x)).numpy(),
                               _pool(x, 3, 2, 1, np.max, -np.inf))
    assert nn.MaxPool2d(2, ceil_mode=True)(t64(x)).shape == (2, 3, 3, 4)
    assert nn.MaxPool2d(2)(t64(x[0])).shape == (3, 3, 3)
    _, idx = nn.MaxPool2d(2, return_indices=True)(t64(x[:1, :1, :2, :2]))
    assert idx.item() == int(np.argmax(x[0, 0, :2, :2]))
    check_grads(nn.MaxPool2d(2, stride=1), t64(x[:1, :2, :3, :3], requires_grad=True))


def test_avg_pool2d():
    m = nn.AvgPool2d(2)
    assert repr(m) == "AvgPool2d(kernel_size=2, stride=2, padding=0)"
    assert repr(nn.AvgPool2d(3, stride=1, padding=1)) == "AvgPool2d(kernel_size=3, stride=1, padding=1)"
    x = np.random.default_rng(19).standard_normal((2, 3, 6, 7))
    np.testing.assert_allclose(m(t64(x)).numpy(), _pool(x, 2, 2, 0, np.mean, 0), rtol=1e-12)
    np.testing.assert_allclose(nn.AvgPool2d(3, 2, 1)(t64(x)).numpy(), _pool(x, 3, 2, 1, np.mean, 0), rtol=1e-12)
    counts = _pool(np.ones((1, 1, 6, 7)), 3, 2, 1, np.sum, 0)
    np.testing.assert_allclose(nn.AvgPool2d(3, 2, 1, count_include_pad=False)(t64(x)).numpy(),
                               _pool(x, 3, 2, 1, np.sum, 0) / counts, rtol=1e-12)
    np.testing.assert_allclose(nn.AvgPool2d(2, divisor_override=3)(t64(x)).numpy(),
                               _pool(x, 2, 2, 0, np.sum, 0) / 3, rtol=1e-12)
    check_grads(nn.AvgPool2d(2, stride=1, padding=1), t64(x[:1, :1, :3, :3], requires_grad=True))
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        nn.AvgPool2d(2, padding=2)(t64(x))


# ---------------------------------------------------------------------------------------------
# the package surface
# ---------------------------------------------------------------------------------------------

def test_layers_are_exported_from_nn_and_nn_modules():
    from rlpipe.nn import modules
    for name in ["Identity", "Linear", "Bilinear", "ReLU", "GELU", "PReLU", "Softmax2d", "Flatten", "Unflatten",
                 "Dropout", "LayerNorm", "BatchNorm1d", "Embedding", "Conv2d", "MaxPool2d", "AvgPool2d", "MSELoss",
                 "CrossEntropyLoss", "BCEWithLogitsLoss"]:
        assert getattr(nn, name) is getattr(modules, name)
    assert nn.functional.linear is r.primitives.linear
    assert callable(nn.init.kaiming_uniform_) and callable(nn.utils.clip_grad_norm_)


def test_a_small_network_trains_end_to_end():
    r.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Dropout(0.1), nn.Linear(4 * 2 * 2, 3), nn.LayerNorm(3), nn.Tanh(), nn.Linear(3, 2))
    x = r.randn(8, 1, 4, 4)
    target = r.randint(0, 2, (8,))
    loss = nn.CrossEntropyLoss()(net(x), target)
    loss.backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in net.parameters())
    net.eval()
    with r.no_grad():
        assert net(x).shape == (8, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net.double()(x.double())
