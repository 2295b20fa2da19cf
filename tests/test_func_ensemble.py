"""vmap's linear rule with one weight per sample (EnsembleLinear): values and every gradient equal a
Python loop over the members, and finite differences in float64."""
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe.autograd import gradcheck
from rlpipe.func import vmap
from rlpipe.func._ensemble import EnsembleLinear, StackedStates


def leaves(*shapes):
    return [rlpipe.randn(*s, dtype=rlpipe.float64, requires_grad=True) for s in shapes]


def grads_of(out, tensors):
    return rlpipe.autograd.grad(out.sin().sum(), tensors, allow_unused=True)


CASES = [  # (x shape, x mapped, out features, with bias)
    ((7, 3), False, 5, True), ((4, 7, 3), True, 5, True), ((7, 3), False, 1, True), ((4, 7, 3), True, 1, False),
    ((2, 7, 3), False, 5, False), ((4, 2, 6, 3), True, 2, True), ((3,), False, 5, True), ((4, 3), True, 5, True)]


@pytest.mark.parametrize("x_shape, x_mapped, features, with_bias", CASES)
def test_vmapped_linear_equals_the_loop_values_and_gradients(x_shape, x_mapped, features, with_bias):
    rlpipe.manual_seed(0)
    x, w, b = leaves(x_shape, (4, features, 3), (4, features))
    bias = b if with_bias else None
    out = vmap(F.linear, (0 if x_mapped else None, 0, 0 if with_bias else None))(x, w, bias)
    truth = rlpipe.stack([F.linear(x[e] if x_mapped else x, w[e], None if bias is None else bias[e])
                          for e in range(4)])
    assert out.grad_fn.name() == "EnsembleLinearBackward0"
    assert out.shape == truth.shape and rlpipe.allclose(out, truth, atol=1e-12)
    wanted = [x, w] + ([b] if with_bias else [])
    for got, expected in zip(grads_of(out, wanted), grads_of(truth, wanted)):
        assert rlpipe.allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize("x_mapped", [False, True])
def test_ensemble_linear_gradcheck(x_mapped):
    rlpipe.manual_seed(1)
    x, w, b = leaves((3, 5, 2) if x_mapped else (5, 2), (3, 4, 2), (3, 4))
    assert gradcheck(lambda x, w, b: EnsembleLinear.apply(x, w, b, x_mapped), (x, w, b))
    w1, b1 = leaves((3, 1, 2), (3, 1))
    assert gradcheck(lambda x, w, b: EnsembleLinear.apply(x, w, b, x_mapped), (x, w1, b1))


def test_vmapped_linear_without_the_fused_rule_still_equals_the_loop():
    # an unmapped bias with mapped weights, and float32 input with float64 weights, take the general path
    rlpipe.manual_seed(2)
    x, w, b = leaves((6, 3), (4, 5, 3), (5,))
    out = vmap(F.linear, (None, 0, None))(x, w, b)
    assert out.grad_fn.name() != "EnsembleLinearBackward0"
    assert rlpipe.allclose(out, rlpipe.stack([F.linear(x, w[e], b) for e in range(4)]), atol=1e-12)
    with pytest.raises(RuntimeError, match="same dtype, but got: float != double"):
        vmap(F.linear, (None, 0, 0))(x.float(), w, b.expand(4, 5))


def test_vmapped_linear_shape_mismatch_raises():
    x, w, b = leaves((6, 2), (4, 5, 3), (4, 5))
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(6x2 and 3x5\)"):
        vmap(F.linear, (None, 0, 0))(x, w, b)


def test_a_missing_method_is_a_runtime_error_naming_it_and_hasattr_says_false():
    def probe(x):
        assert not hasattr(x, "batch_size")  # how TensorDictModule tells a tensor from a TensorDict
        with pytest.raises(RuntimeError, match="vmap: no batching rule for 'Tensor.median'"):
            x.median()
        return x * 2
    assert rlpipe.equal(vmap(probe)(rlpipe.ones(3, 2)), rlpipe.full((3, 2), 2.0))


def test_named_tensors_walks_parameters_then_buffers_like_the_module_methods():
    from rlpipe import nn
    from rlpipe.func._functional_call import named_tensors
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, nn.BatchNorm1d(2), shared)
    for dedupe in (True, False):
        expected = [*net.named_parameters(remove_duplicate=dedupe), *net.named_buffers(remove_duplicate=dedupe)]
        got = list(named_tensors(net, remove_duplicate=dedupe))
        assert [n for n, _ in got] == [n for n, _ in expected]
        assert all(a is b for (_, a), (_, b) in zip(got, expected))


def test_stacked_states_stacks_each_parameter_and_splits_its_gradient_back():
    # three members, two parameters each (the second a buffer-like tensor without grad)
    weights = leaves((2, 3), (2, 3), (2, 3))
    counts = [rlpipe.tensor([i, i + 1]) for i in range(3)]
    stacked_w, stacked_n = StackedStates.apply(*weights, *counts, members=3)
    assert stacked_w.shape == (3, 2, 3) and stacked_n.shape == (3, 2)
    assert rlpipe.equal(stacked_w, rlpipe.stack(weights)) and rlpipe.equal(stacked_n, rlpipe.stack(counts))
    assert not stacked_n.requires_grad
    scale = rlpipe.arange(3, dtype=rlpipe.float64).reshape(3, 1, 1)
    grads = rlpipe.autograd.grad((stacked_w * scale).sum(), weights)
    for i, g in enumerate(grads):
        assert rlpipe.equal(g, rlpipe.full((2, 3), float(i), dtype=rlpipe.float64))


def test_stacked_states_gradcheck():
    tensors = leaves((2,), (2,), (3, 1), (3, 1))
    assert gradcheck(lambda *t: StackedStates.apply(*t, members=2), tensors)
