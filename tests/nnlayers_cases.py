"""The cases of the newer nn layers and functional ops, shared by ``fixtures/make_nnlayers_golden.py``
(which runs them with torch 2.13 in the peer venv and records the results) and ``test_nnlayers_*.py``
(which runs them with rlpipe and compares).

A functional case is ``fn(F, *inputs)`` with ``F`` torch's or rlpipe's ``nn.functional``, and input
makers ``rng -> array``; float64 inputs are differentiated (``grad``), the others are not. A module
case is a constructor ``make(nn)`` with ``nn`` torch's or rlpipe's ``nn`` and the shape of its input.
The file imports neither library.
"""
import numpy as np


def normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def positive(*shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def target(make):
    """Marks an input maker as a target's: no gradient is asked of it."""
    make.target = True
    return make


def signs(*shape):
    return target(lambda rng: rng.choice([-1.0, 1.0], shape))


def binary(*shape):
    return target(lambda rng: rng.integers(0, 2, shape).astype(np.float64))


def unit(*shape):
    return lambda rng: rng.uniform(0.05, 0.95, shape)


def counts(*shape):
    return target(lambda rng: rng.integers(0, 5, shape).astype(np.float64))


def float32(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def log_probs(*shape):
    return lambda rng: np.log(rng.dirichlet(np.ones(shape[-1]), shape[:-1]))


FUNCTIONAL = {}


def case(name, fn, *makers, grad=True):
    assert name not in FUNCTIONAL, name
    FUNCTIONAL[name] = (fn, makers, grad)


# convolutions
case("conv1d", lambda F, x, w, b: F.conv1d(x, w, b), normal(2, 3, 7), normal(4, 3, 3), normal(4))
case("conv1d_all_args", lambda F, x, w: F.conv1d(x, w, None, 2, 2, 2, 2), normal(2, 4, 9), normal(6, 2, 3))
case("conv1d_same_unbatched", lambda F, x, w: F.conv1d(x, w, padding="same", dilation=2), normal(3, 8),
     normal(2, 3, 4))
case("conv1d_valid_tuple_args", lambda F, x, w: F.conv1d(x, w, stride=(3,), padding="valid"), normal(1, 2, 10),
     normal(2, 2, 2))
case("conv_transpose2d", lambda F, x, w, b: F.conv_transpose2d(x, w, b), normal(2, 3, 4, 5), normal(3, 2, 3, 2),
     normal(2))
case("conv_transpose2d_all_args", lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 2),
                                                                        output_padding=(1, 2), groups=2,
                                                                        dilation=(2, 1)),
     normal(2, 4, 3, 4), normal(4, 3, 3, 3), normal(6))
case("conv_transpose2d_output_padding_below_dilation", lambda F, x, w: F.conv_transpose2d(
    x, w, stride=1, dilation=2, output_padding=1), normal(1, 2, 3, 3), normal(2, 2, 2, 2))
case("conv_transpose2d_unbatched", lambda F, x, w: F.conv_transpose2d(x, w, stride=2, padding=1), normal(2, 3, 3),
     normal(2, 1, 4, 4))
case("conv_transpose2d_float64_bias_on_float32", lambda F, x, w, b: F.conv_transpose2d(x, w, b), float32(1, 2, 3, 3),
     float32(2, 2, 2, 2), normal(2), grad=False)
case("conv_transpose1d", lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2,
                                                               groups=3, dilation=2),
     normal(2, 3, 5), normal(3, 2, 3), normal(6))
case("conv_transpose1d_unbatched", lambda F, x, w: F.conv_transpose1d(x, w), normal(2, 4), normal(2, 3, 2))
case("unfold", lambda F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), normal(2, 3, 5, 6))
case("unfold_unbatched", lambda F, x: F.unfold(x, 2), normal(2, 3, 4))
case("fold", lambda F, x: F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), normal(1, 18, 12))
case("fold_unbatched_overlapping", lambda F, x: F.fold(x, 4, 2), normal(8, 9))

# pooling
case("max_pool1d", lambda F, x: F.max_pool1d(x, 3, 2, 1), normal(2, 3, 8))
case("max_pool1d_indices_ceil", lambda F, x: F.max_pool1d(x, 2, ceil_mode=True, dilation=2, return_indices=True),
     normal(3, 9))
case("avg_pool1d", lambda F, x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False), normal(2, 3, 8))
case("avg_pool1d_ceil", lambda F, x: F.avg_pool1d(x, (4,), ceil_mode=True), normal(3, 9))
case("adaptive_avg_pool1d", lambda F, x: F.adaptive_avg_pool1d(x, 3), normal(2, 3, 7))
case("adaptive_max_pool1d", lambda F, x: F.adaptive_max_pool1d(x, 4, return_indices=True), normal(3, 7))
case("adaptive_max_pool2d", lambda F, x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), normal(2, 3, 7, 5))
case("adaptive_max_pool2d_none_unbatched", lambda F, x: F.adaptive_max_pool2d(x, (None, 3)), normal(2, 4, 8))

case("lp_pool1d", lambda F, x: F.lp_pool1d(x, 2, 3, stride=2), positive(2, 3, 8))
case("lp_pool2d", lambda F, x: F.lp_pool2d(x, 1.5, (2, 3), ceil_mode=True), positive(1, 2, 5, 7))
case("lp_pool2d_inf", lambda F, x: F.lp_pool2d(x, float("inf"), 2), normal(1, 2, 4, 4))
case("max_unpool2d", lambda F, x, i: F.max_unpool2d(x, i, 2), normal(2, 3, 2, 3),
     target(lambda rng: (np.arange(2)[None, None, :, None] * 2 * 6 + np.arange(3) * 2
                         + rng.integers(0, 2, (2, 3, 2, 3)) * 6 + rng.integers(0, 2, (2, 3, 2, 3)))))
