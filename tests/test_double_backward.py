"""gradgradcheck in float64 for every op that has a double backward (create_graph=True), composites included
(losses, Normal/Categorical log_prob, entropy and KL), and gradgradcheck itself catching a wrong one."""
import numpy as np
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe.autograd import GradcheckError, gradcheck, gradgradcheck
from rlpipe.distributions import Categorical, Normal, kl_divergence
from rlpipe.func._ensemble import EnsembleLinear, StackedStates
from rlpipe.func._ensemble_mlp import EnsembleMLP
from rlpipe.modules.distributions.continuous import TanhNormal
from rlpipe.primitives import Erfinv, Op


def leaf(*shape, low=-2.0, high=2.0, away=0.0, seed=0):
    """A float64 leaf of uniform values in [low, high], none closer than ``away`` to 0 (kinks)."""
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    values = rng.uniform(low, high, shape)
    values = np.where(np.abs(values) < away, np.sign(values + 1e-12) * (away + 0.1), values)
    return rlpipe.tensor(values, requires_grad=True)


def pos(*shape, seed=0):
    return leaf(*shape, low=0.5, high=2.0, seed=seed)


def categorical_terms(dist):
    return dist.log_prob(rlpipe.tensor([2, 0])) + dist.entropy()


def setitem_cases(x, v):
    """x[index] = value with an index tensor, a mask, and ints and a slice (IndexPut)."""
    y = x * x
    y[rlpipe.tensor([0, 2])] = v * v
    z = y * 1.0
    z[z > 0.5] = 0.0
    z[1, 1:] = v[0, :2] * x[0, 0]
    return z * x


def inplace_on_views(x):
    """A view changed in place (ViewUpdate on the base), and a view read after its base changed (AsView)."""
    y = x * 1.0
    column = y[:, 1]
    column.mul_(x[:, 0])
    row = y[0]
    y.mul_(x)
    return y ** 2 + row * x


