"""The distributions added with rlpipe.linalg: values against torch 2.13 (``fixtures/distributions_golden.json``,
written by ``fixtures/make_distributions_golden.py``) and SciPy, sample moments (seeded), gradients of rsample and
log_prob by gradcheck, errors, and the CUDA backend against the CPU one."""
import json
import pathlib
import sys

import numpy as np
import pytest
import scipy.special
import scipy.stats as st

import rlpipe as r
from rlpipe import distributions as D
from rlpipe.autograd import gradcheck

sys.path.insert(0, str(pathlib.Path(__file__).parent / "fixtures"))
from distribution_cases import CASES, KL_NORMAL_TO, KL_PAIRS, KL_WITH_NORMAL, NORMAL  # noqa: E402

GOLDEN = json.loads((pathlib.Path(__file__).parent / "fixtures" / "distributions_golden.json").read_text())


@pytest.fixture(autouse=True)
def validation_on():
    """torch's default (importing rlpipe's torchrl side turns it off, as importing torchrl does)."""
    before = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    yield
    D.Distribution.set_default_validate_args(before)


def T(values, device="cpu"):
    return r.tensor(values, dtype=r.float64, device=device)


def build(name):
    return eval(CASES[name][0])


def close(ours, expected, rtol=1e-9):
    if isinstance(expected, dict):  # torch raised
        return
    np.testing.assert_allclose(np.asarray(ours.tolist(), dtype=float), np.asarray(expected, dtype=float), rtol=rtol,
                               atol=1e-12)


# torch 2.13's Kumaraswamy.mode is nan for concentration0 > 1; its GeneralizedPareto.log_prob/cdf raise for float64
# parameters (a float32 constant in isclose): rlpipe's are checked against SciPy in test_values_against_scipy
DIFFERS_ON_PURPOSE = {"kumaraswamy": {"mode"}, "generalized_pareto": {"cdf"}}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name):
    golden = GOLDEN["cases"][name]
    d = build(name)
    value = eval(CASES[name][1])
    assert list(d.batch_shape) == golden["batch_shape"] and list(d.event_shape) == golden["event_shape"]
    close(d.log_prob(value), golden["log_prob"])
    for quantity in ("mean", "variance", "mode", "stddev"):
        if quantity in DIFFERS_ON_PURPOSE.get(name, ()):
            continue
        if isinstance(golden[quantity], dict):
            with pytest.raises(NotImplementedError):
                getattr(d, quantity)
        else:
            close(getattr(d, quantity), golden[quantity])
    if isinstance(golden["entropy"], dict):
        with pytest.raises(NotImplementedError):
            d.entropy()
    else:  # torch's Multinomial takes lgamma(n + 1) of an int64 tensor, in float32
        close(d.entropy(), golden["entropy"], rtol=1e-7 if name == "multinomial" else 1e-9)
    if "cdf" in DIFFERS_ON_PURPOSE.get(name, ()):
        pass
    elif isinstance(golden["cdf"], dict):
        with pytest.raises((NotImplementedError, ValueError)):
            d.cdf(value)
    else:
        close(d.cdf(value), golden["cdf"])
    if CASES[name][2] is not None:
        close(d.icdf(eval(CASES[name][2])), golden["icdf"])


KL_CASES = ([(p, q, CASES[p][0], CASES[q][0]) for p, q in KL_PAIRS]
            + [(p, "normal", CASES[p][0], NORMAL) for p in KL_WITH_NORMAL]
            + [("normal", q, NORMAL, CASES[q][0]) for q in KL_NORMAL_TO])


@pytest.mark.parametrize("p, q, build_p, build_q", KL_CASES, ids=[f"{p}|{q}" for p, q, _, _ in KL_CASES])
def test_kl_matches_torch(p, q, build_p, build_q):
    expected = GOLDEN["kl"][f"{p}|{q}"]
    if isinstance(expected, dict):
        with pytest.raises(NotImplementedError):
            D.kl_divergence(eval(build_p), eval(build_q))
        return
    close(D.kl_divergence(eval(build_p), eval(build_q)), expected, rtol=1e-8)


def test_kumaraswamy_mode_is_the_density_maximum():
    d = D.Kumaraswamy(T([2.5, 4.0, 0.8]), T([1.5, 2.0, 3.0]))
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    density = d.log_prob(T(grid[:, None]).expand(-1, 3)).numpy()
    np.testing.assert_allclose(d.mode.numpy()[:2], grid[density.argmax(0)][:2], atol=1e-4)
    assert np.isnan(d.mode.numpy()[2])