case("max_unpool2d_output_size", lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 3, 2, 1, return_indices=True), 3, 2,
                                                              1, output_size=(1, 2, 6, 5)), normal(1, 2, 6, 5))
case("max_unpool1d", lambda F, x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2), normal(2, 3, 7))


# normalization
case("group_norm", lambda F, x, w, b: F.group_norm(x, 2, w, b, eps=1e-3), normal(3, 4, 5, 2), normal(4), normal(4))
case("group_norm_plain", lambda F, x: F.group_norm(x, 3), normal(2, 6, 5))
case("instance_norm", lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b), normal(2, 3, 4, 5), normal(3),
     normal(3))
case("instance_norm_running_eval", lambda F, x, m, v: F.instance_norm(x, m, v, use_input_stats=False), normal(2, 3, 6),
     normal(3), positive(3), grad=False)
case("local_response_norm", lambda F, x: F.local_response_norm(x, 3, alpha=0.1, beta=0.6, k=2.0), normal(2, 5, 3, 2))
case("local_response_norm_3d_even", lambda F, x: F.local_response_norm(x, 4), normal(2, 6, 3))
case("rms_norm", lambda F, x, w: F.rms_norm(x, (3, 4), w, eps=1e-4), normal(2, 3, 4), normal(3, 4))
case("rms_norm_default_eps", lambda F, x: F.rms_norm(x, (5,)), normal(3, 5))
case("rms_norm_float32", lambda F, x: F.rms_norm(x, [4]), float32(2, 4))

# resampling (float32 cases check torch's index rules, which round in float32)
case("interpolate_nearest_size", lambda F, x: F.interpolate(x, size=(5, 3)), normal(1, 2, 4, 7))
case("interpolate_nearest_scale", lambda F, x: F.interpolate(x, scale_factor=(1.7, 0.6)), float32(1, 2, 9, 11))
case("interpolate_nearest_double", lambda F, x: F.interpolate(x, scale_factor=2), normal(1, 1, 3, 2))
case("interpolate_nearest_exact", lambda F, x: F.interpolate(x, size=7, mode="nearest-exact"), normal(2, 2, 5))
case("interpolate_nearest_5d", lambda F, x: F.interpolate(x, size=(3, 2, 5)), normal(1, 1, 2, 3, 3))
case("interpolate_linear", lambda F, x: F.interpolate(x, size=9, mode="linear"), normal(2, 3, 4))
case("interpolate_linear_align", lambda F, x: F.interpolate(x, scale_factor=2.5, mode="linear", align_corners=True),
     normal(1, 2, 5))
case("interpolate_bilinear", lambda F, x: F.interpolate(x, size=(7, 3), mode="bilinear"), normal(2, 2, 4, 5))
case("interpolate_bilinear_scale_float32", lambda F, x: F.interpolate(x, scale_factor=(1.3, 0.45), mode="bilinear"),
     float32(1, 2, 10, 13))
case("interpolate_bilinear_align", lambda F, x: F.interpolate(x, size=(6, 1), mode="bilinear", align_corners=True),
     normal(1, 2, 3, 4))
case("interpolate_bilinear_recompute", lambda F, x: F.interpolate(x, scale_factor=1.5, mode="bilinear",
                                                                  recompute_scale_factor=True), normal(1, 1, 5, 3))
case("interpolate_trilinear", lambda F, x: F.interpolate(x, size=(3, 4, 2), mode="trilinear"), normal(1, 1, 2, 3, 4))
case("interpolate_bicubic", lambda F, x: F.interpolate(x, size=(7, 3), mode="bicubic"), normal(1, 2, 4, 5))
case("interpolate_bicubic_align_scale_float32", lambda F, x: F.interpolate(x, scale_factor=(1.6, 0.7), mode="bicubic",
                                                                           align_corners=True), float32(2, 1, 6, 9))
case("interpolate_bilinear_antialias", lambda F, x: F.interpolate(x, size=(5, 9), mode="bilinear", antialias=True),
     normal(1, 2, 13, 7))
case("interpolate_bicubic_antialias_float32", lambda F, x: F.interpolate(x, scale_factor=(0.3, 0.5), mode="bicubic",
                                                                         antialias=True), float32(2, 1, 17, 10))
case("interpolate_bilinear_antialias_align", lambda F, x: F.interpolate(x, size=(3, 4), mode="bilinear",
                                                                        align_corners=True, antialias=True),
     normal(1, 1, 8, 9))
