"""torchrl's distributions (rlpipe.modules.distributions) against numbers measured on torchrl 0.14.1
(pasted as constants), NumPy formulas and float64 gradchecks."""
import math

import numpy as np
import pytest
import scipy.stats as st

import rlpipe as r
from rlpipe import distributions as D
from rlpipe.autograd import gradcheck
from rlpipe.modules.distributions import Delta, IndependentNormal, MaskedCategorical, OneHotCategorical, TanhNormal


def t64(values, requires_grad=False):
    return r.tensor(np.asarray(values, dtype=np.float64), dtype=r.float64, requires_grad=requires_grad)


def npy(t):
    return np.asarray(t.detach().numpy())


LOC = [[0.3, -2.0], [1.0, 0.1]]
SCALE = [[0.5, 1.0], [0.2, 2.0]]


@pytest.fixture(autouse=True)
def _seed():
    r.manual_seed(99)


def test_importing_turns_default_validation_off_as_torchrl_does():
    assert D.Distribution._validate_args is False


def test_tanh_normal_log_prob_matches_torchrl():
    # torchrl 0.14.1: TanhNormal(loc, scale).log_prob(...) (float64)
    d = TanhNormal(t64(LOC), t64(SCALE))
    assert d.batch_shape == (2,) and d.event_shape == (2,) and d.has_rsample
    value = t64([[0.2, -0.9], [0.7, 0.99]])
    np.testing.assert_allclose(npy(d.log_prob(value)), [0.398625269823, 2.637999577928], rtol=1e-11)
    np.testing.assert_allclose(npy(TanhNormal(t64(LOC), t64(SCALE), safe_tanh=False).log_prob(value)),
                               [0.398625269823, 2.637999577928], rtol=1e-11)
    # bounds and tanh_loc
    d2 = TanhNormal(t64(LOC), t64(SCALE), low=t64([-2.0, 0.0]), high=t64([1.0, 3.0]), tanh_loc=True, upscale=2.0)
    np.testing.assert_allclose(npy(d2.log_prob(t64([[0.2, 0.9], [0.7, 2.99]]))), [-2.618488723493, -2.270266774243],
                               rtol=1e-11)
    np.testing.assert_allclose(npy(d2.deterministic_sample), [[-0.799276152624, 1.465223764944],
                                                              [0.100737411499, 2.882484033080]], rtol=1e-11)
    # event_dims=0, values at and next to the bounds
    d3 = TanhNormal(t64(LOC[0]), t64(SCALE[0]), event_dims=0)
    assert d3.batch_shape == (2,) and d3.event_shape == ()
    np.testing.assert_allclose(npy(d3.log_prob(t64([0.999999, -1.0]))), [-83.828800564243, -89.007884320806],
                               rtol=1e-11)
    # float32, number bounds, values on the bounds (the safe tanh keeps them finite)
    d4 = TanhNormal(r.tensor(LOC), r.tensor(SCALE), low=-3.0, high=2.0)
    np.testing.assert_allclose(npy(d4.log_prob(r.tensor([[2.0, -3.0], [1.5, 0.0]]))),
                               [-87.070281982422, -1.814568638802], rtol=1e-6)
    np.testing.assert_allclose(npy(d4.deterministic_sample), [[0.228281617165, -2.910068988800],
                                                              [1.403985500336, -0.250829994678]], rtol=1e-6)


def test_tanh_normal_log_prob_is_the_change_of_variables():
    loc, scale = np.array(LOC), np.array(SCALE)
    low, high = np.array([-2.0, 0.5]), np.array([1.0, 3.0])
    d = TanhNormal(t64(loc), t64(scale), low=t64(low), high=t64(high))
    y = np.array([[0.2, 0.9], [-1.5, 2.99]])
    u = (y - (high + low) / 2) / ((high - low) / 2)
    x = np.arctanh(u)
    expected = (st.norm(loc, scale).logpdf(x) - np.log1p(-u ** 2) - np.log((high - low) / 2)).sum(-1)
    np.testing.assert_allclose(npy(d.log_prob(t64(y))), expected, rtol=1e-9)


