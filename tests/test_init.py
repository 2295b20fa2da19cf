"""``rlpipe.nn.init``: gains and fans against torch's documented table and formulas, the random
initializers checked statistically on large tensors, the deterministic ones exactly."""
import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

import rlpipe as r
import rlpipe.nn.functional as F
import rlpipe.nn.init as init


@pytest.mark.parametrize("nonlinearity, param, gain", [
    ("linear", None, 1), ("conv1d", None, 1), ("conv2d", None, 1), ("conv3d", None, 1),
    ("conv_transpose1d", None, 1), ("conv_transpose2d", None, 1), ("conv_transpose3d", None, 1),
    ("sigmoid", None, 1), ("tanh", None, 5 / 3), ("relu", None, math.sqrt(2)),
    ("leaky_relu", None, math.sqrt(2 / (1 + 0.01 ** 2))), ("leaky_relu", 0.2, math.sqrt(2 / 1.04)),
    ("leaky_relu", 1, 1.0), ("selu", None, 3 / 4),
])
def test_calculate_gain_matches_torchs_table(nonlinearity, param, gain):
    assert init.calculate_gain(nonlinearity, param) == pytest.approx(gain, rel=1e-12)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_fan_in_and_fan_out():
    assert init._calculate_fan_in_and_fan_out(r.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(r.empty(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 "
                                         "dimensions"):
        init._calculate_fan_in_and_fan_out(r.empty(5))


def values(t):
    return t.detach().numpy().astype(np.float64)


def test_uniform_and_normal():
    t = r.empty(400, 500)
    assert init.uniform_(t, -2.0, 3.0) is t
    v = values(t)
    assert v.min() >= -2.0 and v.max() < 3.0
    assert v.mean() == pytest.approx(0.5, abs=0.02)
    assert v.std() == pytest.approx(5 / math.sqrt(12), rel=0.01)
    init.normal_(t, 1.5, 0.5)
    v = values(t)
    assert v.mean() == pytest.approx(1.5, abs=0.005)
    assert v.std() == pytest.approx(0.5, rel=0.01)


def test_constant_ones_zeros_eye():
    t = r.empty(3, 4)
    np.testing.assert_array_equal(values(init.constant_(t, 2.5)), np.full((3, 4), 2.5))
    np.testing.assert_array_equal(values(init.ones_(t)), np.ones((3, 4)))
    np.testing.assert_array_equal(values(init.zeros_(t)), np.zeros((3, 4)))
    np.testing.assert_array_equal(values(init.eye_(t)), np.eye(3, 4))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(r.empty(2, 2, 2))


@pytest.mark.parametrize("groups", [1, 2])
def test_dirac_makes_an_identity_convolution(groups):
    w = init.dirac_(r.empty(4, 4 // groups, 3, 3, dtype=r.float64), groups)
    x = r.randn(2, 4, 5, 6, dtype=r.float64)
    np.testing.assert_allclose(F.conv2d(x, w, padding=1, groups=groups).numpy(), x.numpy(), atol=1e-12)


def test_dirac_errors():
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        init.dirac_(r.empty(3, 3))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        init.dirac_(r.empty(3, 1, 3), groups=2)


def test_xavier():
    t = r.empty(300, 500)
    bound = 2.0 * math.sqrt(6 / 800)
    v = values(init.xavier_uniform_(t, gain=2.0))
    assert np.abs(v).max() <= bound
    assert v.std() == pytest.approx(bound / math.sqrt(3), rel=0.01)
    v = values(init.xavier_normal_(t, gain=0.5))
    assert v.mean() == pytest.approx(0.0, abs=0.002)
    assert v.std() == pytest.approx(0.5 * math.sqrt(2 / 800), rel=0.01)


def test_kaiming_defaults_and_modes():
    w = r.empty(256, 64, 3, 3)  # fan_in 576, fan_out 2304
    v = values(init.kaiming_uniform_(w))  # a=0 with leaky_relu: gain sqrt(2), bound sqrt(6 / fan_in)
    bound = math.sqrt(6 / 576)
    assert np.abs(v).max() <= bound and np.abs(v).max() > 0.99 * bound
    assert v.std() == pytest.approx(bound / math.sqrt(3), rel=0.01)
    v = values(init.kaiming_uniform_(w, a=math.sqrt(5)))  # what torch's nn.Linear and nn.Conv2d use
    assert np.abs(v).max() <= 1 / math.sqrt(576)
    v = values(init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"))
    assert v.std() == pytest.approx(math.sqrt(2 / 2304), rel=0.01)
    v = values(init.kaiming_normal_(w, mode="FAN_IN", nonlinearity="tanh"))
    assert v.std() == pytest.approx(5 / 3 / math.sqrt(576), rel=0.01)


def test_kaiming_errors_and_empty_tensors():
    with pytest.raises(ValueError, match=r"Mode fan_avg not supported, please use one of \['fan_in', 'fan_out'\]"):
        init.kaiming_uniform_(r.empty(3, 3), mode="fan_avg")
    empty = r.empty(0, 3)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert init.kaiming_normal_(empty) is empty


@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (6, 2, 2, 2), (5, 5)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    t = init.orthogonal_(r.empty(*shape, dtype=r.float64), gain=1.5)
    m = values(t).reshape(shape[0], -1)
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, 2.25 * np.eye(gram.shape[0]), atol=1e-12)


@pytest.mark.parametrize("rows, cols", [(6, 3), (3, 6)])
def test_orthogonal_is_q_of_the_drawn_normal_matrix_with_positive_r_diagonal(rows, cols):
    """torch's recipe: Q of a N(0, 1) matrix, signs fixed so that R = Q^T A has a positive diagonal."""
    t = init.orthogonal_(r.empty(rows, cols, dtype=r.float64), generator=r.Generator().manual_seed(3))
    a = r.randn(rows, cols, dtype=r.float64, generator=r.Generator().manual_seed(3)).numpy()
    q = values(t)
    if rows < cols:
        a, q = a.T, q.T
    rr = q.T @ a
    np.testing.assert_allclose(np.tril(rr, -1), 0, atol=1e-12)
    assert np.all(np.diag(rr) > 0)


def test_orthogonal_errors_and_float32():
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(r.empty(3))
    m = values(init.orthogonal_(r.empty(5, 3)))
    np.testing.assert_allclose(m.T @ m, np.eye(3), atol=1e-6)


@pytest.mark.parametrize("mean, std, a, b", [(0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 3.0), (0.0, 0.02, -0.04, 0.01)])
def test_trunc_normal_matches_the_truncated_distribution(mean, std, a, b):
    t = init.trunc_normal_(r.empty(200000, dtype=r.float64), mean, std, a, b)
    v = values(t)
    assert v.min() >= a and v.max() <= b
    dist = scipy.stats.truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
    assert v.mean() == pytest.approx(dist.mean(), abs=0.01 * dist.std())
    assert v.std() == pytest.approx(dist.std(), rel=0.01)
    assert scipy.stats.kstest(v[:5000], dist.cdf).pvalue > 1e-4


def test_trunc_normal_warns_when_mean_is_far_from_the_interval():
    with pytest.warns(UserWarning, match="mean is more than 2 std from \\[a, b\\] in nn.init.trunc_normal_"):
        init.trunc_normal_(r.empty(10), mean=5.0, std=1.0, a=-1.0, b=1.0)


def test_sparse():
    t = init.sparse_(r.empty(10, 300), sparsity=0.3, std=0.5)
    v = values(t)
    assert np.all((v == 0).sum(0) == 3)
    assert v[v != 0].std() == pytest.approx(0.5, rel=0.05)
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(r.empty(3), 0.1)


@pytest.mark.parametrize("fn", [
    init.uniform_, init.normal_, init.xavier_uniform_, init.xavier_normal_, init.kaiming_uniform_,
    init.kaiming_normal_, init.orthogonal_, init.trunc_normal_, init.ones_, init.zeros_, init.eye_,
    lambda t: init.constant_(t, 0.3),
], ids=["uniform", "normal", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
        "trunc_normal", "ones", "zeros", "eye", "constant"])
def test_initializers_work_on_parameters_without_recording_a_graph(fn):
    p = r.zeros(4, 3, requires_grad=True)
    version = p._version
    assert fn(p) is p
    assert p.grad_fn is None and p.is_leaf and p.requires_grad
    assert p._version > version


@pytest.mark.parametrize("fn", [init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_,
                                init.orthogonal_, init.trunc_normal_])
def test_generators_make_initializers_reproducible(fn):
    a = fn(r.empty(5, 4), generator=r.Generator().manual_seed(7))
    b = fn(r.empty(5, 4), generator=r.Generator().manual_seed(7))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_erfinv_function_values_and_gradcheck():
    """The core op behind trunc_normal_: SciPy's erfinv forward, d/dx = sqrt(pi)/2 exp(erfinv(x)^2)."""
    from rlpipe.primitives import Erfinv
    x = np.array([-0.9, -0.3, 0.0, 0.45, 0.99])
    np.testing.assert_allclose(Erfinv.apply(r.tensor(x)).numpy(), scipy.special.erfinv(x), rtol=1e-12)
    assert r.autograd.gradcheck(Erfinv.apply, (r.tensor(x, requires_grad=True),))


@pytest.mark.parametrize("old", ["uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                                 "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"])
def test_old_names_warn_and_call_the_underscored_function(old):
    """torch keeps nn.init's names without the underscore, deprecated: the same initialisation, a FutureWarning."""
    shape = (2, 3, 3) if old == "dirac" else (4, 3)
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(old, ())
    a, b = r.empty(shape), r.empty(shape)
    r.manual_seed(0)
    with pytest.warns(FutureWarning, match=rf"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`."):
        out = getattr(init, old)(a, *args)
    r.manual_seed(0)
    getattr(init, old + "_")(b, *args)
    assert out is a and r.equal(a, b)
