"""Ops that PyTorch tutorials and torchrl tutorials call, found by running them through ``tools/peer_shim.py``:
``nn.AdaptiveAvgPool2d`` (torchrl's dqn_with_rnn tutorial) and ``torch.cross`` (PyTorch's tensors tutorial).
Expected values were recorded from torch 2.13.0."""
import numpy as np
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe import nn

# F.adaptive_avg_pool2d(arange(35).reshape(1, 1, 5, 7) / 7, (3, 4)) in torch 2.13 (uneven, overlapping bins)
POOLED_3x4 = [[0.5714286, 0.7857143, 1.0714287, 1.2857143],
              [2.0714285, 2.2857144, 2.5714285, 2.7857141],
              [3.5714283, 3.7857141, 4.0714283, 4.2857141]]
# the gradient of (pooled * arange(12).reshape(3, 4)).sum() with respect to the input
POOLED_GRAD = [[0.0, 0.1666667, 0.1666667, 0.5, 0.3333333, 1.0833334, 0.75],
               [0.6666667, 1.3888888, 0.7222222, 1.7222223, 1.0, 2.9166665, 1.9166666],
               [0.6666667, 1.2222222, 0.5555555, 1.2222222, 0.6666667, 1.8333333, 1.1666666],
               [2.6666667, 4.7222223, 2.0555556, 4.3888888, 2.3333333, 6.25, 3.9166665],
               [2.0, 3.5, 1.5, 3.1666665, 1.6666666, 4.4166665, 2.75]]
# F.adaptive_avg_pool2d(x[0], (None, 2)): rows kept, 7 columns into 2 bins of 4
POOLED_NONE_2 = [[0.2142857, 0.6428571], [1.2142856, 1.6428572], [2.2142859, 2.6428571],
                 [3.2142859, 3.6428571], [4.2142854, 4.6428571]]


def _ramp():
    return (rlpipe.arange(35.0) / 7).reshape(1, 1, 5, 7)


def test_adaptive_avg_pool2d_uneven_bins_and_gradient():
    x = _ramp().requires_grad_()
    y = F.adaptive_avg_pool2d(x, (3, 4))
    np.testing.assert_allclose(y.detach().numpy()[0, 0], POOLED_3x4, rtol=1e-6)
    (y * rlpipe.arange(12.0).reshape(1, 1, 3, 4)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0, 0], POOLED_GRAD, rtol=1e-6)


def test_adaptive_avg_pool2d_none_keeps_a_size_and_unbatched_input():
    np.testing.assert_allclose(F.adaptive_avg_pool2d(_ramp()[0], (None, 2)).numpy()[0], POOLED_NONE_2, rtol=1e-6)


def test_adaptive_avg_pool2d_module_is_global_pooling_at_1():
    pool = nn.AdaptiveAvgPool2d((1, 1))
    out = pool(_ramp())
    assert out.shape == (1, 1, 1, 1)
    assert out.item() == pytest.approx(2.4285714626)  # torch 2.13
    assert repr(nn.AdaptiveAvgPool2d(2)) == "AdaptiveAvgPool2d(output_size=2)"


def test_adaptive_avg_pool2d_gradcheck_float64():
    x = rlpipe.randn(2, 3, 5, 6, dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda t: F.adaptive_avg_pool2d(t, (2, 4)), (x,))


@pytest.mark.parametrize("args, error, message", [
    ((rlpipe.zeros(5, 7), 2), RuntimeError, "Expected 3D or 4D tensor, but got [5, 7]"),
    ((rlpipe.zeros(1, 1, 5, 7), (1, 1, 5)), RuntimeError, "output_size must be 2, got (1, 1, 5)"),
    ((rlpipe.zeros(1, 1, 5, 7), [(3, 4), 5]), TypeError, "'output_size' must be tuple of ints"),
])
def test_adaptive_avg_pool2d_bad_input(args, error, message):
    with pytest.raises(error) as info:
        F.adaptive_avg_pool2d(*args)
    assert message in str(info.value)


