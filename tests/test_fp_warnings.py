"""No NumPy floating-point warnings from rlpipe's ops, as torch gives none: 1/0 is inf, log(-1) nan,
NaN cast to int64 some value. PyTorch's and tensordict's test files turn every warning into an error.
The caller's own NumPy settings are left as they were."""
import warnings

import numpy as np
import pytest

import rlpipe as r

VALUES = np.array([0.0, 1.0, -1.0, np.inf, -np.inf, np.nan])

# name, rlpipe op, the NumPy reference (computed with warnings off)
OPS = [
    ("div by zero", lambda x: x / 0, lambda a: a / 0),
    ("reciprocal", lambda x: 1 / x, lambda a: 1 / a),
    ("log", r.log, np.log),
    ("log1p", lambda x: r.log1p(x - 1), lambda a: np.log1p(a - 1)),
    ("sqrt", r.sqrt, np.sqrt),
    ("exp overflow", lambda x: r.exp(x * 1000), lambda a: np.exp(a * 1000)),
    ("pow", lambda x: x ** -1, lambda a: a ** -1.0),
    ("inf times zero", lambda x: x * 0, lambda a: a * 0),
    ("remainder", lambda x: x % 0, lambda a: np.fmod(a, 0)),
]


@pytest.mark.parametrize("name,op,reference", OPS, ids=[o[0] for o in OPS])
def test_forward_and_backward_do_not_warn(name, op, reference):
    x = r.tensor(VALUES, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = op(x)
        out.sum().backward()
        no_grad = op(x.detach())
    with np.errstate(all="ignore"):
        expected = reference(VALUES)
    np.testing.assert_array_equal(out.detach().numpy(), expected)
    np.testing.assert_array_equal(no_grad.numpy(), expected)
    assert x.grad is not None


def test_casting_nan_and_inf_to_int_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = r.tensor([np.nan, np.inf, 2.0]).long()
    assert out.dtype is r.int64 and out[2].item() == 2


def test_the_callers_numpy_settings_are_untouched():
    before = np.geterr()
    r.log(r.tensor([0.0]))
    assert np.geterr() == before
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        np.log(np.array([0.0]))  # NumPy outside rlpipe still warns as the caller set it
    with np.errstate(divide="raise"):
        r.log(r.tensor([0.0]))  # rlpipe's own op stays quiet
        with pytest.raises(FloatingPointError):
            np.log(np.array([0.0]))


def test_in_place_arithmetic_does_not_warn():
    x = r.tensor([0.0, 1.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.div_(0)
        x /= 0
    assert np.isnan(x[0].item()) and x[1].item() == np.inf and x[2].item() == -np.inf


@pytest.mark.parametrize("optimizer", [r.optim.SGD, r.optim.Adam, r.optim.RMSprop, r.optim.Adagrad])
def test_an_optimizer_step_on_an_inf_gradient_does_not_warn(optimizer):
    p = r.nn.Parameter(r.ones(3))
    step = optimizer([p], lr=0.1)
    p.grad = r.tensor([np.inf, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step.step()
    assert not np.isfinite(p[0].item()) and np.isfinite(p[1].item())  # torch: nan (inf for SGD)
