"""Lazy modules (torch.nn.LazyLinear, LazyConv2d) and the placeholders they hold.

Behaviour checked against torch 2.13 (measured in a separate environment): reprs before and after the
first call, the class switch to Linear/Conv2d, the state_dict of an uninitialized module holding
placeholders, error types and messages of a placeholder used too early, and load_state_dict into a lazy
module materializing the stored shapes.
"""
import copy

import numpy as np
import pytest

import rlpipe as r
from rlpipe import nn
from rlpipe.nn.parameter import is_lazy


def test_lazy_linear_infers_in_features_and_becomes_linear():
    m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert isinstance(m.weight, nn.UninitializedParameter) and m.has_uninitialized_params()
    y = m(r.ones(2, 5))
    assert tuple(y.shape) == (2, 3)
    assert type(m) is nn.Linear and type(m.weight) is nn.Parameter and type(m.bias) is nn.Parameter
    assert repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    assert tuple(m.weight.shape) == (3, 5) and m.weight.requires_grad
    assert not m._forward_pre_hooks and not m._load_state_dict_pre_hooks


def test_lazy_linear_draws_the_same_values_as_linear():
    # the materialized parameters are initialized as Linear's, in the same order: same seed, same values
    r.manual_seed(3)
    lazy = nn.LazyLinear(4)
    lazy(r.ones(1, 6))
    r.manual_seed(3)
    eager = nn.Linear(6, 4)
    np.testing.assert_array_equal(lazy.weight.detach().numpy(), eager.weight.detach().numpy())
    np.testing.assert_array_equal(lazy.bias.detach().numpy(), eager.bias.detach().numpy())
    bound = 1 / np.sqrt(6)
    assert np.abs(lazy.weight.detach().numpy()).max() <= bound


def test_optimizer_before_and_after_the_first_call_holds_the_materialized_parameters():
    r.manual_seed(0)
    m = nn.LazyLinear(2)
    early = r.optim.SGD(m.parameters(), lr=0.1)
    m(r.ones(3, 4)).sum().backward()
    late = r.optim.SGD(m.parameters(), lr=0.1)
    assert [id(p) for p in early.param_groups[0]["params"]] == [id(p) for p in late.param_groups[0]["params"]]
    before = m.weight.detach().numpy().copy()
    early.step()
    # d(sum(x W^T + b))/dW = 3 (three rows of ones) for every entry
    np.testing.assert_allclose(m.weight.detach().numpy(), before - 0.1 * 3.0, rtol=1e-6)


def test_bias_false_and_unbatched_input():
    m = nn.LazyLinear(3, bias=False)
    assert m.bias is None and repr(m) == "LazyLinear(in_features=0, out_features=3, bias=False)"
    assert tuple(m(r.ones(5)).shape) == (3,)
    assert m.in_features == 5 and [n for n, _ in m.named_parameters()] == ["weight"]


def test_placeholder_refuses_shape_and_ops():
    m = nn.LazyLinear(3)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        m.weight.shape
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        m.weight + 1
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        m.weight.numel()
    assert repr(m.weight) == "<UninitializedParameter>"
    assert m.weight.dtype is r.float32 and is_lazy(m.weight)


def test_state_dict_of_an_uninitialized_module_holds_placeholders():
    sd = nn.LazyLinear(3).state_dict()
    assert list(sd) == ["weight", "bias"]
    assert all(isinstance(v, nn.UninitializedParameter) for v in sd.values())


def test_load_state_dict_materializes_the_stored_shapes():
    src = nn.Linear(5, 3)
    m = nn.LazyLinear(3)
    m.load_state_dict(src.state_dict())
    assert type(m) is nn.LazyLinear  # as torch: the class switches on the next call
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())
    m(r.ones(1, 5))
    assert type(m) is nn.Linear
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())
    # placeholders into placeholders: accepted, still lazy
    lazy = nn.LazyLinear(3)
    lazy.load_state_dict(nn.LazyLinear(3).state_dict())
    assert lazy.has_uninitialized_params()


def test_load_placeholder_into_initialized_module_raises():
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        nn.Linear(5, 3).load_state_dict(nn.LazyLinear(3).state_dict())


def test_lazy_in_sequential_to_dtype_and_deepcopy():
    s = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(2)).to(r.float64)
    copied = copy.deepcopy(s)
    assert tuple(s(r.ones(3, 7, dtype=r.float64)).shape) == (3, 2)
    assert s[0].weight.dtype is r.float64 and tuple(s[2].weight.shape) == (2, 4)
    assert copied[0].has_uninitialized_params()  # the copy is independent
    assert tuple(copied(r.ones(9, dtype=r.float64)).shape) == (2,) and tuple(copied[0].weight.shape) == (4, 9)


def test_lazy_conv2d():
    c = nn.LazyConv2d(4, 3, padding=1)
    assert repr(c) == "LazyConv2d(0, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"
    out = c(r.ones(2, 3, 5, 5))
    assert tuple(out.shape) == (2, 4, 5, 5) and type(c) is nn.Conv2d
    assert tuple(c.weight.shape) == (4, 3, 3, 3) and c.in_channels == 3
    bad = nn.LazyConv2d(4, 3)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d"):
        bad(r.ones(5, 5))
    assert bad.has_uninitialized_params()  # the failed call left it usable
    assert tuple(bad(r.ones(2, 5, 5)).shape) == (4, 3, 3)


def test_materialize_directly():
    p = nn.UninitializedParameter(dtype=r.float64)
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and tuple(p.shape) == (2, 3) and p.dtype is r.float64
    b = nn.UninitializedBuffer()
    b.materialize(4)
    assert type(b) is r.Tensor and tuple(b.shape) == (4,)


def test_copy_into_a_placeholder():
    # torch allows copy_ on placeholders; from a placeholder nothing happens, from a tensor rlpipe materializes
    target = nn.LazyLinear(2)
    with r.no_grad():
        target.weight.copy_(nn.LazyLinear(2).weight)
        assert is_lazy(target.weight)
        source = nn.Linear(3, 2)
        target.weight.copy_(source.weight)
    assert type(target.weight) is nn.Parameter
    np.testing.assert_array_equal(target.weight.detach().numpy(), source.weight.detach().numpy())
