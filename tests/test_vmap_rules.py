"""vmap batching rules and errors added for PyTorch's test_vmap.py (run through tools/peer_shim.py): each
checked against the loop over samples (the truth for vmap) or against torch's error text."""
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe.func import vmap


def loop(f, *args, in_dims=0):
    """f on each sample, stacked."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    return rlpipe.stack([f(*[a if d is None else a.select(d, i) for a, d in zip(args, dims)]) for i in range(size)])


def close(a, b):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert rlpipe.allclose(a, b, atol=1e-6, equal_nan=True), (a, b)


def test_inplace_ops_write_into_each_sample():
    x, y = rlpipe.randn(4, 3), rlpipe.randn(4, 3)
    expected = x.abs() + y
    out = vmap(lambda a, b: a.abs_().add_(b))(x, y)
    close(out, expected)
    close(x, expected)  # written in place
    w = rlpipe.randn(4, 3)
    close(vmap(rlpipe.Tensor.clamp_min_, (0, None))(w.clone(), rlpipe.zeros(3)), w.clamp_min(0))
    with pytest.raises(RuntimeError, match=r"add_\(self, \*extra_args\) is not possible because there exists a "
                                           r"Tensor `other`"):
        vmap(lambda a: vmap(lambda b: a.add_(b))(y))(x)  # a is mapped by the outer vmap only


def test_item_and_argument_errors_say_what_torch_says():
    x = rlpipe.randn(3)
    with pytest.raises(RuntimeError, match=r"calling .item\(\) on a Tensor"):
        vmap(lambda a: a.item())(x)
    with pytest.raises(ValueError, match="got no inputs"):
        vmap(lambda: x)()
    with pytest.raises(ValueError, match=r"expected `in_dims` to be int or a \(potentially nested\) tuple matching "
                                         r"the structure of inputs, got: <class 'list'>"):
        vmap(rlpipe.mul, [0, 0])(x, x)
    with pytest.raises(ValueError, match="out_dims must be an int, None or a python collection of ints"):
        vmap(lambda a: a, out_dims="lol")(x)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        vmap(lambda z: z[0] + z[1], in_dims=((0, 0),))([x, x])  # a list is not a tuple
    with pytest.raises(ValueError, match=r"must only return Tensors, got type <class 'float'>"):
        vmap(lambda a: 3.14)(x)
    with pytest.raises(ValueError, match="Expected at least one Tensor to vmap over"):
        vmap(lambda a: a, (None,))(1)
    with pytest.raises(RuntimeError, match=r"Shape mismatch: Got incorrect dims for mm\(a, b\). a has dim 1 and b "
                                           r"has dim 2, but expected them to have dim 2 and dim 2"):
        vmap(lambda a, b: a.mm(b))(rlpipe.randn(3, 2), rlpipe.randn(3, 2, 2))
    m = rlpipe.randn(2, 3)
    close(vmap(lambda a: a, out_dims=(1,))(m), m.t())  # a 1-tuple for a single output


def test_reductions_and_transpose_of_a_0d_sample():
    x = rlpipe.randn(5)
    close(vmap(lambda a: a.sum(0))(x), x)
    close(vmap(lambda a: rlpipe.mean(a, -1))(x), x)
    assert vmap(lambda a: a.transpose(0, -1))(x) is x  # torch returns the input itself
    with pytest.raises(IndexError, match="Dimension out of range"):
        vmap(lambda a: a.sum(1))(x)


def test_squeeze_is_a_view_also_of_an_empty_sample():
    x = rlpipe.rand(3, 0, 1, 5, 1)
    out = vmap(rlpipe.squeeze)(x)
    assert out.shape == (3, 0, 5) and out._base is x
    y = rlpipe.rand(3, 1, 4, 1)
    out = vmap(lambda a: rlpipe.squeeze(a, dim=-1))(y)
    assert out.shape == (3, 1, 4) and out._base is y


def test_cat_takes_a_1d_empty_sample_as_empty():
    a, b = rlpipe.rand(2, 5), rlpipe.rand(4, 0)
    op = lambda p, q: rlpipe.cat([p, q], 1)  # noqa: E731
    close(vmap(op, (None, 0))(a, b), loop(op, a, b, in_dims=(None, 0)))
    out = vmap(op, (None, 0))(a.requires_grad_(), b)
    assert out.requires_grad


def test_to_another_tensor_takes_its_dtype_only():
    out = vmap(lambda t, o: t.to(o), (0, None))(rlpipe.rand(7), rlpipe.randn(7, dtype=rlpipe.float64))
    assert out.shape == (7,) and out.dtype == rlpipe.float64


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_per_sample(reduction):
    x, t = rlpipe.randn(3, 4, 5).log_softmax(-1), rlpipe.randint(0, 5, (3, 4))
    t[1, 2] = -100  # ignored
    weight = rlpipe.rand(5) + 0.5
    op = lambda a, b: F.nll_loss(a, b, weight, reduction=reduction)  # noqa: E731
    close(vmap(op)(x, t), loop(op, x, t))
    close(vmap(op, (0, None))(x, t[0]), loop(op, x, t[0], in_dims=(0, None)))
    with pytest.raises(RuntimeError, match="no batching rule for 'nll_loss'"):
        vmap(lambda a, b: F.nll_loss(a, b, size_average=True))(x, t)


def test_chunks_with_same_randomness_draw_the_same_numbers():
    x = rlpipe.randn(6, 3)
    f = lambda a: a + rlpipe.rand_like(a)  # noqa: E731
    state = rlpipe.get_rng_state()
    whole = vmap(f, randomness="same")(x)
    rlpipe.set_rng_state(state)
    close(vmap(f, randomness="same", chunk_size=4)(x), whole)


def test_public_functions_reach_the_rules():
    x, y = rlpipe.randn(4, 3), rlpipe.randn(4, 3)
    for op in (rlpipe.floor, rlpipe.sign, rlpipe.isnan, rlpipe.log2, lambda a: rlpipe.reshape(a, (3, 1)),
               lambda a: rlpipe.select(a, 0, 1), lambda a: rlpipe.clamp_min(rlpipe.zeros(3), a)):
        close(vmap(op)(x), loop(op, x))
    for op in (rlpipe.eq, rlpipe.gt, rlpipe.le):
        close(vmap(op)(x, y), loop(op, x, y))


def test_diagonal_is_a_writable_view_with_gradients_and_a_batching_rule():
    import numpy as np
    x = rlpipe.arange(24.0).reshape(2, 3, 4)
    for offset, dim1, dim2 in [(0, 0, 1), (1, 1, 2), (-1, 0, 2), (0, -1, -2), (5, 1, 2)]:
        expected = np.diagonal(x.numpy(), offset, dim1, dim2)
        assert np.array_equal(rlpipe.diagonal(x, offset, dim1, dim2).numpy(), expected)
    m = rlpipe.ones(3, 3)
    m.diagonal().zero_()  # written through, as torch's view
    assert rlpipe.equal(m, 1 - rlpipe.eye(3))
    w = rlpipe.randn(3, 4, dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda a: a.diagonal(1).sin(), (w,))
    z = rlpipe.randn(5, 3, 4)
    op = lambda a: a.diagonal(-1)  # noqa: E731
    close(vmap(op)(z), loop(op, z))
    close(vmap(op, in_dims=2)(z), loop(op, z, in_dims=2))
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 1, -2"):
        x.diagonal(0, 1, -2)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_new_rules_on_cuda():
    m = rlpipe.randn(2, 3, 3)
    close(vmap(rlpipe.diagonal)(m.cuda()).cpu(), loop(rlpipe.diagonal, m))
    x, t = rlpipe.randn(3, 4, 5).log_softmax(-1), rlpipe.randint(0, 5, (3, 4))
    close(vmap(F.nll_loss)(x.cuda(), t.cuda()).cpu(), loop(F.nll_loss, x, t))
    y = rlpipe.randn(4, 3)
    close(vmap(lambda a: a.abs_().diagonal(0, 0, -1) if a.ndim > 1 else a.abs_())(y.cuda()).cpu(), y.abs())


def test_unbound_tensor_view_and_view_as_on_a_batched_tensor():
    x = rlpipe.randn(4, 10)
    close(vmap(rlpipe.Tensor.view, (0, None))(x, [2, 5]), x.reshape(4, 2, 5))
    other = rlpipe.zeros(5, 2)
    close(vmap(rlpipe.Tensor.view_as, (0, None))(x, other), x.reshape(4, 5, 2))


def test_view_of_a_sample_whose_layout_needs_a_copy_raises_as_outside_vmap():
    x = rlpipe.randn(2, 4, 5)  # mapped over dim 1: each sample [2, 5] spans two separate runs of memory
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        vmap(rlpipe.Tensor.view, (1, None))(x, [10])
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x[:, 0].view(10)
    close(vmap(lambda s: s.reshape(10), 1)(x), loop(lambda s: s.reshape(10), x, in_dims=1))


def test_copysign_values_and_gradients_as_recorded_from_torch():
    # torch 2.13: copysign([1, -2, 0, -0, 3], [-1, 2, -1, 1, 0]) and its gradients for ones
    x = rlpipe.tensor([1.0, -2.0, 0.0, -0.0, 3.0], requires_grad=True)
    y = rlpipe.tensor([-1.0, 2.0, -1.0, 1.0, 0.0], requires_grad=True)
    out = rlpipe.copysign(x, y)
    assert out.tolist() == [-1.0, 2.0, -0.0, 0.0, 3.0]
    assert [str(v) for v in out.tolist()] == ["-1.0", "2.0", "-0.0", "0.0", "3.0"]
    out.backward(rlpipe.ones(5))
    assert x.grad.tolist() == [-1.0, -1.0, 0.0, 0.0, 1.0] and y.grad.tolist() == [0.0] * 5
    ints = rlpipe.copysign(rlpipe.tensor([1, 2]), -1)  # integers give the default float dtype
    assert ints.dtype == rlpipe.float32 and ints.tolist() == [-1.0, -2.0]


def test_copysign_gradcheck_and_under_vmap():
    x = rlpipe.tensor([[0.5, -1.5, 2.0]], dtype=rlpipe.float64, requires_grad=True)
    y = rlpipe.tensor([[-1.0], [3.0]], dtype=rlpipe.float64)
    assert rlpipe.autograd.gradcheck(lambda a: rlpipe.copysign(a, y), (x,))
    a, b = rlpipe.randn(4, 3), rlpipe.randn(3, 4)
    close(vmap(rlpipe.copysign, (0, 1))(a, b), loop(rlpipe.copysign, a, b, in_dims=(0, 1)))


def test_mv_values_and_torch_errors():
    assert rlpipe.mv(rlpipe.arange(6.0).reshape(2, 3), rlpipe.tensor([1.0, 2.0, 3.0])).tolist() == [8.0, 26.0]
    with pytest.raises(RuntimeError, match=r"vector \+ matrix @ vector expected, got 1, 1, 1"):
        rlpipe.mv(rlpipe.ones(2), rlpipe.ones(2))
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(2\)"):
        rlpipe.mv(rlpipe.ones(2, 3), rlpipe.ones(2))
    m, v = rlpipe.randn(5, 2, 3), rlpipe.randn(3)
    close(vmap(rlpipe.mv, (0, None))(m, v), loop(rlpipe.mv, m, v, in_dims=(0, None)))


def test_index_select_by_a_shared_or_a_per_sample_index():
    x = rlpipe.randn(4, 3, 5)
    shared = rlpipe.tensor([4, 0, 4])
    close(vmap(lambda v: v.index_select(1, shared))(x), loop(lambda v: v.index_select(1, shared), x))
    rows = rlpipe.tensor([2, 0])
    close(vmap(lambda v: rlpipe.index_select(v, -2, rows))(x), loop(lambda v: v.index_select(0, rows), x))
    own = rlpipe.tensor([[0, 1], [2, 2], [1, 0], [0, 0]])
    close(vmap(lambda v, i: v.index_select(0, i))(x, own), loop(lambda v, i: v.index_select(0, i), x, own))
    close(vmap(lambda i: x[0].index_select(1, i))(own), loop(lambda i: x[0].index_select(1, i), own))


@pytest.mark.parametrize("activation", ["elu", "selu", "celu", "silu", "mish", "hardsigmoid", "hardswish",
                                        "hardtanh"])
def test_nn_functional_activations_have_batching_rules(activation):
    """F.elu and the like reach their rules (they once raised 'needs at least one Tensor argument' under vmap)."""
    fn = getattr(F, activation)
    x = rlpipe.randn(4, 3, 5, dtype=rlpipe.float64) * 3
    close(vmap(fn)(x), loop(fn, x))
    close(vmap(lambda a: fn(a, inplace=True))(x.clone()), fn(x))


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_in_an_ensemble_matches_the_loop_values_and_gradients(affine):
    """An ensemble whose members each hold a LayerNorm (batched weight and bias), against the members one by one."""
    from rlpipe import nn
    from rlpipe.func import functional_call
    from rlpipe.tensordict import TensorDict

    def member():
        return nn.Sequential(nn.Linear(3, 6), nn.LayerNorm(6, elementwise_affine=affine), nn.ELU(), nn.Linear(6, 1))

    rlpipe.manual_seed(0)
    members, base = [member().double() for _ in range(4)], member().double()
    for m in members:  # weights away from their ones/zeros initialisation, so that a wrong pairing shows
        for p in m.parameters():
            p.data.copy_(rlpipe.randn(p.shape, dtype=rlpipe.float64))
    params = TensorDict.from_modules(*members).apply(lambda p: p.detach().requires_grad_())
    x = rlpipe.randn(7, 3, dtype=rlpipe.float64)
    out = vmap(lambda p, a: functional_call(base, p, (a,)), (0, None))(params, x)
    expected = rlpipe.stack([m(x) for m in members])
    close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    names = [name for name, _ in base.named_parameters()]
    assert len(names) == (6 if affine else 4)
    for name in names:
        stacked = rlpipe.stack([dict(m.named_parameters())[name].grad for m in members])
        assert rlpipe.allclose(params[tuple(name.split("."))].grad, stacked, atol=1e-10), name


def test_layer_norm_of_a_shared_input_under_per_sample_weights_and_of_batched_inputs():
    x, w, b = rlpipe.randn(2, 5), rlpipe.randn(4, 5), rlpipe.randn(4, 5)

    def shared(wi, bi):
        return F.layer_norm(x, (5,), wi, bi)

    def over_two_dims(a):
        return F.layer_norm(a, (2, 5), None, None, 1e-3)

    def shifted(a, bi):
        return F.layer_norm(a, (5,), bias=bi)

    xs = rlpipe.randn(4, 2, 5)
    close(vmap(shared)(w, b), loop(shared, w, b))
    close(vmap(over_two_dims)(xs), loop(over_two_dims, xs))
    close(vmap(shifted)(xs, b), loop(shifted, xs, b))


def test_a_samples_0d_tensor_promotes_as_a_0d_tensor():
    """Per sample, y is a 0-dim float64 tensor: it does not raise a float32 vector to float64 (torch's rule; the
    batched value has a dim, which NumPy's promotion would count), while two 0-dim samples promote as usual."""
    x, y, i = rlpipe.randn(3, 2), rlpipe.randn(3, dtype=rlpipe.float64), rlpipe.arange(3)
    for f, args in ((rlpipe.add, (x, y)), (rlpipe.mul, (y, x)), (lambda a, b: a - b, (x, i)),
                    (lambda a, b: a / b, (i, x)), (rlpipe.add, (y, rlpipe.randn(3)))):
        out, expected = vmap(f)(*args), loop(f, *args)
        assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
        close(out, expected)
    assert vmap(rlpipe.add)(x, y).dtype == rlpipe.float32 and vmap(rlpipe.add)(y, x[:, 0]).dtype == rlpipe.float64