def test_cross_values_default_dim_and_method():
    a = rlpipe.tensor([[1.0, 2, 3], [0.5, -1, 2]])
    b = rlpipe.tensor([[4.0, 5, 6], [1, 1, 1]])
    # torch 2.13: torch.cross(a, b, dim=1) and torch.cross(a.T, b.T) (the first dim of size 3)
    assert rlpipe.cross(a, b, dim=1).tolist() == [[-3.0, 6.0, -3.0], [-3.0, 1.5, 1.5]]
    assert rlpipe.cross(a.T, b.T).tolist() == [[-3.0, -3.0], [6.0, 1.5], [-3.0, 1.5]]
    assert a.cross(b, dim=-1).tolist() == [[-3.0, 6.0, -3.0], [-3.0, 1.5, 1.5]]
    v1, v2 = rlpipe.tensor([1.0, 0.0, 0.0]), rlpipe.tensor([0.0, 1.0, 0.0])
    assert rlpipe.cross(v2, v1).tolist() == [0.0, 0.0, -1.0]


def test_cross_gradcheck_with_broadcasting():
    a = rlpipe.randn(4, 3, dtype=rlpipe.float64, requires_grad=True)
    b = rlpipe.randn(3, dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda x, y: rlpipe.cross(x, y, dim=1), (a, b))


@pytest.mark.parametrize("args, message", [
    ((rlpipe.zeros(2, 4), rlpipe.zeros(2, 4)), "no dimension of size 3 in input (shapes [2, 4] and [2, 4])"),
    ((rlpipe.zeros(3, 4), rlpipe.zeros(3, 4), 1), "inputs dimension 1 must have length 3. Got 4 and 4"),
    ((rlpipe.zeros(2, 3), rlpipe.zeros(3, 3)), "the shapes [2, 3] and [3, 3] cannot be broadcast"),
])
def test_cross_bad_input(args, message):
    with pytest.raises(RuntimeError) as info:
        rlpipe.cross(*args)
    assert message in str(info.value)


@pytest.mark.cuda
def test_cross_and_adaptive_pool_on_cuda():
    if not rlpipe.cuda.is_available():
        pytest.skip("no CUDA device (run under RLPIPE_CUPY_STANDIN=1 or on a GPU)")
    a = rlpipe.tensor([[1.0, 2, 3], [0.5, -1, 2]], device="cuda", requires_grad=True)
    b = rlpipe.tensor([[4.0, 5, 6], [1, 1, 1]], device="cuda")
    out = rlpipe.cross(a, b, dim=1)
    out.sum().backward()
    assert out.cpu().tolist() == [[-3.0, 6.0, -3.0], [-3.0, 1.5, 1.5]]
    assert a.grad.cpu().tolist() == [[-1.0, 2.0, -1.0], [0.0, 0.0, 0.0]]  # b x ones, as torch 2.13 gives
    pooled = F.adaptive_avg_pool2d(_ramp().to("cuda"), (3, 4))
    np.testing.assert_allclose(pooled.cpu().numpy()[0, 0], POOLED_3x4, rtol=1e-6)


def test_inplace_functions_at_top_level_write_into_their_input():
    # torch 2.13: torch.sin_(x) returns x itself, changed; torch.clamp_ takes the method's arguments
    x = rlpipe.tensor([0.0, np.pi / 2, -1.0])
    assert rlpipe.sin_(x) is x
    np.testing.assert_allclose(x.numpy(), [0.0, 1.0, -0.8414709568023682], rtol=1e-6)
    y = rlpipe.tensor([-2.0, 0.5, 3.0])
    assert rlpipe.clamp_(y, min=0, max=1) is y and y.tolist() == [0.0, 0.5, 1.0]
    z = rlpipe.tensor([-2.0, 0.5])
    rlpipe.relu_(z)
    assert z.tolist() == [0.0, 0.5]
    assert rlpipe.sin_.__name__ == "sin_" and rlpipe.sin_.__doc__


def test_inplace_function_on_an_integer_tensor_refuses_and_leaves_it():
    x = rlpipe.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        rlpipe.sin_(x)  # torch 2.13's message
    assert x.tolist() == [1, 2]


