"""Autograd: backward, autograd.grad, hooks, grad modes, version counters, custom Functions,
in-place ops on views, and multi-output ops.

Expected gradients come from hand derivation or from central finite differences of an
equivalent NumPy computation; rlpipe is never checked against itself.
"""
import numpy as np
import pytest

import rlpipe as r
from rlpipe.autograd import Function, gradcheck, GradcheckError
from rlpipe.autograd import grad_mode as _grad_mode


@pytest.fixture(autouse=True)
def restore_grad_mode():
    """A failing grad-mode test must not leave recording off for the tests after it."""
    yield
    r.set_grad_enabled(True)
    _grad_mode.state.inference = False  # inference mode off (no public switch outside a with block)


def numeric_grad(f, x, eps=1e-6):
    """d f / d x by central differences, where f maps a float64 NumPy array to a number."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        grad[i] = (f(plus) - f(minus)) / (2 * eps)
    return grad


def leaf(values):
    return r.tensor(values, dtype=r.float64, requires_grad=True)


# ---------------------------------------------------------------------------------------------
# backward
# ---------------------------------------------------------------------------------------------

def test_backward_of_a_scalar():
    """d/dx sum(3 x^2 + exp(x)) = 6x + exp(x)."""
    x = leaf([0.5, -1., 2.])
    (3 * x ** 2 + x.exp()).sum().backward()
    expected = 6 * np.array([0.5, -1., 2.]) + np.exp([0.5, -1., 2.])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
    assert x.grad.dtype is r.float64 and x.grad.shape == x.shape


def test_gradients_accumulate_across_backward_calls():
    x = leaf([1., 2.])
    (x * x).sum().backward()
    (3 * x).sum().backward()
    assert x.grad.tolist() == [2 * 1 + 3, 2 * 2 + 3]


def test_backward_with_an_explicit_gradient():
    """A non-scalar output takes the vector of a vector-Jacobian product."""
    x = leaf([1., 2.])
    (x * x).backward(gradient=r.tensor([1., 10.], dtype=r.float64))
    assert x.grad.tolist() == [2., 40.]


def test_backward_reaches_every_leaf():
    x, w = leaf([1., 2.]), leaf([3., 4.])
    (x * w).sum().backward()
    assert x.grad.tolist() == [3., 4.] and w.grad.tolist() == [1., 2.]


def test_non_scalar_backward_needs_a_gradient():
    x = leaf([1., 2.])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * x).backward()


def test_backward_gradient_must_match_the_output_shape():
    x = leaf([1., 2.])
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * x).backward(gradient=r.tensor([1., 2., 3.], dtype=r.float64))


def test_backward_of_a_tensor_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        r.tensor([1., 2.]).sum().backward()


def test_second_backward_through_a_freed_graph_raises():
    x = leaf([1., 2.])
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = leaf([1., 2.])
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1., 2.]), rtol=1e-12)


def test_autograd_backward_of_several_outputs():
    x = leaf([1., 2.])
    r.autograd.backward([(2 * x).sum(), (x * x).sum()])
    assert x.grad.tolist() == [2 + 2 * 1, 2 + 2 * 2]


# ---------------------------------------------------------------------------------------------
# autograd.grad
# ---------------------------------------------------------------------------------------------

def test_grad_returns_gradients_without_touching_dot_grad():
    """d/dx sum(x^2 w) = 2xw, d/dw = x^2."""
    x, w = leaf([1., 2.]), leaf([3., 4.])
    gx, gw = r.autograd.grad((x ** 2 * w).sum(), [x, w])
    assert gx.tolist() == [6., 16.] and gw.tolist() == [1., 4.]
    assert x.grad is None and w.grad is None


def test_grad_of_a_single_input_returns_a_one_tuple():
    x = leaf([1., 2.])
    out = r.autograd.grad((x * x).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1
    assert out[0].tolist() == [2., 4.]


def test_grad_with_grad_outputs():
    x = leaf([1., 2.])
    (g,) = r.autograd.grad(x * x, x, grad_outputs=r.tensor([1., 10.], dtype=r.float64))
    assert g.tolist() == [2., 40.]


def test_grad_with_respect_to_non_leaf_inputs():
    """With h = x^2 and out = sum(3h): d out/dh = 3, d out/dx = 6x."""
    x = leaf([1., 2.])
    h = x * x
    gh, gx = r.autograd.grad((3 * h).sum(), [h, x])
    assert gh.tolist() == [3., 3.] and gx.tolist() == [6., 12.]
    assert x.grad is None


def test_grad_allow_unused_returns_none():
    x, unused = leaf([1., 2.]), leaf([3., 4.])
    gx, gu = r.autograd.grad((x * x).sum(), [x, unused], allow_unused=True)
    assert gx.tolist() == [2., 4.] and gu is None


def test_grad_of_an_unused_input_raises_without_allow_unused():
    x, unused = leaf([1., 2.]), leaf([3., 4.])
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph. "
                                           "Set allow_unused=True if this is the desired behavior."):
        r.autograd.grad((x * x).sum(), [x, unused])


def test_grad_of_an_input_that_does_not_require_grad_raises():
    x = leaf([1., 2.])
    with pytest.raises(RuntimeError, match="does not require grad"):
        r.autograd.grad((x * x).sum(), [r.tensor([1., 2.])])


def test_grad_frees_the_graph_unless_retained():
    x = leaf([1., 2.])
    y = x.exp().sum()
    first = r.autograd.grad(y, x, retain_graph=True)[0].numpy().copy()
    np.testing.assert_allclose(first, np.exp([1., 2.]), rtol=1e-12)
    r.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        r.autograd.grad(y, x)


# ---------------------------------------------------------------------------------------------
# retain_grad and hooks
# ---------------------------------------------------------------------------------------------

def test_retain_grad_keeps_a_non_leaf_gradient():
    """y = 3x, z = sum(y^2): dz/dy = 2y, dz/dx = 18x."""
    x = leaf([1., 2.])
    y = 3 * x
    y.retain_grad()
    (y * y).sum().backward()
    assert y.grad.tolist() == [6., 12.]
    assert x.grad.tolist() == [18., 36.]


def test_retains_grad_flag():
    x = leaf([1., 2.])
    y = 3 * x
    assert x.retains_grad is False and y.retains_grad is False
    y.retain_grad()
    assert y.retains_grad is True


def test_non_leaf_grad_is_none_without_retain_grad():
    x = leaf([1., 2.])
    y = 3 * x
    y.sum().backward()
    assert y.grad is None


def test_retain_grad_needs_requires_grad():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        r.tensor([1., 2.]).retain_grad()


def test_leaf_hook_replaces_the_gradient():
    x = leaf([1., 2.])
    x.register_hook(lambda g: g * 10)
    (x * x).sum().backward()
    assert x.grad.tolist() == [20., 40.]


def test_leaf_hook_sees_the_total_gradient_once():
    """x * x sends two contributions to x; the hook gets their sum, once (and returning None keeps it)."""
    x = leaf([1., 2.])
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    (x * x).sum().backward()
    assert seen == [[2., 4.]] and x.grad.tolist() == [2., 4.]


def test_hooks_run_in_registration_order():
    """(1 * 2) + 1 = 3, where the reverse order would give (1 + 1) * 2 = 4."""
    x = leaf([1., 2.])
    x.register_hook(lambda g: g * 2)
    x.register_hook(lambda g: g + 1)
    x.sum().backward()
    assert x.grad.tolist() == [3., 3.]


def test_non_leaf_hook_changes_what_flows_upstream():
    """y = 3x, z = sum(y^2): the hook doubles dz/dy = 2y, so dx = 3 * 4y = 36x."""
    x = leaf([1., 2.])
    y = 3 * x
    y.register_hook(lambda g: g * 2)
    (y * y).sum().backward()
    assert x.grad.tolist() == [36., 72.]


def test_hook_handle_remove():
    x = leaf([1., 2.])
    handle = x.register_hook(lambda g: g * 10)
    handle.remove()
    handle.remove()  # removing twice is harmless
    x.sum().backward()
    assert x.grad.tolist() == [1., 1.]


def test_non_leaf_hook_handle_remove():
    x = leaf([1., 2.])
    y = 2 * x
    y.register_hook(lambda g: g * 10).remove()
    y.sum().backward()
    assert x.grad.tolist() == [2., 2.]


def test_hook_handle_as_context_manager():
    x = leaf([1., 2.])
    with x.register_hook(lambda g: g * 10):
        x.sum().backward()
    assert x.grad.tolist() == [10., 10.]
    x.grad = None
    x.sum().backward()
    assert x.grad.tolist() == [1., 1.]


def test_register_hook_needs_requires_grad():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        r.tensor([1., 2.]).register_hook(lambda g: g)


# ---------------------------------------------------------------------------------------------
# The graph: grad_fn, next_functions, is_leaf
# ---------------------------------------------------------------------------------------------

def test_grad_fn_name_and_leaf_status():
    x = leaf([1., 2.])
    y = x * 2
    assert x.grad_fn is None and x.is_leaf
    assert not y.is_leaf and y.requires_grad
    assert y.grad_fn.name() == "MulBackward0"
    assert x.exp().grad_fn.name() == "ExpBackward0"
    assert y.sum().grad_fn.name() == "SumBackward0"
    assert r.tensor([1.]).is_leaf


def test_next_functions_of_a_binary_op_with_a_constant():
    """x * 2: the leaf's AccumulateGrad, then (None, 0) for the constant."""
    x = leaf([1., 2.])
    (acc, nr), none_edge = (x * 2).grad_fn.next_functions
    assert acc.name() == "AccumulateGrad" and acc.variable is x and nr == 0
    assert none_edge == (None, 0)


