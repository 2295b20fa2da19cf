"""Loss modules against NumPy formulas written out here, for every reduction; float64 gradchecks;
class weights, ignore_index, label smoothing and probability targets of the cross entropy; legacy
``size_average``/``reduce`` flags; error types and messages."""
import numpy as np
import pytest

import rlpipe as r
from rlpipe import nn
from rlpipe.autograd import gradcheck

REDUCTIONS = ["mean", "sum", "none"]


def t64(values, requires_grad=False):
    return r.tensor(np.asarray(values, dtype=np.float64), dtype=r.float64, requires_grad=requires_grad)


def reduce_np(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def check(loss_module, input, target, expected, rtol=1e-10):
    out = loss_module(input, target)
    np.testing.assert_allclose(np.asarray(out.detach().numpy()), expected, rtol=rtol, atol=1e-12)
    assert out.shape == np.shape(expected)
    return out


def log_softmax_np(x, axis=1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 3)) * 2
Y = rng.standard_normal((4, 3)) * 2


# ---------------------------------------------------------------------------------------------
# regression losses
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_and_l1(reduction):
    check(nn.MSELoss(reduction=reduction), t64(X), t64(Y), reduce_np((X - Y) ** 2, reduction))
    check(nn.L1Loss(reduction=reduction), t64(X), t64(Y), reduce_np(np.abs(X - Y), reduction))


def _smooth_l1(d, beta):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * d ** 2 / beta, a - 0.5 * beta) if beta > 0 else a


def _huber(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d ** 2, delta * (a - 0.5 * delta))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1(reduction, beta):
    m = nn.SmoothL1Loss(reduction=reduction, beta=beta)
    assert m.beta == beta and repr(m) == "SmoothL1Loss()"
    check(m, t64(X), t64(Y), reduce_np(_smooth_l1(X - Y, beta), reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 2.5])
def test_huber(reduction, delta):
    check(nn.HuberLoss(reduction=reduction, delta=delta), t64(X), t64(Y), reduce_np(_huber(X - Y, delta), reduction))


def test_huber_is_smooth_l1_scaled_by_delta():
    a = nn.HuberLoss(delta=2.0)(t64(X), t64(Y)).item()
    b = nn.SmoothL1Loss(beta=2.0)(t64(X), t64(Y)).item()
    assert a == pytest.approx(2.0 * b, rel=1e-12)


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(reduction="sum"), nn.SmoothL1Loss(beta=0.7),
                                  nn.HuberLoss(reduction="none", delta=1.3)], ids=repr)
def test_regression_loss_gradients(loss):
    x = t64(X[:2] + 0.01, requires_grad=True)
    y = t64(Y[:2], requires_grad=True)
    assert gradcheck(loss, (x, y))


def test_mse_backward_values():
    x = t64(X, requires_grad=True)
    nn.MSELoss()(x, t64(Y)).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (X - Y) / X.size, rtol=1e-12)


def test_regression_losses_warn_on_broadcasting_targets():
    with pytest.warns(UserWarning, match="Using a target size"):
        out = nn.MSELoss()(t64(X), t64(Y[0]))
    assert out.item() == pytest.approx(np.mean((X - Y[0]) ** 2))


def test_regression_loss_argument_errors():
    with pytest.raises(ValueError, match="elementwise is not a valid value for reduction"):
        nn.MSELoss(reduction="elementwise")(t64(X), t64(Y))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta"):
        nn.SmoothL1Loss(beta=-1.0)(t64(X), t64(Y))
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta"):
        nn.HuberLoss(delta=0.0)(t64(X), t64(Y))


@pytest.mark.parametrize("size_average, reduce, expected", [
    (None, False, "none"), (False, None, "sum"), (True, True, "mean"), (False, True, "sum"), (True, False, "none")])
def test_legacy_size_average_and_reduce_flags(size_average, reduce, expected):
    with pytest.warns(UserWarning, match=f"size_average and reduce args will be deprecated, please use "
                                         f"reduction='{expected}' instead"):
        m = nn.L1Loss(size_average=size_average, reduce=reduce)
    assert m.reduction == expected
    check(m, t64(X), t64(Y), reduce_np(np.abs(X - Y), expected))
    with pytest.warns(UserWarning):
        assert nn.CrossEntropyLoss(size_average=size_average, reduce=reduce).reduction == expected


