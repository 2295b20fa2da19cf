"""create_graph=True in the backward engine: .grad and autograd.grad results that can be differentiated
again, retain_graph's default, hooks, non-leaf inputs and grad_outputs on the graph, custom Functions,
the error for an op without a double backward, and autograd.functional's second-order helpers
(hessian, hvp, vhp, jacobian and vjp with create_graph) against hand-computed derivatives."""
import numpy as np
import pytest

import rlpipe
from rlpipe.autograd import Function, grad, once_differentiable
from rlpipe.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

X = np.array([0.5, -1.5, 2.0])


def x64(values=X, requires_grad=True):
    return rlpipe.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def test_grad_with_create_graph_gives_differentiable_gradients_to_any_order():
    x = x64()
    g1, = grad((x ** 4).sum(), x, create_graph=True)
    g2, = grad(g1.sum(), x, create_graph=True)
    g3, = grad(g2.sum(), x)
    np.testing.assert_allclose(g1.detach().numpy(), 4 * X ** 3)
    np.testing.assert_allclose(g2.detach().numpy(), 12 * X ** 2)
    np.testing.assert_allclose(g3.numpy(), 24 * X)
    assert g1.requires_grad and g1.grad_fn is not None and not g3.requires_grad


def test_backward_with_create_graph_leaves_a_grad_on_the_graph():
    x = x64()
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    gx = x.grad
    assert gx.requires_grad and gx.grad_fn is not None
    np.testing.assert_allclose(gx.detach().numpy(), 3 * X ** 2)
    g2, = grad(gx.sum(), x, retain_graph=True)
    np.testing.assert_allclose(g2.numpy(), 6 * X)
    gx.sum().backward()  # as in torch, accumulates into the same .grad tensor
    assert x.grad is gx
    np.testing.assert_allclose(x.grad.detach().numpy(), 3 * X ** 2 + 6 * X)


def test_create_graph_keeps_the_graph_by_default():
    x = x64()
    y = x.tanh().sum()
    grad(y, x, create_graph=True)
    again, = grad(y, x)  # torch: retain_graph defaults to create_graph
    np.testing.assert_allclose(again.numpy(), 1 - np.tanh(X) ** 2)


def test_create_graph_with_retain_graph_false_frees_the_nodes_the_new_graph_needs():
    x = x64()
    g, = grad(x.tanh().sum(), x, create_graph=True, retain_graph=False)  # tanh's gradient reads its output
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        grad(g.sum(), x)


def test_grad_outputs_and_non_leaf_inputs_stay_on_the_graph():
    x = x64()
    v = x64([1.0, 2.0, -1.0])
    h = x * x
    y = h.sin()
    gh, = grad(y, h, grad_outputs=v, create_graph=True)  # v * cos(h), a function of v and x
    dv, dx = grad(gh.sum(), (v, x))
    np.testing.assert_allclose(dv.numpy(), np.cos(X ** 2))
    np.testing.assert_allclose(dx.numpy(), -v.detach().numpy() * np.sin(X ** 2) * 2 * X)


def test_hooks_see_tensors_on_the_graph():
    """The hook multiplies by h, and runs again in the second pass (h is on the new graph): torch 2.13 gives
    the same values and hook calls."""
    x = x64()
    seen = []
    h = x * x
    h.register_hook(lambda g: seen.append(g.requires_grad) or g * h)  # a hook that makes the gradient depend on x
    g, = grad(h.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 2 * X ** 3)
    g2, = grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), [0.75, 24.75, 72.0])
    assert seen == [False, False]


