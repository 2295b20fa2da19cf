"""The 3-D convolution and poolings: values against brute-force NumPy loops, float64 gradchecks, unbatched
inputs, the layers, and torch's errors (messages recorded from torch 2.13)."""
import itertools

import numpy as np
import pytest

import rlpipe as r
import rlpipe.nn as nn
import rlpipe.nn.functional as F

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 5, 6, 7))


def _out_size(size, k, s, p, d, ceil_mode):
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= size + p else out


def _positions(size, k, s, p, d, ceil_mode):
    """For each output position along one axis, the input positions of its window (some in the padding)."""
    return [[o * s - p + i * d for i in range(k)] for o in range(_out_size(size, k, s, p, d, ceil_mode))]


def _windows(shape, k, s, p, d, ceil_mode):
    axes = [_positions(n, *a, ceil_mode) for n, a in zip(shape, zip(k, s, p, d))]
    return itertools.product(*(enumerate(a) for a in axes))


def ref_max_pool3d(x, k, s, p, d, ceil_mode=False):
    shape = x.shape[2:]
    outs = [len(_positions(n, *a, ceil_mode)) for n, a in zip(shape, zip(k, s, p, d))]
    out, idx = np.empty(x.shape[:2] + tuple(outs)), np.empty(x.shape[:2] + tuple(outs), dtype=np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        for (a, za), (b, ya), (e, xa) in _windows(shape, k, s, p, d, ceil_mode):
            best, where = -np.inf, -1
            for z, y, w in itertools.product(za, ya, xa):  # scan order: the first maximum wins
                if 0 <= z < shape[0] and 0 <= y < shape[1] and 0 <= w < shape[2] and x[n, c, z, y, w] > best:
                    best, where = x[n, c, z, y, w], (z * shape[1] + y) * shape[2] + w
            out[n, c, a, b, e], idx[n, c, a, b, e] = best, where
    return out, idx


def ref_avg_pool3d(x, k, s, p, ceil_mode=False, include_pad=True, divisor=None):
    shape = x.shape[2:]
    outs = [len(_positions(n, *a, 1, ceil_mode)) for n, a in zip(shape, zip(k, s, p))]
    out = np.empty(x.shape[:2] + tuple(outs))
    for (a, za), (b, ya), (e, xa) in _windows(shape, k, s, p, (1, 1, 1), ceil_mode):
        inside = [[i for i in axis if 0 <= i < n] for axis, n in zip((za, ya, xa), shape)]
        total = sum(x[:, :, z, y, w] for z, y, w in itertools.product(*inside))
        in_padded = [len([i for i in axis if i < n + pp]) for axis, n, pp in zip((za, ya, xa), shape, p)]
        count = np.prod(in_padded) if include_pad else np.prod([len(i) for i in inside])
        out[:, :, a, b, e] = total / (divisor or count)
    return out


def _bins(n, out):
    return [range(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]


def ref_adaptive(x, sizes, reduce):
    out = np.empty(x.shape[:2] + tuple(sizes))
    for (a, za), (b, ya), (e, xa) in itertools.product(*(enumerate(_bins(n, o)) for n, o in zip(x.shape[2:], sizes))):
        out[:, :, a, b, e] = reduce(x[:, :, za[0]:za[-1] + 1, ya[0]:ya[-1] + 1, xa[0]:xa[-1] + 1], axis=(2, 3, 4))
    return out


def ref_conv3d(x, w, b, s, p, d, groups):
    xp = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in p])
    k = w.shape[2:]
    outs = [(n - dd * (kk - 1) - 1) // ss + 1 for n, kk, ss, dd in zip(xp.shape[2:], k, s, d)]
    out = np.zeros((x.shape[0], w.shape[0]) + tuple(outs))
    per_group_in, per_group_out = x.shape[1] // groups, w.shape[0] // groups
    for o, z, y, v in np.ndindex(w.shape[0], *outs):
        g = o // per_group_out
        win = xp[:, g * per_group_in:(g + 1) * per_group_in, z * s[0]:z * s[0] + d[0] * (k[0] - 1) + 1:d[0],
                 y * s[1]:y * s[1] + d[1] * (k[1] - 1) + 1:d[1], v * s[2]:v * s[2] + d[2] * (k[2] - 1) + 1:d[2]]
        out[:, o, z, y, v] = (win * w[o]).sum(axis=(1, 2, 3, 4)) + (0 if b is None else b[o])
    return out


MAX_CASES = [((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False),
             ((2, 3, 2), (1, 2, 3), (1, 1, 0), (1, 1, 2), True),
             ((3, 2, 3), (2, 2, 2), (1, 0, 1), (1, 2, 1), True)]


@pytest.mark.parametrize("k, s, p, d, ceil_mode", MAX_CASES)
def test_max_pool3d_values_and_indices(k, s, p, d, ceil_mode):
    out, idx = F.max_pool3d(r.tensor(X), k, s, p, d, ceil_mode, return_indices=True)
    want, want_idx = ref_max_pool3d(X, k, s, p, d, ceil_mode)
    np.testing.assert_allclose(out.numpy(), want)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    np.testing.assert_allclose(F.max_pool3d(r.tensor(X[0]), k, s, p, d, ceil_mode).numpy(), want[0])


def test_max_pool3d_ties_pick_the_first_in_scan_order():
    x = np.zeros((1, 1, 2, 2, 2))
    x[0, 0, 1, 0, 0] = x[0, 0, 0, 1, 1] = 3.0
    _, idx = F.max_pool3d_with_indices(r.tensor(x), 2)
    assert idx.numpy().ravel().tolist() == [3]


def test_max_pool3d_window_with_nothing_above_minus_inf_points_at_its_first_tap():
    # recorded from torch 2.13: the padding never wins, the window's first input element does
    x = r.tensor([-np.inf, -np.inf, 5.0, -np.inf]).reshape(1, 1, 1, 1, 4)
    out, idx = F.max_pool3d(x, (1, 1, 2), (1, 1, 2), (0, 0, 1), return_indices=True)
    assert out.numpy().ravel().tolist() == [-np.inf, 5.0, -np.inf]
    assert idx.numpy().ravel().tolist() == [0, 2, 3]


@pytest.mark.parametrize("ceil_mode, include_pad, divisor", [(False, True, None), (True, False, None),
                                                             (True, True, None), (False, True, 5)])
def test_avg_pool3d_values(ceil_mode, include_pad, divisor):
    k, s, p = (3, 2, 3), (2, 1, 2), (1, 1, 1)
    out = F.avg_pool3d(r.tensor(X), k, s, p, ceil_mode, include_pad, divisor)
    np.testing.assert_allclose(out.numpy(), ref_avg_pool3d(X, k, s, p, ceil_mode, include_pad, divisor))
    unbatched = F.avg_pool3d(r.tensor(X[1]), k, s, p, ceil_mode, include_pad, divisor)
    np.testing.assert_allclose(unbatched.numpy(), ref_avg_pool3d(X, k, s, p, ceil_mode, include_pad, divisor)[1])


@pytest.mark.parametrize("sizes", [(3, 4, 5), (1, 1, 1), (5, 6, 7), (2, 5, 3)])
def test_adaptive_pools_values(sizes):
    np.testing.assert_allclose(F.adaptive_avg_pool3d(r.tensor(X), sizes).numpy(), ref_adaptive(X, sizes, np.mean))
    out, idx = F.adaptive_max_pool3d(r.tensor(X), sizes, return_indices=True)
    want = ref_adaptive(X, sizes, np.max)
    np.testing.assert_allclose(out.numpy(), want)
    flat = X.reshape(2, 3, -1)
    np.testing.assert_allclose(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2), want.reshape(2, 3, -1))


def test_adaptive_sizes_none_int_and_unbatched():
    assert F.adaptive_avg_pool3d(r.tensor(X), (None, 2, None)).shape == (2, 3, 5, 2, 7)
    assert F.adaptive_max_pool3d(r.tensor(X[0]), 2).shape == (3, 2, 2, 2)
    np.testing.assert_allclose(F.adaptive_avg_pool3d(r.tensor(X[0]), 1).numpy(), X[0].mean(axis=(1, 2, 3),
                                                                                              keepdims=True))


CONV_CASES = [dict(stride=1, padding=0, dilation=1, groups=1), dict(stride=(2, 1, 2), padding=(1, 2, 0),
              dilation=(2, 1, 1), groups=1), dict(stride=1, padding=1, dilation=1, groups=3)]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv3d_values(case):
    w = RNG.standard_normal((6, 3 // case["groups"], 2, 3, 2))
    b = RNG.standard_normal(6)
    out = F.conv3d(r.tensor(X), r.tensor(w), r.tensor(b), **case)
    s, p, d = (tuple(v) if isinstance(v, tuple) else (v,) * 3 for v in (case["stride"], case["padding"],
                                                                           case["dilation"]))
    np.testing.assert_allclose(out.numpy(), ref_conv3d(X, w, b, s, p, d, case["groups"]), atol=1e-12)
    np.testing.assert_allclose(F.conv3d(r.tensor(X[0]), r.tensor(w), None, **case).numpy(),
                               ref_conv3d(X[:1], w, None, s, p, d, case["groups"])[0], atol=1e-12)


def test_conv3d_same_and_valid_padding():
    w = RNG.standard_normal((2, 3, 2, 3, 4))
    same = F.conv3d(r.tensor(X), r.tensor(w), padding="same", dilation=(1, 2, 1))
    assert same.shape == (2, 2, 5, 6, 7)
    # totals (1, 4, 3): torch pads (0, 1), (2, 2), (1, 2): an odd total's extra zero goes at the end
    padded = np.pad(X, [(0, 0), (0, 0), (0, 1), (2, 2), (1, 2)])
    np.testing.assert_allclose(same.numpy(), ref_conv3d(padded, w, None, (1,) * 3, (0,) * 3, (1, 2, 1), 1),
                               atol=1e-12)
    np.testing.assert_allclose(F.conv3d(r.tensor(X), r.tensor(w), padding="valid").numpy(),
                               ref_conv3d(X, w, None, (1,) * 3, (0,) * 3, (1,) * 3, 1), atol=1e-12)


def test_gradients_float64():
    x = r.tensor(RNG.standard_normal((1, 2, 3, 4, 3)), requires_grad=True)
    w = r.tensor(RNG.standard_normal((2, 1, 2, 2, 2)), requires_grad=True)
    b = r.tensor(RNG.standard_normal(2), requires_grad=True)
    gradcheck = r.autograd.gradcheck
    assert gradcheck(lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1, groups=2), (x, w, b))
    assert gradcheck(lambda x: F.max_pool3d(x, 2, 1, 1, ceil_mode=True), (x,))
    assert gradcheck(lambda x: F.avg_pool3d(x, (2, 3, 2), 1, 1, True, False), (x,))
    assert gradcheck(lambda x: F.avg_pool3d(x, 2, divisor_override=3), (x,))
    assert gradcheck(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (x,))
    assert gradcheck(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), (x,))


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_conv3d_padding_modes(mode, numpy_mode):
    conv = nn.Conv3d(3, 2, (2, 3, 3), padding=(1, 2, 0), padding_mode=mode, dtype=r.float64)
    padded = np.pad(X, [(0, 0), (0, 0), (1, 1), (2, 2), (0, 0)], mode=numpy_mode)
    want = ref_conv3d(padded, conv.weight.detach().numpy(), conv.bias.detach().numpy(), (1,) * 3, (0,) * 3, (1,) * 3, 1)
    np.testing.assert_allclose(conv(r.tensor(X)).detach().numpy(), want, atol=1e-12)


def test_double_backward_float64():
    x = r.tensor(RNG.standard_normal((1, 2, 3, 4, 3)), requires_grad=True)
    w = r.tensor(RNG.standard_normal((2, 2, 2, 2, 2)), requires_grad=True)
    gradgradcheck = r.autograd.gradgradcheck
    assert gradgradcheck(lambda x, w: F.conv3d(x, w, padding=1, stride=(1, 2, 1)), (x, w))
    assert gradgradcheck(lambda x: F.max_pool3d(x, 2, 1, 1), (x,))
    assert gradgradcheck(lambda x: F.avg_pool3d(x, 2, 1, 1, True, False), (x,))
    assert gradgradcheck(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (x,))


def test_layers():
    r.manual_seed(0)
    conv = nn.Conv3d(3, 4, (2, 3, 2), stride=(1, 2, 1), padding=1, bias=True)
    assert conv.weight.shape == (4, 3, 2, 3, 2)
    want = ref_conv3d(X, conv.weight.detach().numpy(), conv.bias.detach().numpy(), (1, 2, 1), (1, 1, 1), (1,) * 3, 1)
    np.testing.assert_allclose(conv(r.tensor(X, dtype=r.float32)).detach().numpy(), want, rtol=1e-4, atol=1e-5)
    circular = nn.Conv3d(3, 2, 3, padding=1, padding_mode="circular", bias=False)
    wrapped = np.pad(X, [(0, 0), (0, 0)] + [(1, 1)] * 3, mode="wrap")
    np.testing.assert_allclose(circular(r.tensor(X, dtype=r.float32)).detach().numpy(),
                               ref_conv3d(wrapped, circular.weight.detach().numpy(), None, (1,) * 3, (0,) * 3,
                                          (1,) * 3, 1), rtol=1e-4, atol=1e-5)
    assert repr(circular) == ("Conv3d(3, 2, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), bias=False, "
                              "padding_mode=circular)")
    x = r.tensor(X)
    np.testing.assert_allclose(nn.MaxPool3d(2, return_indices=True)(x)[0].numpy(),
                               ref_max_pool3d(X, (2,) * 3, (2,) * 3, (0,) * 3, (1,) * 3)[0])
    np.testing.assert_allclose(nn.AvgPool3d(2, ceil_mode=True)(x).numpy(),
                               ref_avg_pool3d(X, (2,) * 3, (2,) * 3, (0,) * 3, True))
    np.testing.assert_allclose(nn.AdaptiveAvgPool3d(2)(x).numpy(), ref_adaptive(X, (2, 2, 2), np.mean))
    np.testing.assert_allclose(nn.AdaptiveMaxPool3d((1, 2, 3))(x).numpy(), ref_adaptive(X, (1, 2, 3), np.max))


_X5 = r.randn(1, 2, 4, 4, 4)
ERRORS = [
    (lambda: F.max_pool3d(r.randn(2, 4, 4), 2), "non-empty 4D or 5D (batch mode) tensor expected for input"),
    (lambda: F.max_pool3d(_X5, (2, 2)), "max_pool3d: kernel_size must either be a single int, or a tuple of three "
                                        "ints"),
    (lambda: F.max_pool3d(_X5, 2, padding=2), "pad should be at most half of effective kernel size, but got pad=2, "
                                              "kernel_size=2 and dilation=1"),
    (lambda: F.max_pool3d(_X5, 5), "Given input size: (2x4x4x4). Calculated output size: (2x0x0x0). Output size is "
                                   "too small"),
    (lambda: F.avg_pool3d(r.randn(2, 4, 4), 2), "non-empty 4D or 5D (batch mode) tensor expected for input"),
    (lambda: F.avg_pool3d(_X5, (2, 2)), "avg_pool3d: kernel_size must be a single int, or a tuple of three ints"),
    (lambda: F.avg_pool3d(_X5, 2, padding=2), "pad should be at most half of effective kernel size, but got pad=2, "
                                              "kernel_size=2 and dilation=1"),
    (lambda: F.avg_pool3d(_X5, 2, divisor_override=0), "divisor must be not zero"),
    (lambda: F.avg_pool3d(_X5, 5), "input image (T: 4 H: 4 W: 4) smaller than kernel size (kT: 5 kH: 5 kW: 5)"),
    (lambda: F.avg_pool3d(r.randn(1, 1, 5, 6, 2), 3, 1, 1), "input image (T: 5 H: 6 W: 2) smaller than kernel size "
                                                            "(kT: 3 kH: 3 kW: 3)"),  # padding does not count here
    (lambda: F.adaptive_avg_pool3d(r.randn(2, 4, 4), 2), "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got "
                                                         "[2, 4, 4]"),
    (lambda: F.adaptive_avg_pool3d(_X5, (2, 2)), "adaptive_avg_pool3d: output_size must be 3"),
    (lambda: F.adaptive_max_pool3d(r.randn(2, 4, 4), 2), "adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: "
                                                         "[2, 4, 4]"),
    (lambda: F.adaptive_max_pool3d(_X5, (2, 2)), "adaptive_max_pool3d(): internal error: output_size.size() must be "
                                                 "3"),
    (lambda: F.conv3d(r.randn(2, 4, 4), r.randn(3, 2, 2, 2, 2)), "Expected 4D (unbatched) or 5D (batched) input to "
                                                                 "conv3d, but got input of size: [2, 4, 4]"),
    (lambda: F.conv3d(_X5, r.randn(3, 3, 2, 2, 2)), "Given groups=1, weight of size [3, 3, 2, 2, 2], expected "
                                                    "input[1, 2, 4, 4, 4] to have 3 channels, but got 2 channels "
                                                    "instead"),
    (lambda: F.conv3d(_X5, r.randn(3, 2, 5, 2, 2)), "Calculated padded input size per channel: (4 x 4 x 4). Kernel "
                                                    "size: (5 x 2 x 2). Kernel size can't be greater than actual "
                                                    "input size"),
    (lambda: F.conv3d(_X5, r.randn(3, 2, 2, 2, 2), stride=2, padding="same"),
     "padding='same' is not supported for strided convolutions"),
    (lambda: F.conv3d(_X5, r.randn(3, 2, 2, 2, 2), stride=(1, 1)),
     "expected stride to be a single integer value or a list of 3 values to match the convolution dimensions, but "
     "got stride=[1, 1]"),
]


def test_top_level_forms_and_float_only():
    x = r.tensor(X)
    np.testing.assert_allclose(r.max_pool3d(x, 2).numpy(), F.max_pool3d(x, 2).numpy())
    w = r.tensor(RNG.standard_normal((2, 3, 1, 2, 1)))
    np.testing.assert_allclose(r.conv3d(x, w, None, 1, "same").numpy(), F.conv3d(x, w, padding="same").numpy())
    with pytest.raises(NotImplementedError, match="\"adaptive_max_pool3d_cpu\" not implemented for 'Long'"):
        F.adaptive_max_pool3d(r.ones(1, 1, 2, 2, 2, dtype=r.int64), 1)


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors_as_torch(k):
    call, message = ERRORS[k]
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value) == message


