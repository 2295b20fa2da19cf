"""Memory formats: the strides and ``is_contiguous`` answers recorded from torch 2.13 (peer venv), values
that never change with the layout, torch's errors, and the ``*_like`` functions' layouts."""
import copy
import pickle

import numpy as np
import pytest

import rlpipe as r
from rlpipe import _dtypes

F = r.nn.functional
CL, CL3, CF, PF = r.channels_last, r.channels_last_3d, r.contiguous_format, r.preserve_format


def _arange(*shape, dtype=r.float32):
    return r.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# shape -> (strides of contiguous(memory_format=channels_last[_3d]), its is_contiguous(),
#           its is_contiguous(memory_format=...), the row-major tensor's is_contiguous(memory_format=...))
TORCH_CHANNELS_LAST = {
    (2, 3, 4, 5): ((60, 1, 15, 3), False, True, False),
    (2, 1, 4, 5): ((20, 20, 5, 1), True, True, True),
    (2, 3, 1, 1): ((3, 1, 1, 1), True, True, True),
    (1, 3, 1, 1): ((3, 1, 1, 1), True, True, True),
    (2, 1, 1, 1): ((1, 1, 1, 1), True, True, True),
    (0, 3, 2, 2): ((12, 1, 6, 3), True, True, False),
    (2, 3, 4, 5, 6): ((360, 1, 90, 18, 3), False, True, False),
    (2, 1, 1, 1, 1): ((1, 1, 1, 1, 1), True, True, True),
}


def test_constants_print_as_torch_and_stay_singletons():
    for fmt, name in ((CF, "contiguous_format"), (CL, "channels_last"), (CL3, "channels_last_3d"),
                      (PF, "preserve_format")):
        assert repr(fmt) == str(fmt) == f"{_dtypes.shown_module()}.{name}"
        assert isinstance(fmt, r.memory_format)
        assert pickle.loads(pickle.dumps(fmt)) is fmt and copy.deepcopy(fmt) is fmt
    with pytest.raises(TypeError, match="cannot create '.*memory_format' instances"):
        r.memory_format()


@pytest.mark.parametrize("shape", list(TORCH_CHANNELS_LAST))
def test_channels_last_strides_and_contiguity_as_torch(shape):
    strides, plain, own, row_major = TORCH_CHANNELS_LAST[shape]
    fmt = CL if len(shape) == 4 else CL3
    x = _arange(*shape)
    y = x.contiguous(memory_format=fmt)
    assert y.stride() == strides
    assert (y.is_contiguous(), y.is_contiguous(memory_format=fmt)) == (plain, own)
    assert x.is_contiguous(memory_format=fmt) == row_major
    np.testing.assert_array_equal(y.numpy(), x.numpy())


def test_channels_last_is_nhwc_in_memory():
    x = _arange(2, 3, 4, 5)
    y = x.contiguous(memory_format=CL)
    nhwc = y.numpy().transpose(0, 2, 3, 1)
    assert nhwc.flags.c_contiguous
    np.testing.assert_array_equal(nhwc.ravel(), x.numpy().transpose(0, 2, 3, 1).ravel())
    assert y.contiguous(memory_format=CL) is y  # already laid out so
    assert y.contiguous().stride() == (60, 20, 5, 1)
    assert y.permute(0, 2, 3, 1).is_contiguous()
    assert not _arange(1, 3, 4, 5).permute(0, 2, 3, 1).is_contiguous(memory_format=CL)


def test_wrong_rank_and_wrong_type_raise_as_torch():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        r.zeros(2, 3, 4).contiguous(memory_format=CL)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        r.zeros(2, 3, 4, 5).clone(memory_format=CL3)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        r.zeros(2, 3, 4).to(memory_format=CL)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        r.empty(2, 3, 4, memory_format=CL)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        r.empty_like(r.zeros(2, 3, 4), memory_format=CL)
    with pytest.raises(RuntimeError, match="unsupported memory format Preserve"):
        r.empty(2, 3, 4, 5, memory_format=PF)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        r.zeros(2, 3, 4, 5).permute(0, 1, 3, 2).contiguous(memory_format=PF)
    with pytest.raises(TypeError, match=r"contiguous\(\): argument 'memory_format' must be .*memory_format, not str"):
        r.zeros(2, 3, 4, 5).contiguous(memory_format="x")
    with pytest.raises(TypeError, match=r"is_contiguous\(\): argument 'memory_format' must be .*, not int"):
        r.zeros(2, 3, 4, 5).is_contiguous(memory_format=1)
    with pytest.raises(TypeError, match=r"to\(\): argument 'memory_format' must be .*memory_format, not str"):
        r.zeros(2, 3, 4, 5).to(memory_format="channels_last")
    with pytest.raises(TypeError, match=r"zeros_like\(\): argument 'memory_format' must be .*, not str"):
        r.zeros_like(r.zeros(2, 3, 4, 5), memory_format="channels_last")
    with pytest.raises(TypeError, match=r"to\(\) received an invalid combination of arguments - got "
                                        r"\(memory_format=int\)"):
        r.nn.Conv2d(3, 4, 3).to(memory_format=1)
    assert not r.zeros(2, 3, 4).is_contiguous(memory_format=CL)
    assert not r.zeros(2, 3, 4, 5).is_contiguous(memory_format=CL3)
    assert not r.zeros(2, 3, 4, 5, 6).is_contiguous(memory_format=CL)


