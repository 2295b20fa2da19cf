"""Behaviour of the newer nn layers that the recorded torch values cannot pin: the random dropouts (their
statistics over many draws), warnings, in-place forms, ``output_size`` of the transposed convolutions and
parameter initialization."""
import math
import re
import warnings

import numpy as np
import pytest

import rlpipe as r
import rlpipe.nn as nn
import rlpipe.nn.functional as F


def test_dropout1d_and_2d_zero_whole_channels_and_rescale():
    r.manual_seed(0)
    x = r.ones(64, 32, 5, 4)
    out = F.dropout2d(x, 0.25).numpy()
    per_channel = out.reshape(64, 32, -1)
    assert np.all(per_channel.min(axis=2) == per_channel.max(axis=2))  # a channel is dropped whole or kept
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((out == 0).mean() - 0.25) < 0.03
    unbatched = F.dropout1d(r.ones(200, 6), 0.5).numpy()  # [C, L]: each row is a channel
    assert np.all(unbatched.min(axis=1) == unbatched.max(axis=1)) and 0.35 < (unbatched == 0).mean() < 0.65


def test_channel_dropout_eval_inplace_and_gradient():
    x = r.randn(2, 3, 4)
    assert F.dropout1d(x, 0.5, training=False) is x
    x4 = r.randn(2, 3, 4, 2)
    assert r.equal(nn.Dropout2d(0.5).eval()(x4), x4)
    y = r.ones(8, 16, 3)
    assert F.dropout1d(y, 0.5, inplace=True) is y and set(np.unique(y.numpy())) <= {0.0, 2.0}
    w = r.ones(4, 5, 3, requires_grad=True)
    out = F.dropout1d(w, 0.5)
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), out.detach().numpy())  # the mask times the scale


def test_dropout2d_on_3d_input_warns_and_drops_per_channel():
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        out = F.dropout2d(r.ones(40, 30, 5), 0.5).numpy()
    assert np.all(out.min(axis=2) == out.max(axis=2))



def test_dropout3d_zeroes_whole_channels_batched_and_unbatched():
    r.manual_seed(0)
    out = F.dropout3d(r.ones(32, 16, 2, 3, 2), 0.25).numpy()  # [N, C, D, H, W]
    per_channel = out.reshape(32, 16, -1)
    assert np.all(per_channel.min(axis=2) == per_channel.max(axis=2))
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)} and abs((out == 0).mean() - 0.25) < 0.05
    unbatched = nn.Dropout3d(0.5)(r.ones(300, 2, 2, 2)).numpy()  # [C, D, H, W]: dim 0 holds the channels
    per_channel = unbatched.reshape(300, -1)
    assert np.all(per_channel.min(axis=1) == per_channel.max(axis=1)) and 0.35 < (unbatched == 0).mean() < 0.65
    x = r.randn(2, 3, 2, 2, 2)
    assert r.equal(nn.Dropout3d(0.5).eval()(x), x) and F.dropout3d(x, 0.5, training=False) is x
    assert repr(nn.Dropout3d(0.2, inplace=True)) == "Dropout3d(p=0.2, inplace=True)"


def test_dropout3d_rejects_bad_p_and_warns_on_other_ranks():
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout3d(1.5)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got -0.1"):
        F.dropout3d(r.ones(2, 2, 2, 2), -0.1)
    with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input to dropout3d"):
        out = F.dropout3d(r.ones(50, 4, 4), 0.5).numpy()  # unbatched, as torch: dim 0 holds the channels
    assert np.all(out.reshape(50, -1).min(axis=1) == out.reshape(50, -1).max(axis=1))


def test_adaptive_pooling_rejects_integers_as_torch():
    # messages recorded from torch 2.13; a 1 x 1 output is a mean there, and fails as mean fails
    x = r.ones(4, 4, 4, dtype=r.int32)
    for pool in (F.adaptive_avg_pool2d, F.adaptive_max_pool2d):
        with pytest.raises(NotImplementedError, match=f'"{pool.__name__}" not implemented for \'Int\''):
            pool(x, 2)
    with pytest.raises(NotImplementedError, match="\"adaptive_avg_pool2d\" not implemented for 'Byte'"):
        F.adaptive_avg_pool1d(r.ones(4, 4, dtype=r.uint8), 2)
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        F.adaptive_avg_pool2d(x, 1)