IDX = np.array([2, 0, 2])
CLASS_WEIGHTS = np.array([0.5, 1.0, 2.0, 1.5])
ACTION = np.array([[0.3, -0.5, 0.1], [0.9, -0.2, 0.0]])
CASES = {
    # arithmetic, with broadcasting and Python numbers
    "add": (lambda x, y: x + y, lambda: (leaf(2, 3), leaf(3, seed=1))),
    "sub": (lambda x, y: x - y, lambda: (leaf(2, 1), leaf(2, 3, seed=1))),
    "rsub_number": (lambda x: 1.5 - x * x, lambda: (leaf(3),)),
    "mul": (lambda x, y: x * y, lambda: (leaf(2, 3), leaf(1, 3, seed=1))),
    "div": (lambda x, y: x / y, lambda: (leaf(2, 3), pos(3, seed=1))),
    "rdiv_number": (lambda x: 2.0 / x, lambda: (pos(3),)),
    "neg": (lambda x: -x * x, lambda: (leaf(3),)),
    "pow_number": (lambda x: x ** 3, lambda: (leaf(4),)),
    "pow_tensors": (lambda x, y: x ** y, lambda: (pos(3), leaf(3, seed=1))),
    "number_pow": (lambda y: 2.0 ** y, lambda: (leaf(3),)),
    "square": (lambda x: x.square() * x, lambda: (leaf(3),)),
    "sqrt": (lambda x: x.sqrt(), lambda: (pos(3),)),
    "rsqrt": (lambda x: x.rsqrt(), lambda: (pos(3),)),
    "reciprocal": (lambda x: x.reciprocal(), lambda: (pos(3),)),
    "abs": (lambda x: x.abs() * x, lambda: (leaf(4, away=0.2),)),
    "exp": (lambda x: x.exp(), lambda: (leaf(3),)),
    "log": (lambda x: x.log(), lambda: (pos(3),)),
    "log1p": (lambda x: x.log1p(), lambda: (pos(3),)),
    "expm1": (lambda x: x.expm1(), lambda: (leaf(3),)),
    "remainder": (lambda x, y: (x * x) % y * x, lambda: (leaf(3), pos(3, seed=1))),
    "div_rounding": (lambda x: x.div(0.3, rounding_mode="floor") * x + x.div(0.7, rounding_mode="trunc") * x,
                     lambda: (leaf(4, seed=2),)),
    "lerp": (lambda s, e, w: rlpipe.lerp(s * s, e, w) + rlpipe.lerp(s, e * s, 0.3),
             lambda: (leaf(3), leaf(3, seed=1), leaf(3, seed=2))),
    "nan_to_num": (lambda x: rlpipe.nan_to_num(x * x) * x, lambda: (leaf(3),)),
    "sin_cos": (lambda x: x.sin() * x.cos(), lambda: (leaf(3),)),
    "erf": (lambda x: x.erf(), lambda: (leaf(3),)),
    "erfinv": (lambda x: Erfinv.apply(x), lambda: (leaf(3, low=-0.8, high=0.8),)),
    "atanh_asin_acos": (lambda x: x.atanh() + x.asin() * x.acos(), lambda: (leaf(3, low=-0.8, high=0.8),)),
    "atan_tan": (lambda x: x.atan() * x.tan(), lambda: (leaf(3, low=-1.0, high=1.0),)),
    "sinh_cosh": (lambda x: x.sinh() * x.cosh(), lambda: (leaf(3),)),
    "lgamma": (lambda x: x.lgamma(), lambda: (pos(3),)),
    "logit": (lambda p: p.logit() + p.logit(eps=0.25), lambda: (leaf(4, low=0.1, high=0.9, seed=3),)),
    # activations
    "tanh": (lambda x: x.tanh(), lambda: (leaf(2, 3),)),
    "sigmoid": (lambda x: x.sigmoid(), lambda: (leaf(2, 3),)),
    "relu": (lambda x: F.relu(x) * x, lambda: (leaf(2, 3, away=0.2),)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2) * x, lambda: (leaf(2, 3, away=0.2),)),
    "elu": (lambda x: F.elu(x, 0.7), lambda: (leaf(2, 3, away=0.2),)),
    "selu": (lambda x: F.selu(x), lambda: (leaf(2, 3, away=0.2),)),
    "softplus": (lambda x: F.softplus(x, beta=2.0, threshold=3.0), lambda: (leaf(2, 3, away=0.2),)),
    "gelu": (lambda x: F.gelu(x), lambda: (leaf(2, 3),)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda: (leaf(2, 3),)),
    "silu": (lambda x: F.silu(x), lambda: (leaf(2, 3),)),
    "hardtanh": (lambda x: F.hardtanh(x) * x, lambda: (leaf(2, 3, away=0.2),)),
    "hardswish": (lambda x: F.hardswish(x), lambda: (leaf(2, 3, low=-4, high=4, away=0.2),)),
    "hardsigmoid": (lambda x: F.hardsigmoid(x) * x, lambda: (leaf(2, 3, low=-4, high=4, away=0.2),)),
    "mish": (lambda x: F.mish(x), lambda: (leaf(2, 3),)),
    "softmax": (lambda x: F.softmax(x, dim=1), lambda: (leaf(2, 3),)),
    "log_softmax": (lambda x: F.log_softmax(x, dim=0), lambda: (leaf(2, 3),)),
    "logsumexp": (lambda x: x.logsumexp(dim=1), lambda: (leaf(2, 3),)),
    "logsumexp_keepdim": (lambda x: x.logsumexp(dim=(0, 1), keepdim=True), lambda: (leaf(2, 3),)),
    # matrix products
    "matmul": (lambda a, b: a @ b, lambda: (leaf(2, 3), leaf(3, 2, seed=1))),
    "matmul_batched": (lambda a, b: a @ b, lambda: (leaf(2, 2, 3), leaf(3, 2, seed=1))),
    "matmul_vector": (lambda a, b: a @ b, lambda: (leaf(3), leaf(3, 2, seed=1))),
    "matrix_vector": (lambda a, b: a @ b, lambda: (leaf(2, 3), leaf(3, seed=1))),
    "dot": (lambda a, b: a @ b, lambda: (leaf(3), leaf(3, seed=1))),
    "mm": (lambda a, b: a.mm(b), lambda: (leaf(2, 3), leaf(3, 2, seed=1))),
    "linear": (lambda x, w, b: F.linear(x, w, b), lambda: (leaf(2, 3), leaf(2, 3, seed=1), leaf(2, seed=2))),
    "linear_batched_no_bias": (lambda x, w: F.linear(x, w), lambda: (leaf(2, 1, 3), leaf(2, 3, seed=1))),
    "einsum": (lambda a, b: rlpipe.einsum("ij,jk->ik", a * a, b) + rlpipe.einsum("ij,k->ik", a, b.sum(0)),
               lambda: (leaf(2, 3), leaf(3, 2, seed=1))),
    "einsum_batched_dot": (lambda a, b: rlpipe.einsum("bi,bi->b", a, b * a), lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "addmm_style": (lambda x, w, b: x @ w + b, lambda: (leaf(2, 3), leaf(3, 2, seed=1), leaf(2, seed=2))),
    "ensemble_linear": (lambda x, w, b: EnsembleLinear.apply(x * x, w, b, False).tanh()
                        + EnsembleLinear.apply(x.expand(2, 2, 3), w * w, None, True),
                        lambda: (leaf(2, 3), leaf(2, 4, 3, seed=1), leaf(2, 4, seed=2))),
    "ensemble_mlp_tanh": (lambda x, w0, b0, w1, b1: EnsembleMLP.apply(x * x, False, w0, b0, w1, b1,
                                                                      acts=("tanh", None)),
                          lambda: (leaf(2, 3), leaf(2, 4, 3, seed=1), leaf(2, 4, seed=2), leaf(2, 1, 4, seed=3),
                                   leaf(2, 1, seed=4))),
    "ensemble_mlp_relu_batched": (lambda x, w0, w1, b1: EnsembleMLP.apply(x, True, w0, None, w1, b1,
                                                                          acts=("relu", "tanh")),
                                  lambda: (leaf(2, 3, 3, away=0.2), leaf(2, 4, 3, seed=1), leaf(2, 2, 4, seed=3),
                                           leaf(2, 2, seed=4))),
    "stacked_states": (lambda a, b: StackedStates.apply(a * a, b, b * a, a, members=2)[1] ** 2,
                       lambda: (leaf(3), leaf(3, seed=1))),
    # reductions
    "sum": (lambda x: (x * x).sum(), lambda: (leaf(2, 3),)),
    "sum_dim": (lambda x: (x * x).sum(dim=1), lambda: (leaf(2, 3),)),
    "sum_keepdim": (lambda x: (x * x).sum(dim=(0, 2), keepdim=True), lambda: (leaf(2, 3, 2),)),
    "mean": (lambda x: (x * x).mean(), lambda: (leaf(2, 3),)),
    "mean_dim": (lambda x: (x * x).mean(dim=0, keepdim=True), lambda: (leaf(2, 3),)),
    "norm": (lambda x: x.norm(), lambda: (leaf(2, 3),)),
    "norm_dim": (lambda x: x.norm(dim=1), lambda: (leaf(2, 3),)),
    "norm_p3": (lambda x: x.norm(p=3, dim=0, keepdim=True), lambda: (leaf(2, 3, away=0.2),)),
    "vector_norm": (lambda x: rlpipe.linalg.vector_norm(x, 2, dim=(0, 1)), lambda: (leaf(2, 3),)),
    "amax_max": (lambda x: x.amax(dim=1) ** 2 + x.max() * x.min(dim=0).values.sum(), lambda: (leaf(2, 3),)),
    "max_dim_keepdim": (lambda x: x.max(dim=1, keepdim=True).values * x, lambda: (leaf(2, 3),)),
    "var_std": (lambda x: x.var(dim=1) * x.std(), lambda: (leaf(2, 3),)),
    "var_of_a_product": (lambda x: (x * x).var(dim=0, keepdim=True, correction=0), lambda: (leaf(3, 2),)),
    "cumsum": (lambda x: (x * x).cumsum(1), lambda: (leaf(2, 3),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x * x, (3,), w, b), lambda: (leaf(2, 3), leaf(3, seed=1),
                                                                            leaf(3, seed=2))),
    "layer_norm_plain": (lambda x: F.layer_norm(x, (2, 3)), lambda: (leaf(2, 2, 3),)),
    # shapes and indexing
    "flip_repeat": (lambda x: (x.flip(0) * x).sum() + x.repeat(2, 1).square().sum(), lambda: (leaf(2, 3),)),
    "index_select": (lambda x: x.index_select(1, rlpipe.tensor([2, 0, 2])) ** 2, lambda: (leaf(2, 3),)),
    "embedding": (lambda w: F.embedding(rlpipe.tensor([[0, 2], [2, 1]]), w * w), lambda: (leaf(3, 2),)),
    "embedding_padding_freq": (
        lambda w: F.embedding(rlpipe.tensor([0, 2, 2, 1]), w * w, padding_idx=1, scale_grad_by_freq=True),
        lambda: (leaf(3, 2),)),
    "reshape_view": (lambda x: (x.reshape(3, 2) * x.view(3, 2)), lambda: (leaf(2, 3),)),
    "expand": (lambda x: x.expand(2, 2, 3) * x, lambda: (leaf(2, 3),)),
    "permute_transpose": (lambda x: x.permute(2, 0, 1) * x.transpose(0, 2).transpose(1, 2),
                          lambda: (leaf(2, 3, 2),)),
    "squeeze_unsqueeze": (lambda x: x.unsqueeze(0).squeeze(0).square(), lambda: (leaf(2, 3),)),
    "flatten": (lambda x: x.flatten() ** 2, lambda: (leaf(2, 3),)),
    "cat": (lambda x, y: rlpipe.cat([x, y * x], dim=1) ** 2, lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "stack": (lambda x, y: rlpipe.stack([x, y * x], dim=1) ** 2, lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "index": (lambda x: x[rlpipe.tensor(IDX)] ** 2, lambda: (leaf(3, 2),)),
    "slice_select_narrow": (lambda x: x[1:, :2] ** 2 + x.select(0, 1)[:2] * x.narrow(0, 0, 2)[:, 1:],
                            lambda: (leaf(3, 3),)),
    "gather": (lambda x: x.gather(1, rlpipe.tensor([[0, 0], [2, 1]])) ** 2, lambda: (leaf(2, 3),)),
    "chunk_unbind": (lambda x: x.chunk(2, dim=1)[1] ** 2 + x.unbind(1)[0][:, None] * x[:, 2:],
                     lambda: (leaf(2, 4),)),
    "sort_topk": (lambda x: x.sort(1).values ** 2 + x.sort(0, descending=True).values * x + x.topk(2, 1).values.sum(),
                  lambda: (leaf(3, 3),)),
    "setitem": (setitem_cases, lambda: (leaf(3, 3), leaf(2, 3, seed=1))),
    "scatter": (lambda x, s: (x * x).scatter(1, rlpipe.tensor([[0], [2]]), s * s) * x
                + (x * x).scatter_add(0, rlpipe.tensor([[1, 0, 1]]), s[:1] * x[:1]),
                lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "index_add": (lambda x, s: (x * x).index_add(0, rlpipe.tensor([1, 1]), s * x[:2], alpha=2.0) * x,
                  lambda: (leaf(3, 2), leaf(2, 2, seed=1))),
    "diagonal_diag_embed": (lambda x: (x * x).diagonal(1) ** 2 + rlpipe.diag_embed(x[0] * x[1]).sum((0, 1)),
                            lambda: (leaf(3, 3),)),
    "inplace_on_views": (inplace_on_views, lambda: (leaf(2, 3),)),
    "roll_tril_triu": (lambda x: x.roll(1, 1) * x + x.tril(-1) ** 2 + x.triu(1) * x, lambda: (leaf(3, 3),)),
    "pad": (lambda x: F.pad(x * x, (1, 2)) ** 2 + F.pad(x, (2, 1), mode="reflect") * F.pad(x, (1, 2)),
            lambda: (leaf(2, 4),)),
    "pad_replicate_circular": (lambda x: F.pad(x * x, (1, 2), mode="replicate") * F.pad(x, (2, 1), mode="circular"),
                               lambda: (leaf(2, 3),)),
    "pad_crop": (lambda x: F.pad(x, (-1, 1, 1, 0), value=0.5) ** 2, lambda: (leaf(3, 4),)),
    "max_pool": (lambda x: F.max_pool2d(x * x, 3, stride=2, padding=1) ** 2
                 + F.max_pool2d(x, 2, stride=1, return_indices=True)[0].sum(), lambda: (leaf(1, 2, 5, 5),)),
    "avg_pool": (lambda x: F.avg_pool2d(x * x, 3, stride=2, padding=1, count_include_pad=False) ** 2
                 + F.avg_pool2d(x * x, 2, divisor_override=3).sum(), lambda: (leaf(1, 2, 5, 5),)),
    "clone": (lambda x: x.clone() ** 2, lambda: (leaf(3),)),
    # picking
    "clamp": (lambda x: x.clamp(-1.0, 1.0) * x, lambda: (leaf(2, 3, away=0.2),)),
    "clamp_tensor_bounds": (lambda x, lo: x.clamp(min=lo) ** 2, lambda: (leaf(2, 3, away=0.2), leaf(3, seed=5))),
    "where": (lambda x, y: rlpipe.where(x > 0, x * y, y * y), lambda: (leaf(2, 3, away=0.2), leaf(2, 3, seed=1))),
    "maximum_minimum": (lambda x, y: rlpipe.maximum(x, y) ** 2 + rlpipe.minimum(x, y) ** 3,
                        lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    # losses and distributions
    "mse_loss": (lambda x, y: F.mse_loss(x * x, y), lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x * x, y, beta=0.5), lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "huber_loss": (lambda x, y: F.huber_loss(x * x, y, delta=0.5), lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
    "cross_entropy": (lambda x: F.cross_entropy(x * x, rlpipe.tensor([2, 0, 1])), lambda: (leaf(3, 4),)),
    "cross_entropy_weighted_smoothed": (
        lambda x: F.cross_entropy(x * x, rlpipe.tensor([2, 0, -100]), weight=rlpipe.tensor(CLASS_WEIGHTS),
                                  label_smoothing=0.2),
        lambda: (leaf(3, 4),)),
    "cross_entropy_none_sum": (
        lambda x: F.cross_entropy(x, rlpipe.tensor([[1, 0], [2, 2]]), reduction="none") ** 2
        + F.cross_entropy(x * x, rlpipe.tensor([[1, 0], [2, 2]]), reduction="sum"),
        lambda: (leaf(2, 3, 2),)),
    "nll_loss": (lambda x: F.nll_loss(F.log_softmax(x * x, 1), rlpipe.tensor([1, 0])), lambda: (leaf(2, 3),)),
    "binary_cross_entropy": (lambda p, t: F.binary_cross_entropy(p * p, t * t),
                             lambda: (leaf(2, 3, low=0.2, high=0.9), leaf(2, 3, low=0.1, high=0.9, seed=1))),
    "normal_log_prob_entropy": (lambda mu, s, a: Normal(mu, s).log_prob(a) + Normal(mu, s).entropy(),
                                lambda: (leaf(2, 3), pos(2, 3, seed=1), leaf(2, 3, seed=2))),
    "categorical_log_prob_entropy": (lambda logits: categorical_terms(Categorical(logits=logits)),
                                     lambda: (leaf(2, 3),)),
    "tanh_normal_log_prob": (lambda loc, scale: TanhNormal(loc, scale).log_prob(rlpipe.tensor(ACTION)),
                             lambda: (leaf(2, 3), pos(2, 3, seed=1))),
    "kl_normal": (lambda m1, s1, m2, s2: kl_divergence(Normal(m1, s1), Normal(m2, s2)),
                  lambda: (leaf(3), pos(3, seed=1), leaf(3, seed=2), pos(3, seed=3))),
    "kl_categorical": (lambda p, q: kl_divergence(Categorical(logits=p), Categorical(logits=q)),
                       lambda: (leaf(2, 3), leaf(2, 3, seed=1))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradgradcheck(name):
    fn, make = CASES[name]
    assert gradgradcheck(fn, make())


class Cube(Op):
    """x**3 with a correct first backward and a double backward that treats x as a constant."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * g * x * x

    @staticmethod
    def backward_graph(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * rlpipe.tensor(x * x)  # the right values, but the path to x is lost


def test_gradgradcheck_detects_a_double_backward_that_drops_a_path():
    x = leaf(3)
    assert gradcheck(Cube.apply, (x,))
    assert not gradgradcheck(Cube.apply, (x,), raise_exception=False)
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradgradcheck(Cube.apply, (x,))


def test_gradgradcheck_grad_outputs_must_match_the_outputs():
    with pytest.raises(ValueError, match="grad_outputs has 2 tensors, expected one per differentiable output of "
                                         r"func \(1\)"):
        gradgradcheck(lambda x: x * x, (leaf(3),), grad_outputs=(leaf(3), leaf(3)))


CONV_SETTINGS = [{}, {"stride": 2, "padding": 1}, {"padding": (1, 0), "dilation": 2},
                 {"groups": 2, "stride": (2, 1), "padding": (0, 1)}]


@pytest.mark.parametrize("layout", ["im2col", "rows", "hwc"])
@pytest.mark.parametrize("settings", CONV_SETTINGS, ids=["plain", "strided_padded", "dilated", "grouped"])
def test_gradgradcheck_conv2d(settings, layout, monkeypatch):
    """conv2d's double backward (its input and weight gradients as ops, each differentiable through the
    other) in each of Conv2d's layouts; a dilated stride-1 convolution runs any."""
    from rlpipe.primitives import windows
    if layout == "rows" and settings.get("dilation") and settings.get("stride", 1) != 1:
        pytest.skip("the row-run layout takes no strided dilated convolution")
    if layout == "hwc" and settings.get("groups", 1) != 1:
        pytest.skip("the channels-last layout takes one group only")
    monkeypatch.setattr(windows, "_layout", lambda *args: layout)
    groups = settings.get("groups", 1)
    x, w, b = leaf(1, 2, 4, 4), leaf(2, 2 // groups, 2, 2, seed=1), leaf(2, seed=2)
    assert F.conv2d(x, w, b, **settings).grad_fn.args[0] is windows._LAYOUTS[layout][1]
    assert gradgradcheck(lambda x, w, b: F.conv2d(x * x, w, b, **settings), (x, w, b))