def test_tanh_normal_samples_stay_in_bounds_and_have_the_right_shapes():
    d = TanhNormal(t64(LOC), t64(SCALE), low=-3.0, high=2.0)
    s = npy(d.sample((2000,)))
    assert s.shape == (2000, 2, 2) and s.min() >= -3.0 and s.max() <= 2.0
    # the median of tanh(Normal) is tanh(loc): half the samples on each side, within 4 standard errors
    median = npy(d.deterministic_sample)
    frac = (s < median).mean(0)
    np.testing.assert_array_less(np.abs(frac - 0.5), 4 * 0.5 / math.sqrt(2000))
    assert TanhNormal(r.zeros(3, 4), r.ones_like).sample().shape == (3, 4)
    assert TanhNormal(r.zeros(3), 0.5).scale.dtype == r.float32


def test_tanh_normal_gradcheck_rsample_and_log_prob():
    loc, scale = t64(LOC, True), t64(SCALE, True)

    def rsample(loc, scale):
        r.manual_seed(4)
        return TanhNormal(loc, scale, low=-2.0, high=3.0).rsample((3,))
    assert gradcheck(rsample, (loc, scale))
    value = t64([[0.2, -0.9], [0.7, 0.95]])
    assert gradcheck(lambda m, s: TanhNormal(m, s, tanh_loc=True).log_prob(value), (loc, scale))

    def rsample_and_log_prob(loc, scale):
        r.manual_seed(4)
        return TanhNormal(loc, scale).rsample_and_log_prob((2,))
    assert gradcheck(rsample_and_log_prob, (loc, scale))


def test_rsample_and_log_prob_scores_the_exact_preimage():
    d = TanhNormal(r.tensor([20.0, -20.0]), r.full((2,), 0.1))
    action, log_prob = d.rsample_and_log_prob()
    assert action.shape == (2,) and log_prob.shape == ()
    np.testing.assert_allclose(npy(action), [0.999999, -0.999999], rtol=1e-6)  # the safe tanh's limits
    assert 70 < log_prob.item() < 90  # torchrl: 79.46 for its draw; log_prob(action) would give -16233
    sample, lp = d.sample_and_log_prob((5,))
    assert sample.shape == (5, 2) and lp.shape == (5,) and not sample.requires_grad


def test_tanh_normal_update_errors_and_mode():
    d = TanhNormal(t64(LOC), t64(SCALE))
    base = d.root_dist
    d.update(t64(np.zeros((2, 2))), t64(np.ones((2, 2))))
    assert d.root_dist is base and npy(d.root_dist.loc).tolist() == [[0, 0], [0, 0]]
    d.update(t64(np.zeros(2)), t64(np.ones(2)))
    assert d.batch_shape == () and d.event_shape == (2,)
    with pytest.raises(RuntimeError, match="TanhNormal high values must be strictly greater than low values"):
        TanhNormal(t64(LOC), t64(SCALE), low=1.0, high=1.0)
    with pytest.raises(RuntimeError, match="TanhNormal has not analytical mode"):
        d.mode
    with pytest.raises(NotImplementedError, match="does not have a closed form formula for the average"):
        d.mean
    TanhNormal(t64(LOC), t64(SCALE) * 0)  # validation is off by default, as in torchrl
    D.Distribution.set_default_validate_args(True)
    try:
        with pytest.raises(ValueError, match=r"parameter scale .* GreaterThan\(lower_bound=0.0\)"):  # the Normal's
            TanhNormal(t64(LOC), t64(SCALE) * 0)
    finally:
        D.Distribution.set_default_validate_args(False)
    assert npy(d.min) == -1.0 and npy(d.max) == 1.0