def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    r.manual_seed(1)
    x = r.randn(400000, dtype=r.float64)
    out = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(out.mean()) < 0.01 and abs(out.var() - 1) < 0.01
    # the dropped entries all take one value: a * (-alpha) + b
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha ** 2 * 0.2 + 1) * 0.8)
    dropped = a * alpha * 0.2 - alpha * a
    assert abs(np.isclose(out, dropped).mean() - 0.2) < 0.005
    assert F.alpha_dropout(x, 0.2) is x  # training defaults to False
    assert r.equal(F.alpha_dropout(x, 1.0, training=True), r.zeros_like(x))


def test_feature_alpha_dropout_drops_whole_channels():
    out = F.feature_alpha_dropout(r.randn(50, 20, 6), 0.5, training=True).numpy()
    x = out.reshape(50 * 20, 6)
    constant = np.isclose(x.min(axis=1), x.max(axis=1))
    assert 0.35 < constant.mean() < 0.65


def test_kl_div_mean_warns_and_batchmean_divides_by_batch():
    x = F.log_softmax(r.randn(4, 3, dtype=r.float64), 1)
    t = F.softmax(r.randn(4, 3, dtype=r.float64), 1)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        mean = F.kl_div(x, t)
    expected = (t.numpy() * (np.log(t.numpy()) - x.numpy()))
    assert math.isclose(mean.item(), expected.mean())
    assert math.isclose(F.kl_div(x, t, reduction="batchmean").item(), expected.sum() / 4)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert math.isclose(F.kl_div(x, t, reduce=False).sum().item(), expected.sum())


def test_conv_transpose_output_size_picks_the_output_padding():
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    x = r.randn(1, 2, 4, 5)
    assert m(x).shape == (1, 3, 7, 9)
    assert m(x, output_size=(8, 10)).shape == (1, 3, 8, 10)
    assert m(x, output_size=[1, 3, 8, 9]).shape == (1, 3, 8, 9)
    m1 = nn.ConvTranspose1d(2, 3, 3, stride=3)
    assert m1(r.randn(2, 4), output_size=[13]).shape == (3, 13)


def test_transposed_weight_shape_and_initialization_bounds():
    m = nn.ConvTranspose2d(4, 6, (3, 2), groups=2)
    assert m.weight.shape == (4, 3, 3, 2) and m.bias.shape == (6,)
    bound = 1 / math.sqrt(3 * 3 * 2)  # fan_in: dim 1 times the kernel, as torch computes it
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    assert nn.Conv1d(4, 6, 5).weight.shape == (6, 4, 5)


def test_norm_modules_parameters():
    assert [n for n, _ in nn.GroupNorm(2, 4).named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in nn.GroupNorm(2, 4, bias=False).named_parameters()] == ["weight"]
    assert list(nn.InstanceNorm1d(3).state_dict()) == []
    assert list(nn.InstanceNorm1d(3, affine=True, bias=False).state_dict()) == ["weight"]
    assert r.equal(nn.RMSNorm([2, 3]).weight, r.ones(2, 3))