def test_next_functions_has_one_entry_per_tensor_input():
    """sum's only input is a tensor: dim/keepdim/dtype arguments are no edges."""
    x, w = leaf([1., 2.]), leaf([3., 4.])
    out = (x * w).sum()
    (mul, nr), = out.grad_fn.next_functions
    assert mul.name() == "MulBackward0" and nr == 0
    (ax, _), (aw, _) = mul.next_functions
    assert ax.variable is x and aw.variable is w
    (exp, _), = x.exp().sum().grad_fn.next_functions
    assert exp.name() == "ExpBackward0"


def test_detached_and_no_grad_results_are_leaves():
    x = leaf([1., 2.])
    assert x.detach().is_leaf and not x.detach().requires_grad
    with r.no_grad():
        y = x * 2
    assert y.is_leaf and y.grad_fn is None and not y.requires_grad


# ---------------------------------------------------------------------------------------------
# Grad modes
# ---------------------------------------------------------------------------------------------

def test_no_grad_context():
    x = leaf([1., 2.])
    with r.no_grad():
        assert not r.is_grad_enabled()
        y = x * 2
    assert r.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_no_grad_decorator_with_and_without_parentheses():
    x = leaf([1., 2.])

    @r.no_grad
    def bare(t):
        return t * 2

    @r.no_grad()
    def called(t):
        return t * 2

    for f, name in [(bare, "bare"), (called, "called")]:
        assert not f(x).requires_grad
        assert f.__name__ == name
        assert r.is_grad_enabled()