def test_loss_reprs_and_defaults():
    assert repr(nn.MSELoss()) == "MSELoss()"
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"
    m = nn.CrossEntropyLoss()
    assert (m.reduction, m.ignore_index, m.label_smoothing, m.weight) == ("mean", -100, 0.0, None)
    assert nn.NLLLoss().ignore_index == -100 and nn.BCEWithLogitsLoss().pos_weight is None
    assert nn.HuberLoss().delta == 1.0 and nn.SmoothL1Loss().beta == 1.0


def test_class_weights_are_buffers():
    m = nn.CrossEntropyLoss(weight=r.tensor([1.0, 2.0, 3.0]))
    assert list(m.state_dict()) == ["weight"] and list(m.parameters()) == []
    m.double()
    assert m.weight.dtype is r.float64
    b = nn.BCEWithLogitsLoss(weight=r.ones(3), pos_weight=r.ones(3))
    assert list(b.state_dict()) == ["weight", "pos_weight"]


# ---------------------------------------------------------------------------------------------
# NLLLoss and CrossEntropyLoss with class indices
# ---------------------------------------------------------------------------------------------

LOGITS = rng.standard_normal((5, 4)) * 2
TARGET = np.array([0, 3, 1, 1, 2])
WEIGHT = np.array([0.5, 1.0, 2.0, 0.25])


def _nll(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    """logp [N, C, ...], target [N, ...]."""
    w = np.ones(logp.shape[1]) if weight is None else weight
    keep = target != ignore_index
    safe = np.where(keep, target, 0)
    picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    wt = w[safe] * keep
    loss = -picked * wt
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / wt.sum()


def _cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """torch's formula: (1 - s) * nll + s / C * (the weighted sum of -log p over the classes)."""
    logp = log_softmax_np(logits)
    nll = _nll(logp, target, weight, ignore_index, reduction)
    if smoothing == 0:
        return nll
    c = logits.shape[1]
    w = np.ones(c) if weight is None else weight
    keep = target != ignore_index
    smooth = -(logp * w.reshape((1, c) + (1,) * (logp.ndim - 2))).sum(1) * keep
    if reduction == "none":
        s = smooth
    elif reduction == "sum":
        s = smooth.sum()
    else:
        total_weight = (w[np.where(keep, target, 0)] * keep).sum() if weight is not None else keep.sum()
        s = smooth.sum() / total_weight
    return (1 - smoothing) * nll + smoothing / c * s


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, WEIGHT], ids=["unweighted", "weighted"])
def test_nll_loss(reduction, weight):
    logp = log_softmax_np(LOGITS)
    m = nn.NLLLoss(weight=None if weight is None else t64(weight), reduction=reduction)
    check(m, t64(logp), r.tensor(TARGET), _nll(logp, TARGET, weight, reduction=reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, WEIGHT], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_cross_entropy_with_class_indices(reduction, weight, smoothing, ignore_index):
    m = nn.CrossEntropyLoss(weight=None if weight is None else t64(weight), ignore_index=ignore_index,
                            reduction=reduction, label_smoothing=smoothing)
    expected = _cross_entropy(LOGITS, TARGET, weight, ignore_index, reduction, smoothing)
    out = check(m, t64(LOGITS), r.tensor(TARGET), expected)
    if reduction == "none" and ignore_index == 1:
        assert out[2].item() == 0 and out[3].item() == 0


def test_cross_entropy_equals_nll_of_log_softmax_and_its_hand_value():
    logits = np.array([[1.0, 2.0, 3.0]])
    expected = -np.log(np.exp(1.0) / np.exp(logits).sum())
    assert nn.CrossEntropyLoss()(t64(logits), r.tensor([0])).item() == pytest.approx(expected, rel=1e-12)
    a = nn.CrossEntropyLoss()(t64(LOGITS), r.tensor(TARGET)).item()
    b = nn.NLLLoss()(nn.LogSoftmax(dim=1)(t64(LOGITS)), r.tensor(TARGET)).item()
    assert a == pytest.approx(b, rel=1e-12)


def test_cross_entropy_with_spatial_dimensions_and_unbatched_input():
    logits = rng.standard_normal((2, 3, 4, 2))
    target = rng.integers(0, 3, (2, 4, 2))
    for reduction in REDUCTIONS:
        check(nn.CrossEntropyLoss(weight=t64([1.0, 2.0, 0.5]), reduction=reduction, label_smoothing=0.1),
              t64(logits), r.tensor(target), _cross_entropy(logits, target, np.array([1.0, 2.0, 0.5]),
                                                            reduction=reduction, smoothing=0.1))
    single = LOGITS[0]
    check(nn.CrossEntropyLoss(), t64(single), r.tensor(2), -log_softmax_np(single[None])[0, 2])
    check(nn.CrossEntropyLoss(reduction="none"), t64(single), r.tensor(2), -log_softmax_np(single[None])[0, 2])


def test_cross_entropy_when_every_target_is_ignored_is_nan():
    out = nn.CrossEntropyLoss(ignore_index=0)(t64(LOGITS[:2]), r.tensor([0, 0]))
    assert np.isnan(out.item())
    assert nn.CrossEntropyLoss(ignore_index=0, reduction="sum")(t64(LOGITS[:2]), r.tensor([0, 0])).item() == 0


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, WEIGHT], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_with_class_probabilities(reduction, weight, smoothing):
    probs = np.exp(log_softmax_np(rng.standard_normal((5, 4))))
    c = 4
    target = probs * (1 - smoothing) + smoothing / c
    w = np.ones(c) if weight is None else weight
    per_sample = -(log_softmax_np(LOGITS) * target * w).sum(1)
    expected = {"none": per_sample, "sum": per_sample.sum(), "mean": per_sample.sum() / 5}[reduction]
    m = nn.CrossEntropyLoss(weight=None if weight is None else t64(weight), reduction=reduction,
                            label_smoothing=smoothing)
    check(m, t64(LOGITS), t64(probs), expected)


