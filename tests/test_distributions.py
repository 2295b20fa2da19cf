"""rlpipe.distributions against independent truth: densities, entropies, moments and CDFs from
scipy.stats; sample moments within a few standard errors under fixed seeds; float64 gradchecks
through rsample and log_prob; KL divergences against closed forms and numeric integration; shapes;
validation errors (types and messages as torch's)."""
import math

import numpy as np
import pytest
import scipy.stats as st
from scipy import integrate

import rlpipe as r
from rlpipe import distributions as D
from rlpipe.autograd import gradcheck


def t64(values, requires_grad=False):
    return r.tensor(np.asarray(values, dtype=np.float64), dtype=r.float64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().numpy())


def close(t, expected, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(npy(t), expected, rtol=rtol, atol=atol)


LOC = np.array([[0.3, -1.2, 2.0], [0.0, 0.5, -0.7]])
SCALE = np.array([[1.0, 0.4, 2.5], [0.8, 1.7, 0.3]])
X = np.array([[0.1, -0.9, 3.3], [1.2, 0.5, -0.2]])
LOGITS = np.array([[0.2, -1.0, 1.5, 0.0], [2.0, 2.0, -3.0, 0.5]])


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(autouse=True)
def _seed_and_validate():
    """A fixed seed, and torch's default validation (importing torchrl's distributions turns it off)."""
    r.manual_seed(2024)
    before = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    yield
    D.Distribution.set_default_validate_args(before)


# ---- Normal ---------------------------------------------------------------------------------

def test_normal_values_match_scipy():
    d = D.Normal(t64(LOC), t64(SCALE))
    ref = st.norm(LOC, SCALE)
    close(d.log_prob(t64(X)), ref.logpdf(X))
    close(d.entropy(), ref.entropy())
    close(d.mean, ref.mean())
    close(d.mode, LOC)
    close(d.variance, ref.var())
    close(d.stddev, ref.std())
    close(d.cdf(t64(X)), ref.cdf(X))
    q = np.array([[0.1, 0.5, 0.97], [0.3, 0.01, 0.75]])
    close(d.icdf(t64(q)), ref.ppf(q), rtol=1e-9)
    close(d.perplexity(), np.exp(ref.entropy()))
    assert d.batch_shape == (2, 3) and d.event_shape == () and d.has_rsample


def test_normal_from_numbers_has_an_empty_batch_and_the_default_dtype():
    d = D.Normal(0.0, 1.0)
    assert d.batch_shape == () and d.loc.dtype == r.float32
    assert d.sample().shape == () and d.sample((5, 2)).shape == (5, 2)
    assert abs(d.log_prob(r.tensor(0.5)).item() - st.norm.logpdf(0.5)) < 1e-6
    mixed = D.Normal(t64([1.0, 2.0]), 0.5)
    assert mixed.scale.dtype == r.float64 and mixed.scale.shape == (2,)


def test_normal_sample_moments_within_a_few_standard_errors():
    d = D.Normal(t64([1.5, -2.0]), t64([0.5, 3.0]))
    n = 40000
    x = npy(d.sample((n,)))
    assert x.shape == (n, 2)
    np.testing.assert_array_less(np.abs(x.mean(0) - [1.5, -2.0]), 4 * np.array([0.5, 3.0]) / math.sqrt(n))
    var_se = np.array([0.25, 9.0]) * math.sqrt(2 / n)
    np.testing.assert_array_less(np.abs(x.var(0) - [0.25, 9.0]), 4 * var_se)


def test_normal_seeded_sampling_repeats_and_sample_carries_no_graph():
    loc = t64([0.0, 1.0], requires_grad=True)
    d = D.Normal(loc, t64([1.0, 2.0]))
    r.manual_seed(7)
    a = d.sample((3,))
    r.manual_seed(7)
    b = d.rsample((3,))
    np.testing.assert_array_equal(npy(a), npy(b))
    assert not a.requires_grad and b.requires_grad


def test_normal_gradcheck_rsample_log_prob_entropy_cdf():
    loc, scale = t64(LOC, True), t64(SCALE, True)

    def rsample(loc, scale):
        r.manual_seed(3)
        return D.Normal(loc, scale).rsample((2,))
    assert gradcheck(rsample, (loc, scale))
    x = t64(X, True)
    assert gradcheck(lambda loc, scale, x: D.Normal(loc, scale).log_prob(x), (loc, scale, x))
    assert gradcheck(lambda scale: D.Normal(0.0, scale).entropy(), (scale,))
    assert gradcheck(lambda loc, scale, x: D.Normal(loc, scale).cdf(x), (loc, scale, x))
    assert gradcheck(lambda loc, scale: D.Normal(loc, scale).icdf(t64([0.2, 0.6, 0.9])), (loc, scale))


def test_normal_rsample_gradient_is_the_noise():
    loc, scale = t64([0.5], True), t64([2.0], True)
    r.manual_seed(11)
    x = D.Normal(loc, scale).rsample((4,))
    x.sum().backward()
    r.manual_seed(11)
    eps = npy(r.randn(4, 1, dtype=r.float64))
    close(loc.grad, [4.0])
    close(scale.grad, eps.sum(0))


def test_normal_expand_shares_parameters():
    d = D.Normal(t64([0.0, 1.0]), t64([1.0, 2.0]))
    e = d.expand((3, 2))
    assert type(e) is D.Normal and e.batch_shape == (3, 2) and e.loc.shape == (3, 2)
    assert e.sample((4,)).shape == (4, 3, 2)
    close(e.log_prob(t64([0.0, 1.0])), np.tile(npy(d.log_prob(t64([0.0, 1.0]))), (3, 1)))


def test_normal_log_prob_broadcasts_value_against_the_batch():
    d = D.Normal(t64(LOC), t64(SCALE))
    assert d.log_prob(t64(0.2)).shape == (2, 3)
    assert d.log_prob(t64(np.zeros((5, 1, 3)))).shape == (5, 2, 3)


# ---- Categorical ------------------------------------------------------------------------------

def test_categorical_from_logits_and_probs_match_scipy():
    p = softmax(LOGITS)
    for d in (D.Categorical(logits=t64(LOGITS)), D.Categorical(probs=t64(p * 3.0))):  # probs get normalized
        close(d.probs, p)
        close(d.logits, np.log(p), rtol=1e-9)
        value = np.array([2, 0])
        close(d.log_prob(r.tensor(value)), np.log(p[[0, 1], value]), rtol=1e-9)
        close(d.entropy(), [st.entropy(row) for row in p], rtol=1e-9)
        close(d.mode, p.argmax(-1))
        assert d.batch_shape == (2,) and d.event_shape == () and d.param_shape == (2, 4)
        assert np.isnan(npy(d.mean)).all() and np.isnan(npy(d.variance)).all() and d.mean.shape == (2,)


def test_categorical_entropy_with_zero_probabilities_is_finite():
    d = D.Categorical(probs=t64([0.5, 0.5, 0.0]))
    close(d.entropy(), math.log(2))
    assert d.log_prob(r.tensor(2)).item() < -30


def test_categorical_sample_frequencies_within_a_few_standard_errors():
    p = np.array([0.1, 0.0, 0.6, 0.3])
    d = D.Categorical(probs=t64(p))
    n = 30000
    s = npy(d.sample((n,)))
    assert s.shape == (n,) and s.dtype == np.int64
    freq = np.bincount(s, minlength=4) / n
    np.testing.assert_array_less(np.abs(freq - p), 4 * np.sqrt(p * (1 - p) / n) + 1e-12)
    batched = D.Categorical(logits=t64(LOGITS)).sample((n, 1))
    assert batched.shape == (n, 1, 2)
    freq0 = np.bincount(npy(batched)[:, 0, 0], minlength=4) / n
    np.testing.assert_array_less(np.abs(freq0 - softmax(LOGITS)[0]), 0.015)


def test_categorical_enumerate_support_expand_and_log_prob_broadcast():
    d = D.Categorical(logits=t64(LOGITS))
    support = d.enumerate_support()
    assert support.shape == (4, 2) and support.dtype == r.int64
    assert d.enumerate_support(expand=False).shape == (4, 1)
    assert d.log_prob(support).shape == (4, 2)
    close(d.log_prob(support).exp().sum(0), [1.0, 1.0])
    e = d.expand((3, 2))
    assert e.batch_shape == (3, 2) and e.sample().shape == (3, 2) and e.logits.shape == (3, 2, 4)
    assert repr(D.Categorical(logits=t64(LOGITS))) == "Categorical(logits: rlpipe.Size([2, 4]))"


def test_categorical_gradcheck_log_prob_and_entropy():
    logits = t64(LOGITS, True)
    assert gradcheck(lambda lg: D.Categorical(logits=lg).log_prob(r.tensor([3, 1])), (logits,))
    assert gradcheck(lambda lg: D.Categorical(logits=lg).entropy(), (logits,))
    probs = t64(softmax(LOGITS), True)
    assert gradcheck(lambda p: D.Categorical(probs=p).entropy(), (probs,))


# ---- OneHotCategorical ----------------------------------------------------------------------------

def test_one_hot_categorical():
    p = softmax(LOGITS)
    d = D.OneHotCategorical(logits=t64(LOGITS))
    assert d.batch_shape == (2,) and d.event_shape == (4,) and repr(d) == "OneHotCategorical()"
    value = t64([[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    close(d.log_prob(value), np.log([p[0, 2], p[1, 0]]), rtol=1e-9)
    close(d.entropy(), [st.entropy(row) for row in p], rtol=1e-9)
    close(d.mean, p, rtol=1e-9)
    close(d.variance, p * (1 - p), rtol=1e-9)
    close(d.mode, [[0, 0, 1, 0], [1, 0, 0, 0]])
    s = npy(d.sample((3000,)))
    assert s.shape == (3000, 2, 4) and (s.sum(-1) == 1).all()
    np.testing.assert_array_less(np.abs(s.mean(0) - p), 4 * np.sqrt(p * (1 - p) / 3000) + 1e-12)
    support = d.enumerate_support()
    assert support.shape == (4, 2, 4) and d.enumerate_support(expand=False).shape == (4, 1, 4)
    close(d.log_prob(support).exp().sum(0), [1.0, 1.0])
    assert d.expand((3, 2)).sample().shape == (3, 2, 4)
    with pytest.raises(ValueError, match=r"within the support \(OneHot\(\)\)"):
        d.log_prob(t64([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    q = D.OneHotCategorical(probs=t64(p[::-1]))
    close(D.kl_divergence(d, q), (p * np.log(p / p[::-1])).sum(-1), rtol=1e-9)


def test_one_hot_categorical_straight_through():
    logits = t64(LOGITS, True)
    d = D.OneHotCategoricalStraightThrough(logits=logits)
    assert d.has_rsample and not D.OneHotCategorical.has_rsample
    x = d.rsample((2,))
    assert x.shape == (2, 2, 4) and (npy(x).sum(-1) == 1).all()
    weights = t64([1.0, -2.0, 3.0, 0.5])
    (x * weights).sum().backward()
    p = softmax(LOGITS)
    jac = p[..., :, None] * (np.eye(4) - p[..., None, :])  # d probs / d logits
    close(logits.grad, 2 * (jac @ np.array([1.0, -2.0, 3.0, 0.5])), rtol=1e-9)


# ---- Bernoulli --------------------------------------------------------------------------------

def test_bernoulli_values_match_scipy():
    p = np.array([0.1, 0.5, 0.93])
    for d in (D.Bernoulli(probs=t64(p)), D.Bernoulli(logits=t64(np.log(p / (1 - p))))):
        ref = st.bernoulli(p)
        for v in (0.0, 1.0):
            close(d.log_prob(t64([v] * 3)), ref.logpmf(v), rtol=1e-9)
        close(d.entropy(), ref.entropy(), rtol=1e-9)
        close(d.mean, ref.mean(), rtol=1e-9)
        close(d.variance, ref.var(), rtol=1e-9)
        mode = npy(d.mode)
        assert mode[0] == 0 and np.isnan(mode[1]) and mode[2] == 1
    assert D.Bernoulli(0.3).batch_shape == ()


def test_bernoulli_sample_frequency_and_support():
    d = D.Bernoulli(probs=t64([0.2, 0.7]))
    n = 30000
    s = npy(d.sample((n,)))
    assert s.shape == (n, 2) and set(np.unique(s)) <= {0.0, 1.0}
    np.testing.assert_array_less(np.abs(s.mean(0) - [0.2, 0.7]), 4 * np.sqrt(np.array([0.16, 0.21]) / n))
    assert d.enumerate_support().shape == (2, 2) and d.enumerate_support().dtype == r.float64
    assert gradcheck(lambda lg: D.Bernoulli(logits=lg).log_prob(t64([1.0, 0.0, 1.0])), (t64([0.3, -2.0, 4.0], True),))
    assert gradcheck(lambda p: D.Bernoulli(probs=p).entropy(), (t64([0.3, 0.6], True),))


# ---- Independent ------------------------------------------------------------------------------

def test_independent_sums_log_prob_and_entropy_over_reinterpreted_dims():
    base = D.Normal(t64(LOC), t64(SCALE))
    d = D.Independent(base, 1)
    assert d.batch_shape == (2,) and d.event_shape == (3,) and d.has_rsample
    ref = st.norm(LOC, SCALE)
    close(d.log_prob(t64(X)), ref.logpdf(X).sum(-1))
    close(d.entropy(), ref.entropy().sum(-1))
    close(d.mean, LOC)
    assert d.sample((5,)).shape == (5, 2, 3)
    full = D.Independent(base, 2)
    assert full.batch_shape == () and full.event_shape == (2, 3)
    close(full.log_prob(t64(X)), ref.logpdf(X).sum())
    e = d.expand((4, 2))
    assert e.batch_shape == (4, 2) and e.event_shape == (3,) and e.base_dist.batch_shape == (4, 2, 3)
    assert repr(d) == "Independent(Normal(loc: rlpipe.Size([2, 3]), scale: rlpipe.Size([2, 3])), 1)"
    assert repr(d.support) == "IndependentConstraint(Real(), 1)"


def test_independent_errors():
    with pytest.raises(ValueError, match=r"Expected reinterpreted_batch_ndims <= len\(base_distribution.batch_shape\), "
                                         r"actual 3 vs 2"):
        D.Independent(D.Normal(t64(LOC), t64(SCALE)), 3)
    with pytest.raises(ValueError, match="Value is not broadcastable with batch_shape"):  # the base validates
        D.Independent(D.Normal(t64(LOC), t64(SCALE)), 1).log_prob(t64([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="Enumeration over cartesian product"):
        D.Independent(D.Bernoulli(t64([[0.5]])), 1).enumerate_support()


# ---- kl_divergence ------------------------------------------------------------------------------

def _numeric_kl(logp, logq, lo, hi):
    return integrate.quad(lambda x: math.exp(logp(x)) * (logp(x) - logq(x)), lo, hi, limit=200)[0]


def test_kl_normal_normal_matches_numeric_integration():
    p = D.Normal(t64([0.3, -1.0]), t64([1.0, 0.5]))
    q = D.Normal(t64([1.0, 0.0]), t64([2.0, 0.7]))
    kl = npy(D.kl_divergence(p, q))
    for i, (pm, ps, qm, qs) in enumerate([(0.3, 1.0, 1.0, 2.0), (-1.0, 0.5, 0.0, 0.7)]):
        expected = _numeric_kl(st.norm(pm, ps).logpdf, st.norm(qm, qs).logpdf, -30, 30)
        assert abs(kl[i] - expected) < 1e-8
    close(D.kl_divergence(p, p), [0.0, 0.0])


def test_kl_categorical_bernoulli_independent_closed_forms():
    pp, qp = softmax(LOGITS), softmax(LOGITS[::-1])
    close(D.kl_divergence(D.Categorical(probs=t64(pp)), D.Categorical(probs=t64(qp))),
          (pp * np.log(pp / qp)).sum(-1), rtol=1e-9)
    # zero probabilities: 0 where p is 0, inf where only q is
    kl = npy(D.kl_divergence(D.Categorical(probs=t64([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])),
                             D.Categorical(probs=t64([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]]))))
    assert abs(kl[0] - math.log(2)) < 1e-12 and kl[1] == math.inf
    a, b = np.array([0.2, 0.0, 1.0, 0.6]), np.array([0.7, 0.4, 0.5, 1.0])
    kl = npy(D.kl_divergence(D.Bernoulli(t64(a)), D.Bernoulli(t64(b))))
    expected = [0.2 * math.log(0.2 / 0.7) + 0.8 * math.log(0.8 / 0.3), math.log(1 / 0.6), math.log(2), math.inf]
    np.testing.assert_allclose(kl, expected, rtol=1e-6)
    p = D.Independent(D.Normal(t64(LOC), t64(SCALE)), 1)
    q = D.Independent(D.Normal(t64(LOC[::-1]), t64(SCALE[::-1])), 1)
    close(D.kl_divergence(p, q), npy(D.kl_divergence(p.base_dist, q.base_dist)).sum(-1))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(p, D.Independent(D.Normal(t64(LOC), t64(SCALE)), 2))


def test_kl_gradcheck_and_registry():
    loc, scale = t64([0.3, -1.0], True), t64([1.0, 0.5], True)
    assert gradcheck(lambda m, s: D.kl_divergence(D.Normal(m, s), D.Normal(0.0, 1.0)), (loc, scale))
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type "
                                                  "Categorical"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(logits=t64([0.0, 1.0])))

    class MyNormal(D.Normal):
        pass

    close(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0)), 0.5, rtol=1e-6)

    @D.register_kl(MyNormal, D.Normal)
    def _fake(p, q):
        return r.tensor(-1.0)
    try:
        assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0)).item() == -1.0
        assert abs(D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(1.0, 1.0)).item() - 0.5) < 1e-6
    finally:
        from rlpipe.distributions import kl as kl_module
        del kl_module._KL_REGISTRY[MyNormal, D.Normal]
        kl_module._KL_MEMOIZE.clear()
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass"):
        D.register_kl(int, D.Normal)


# ---- Uniform and Beta -----------------------------------------------------------------------------

LOW, HIGH = np.array([-1.0, 0.5, 2.0]), np.array([1.0, 0.75, 5.0])
A, B = np.array([0.5, 2.0, 3.5]), np.array([1.5, 2.0, 0.7])


def test_uniform_values_match_scipy():
    d = D.Uniform(t64(LOW), t64(HIGH))
    ref = st.uniform(LOW, HIGH - LOW)
    x = np.array([0.3, 0.6, 4.9])
    close(d.log_prob(t64(x)), ref.logpdf(x))
    close(d.entropy(), ref.entropy())
    close(d.mean, ref.mean())
    close(d.variance, ref.var())
    close(d.stddev, ref.std())
    close(d.cdf(t64([-0.5, 0.6, 4.0])), ref.cdf([-0.5, 0.6, 4.0]))
    unchecked = D.Uniform(t64(LOW), t64(HIGH), validate_args=False)
    close(unchecked.cdf(t64([-2.0, 0.6, 6.0])), ref.cdf([-2.0, 0.6, 6.0]))  # clamped outside the support
    close(d.icdf(t64([0.1, 0.5, 0.9])), ref.ppf([0.1, 0.5, 0.9]))
    assert np.isnan(npy(d.mode)).all()
    s = npy(d.sample((20000,)))
    assert s.shape == (20000, 3) and (s >= LOW).all() and (s < HIGH).all()
    np.testing.assert_array_less(np.abs(s.mean(0) - ref.mean()), 4 * ref.std() / math.sqrt(20000))
    assert repr(d.support) == "Interval(lower_bound=" + str(d.low) + ", upper_bound=" + str(d.high) + ")"
    with pytest.raises(ValueError, match="Uniform is not defined when low>= high"):
        D.Uniform(t64([1.0]), t64([1.0]))
    with pytest.raises(ValueError, match="to be within the support"):
        d.log_prob(t64([0.0, 0.8, 3.0]))
    outside = D.Uniform(t64(LOW), t64(HIGH), validate_args=False).log_prob(t64([0.0, 0.8, 3.0]))
    assert npy(outside)[1] == -math.inf
    low, high = t64(LOW, True), t64(HIGH, True)

    def rsample(low, high):
        r.manual_seed(8)
        return D.Uniform(low, high).rsample((2,))
    assert gradcheck(rsample, (low, high))
    assert D.Uniform(0.0, 1.0).batch_shape == () and D.Uniform(t64(LOW), t64(HIGH)).expand((2, 3)).sample().shape \
        == (2, 3)


def test_beta_values_match_scipy():
    d = D.Beta(t64(A), t64(B))
    ref = st.beta(A, B)
    x = np.array([0.1, 0.5, 0.97])
    close(d.log_prob(t64(x)), ref.logpdf(x), rtol=1e-9)
    close(d.entropy(), ref.entropy(), rtol=1e-9)
    close(d.mean, ref.mean(), rtol=1e-12)
    close(d.variance, ref.var(), rtol=1e-12)
    close(d.mode[1:2], [0.5])
    # a concentration of 1 gives a finite density at the boundary
    close(D.Beta(t64([1.0]), t64([3.0])).log_prob(t64([0.0])), st.beta(1.0, 3.0).logpdf(0.0))
    assert d.has_rsample and d.support is D.constraints.unit_interval


def test_beta_sample_moments_and_gradients():
    d = D.Beta(t64(A), t64(B))
    n = 20000
    s = npy(d.sample((n,)))
    ref = st.beta(A, B)
    assert s.shape == (n, 3) and (s >= 0).all() and (s <= 1).all()
    np.testing.assert_array_less(np.abs(s.mean(0) - ref.mean()), 4 * ref.std() / math.sqrt(n))
    assert st.kstest(s[:, 0], st.beta(A[0], B[0]).cdf).pvalue > 1e-3
    a, b = t64(A, True), t64(B, True)
    assert gradcheck(lambda a, b: D.Beta(a, b).log_prob(t64([0.1, 0.5, 0.97])), (a, b))
    assert gradcheck(lambda a, b: D.Beta(a, b).entropy(), (a, b))
    assert gradcheck(lambda a, b: D.kl_divergence(D.Beta(a, b), D.Beta(t64(B), t64(A))), (a, b))
    with pytest.raises(ValueError, match=r"parameter concentration0 .* GreaterThan\(lower_bound=0.0\)"):
        D.Beta(t64([1.0]), t64([0.0]))


def test_kl_uniform_and_beta_pairs_match_numeric_integration():
    a, b, qa, qb = 2.0, 3.0, 1.5, 0.8
    kl = D.kl_divergence(D.Beta(t64([a]), t64([b])), D.Beta(t64([qa]), t64([qb])))
    assert abs(npy(kl)[0] - _numeric_kl(st.beta(a, b).logpdf, st.beta(qa, qb).logpdf, 0, 1)) < 1e-7
    kl = D.kl_divergence(D.Uniform(t64([0.2]), t64([0.7])), D.Beta(t64([qa]), t64([qb])))
    assert abs(npy(kl)[0] - _numeric_kl(st.uniform(0.2, 0.5).logpdf, st.beta(qa, qb).logpdf, 0.2, 0.7)) < 1e-7
    kl = D.kl_divergence(D.Uniform(t64([0.2]), t64([0.7])), D.Normal(t64([0.1]), t64([0.6])))
    assert abs(npy(kl)[0] - _numeric_kl(st.uniform(0.2, 0.5).logpdf, st.norm(0.1, 0.6).logpdf, 0.2, 0.7)) < 1e-7
    kl = D.kl_divergence(D.Beta(t64([a]), t64([b])), D.Normal(t64([0.1]), t64([0.6])))
    assert abs(npy(kl)[0] - _numeric_kl(st.beta(a, b).logpdf, st.norm(0.1, 0.6).logpdf, 0, 1)) < 1e-7
    kl = D.kl_divergence(D.Beta(t64([a]), t64([b])), D.Uniform(t64([-0.5]), t64([1.5])))
    assert abs(npy(kl)[0] - _numeric_kl(st.beta(a, b).logpdf, st.uniform(-0.5, 2.0).logpdf, 0, 1)) < 1e-7
    kl = npy(D.kl_divergence(D.Uniform(t64([0.0, 0.0]), t64([1.0, 2.0])), D.Uniform(t64([-1.0, 0.0]), t64([3.0, 1.0]))))
    assert abs(kl[0] - math.log(4.0)) < 1e-12 and kl[1] == math.inf
    assert npy(D.kl_divergence(D.Normal(t64([0.0]), t64([1.0])), D.Uniform(t64([0.0]), t64([1.0]))))[0] == math.inf
    assert npy(D.kl_divergence(D.Beta(t64([a]), t64([b])), D.Uniform(t64([0.1]), t64([1.0]))))[0] == math.inf


# ---- transforms and TransformedDistribution ----------------------------------------------------

def _numeric_log_det(fn, x, h=1e-6):
    return np.log(np.abs((fn(x + h) - fn(x - h)) / (2 * h)))


TRANSFORMS = {  # name: (transform, NumPy forward, inputs in its domain)
    "exp": (lambda: D.ExpTransform(), np.exp, X),
    "tanh": (lambda: D.TanhTransform(), np.tanh, X),
    "sigmoid": (lambda: D.SigmoidTransform(), lambda x: 1 / (1 + np.exp(-x)), X),
    "affine": (lambda: D.AffineTransform(0.5, -2.0), lambda x: 0.5 - 2.0 * x, X),
    "affine_tensor": (lambda: D.AffineTransform(t64([1.0, 0.0, -1.0]), t64([0.5, 3.0, -0.2])),
                      lambda x: np.array([1.0, 0.0, -1.0]) + np.array([0.5, 3.0, -0.2]) * x, X),
    "compose": (lambda: D.ComposeTransform([D.TanhTransform(), D.AffineTransform(1.0, 3.0)]),
                lambda x: 1.0 + 3.0 * np.tanh(x), X),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transform_forward_inverse_and_log_det(name):
    make, fn, x = TRANSFORMS[name]
    t = make()
    y = t(t64(x))
    close(y, fn(x), rtol=1e-12)
    close(t.inv(y), x, rtol=1e-9, atol=1e-9)
    close(t.log_abs_det_jacobian(t64(x), y), _numeric_log_det(fn, x), rtol=1e-6, atol=1e-8)
    close(t.inv.log_abs_det_jacobian(y, t64(x)), -_numeric_log_det(fn, x), rtol=1e-6, atol=1e-8)
    assert t.inv.inv is t and t.bijective
    assert gradcheck(lambda v: t.log_abs_det_jacobian(v, t(v)), (t64(x, True),))


def test_transform_cache_returns_the_same_objects():
    t = D.TanhTransform(cache_size=1)
    x = t64([0.3, 20.0])
    y = t(x)
    assert t.inv(y) is x and t(x) is y  # 20.0 would not survive atanh(tanh(20.0))
    assert not np.isfinite(npy(D.TanhTransform().inv(y))[1])
    compose = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 2.0)], cache_size=1)
    assert all(p._cache_size == 1 for p in compose.parts)
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        D.ExpTransform(cache_size=2)
    assert D.ExpTransform().with_cache(1)._cache_size == 1