case("interpolate_area", lambda F, x: F.interpolate(x, scale_factor=0.5, mode="area"), normal(1, 2, 6, 5))
case("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 2), normal(2, 8, 3, 2))
case("pixel_shuffle_extra_batch", lambda F, x: F.pixel_shuffle(x, 3), normal(2, 1, 9, 2, 2))
case("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 2), normal(2, 3, 4, 6))

case("channel_shuffle", lambda F, x: F.channel_shuffle(x, 3), normal(2, 6, 2, 1))


# sampling grids (grid values spread past [-1, 1] to reach every padding mode)
def grid(*shape):
    return lambda rng: rng.uniform(-1.3, 1.3, shape)


case("affine_grid", lambda F, t: F.affine_grid(t, (2, 3, 4, 5), align_corners=False), normal(2, 2, 3))
case("affine_grid_align_corners", lambda F, t: F.affine_grid(t, [1, 1, 3, 2], align_corners=True), normal(1, 2, 3))
case("grid_sample_bilinear_zeros", lambda F, x, g: F.grid_sample(x, g, align_corners=False), normal(2, 2, 3, 4),
     grid(2, 3, 2, 2))
case("grid_sample_bilinear_border_align", lambda F, x, g: F.grid_sample(x, g, padding_mode="border",
                                                                        align_corners=True),
     normal(1, 2, 4, 3), grid(1, 3, 3, 2))
case("grid_sample_bilinear_reflection", lambda F, x, g: F.grid_sample(x, g, padding_mode="reflection",
                                                                      align_corners=False),
     normal(1, 2, 3, 4), lambda rng: rng.uniform(-3.5, 3.5, (1, 4, 3, 2)))
case("grid_sample_reflection_align", lambda F, x, g: F.grid_sample(x, g, padding_mode="reflection",
                                                                   align_corners=True),
     normal(1, 1, 4, 3), lambda rng: rng.uniform(-3.5, 3.5, (1, 3, 4, 2)))
case("grid_sample_nearest", lambda F, x, g: F.grid_sample(x, g, mode="nearest", align_corners=False),
     normal(2, 2, 4, 5), target(grid(2, 3, 3, 2)))
case("grid_sample_float32_affine", lambda F, x, t: F.grid_sample(x, F.affine_grid(t, (1, 2, 5, 6), align_corners=False),
                                                                 align_corners=False),
     float32(1, 2, 7, 8), lambda rng: (np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]]) + 0.05 *
                                       rng.standard_normal((1, 2, 3))).astype(np.float32))


# losses and distances
case("kl_div_batchmean", lambda F, x, t: F.kl_div(x, t, reduction="batchmean"), log_probs(3, 4), unit(3, 4))
case("kl_div_none_zero_target", lambda F, x, t: F.kl_div(x, t * (t > 0.5), reduction="none"), log_probs(3, 4),
     target(unit(3, 4)))  # the zeros of the target have no gradient (nan in torch)
case("kl_div_log_target_sum", lambda F, x, t: F.kl_div(x, t, reduction="sum", log_target=True), log_probs(2, 5),
     log_probs(2, 5))
case("gaussian_nll", lambda F, x, t, v: F.gaussian_nll_loss(x, t, v), normal(4, 3), normal(4, 3), positive(4, 3))
case("gaussian_nll_full_var_missing_dim", lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, full=True, reduction="sum"),
     normal(4, 3), normal(4, 3), positive(4))
case("gaussian_nll_float_var_none", lambda F, x, t: F.gaussian_nll_loss(x, t, 0.7, reduction="none"), normal(4, 2),
     normal(4, 2))
case("poisson_nll", lambda F, x, t: F.poisson_nll_loss(x, t), normal(3, 4), counts(3, 4))
case("poisson_nll_rates_full", lambda F, x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
     positive(3, 4), counts(3, 4))
case("cosine_similarity", lambda F, a, b: F.cosine_similarity(a, b, dim=-1), normal(3, 4), normal(1, 4))
case("pairwise_distance", lambda F, a, b: F.pairwise_distance(a, b), normal(3, 4), normal(3, 4))
case("pairwise_distance_p1_keepdim", lambda F, a, b: F.pairwise_distance(a, b, 1.0, 1e-3, True), normal(3, 4),
     normal(4))
case("margin_ranking", lambda F, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3), normal(6), normal(6), signs(6))
case("soft_margin", lambda F, x, y: F.soft_margin_loss(x, y, reduction="sum"), normal(3, 4), signs(3, 4))
case("hinge_embedding", lambda F, x, y: F.hinge_embedding_loss(x, y, margin=1.5), positive(3, 4), signs(3, 4))
case("cosine_embedding", lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.2, reduction="none"),
     normal(5, 3), normal(5, 3), signs(5))
case("triplet_margin", lambda F, a, p, n: F.triplet_margin_loss(a, p, n), normal(4, 3), normal(4, 3), normal(4, 3))
case("triplet_margin_swap_p1", lambda F, a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, p=1, swap=True,
                                                                        reduction="sum"),
     normal(4, 3), normal(4, 3), normal(4, 3))
case("multilabel_soft_margin", lambda F, x, y, w: F.multilabel_soft_margin_loss(x, y, w), normal(3, 4),
     binary(3, 4), positive(4))

case("triplet_margin_with_distance", lambda F, a, p, n: F.triplet_margin_with_distance_loss(
    a, p, n, distance_function=lambda x, y: 1 - F.cosine_similarity(x, y), margin=0.5, swap=True, reduction="none"),
     normal(4, 3), normal(4, 3), normal(4, 3))
case("multi_margin", lambda F, x, y, w: F.multi_margin_loss(x, y, p=2, margin=0.7, weight=w), normal(4, 5),
     target(lambda rng: rng.integers(0, 5, 4)), target(positive(5)))
case("multi_margin_unbatched", lambda F, x, y: F.multi_margin_loss(x, y, reduction="none"), normal(4),
     target(lambda rng: np.array(2)))
case("multilabel_margin", lambda F, x, y: F.multilabel_margin_loss(x, y, reduction="none"), normal(3, 4),
     target(lambda rng: np.array([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0]])))
case("multilabel_margin_unbatched", lambda F, x, y: F.multilabel_margin_loss(x, y), normal(4),
     target(lambda rng: np.array([2, 2, -1, 0])))
case("pdist", lambda F, x: F.pdist(x), normal(4, 3))
case("pdist_p1", lambda F, x: F.pdist(x, p=1.0), normal(3, 5))


