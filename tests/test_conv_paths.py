"""Conv2d's three ways to compute (``rlpipe/primitives/windows.py``): im2col, the row-run layout after
space-to-depth, and the channels-last one. Each case runs every way that takes it (the choice forced
through ``_layout``) and checks values,
input, weight and bias gradients against brute-force loops in float64, then gradcheck. Cases cover a
kernel divisible by the stride and not, odd sizes, batch 1, padding, groups and dilation, and the
wrapped columns of the row-run layout meeting inf (0 * inf must not leak into the gradients)."""
import numpy as np
import pytest

import rlpipe as r
from rlpipe.autograd import gradcheck
from rlpipe.primitives import windows

# (N, C, H, W, O, kernel, stride, padding, dilation, groups)
CASES = [
    (2, 4, 28, 24, 3, (8, 8), (4, 4), (0, 0), (1, 1), 1),    # Nature CNN's first layer: kernel = 2 strides
    (3, 2, 11, 13, 4, (4, 4), (2, 2), (0, 0), (1, 1), 1),    # its second, odd sizes
    (1, 3, 9, 9, 2, (3, 3), (1, 1), (0, 0), (1, 1), 1),      # its third, batch 1
    (2, 2, 13, 12, 3, (5, 4), (3, 2), (2, 1), (1, 1), 1),    # kernel not divisible by the stride, padding
    (1, 2, 7, 8, 2, (3, 3), (2, 2), (1, 1), (1, 1), 1),      # 3x3 stride 2
    (2, 4, 17, 15, 4, (4, 6), (2, 3), (1, 0), (1, 1), 2),    # groups, unequal strides
    (2, 4, 10, 7, 6, (3, 2), (1, 1), (1, 2), (1, 1), 2),     # stride 1, groups, padding
    (2, 2, 9, 11, 3, (3, 3), (1, 1), (1, 1), (2, 1), 1),     # dilation
    (2, 2, 5, 6, 2, (1, 1), (1, 1), (0, 0), (1, 1), 1),      # 1x1
    (1, 1, 6, 6, 1, (6, 6), (1, 1), (0, 0), (1, 1), 1),      # one output position
    (2, 3, 10, 9, 2, (4, 2), (2, 2), (1, 2), (1, 1), 1),     # padded, kernel = whole strides (channels-last folds)
    (1, 16, 6, 7, 2, (4, 4), (2, 2), (0, 0), (1, 1), 1),     # runs of 64: channels-last folds the input gradient only
]


def _padded(x, padding):
    return np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))


def _taps(x_shape, w_shape, stride, dilation, groups):
    """Every (n, o, y, xo, c, i, j, yi, xi) with out[n, o, y, xo] += w[o, c, i, j] * xpad[n, g*Cg + c, yi, xi]."""
    n, _, h, wd = x_shape
    o, cg, kh, kw = w_shape
    oh = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    for b in range(n):
        for oc in range(o):
            base = oc // (o // groups) * cg
            for y in range(oh):
                for xo in range(ow):
                    for c in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                yield (b, oc, y, xo, c, i, j, base + c, y * stride[0] + i * dilation[0],
                                       xo * stride[1] + j * dilation[1])


def _reference(x, w, bias, g, stride, padding, dilation, groups):
    """(out, gx, gw, gb) by brute-force loops over every tap."""
    xp_ = _padded(x, padding)
    n, o = x.shape[0], w.shape[0]
    oh = (xp_.shape[2] - dilation[0] * (w.shape[2] - 1) - 1) // stride[0] + 1
    ow = (xp_.shape[3] - dilation[1] * (w.shape[3] - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow)) + bias.reshape(1, o, 1, 1)
    gx, gw = np.zeros_like(xp_), np.zeros_like(w)
    for b, oc, y, xo, c, i, j, ci, yi, xi in _taps(xp_.shape, w.shape, stride, dilation, groups):
        out[b, oc, y, xo] += w[oc, c, i, j] * xp_[b, ci, yi, xi]
        gx[b, ci, yi, xi] += w[oc, c, i, j] * g[b, oc, y, xo]
        gw[oc, c, i, j] += xp_[b, ci, yi, xi] * g[b, oc, y, xo]
    gx = gx[:, :, padding[0]:padding[0] + x.shape[2], padding[1]:padding[1] + x.shape[3]]
    return out, gx, gw, g.sum(axis=(0, 2, 3))


LAYOUTS = ["im2col", "rows", "hwc"]


def _force(monkeypatch, layout):
    monkeypatch.setattr(windows, "_layout", lambda *args: layout)
    monkeypatch.setattr(windows, "_CHUNK_ENTRIES", 1)  # no-grad forwards take one sample per chunk