def _all_five(x, w):
    return [F.conv3d(x, w, padding=1, stride=(1, 2, 1)), F.max_pool3d(x, 2, 1, 1, ceil_mode=True),
            F.avg_pool3d(x, 3, 2, 1, True, False), F.adaptive_avg_pool3d(x, (2, 3, 4)),
            F.adaptive_max_pool3d(x, (2, 3, 4))]


@pytest.mark.cuda
def test_on_cuda_as_on_cpu():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    w = RNG.standard_normal((4, 3, 2, 3, 2))
    x = r.tensor(X, device="cuda", requires_grad=True)
    wc = r.tensor(w, device="cuda", requires_grad=True)
    outs = _all_five(x, wc)
    wants = [ref_conv3d(X, w, None, (1, 2, 1), (1,) * 3, (1,) * 3, 1),
             ref_max_pool3d(X, (2,) * 3, (1,) * 3, (1,) * 3, (1,) * 3, True)[0],
             ref_avg_pool3d(X, (3,) * 3, (2,) * 3, (1,) * 3, True, False), ref_adaptive(X, (2, 3, 4), np.mean),
             ref_adaptive(X, (2, 3, 4), np.max)]
    for out, want in zip(outs, wants):
        assert out.device.type == "cuda"
        np.testing.assert_allclose(out.detach().cpu().numpy(), want, atol=1e-10)
    sum(o.sum() for o in outs).backward()
    x_cpu = r.tensor(X, requires_grad=True)
    w_cpu = r.tensor(w, requires_grad=True)
    sum(o.sum() for o in _all_five(x_cpu, w_cpu)).backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), x_cpu.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(wc.grad.cpu().numpy(), w_cpu.grad.numpy(), atol=1e-10)