def test_values_against_scipy():
    x = np.array([0.3, 1.5, 4.0])
    gp = D.GeneralizedPareto(T([0.0, 1.0, -2.0]), T([1.0, 0.5, 3.0]), T([0.2, 0.0, -0.3]))
    ref = st.genpareto(c=[0.2, 0.0, -0.3], loc=[0.0, 1.0, -2.0], scale=[1.0, 0.5, 3.0])
    np.testing.assert_allclose(gp.log_prob(T([0.3, 1.5, 2.0])).numpy(), ref.logpdf([0.3, 1.5, 2.0]), rtol=1e-12)
    np.testing.assert_allclose(gp.cdf(T([0.3, 1.5, 2.0])).numpy(), ref.cdf([0.3, 1.5, 2.0]), rtol=1e-12)
    np.testing.assert_allclose(D.StudentT(T(3.0), T(1.0), T(2.0)).log_prob(T(x)).numpy(), st.t(3, 1, 2).logpdf(x))
    np.testing.assert_allclose(D.Gamma(T([2.5]), T([0.5])).log_prob(T(x)).numpy(), st.gamma(2.5, scale=2).logpdf(x))
    c = np.array([0.5, 2.0, 3.0])
    np.testing.assert_allclose(D.Dirichlet(T(c)).entropy().item(), st.dirichlet(c).entropy())
    np.testing.assert_allclose(D.Binomial(12, T([0.3])).entropy().numpy(), st.binom(12, 0.3).entropy())
    np.testing.assert_allclose(D.Multinomial(5, T([0.2, 0.8])).entropy().item(),
                               st.multinomial(5, [0.2, 0.8]).entropy())
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(D.MultivariateNormal(T([0.0, 1.0]), T(cov)).log_prob(T([[0.5, 0.5]])).numpy(),
                               [st.multivariate_normal([0, 1], cov).logpdf([0.5, 0.5])])


# ---- sampling ---------------------------------------------------------------------------------------

N = 50_000


def moments(d, n=N):
    r.manual_seed(0)
    s = d.sample((n,))
    assert s.shape == (n,) + tuple(d.batch_shape) + tuple(d.event_shape)
    return s.numpy().mean(0), s.numpy().var(0)


@pytest.mark.parametrize("name", ["mvn_cov", "mvn_tril", "lowrank", "laplace", "exponential", "gamma", "chi2",
                                  "dirichlet", "gumbel", "studentt_finite", "poisson", "poisson_large", "geometric",
                                  "binomial", "binomial_large", "multinomial", "mixture", "negative_binomial",
                                  "weibull", "half_normal", "inverse_gamma_finite", "kumaraswamy", "pareto_finite",
                                  "continuous_bernoulli"])
def test_sample_moments(name):
    d = {"studentt_finite": lambda: D.StudentT(T([5.0, 9.0]), T([0.0, 1.0]), T([1.0, 0.5])),
         "poisson_large": lambda: D.Poisson(T([15.0, 400.0])),
         "binomial_large": lambda: D.Binomial(T([100.0, 1000.0]), T([0.3, 0.95])),
         "inverse_gamma_finite": lambda: D.InverseGamma(T([5.0, 9.0]), T([1.0, 2.0])),
         "pareto_finite": lambda: D.Pareto(T([1.0, 0.5]), T([6.0, 9.0]))}.get(name, lambda: build(name))()
    mean, var = moments(d)
    scale = np.sqrt(d.variance.numpy() / N)  # the standard error of the sample mean
    assert np.all(np.abs(mean - d.mean.numpy()) < 5 * scale + 1e-12), (mean, d.mean)
    np.testing.assert_allclose(var, d.variance.numpy(), rtol=0.05)


def test_discrete_samples_follow_their_pmf():
    """Chi-squared goodness of fit of 1e5 draws against SciPy's pmf, for both algorithms of each sampler."""
    r.manual_seed(1)
    for d, ref in ((D.Poisson(T(4.0)), st.poisson(4.0)), (D.Poisson(T(30.0)), st.poisson(30.0)),
                   (D.Binomial(20, T(0.3)), st.binom(20, 0.3)), (D.Binomial(200, T(0.8)), st.binom(200, 0.8))):
        s = d.sample((N,)).numpy().astype(int)
        assert s.min() >= 0
        lo, hi = ref.ppf(1e-4), ref.ppf(1 - 1e-4)
        ks = np.arange(int(lo), int(hi) + 1)
        observed = np.array([(s == k).sum() for k in ks])
        expected = N * ref.pmf(ks)
        assert st.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-3


def test_standard_gamma_gradient_is_the_implicit_one():
    """d sample / d concentration against SciPy: the derivative of F^-1(u; c) at the sample's u."""
    for c_value in (0.3, 1.0, 4.0, 60.0):
        c = r.full((500,), c_value, dtype=r.float64, requires_grad=True)
        r.manual_seed(2)
        x = D.Gamma(c, T(1.0)).rsample()
        x.sum().backward()
        xs = x.detach().numpy()
        u = scipy.special.gammainc(c_value, xs)
        h = 1e-6 * c_value
        fd = (scipy.special.gammaincinv(c_value + h, u) - scipy.special.gammaincinv(c_value - h, u)) / (2 * h)
        inner = (u > 1e-10) & (u < 1 - 1e-10)
        np.testing.assert_allclose(c.grad.numpy()[inner], fd[inner], rtol=1e-5)


