"""``rlpipe.nn.utils``: gradient clipping against hand-computed norms and coefficients, and
parameters_to_vector / vector_to_parameters with torch's errors."""
import math

import numpy as np
import pytest

import rlpipe as r
from rlpipe.nn.utils import (clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,
                             get_total_norm, parameters_to_vector, vector_to_parameters)

GRADS = [np.array([[3.0, -4.0], [1.0, 0.5]]), np.array([-2.0, 6.0, 0.25]), np.array([[[1.5]]])]


def params_with_grads(grads=GRADS, dtype=r.float64):
    params = []
    for g in grads:
        p = r.zeros(g.shape, dtype=dtype, requires_grad=True)
        p.grad = r.tensor(g, dtype=dtype)
        params.append(p)
    return params


def hand_norm(grads, p):
    flat = np.concatenate([g.ravel() for g in grads])
    return np.abs(flat).max() if p == math.inf else (np.abs(flat) ** p).sum() ** (1 / p)


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_scales_by_max_norm_over_total(norm_type, max_norm):
    params = params_with_grads()
    total = clip_grad_norm_(params, max_norm, norm_type)
    expected_total = hand_norm(GRADS, norm_type)
    assert isinstance(total, r.Tensor) and total.shape == ()
    assert total.item() == pytest.approx(expected_total, rel=1e-12)
    coef = min(1.0, max_norm / (expected_total + 1e-6))
    for p, g in zip(params, GRADS):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-12)
    if max_norm < expected_total:
        assert hand_norm([p.grad.numpy() for p in params], norm_type) == pytest.approx(max_norm, rel=1e-5)


def test_clip_grad_norm_accepts_a_tensor_a_generator_and_skips_missing_grads():
    p = params_with_grads(GRADS[:1])[0]
    assert clip_grad_norm_(p, 1.0).item() == pytest.approx(hand_norm(GRADS[:1], 2))
    np.testing.assert_allclose(p.grad.numpy(), GRADS[0] / (hand_norm(GRADS[:1], 2) + 1e-6))
    params = params_with_grads() + [r.zeros(3, requires_grad=True)]
    total = clip_grad_norm_((q for q in params), 1.0)
    assert total.item() == pytest.approx(hand_norm(GRADS, 2))
    assert params[-1].grad is None


def test_clip_grad_norm_keeps_grad_tensors_and_dtypes():
    params = params_with_grads(dtype=r.float32)
    before = [p.grad for p in params]
    clip_grad_norm_(params, 0.1)
    assert all(p.grad is g and g.dtype is r.float32 for p, g in zip(params, before))


def test_clip_grad_norm_without_grads_returns_zero():
    total = clip_grad_norm_([r.zeros(2, requires_grad=True)], 1.0)
    assert total.item() == 0.0
    with pytest.warns(UserWarning, match="`parameters` is an empty generator, no gradient clipping will occur."):
        assert clip_grad_norm_((p for p in []), 1.0).item() == 0.0


@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")  # NumPy's inf * 0
def test_clip_grad_norm_non_finite():
    params = params_with_grads([np.array([1.0, math.inf])])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                           "non-finite, so it cannot be clipped."):
        clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    total = clip_grad_norm_(params, 1.0)  # torch scales by the non-finite norm anyway
    assert math.isinf(total.item())
    np.testing.assert_array_equal(params[0].grad.numpy(), [0.0, math.nan])


def test_get_total_norm_and_clip_grads_with_norm():
    params = params_with_grads()
    total = get_total_norm([p.grad for p in params], 3.0)
    assert total.item() == pytest.approx(hand_norm(GRADS, 3.0))
    clip_grads_with_norm_(params, 2.0, total)
    for p, g in zip(params, GRADS):
        np.testing.assert_allclose(p.grad.numpy(), g * 2.0 / (total.item() + 1e-6))


def test_deprecated_clip_grad_norm():
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated in favor of"):
        total = clip_grad_norm(params_with_grads(), 1.0)
    assert total.item() == pytest.approx(hand_norm(GRADS, 2))


def test_clip_grad_value():
    params = params_with_grads() + [r.zeros(2, requires_grad=True)]
    assert clip_grad_value_(params, 1.5) is None
    for p, g in zip(params, GRADS):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -1.5, 1.5))
    p = params_with_grads(GRADS[1:2])[0]
    clip_grad_value_(p, 0.1)
    np.testing.assert_array_equal(p.grad.numpy(), [-0.1, 0.1, 0.1])


def test_clip_grad_value_of_a_zero_dim_parameter():
    p = r.tensor(3.0, requires_grad=True)
    (p * p).backward()
    clip_grad_value_(p, 1.0)
    assert p.grad.item() == 1.0


def test_parameters_to_vector_concatenates_and_is_differentiable():
    a = r.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = r.tensor([5.0, 6.0], requires_grad=True)
    vec = parameters_to_vector([a, b])
    np.testing.assert_array_equal(vec.detach().numpy(), [1, 2, 3, 4, 5, 6])
    (vec * r.arange(6.0)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(b.grad.numpy(), [4, 5])


def test_vector_to_parameters_writes_slices_back():
    a, b = r.zeros(2, 2, requires_grad=True), r.zeros(3, requires_grad=True)
    vec = r.arange(1.0, 8.0)
    vector_to_parameters(vec, [a, b])  # a longer vector is fine: the rest is unused, as in torch
    np.testing.assert_array_equal(a.detach().numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(b.detach().numpy(), [5, 6, 7])
    assert a.shape == (2, 2) and a.requires_grad
    vec[0] = 100.0  # the parameters view the vector's memory, as torch's .data assignment does
    assert a[0, 0].item() == 100.0
    round_trip = parameters_to_vector([a, b])
    np.testing.assert_array_equal(round_trip.detach().numpy(), [100, 2, 3, 4, 5, 6, 7])


def test_vector_to_parameters_errors():
    with pytest.raises(TypeError, match="expected rlpipe.Tensor, but got: list"):
        vector_to_parameters([1.0, 2.0], [r.zeros(2)])
    with pytest.raises(RuntimeError, match=r"shape '\[3\]' is invalid for input of size 1"):
        vector_to_parameters(r.arange(3.0), [r.zeros(2), r.zeros(3)])