def test_shape_inplace_methods_change_the_tensor_itself():
    batch_me = rlpipe.rand(3, 5, 5)
    assert batch_me.unsqueeze_(0) is batch_me and batch_me.shape == (1, 3, 5, 5)
    assert rlpipe.zeros(1, 2, 1).squeeze_(0).shape == (2, 1)
    assert rlpipe.zeros(1, 2, 1).squeeze_().shape == (2,)
    assert rlpipe.zeros(2, 3, 4).transpose_(0, 2).shape == (4, 3, 2)
    assert rlpipe.zeros(2, 3, 4).swapaxes_(0, 1).shape == (3, 2, 4)
    # torch 2.13: t_ keeps the memory (a row view taken before still reads the old row)
    a = rlpipe.arange(6.0).reshape(2, 3)
    row = a[0]
    a.t_()
    assert a.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    a[2, 0] = 9.0
    assert row.tolist() == [0.0, 1.0, 9.0]


def test_shape_inplace_keeps_the_graph_and_view_updates():
    # recorded from torch 2.13: unsqueeze_ on a view of a non-leaf, then an in-place multiply through it
    x = rlpipe.ones(3, 2, requires_grad=True)
    base = x * 1
    r = base[1]
    r.unsqueeze_(0)
    r.mul_(rlpipe.tensor([[2.0, 3.0]]))
    (base * rlpipe.arange(6.0).reshape(3, 2)).sum().backward()
    assert r.shape == (1, 2) and base.tolist() == [[1.0, 1.0], [2.0, 3.0], [1.0, 1.0]]
    assert x.grad.tolist() == [[0.0, 1.0], [4.0, 9.0], [4.0, 5.0]]


@pytest.mark.parametrize("call", ["unsqueeze_(0)", "squeeze_()", "t_()", "transpose_(0, 1)"])
def test_shape_inplace_on_a_leaf_that_requires_grad_refuses_and_leaves_it(call):
    x = rlpipe.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        eval("x." + call)
    assert x.shape == (2, 3) and x.grad_fn is None


def test_t_inplace_above_two_dims_refuses():
    x = rlpipe.zeros(2, 3, 4)
    with pytest.raises(RuntimeError, match="expects a tensor with <= 2 dimensions, but self is 3D"):
        x.t_()
    assert x.shape == (2, 3, 4)


def test_accelerator_without_a_gpu(monkeypatch):
    # torch 2.13 on a CPU-only machine: False, None, 0, and a RuntimeError for the index
    monkeypatch.setattr(rlpipe.cuda, "is_available", lambda: False)
    assert rlpipe.accelerator.is_available() is False
    assert rlpipe.accelerator.current_accelerator() is None
    assert rlpipe.accelerator.device_count() == 0
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available."):
        rlpipe.accelerator.current_device_index()
    device = rlpipe.accelerator.current_accelerator().type if rlpipe.accelerator.is_available() else "cpu"
    assert device == "cpu"  # the idiom of PyTorch's tutorials


@pytest.mark.cuda
def test_accelerator_with_a_gpu():
    if not rlpipe.cuda.is_available():
        pytest.skip("no CUDA device (run under RLPIPE_CUPY_STANDIN=1 or on a GPU)")
    assert rlpipe.accelerator.current_accelerator() == rlpipe.device("cuda")
    assert rlpipe.accelerator.device_count() >= 1 and rlpipe.accelerator.current_device_index() >= 0
    rlpipe.accelerator.synchronize()


# torch.svd / torch.linalg.svd, recorded from torch 2.13 in float64
SVD_A = [[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.0, 1.0, 1.0], [0.5, 0.0, -2.0]]
SVD_S = [3.8093605611616748, 3.1028938811839057, 1.166542616957253]
# the gradient of ((U * S**2) @ U.T * arange(16).reshape(4, 4)).sum() + (V * V * S).sum() / 2 + S.sum()
SVD_GRAD = [[27.587164690439405, 6.3209416097722695, -4.732642416688387],
            [45.1115979579307, 14.396062177131753, 8.654817655936595],
            [63.847254889976554, 25.132166642691274, 20.302080797207022],
            [80.64409042374535, 34.649422835539546, 31.63186216754385]]
# B (3 x 5, wide): the gradient of ((U * S) @ Vh * arange(15).reshape(3, 5)).sum() + ((Vh.T * S) @ Vh).sum()
SVD_B = [[1.0, 2.0, 0.5, 0.0, 1.0], [0.0, -1.0, 3.0, 1.0, 0.0], [2.0, 1.0, 1.0, -1.0, 0.5]]
SVD_B_GRAD = [[2.0027918635199575, 2.311648500035613, 2.9061287118637313, 5.997558496999629, 6.116650589768204],
              [6.132972893369638, 6.861002582671549, 7.644161748747767, 9.656314686998241, 10.227237199468581],
              [10.886823468530602, 11.972469490187557, 12.834956733505301, 14.196013320566301, 15.034886921165347]]