def test_rsample_gradients_of_the_mean():
    """The averaged pathwise gradient is the derivative of the mean (d/dc E[Gamma(c, r)] = 1 / r, ...)."""
    c = T([2.0, 0.5]).requires_grad_()
    rate = T([1.5, 4.0]).requires_grad_()
    r.manual_seed(3)
    D.Gamma(c, rate).rsample((N,)).mean(0).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), [1 / 1.5, 1 / 4.0], rtol=0.02)
    np.testing.assert_allclose(rate.grad.numpy(), [-2.0 / 1.5 ** 2, -0.5 / 16], rtol=0.02)
    a, b = T([2.0]).requires_grad_(), T([3.0]).requires_grad_()
    D.Beta(a, b).rsample((N,)).mean().backward()  # d/da a / (a + b) = b / (a + b)^2, d/db = -a / (a + b)^2
    np.testing.assert_allclose([a.grad.item(), b.grad.item()], [3 / 25, -2 / 25], atol=0.005)
    conc = T([1.0, 2.0, 3.0]).requires_grad_()
    D.Dirichlet(conc).rsample((N,)).mean(0)[0].backward()  # d/dc_j of c_0 / sum(c)
    np.testing.assert_allclose(conc.grad.numpy(), [5 / 36, -1 / 36, -1 / 36], atol=0.01)