def test_enable_grad_inside_no_grad():
    x = leaf([1., 2.])

    @r.enable_grad()
    def doubled(t):
        return t * 2

    with r.no_grad():
        with r.enable_grad():
            assert r.is_grad_enabled()
            assert (x * 2).requires_grad
        assert not r.is_grad_enabled()
        assert doubled(x).requires_grad
        assert not r.is_grad_enabled()


def test_set_grad_enabled_as_a_function():
    r.set_grad_enabled(False)
    assert not r.is_grad_enabled()
    r.set_grad_enabled(True)
    assert r.is_grad_enabled()


def test_set_grad_enabled_as_a_context_manager_restores_the_mode():
    x = leaf([1., 2.])
    with r.set_grad_enabled(False):
        assert not r.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert r.is_grad_enabled()
    with r.no_grad():
        with r.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not r.is_grad_enabled()


def test_set_grad_enabled_as_a_decorator():
    """Decorating must not switch the mode; calling switches it only for the call."""
    x = leaf([1., 2.])

    @r.set_grad_enabled(False)
    def doubled(t):
        return t * 2

    assert r.is_grad_enabled()
    assert not doubled(x).requires_grad
    assert r.is_grad_enabled()


def test_set_grad_enabled_needs_a_bool():
    with pytest.raises(TypeError, match="mode must be a bool"):
        r.set_grad_enabled("yes")