def test_transform_properties():
    assert D.TanhTransform() == D.TanhTransform() and D.TanhTransform() != D.ExpTransform()
    assert D.AffineTransform(1.0, 2.0) == D.AffineTransform(1.0, 2.0) != D.AffineTransform(1.0, 3.0)
    assert D.AffineTransform(0.0, -2.0).sign == -1 and D.ExpTransform().sign == 1
    c = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(0.0, -1.0)])
    assert c.sign == -1 and c.inv.parts[0] == D.AffineTransform(0.0, -1.0).inv
    assert repr(D.TanhTransform().codomain) == "Interval(lower_bound=-1.0, upper_bound=1.0)"
    assert repr(c) == "ComposeTransform(\n    ExpTransform(),\n    AffineTransform()\n)"
    vector = D.AffineTransform(0.0, t64([1.0, 2.0]), event_dim=1)
    assert vector.domain.event_dim == 1
    close(vector.log_abs_det_jacobian(t64(np.zeros((3, 2))), None), np.full(3, math.log(2.0)))
    assert D.AffineTransform(0.0, t64([1.0, 2.0])).forward_shape((3, 1)) == (3, 2)
    assert repr(D.ExpTransform().inv) == "_InverseTransform(ExpTransform())"


def test_transformed_distribution_matches_scipy():
    loc, scale = np.array([0.2, -0.5]), np.array([0.7, 1.3])
    base = D.Normal(t64(loc), t64(scale))
    lognormal = D.TransformedDistribution(base, [D.ExpTransform()])
    y = np.array([0.5, 2.5])
    close(lognormal.log_prob(t64(y)), st.lognorm(s=scale, scale=np.exp(loc)).logpdf(y), rtol=1e-10)
    close(lognormal.cdf(t64(y)), st.lognorm(s=scale, scale=np.exp(loc)).cdf(y), rtol=1e-10)
    close(lognormal.icdf(t64([0.3, 0.8])), st.lognorm(s=scale, scale=np.exp(loc)).ppf([0.3, 0.8]), rtol=1e-9)
    flipped = D.TransformedDistribution(base, D.AffineTransform(1.0, -2.0))
    close(flipped.log_prob(t64(y)), st.norm(1.0 - 2.0 * loc, 2.0 * scale).logpdf(y), rtol=1e-10)
    close(flipped.cdf(t64(y)), st.norm(1.0 - 2.0 * loc, 2.0 * scale).cdf(y), rtol=1e-10)  # decreasing: flipped cdf
    assert lognormal.batch_shape == (2,) and lognormal.event_shape == () and lognormal.has_rsample
    assert lognormal.sample((4,)).shape == (4, 2) and bool((lognormal.sample((50,)) > 0).all())
    assert repr(lognormal.support) == "GreaterThan(lower_bound=0.0)"
    e = lognormal.expand((3, 2))
    assert e.batch_shape == (3, 2) and e.base_dist.batch_shape == (3, 2)
    # a vector transform makes the base's batch dims event dims
    vec = D.TransformedDistribution(base, D.AffineTransform(0.0, t64([1.0, 2.0]), event_dim=1))
    assert vec.batch_shape == () and vec.event_shape == (2,) and isinstance(vec.base_dist, D.Independent)
    with pytest.raises(ValueError, match="transforms must be a Transform or list, but was 3"):
        D.TransformedDistribution(base, 3)
    with pytest.raises(ValueError, match="transforms must be a Transform or a list of Transforms"):
        D.TransformedDistribution(base, [D.ExpTransform(), 3])
    with pytest.raises(ValueError, match=r"Expected value argument .* within the support \(GreaterThan"):
        lognormal.log_prob(t64([-1.0, 1.0]))