@pytest.mark.parametrize("name, fn, inputs", [
    ("mvn_rsample", lambda loc, a: _seeded(lambda: D.MultivariateNormal(loc, scale_tril=a.tril()).rsample((3,))),
     ([0.0, 1.0], [[1.0, 0.0], [0.5, 2.0]])),
    ("mvn_log_prob_cov", lambda loc, a: D.MultivariateNormal(loc, a @ a.mT + T(np.eye(2))).log_prob(T([0.3, -0.2])),
     ([0.0, 1.0], [[1.0, 0.2], [0.5, 2.0]])),
    ("mvn_log_prob_precision", lambda loc, a: D.MultivariateNormal(loc, precision_matrix=a @ a.mT + T(np.eye(2)))
     .log_prob(T([0.3, -0.2])), ([0.0, 1.0], [[1.0, 0.2], [0.5, 2.0]])),
    ("mvn_entropy_kl", lambda a: D.kl_divergence(D.MultivariateNormal(T([0.0, 1.0]), scale_tril=a.tril()),
                                                 D.MultivariateNormal(T([1.0, 0.0]), T(np.eye(2) * 2))),
     ([[1.0, 0.0], [0.5, 2.0]],)),
    ("lowrank_log_prob", lambda w, diag: D.LowRankMultivariateNormal(T([0.0, 1.0, 0.0]), w, diag)
     .log_prob(T([0.3, -0.2, 1.0])), ([[1.0], [0.5], [-1.0]], [0.5, 1.0, 2.0])),
    ("lowrank_rsample", lambda w, diag: _seeded(lambda: D.LowRankMultivariateNormal(T([0.0, 1.0, 0.0]), w, diag)
                                                .rsample((2,))), ([[1.0], [0.5], [-1.0]], [0.5, 1.0, 2.0])),
    ("laplace_rsample", lambda loc, scale: _seeded(lambda: D.Laplace(loc, scale).rsample((4,))),
     ([0.0, 1.0], [1.0, 2.0])),
    ("exponential_rsample", lambda rate: _seeded(lambda: D.Exponential(rate).rsample((4,))), ([0.5, 2.0],)),
    ("cauchy_rsample", lambda loc, scale: _seeded(lambda: D.Cauchy(loc, scale).rsample((4,))),
     ([0.0, 1.0], [1.0, 2.0])),
    ("gumbel_rsample", lambda loc, scale: _seeded(lambda: D.Gumbel(loc, scale).rsample((4,))),
     ([0.0, 1.0], [1.0, 2.0])),
    ("lognormal_rsample", lambda loc, scale: _seeded(lambda: D.LogNormal(loc, scale).rsample((4,))),
     ([0.0, 1.0], [1.0, 0.5])),
    ("gamma_rate_rsample", lambda rate: _seeded(lambda: D.Gamma(T([2.0, 3.0]), rate).rsample((4,))), ([0.5, 2.0],)),
    ("studentt_loc_scale_rsample", lambda loc, scale: _seeded(lambda: D.StudentT(T([3.0, 5.0]), loc, scale)
                                                              .rsample((4,))), ([0.0, 1.0], [1.0, 2.0])),
    ("relaxed_bernoulli_rsample", lambda logits: _seeded(lambda: D.RelaxedBernoulli(T(0.5), logits=logits)
                                                         .rsample((3,))), ([0.3, -1.0],)),
    ("relaxed_onehot_rsample", lambda logits: _seeded(lambda: D.RelaxedOneHotCategorical(T(0.7), logits=logits)
                                                      .rsample((3,))), ([0.3, -1.0, 0.5],)),
    ("relaxed_onehot_log_prob", lambda logits: D.RelaxedOneHotCategorical(T(0.7), logits=logits)
     .log_prob(T([0.2, 0.3, 0.5])), ([0.3, -1.0, 0.5],)),
    ("half_normal_rsample", lambda scale: _seeded(lambda: D.HalfNormal(scale).rsample((3,))), ([0.5, 2.0],)),
    ("pareto_rsample", lambda scale, alpha: _seeded(lambda: D.Pareto(scale, alpha).rsample((3,))),
     ([0.5, 2.0], [1.5, 3.0])),
    ("weibull_rsample", lambda scale, k: _seeded(lambda: D.Weibull(scale, k).rsample((3,))), ([0.5, 2.0], [1.5, 3.0])),
    ("kumaraswamy_rsample", lambda a, b: _seeded(lambda: D.Kumaraswamy(a, b).rsample((3,))),
     ([0.5, 2.0], [1.5, 3.0])),
    ("logistic_normal_log_prob", lambda loc, scale: D.LogisticNormal(loc, scale).log_prob(T([0.2, 0.3, 0.5])),
     ([0.0, 1.0], [1.0, 0.5])),
    ("logistic_normal_rsample", lambda loc, scale: _seeded(lambda: D.LogisticNormal(loc, scale).rsample((2,))),
     ([0.0, 1.0], [1.0, 0.5])),
    ("inverse_gamma_log_prob", lambda c, rate: D.InverseGamma(c, rate).log_prob(T([0.5, 2.0])),
     ([2.0, 0.7], [1.5, 0.3])),
    ("fisher_log_prob", lambda d1, d2: D.FisherSnedecor(d1, d2).log_prob(T([0.5, 2.0])), ([2.0, 0.7], [1.5, 5.0])),
    ("negative_binomial_log_prob", lambda n, logits: D.NegativeBinomial(n, logits=logits).log_prob(T([0.0, 3.0])),
     ([2.0, 4.5], [0.3, -1.0])),
    ("gamma_log_prob", lambda c, rate: D.Gamma(c, rate).log_prob(T([0.5, 2.0])), ([2.0, 0.7], [1.5, 0.3])),
    ("dirichlet_log_prob", lambda c: D.Dirichlet(c).log_prob(T([0.2, 0.3, 0.5])), ([0.5, 2.0, 3.0],)),
    ("studentt_log_prob", lambda df, loc, scale: D.StudentT(df, loc, scale).log_prob(T([0.5, 2.0])),
     ([3.0, 1.5], [0.0, 1.0], [1.0, 2.0])),
    ("laplace_cdf", lambda loc, scale: D.Laplace(loc, scale).cdf(T([0.5, 2.0])), ([0.0, 1.0], [1.0, 2.0])),
    ("poisson_log_prob", lambda rate: D.Poisson(rate).log_prob(T([0.0, 3.0])), ([0.5, 2.0],)),
    ("binomial_log_prob", lambda p: D.Binomial(10, p).log_prob(T([0.0, 3.0])), ([0.2, 0.6],)),
    ("geometric_entropy", lambda p: D.Geometric(p).entropy(), ([0.2, 0.6],)),
    ("multinomial_log_prob", lambda logits: D.Multinomial(4, logits=logits).log_prob(T([1.0, 3.0, 0.0])),
     ([0.2, -0.6, 1.0],)),
    ("mixture_log_prob", lambda logits, loc: D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(loc, T(1.0)))
     .log_prob(T([0.5, -1.0])), ([0.2, -0.6], [1.0, -1.0])),
    ("continuous_bernoulli_rsample", lambda p: _seeded(lambda: D.ContinuousBernoulli(p).rsample((3,))),
     ([0.2, 0.7],)),
    ("continuous_bernoulli_log_prob", lambda logits: D.ContinuousBernoulli(logits=logits).log_prob(T([0.3, 0.8])),
     ([-1.0, 2.0],)),
    ("von_mises_log_prob", lambda loc, k: D.VonMises(loc, k).log_prob(T([0.3, 2.0])), ([0.0, 1.0], [0.5, 5.0])),
    ("generalized_pareto_rsample_log_prob", lambda loc, scale, k: D.GeneralizedPareto(loc, scale, k).log_prob(
        T([0.5, 1.3])), ([0.0, 1.0], [1.0, 0.5], [0.2, -0.3])),
    ("gamma_cdf", lambda c, rate, x: D.Gamma(c, rate).cdf(x), ([2.0, 0.7], [1.5, 0.3], [0.4, 3.0])),
    ("gamma_gamma_kl", lambda c, rate: D.kl_divergence(D.Gamma(c, rate), D.Gamma(T([1.0, 2.0]), T([1.0, 1.0]))),
     ([2.0, 0.7], [1.5, 0.3])),
])
def test_gradcheck(name, fn, inputs):
    assert gradcheck(fn, tuple(T(x).requires_grad_() for x in inputs))


def _seeded(draw):
    r.manual_seed(5)
    return draw()