def test_svd_values_and_gradient_tall():
    a = rlpipe.tensor(SVD_A, dtype=rlpipe.float64, requires_grad=True)
    u, s, v = rlpipe.svd(a)
    np.testing.assert_allclose(s.detach().numpy(), SVD_S, rtol=1e-12)
    np.testing.assert_allclose(((u * s) @ v.T).detach().numpy(), SVD_A, atol=1e-12)
    loss = ((u * s ** 2) @ u.T * rlpipe.arange(16.0, dtype=rlpipe.float64).reshape(4, 4)).sum()
    (loss + (v * v * s).sum() * 0.5 + s.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), SVD_GRAD, rtol=1e-10)


def test_linalg_svd_gradient_wide():
    b = rlpipe.tensor(SVD_B, dtype=rlpipe.float64, requires_grad=True)
    u, s, vh = rlpipe.linalg.svd(b, full_matrices=False)
    weights = rlpipe.arange(15.0, dtype=rlpipe.float64).reshape(3, 5)
    ((((u * s) @ vh) * weights).sum() + ((vh.T * s) @ vh).sum()).backward()
    np.testing.assert_allclose(b.grad.numpy(), SVD_B_GRAD, rtol=1e-10)


def test_svd_gradcheck_batched_full_and_values_only():
    c = rlpipe.randn(2, 5, 3, dtype=rlpipe.float64, requires_grad=True)

    def projector(a):
        u, s, _ = rlpipe.linalg.svd(a, full_matrices=False)
        return ((u * s.unsqueeze(-2) ** 2) @ u.mT).sum() + s.prod()
    assert rlpipe.autograd.gradcheck(projector, (c,))

    def full(a):
        _, s, vh = rlpipe.linalg.svd(a, full_matrices=True)
        top = vh[..., :3, :]
        return ((top.mT * s.unsqueeze(-2)) @ top).sum()
    assert rlpipe.autograd.gradcheck(full, (rlpipe.randn(2, 3, 5, dtype=rlpipe.float64, requires_grad=True),))
    assert rlpipe.autograd.gradcheck(rlpipe.linalg.svdvals, (rlpipe.randn(4, 4, dtype=rlpipe.float64,
                                                                          requires_grad=True),))


def test_svd_shapes_and_named_results():
    ones = rlpipe.ones(2, 3)
    assert rlpipe.svd(ones).V.shape == (3, 2) and rlpipe.svd(ones, some=False).V.shape == (3, 3)
    assert rlpipe.linalg.svd(ones).Vh.shape == (3, 3)  # full_matrices=True by default, as in torch
    assert rlpipe.svd(ones, compute_uv=False).U.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert rlpipe.linalg.svdvals(rlpipe.tensor([[3.0, 0.0], [0.0, 4.0]])).tolist() == [4.0, 3.0]
    assert type(rlpipe.svd(ones)).__name__ == "svd" and type(rlpipe.linalg.svd(ones)).__name__ == "linalg_svd"
    assert repr(rlpipe.svd(rlpipe.eye(2))).startswith("rlpipe.return_types.svd(\nU=")
    assert rlpipe.linalg.cross(rlpipe.eye(3), rlpipe.eye(3)[[1, 2, 0]]).tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0],
                                                                                      [0.0, 1.0, 0.0]]


@pytest.mark.parametrize("arg, message", [
    (rlpipe.ones(3), "The input tensor A must have at least 2 dimensions, got 1"),
    (rlpipe.ones(3, 3, dtype=rlpipe.int64), "Expected a floating point or complex tensor as input. Got rlpipe.int64"),
])
def test_svd_bad_input(arg, message):
    with pytest.raises(RuntimeError, match=message):
        rlpipe.linalg.svd(arg)


