"""The newer nn layers and functional ops against torch 2.13: outputs and gradients recorded by
``fixtures/make_nnlayers_golden.py`` from the cases of ``nnlayers_cases.py``, the modules' state_dicts
(names, shapes) loaded into rlpipe's modules, their reprs and outputs; and gradcheck in float64."""
import os
import zlib

import numpy as np
import pytest

import nnlayers_cases as cases
import rlpipe as r
import rlpipe.nn as nn
import rlpipe.nn.functional as F

GOLDEN = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "nnlayers_golden.npz"))


def _tolerance(array):
    return dict(rtol=1e-5, atol=1e-6) if array.dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)


def _inputs(name, makers, grad, device="cpu"):
    """The recorded inputs as tensors on ``device``; the differentiable ones require grad."""
    arrays = [GOLDEN[f"{name}/in{i}"] for i in range(len(makers))]
    return [r.tensor(a, device=device, requires_grad=grad and not getattr(m, "target", False))
            for a, m in zip(arrays, makers)]


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def check_functional_case(name, device):
    """The case's outputs (values, shapes, dtypes, device) and input gradients on ``device`` against torch's."""
    fn, makers, grad = cases.FUNCTIONAL[name]
    inputs = _inputs(name, makers, grad, device)
    outs = _as_tuple(fn(F, *inputs))
    total = 0
    for k, out in enumerate(outs):
        expected = GOLDEN[f"{name}/out{k}"]
        assert tuple(out.shape) == expected.shape and out.dtype.name == str(expected.dtype), (out.shape, out.dtype)
        assert out.device.type == device
        np.testing.assert_allclose(out.detach().cpu().numpy(), expected, **_tolerance(expected))
        if f"{name}/cot{k}" in GOLDEN:
            total = total + (out * r.tensor(GOLDEN[f"{name}/cot{k}"], device=device)).sum()
    if not grad:
        return
    total.backward()
    for i, t in enumerate(inputs):
        if t.requires_grad:
            expected = GOLDEN[f"{name}/grad{i}"]
            actual = np.zeros(expected.shape) if t.grad is None else t.grad.cpu().numpy()
            np.testing.assert_allclose(actual, expected, **_tolerance(expected), err_msg=f"gradient of input {i}")


@pytest.mark.parametrize("name", sorted(cases.FUNCTIONAL))
def test_functional_matches_torch(name):
    check_functional_case(name, "cpu")


# max pooling's cases get distinct inputs below; overlapping max-pool windows can pick one element twice,
# and unpooling then writes it twice: torch's gradient (which the golden test matches) counts both writes
_GRADCHECKED = [n for n, (_, makers, grad) in cases.FUNCTIONAL.items()
                if grad and GOLDEN[f"{n}/in0"].dtype == np.float64 and "max_pool" not in n
                and n != "max_unpool2d_output_size"]


@pytest.mark.parametrize("name", _GRADCHECKED)
def test_gradcheck(name):
    fn, makers, _ = cases.FUNCTIONAL[name]
    inputs = _inputs(name, makers, True)
    assert r.autograd.gradcheck(lambda *xs: fn(F, *xs), inputs)


@pytest.mark.parametrize("name", ["max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool1d"])
def test_gradcheck_max_pooling_away_from_ties(name):
    """Max pooling is differentiable where no two window entries tie: distinct, well-spread inputs."""
    fn, makers, _ = cases.FUNCTIONAL[name]
    shape = GOLDEN[f"{name}/in0"].shape
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    values = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) / 4
    x = r.tensor(values, requires_grad=True)
    assert r.autograd.gradcheck(lambda x: _as_tuple(fn(F, x))[0], (x,))


def _load(name, make):
    module = make(nn).double()
    state = {key[len(f"mod/{name}/state/"):]: r.tensor(GOLDEN[key]) for key in GOLDEN.files
             if key.startswith(f"mod/{name}/state/")}
    assert sorted(module.state_dict()) == sorted(state)
    for key, value in module.state_dict().items():
        assert tuple(value.shape) == tuple(state[key].shape), key
    module.load_state_dict(state)
    if name.endswith("_eval"):
        module.eval()
    return module


@pytest.mark.parametrize("name", sorted(cases.MODULES) + sorted(cases.LOSS_MODULES))
def test_module_matches_torch(name):
    make = {**cases.MODULES, **cases.LOSS_MODULES}[name][0]
    module = _load(name, make)
    assert repr(module) == str(GOLDEN[f"mod/{name}/repr"])
    inputs = [r.tensor(GOLDEN[f"mod/{name}/in{i}"]) for i in range(3) if f"mod/{name}/in{i}" in GOLDEN]
    out = module(*inputs)
    np.testing.assert_allclose(out.detach().numpy(), GOLDEN[f"mod/{name}/out"], rtol=1e-9, atol=1e-11)
    for key, value in module.state_dict().items():
        np.testing.assert_allclose(value.numpy(), GOLDEN[f"mod/{name}/after/{key}"], rtol=1e-9, atol=1e-11,
                                   err_msg=key)


@pytest.mark.parametrize("name", sorted(cases.TOP_LEVEL))
def test_torch_namespace_form_matches_torch(name):
    fn, makers = cases.TOP_LEVEL[name]
    inputs = [r.tensor(GOLDEN[f"top/{name}/in{i}"]) for i in range(len(makers))]
    outs = _as_tuple(fn(r, *inputs))
    for k, out in enumerate(outs):
        np.testing.assert_allclose(out.numpy(), GOLDEN[f"top/{name}/out{k}"], rtol=1e-9, atol=1e-11)
    assert len(outs) == len([key for key in GOLDEN.files if key.startswith(f"top/{name}/out")])