# ---- transforms ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("transform, x", [
    (D.StickBreakingTransform(), [[0.3, -1.2, 2.0], [0.0, 0.5, -0.5]]),
    (D.SoftplusTransform(), [0.3, -1.2, 2.0]),
    (D.PowerTransform(T(2.5)), [0.3, 1.2, 2.0]),
    (D.IndependentTransform(D.SoftplusTransform(), 1), [[0.3, -1.2, 2.0]]),
    (D.ReshapeTransform((2, 3), (6,)), [[0.3, -1.2, 2.0], [0.0, 0.5, -0.5]]),
    (D.LowerCholeskyTransform(), [[0.3, 0.0], [-1.2, 2.0]]),
    (D.CumulativeDistributionTransform(D.Normal(T(0.0), T(2.0))), [0.3, -1.2, 2.0]),
])
def test_transforms_invert_and_their_log_det(transform, x):
    """t.inv(t(x)) is x; the log-det is the log |det| of the Jacobian computed by autograd, column by column."""
    x = T(x)
    y = transform(x)
    np.testing.assert_allclose(transform.inv(y).numpy(), x.numpy(), rtol=1e-9, atol=1e-12)
    if isinstance(transform, (D.LowerCholeskyTransform,)):
        assert D.constraints.lower_cholesky.check(y).item()
        return
    event = transform.domain.event_dim
    flat_in = int(np.prod(x.shape[x.ndim - event:])) if event else 1
    rows = x.reshape(-1, flat_in) if event else x.reshape(-1, 1)
    for row in rows:
        xr = row.reshape(x.shape[x.ndim - event:]).clone().requires_grad_()
        yr = transform(xr).reshape(-1)
        jac = []
        for j in range(yr.shape[0]):
            (g,) = r.autograd.grad(yr[j], xr, retain_graph=True)
            jac.append(g.reshape(-1).numpy())
        jac = np.array(jac)
        if jac.shape[0] != jac.shape[1]:  # stick-breaking: n inputs, n + 1 outputs on the simplex
            jac = jac[:-1]
        expected = np.log(abs(np.linalg.det(jac)))
        ours = transform.log_abs_det_jacobian(xr, transform(xr)).detach().numpy()
        np.testing.assert_allclose(ours.sum(), expected, rtol=1e-9, atol=1e-9)


def test_transform_errors_and_equality():
    with pytest.raises(ValueError, match="in_shape, out_shape have different numbers of elements"):
        D.ReshapeTransform((2, 3), (5,))
    assert D.PowerTransform(2.0) == D.PowerTransform(2.0) and D.PowerTransform(2.0) != D.PowerTransform(3.0)
    assert D.StickBreakingTransform().forward_shape((4, 3)) == (4, 4)
    assert D.SoftmaxTransform()(T([0.0, 0.0])).tolist() == [0.5, 0.5]
    assert D.AbsTransform()(T([-2.0])).tolist() == [2.0]


# ---- shapes, expand, validation, errors -------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
def test_expand_and_sample_shapes(name):
    d = build(name)
    big = d.expand((4,) + tuple(d.batch_shape))
    assert big.batch_shape == (4,) + tuple(d.batch_shape) and big.event_shape == d.event_shape
    assert type(big) is type(d)
    r.manual_seed(0)
    assert big.sample((2,)).shape == (2, 4) + tuple(d.batch_shape) + tuple(d.event_shape)
    value = eval(CASES[name][1])
    if value.ndim > len(d.batch_shape) + len(d.event_shape):
        value = value[0]  # a sample of its own: one that broadcasts with the new batch dim
    expanded = big.log_prob(value).numpy()
    assert expanded.shape[0] == 4
    np.testing.assert_allclose(expanded, np.broadcast_to(d.log_prob(value).numpy(), expanded.shape))


def test_number_parameters_give_scalar_batches():
    for d in (D.Laplace(0.0, 1.0), D.Exponential(2.0), D.Gamma(2.0, 1.0), D.Chi2(3.0), D.Cauchy(0.0, 1.0),
              D.Gumbel(0.0, 1.0), D.LogNormal(0.0, 1.0), D.StudentT(3.0), D.Poisson(2.0), D.Geometric(0.5)):
        assert d.batch_shape == () and d.sample().shape == () and d.sample().dtype == r.float32