def test_transformed_distribution_gradcheck():
    loc, scale = t64([0.2, -0.5], True), t64([0.7, 1.3], True)

    def tanh_normal_rsample_log_prob(loc, scale):
        r.manual_seed(5)
        d = D.TransformedDistribution(D.Normal(loc, scale), [D.TanhTransform(), D.AffineTransform(0.5, 2.0)])
        return d.rsample((3,)), d.log_prob(t64([0.1, 1.9]))
    assert gradcheck(tanh_normal_rsample_log_prob, (loc, scale))


# ---- validation ---------------------------------------------------------------------------------

def test_invalid_parameters_raise_value_errors_naming_parameter_and_constraint():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution "
                                         r"Normal\(loc: rlpipe.Size\(\[2\]\), scale: rlpipe.Size\(\[2\]\)\) to satisfy "
                                         r"the constraint GreaterThan\(lower_bound=0.0\), but found invalid values"):
        D.Normal(t64([0.0, 1.0]), t64([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"parameter loc .* constraint Real\(\)"):
        D.Normal(t64([math.nan]), t64([1.0]))
    with pytest.raises(ValueError, match=r"parameter probs .* constraint Interval\(lower_bound=0.0, upper_bound=1.0\)"):
        D.Bernoulli(probs=t64([1.5]))
    with pytest.raises(ValueError, match=r"parameter probs .* constraint Simplex\(\)"):
        D.Categorical(probs=t64([-0.5, 1.0]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Categorical(probs=t64([0.5, 0.5]), logits=t64([0.0, 0.0]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli()
    with pytest.raises(ValueError, match="`logits` parameter must be at least one-dimensional."):
        D.Categorical(logits=t64(0.0))
    with pytest.raises(ValueError, match="Input arguments must all be instances of numbers.Number or rlpipe.Tensor"):
        D.Normal("a", 1.0)
    # off: no check
    assert D.Normal(t64([0.0]), t64([-1.0]), validate_args=False).scale.item() == -1.0


def test_invalid_values_raise_value_errors():
    d = D.Normal(t64(LOC), t64(SCALE))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        d.log_prob(0.5)
    with pytest.raises(ValueError, match=r"Value is not broadcastable with batch_shape\+event_shape: "
                                         r"rlpipe.Size\(\[4\]\) vs rlpipe.Size\(\[2, 3\]\)."):
        d.log_prob(t64([1.0, 2.0, 3.0, 4.0]))
    c = D.Categorical(logits=t64(LOGITS))
    with pytest.raises(ValueError, match=r"Expected value argument \(Tensor of shape \(2,\)\) to be within the support "
                                         r"\(IntegerInterval\(lower_bound=0, upper_bound=3\)\) of the distribution "
                                         r"Categorical\(logits: rlpipe.Size\(\[2, 4\]\)\), but found invalid values"):
        c.log_prob(r.tensor([4, 0]))
    with pytest.raises(ValueError, match=r"within the support \(Boolean\(\)\)"):
        D.Bernoulli(t64([0.5])).log_prob(t64([0.5]))
    assert c.log_prob(r.tensor([1, 0])).shape == (2,)  # still usable after the failed call
    D.Normal(t64([0.0]), t64([1.0]), validate_args=False).log_prob(t64([1.0, 2.0]))  # off: broadcasts


def test_set_default_validate_args():
    try:
        D.Distribution.set_default_validate_args(False)
        assert D.Normal(t64([0.0]), t64([-1.0])).scale.item() == -1.0
        with pytest.raises(ValueError, match="GreaterThan"):  # an explicit validate_args wins
            D.Normal(t64([0.0]), t64([-1.0]), validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="GreaterThan"):
        D.Normal(t64([0.0]), t64([-1.0]))
    with pytest.raises(ValueError, match="set_default_validate_args expects True or False, got 'yes'"):
        D.Distribution.set_default_validate_args("yes")


def test_constraints():
    C = D.constraints
    assert npy(C.positive.check(t64([-1.0, 0.0, 2.0]))).tolist() == [False, False, True]
    assert npy(C.unit_interval.check(t64([0.0, 1.0, 1.5]))).tolist() == [True, True, False]
    assert npy(C.half_open_interval(0, 1).check(t64([0.0, 1.0]))).tolist() == [True, False]
    assert npy(C.integer_interval(0, 2).check(t64([0.0, 1.5, 2.0, 3.0]))).tolist() == [True, False, True, False]
    assert npy(C.simplex.check(t64([[0.2, 0.8], [0.5, 0.6]]))).tolist() == [True, False]
    assert npy(C.one_hot.check(t64([[0.0, 1.0], [1.0, 1.0]]))).tolist() == [True, False]
    assert npy(C.real_vector.check(t64([[0.0, math.nan], [1.0, 2.0]]))).tolist() == [False, True]
    assert C.is_dependent(C.dependent) and C.real_vector.event_dim == 1 and C.boolean.is_discrete
    assert repr(C.greater_than_eq(2)) == "GreaterThanEq(lower_bound=2)" and repr(C.less_than(1.0)) == \
        "LessThan(upper_bound=1.0)"
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        C.dependent.check(t64([1.0]))
    with pytest.raises(NotImplementedError, match=".event_dim cannot be determined statically"):
        C.dependent.event_dim
    assert D.Categorical.support.is_discrete and D.Categorical.support.event_dim == 0


# ---- cuda (the CuPy stand-in on a CPU) ------------------------------------------------------------

CUDA_CASES = {  # name: (builder of the distribution on a device, a value to score)
    "normal": (lambda dev: D.Normal(t64(LOC).to(dev), t64(SCALE).to(dev)), lambda dev: t64(X).to(dev)),
    "categorical": (lambda dev: D.Categorical(logits=t64(LOGITS).to(dev)), lambda dev: r.tensor([3, 1], device=dev)),
    "bernoulli": (lambda dev: D.Bernoulli(logits=t64([0.3, -2.0]).to(dev)), lambda dev: t64([1.0, 0.0]).to(dev)),
    "one_hot_categorical": (lambda dev: D.OneHotCategorical(logits=t64(LOGITS).to(dev)),
                            lambda dev: t64([[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]]).to(dev)),
    "transformed": (lambda dev: D.TransformedDistribution(D.Normal(t64(LOC).to(dev), t64(SCALE).to(dev)),
                                                          [D.ExpTransform()]), lambda dev: t64(np.abs(X)).to(dev)),
    "uniform": (lambda dev: D.Uniform(t64(LOW).to(dev), t64(HIGH).to(dev)), lambda dev: t64([0.3, 0.6, 4.9]).to(dev)),
    "beta": (lambda dev: D.Beta(t64(A).to(dev), t64(B).to(dev)), lambda dev: t64([0.1, 0.5, 0.97]).to(dev)),
    "independent": (lambda dev: D.Independent(D.Normal(t64(LOC).to(dev), t64(SCALE).to(dev)), 1),
                    lambda dev: t64(X).to(dev)),
}


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_cuda_matches_cpu(name):
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    build, value = CUDA_CASES[name]
    cpu, gpu = build("cpu"), build("cuda")
    np.testing.assert_allclose(npy(gpu.log_prob(value("cuda")).cpu()), npy(cpu.log_prob(value("cpu"))), rtol=1e-12)
    if name != "transformed":  # no closed-form entropy
        np.testing.assert_allclose(npy(gpu.entropy().cpu()), npy(cpu.entropy()), rtol=1e-12)
    sample = gpu.sample((5,))
    assert sample.device.type == "cuda" and sample.shape == cpu.sample((5,)).shape
    assert sample.dtype == cpu.sample().dtype
    assert gpu.log_prob(sample).device.type == "cuda"
    if gpu.has_rsample:
        assert gpu.rsample((2,)).device.type == "cuda"