MODULES = {
    "Conv1d": (lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2), (2, 4, 9)),
    "Conv1d_same_circular": (lambda nn: nn.Conv1d(2, 3, 4, padding="same", padding_mode="circular"), (2, 2, 7)),
    "Conv1d_reflect_nobias": (lambda nn: nn.Conv1d(2, 3, 3, padding=2, padding_mode="reflect", bias=False),
                              (2, 2, 5)),
    "ConvTranspose2d": (lambda nn: nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2),
                        (2, 4, 3, 4)),
    "ConvTranspose1d": (lambda nn: nn.ConvTranspose1d(3, 2, 3, stride=2, bias=False, dilation=2), (2, 3, 5)),
    "GroupNorm": (lambda nn: nn.GroupNorm(2, 4), (3, 4, 5)),
    "GroupNorm_no_affine": (lambda nn: nn.GroupNorm(3, 6, eps=1e-3, affine=False), (2, 6, 2, 2)),
    "InstanceNorm1d": (lambda nn: nn.InstanceNorm1d(3, affine=True), (2, 3, 5)),
    "InstanceNorm2d_tracked": (lambda nn: nn.InstanceNorm2d(3, momentum=0.2, track_running_stats=True), (2, 3, 4, 4)),
    "RMSNorm": (lambda nn: nn.RMSNorm([3, 4], eps=1e-3), (2, 3, 4)),
    "RMSNorm_no_affine": (lambda nn: nn.RMSNorm(4, elementwise_affine=False), (2, 4)),
    "ZeroPad1d": (lambda nn: nn.ZeroPad1d((1, 2)), (2, 3, 4)),
    "ZeroPad2d": (lambda nn: nn.ZeroPad2d(2), (2, 3, 4)),
    "ConstantPad1d": (lambda nn: nn.ConstantPad1d(2, 3.5), (2, 3)),
    "ConstantPad2d": (lambda nn: nn.ConstantPad2d((1, 0, 2, -1), -1.0), (1, 2, 3, 4)),
    "ReflectionPad1d": (lambda nn: nn.ReflectionPad1d((3, 1)), (2, 3, 4)),
    "ReflectionPad2d": (lambda nn: nn.ReflectionPad2d(1), (2, 3, 4)),
    "ReplicationPad1d": (lambda nn: nn.ReplicationPad1d(2), (3, 4)),
    "ReplicationPad2d": (lambda nn: nn.ReplicationPad2d((1, 2, 0, 3)), (1, 2, 3, 4)),
    "CircularPad1d": (lambda nn: nn.CircularPad1d((2, 1)), (2, 3, 4)),
    "CircularPad2d": (lambda nn: nn.CircularPad2d(1), (1, 2, 3, 4)),
    "MaxPool1d": (lambda nn: nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 8)),
    "AvgPool1d": (lambda nn: nn.AvgPool1d(2), (2, 3, 8)),
    "AdaptiveAvgPool1d": (lambda nn: nn.AdaptiveAvgPool1d(3), (2, 3, 8)),
    "AdaptiveMaxPool1d": (lambda nn: nn.AdaptiveMaxPool1d(3), (2, 3, 8)),
    "AdaptiveMaxPool2d": (lambda nn: nn.AdaptiveMaxPool2d((2, None)), (2, 3, 5, 4)),
    "Upsample": (lambda nn: nn.Upsample(scale_factor=2), (1, 2, 3, 3)),
    "Upsample_bilinear": (lambda nn: nn.Upsample(size=(5, 4), mode="bilinear", align_corners=True), (1, 2, 3, 3)),
    "Upsample_bicubic": (lambda nn: nn.Upsample(scale_factor=1.5, mode="bicubic"), (1, 2, 4, 4)),
    "UpsamplingNearest2d": (lambda nn: nn.UpsamplingNearest2d(scale_factor=3), (1, 1, 2, 2)),
    "UpsamplingBilinear2d": (lambda nn: nn.UpsamplingBilinear2d(size=4), (1, 1, 2, 3)),
    "PixelShuffle": (lambda nn: nn.PixelShuffle(2), (1, 8, 2, 3)),
    "PixelUnshuffle": (lambda nn: nn.PixelUnshuffle(2), (1, 2, 4, 2)),
    "Unfold": (lambda nn: nn.Unfold(2, padding=1), (1, 2, 3, 3)),
    "Fold": (lambda nn: nn.Fold((3, 4), 2), (1, 8, 6)),
    "LPPool1d": (lambda nn: nn.LPPool1d(1.5, 2, stride=1, ceil_mode=True), (2, 3, 5)),
    "LPPool2d": (lambda nn: nn.LPPool2d(2, 3), (1, 2, 5, 4)),
    "LocalResponseNorm": (lambda nn: nn.LocalResponseNorm(3), (2, 4, 3, 3)),
    "ChannelShuffle": (lambda nn: nn.ChannelShuffle(2), (1, 4, 2, 2)),
    "CosineSimilarity": (lambda nn: nn.CosineSimilarity(dim=0), (3, 4)),
    "PairwiseDistance": (lambda nn: nn.PairwiseDistance(p=3.0, keepdim=True), (3, 4)),
    "Dropout1d_eval": (lambda nn: nn.Dropout1d(0.3), (2, 3, 4)),
    "Dropout2d_eval": (lambda nn: nn.Dropout2d(), (2, 3, 4, 4)),
    "AlphaDropout_eval": (lambda nn: nn.AlphaDropout(0.2), (2, 3)),
}