@pytest.mark.parametrize("call, error, message", [
    (lambda: D.MultivariateNormal(T(0.0), T([[1.0]])), ValueError, "loc must be at least one-dimensional."),
    (lambda: D.MultivariateNormal(T([0.0]), T([[1.0]]), scale_tril=T([[1.0]])), ValueError,
     "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."),
    (lambda: D.MultivariateNormal(T([0.0]), T([1.0])), ValueError,
     "covariance_matrix must be at least two-dimensional, with optional leading batch dimensions"),
    (lambda: D.MultivariateNormal(T([0.0, 0.0]), T([[1.0, 2.0], [2.0, 1.0]])), ValueError,
     "to satisfy the constraint PositiveDefinite()"),
    (lambda: D.MultivariateNormal(T([0.0, 0.0]), scale_tril=T([[1.0, 1.0], [0.0, 1.0]])), ValueError,
     "to satisfy the constraint LowerCholesky()"),
    (lambda: D.LowRankMultivariateNormal(T([0.0, 0.0]), T([[1.0], [1.0], [1.0]]), T([1.0, 1.0])), ValueError,
     "cov_factor must be a batch of matrices with shape 2 x m"),
    (lambda: D.LowRankMultivariateNormal(T([0.0, 0.0]), T([[1.0], [1.0]]), T([1.0])), ValueError,
     "cov_diag must be a batch of vectors with shape rlpipe.Size([2])"),
    (lambda: D.Laplace(T([0.0]), T([-1.0])), ValueError, "Expected parameter scale"),
    (lambda: D.Gamma(T([0.0]), T([1.0])), ValueError, "Expected parameter concentration"),
    (lambda: D.Exponential(T([1.0])).log_prob(T([-1.0])), ValueError, "within the support (GreaterThanEq("),
    (lambda: D.Dirichlet(T(1.0)), ValueError, "`concentration` parameter must be at least one-dimensional."),
    (lambda: D.Dirichlet(T([0.5, 0.5])).log_prob(T([0.2, 0.3])), ValueError, "within the support (Simplex())"),
    (lambda: D.Poisson(T([1.0])).log_prob(T([0.5])), ValueError, "within the support (IntegerGreaterThan("),
    (lambda: D.Geometric(), ValueError, "Either `probs` or `logits` must be specified, but not both."),
    (lambda: D.Geometric(T([0.0])), ValueError, "to be positive but found invalid values"),
    (lambda: D.Binomial(10, T([0.5]), T([0.0])), ValueError, "Either `probs` or `logits` must be specified"),
    (lambda: D.Binomial(10, T([0.5])).log_prob(T([11.0])), ValueError, "within the support (IntegerInterval("),
    (lambda: D.Binomial(T([3.0, 4.0]), T([0.5, 0.5])).entropy(), NotImplementedError,
     "Inhomogeneous total count not supported by `entropy`."),
    (lambda: D.Multinomial(T([3.0]), T([0.5, 0.5])), NotImplementedError, "inhomogeneous total_count"),
    (lambda: D.kl_divergence(D.Binomial(3, T([0.5])), D.Binomial(5, T([0.5]))), NotImplementedError,
     "q.total_count > p.total_count"),
    (lambda: D.MixtureSameFamily(D.Normal(T(0.0), T(1.0)), D.Normal(T([0.0]), T([1.0]))), ValueError,
     "The Mixture distribution needs to be an  instance of torch.distributions.Categorical"),
    (lambda: D.MixtureSameFamily(D.Categorical(T([0.5, 0.5])), D.Normal(T([0.0] * 3), T([1.0] * 3))), ValueError,
     "`mixture_distribution component` (2) does not equal `component_distribution.batch_shape[-1]` (3)"),
    (lambda: D.kl_divergence(D.MultivariateNormal(T([0.0]), T([[1.0]])),
                             D.MultivariateNormal(T([0.0, 0.0]), T(np.eye(2)))), ValueError,
     "different event shapes cannot be computed"),
])
def test_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def test_constraints_and_metadata():
    C = D.constraints
    assert C.positive_definite.check(T([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]])).tolist() == [True, False]
    assert C.lower_cholesky.check(T([[1.0, 0.0], [3.0, 2.0]])).item()
    assert not C.lower_triangular.check(T([[1.0, 1.0], [0.0, 1.0]])).item()
    assert C.multinomial(3).check(T([[1.0, 2.0], [3.0, 1.0]])).tolist() == [True, False]
    assert repr(D.MixtureSameFamily(D.Categorical(T([0.5, 0.5])), D.Normal(T([0.0, 1.0]), T([1.0, 1.0]))).support) \
        == "MixtureSameFamilyConstraint(Real())"
    assert D.MultivariateNormal.has_rsample and D.Gamma.has_rsample and D.Dirichlet.has_rsample
    assert not D.Poisson.has_rsample and not D.MixtureSameFamily.has_rsample
    assert D.Chi2(T([4.0])).df.tolist() == [4.0]
    assert D.Binomial(5, T([0.5])).enumerate_support().shape == (6, 1)


def test_ppo_diagonal_covariance_policy():
    """What the PPO tutorials do: a diagonal covariance from an action std, log_prob of sampled actions, entropy."""
    mean = r.zeros(8, 3, requires_grad=True)
    cov = r.diag(r.full((3,), 0.36))
    dist = D.MultivariateNormal(mean, cov)
    action = dist.sample()
    logp = dist.log_prob(action)
    assert action.shape == (8, 3) and logp.shape == (8,) and dist.entropy().shape == (8,)
    expected = st.multivariate_normal(np.zeros(3), 0.36 * np.eye(3)).logpdf(action.numpy())
    np.testing.assert_allclose(logp.detach().numpy(), expected, rtol=1e-5)
    logp.sum().backward()
    assert mean.grad.shape == (8, 3)


# ---- cuda (the CuPy stand-in on a CPU) ----------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_matches_cpu(name):
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    global T
    cpu_T = T
    try:
        T = lambda values: cpu_T(values, device="cuda")  # noqa: E731 - the cases build on the GPU
        gpu, gpu_value = build(name), eval(CASES[name][1])
    finally:
        T = cpu_T
    cpu, value = build(name), eval(CASES[name][1])
    np.testing.assert_allclose(gpu.log_prob(gpu_value).cpu().numpy(), cpu.log_prob(value).numpy(), rtol=1e-10)
    sample = gpu.sample((3,))
    assert sample.device.type == "cuda" and sample.shape == cpu.sample((3,)).shape
    if gpu.has_rsample:
        assert gpu.rsample((2,)).device.type == "cuda"