def test_inference_mode_context():
    x = leaf([1., 2.])
    with r.inference_mode():
        assert r.is_inference_mode_enabled() and not r.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert not r.is_inference_mode_enabled() and r.is_grad_enabled()
    with r.inference_mode(False):
        assert not r.is_inference_mode_enabled() and r.is_grad_enabled()


def test_inference_mode_decorator_with_parentheses():
    x = leaf([1., 2.])

    @r.inference_mode()
    def doubled(t):
        assert r.is_inference_mode_enabled()
        return t * 2

    assert r.is_grad_enabled() and not r.is_inference_mode_enabled()
    assert not doubled(x).requires_grad
    assert r.is_grad_enabled() and not r.is_inference_mode_enabled()


def test_inference_mode_decorator_without_parentheses():
    x = leaf([1., 2.])

    @r.inference_mode
    def doubled(t):
        return t * 2

    assert not doubled(x).requires_grad
    assert r.is_grad_enabled()


def test_grad_mode_is_restored_after_an_exception():
    with pytest.raises(ValueError):
        with r.no_grad():
            raise ValueError("boom")
    assert r.is_grad_enabled()


# ---------------------------------------------------------------------------------------------
# Version counter and in-place rules
# ---------------------------------------------------------------------------------------------

def test_in_place_ops_bump_the_version():
    t = r.tensor([1., 2.])
    assert t._version == 0
    t.add_(1)
    t.mul_(2)
    t[0] = 3.
    assert t._version == 3
    assert t.tolist() == [3., 6.]


def test_modifying_a_saved_tensor_breaks_backward():
    x = leaf([1., 2.])
    y = x.exp()  # exp saves its output for backward
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


IN_PLACE_ON_LEAF = {
    "add_": lambda t: t.add_(1),
    "mul_": lambda t: t.mul_(2),
    "zero_": lambda t: t.zero_(),
    "setitem": lambda t: t.__setitem__(0, 5.),
    "iadd": lambda t: t.__iadd__(1),
}


@pytest.mark.parametrize("op", IN_PLACE_ON_LEAF.values(), ids=IN_PLACE_ON_LEAF.keys())
def test_in_place_on_a_leaf_that_requires_grad_raises(op):
    x = leaf([1., 2.])
    with pytest.raises(RuntimeError, match=r"^a leaf Variable that requires grad is being used in an in-place "
                                           r"operation\.$"):
        op(x)
    assert x.tolist() == [1., 2.]


def test_in_place_on_a_view_of_a_leaf_raises():
    x = leaf([1., 2.])
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        x[:1].add_(1)