# losses as modules: constructor, and the input makers of their forward
LOSS_MODULES = {
    "KLDivLoss": (lambda nn: nn.KLDivLoss(reduction="batchmean", log_target=True), (log_probs(3, 4), log_probs(3, 4))),
    "GaussianNLLLoss": (lambda nn: nn.GaussianNLLLoss(full=True, eps=1e-3),
                        (normal(3, 2), normal(3, 2), positive(3, 2))),
    "PoissonNLLLoss": (lambda nn: nn.PoissonNLLLoss(log_input=False, full=True), (positive(3, 4), counts(3, 4))),
    "MarginRankingLoss": (lambda nn: nn.MarginRankingLoss(0.5, reduction="sum"), (normal(5), normal(5), signs(5))),
    "SoftMarginLoss": (lambda nn: nn.SoftMarginLoss(), (normal(2, 3), signs(2, 3))),
    "HingeEmbeddingLoss": (lambda nn: nn.HingeEmbeddingLoss(margin=0.5), (positive(2, 3), signs(2, 3))),
    "CosineEmbeddingLoss": (lambda nn: nn.CosineEmbeddingLoss(margin=0.1), (normal(4, 3), normal(4, 3), signs(4))),
    "TripletMarginLoss": (lambda nn: nn.TripletMarginLoss(margin=0.5, p=1.5, swap=True),
                          (normal(4, 3), normal(4, 3), normal(4, 3))),
    "TripletMarginWithDistanceLoss": (lambda nn: nn.TripletMarginWithDistanceLoss(margin=0.3),
                                      (normal(4, 3), normal(4, 3), normal(4, 3))),
    "MultiMarginLoss": (lambda nn: nn.MultiMarginLoss(margin=2.0),
                        (normal(3, 4), target(lambda rng: np.array([0, 3, 1])))),
    "MultiLabelMarginLoss": (lambda nn: nn.MultiLabelMarginLoss(reduction="sum"),
                             (normal(2, 3), target(lambda rng: np.array([[2, -1, 0], [0, 1, 2]])))),
    "MultiLabelSoftMarginLoss": (lambda nn: nn.MultiLabelSoftMarginLoss(reduction="none"),
                                 (normal(3, 4), binary(3, 4))),
}