def test_class_loss_gradients():
    x = t64(LOGITS[:3], requires_grad=True)
    target = r.tensor([0, 3, 1])
    for m in (nn.CrossEntropyLoss(), nn.CrossEntropyLoss(weight=t64(WEIGHT), label_smoothing=0.2, ignore_index=3),
              nn.CrossEntropyLoss(reduction="none", label_smoothing=0.1), nn.NLLLoss(weight=t64(WEIGHT)),
              nn.NLLLoss(reduction="sum", ignore_index=0)):
        assert gradcheck(lambda v, m=m: m(v, target), (x,))
    probs = t64(np.exp(log_softmax_np(rng.standard_normal((3, 4)))), requires_grad=True)
    assert gradcheck(nn.CrossEntropyLoss(label_smoothing=0.1), (x, probs))


def test_cross_entropy_backward_values():
    """d CE / d logits = (softmax - onehot) / N for the mean reduction."""
    x = t64(LOGITS, requires_grad=True)
    nn.CrossEntropyLoss()(x, r.tensor(TARGET)).backward()
    onehot = np.eye(4)[TARGET]
    np.testing.assert_allclose(x.grad.numpy(), (np.exp(log_softmax_np(LOGITS)) - onehot) / 5, rtol=1e-10)


def test_class_loss_errors():
    m = nn.CrossEntropyLoss()
    with pytest.raises(ValueError, match=r"Expected input batch_size \(5\) to match target batch_size \(3\)"):
        m(t64(LOGITS), r.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Float"):
        m(t64(LOGITS), r.tensor([0.0, 1.0, 2.0, 1.0, 0.0]))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes or no classes"):
        nn.CrossEntropyLoss(weight=t64([1.0, 2.0]))(t64(LOGITS), r.tensor(TARGET))
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0"):
        nn.CrossEntropyLoss(label_smoothing=1.5)(t64(LOGITS), r.tensor(TARGET))
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point target"):
        nn.CrossEntropyLoss(ignore_index=0)(t64(LOGITS), t64(np.full((5, 4), 0.25)))
    with pytest.raises((IndexError, RuntimeError)):
        nn.NLLLoss()(t64(LOGITS), r.tensor([0, 1, 2, 3, 4]))  # class 4 of 4


# ---------------------------------------------------------------------------------------------
# BCELoss and BCEWithLogitsLoss
# ---------------------------------------------------------------------------------------------

P = 1 / (1 + np.exp(-X))
T = (rng.random((4, 3)) > 0.5).astype(np.float64) * 0.8 + 0.1  # soft targets in (0, 1)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, np.array([1.0, 2.0, 0.5])], ids=["unweighted", "weighted"])
def test_bce(reduction, weight):
    w = 1.0 if weight is None else weight
    loss = -w * (T * np.log(P) + (1 - T) * np.log(1 - P))
    check(nn.BCELoss(weight=None if weight is None else t64(weight), reduction=reduction), t64(P), t64(T),
          reduce_np(loss, reduction))


def test_bce_clamps_the_logs_at_minus_100():
    out = nn.BCELoss(reduction="none")(t64([0.0, 1.0, 0.0, 1.0]), t64([1.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(out.numpy(), [100.0, 100.0, 0.0, 0.0])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, np.array([1.0, 2.0, 0.5])], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("pos_weight", [None, np.array([3.0, 1.0, 0.2])], ids=["no_pos_weight", "pos_weight"])
def test_bce_with_logits(reduction, weight, pos_weight):
    w = 1.0 if weight is None else weight
    pw = 1.0 if pos_weight is None else pos_weight
    log_sig, log_sig_neg = -np.log1p(np.exp(-X)), -np.log1p(np.exp(X))
    loss = -w * (pw * T * log_sig + (1 - T) * log_sig_neg)
    m = nn.BCEWithLogitsLoss(weight=None if weight is None else t64(weight), reduction=reduction,
                             pos_weight=None if pos_weight is None else t64(pos_weight))
    check(m, t64(X), t64(T), reduce_np(loss, reduction))


def test_bce_with_logits_is_stable_for_large_logits():
    out = nn.BCEWithLogitsLoss(reduction="none")(t64([800.0, -800.0, 800.0]), t64([1.0, 0.0, 0.0]))
    np.testing.assert_allclose(out.numpy(), [0.0, 0.0, 800.0])
    f32 = nn.BCEWithLogitsLoss()(r.tensor([100.0, -100.0]), r.tensor([0.0, 1.0]))
    assert f32.dtype is r.float32 and f32.item() == pytest.approx(100.0)


def test_binary_losses_agree_and_have_correct_gradients():
    a = nn.BCEWithLogitsLoss()(t64(X), t64(T)).item()
    b = nn.BCELoss()(t64(P), t64(T)).item()
    assert a == pytest.approx(b, rel=1e-10)
    x = t64(X[:2], requires_grad=True)
    t = t64(T[:2], requires_grad=True)
    assert gradcheck(nn.BCEWithLogitsLoss(pos_weight=t64([2.0, 1.0, 0.5]), weight=t64([1.0, 0.5, 2.0])), (x, t))
    p = t64(P[:2], requires_grad=True)
    assert gradcheck(nn.BCELoss(weight=t64([1.0, 0.5, 2.0]), reduction="sum"), (p, t))
    xg = t64(X, requires_grad=True)
    nn.BCEWithLogitsLoss(reduction="sum")(xg, t64(T)).backward()
    np.testing.assert_allclose(xg.grad.numpy(), P - T, rtol=1e-10)


def test_binary_loss_errors():
    with pytest.raises(ValueError, match="Using a target size .* that is different to the input size"):
        nn.BCELoss()(t64(P), t64(T[0]))
    with pytest.raises(ValueError, match=r"Target size \(.*\) must be the same as input size"):
        nn.BCEWithLogitsLoss()(t64(X), t64(T[:, :1]))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        nn.BCELoss()(t64([1.5]), t64([1.0]))