def test_in_place_update_of_a_leaf_under_no_grad():
    """The optimizer pattern: w -= lr * w.grad, then clear the gradient."""
    w = leaf([1., 2.])
    (w * w).sum().backward()
    version = w._version
    with r.no_grad():
        w.sub_(0.5 * w.grad)
        w.grad.zero_()
    assert w.tolist() == [0., 0.]
    assert w._version == version + 1
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    assert w.grad.tolist() == [0., 0.]
    (w + 1).sum().backward()
    assert w.grad.tolist() == [1., 1.]


def test_detach_shares_memory_and_version():
    x = leaf([1., 2.])
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 7.
    assert x.tolist() == [7., 2.]
    assert x._version == 1


def test_data_shares_memory():
    x = leaf([1., 2.])
    d = x.data
    assert isinstance(d, r.Tensor) and not d.requires_grad and d.is_leaf
    d[1] = 9.
    assert x.tolist() == [1., 9.]
    assert x.requires_grad


def test_requires_grad_on_an_integer_tensor_raises():
    match = "only Tensors of floating point and complex dtype can require gradients"
    with pytest.raises(RuntimeError, match=match):
        r.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match=match):
        r.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match=match):
        r.zeros(2, dtype=r.int64, requires_grad=True)


def test_setting_requires_grad_attribute_on_an_integer_tensor_raises():
    t = r.tensor([1, 2])
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype can require gradients"):
        t.requires_grad = True


def test_requires_grad_of_a_non_leaf_cannot_be_turned_off():
    y = leaf([1., 2.]) * 2
    match = "you can only change requires_grad flags of leaf variables"
    with pytest.raises(RuntimeError, match=match):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match=match):
        y.requires_grad = False
    assert y.requires_grad


def test_requires_grad_of_a_leaf_can_be_toggled():
    x = leaf([1., 2.])
    x.requires_grad_(False)
    assert not x.requires_grad
    assert x.requires_grad_() is x and x.requires_grad


# ---------------------------------------------------------------------------------------------
# Custom Functions
# ---------------------------------------------------------------------------------------------

class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


class ScaledProduct(Function):
    """a * b * scale, with a Python float scale; computes only the gradients asked for."""
    seen_needs_input_grad = None

    @staticmethod
    def forward(ctx, a, b, scale):
        assert isinstance(a, r.Tensor) and isinstance(b, r.Tensor)
        ctx.save_for_backward(a, b)
        ctx.scale = scale
        return a * b * scale

    @staticmethod
    def backward(ctx, grad):
        ScaledProduct.seen_needs_input_grad = ctx.needs_input_grad
        a, b = ctx.saved_tensors
        ga = grad * b * ctx.scale if ctx.needs_input_grad[0] else None
        gb = grad * a * ctx.scale if ctx.needs_input_grad[1] else None
        return ga, gb, None


class DoubleAndArgmax(Function):
    """2x and the index of x's largest element, which is not differentiable."""

    @staticmethod
    def forward(ctx, x):
        index = x.argmax()
        ctx.mark_non_differentiable(index)
        return 2 * x, index

    @staticmethod
    def backward(ctx, grad, grad_index):
        return 2 * grad