# bad input: ``fn(lib)`` with ``lib`` torch or rlpipe raises; the recorded type and message are torch's
ERRORS = {
    "conv1d_stride_pair": lambda lib: lib.nn.functional.conv1d(lib.zeros(2, 4, 10), lib.zeros(6, 2, 3), groups=2,
                                                               stride=(1, 2)),
    "conv1d_channels": lambda lib: lib.nn.functional.conv1d(lib.zeros(2, 4, 10), lib.zeros(6, 2, 3)),
    "conv1d_kernel_too_big": lambda lib: lib.nn.functional.conv1d(lib.zeros(2, 4, 10), lib.zeros(6, 4, 30)),
    "conv1d_rank": lambda lib: lib.nn.functional.conv1d(lib.zeros(10), lib.zeros(6, 2, 3)),
    "conv1d_same_strided": lambda lib: lib.nn.functional.conv1d(lib.zeros(2, 4, 10), lib.zeros(6, 2, 3), groups=2,
                                                                padding="same", stride=2),
    "conv1d_bias": lambda lib: lib.nn.functional.conv1d(lib.zeros(2, 4, 10), lib.zeros(6, 2, 3), lib.zeros(5),
                                                        groups=2),
    "conv1d_weight_rank": lambda lib: lib.nn.functional.conv1d(lib.zeros(2, 4, 10), lib.zeros(6, 2, 3, 3), groups=2),
    "conv_transpose2d_output_padding": lambda lib: lib.nn.functional.conv_transpose2d(
        lib.zeros(1, 4, 5, 5), lib.zeros(4, 3, 3, 3), output_padding=1),
    "conv_transpose2d_channels": lambda lib: lib.nn.functional.conv_transpose2d(lib.zeros(1, 5, 5, 5),
                                                                                lib.zeros(4, 3, 3, 3)),
    "conv_transpose2d_too_small": lambda lib: lib.nn.functional.conv_transpose2d(lib.zeros(1, 4, 5, 5),
                                                                                 lib.zeros(4, 3, 3, 3), padding=4),
    "conv_transpose2d_padding_str": lambda lib: lib.nn.functional.conv_transpose2d(
        lib.zeros(1, 4, 5, 5), lib.zeros(4, 3, 3, 3), padding="same"),
    "conv_transpose2d_groups": lambda lib: lib.nn.functional.conv_transpose2d(lib.zeros(1, 4, 5, 5),
                                                                              lib.zeros(4, 3, 3, 3), groups=3),
    "conv_transpose1d_output_padding": lambda lib: lib.nn.functional.conv_transpose1d(
        lib.zeros(1, 4, 5), lib.zeros(4, 3, 3), stride=2, output_padding=2),
    "conv_transpose1d_bias": lambda lib: lib.nn.functional.conv_transpose1d(lib.zeros(1, 4, 5), lib.zeros(4, 3, 3),
                                                                            bias=lib.zeros(4)),
    "ConvTranspose2d_padding_mode": lambda lib: lib.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"),
    "ConvTranspose2d_output_size": lambda lib: lib.nn.ConvTranspose2d(2, 2, 3, stride=2)(lib.zeros(1, 2, 4, 4),
                                                                                        output_size=(20, 20)),
    "ConvTranspose2d_output_size_length": lambda lib: lib.nn.ConvTranspose2d(2, 2, 3)(lib.zeros(1, 2, 4, 4),
                                                                                     output_size=(6, 6, 6)),
    "unfold_blocks": lambda lib: lib.nn.functional.unfold(lib.zeros(1, 2, 3, 3), 4),
    "fold_blocks": lambda lib: lib.nn.functional.fold(lib.zeros(1, 8, 5), (3, 3), 2),
    "fold_channels": lambda lib: lib.nn.functional.fold(lib.zeros(1, 7, 4), (3, 3), 2),
    "max_pool1d_padding": lambda lib: lib.nn.functional.max_pool1d(lib.zeros(2, 4, 10), 3, padding=2),
    "max_pool1d_rank": lambda lib: lib.nn.functional.max_pool1d(lib.zeros(10), 3),
    "max_pool1d_output": lambda lib: lib.nn.functional.max_pool1d(lib.zeros(2, 4, 10), 30),
    "max_pool1d_kernel_pair": lambda lib: lib.nn.functional.max_pool1d(lib.zeros(2, 4, 10), (3, 3)),
    "avg_pool1d_kernel_pair": lambda lib: lib.nn.functional.avg_pool1d(lib.zeros(2, 4, 10), (3, 3)),
    "avg_pool1d_output": lambda lib: lib.nn.functional.avg_pool1d(lib.zeros(2, 4, 10), 30),
    "avg_pool1d_rank": lambda lib: lib.nn.functional.avg_pool1d(lib.zeros(10), 3),
    "adaptive_avg_pool1d_rank": lambda lib: lib.nn.functional.adaptive_avg_pool1d(lib.zeros(10), 3),
    "adaptive_avg_pool1d_pair": lambda lib: lib.nn.functional.adaptive_avg_pool1d(lib.zeros(2, 4, 10), (3, 2)),
    "adaptive_max_pool2d_triple": lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.zeros(4, 10), (3, 2, 1)),
    "adaptive_max_pool2d_rank": lambda lib: lib.nn.functional.adaptive_max_pool2d(lib.zeros(10), 3),
    "adaptive_max_pool1d_rank": lambda lib: lib.nn.functional.adaptive_max_pool1d(lib.zeros(10), 3),
    "group_norm_groups": lambda lib: lib.nn.functional.group_norm(lib.zeros(1, 2, 4, 4), 3),
    "group_norm_weight": lambda lib: lib.nn.functional.group_norm(lib.zeros(1, 2, 4, 4), 2, lib.ones(3)),
    "group_norm_rank": lambda lib: lib.nn.functional.group_norm(lib.zeros(4), 1),
    "GroupNorm_channels": lambda lib: lib.nn.GroupNorm(3, 4),
    "instance_norm_running": lambda lib: lib.nn.functional.instance_norm(lib.zeros(1, 2, 4, 4), lib.zeros(3)),
    "instance_norm_spatial": lambda lib: lib.nn.functional.instance_norm(lib.zeros(2, 3, 1)),
    "instance_norm_eval_without_stats": lambda lib: lib.nn.functional.instance_norm(lib.zeros(2, 3, 4),
                                                                                    use_input_stats=False),
    "InstanceNorm2d_rank": lambda lib: lib.nn.InstanceNorm2d(3)(lib.zeros(4, 5)),
    "InstanceNorm2d_affine_channels": lambda lib: lib.nn.InstanceNorm2d(3, affine=True)(lib.zeros(1, 4, 5, 5)),
    "rms_norm_shape": lambda lib: lib.nn.functional.rms_norm(lib.zeros(1, 2, 4, 4), (3,)),
    "rms_norm_weight": lambda lib: lib.nn.functional.rms_norm(lib.zeros(1, 2, 4, 4), (4,), lib.ones(3)),
    "rms_norm_int_shape": lambda lib: lib.nn.functional.rms_norm(lib.zeros(2, 4), 4),
    "CircularPad2d_rank": lambda lib: lib.nn.CircularPad2d(1)(lib.zeros(4, 5)),
    "ReflectionPad1d_too_wide": lambda lib: lib.nn.ReflectionPad1d(4)(lib.zeros(1, 2, 3)),
    "interpolate_no_size": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4)),
    "interpolate_both": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=3, scale_factor=2),
    "interpolate_align_nearest": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=3,
                                                                           align_corners=True),
    "interpolate_linear_4d": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=3, mode="linear"),
    "interpolate_bilinear_3d": lambda lib: lib.nn.functional.interpolate(lib.zeros(2, 4, 10), size=3,
                                                                         mode="bilinear"),
    "interpolate_size_length": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=(3, 3, 3)),
    "interpolate_scale_length": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4),
                                                                          scale_factor=(2, 2, 2)),
    "interpolate_mode": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=3, mode="foo"),
    "interpolate_antialias_nearest": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=3,
                                                                               antialias=True),
    "interpolate_zero_size": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=0),
    "interpolate_bicubic_3d": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4), size=3, mode="bicubic"),
    "interpolate_2d_input": lambda lib: lib.nn.functional.interpolate(lib.zeros(4, 4), size=3),
    "interpolate_float_size": lambda lib: lib.nn.functional.interpolate(lib.zeros(1, 2, 4, 4), size=(3.5, 2)),
    "pixel_shuffle_channels": lambda lib: lib.nn.functional.pixel_shuffle(lib.zeros(5, 3, 3), 2),
    "pixel_shuffle_rank": lambda lib: lib.nn.functional.pixel_shuffle(lib.zeros(3, 3), 2),
    "pixel_unshuffle_height": lambda lib: lib.nn.functional.pixel_unshuffle(lib.zeros(1, 5, 4), 2),
    "pixel_unshuffle_width": lambda lib: lib.nn.functional.pixel_unshuffle(lib.zeros(1, 4, 5), 2),
    "dropout1d_rank": lambda lib: lib.nn.functional.dropout1d(lib.zeros(2, 3, 4, 5)),
    "dropout2d_p": lambda lib: lib.nn.functional.dropout2d(lib.zeros(2, 3, 4, 5), 1.5),
    "alpha_dropout_p": lambda lib: lib.nn.functional.alpha_dropout(lib.zeros(2, 3), -0.1),
    "Dropout1d_p": lambda lib: lib.nn.Dropout1d(2.0),
    "grid_sample_mode": lambda lib: lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 2),
                                                                  mode="foo"),
    "grid_sample_padding_mode": lambda lib: lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2),
                                                                          lib.zeros(1, 2, 2, 2), padding_mode="foo"),
    "grid_sample_batch": lambda lib: lib.nn.functional.grid_sample(lib.zeros(2, 1, 2, 2), lib.zeros(1, 2, 2, 2),
                                                                   align_corners=False),
    "grid_sample_last_dim": lambda lib: lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 2, 2, 1),
                                                                      align_corners=False),
    "grid_sample_dtype": lambda lib: lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2),
                                                                   lib.zeros(1, 2, 2, 2, dtype=lib.float64),
                                                                   align_corners=False),
    "affine_grid_theta_shape": lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 3, 3), (2, 3, 4, 5),
                                                                         align_corners=False),
    "affine_grid_int_theta": lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 2, 3, dtype=lib.int32),
                                                                       (2, 3, 4, 5), align_corners=False),
    "affine_grid_size_rank": lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 2, 3), (2, 3, 4),
                                                                       align_corners=False),
    "affine_grid_zero_size": lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 2, 3), (2, 3, 0, 5),
                                                                       align_corners=False),
    "affine_grid_batch": lambda lib: lib.nn.functional.affine_grid(lib.zeros(2, 2, 3), (3, 3, 4, 5),
                                                                   align_corners=False),
    "max_unpool2d_indices_shape": lambda lib: lib.nn.functional.max_unpool2d(
        lib.zeros(2, 3, 2, 2), lib.zeros(2, 2, 2, 2, dtype=lib.int64), 2),
    "max_unpool2d_output_size": lambda lib: lib.nn.functional.max_unpool2d(
        lib.zeros(2, 3, 2, 2), lib.zeros(2, 3, 2, 2, dtype=lib.int64), 2, output_size=(9, 9)),
    "max_unpool2d_bad_index": lambda lib: lib.nn.functional.max_unpool2d(
        lib.zeros(2, 3, 2, 2), lib.full((2, 3, 2, 2), 100, dtype=lib.int64), 2),
    "max_unpool2d_rank": lambda lib: lib.nn.functional.max_unpool2d(lib.zeros(2, 2), lib.zeros(2, 2, dtype=lib.int64),
                                                                    2),
    "max_unpool2d_int_indices": lambda lib: lib.nn.functional.max_unpool2d(
        lib.zeros(2, 3, 2, 2), lib.zeros(2, 3, 2, 2, dtype=lib.int32), 2),
    "local_response_norm_rank": lambda lib: lib.nn.functional.local_response_norm(lib.zeros(3, 4), 2),
    "channel_shuffle_divisible": lambda lib: lib.nn.functional.channel_shuffle(lib.zeros(1, 5, 2, 2), 2),
    "channel_shuffle_rank": lambda lib: lib.nn.functional.channel_shuffle(lib.zeros(1, 4), 2),
    "channel_shuffle_groups": lambda lib: lib.nn.functional.channel_shuffle(lib.zeros(1, 4, 3), 0),
    "multi_margin_target_size": lambda lib: lib.nn.functional.multi_margin_loss(
        lib.zeros(3, 4), lib.zeros(2, dtype=lib.int64)),
    "multi_margin_p": lambda lib: lib.nn.functional.multi_margin_loss(lib.zeros(3, 4), lib.zeros(3, dtype=lib.int64),
                                                                      p=3),
    "multi_margin_target_range": lambda lib: lib.nn.functional.multi_margin_loss(lib.zeros(3, 4),
                                                                                 lib.tensor([0, 1, 5])),
    "multi_margin_weight": lambda lib: lib.nn.functional.multi_margin_loss(
        lib.zeros(3, 4), lib.zeros(3, dtype=lib.int64), weight=lib.ones(3)),
    "MultiMarginLoss_weight_rank": lambda lib: lib.nn.MultiMarginLoss(weight=lib.ones(2, 2)),
    "multilabel_margin_size": lambda lib: lib.nn.functional.multilabel_margin_loss(
        lib.zeros(3, 4), lib.zeros(3, 3, dtype=lib.int64)),
    "multilabel_margin_range": lambda lib: lib.nn.functional.multilabel_margin_loss(
        lib.zeros(3, 4), lib.tensor([[0, 7, -1, 0]] * 3)),
    "pdist_rank": lambda lib: lib.nn.functional.pdist(lib.zeros(3, 4, 5)),
    "TripletMarginWithDistanceLoss_margin": lambda lib: lib.nn.TripletMarginWithDistanceLoss(margin=0),
    "triplet_with_distance_reduction": lambda lib: lib.nn.functional.triplet_margin_with_distance_loss(
        lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3), reduction="max"),
    "conv_transpose2d_weight_dtype": lambda lib: lib.nn.functional.conv_transpose2d(
        lib.zeros(1, 4, 5, 5, dtype=lib.float64), lib.zeros(4, 3, 3, 3)),
    "group_norm_int": lambda lib: lib.nn.functional.group_norm(lib.zeros(2, 4, 3, dtype=lib.int64), 2),
    "instance_norm_int": lambda lib: lib.nn.functional.instance_norm(lib.zeros(2, 4, 3, dtype=lib.int64)),
    "rms_norm_int": lambda lib: lib.nn.functional.rms_norm(lib.zeros(2, 4, 3, dtype=lib.int64), (3,)),
    "adaptive_max_pool2d_int": lambda lib: lib.nn.functional.adaptive_max_pool2d(
        lib.zeros(1, 2, 3, 3, dtype=lib.int64), 2),
    "unfold_int": lambda lib: lib.nn.functional.unfold(lib.zeros(1, 2, 3, 3, dtype=lib.int64), 2),
    "fold_int": lambda lib: lib.nn.functional.fold(lib.zeros(1, 8, 4, dtype=lib.int64), 3, 2),
    "max_pool1d_int": lambda lib: lib.nn.functional.max_pool1d(lib.zeros(1, 2, 4, dtype=lib.int64), 2),
    "kl_div_int": lambda lib: lib.nn.functional.kl_div(lib.zeros(2, 3, dtype=lib.int64),
                                                       lib.zeros(2, 3, dtype=lib.int64), reduction="sum"),
    "grid_sample_int": lambda lib: lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2, dtype=lib.int64),
                                                                 lib.zeros(1, 2, 2, 2, dtype=lib.int64),
                                                                 align_corners=False),
    "cdist_columns": lambda lib: lib.cdist(lib.zeros(3, 4), lib.zeros(5, 3)),
    "cdist_rank": lambda lib: lib.cdist(lib.zeros(4), lib.zeros(5, 4)),
    "cdist_p": lambda lib: lib.cdist(lib.zeros(3, 4), lib.zeros(5, 4), p=-1),
    "cdist_int": lambda lib: lib.cdist(lib.zeros(3, 4, dtype=lib.int64), lib.zeros(5, 4, dtype=lib.int64)),
    "kl_div_reduction": lambda lib: lib.nn.functional.kl_div(lib.zeros(2, 3), lib.zeros(2, 3), reduction="batch"),
    "gaussian_nll_negative_var": lambda lib: lib.nn.functional.gaussian_nll_loss(lib.zeros(2, 3), lib.zeros(2, 3),
                                                                                 -lib.ones(2, 3)),
    "gaussian_nll_var_size": lambda lib: lib.nn.functional.gaussian_nll_loss(lib.zeros(2, 3), lib.zeros(2, 3),
                                                                             lib.ones(3, 3)),
    "gaussian_nll_reduction": lambda lib: lib.nn.functional.gaussian_nll_loss(lib.zeros(2, 3), lib.zeros(2, 3),
                                                                              lib.ones(2, 3), reduction="max"),
    "poisson_nll_reduction": lambda lib: lib.nn.functional.poisson_nll_loss(lib.zeros(2, 3), lib.zeros(2, 3),
                                                                            reduction="max"),
    "margin_ranking_dims": lambda lib: lib.nn.functional.margin_ranking_loss(lib.zeros(3, 4), lib.zeros(3, 4),
                                                                             lib.ones(3)),
    "cosine_embedding_target_rank": lambda lib: lib.nn.functional.cosine_embedding_loss(
        lib.zeros(3, 4), lib.zeros(3, 4), lib.ones(3, 1)),
    "cosine_embedding_input_rank": lambda lib: lib.nn.functional.cosine_embedding_loss(
        lib.zeros(3, 4), lib.zeros(3, 4), lib.ones(())),
    "triplet_margin_dims": lambda lib: lib.nn.functional.triplet_margin_loss(lib.zeros(3, 4), lib.zeros(3, 4),
                                                                             lib.zeros(4)),
    "triplet_margin_margin": lambda lib: lib.nn.functional.triplet_margin_loss(lib.zeros(3, 4), lib.zeros(3, 4),
                                                                               lib.zeros(3, 4), margin=-1.0),
    "TripletMarginLoss_margin": lambda lib: lib.nn.TripletMarginLoss(margin=0),
}

