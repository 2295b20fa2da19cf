"""``nn.functional``'s distribution and embedding losses (KL divergence, Gaussian and Poisson NLL, the
margin and embedding losses) and ``pairwise_distance``, composed of rlpipe's differentiable ops."""
import builtins
import math
import warnings

from .. import primitives as ops
from .._creation import arange, ones_like
from ..autograd import no_grad
from ._functional_base import _reduce, _reduction
from ..primitives.products import pdist  # noqa: F401 - F.pdist is the core's torch.pdist

__all__ = """kl_div gaussian_nll_loss poisson_nll_loss pairwise_distance margin_ranking_loss soft_margin_loss
hinge_embedding_loss cosine_embedding_loss triplet_margin_loss multilabel_soft_margin_loss
triplet_margin_with_distance_loss multi_margin_loss multilabel_margin_loss pdist""".split()


def _safe_log(x):
    """log(x), with x = 0 read as 1 so that a masked-out term has a finite gradient."""
    return ops.log(ops.where(x == 0, 1.0, x))


def _softplus(x):
    """log(1 + exp(x)) for every x, without overflow."""
    return ops.softplus(x, 1.0, math.inf)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The KL divergence sum of target * (log(target) - input) for log-probabilities ``input`` (with
    ``log_target``, ``target`` holds log-probabilities too). ``reduction='batchmean'`` divides the sum by
    the batch size, the true KL divergence; 'mean' divides by the number of elements, with torch's warning."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not input.is_floating_point() and not target.is_floating_point():
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        loss = ops.where(target == 0, 0.0, target * ops.log(target)) - target * input  # xlogy, as torch
    if reduction == "batchmean":
        total = ops.sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) when ``full``) with ``var`` clamped to at
    least ``eps`` (the clamp passes no gradient); ``var`` may lack input's last dim or be one number."""
    if isinstance(var, builtins.float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = ones_like(input) * var
    elif builtins.bool(ops.any(var < 0)):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = ops.unsqueeze(var, -1)
        elif not (input.ndim == var.ndim
                  and builtins.sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = ops.clone(var)
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (ops.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """The negative log-likelihood of ``target`` under Poisson(rate): exp(input) - target * input for a log
    rate (``log_input``), else input - target * log(input + eps); ``full`` adds Stirling's approximation of
    log(target!) where target > 1."""
    reduction = _reduction(size_average, reduce, reduction)
    if log_input:
        loss = ops.exp(input) - target * input
    else:
        loss = input - target * ops.log(input + eps)
    if full:
        stirling = target * _safe_log(target) - target + 0.5 * _safe_log(2 * math.pi * target)
        loss = loss + ops.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dim (x1 and x2 broadcast together)."""
    dim = builtins.max(x1.ndim, x2.ndim) - 1
    return ops.norm(x1 - x2 + eps, p, dim, keepdim=keepdim) if dim >= 0 else ops.abs(x1 - x2 + eps)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin): target 1 asks input1 to rank higher, -1 input2."""
    reduction = _reduction(size_average, reduce, reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _reduce(ops.clamp_min(ops.neg(target) * (input1 - input2) + margin, 0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)) for targets of 1 or -1 (a two-class logistic loss)."""
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce(_softplus(ops.neg(target) * input), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input (a distance) where target is 1, max(0, margin - input) where target is -1."""
    reduction = _reduction(size_average, reduce, reduction)
    hinge = ops.where(target != 1, ops.clamp_min(margin - input, 0), 0.0)
    return _reduce(hinge + ops.where(target != -1, input, 0.0), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; the cosine is taken
    along the last dim of the [N, D] (or [D], for a 0-d target) inputs."""
    reduction = _reduction(size_average, reduce, reduction)
    dim = target.ndim
    if dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != input2.ndim or input1.ndim != dim + 1:
        expected = "1D target tensor expects 2D input tensors" if dim else "0D target tensor expects 1D input tensors"
        raise RuntimeError(f"{expected}, but found inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    products = ops.sum(input1 * input2, dim)
    squares1, squares2 = ops.sum(input1 * input1, dim) + 1e-12, ops.sum(input2 * input2, dim) + 1e-12
    cos = products / ops.sqrt(squares1 * squares2)
    loss = ops.where(target == 1, 1 - cos, 0.0) + ops.where(target == -1, ops.clamp_min(cos - margin, 0), 0.0)
    return _reduce(loss, reduction)


def _check_triplet_dims(anchor, positive, negative):
    dims = (anchor.ndim, positive.ndim, negative.ndim)
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D "
                           "inputs")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with ``pairwise_distance`` d; ``swap``
    uses the smaller of d(anchor, negative) and d(positive, negative)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_triplet_dims(anchor, positive, negative)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ops.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(ops.clamp_min(margin + d_pos - d_neg, 0), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The binary cross-entropy of each class's logit against its 0/1 target (weighted by ``weight``),
    averaged over the classes (the last dim)."""
    reduction = _reduction(size_average, reduce, reduction)
    # -(t log(sigmoid(x)) + (1 - t) log(sigmoid(-x))), with -log(sigmoid(x)) = softplus(-x) taken stably
    loss = target * _softplus(ops.neg(input)) + (1 - target) * _softplus(input)
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = ops.sum(loss, class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction)



def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """``triplet_margin_loss`` with any ``distance_function(x1, x2)`` (``pairwise_distance`` by default)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _check_triplet_dims(anchor, positive, negative)
    distance = pairwise_distance if distance_function is None else distance_function
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, distance(positive, negative))
    return _reduce(ops.clamp_min(margin + distance(anchor, positive) - d_neg, 0), reduction)


def _class_rows(input, target):
    """input as [N, C] and target as [N] (a [C] input with a 0-d target is one row)."""
    if input.ndim == 1 or input.ndim == 0:
        return ops.reshape(input, (1, -1)), ops.reshape(target, (1,))
    return input, target


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """The multi-class hinge loss: the mean over classes i != y of max(0, margin - x[y] + x[i])^p (times
    ``weight[y]``) for class-index targets y."""
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x, y = _class_rows(input, target)
    n, c = x.shape
    if input.ndim > 1 and (target.ndim != 1 or target.shape[0] != n):
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{n}], but got {list(target.shape)}. Input "
                           f"has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    if y.numel() and builtins.bool(((y < 0) | (y >= c)).any()):
        raise RuntimeError("target out of range")
    column = ops.unsqueeze(y, 1)
    hinge = ops.clamp_min(margin - ops.gather(x, 1, column) + x, 0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * ops.unsqueeze(ops.index_select(weight, 0, y), 1)
    hinge = ops.scatter(hinge, 1, column, 0.0)  # the target class itself does not count
    loss = ops.sum(hinge, 1) / c
    return _reduce(loss if input.ndim > 1 else ops.reshape(loss, ()), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss: for each target class j (``target``'s leading entries up to the first -1)
    and each non-target class i, max(0, 1 - (x[j] - x[i])), summed and divided by the number of classes."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape) or input.ndim > 2:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    x, t = (ops.unsqueeze(input, 0), ops.unsqueeze(target, 0)) if input.ndim == 1 else (input, target)
    c = x.shape[1]
    listed = ops.cumprod((t != -1).to(x.dtype), 1) > 0  # the entries before the first -1
    if builtins.bool((listed & ((t < 0) | (t >= c))).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    t = ops.where(listed, t, 0)
    classes = arange(c, device=x.device)
    is_target = ops.any((ops.unsqueeze(t, 2) == classes) & ops.unsqueeze(listed, 2), 1)
    margins = 1 - ops.unsqueeze(ops.gather(x, 1, t), 2) + ops.unsqueeze(x, 1)  # [N, j, i]
    pairs = ops.unsqueeze(listed, 2) & ops.unsqueeze(~is_target, 1)
    loss = ops.sum(ops.where(pairs, ops.clamp_min(margins, 0), 0.0), (1, 2)) / c
    return _reduce(loss if input.ndim > 1 else ops.reshape(loss, ()), reduction)