# ---- constraint registry --------------------------------------------------------------------------------

@pytest.mark.parametrize("constraint", ["real", "positive", "nonnegative", "greater_than(2.0)",
                                        "greater_than_eq(-1.0)", "less_than(-1.0)", "interval(-2.0, 3.0)",
                                        "half_open_interval(0.0, 1.0)", "unit_interval", "simplex", "real_vector",
                                        "independent(positive, 2)", "lower_cholesky", "positive_definite"])
def test_transform_to_and_biject_to_land_in_the_constraint(constraint):
    c = eval(constraint, vars(D.constraints))
    x = T([[0.3, -1.2], [2.0, 0.1]])
    for registry in (D.transform_to, D.biject_to):
        try:
            t = registry(c)
        except NotImplementedError:
            assert registry is D.biject_to and constraint in ("lower_cholesky", "positive_definite")
            continue
        y = t(x)
        assert bool(c.check(y).all())
        if t.bijective:  # transform_to's simplex, lower_cholesky and positive_definite maps are onto, not one-to-one
            np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-9, atol=1e-12)


def test_constraint_registry_errors_and_registration():
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        D.biject_to(D.constraints.boolean)
    with pytest.raises(TypeError, match="Expected constraint to be either a Constraint subclass or instance"):
        D.constraint_registry.ConstraintRegistry().register(3, lambda c: None)
    registry = D.constraint_registry.ConstraintRegistry()
    registry.register(D.constraints.positive)(lambda c: D.SoftplusTransform())
    assert isinstance(registry(D.constraints.positive), D.SoftplusTransform)


# ---- exponential families ---------------------------------------------------------------------------------

def test_exponential_family_bregman_entropy_and_kl_match_the_closed_forms():
    from rlpipe.distributions.kl import _kl_expfamily_expfamily
    pairs = [(D.Normal(T([0.0, 1.0]), T([1.0, 2.0])), D.Normal(T([1.0, 0.0]), T([2.0, 1.0]))),
             (D.Bernoulli(T([0.3, 0.9])), D.Bernoulli(T([0.6, 0.2]))),
             (D.Exponential(T([0.5, 2.0])), D.Exponential(T([1.0, 1.5]))),
             (D.Gamma(T([2.0, 0.5]), T([1.0, 3.0])), D.Gamma(T([1.0, 1.5]), T([2.0, 1.0]))),
             (D.Poisson(T([2.0, 0.5])), D.Poisson(T([1.0, 3.0]))),
             (D.Beta(T([2.0, 0.5]), T([1.0, 3.0])), D.Beta(T([1.0, 1.5]), T([2.0, 1.0]))),
             (D.Dirichlet(T([[1.0, 2.0, 3.0]])), D.Dirichlet(T([[2.0, 2.0, 1.0]]))),
             (D.ContinuousBernoulli(T([0.2, 0.8])), D.ContinuousBernoulli(T([0.6, 0.3])))]
    for p, q in pairs:
        assert isinstance(p, D.ExponentialFamily)
        np.testing.assert_allclose(_kl_expfamily_expfamily(p, q).numpy(), D.kl_divergence(p, q).numpy(), rtol=1e-9)
        if type(p).__name__ in ("Normal", "Bernoulli", "Exponential", "ContinuousBernoulli"):
            np.testing.assert_allclose(D.ExponentialFamily.entropy(p).numpy(), p.entropy().numpy(), rtol=1e-9)
    with pytest.raises(NotImplementedError, match="cannot be computed using Bregman divergences"):
        _kl_expfamily_expfamily(pairs[0][0], pairs[2][0])


def test_wishart_and_lkj_samples():
    r.manual_seed(4)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    w = D.Wishart(T(6.0), covariance_matrix=T(cov))
    s = w.sample((20000,)).numpy()
    np.testing.assert_allclose(s.mean(0), 6 * cov, atol=0.1)
    assert bool(D.constraints.positive_definite.check(T(s[:100])).all())
    lkj = D.LKJCholesky(3, T(2.0))
    low = lkj.sample((20000,))
    assert bool(D.constraints.corr_cholesky.check(low).all())
    corr = (low @ low.mT).numpy()[:, 1, 0]  # a correlation of LKJ(2) in 3 dims: 2 Beta(2.5, 2.5) - 1
    np.testing.assert_allclose([corr.mean(), corr.var()], [0.0, 4 * 6.25 / 150], atol=0.01)
    assert gradcheck(lambda c: D.Wishart(T(5.0), scale_tril=c.tril() + T(np.eye(2))).log_prob(T([[3.0, 0.5],
                                                                                               [0.5, 2.0]])),
                     (T([[0.2, 0.0], [0.5, 0.3]]).requires_grad_(),))
    assert gradcheck(lambda c: D.LKJCholesky(3, c).log_prob(eval(CASES["lkj_cholesky"][1])), (T([0.5, 2.0])
                                                                                              .requires_grad_(),))
    t = D.CorrCholeskyTransform()
    x = T([0.3, -1.2, 2.0])
    np.testing.assert_allclose(t.inv(t(x)).numpy(), x.numpy(), atol=1e-12)
    assert abs(t.log_abs_det_jacobian(x, t(x)).item() - (-4.519753949349623)) < 1e-12  # torch 2.13's value