# the torch.* forms: ``fn(lib, *inputs)`` with ``lib`` torch or rlpipe
TOP_LEVEL = {
    "conv1d": (lambda lib, x, w: lib.conv1d(x, w, None, 2, 1), (normal(2, 3, 7), normal(4, 3, 3))),
    "conv2d": (lambda lib, x, w: lib.conv2d(x, w, padding="same"), (normal(1, 2, 4, 4), normal(3, 2, 3, 3))),
    "conv_transpose2d": (lambda lib, x, w: lib.conv_transpose2d(x, w, None, 2, 1, 1), (normal(1, 2, 3, 3),
                                                                                        normal(2, 3, 3, 3))),
    "max_pool2d": (lambda lib, x: lib.max_pool2d(x, 2, 1, 1), (normal(1, 2, 4, 5),)),
    "adaptive_max_pool1d": (lambda lib, x: lib.adaptive_max_pool1d(x, 3), (normal(2, 3, 7),)),
    "instance_norm": (lambda lib, x, w, b: lib.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
                      (normal(2, 3, 5), normal(3), normal(3))),
    "group_norm": (lambda lib, x, w: lib.group_norm(x, 2, w, None, 1e-3, False), (normal(2, 4, 3), normal(4))),
    "grid_sampler": (lambda lib, x, g: lib.grid_sampler(x, g, 0, 2, True), (normal(1, 2, 3, 4), normal(1, 2, 3, 2))),
    "affine_grid_generator": (lambda lib, t: lib.affine_grid_generator(t, [1, 1, 2, 3], False), (normal(1, 2, 3),)),
    "pixel_shuffle": (lambda lib, x: lib.pixel_shuffle(x, 2), (normal(1, 4, 2, 2),)),
    "pdist": (lambda lib, x: lib.pdist(x), (normal(4, 3),)),
    "rms_norm": (lambda lib, x: lib.rms_norm(x, [3], None, 1e-3), (normal(2, 3),)),
    "cdist": (lambda lib, a, b: lib.cdist(a, b), (normal(2, 3, 4), normal(5, 4))),
    "cdist_p1_many_rows": (lambda lib, a, b: lib.cdist(a, b, p=1.0), (normal(30, 3), normal(27, 3))),
    "cdist_p_inf": (lambda lib, a, b: lib.cdist(a, b, p=float("inf")), (normal(3, 2), normal(4, 2))),
}