class ProductAndSum(Function):
    """Two differentiable outputs: a * b and a + b."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b, a + b

    @staticmethod
    def backward(ctx, grad_product, grad_sum):
        a, b = ctx.saved_tensors
        return grad_product * b + grad_sum, grad_product * a + grad_sum


class WrongSquare(Function):
    """x^2 with a deliberately wrong backward (x instead of 2x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x


class TooFewGrads(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, grad):
        return grad


class TooManyGrads(Function):
    @staticmethod
    def forward(ctx, a):
        return 2 * a

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad, grad


class TrailingNoneGrads(Function):
    @staticmethod
    def forward(ctx, a):
        return 2 * a

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad, None


def test_custom_function_forward_and_backward():
    x = leaf([1., 2.])
    y = Cube.apply(x)
    assert y.tolist() == [1., 8.]
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [3., 12.]


def test_custom_function_node_is_named_like_torch():
    """torch names a custom Function's node <ClassName>Backward (no index suffix)."""
    assert Cube.apply(leaf([1.])).grad_fn.name() == "CubeBackward"


def test_custom_function_passes_gradcheck():
    assert gradcheck(Cube.apply, (leaf([0.5, -1.5, 2.]),))


def test_custom_function_without_grad_records_nothing():
    y = Cube.apply(r.tensor([2.], dtype=r.float64))
    assert y.tolist() == [8.] and not y.requires_grad and y.grad_fn is None


def test_needs_input_grad_lists_every_forward_argument():
    a, b = leaf([1., 2.]), r.tensor([3., 4.], dtype=r.float64)
    ScaledProduct.apply(a, b, 2.5).sum().backward()
    assert ScaledProduct.seen_needs_input_grad == (True, False, False)
    assert a.grad.tolist() == [7.5, 10.] and b.grad is None


def test_custom_function_with_a_non_tensor_argument_passes_gradcheck():
    a, b = leaf([1., -2.]), leaf([3., 0.5])
    assert gradcheck(lambda p, q: ScaledProduct.apply(p, q, 2.5), (a, b))


def test_mark_non_differentiable():
    x = leaf([1., 5., 2.])
    doubled, index = DoubleAndArgmax.apply(x)
    assert doubled.requires_grad
    assert index.item() == 1 and not index.requires_grad and index.grad_fn is None
    doubled.sum().backward()
    assert x.grad.tolist() == [2., 2., 2.]


def test_multiple_outputs_pass_gradcheck():
    assert gradcheck(ProductAndSum.apply, (leaf([1., 2.]), leaf([3., -4.])))


def test_multiple_outputs_with_only_one_used():
    """Only a*b is used: the unused output's gradient arrives as zeros."""
    a, b = leaf([1., 2.]), leaf([3., 4.])
    product, _ = ProductAndSum.apply(a, b)
    product.sum().backward()
    assert a.grad.tolist() == [3., 4.] and b.grad.tolist() == [1., 2.]


def test_backward_returning_too_few_gradients_raises():
    a, b = leaf([1.]), leaf([2.])
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients \(expected 2, got 1\)"):
        TooFewGrads.apply(a, b).sum().backward()


def test_backward_returning_too_many_gradients_raises():
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients \(expected 1, got 2\)"):
        TooManyGrads.apply(leaf([1.])).sum().backward()


def test_backward_may_return_extra_trailing_nones():
    a = leaf([1., 2.])
    TrailingNoneGrads.apply(a).sum().backward()
    assert a.grad.tolist() == [2., 2.]


def test_custom_function_saved_tensors_are_freed_after_backward():
    x = leaf([1., 2.])
    y = Cube.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        y.backward()


def test_gradcheck_detects_a_wrong_backward():
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(WrongSquare.apply, (leaf([1., 2.]),))
    assert issubclass(GradcheckError, RuntimeError)


def test_gradcheck_can_return_false_instead_of_raising():
    assert gradcheck(WrongSquare.apply, (leaf([1., 2.]),), raise_exception=False) is False


# ---------------------------------------------------------------------------------------------
# In-place ops on views of non-leaf tensors (checked against NumPy finite differences)
# ---------------------------------------------------------------------------------------------

def check_against_numpy(build, reference, x0):
    """build(x) -> scalar rlpipe loss; reference(ndarray) -> the same loss computed out of place."""
    x = leaf(x0)
    loss = build(x)
    np.testing.assert_allclose(loss.item(), reference(np.array(x0, dtype=np.float64)), rtol=1e-12)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), numeric_grad(reference, x0), rtol=1e-6, atol=1e-6)


WEIGHTS = np.array([1., 10., 100., 1000.])