def _conv(x, w, bias, case):
    stride, padding, dilation, groups = case[6:]
    return r.nn.functional.conv2d(x, w, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _inputs(case, seed):
    n, c, h, wd, o, kernel, _, _, _, groups = case
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c, h, wd)), rng.standard_normal((o, c // groups) + kernel),
            rng.standard_normal(o))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=lambda case: "x".join(map(str, case[:4])) + f"-k{case[5]}-s{case[6]}")
def test_conv2d_values_and_gradients_match_brute_force_loops(monkeypatch, layout, case):
    if layout == "rows" and case[6] != (1, 1) and case[8] != (1, 1):
        pytest.skip("the row-run layout takes strided convolutions only undilated")
    if layout == "hwc" and case[9] != 1:
        pytest.skip("the channels-last layout takes one group only")
    _force(monkeypatch, layout)
    x, w, bias = _inputs(case, 0)
    xt, wt, bt = (r.tensor(a, requires_grad=True) for a in (x, w, bias))
    out = _conv(xt, wt, bt, case)
    g = np.random.default_rng(1).standard_normal(tuple(out.shape))
    out.backward(r.tensor(g))
    expected = _reference(x, w, bias, g, *case[6:])
    for got, want in zip((out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()), expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda a, b, c: _conv(a, b, c, case), (xt, wt, bt))
    with r.no_grad():  # the chunked forward
        np.testing.assert_allclose(_conv(xt, wt, bt, case).numpy(), expected[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_float32_without_bias_and_only_some_gradients(monkeypatch, layout):
    _force(monkeypatch, layout)
    case = CASES[0]
    x, w, _ = _inputs(case, 2)
    wt = r.tensor(w.astype(np.float32), requires_grad=True)
    out = _conv(r.tensor(x.astype(np.float32)), wt, None, case)
    assert out.dtype is r.float32
    g = np.ones(tuple(out.shape))
    out.backward(r.tensor(g, dtype=r.float32))
    ref_out, _, ref_gw, _ = _reference(x, w, np.zeros(w.shape[0]), g, *case[6:])
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wt.grad.numpy(), ref_gw, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", [CASES[1], CASES[2]], ids=["strided", "stride1"])
def test_conv2d_of_a_transposed_view(monkeypatch, layout, case):
    """The row runs read across rows, so a strided input is copied to rows first."""
    _force(monkeypatch, layout)
    x, w, bias = _inputs(case, 6)
    xt = r.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2)), requires_grad=True)
    out = _conv(xt.transpose(2, 3), r.tensor(w), r.tensor(bias), case)
    g = np.random.default_rng(7).standard_normal(tuple(out.shape))
    out.backward(r.tensor(g))
    ref_out, ref_gx = _reference(x, w, bias, g, *case[6:])[:2]
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(xt.grad.numpy().transpose(0, 1, 3, 2), ref_gx, rtol=1e-10, atol=1e-10)