@pytest.mark.cuda
def test_svd_on_cuda():
    if not rlpipe.cuda.is_available():
        pytest.skip("no CUDA device (run under RLPIPE_CUPY_STANDIN=1 or on a GPU)")
    a = rlpipe.tensor(SVD_A, dtype=rlpipe.float64, device="cuda", requires_grad=True)
    u, s, v = rlpipe.svd(a)
    loss = ((u * s ** 2) @ u.T * rlpipe.arange(16.0, dtype=rlpipe.float64, device="cuda").reshape(4, 4)).sum()
    (loss + (v * v * s).sum() * 0.5 + s.sum()).backward()
    np.testing.assert_allclose(s.detach().cpu().numpy(), SVD_S, rtol=1e-12)
    np.testing.assert_allclose(a.grad.cpu().numpy(), SVD_GRAD, rtol=1e-10)


def test_diagonal_diag_trace_values_and_gradients():
    # recorded from torch 2.13
    x = rlpipe.arange(12.0).reshape(3, 4).requires_grad_()
    d = rlpipe.diagonal(x, 1)
    assert d.tolist() == [1.0, 6.0, 11.0]
    (d * rlpipe.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 3.0]]
    assert rlpipe.diag(rlpipe.tensor([1.0, 2.0]), -1).tolist() == [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
    assert rlpipe.diag(x.detach(), -1).tolist() == [4.0, 9.0]
    assert rlpipe.trace(x.detach()).item() == 15.0 and x.detach().trace().item() == 15.0
    y = rlpipe.arange(24.0).reshape(2, 3, 4)
    assert y.diagonal(0, 1, 2).tolist() == [[0.0, 5.0, 10.0], [12.0, 17.0, 22.0]]
    assert y.diagonal(offset=-1, dim1=-1, dim2=0).tolist() == [[1.0, 14.0], [5.0, 18.0], [9.0, 22.0]]
    v = rlpipe.tensor([1.0, 2.0], requires_grad=True)
    rlpipe.diag(v, 1).sum().backward()
    assert v.grad.tolist() == [1.0, 1.0]
    assert rlpipe.trace(rlpipe.arange(9).reshape(3, 3)).dtype == rlpipe.int64
    assert rlpipe.diagonal(rlpipe.ones(2, 3), 5).shape == (0,)


def test_diagonal_and_diag_gradcheck():
    a = rlpipe.randn(3, 4, 5, dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda t: t.diagonal(-1, 2, 0), (a,))
    assert rlpipe.autograd.gradcheck(lambda t: rlpipe.diag(t, 2), (rlpipe.randn(3, dtype=rlpipe.float64,
                                                                               requires_grad=True),))


@pytest.mark.parametrize("call, error, message", [
    (lambda: rlpipe.diag(rlpipe.ones(2, 2, 2)), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 3D"),
    (lambda: rlpipe.trace(rlpipe.ones(3)), RuntimeError, "trace: expected a matrix, but got tensor with dim 1"),
    (lambda: rlpipe.diagonal(rlpipe.ones(2, 2), 0, 0, 0), RuntimeError, "diagonal dimensions cannot be identical 0, 0"),
    (lambda: rlpipe.diagonal(rlpipe.ones(3)), IndexError, "Dimension out of range"),
])
def test_diagonal_bad_input(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def test_diag_embed_values_and_gradient_recorded_from_torch():
    # torchrl's mock envs build their image observations with torch.diag_embed(obs, 0, -2, -1)
    x = rlpipe.arange(6.0).reshape(2, 3)
    assert rlpipe.diag_embed(x).tolist() == [[[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]],
                                             [[3.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 5.0]]]
    assert x.diag_embed(-1, 2, 0).tolist() == [
        [[0.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]], [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 4.0, 0.0]],
        [[0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 5.0]], [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]
    v = x.clone().requires_grad_()
    (rlpipe.diag_embed(v, 1, 0, 2) * rlpipe.arange(32.0).reshape(4, 2, 4)).sum().backward()
    assert v.grad.tolist() == [[1.0, 10.0, 19.0], [5.0, 14.0, 23.0]]
    a = rlpipe.randn(2, 3, dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda t: rlpipe.diag_embed(t, -1, 2, 0), (a,))


@pytest.mark.parametrize("call, error, message", [
    (lambda: rlpipe.diag_embed(rlpipe.ones(2, 3), 0, 1, 1), RuntimeError,
     "diagonal dimensions cannot be identical 1, 1"),
    (lambda: rlpipe.diag_embed(rlpipe.ones(2, 3), 0, 0, 3), IndexError,
     "Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
    (lambda: rlpipe.diag_embed(rlpipe.tensor(1.0)), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got -2)"),
])
def test_diag_embed_bad_input(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


@pytest.mark.cuda
def test_diagonal_on_cuda():
    if not rlpipe.cuda.is_available():
        pytest.skip("no CUDA device (run under RLPIPE_CUPY_STANDIN=1 or on a GPU)")
    x = rlpipe.arange(12.0, device="cuda").reshape(3, 4).requires_grad_()
    (rlpipe.diagonal(x, 1) * rlpipe.tensor([1.0, 2.0, 3.0], device="cuda")).sum().backward()
    assert x.grad.cpu().tolist() == [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 3.0]]
    assert rlpipe.diag(rlpipe.tensor([1.0, 2.0], device="cuda"), -1).cpu().tolist() == [
        [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
    assert rlpipe.diag_embed(rlpipe.tensor([[1.0, 2.0]], device="cuda")).cpu().tolist() == [[[1.0, 0.0], [0.0, 2.0]]]


def test_legacy_constructor_takes_numpy_integers_as_sizes():
    # CleanRL's rainbow_atari builds torch.Tensor(out_features, in_features) with out_features = env's n, a
    # NumPy int64; torch 2.13 gives shapes [3, 2], [3] and [2] here
    assert rlpipe.Tensor(np.int64(3), 2).shape == (3, 2)
    assert rlpipe.Tensor(np.int64(3)).shape == (3,)
    assert rlpipe.FloatTensor(np.int32(2)).shape == (2,)
    assert rlpipe.Tensor([2]).tolist() == [2.0]  # a list is still data


# Tensor.unfold: PyTorch's DQN tutorial averages episode durations with durations.unfold(0, 100, 1).mean(1)
UNFOLD_GRAD = [[[0.0, 2.0, 4.0, 6.0], [9.0, 13.0, 17.0, 21.0], [9.0, 11.0, 13.0, 15.0]],
               [[16.0, 18.0, 20.0, 22.0], [41.0, 45.0, 49.0, 53.0], [25.0, 27.0, 29.0, 31.0]]]  # torch 2.13


def test_unfold_windows_and_overlapping_gradient():
    x = rlpipe.arange(24.0).reshape(2, 3, 4).requires_grad_()
    y = x.unfold(1, 2, 1)
    assert y.shape == (2, 2, 4, 2) and y.grad_fn.name() == "UnfoldBackward0"
    assert y[1, 1].tolist() == [[16.0, 20.0], [17.0, 21.0], [18.0, 22.0], [19.0, 23.0]]
    (y * rlpipe.arange(float(y.numel())).reshape(y.shape)).sum().backward()
    assert x.grad.tolist() == UNFOLD_GRAD
    assert rlpipe.arange(7.0).unfold(0, 3, 2).tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]]
    assert rlpipe.arange(6.0).reshape(2, 3).unfold(-1, 2, 2).tolist() == [[[0.0, 1.0]], [[3.0, 4.0]]]
    assert rlpipe.arange(5.0).unfold(0, 0, 2).shape == (3, 0)
    assert rlpipe.tensor(3.0).unfold(0, 1, 1).tolist() == [3.0]


def test_unfold_gradcheck_float64():
    x = rlpipe.rand(3, 7, dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda t: t.unfold(1, 3, 2), (x,))


def test_unfold_bad_arguments():
    x = rlpipe.arange(7.0)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 7 but size is 100"):
        x.unfold(0, 100, 1)
    with pytest.raises(RuntimeError, match="size is -1 but must be >= 0"):
        x.unfold(0, -1, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        x.unfold(0, 2, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.unfold(2, 2, 1)
    assert x.unfold(0, 2, 3).tolist() == [[0.0, 1.0], [3.0, 4.0]]  # x still usable


@pytest.mark.cuda
def test_unfold_on_cuda():
    if not rlpipe.cuda.is_available():
        pytest.skip("no CUDA device (run under RLPIPE_CUPY_STANDIN=1 or on a GPU)")
    x = rlpipe.arange(24.0, device="cuda").reshape(2, 3, 4).requires_grad_()
    y = x.unfold(1, 2, 1)
    (y * rlpipe.arange(float(y.numel()), device="cuda").reshape(y.shape)).sum().backward()
    assert x.grad.cpu().tolist() == UNFOLD_GRAD


def test_cosine_similarity_values_and_gradients():
    a = rlpipe.tensor([[1.0, 2, 3], [0, 1, 0]], requires_grad=True)
    b = rlpipe.tensor([[1.0, 0, 1]], requires_grad=True)
    c = F.cosine_similarity(a, b)
    np.testing.assert_allclose(c.tolist(), [0.7559289336204529, 0.0], rtol=1e-6)  # torch 2.13
    (c * rlpipe.tensor([1.0, 2])).sum().backward()
    np.testing.assert_allclose(a.grad.tolist(), [[0.13498730957508087, -0.1079898402094841, 0.026997476816177368],
                                                 [1.4142135381698608, 0.0, 1.4142135381698608]], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(b.grad.tolist(), [[-0.18898223340511322, 1.7921780347824097, 0.18898221850395203]],
                               rtol=1e-5)
    other = F.cosine_similarity(rlpipe.tensor([[1.0, 2], [3, 4]]), rlpipe.tensor([[2.0, 1], [1, 0]]), dim=0)
    np.testing.assert_allclose(other.tolist(), [0.7071067094802856, 0.4472135901451111], rtol=1e-6)
    assert F.cosine_similarity(rlpipe.zeros(3), rlpipe.ones(3), dim=0).item() == 0.0


def test_gumbel_softmax_soft_sums_to_one_and_hard_is_straight_through():
    logits = rlpipe.tensor([[1.0, 2, 3], [3, 0, -1]])
    rlpipe.manual_seed(5)
    soft_in = logits.clone().requires_grad_()
    soft = F.gumbel_softmax(soft_in, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).tolist(), [1.0, 1.0], rtol=1e-6)
    rlpipe.manual_seed(5)  # the same noise: the hard sample is the soft one's argmax, one-hot
    hard_in = logits.clone().requires_grad_()
    hard = F.gumbel_softmax(hard_in, tau=0.5, hard=True)
    assert hard.tolist() == F.one_hot(soft.argmax(-1), 3).float().tolist()
    weights = rlpipe.tensor([[1.0, 2, 3], [1, -1, 0.5]])
    (soft * weights).sum().backward()
    (hard * weights).sum().backward()
    np.testing.assert_allclose(hard_in.grad.numpy(), soft_in.grad.numpy(), rtol=1e-6)
    assert F.gumbel_softmax(rlpipe.tensor([100.0, 0, 0])).argmax().item() == 0


def test_nanmean_skips_nans_with_gradient():
    nan = float("nan")
    x = rlpipe.tensor([[1.0, nan, 3.0], [nan, nan, 2.0]], requires_grad=True)
    m = rlpipe.nanmean(x)
    assert m.item() == 2.0 and x.nanmean(dim=1).tolist() == [2.0, 2.0]
    np.testing.assert_equal(rlpipe.nanmean(x, 0, keepdim=True).tolist(), [[1.0, nan, 2.5]])  # torch 2.13
    m.backward()
    np.testing.assert_allclose(x.grad.tolist(), [[1 / 3, 0.0, 1 / 3], [0.0, 0.0, 1 / 3]], rtol=1e-6)
    with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point or complex dtype but "
                                           "got Long"):
        rlpipe.nanmean(rlpipe.tensor([1, 2]))


def test_diff_orders_edges_and_errors():
    # torch 2.13
    assert rlpipe.tensor([1, 3, 6, 10]).diff().tolist() == [2, 3, 4]
    assert rlpipe.diff(rlpipe.tensor([[1.0, 2, 4], [0, 0, 5]]), dim=0).tolist() == [[-1.0, -2.0, 1.0]]
    assert rlpipe.diff(rlpipe.tensor([1.0, 3, 6, 10]), n=2).tolist() == [1.0, 1.0]
    assert rlpipe.diff(rlpipe.tensor([1.0, 3]), prepend=rlpipe.tensor([0.0]),
                       append=rlpipe.tensor([9.0, 10])).tolist() == [1.0, 2.0, 6.0, 1.0]
    assert rlpipe.diff(rlpipe.tensor([True, False, False])).tolist() == [True, False]
    assert rlpipe.diff(rlpipe.tensor([1.0]), n=3).tolist() == []
    x = rlpipe.tensor([1.0, 4, 9, 16], dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(lambda t: rlpipe.diff(t, n=2), (x,))
    with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
        rlpipe.diff(rlpipe.tensor(1.0))
    with pytest.raises(RuntimeError, match="order must be non-negative but got -1"):
        rlpipe.diff(rlpipe.tensor([1.0, 2]), n=-1)


def test_logaddexp_values_gradients_and_infinities():
    a = rlpipe.tensor([0.0, 1.0, -100.0], requires_grad=True)
    b = rlpipe.tensor([0.0, 2.0, -100.0], requires_grad=True)
    y = rlpipe.logaddexp(a, b)
    # torch 2.13
    np.testing.assert_allclose(y.tolist(), [0.6931471824645996, 2.3132617473602295, -99.30685424804688], rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(a.grad.tolist(), [0.5, 0.2689414322376251, 0.5], rtol=1e-6)
    np.testing.assert_allclose(b.grad.tolist(), [0.5, 0.7310585975646973, 0.5], rtol=1e-6)
    np.testing.assert_allclose(rlpipe.logaddexp(rlpipe.tensor([1000.0]), rlpipe.tensor([1000.0])).tolist(),
                               [1000.6931762695312])
    inf = float("inf")
    assert rlpipe.tensor([-inf]).logaddexp(rlpipe.tensor([-inf])).tolist() == [-inf]
    x = rlpipe.tensor([0.3, -1.2], dtype=rlpipe.float64, requires_grad=True)
    z = rlpipe.tensor([0.5, 2.0], dtype=rlpipe.float64, requires_grad=True)
    assert rlpipe.autograd.gradcheck(rlpipe.logaddexp, (x, z))
    with pytest.raises(NotImplementedError, match="logaddexp_cpu\" not implemented for 'Long'"):
        rlpipe.logaddexp(rlpipe.tensor([1, 2]), rlpipe.tensor([1, 2]))


def test_meshgrid_ij_xy_and_gradients():
    # torch 2.13
    x, y = rlpipe.meshgrid(rlpipe.tensor([1, 2, 3]), rlpipe.tensor([4, 5]), indexing="ij")
    assert x.tolist() == [[1, 1], [2, 2], [3, 3]] and y.tolist() == [[4, 5], [4, 5], [4, 5]]
    x, y = rlpipe.meshgrid(rlpipe.tensor([1, 2, 3]), rlpipe.tensor([4, 5]), indexing="xy")
    assert x.tolist() == [[1, 2, 3], [1, 2, 3]] and y.tolist() == [[4, 4, 4], [5, 5, 5]]
    assert [t.shape for t in rlpipe.meshgrid(rlpipe.tensor(1), rlpipe.tensor([4, 5]), indexing="xy")] == [(2, 1),
                                                                                                         (2, 1)]
    assert rlpipe.meshgrid([rlpipe.tensor([1, 2]), rlpipe.tensor([4, 5])], indexing="ij")[0].shape == (2, 2)
    a = rlpipe.tensor([1.0, 2, 3], requires_grad=True)
    b = rlpipe.tensor([4.0, 5], requires_grad=True)
    x, y = rlpipe.meshgrid(a, b, indexing="xy")
    (x * y).sum().backward()
    assert a.grad.tolist() == [9.0, 9.0, 9.0] and b.grad.tolist() == [6.0, 6.0]
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        assert rlpipe.meshgrid(rlpipe.tensor([1, 2, 3]), rlpipe.tensor([4, 5]))[0].shape == (3, 2)


def test_meshgrid_bad_input():
    with pytest.raises(RuntimeError, match='indexing must be one of "xy" or "ij", but received: bad'):
        rlpipe.meshgrid(rlpipe.tensor([1, 2]), rlpipe.tensor([4, 5]), indexing="bad")
    with pytest.raises(RuntimeError, match="meshgrid expects all tensors to have the same dtype"):
        rlpipe.meshgrid(rlpipe.ones(2), rlpipe.tensor([4, 5]), indexing="ij")
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor in the tensor list but got a tensor of shape "
                                           "\\[2, 2\\]"):
        rlpipe.meshgrid(rlpipe.ones(2, 2), rlpipe.ones(2), indexing="ij")
    with pytest.raises(RuntimeError, match="meshgrid expects a non-empty TensorList"):
        rlpipe.meshgrid(indexing="ij")