def test_in_place_mul_on_a_slice():
    def build(x):
        y = x * 2
        y[1:3].mul_(x[:2])
        return (y * r.tensor(WEIGHTS, dtype=r.float64)).sum()

    def reference(x):
        y = 2 * x
        y = np.concatenate([y[:1], y[1:3] * x[:2], y[3:]])
        return (y * WEIGHTS).sum()

    check_against_numpy(build, reference, [1., 2., 3., 4.])


def test_zeroing_a_row_view():
    def build(x):
        y = x * 3
        y[0].zero_()
        return (y * y).sum()

    def reference(x):
        y = 3 * x
        y = np.stack([np.zeros_like(y[0]), y[1]])
        return (y * y).sum()

    check_against_numpy(build, reference, [[1., 2.], [3., 4.]])


def test_setitem_with_a_value_that_depends_on_the_input():
    def build(x):
        y = x * 1
        y[0] = x[2] * 5
        return (y ** 2).sum()

    def reference(x):
        y = np.array([x[2] * 5, x[1], x[2]])
        return (y ** 2).sum()

    check_against_numpy(build, reference, [1., 2., 3.])


def test_in_place_on_a_transposed_view():
    def build(x):
        y = x.exp()
        y = y * 1  # exp saves its output; modify a copy
        y.t()[0].mul_(x[:, 1])  # column 0 of y times column 1 of x
        return (y ** 2).sum()

    def reference(x):
        y = np.exp(x)
        y = np.stack([y[:, 0] * x[:, 1], y[:, 1]], axis=1)
        return (y ** 2).sum()

    check_against_numpy(build, reference, [[0.5, 1.], [-1., 2.]])


def test_in_place_on_a_view_of_a_view():
    def build(x):
        y = x * 2
        y[1][1:].add_(x[0, :2] ** 2)
        return (y ** 2).sum()

    def reference(x):
        y = 2 * x
        y = np.stack([y[0], np.concatenate([y[1, :1], y[1, 1:] + x[0, :2] ** 2])])
        return (y ** 2).sum()

    check_against_numpy(build, reference, [[1., 2., 3.], [4., 5., 6.]])


def test_view_taken_before_the_base_is_modified_in_place():
    """The view shares memory with the base, so its gradient must follow the new values."""
    def build(x):
        y = x * 2
        v = y[:2]
        y.mul_(x)
        return (v * r.tensor([1., 10.], dtype=r.float64)).sum()

    def reference(x):
        y = 2 * x * x
        return (y[:2] * np.array([1., 10.])).sum()

    check_against_numpy(build, reference, [1., 2., 3.])


def test_sibling_view_sees_an_in_place_update():
    """v1 and v2 overlap at y[1]: modifying v1 changes what v2 differentiates."""
    def build(x):
        y = x * 2
        v1, v2 = y[:2], y[1:]
        v1.mul_(x[:2])
        return (v2 * r.tensor([1., 10.], dtype=r.float64)).sum()

    def reference(x):
        y = np.array([2 * x[0] * x[0], 2 * x[1] * x[1], 2 * x[2]])
        return (y[1:] * np.array([1., 10.])).sum()

    check_against_numpy(build, reference, [1., 2., 3.])


# ---------------------------------------------------------------------------------------------
# Multi-output ops with only some outputs used
# ---------------------------------------------------------------------------------------------

def test_split_with_one_piece_used():
    x = leaf([1., 2., 3., 4.])
    first, _ = x.split(2)
    (3 * first).sum().backward()
    assert x.grad.tolist() == [3., 3., 0., 0.]


def test_split_pieces_used_with_different_weights():
    x = leaf([1., 2., 3., 4., 5.])
    a, b, c = x.split([2, 1, 2])
    (a.sum() + 10 * c.sum()).backward()
    assert x.grad.tolist() == [1., 1., 0., 10., 10.]


def test_unbind_with_one_output_used():
    """d/dx sum(x[:, 1]^2) = 2x in column 1, 0 elsewhere."""
    x = leaf([[1., 2.], [3., 4.]])
    _, second = x.unbind(1)
    (second ** 2).sum().backward()
    assert x.grad.tolist() == [[0., 4.], [0., 8.]]