def test_conv2d_wrapped_columns_do_not_spread_inf(monkeypatch):
    """In the row-run layout the columns past each output row read inputs that the weight position
    they stand for never reaches; the gradient there is zero, so only 0 * inf could leak through. An
    inf input (and an inf weight) give exactly the reference's infs and nans."""
    _force(monkeypatch, "rows")
    case = (2, 2, 9, 8, 2, (3, 3), (1, 1), (0, 0), (1, 1), 1)
    x, w, bias = _inputs(case, 3)
    x[0, 1, 4, 1] = np.inf   # column 1 of a row: read by the wrapped columns of weight column 2 only
    w[1, 0, 2, 2] = -np.inf
    xt, wt, bt = (r.tensor(a, requires_grad=True) for a in (x, w, bias))
    out = _conv(xt, wt, bt, case)
    g = np.random.default_rng(4).standard_normal(tuple(out.shape))
    out.backward(r.tensor(g))
    with np.errstate(invalid="ignore"):
        ref_out, ref_gx, ref_gw, _ = _reference(x, w, bias, g, *case[6:])
    assert np.isfinite(ref_gw[:, 1, :, 2]).all()  # the case is the one meant: finite where 0 * inf could leak
    np.testing.assert_allclose(wt.grad.numpy(), ref_gw, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(xt.grad.numpy(), ref_gx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-10, atol=1e-10)


def test_sample_chunks_cover_the_batch_once():
    assert windows._sample_chunks(5, windows._CHUNK_ENTRIES // 2) == [(0, 2), (2, 4), (4, 5)]
    assert windows._sample_chunks(3, windows._CHUNK_ENTRIES * 4) == [(0, 1), (1, 2), (2, 3)]
    assert windows._sample_chunks(3, 1) == [(0, 3)]


def test_the_row_run_layout_is_chosen_for_the_nature_cnn_batch_and_not_where_it_costs():
    pays = windows._by_rows_pays
    assert pays((32, 4, 84, 84), (32, 4, 8, 8), (4, 4), (1, 1), (20, 20))
    assert pays((32, 32, 20, 20), (64, 32, 4, 4), (2, 2), (1, 1), (9, 9))
    assert pays((32, 64, 9, 9), (64, 64, 3, 3), (1, 1), (1, 1), (7, 7))
    assert not pays((1, 4, 84, 84), (32, 4, 8, 8), (4, 4), (1, 1), (20, 20))        # small: im2col's gather is cheap
    assert not pays((32, 64, 84, 84), (64, 64, 3, 3), (2, 2), (2, 2), (40, 40))     # strided and dilated
    assert not pays((32, 64, 84, 84), (64, 64, 3, 3), (2, 2), (1, 1), (41, 41))     # 3x3 padded to 4x4: 1.8x
    assert not pays((8, 3, 100, 100), (32, 3, 5, 5), (2, 2), (1, 1), (48, 48))      # 5x5 padded to 6x6: 1.5x
    assert pays((32, 16, 66, 66), (32, 16, 3, 3), (1, 1), (1, 1), (64, 64))          # 3x3, padding 1: 1.03x
    assert not pays((32, 8, 20, 20), (8, 8, 15, 15), (1, 1), (1, 1), (6, 6))        # mostly wrapped columns


def test_the_channels_last_layout_is_chosen_for_short_rows_over_many_channels():
    layout = windows._layout
    # the Nature CNN at batch 32; its first layer folds its stride into channels (runs of 8*4*4 entries)
    assert layout((32, 4, 84, 84), (32, 4, 8, 8), (4, 4), (1, 1), 1, (20, 20)) == "hwc"
    assert layout((32, 32, 20, 20), (64, 32, 4, 4), (2, 2), (1, 1), 1, (9, 9)) == "hwc"
    assert layout((32, 64, 9, 9), (64, 64, 3, 3), (1, 1), (1, 1), 1, (7, 7)) == "hwc"
    # batch 1: the first layer still; the others have fewer columns than 4x the weight's entries
    assert layout((1, 4, 84, 84), (32, 4, 8, 8), (4, 4), (1, 1), 1, (20, 20)) == "hwc"
    assert layout((1, 32, 20, 20), (64, 32, 4, 4), (2, 2), (1, 1), 1, (9, 9)) == "im2col"
    assert layout((1, 64, 9, 9), (64, 64, 3, 3), (1, 1), (1, 1), 1, (7, 7)) == "im2col"
    assert layout((1, 64, 18, 18), (64, 64, 3, 3), (1, 1), (1, 1), 1, (16, 16)) == "hwc"
    assert layout((8, 32, 66, 66), (32, 32, 3, 3), (1, 1), (1, 1), 1, (64, 64)) == "rows"   # long rows
    assert layout((8, 64, 34, 34), (64, 64, 3, 3), (1, 1), (1, 1), 1, (32, 32)) == "rows"
    assert layout((16, 16, 16, 16), (32, 16, 3, 3), (1, 1), (1, 1), 1, (14, 14)) == "rows"   # runs of 48
    assert layout((8, 128, 8, 8), (64, 128, 1, 1), (1, 1), (1, 1), 1, (8, 8)) == "im2col"    # 1x1
    assert layout((32, 64, 9, 9), (64, 32, 3, 3), (1, 1), (1, 1), 2, (7, 7)) != "hwc"      # groups
    assert layout((32, 3, 84, 84), (32, 3, 3, 3), (2, 2), (1, 1), 1, (41, 41)) != "hwc"    # not whole strides
    assert layout((8, 3, 208, 208), (32, 3, 8, 8), (4, 4), (1, 1), 1, (51, 51)) == "rows"   # folds, but long rows
    assert windows._hwc_fold((32, 4, 8, 8), (4, 4), (1, 1)) == (4, 4)
    assert windows._hwc_fold((64, 32, 4, 4), (2, 2), (1, 1)) == (1, 1)   # runs of 128 already
    assert windows._hwc_fold((32, 4, 8, 8), (4, 4), (2, 2)) == (1, 1)   # dilated


@pytest.mark.cuda
@pytest.mark.skipif(not r.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[6]], ids=["k8s4", "k5x4s3x2", "groups"])
def test_conv2d_on_cuda_matches_the_cpu(monkeypatch, layout, case):
    if layout == "hwc" and case[9] != 1:
        pytest.skip("the channels-last layout takes one group only")
    _force(monkeypatch, layout)
    x, w, bias = _inputs(case, 5)
    grads = []
    for device in ("cpu", "cuda"):
        xt, wt, bt = (r.tensor(a, device=device, requires_grad=True) for a in (x, w, bias))
        out = _conv(xt, wt, bt, case)
        out.backward(r.ones_like(out))
        with r.no_grad():  # the chunked forward
            chunked = _conv(xt, wt, bt, case)
        grads.append([t.detach().cpu().numpy() for t in (out, xt.grad, wt.grad, bt.grad, chunked)])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