# ---- cat/stack transforms and constraints, triangular-vector helpers --------------------------------------

def test_cat_and_stack_transforms_against_torch_values():
    x = T([[0.3, -1.2, 2.0, 0.5], [1.0, 2.0, -3.0, 0.1]])
    cat = D.CatTransform([D.ExpTransform(), D.SigmoidTransform()], dim=1, lengths=[3, 1])
    y = cat(x)
    np.testing.assert_allclose(cat.inv(y).numpy(), x.numpy(), atol=1e-12)
    # torch 2.13: CatTransform([Exp, Sigmoid], dim=1, lengths=[3, 1]).log_abs_det_jacobian(x, y)
    np.testing.assert_allclose(cat.log_abs_det_jacobian(x, y).numpy(),
                               [[0.3, -1.2, 2.0, -1.4481539683602134], [1.0, 2.0, -3.0, -1.3887933201471419]],
                               rtol=1e-12)
    assert bool(D.constraints.cat([D.constraints.positive, D.constraints.unit_interval], 1, [3, 1]).check(y).all())
    stack = D.biject_to(D.constraints.stack([D.constraints.positive, D.constraints.interval(0.0, 2.0)], 0))
    z = stack(x[:2])
    np.testing.assert_allclose(z.numpy()[0], np.exp(x.numpy()[0]))
    np.testing.assert_allclose(z.numpy()[1], 2 / (1 + np.exp(-x.numpy()[1])))
    np.testing.assert_allclose(stack.inv(z).numpy(), x.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="x.size\\(1\\) = 4 must equal length 5"):
        D.CatTransform([D.ExpTransform(), D.ExpTransform()], dim=1, lengths=[3, 2])(x)
    with pytest.raises(ValueError, match="lengths \\(1\\) must match transforms \\(2\\)"):
        D.CatTransform([D.ExpTransform(), D.ExpTransform()], lengths=[3])


def test_tril_vector_helpers_match_torch():
    from rlpipe.distributions.utils import tril_matrix_to_vec, vec_to_tril_matrix
    m = r.arange(9.0).reshape(3, 3)
    assert tril_matrix_to_vec(m).tolist() == [0.0, 3.0, 4.0, 6.0, 7.0, 8.0]
    assert tril_matrix_to_vec(m, -1).tolist() == [3.0, 6.0, 7.0]
    assert vec_to_tril_matrix(T([3.0, 6.0, 7.0]), -1).tolist() == [[0.0, 0.0, 0.0], [3.0, 0.0, 0.0], [6.0, 7.0, 0.0]]
    assert gradcheck(lambda v: vec_to_tril_matrix(v), (T([1.0, 2.0, 3.0]).requires_grad_(),))
    with pytest.raises(ValueError, match="The size of last dimension is 4 which cannot be expressed"):
        vec_to_tril_matrix(T([1.0] * 4))
    with pytest.raises(ValueError, match=r"diag \(3\) provided is outside \[-3, 2\]."):
        tril_matrix_to_vec(m, 3)


def test_dirichlet_grad_against_scipy_and_torch():
    from rlpipe.distributions.dirichlet import _Dirichlet_backward, _dirichlet_grad
    x = np.array([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1], [0.05, 0.9, 0.05]])
    c = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 5.0], [20.0, 30.0, 8.0]])
    total = c.sum(-1, keepdims=True).repeat(3, -1)
    ours = _dirichlet_grad(T(x), T(c), T(total)).numpy()
    b = total - c
    h = 1e-6 * c
    lower = scipy.special.betainc(c, b, x)  # in the upper tail, through 1 - x and Beta(b, a), where u is not ~1
    upper = scipy.special.betainc(b, c, 1 - x)
    dx_da = np.where(x < c / total,
                     (scipy.special.betaincinv(c + h, b, lower) - scipy.special.betaincinv(c - h, b, lower)) / (2 * h),
                     -(scipy.special.betaincinv(b, c + h, upper) - scipy.special.betaincinv(b, c - h, upper)) / (2 * h))
    np.testing.assert_allclose(ours, dx_da / (1 - x), rtol=1e-6)
    # torch 2.13's _Dirichlet_backward(x, c, eye(3)) (its Beta gradients are approximations, good to ~1e-3)
    expected = [[0.181473289691257, -0.03623355402261423, -0.03726903259306083],
                [-0.11891452389006824, 0.2902011158116062, -0.010233711524417984],
                [-0.0002855550194905236, -0.0011369907715257312, 0.009684899396326293]]
    np.testing.assert_allclose(_Dirichlet_backward(T(x), T(c), T(np.eye(3))).numpy(), expected, rtol=2e-3)