def test_chunk_with_one_chunk_used_twice():
    x = leaf([1., 2., 3.])
    _, middle, _ = x.chunk(3)
    (middle * middle + middle).sum().backward()
    assert x.grad.tolist() == [0., 2 * 2. + 1, 0.]


def test_max_along_dim_values_only():
    x = leaf([[1., 5.], [7., 4.]])
    values, indices = x.max(dim=1)
    assert values.tolist() == [5., 7.] and indices.tolist() == [1, 0]
    assert not indices.requires_grad and indices.dtype is r.int64
    values.sum().backward()
    assert x.grad.tolist() == [[0., 1.], [1., 0.]]


def test_max_namedtuple_fields_and_keepdim():
    x = leaf([[1., 5.], [7., 4.]])
    result = x.max(dim=0, keepdim=True)
    assert result.values.shape == (1, 2) and result.indices.tolist() == [[1, 0]]
    (result.values * r.tensor([[2., 3.]], dtype=r.float64)).sum().backward()
    assert x.grad.tolist() == [[0., 3.], [2., 0.]]


def test_min_along_dim_values_only():
    x = leaf([[1., 5.], [7., 4.]])
    x.min(dim=1).values.sum().backward()
    assert x.grad.tolist() == [[1., 0.], [0., 1.]]


def test_a_node_that_gets_no_gradient_still_lets_its_inputs_run():
    """p gets no gradient (Blocker's backward returns None), so its backward never runs, yet h, which
    also feeds p, must still run once the add has handed it its gradient: d(out)/dw = 3."""
    class Blocker(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return None

    w = r.tensor([1.0, 2.0], requires_grad=True)
    h = w * 3
    p = h * 5
    ran = []
    p.grad_fn.register_prehook(lambda grads: ran.append("p"))
    h.grad_fn.register_prehook(lambda grads: ran.append("h"))
    (Blocker.apply(p) + h).sum().backward()
    assert ran == ["h"]
    assert w.grad.tolist() == [3.0, 3.0]


def test_inplace_on_a_single_element_of_a_tracked_tensor_is_recorded():
    """``x[0] *= 1`` on a non-leaf: NumPy's ``a[0]`` is a scalar copy, so the element is written
    through a 0-d view; values, gradients and grad_fn as torch 2.13 gives them (measured)."""
    x0 = r.rand(10, requires_grad=True)
    x = x0.clone()
    x[0] *= 3
    x[1] += x[2]
    assert x.grad_fn is not None
    x.sum().backward()
    assert x0.grad.tolist() == [3.0, 1.0, 2.0] + [1.0] * 7

    def f(y0):
        y = y0 * 1
        y[1, 2] *= 3
        y[2][3] += 2
        y[0, 0] *= y0[2, 2]
        y[1][0] *= 5
        y[2, 1] = y0[0, 1] ** 2
        return y

    y0 = r.arange(12, dtype=r.float64).reshape(3, 4).requires_grad_()
    out = f(y0)
    assert out.tolist() == [[0.0, 1.0, 2.0, 3.0], [20.0, 5.0, 18.0, 7.0], [8.0, 1.0, 10.0, 13.0]]
    (out * r.arange(12, dtype=r.float64).reshape(3, 4)).sum().backward()
    assert y0.grad.tolist() == [[0.0, 19.0, 2.0, 3.0], [20.0, 5.0, 18.0, 7.0], [8.0, 0.0, 10.0, 11.0]]
    assert r.autograd.gradcheck(f, (y0.detach().requires_grad_(),))


def test_inplace_on_an_element_of_a_leaf_that_requires_grad_raises():
    x = r.rand(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation"):
        x[0] *= 2
    assert x.grad_fn is None and x.tolist() == x.detach().tolist()