def test_instance_norm_unbatched_and_feature_mismatch_warning():
    x = r.randn(3, 5, dtype=r.float64)
    out = nn.InstanceNorm1d(3)(x).numpy()
    expected = (x.numpy() - x.numpy().mean(1, keepdims=True)) / np.sqrt(x.numpy().var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(4)(x)


def test_pooling_modules_return_indices():
    out, idx = nn.MaxPool1d(2, return_indices=True)(r.tensor([[[1.0, 3.0, 2.0, 0.0]]]))
    assert out.tolist() == [[[3.0, 2.0]]] and idx.tolist() == [[[1, 2]]]
    out, idx = nn.AdaptiveMaxPool2d(1, return_indices=True)(r.tensor([[[1.0, 5.0], [7.0, 2.0]]]))
    assert out.tolist() == [[[7.0]]] and idx.tolist() == [[[2]]]
    assert idx.requires_grad is False


def test_upsample_module_attributes():
    assert nn.Upsample(scale_factor=(2, 3)).scale_factor == (2.0, 3.0)
    assert nn.Upsample(size=4).scale_factor is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F.upsample_bilinear(r.ones(1, 1, 2, 2), scale_factor=2).shape == (1, 1, 4, 4)


def test_lazy_convolutions_take_in_channels_from_the_first_input():
    m = nn.LazyConvTranspose2d(4, 3, groups=2)
    assert repr(m) == "LazyConvTranspose2d(0, 4, kernel_size=(3, 3), stride=(1, 1), groups=2)"
    assert m(r.randn(1, 6, 5, 5)).shape == (1, 4, 7, 7)
    assert type(m) is nn.ConvTranspose2d and m.weight.shape == (6, 2, 3, 3)
    c = nn.LazyConv1d(5, 2)
    assert c(r.randn(3, 7)).shape == (5, 6) and type(c) is nn.Conv1d and c.weight.shape == (5, 3, 2)
    t = nn.LazyConvTranspose1d(2, 3, bias=False)
    assert t(r.randn(2, 4, 5)).shape == (2, 2, 7) and t.bias is None and t.weight.shape == (4, 2, 3)
    with pytest.raises(RuntimeError, match=r"Expected 2D \(unbatched\) or 3D \(batched\) input to LazyConv1d"):
        nn.LazyConv1d(5, 2)(r.randn(3))


def test_with_indices_forms_return_the_pair():
    x = r.randn(2, 3, 6)
    for pooled in (F.max_pool1d_with_indices(x, 2), F.adaptive_max_pool1d_with_indices(x, 3),
                   F.adaptive_max_pool2d_with_indices(x.reshape(2, 3, 2, 3), 1)):
        values, indices = pooled
        assert indices.dtype == r.int64 and values.shape == indices.shape
    assert r.equal(F.max_pool1d_with_indices(x, 2)[0], F.max_pool1d(x, 2))


def test_grid_functions_warn_without_align_corners_and_identity_grid_copies():
    theta = r.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=r.float64)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        grid = F.affine_grid(theta, (1, 2, 3, 4))
    x = r.randn(1, 2, 3, 4, dtype=r.float64)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        out = F.grid_sample(x, grid)
    np.testing.assert_allclose(out.numpy(), x.numpy(), atol=1e-12)  # the identity map samples every pixel centre


def test_cdist_gradients_and_zero_distance():
    a = r.randn(2, 3, 4, dtype=r.float64, requires_grad=True)
    b = r.randn(5, 4, dtype=r.float64, requires_grad=True)
    assert r.autograd.gradcheck(lambda a, b: r.cdist(a, b), (a, b))
    assert r.autograd.gradcheck(lambda a, b: r.cdist(a, b, p=1.5), (a, b))
    x = r.zeros(2, 3, requires_grad=True)
    r.cdist(x, r.zeros(2, 3)).sum().backward()
    assert r.equal(x.grad, r.zeros(2, 3))  # as torch: no nan at zero distance


def test_pooling_zero_size_inputs_as_torch():
    # messages and shapes recorded from torch 2.13
    for pool in (lambda t: F.max_pool2d(t, 3, 2), lambda t: F.avg_pool2d(t, 3, 2)):
        for shape in ((1, 0, 50, 32), (0, 50, 32), (3, 0, 32)):
            with pytest.raises(RuntimeError, match=re.escape(f"Expected 3D or 4D (batch mode) tensor with optional "
                                                             f"0 dim batch size for input, but got:{list(shape)}")):
                pool(r.randn(*shape))
        assert pool(r.randn(0, 2, 5, 5)).shape == (0, 2, 2, 2)
    with pytest.raises(RuntimeError, match=re.escape("max_pool1d: Expected 2D or 3D (batch mode) tensor with "
                                                     "optional 0 dim batch size for input, but got:[1, 0, 4]")):
        F.max_pool1d(r.ones(1, 0, 4), 2)
    with pytest.raises(RuntimeError, match=re.escape("Given input size: (1x1x4). Calculated output size: "
                                                     "(1x1x0). Output size is too small")):
        F.max_pool1d_with_indices(r.ones(1, 1, 4), 3, stride=2, padding=0, dilation=2)
    with pytest.raises(RuntimeError, match=re.escape("max_pool1d() Invalid computed output size: 0")):
        F.max_pool1d(r.ones(1, 1, 4), 3, stride=2, padding=0, dilation=2)
    with pytest.raises(RuntimeError, match=re.escape("adaptive_max_pool2d(): Expected input to have non-zero size "
                                                     "for non-batch dimensions, but input has sizes [1, 0, 4, 4] "
                                                     "with dimension 1 being empty")):
        F.adaptive_max_pool2d(r.ones(1, 0, 4, 4), 2)
    empty = r.ones(0, 16, 4, 4, requires_grad=True)
    out, idx = F.adaptive_max_pool2d(empty, 2, return_indices=True)
    assert out.shape == idx.shape == (0, 16, 2, 2) and F.adaptive_max_pool1d(r.ones(0, 16, 4), 2).shape == (0, 16, 2)
    out.sum().backward()
    assert empty.grad.shape == (0, 16, 4, 4)