def test_independent_normal_and_delta():
    d = IndependentNormal(t64(np.zeros((3, 2))), 1.0, tanh_loc=True, upscale=2.0)
    assert d.batch_shape == (3,) and d.event_shape == (2,) and d.mode.shape == (3, 2)
    np.testing.assert_allclose(npy(d.log_prob(t64(np.ones((3, 2))))), st.norm.logpdf(1.0) * 2 * np.ones(3))
    d.update(t64(np.full((3, 2), 100.0)), r.ones_like)
    np.testing.assert_allclose(npy(d.deterministic_sample), np.full((3, 2), 2 * np.tanh(50.0)))
    delta = Delta(r.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert delta.batch_shape == (2,) and delta.event_shape == (2,)
    assert npy(delta.log_prob(r.tensor([[1.0, 2.0], [3.0, 4.1]]))).tolist() == [math.inf, -math.inf]
    assert delta.sample((3,)).shape == (3, 2, 2) and delta.mode is delta.param
    assert delta.expand((5, 2)).batch_shape == (5, 2)


@pytest.mark.cuda
def test_tanh_normal_on_cuda_matches_cpu():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    value = t64([[0.2, -0.9], [0.7, 0.99]])
    cpu = TanhNormal(t64(LOC), t64(SCALE), low=-2.0, high=3.0, tanh_loc=True)
    gpu = TanhNormal(t64(LOC).cuda(), t64(SCALE).cuda(), low=-2.0, high=3.0, tanh_loc=True)
    np.testing.assert_allclose(npy(gpu.log_prob(value.cuda()).cpu()), npy(cpu.log_prob(value)), rtol=1e-12)
    sample = gpu.rsample((4,))
    assert sample.device.type == "cuda" and sample.shape == (4, 2, 2)
    action, log_prob = gpu.rsample_and_log_prob()
    assert action.device.type == "cuda" and log_prob.shape == (2,)


# ---- discrete: values measured on torchrl 0.14.1 --------------------------------------------------

MC_LOGITS = [[0.2, -1.0, 1.5, 0.0], [2.0, 2.0, -3.0, 0.5]]
MC_MASK = [[True, False, True, True], [False, True, True, False]]


def test_masked_categorical_with_a_boolean_mask_matches_torchrl():
    d = MaskedCategorical(logits=t64(MC_LOGITS), mask=r.tensor(MC_MASK))
    lp = npy(d.log_prob(r.tensor([1, 2])))
    assert lp[0] == -math.inf and abs(lp[1] - -5.0067153485) < 1e-9
    np.testing.assert_allclose(npy(d.log_prob(r.tensor([2, 1]))), [-0.4025688869, -0.0067153485], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(d.entropy()), [0.8632255010, 0.0401796031], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(d.probs), [[0.1822148330, 0.0, 0.6686002795, 0.1491848874],
                                              [0.0, 0.9933071491, 0.0066928509, 0.0]], rtol=1e-9, atol=1e-10)
    assert npy(d.mode).tolist() == [2, 1] and npy(d.deterministic_sample).tolist() == [2, 1]
    s = npy(d.sample((500,)))
    assert s.shape == (500, 2) and set(np.unique(s[:, 0])) <= {0, 2, 3} and set(np.unique(s[:, 1])) <= {1, 2}
    assert d.mask is not None and d.padding_value == 0 and d.padding_side == "left"
    finite = MaskedCategorical(logits=t64(MC_LOGITS), mask=r.tensor(MC_MASK), neg_inf=-10.0)
    np.testing.assert_allclose(npy(finite.log_prob(r.tensor([1, 2]))), [-11.9025756599, -5.0067275546],
                               rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(finite.entropy()), [0.8632255010, 0.0401796031], rtol=1e-9, atol=1e-10)
    from_probs = MaskedCategorical(probs=t64([[0.1, 0.2, 0.3, 0.4], [0.25] * 4]), mask=r.tensor(MC_MASK))
    np.testing.assert_allclose(npy(from_probs.log_prob(r.tensor([3, 1]))), [-0.6931471806] * 2, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(from_probs.entropy()), [0.9743147529, 0.6931471806], rtol=1e-9, atol=1e-10)


def test_masked_categorical_with_sparse_indices_matches_torchrl():
    idx = r.tensor([[0, 2, 3], [1, 2, 0]])
    padded = MaskedCategorical(logits=t64(MC_LOGITS), indices=idx, padding_value=0)
    np.testing.assert_allclose(npy(padded.log_prob(r.tensor([3, 2]))), [-1.7014132780, -5.0067153485],
                               rtol=1e-9, atol=1e-10)
    lp = npy(padded.log_prob(r.tensor([1, 1])))
    assert lp[0] == -math.inf and abs(lp[1] - -0.0067153485) < 1e-9
    assert npy(padded.mode).tolist() == [2, 1]
    d = MaskedCategorical(logits=t64(MC_LOGITS), indices=idx)
    np.testing.assert_allclose(npy(d.log_prob(r.tensor([3, 0]))), [-1.9025688869, -0.6965104918], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(d.entropy()), [0.8632255010, 0.7132987999], rtol=1e-9, atol=1e-10)
    s = npy(d.sample((400,)))
    assert s.shape == (400, 2) and set(np.unique(s[:, 0])) <= {0, 2, 3} and set(np.unique(s[:, 1])) <= {0, 1, 2}
    with pytest.raises(ValueError, match="MaskedCategorical.mask does not support sparse masks"):
        d.mask


def test_masked_categorical_errors_gradients_and_frequencies():
    with pytest.raises(ValueError, match="A ``mask`` or some ``indices`` must be provided"):
        MaskedCategorical(logits=t64(MC_LOGITS))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        MaskedCategorical(logits=t64(MC_LOGITS), probs=t64(MC_LOGITS), mask=r.tensor(MC_MASK))
    mask = r.tensor(MC_MASK)
    assert gradcheck(lambda lg: MaskedCategorical(logits=lg, mask=mask).log_prob(r.tensor([3, 2])),
                     (t64(MC_LOGITS, True),))
    assert gradcheck(lambda lg: MaskedCategorical(logits=lg, mask=mask).entropy(), (t64(MC_LOGITS, True),))
    d = MaskedCategorical(logits=t64(MC_LOGITS), mask=mask)
    n = 20000
    freq = np.bincount(npy(d.sample((n,)))[:, 0], minlength=4) / n
    p = np.array([0.1822148330, 0.0, 0.6686002795, 0.1491848874])
    np.testing.assert_array_less(np.abs(freq - p), 4 * np.sqrt(p * (1 - p) / n) + 1e-12)


def test_torchrl_one_hot_categorical_matches_torchrl():
    d = OneHotCategorical(logits=t64(MC_LOGITS))
    np.testing.assert_allclose(npy(d.log_prob(r.tensor([[0, 0, 1, 0], [1, 0, 0, 0]]))), [-0.4559978495, -0.8019424389],
                               rtol=1e-9, atol=1e-10)
    assert npy(d.mode).tolist() == [[0, 0, 1, 0], [1, 1, 0, 0]]  # ties: every maximum
    np.testing.assert_allclose(npy(d.entropy()), [1.0227548106, 0.9671472661], rtol=1e-9, atol=1e-10)
    s = d.sample((3,))
    assert s.dtype == r.int64 and s.shape == (3, 2, 4) and npy(s).sum(-1).tolist() == [[1, 1]] * 3
    logits = t64(MC_LOGITS, True)
    x = OneHotCategorical(logits=logits).rsample()
    assert x.dtype == r.float64 and npy(x).sum(-1).tolist() == [1.0, 1.0]
    (x * t64([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert np.abs(npy(logits.grad)).sum() > 0  # the probabilities' gradient passes through
    assert OneHotCategorical(probs=t64([[0.3], [0.7]])).num_samples == 2  # a trailing 1 is dropped


def test_masked_categorical_from_probs_with_sparse_indices_matches_torchrl():
    # torchrl 0.14.1: MaskedCategorical(probs=[.2, .3, .5], indices=[0, 2]) keeps the probabilities at the
    # indices, renormalised (.2/.7, .5/.7), and log_prob(2) = log(.5/.7) = -0.33647
    d = MaskedCategorical(probs=t64([0.2, 0.3, 0.5]), indices=r.tensor([0, 2]))
    assert np.allclose(d.probs.numpy(), [0.2 / 0.7, 0.5 / 0.7])
    assert math.isclose(float(d.log_prob(r.tensor(2))), math.log(0.5 / 0.7), rel_tol=1e-12)