def _preserve_cases():
    """(input, the strides torch 2.13's clone, empty_like and dropout give it)."""
    x = _arange(2, 3, 4, 5)
    return [(x.permute(0, 1, 3, 2), (60, 20, 1, 5)),
            (x.permute(0, 2, 3, 1), (60, 5, 1, 20)),
            (x[..., ::2], (36, 12, 3, 1)),
            (x.permute(0, 1, 3, 2)[:, :, ::2], (36, 12, 1, 3)),
            (x.permute(3, 1, 0, 2)[..., ::2], (1, 10, 30, 5)),
            (x.permute(0, 2, 3, 1)[:, :, 1:], (48, 4, 1, 16)),
            (x.contiguous(memory_format=CL)[:1, :, :, ::2], (36, 1, 9, 3)),
            (_arange(2, 1, 4, 5).permute(0, 3, 1, 2)[..., ::2], (10, 1, 10, 5)),
            (_arange(3, 1, 4).expand(3, 2, 4), (8, 4, 1)),
            (_arange(3, 4)[:, :1].expand(3, 5), (5, 1))]


def test_preserve_format_keeps_the_order_of_strides_as_torch():
    for src, strides in _preserve_cases():
        for out in (src.clone(), r.empty_like(src), r.nn.functional.dropout(src, 1e-10)):
            assert out.stride() == strides, (src.stride(), out.stride())
        np.testing.assert_array_equal(src.clone().numpy(), src.numpy())
    x = _arange(2, 3, 4, 5)
    assert x.permute(0, 1, 3, 2).clone(memory_format=CF).stride() == (60, 20, 4, 1)
    assert x.clone(memory_format=CL).stride() == (60, 1, 15, 3)


def test_to_lays_out_and_aliases_as_torch():
    x = _arange(2, 3, 4, 5)
    cl = x.to(memory_format=CL)
    assert cl.stride() == (60, 1, 15, 3)
    np.testing.assert_array_equal(cl.numpy(), x.numpy())
    assert cl.to(memory_format=CF).stride() == (60, 20, 5, 1)
    assert cl.to(memory_format=CL) is cl
    assert cl.to(r.float64).stride() == (60, 1, 15, 3)
    assert x.to(r.float64, memory_format=CL).stride() == (60, 1, 15, 3)
    transposed = x.permute(0, 1, 3, 2)  # its strides suggest the row-major format: torch returns it as it is
    assert transposed.to(memory_format=CF) is transposed
    square = r.zeros(2, 3, 1, 1).contiguous(memory_format=CL)
    assert square.to(memory_format=CL).stride() == (3, 1, 3, 3)


def test_like_functions_and_empty_take_the_layout():
    cl = _arange(2, 3, 4, 5).contiguous(memory_format=CL)
    for fn in (r.empty_like, r.zeros_like, r.ones_like, r.rand_like, r.randn_like):
        assert fn(cl).stride() == (60, 1, 15, 3), fn.__name__
        assert fn(cl, memory_format=CF).stride() == (60, 20, 5, 1), fn.__name__
        assert fn(r.zeros(2, 3, 4, 5), memory_format=CL).stride() == (60, 1, 15, 3), fn.__name__
    assert r.full_like(cl, 2.0).stride() == (60, 1, 15, 3)
    assert r.full_like(cl, 2, memory_format=CF).stride() == (60, 20, 5, 1)
    assert r.zeros_like(r.zeros(2, 3, 4, 5).permute(3, 1, 0, 2)).stride() == (1, 20, 60, 5)
    assert r.ones_like(r.zeros(2, 3, 4, 5, 6), memory_format=CL3).stride() == (360, 1, 90, 18, 3)
    np.testing.assert_array_equal(r.ones_like(cl).numpy(), np.ones((2, 3, 4, 5), np.float32))
    np.testing.assert_array_equal(r.full_like(cl, 7.0).numpy(), np.full((2, 3, 4, 5), 7.0, np.float32))
    assert r.empty(2, 3, 4, 5, memory_format=CL).stride() == (60, 1, 15, 3)
    assert r.empty((2, 3, 4, 5, 6), memory_format=CL3).stride() == (360, 1, 90, 18, 3)
    made = r.zeros_like(cl, requires_grad=True)
    assert made.requires_grad and made.is_leaf


def test_gradient_passes_through_a_layout_change():
    x = _arange(2, 3, 2, 2, dtype=r.float64).requires_grad_()
    weights = _arange(2, 3, 2, 2, dtype=r.float64)
    (x.contiguous(memory_format=CL) * weights).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), weights.numpy())
    assert r.autograd.gradcheck(lambda t: t.clone(memory_format=CL) ** 2, (x.detach().requires_grad_(),))