class Cube(Function):
    """x**3 with a backward in Tensor ops, as users write them."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * g * x * x


class OnceCube(Cube):
    """The same, with its backward marked as not differentiable."""
    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * g * x * x


def test_a_custom_function_backward_is_recorded():
    x = x64()
    g, = grad(Cube.apply(x).sum(), x, create_graph=True)
    g2, = grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 6 * X)


def test_once_differentiable_refuses_create_graph_and_still_works_once():
    x = x64()
    y = OnceCube.apply(x).sum()
    with pytest.raises(RuntimeError, match="create_graph=True: OnceCubeBackward's backward is marked "
                                           "@once_differentiable"):
        grad(y, x, create_graph=True)
    g, = grad(y, x)
    np.testing.assert_allclose(g.numpy(), 3 * X ** 2)


def test_an_op_without_double_backward_raises_before_any_gradient_is_written():
    x = x64()
    w = x64([1.0, 1.0, 1.0])
    y = (x.cumprod(0) * w).sum()
    with pytest.raises(RuntimeError, match=r"create_graph=True: CumProd has no double backward in rlpipe yet "
                                           r"\(node CumProdBackward0\)"):
        y.backward(create_graph=True)
    assert x.grad is None and w.grad is None
    y.backward()  # the graph is intact: the plain backward still runs
    x0, x1, x2 = X
    np.testing.assert_allclose(x.grad.numpy(), [1 + x1 + x1 * x2, x0 + x0 * x2, x0 * x1])


def test_float32_gradients_of_gradients():
    x = rlpipe.tensor(X.astype(np.float32), requires_grad=True)
    g, = grad((x.exp() * x).sum(), x, create_graph=True)
    g2, = grad(g.sum(), x)
    assert g2.dtype == rlpipe.float32
    np.testing.assert_allclose(g2.numpy(), np.exp(X) * (X + 2), rtol=1e-6)


def cubic(x, y):
    """x0^2 y1 + x1 y0^3: every second derivative is easy to write by hand."""
    return x[0] ** 2 * y[1] + x[1] * y[0] ** 3


def cubic_hessian(x, y):
    (x0, x1), (y0, y1) = x, y
    return np.array([[2 * y1, 0, 0, 2 * x0],
                     [0, 0, 3 * y0 ** 2, 0],
                     [0, 3 * y0 ** 2, 6 * x1 * y0, 0],
                     [2 * x0, 0, 0, 0]])


def test_hessian_of_two_inputs_matches_the_hand_computed_one():
    x, y = np.array([1.5, -0.5]), np.array([2.0, 3.0])
    blocks = hessian(cubic, (x64(x, False), x64(y, False)))
    full = np.block([[blocks[0][0].numpy(), blocks[0][1].numpy()], [blocks[1][0].numpy(), blocks[1][1].numpy()]])
    np.testing.assert_allclose(full, cubic_hessian(x, y))
    assert not blocks[0][0].requires_grad


def test_hessian_of_one_input():
    h = hessian(lambda x: (x ** 3).sum() + x[0] * x[1], x64(requires_grad=False))
    np.testing.assert_allclose(h.numpy(), np.diag(6 * X) + np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]))


def test_hvp_and_vhp_are_the_hessian_times_v():
    x, y = np.array([1.5, -0.5]), np.array([2.0, 3.0])
    v = (x64([1.0, -2.0], False), x64([0.5, 1.0], False))
    expected = cubic_hessian(x, y) @ np.array([1.0, -2.0, 0.5, 1.0])
    for fn in (hvp, vhp):
        value, (px, py) = fn(cubic, (x64(x, False), x64(y, False)), v)
        assert value.item() == pytest.approx(1.5 ** 2 * 3.0 - 0.5 * 8.0)
        np.testing.assert_allclose(np.concatenate([px.numpy(), py.numpy()]), expected)
        assert not px.requires_grad


def test_hvp_with_create_graph_reaches_the_inputs():
    x = x64()
    _, p = hvp(lambda t: (t ** 4).sum(), x, x64([1.0, 1.0, 1.0], False), create_graph=True)
    np.testing.assert_allclose(p.detach().numpy(), 12 * X ** 2)
    d, = grad(p.sum(), x)
    np.testing.assert_allclose(d.numpy(), 24 * X)


def test_hvp_errors():
    with pytest.raises(RuntimeError, match=r"hvp: v has shapes \[\[2\]\] but the inputs have shapes \[\[3\]\]"):
        hvp(lambda t: (t ** 2).sum(), x64(), x64([1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"The Tensor returned by the function given to hvp should contain a "
                                           r"single element, got shape \[3\]"):
        hvp(lambda t: t ** 2, x64(), x64())
    with pytest.raises(RuntimeError, match="The function given to hessian should return a single Tensor, got 2"):
        hessian(lambda t: (t.sum(), t.sum()), x64())


def test_jacobian_vjp_and_jvp_with_create_graph():
    x = x64()
    jac = jacobian(lambda t: t ** 3, x, create_graph=True)
    np.testing.assert_allclose(jac.detach().numpy(), np.diag(3 * X ** 2))
    d, = grad(jac.sum(), x)
    np.testing.assert_allclose(d.numpy(), 6 * X)
    out, p = vjp(lambda t: t.exp(), x, x64([1.0, 2.0, 3.0], False), create_graph=True)
    assert out.requires_grad and p.requires_grad
    d, = grad(p.sum(), x)
    np.testing.assert_allclose(d.numpy(), np.exp(X) * [1.0, 2.0, 3.0])
    _, p = vjp(lambda t: t.exp(), x, x64([1.0, 2.0, 3.0], False))
    assert not p.requires_grad
    out, p = jvp(lambda t: t ** 3, x, x64([1.0, 2.0, 3.0], False), create_graph=True)
    np.testing.assert_allclose(p.detach().numpy(), 3 * X ** 2 * [1.0, 2.0, 3.0])
    d, = grad(p.sum() + out.sum(), x)
    np.testing.assert_allclose(d.numpy(), 6 * X * [1.0, 2.0, 3.0] + 3 * X ** 2)
    out, p = jvp(lambda t: t ** 3, x, x64([1.0, 2.0, 3.0], False))
    assert not (out.requires_grad or p.requires_grad)


def test_nested_func_grad_gives_higher_derivatives():
    """torch.func's grad composes: grad(grad(f)), under vmap too, and a MAML step inside grad (values as
    torch 2.13's torch.func gives them; each is also a hand-computable derivative of x**3 or a quadratic)."""
    from rlpipe.func import grad as fgrad, vmap
    cubes = lambda t: (t ** 3).sum()  # noqa: E731
    x = rlpipe.tensor([1.0, 2.0])
    np.testing.assert_allclose(fgrad(lambda t: fgrad(cubes)(t).sum())(x).numpy(), [6.0, 12.0])
    third = fgrad(lambda t: fgrad(lambda u: fgrad(cubes)(u).sum())(t).sum())(x)
    np.testing.assert_allclose(third.numpy(), [6.0, 6.0])
    batched = vmap(fgrad(lambda t: fgrad(cubes)(t).sum()))(rlpipe.tensor([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(batched.numpy(), [[6.0, 12.0], [18.0, 24.0]])

    def loss(w, inputs):
        return ((inputs * w).sum() - 1) ** 2

    def after_one_step(w):
        return loss(w - 0.1 * fgrad(loss)(w, rlpipe.tensor([1.0, 2.0])), rlpipe.tensor([2.0, 1.0]))
    np.testing.assert_allclose(fgrad(after_one_step)(rlpipe.tensor([0.5, -1.0])).numpy(), [2.4, -1.2], rtol=1e-6)


@pytest.mark.parametrize("activation", ["Tanh", "ReLU"])
def test_gradient_penalty_of_a_vmapped_ensemble_matches_its_members(activation):
    """An ensemble of critics run as one vmapped call (its fused EnsembleMLP node): the gradient penalty's
    gradients with respect to the stacked parameters equal each member's, computed one by one."""
    from rlpipe import nn
    from rlpipe.func import functional_call, stack_module_state, vmap
    rlpipe.manual_seed(0)
    act = getattr(nn, activation)
    members = [nn.Sequential(nn.Linear(3, 8), act(), nn.Linear(8, 8), act(), nn.Linear(8, 1)).double()
               for _ in range(3)]
    params, buffers = stack_module_state(members)
    x = rlpipe.randn(5, 3, dtype=rlpipe.float64, requires_grad=True)

    def penalty(scores, x):
        g, = grad(scores, x, create_graph=True)
        return ((g.norm(dim=1) - 1) ** 2).mean()

    scores = vmap(lambda p, b, x: functional_call(members[0], (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    assert type(scores.grad_fn).__name__ == "EnsembleMLP"
    stacked = grad(penalty(scores.sum(), x), list(params.values()), allow_unused=True)
    one_by_one = grad(penalty(sum(m(x).sum() for m in members), x), [p for m in members for p in m.parameters()],
                      allow_unused=True)
    n = len(params)
    for k, got in enumerate(stacked):
        if got is None:  # the last bias: the penalty does not depend on it
            assert all(one_by_one[i * n + k] is None for i in range(3))
            continue
        expected = np.stack([one_by_one[i * n + k].numpy() for i in range(3)])
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-14)


def test_several_outputs_and_backward_inputs_with_create_graph():
    x, y = x64(), x64([1.0, -1.0, 0.5])
    gx, = grad([(x ** 2).sum(), (x * y).sum()], x, create_graph=True)  # 2x + y
    d = grad(gx.sum(), (x, y))
    np.testing.assert_allclose(d[0].numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(d[1].numpy(), [1.0, 1.0, 1.0])
    (x ** 3 * y).sum().backward(inputs=[x], create_graph=True)  # only x gets .grad: 3 x^2 y, on the graph
    assert y.grad is None and x.grad.requires_grad
    np.testing.assert_allclose(grad(x.grad.sum(), y)[0].numpy(), 3 * X ** 2)