def test_ops_keep_values_on_channels_last_inputs():
    x = r.randn(2, 3, 5, 5)
    cl = x.contiguous(memory_format=CL)
    for fn in (lambda t: t * 2 + 1, lambda t: t.sum(1), lambda t: r.nn.functional.max_pool2d(t, 2),
               lambda t: t.reshape(2, -1), lambda t: t.view(2, 3, 25) if t.is_contiguous() else t.reshape(2, 3, 25)):
        np.testing.assert_allclose(fn(cl).numpy(), fn(x).numpy(), rtol=1e-6)


def test_module_to_lays_out_4d_parameters_only():
    conv = r.nn.Conv2d(3, 4, 3)
    before = conv.weight.detach().clone()
    assert conv.to(memory_format=CL) is conv
    assert conv.weight.stride() == (27, 1, 9, 3) and conv.bias.stride() == (1,)
    assert isinstance(conv.weight, r.nn.Parameter)
    np.testing.assert_array_equal(conv.weight.detach().numpy(), before.numpy())
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        r.nn.Conv2d(3, 4, 3).to(memory_format=CL3)


@pytest.mark.cuda
def test_channels_last_on_the_gpu():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    x = _arange(2, 3, 4, 5).cuda()
    y = x.contiguous(memory_format=CL)
    assert y.device.type == "cuda" and y.stride() == (60, 1, 15, 3)
    assert y.is_contiguous(memory_format=CL) and not y.is_contiguous()
    np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())
    assert r.zeros_like(y).stride() == (60, 1, 15, 3)
    assert y.clone().stride() == (60, 1, 15, 3)
    np.testing.assert_array_equal((y * 2).cpu().numpy(), (x * 2).cpu().numpy())


def test_dropout_keeps_a_channels_last_layout():
    source = r.empty(2, 3, 3, 6, memory_format=CL)[..., ::2]  # not packed: its strides suggest channels_last
    source.copy_(r.ones(2, 3, 3, 3))
    out = r.nn.functional.dropout(source, 1e-10)
    assert out.is_contiguous(memory_format=CL)
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 3, 3, 3), np.float32))
    assert r.nn.functional.dropout(r.ones(4, 5), 0.5).is_contiguous()


def _pooled_layouts(device):
    """(output strides, input-gradient strides, sum of output * weights) of each 2-D pooling on a
    channels-last [2, 3, 6, 6] arange."""
    x = _arange(2, 3, 6, 6).to(device=device, dtype=r.float64).contiguous(memory_format=CL).requires_grad_()
    pools = {"max": lambda t: F.max_pool2d(t, 2), "indices": lambda t: F.max_pool2d(t, 2, return_indices=True)[1],
             "avg": lambda t: F.avg_pool2d(t, 3, 1), "adaptive_avg": lambda t: F.adaptive_avg_pool2d(t, (2, 4)),
             "adaptive_max": lambda t: F.adaptive_max_pool2d(t, 3)}
    found = {}
    for name, pool in pools.items():
        out = pool(x)
        x.grad = None
        if out.is_floating_point():
            out.backward(r.ones_like(out))
        found[name] = out.stride(), None if x.grad is None else x.grad.stride(), float(out.sum())
    return found


# strides and sums recorded from torch 2.13 (F.max_pool2d(x, 2) etc. on the same input)
_POOLED_AS_TORCH = {"max": ((27, 1, 9, 3), (108, 1, 18, 3), 5994.0), "indices": ((27, 1, 9, 3), None, 1134.0),
                    "avg": ((48, 1, 12, 3), (108, 1, 18, 3), 10320.0),
                    "adaptive_avg": ((24, 1, 12, 3), None, 5160.0),
                    "adaptive_max": ((27, 1, 9, 3), (108, 1, 18, 3), 5994.0)}


def test_pooling_keeps_a_channels_last_layout_as_torch():
    found = _pooled_layouts("cpu")
    for name, (strides, grad_strides, total) in _POOLED_AS_TORCH.items():
        assert found[name][0] == strides and found[name][2] == total, name
        if grad_strides is not None:
            assert found[name][1] == grad_strides, name
    row_major = F.max_pool2d(_arange(2, 3, 6, 6), 2)
    assert row_major.stride() == (27, 9, 3, 1)
    channels_last_like = _arange(2, 6, 3).transpose(1, 2)  # [N, C, L] with C fastest
    assert F.avg_pool1d(channels_last_like, 2).stride() == (9, 1, 3)
    # torch's max_pool1d packs its output row-major unless it records a graph (then it pools as 2-D)
    assert F.max_pool1d(channels_last_like, 2).stride() == (9, 3, 1)
    assert F.max_pool1d(channels_last_like.requires_grad_(), 2).stride() == (9, 1, 3)


@pytest.mark.cuda
def test_pooling_keeps_a_channels_last_layout_on_the_gpu():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    found = _pooled_layouts("cuda")
    for name, (strides, grad_strides, total) in _POOLED_AS_TORCH.items():
        assert found[name][0] == strides and found[name][2] == total, name
        if grad_strides is not None:
            assert found[name][1] == grad_strides, name
