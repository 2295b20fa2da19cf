"""The products torch has beyond ``linalg``: the scaled sums addmm, addmv, addr, baddbmm, addbmm
(``beta * input + alpha * product``), kron, inner, vdot, tensordot, ger, vander, block_diag, cov and
corrcoef (compositions of differentiable ops), and cdist/pdist (the ``Cdist`` and ``EuclideanCdist``
Functions: pairwise p-norm distances).
"""
import builtins
import math
import warnings

import numpy as np

from .. import _dtypes
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method
from .base import Op
from .common import _LEGACY_TYPE_NAMES, _cast, _write_out, inplace_variant, with_out
from .elementwise import add, clamp, div, mul, sqrt, sub
from .linalg import bmm, diag, dot, matmul, mm, mv, outer
from .reductions import sum
from .shape import cat, reshape, squeeze, unsqueeze


__all__ = ["Cdist", "EuclideanCdist", "addmm", "addmv", "addr", "baddbmm", "addbmm", "kron", "inner", "vdot",
           "block_diag", "cov", "corrcoef", "cdist", "pdist", "tensordot", "ger", "vander", "chain_matmul"]


class Cdist(Op):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R).
    Gradients as torch's: 0 where a distance is 0, none for p = 0; p = inf sends it to the largest gaps."""

    @staticmethod
    def forward(ctx, x1, x2, p):
        xp = ctx.xp
        diff = xp.expand_dims(x1, -2) - xp.expand_dims(x2, -3)
        gap = xp.abs(diff)
        if p == 0:
            dist = (gap != 0).sum(-1).astype(x1.dtype)
        elif p == math.inf:
            dist = gap.max(-1) if gap.shape[-1] else xp.zeros(gap.shape[:-1], x1.dtype)
        elif p == 1:
            dist = gap.sum(-1)
        elif p == 2:
            dist = xp.sqrt((gap * gap).sum(-1))
        else:
            dist = (gap ** p).sum(-1) ** (1 / p)
        ctx.save_for_backward(diff, dist)
        ctx.args = p, x1.shape, x2.shape
        return dist

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        diff, dist = ctx.saved_tensors
        p, shape1, shape2 = ctx.args
        d = xp.expand_dims(dist, -1)
        if p == 0:
            per_pair = xp.zeros(diff.shape, g.dtype)
        elif p == math.inf:
            per_pair = xp.sign(diff) * (xp.abs(diff) == d)
        elif p == 1:
            per_pair = xp.sign(diff)
        else:  # d dist / d diff = sign(diff) |diff|^(p-1) / dist^(p-1), 0 where diff or dist is 0
            per_pair = xp.where((d == 0) | (diff == 0), 0, xp.sign(diff) * xp.abs(diff) ** (p - 1) / d ** (p - 1))
        per_pair = per_pair.astype(g.dtype, copy=False) * xp.expand_dims(g, -1)
        g1, g2 = per_pair.sum(-2), -per_pair.sum(-3)
        return _sum_to(g1, shape1), _sum_to(g2, shape2), None


class EuclideanCdist(Op):
    """cdist for p = 2 through one matrix product, |a|^2 + |b|^2 - 2 a.b (clamped at 0): memory
    O(P R) instead of O(P R M), what torch does for more than 25 rows. The gradient has the same
    form, g / dist times the differences, summed without forming them (0 where a distance is 0)."""

    @staticmethod
    def forward(ctx, x1, x2):
        xp = ctx.xp
        squares = (x1 * x1).sum(-1)[..., :, None] + (x2 * x2).sum(-1)[..., None, :]
        dist = xp.sqrt(xp.maximum(squares - 2 * (x1 @ xp.swapaxes(x2, -1, -2)), 0))
        ctx.save_for_backward(x1, x2, dist)
        return dist

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x1, x2, dist = ctx.saved_tensors
        w = xp.where(dist == 0, 0, g / xp.where(dist == 0, 1, dist)).astype(g.dtype, copy=False)
        g1 = x1 * w.sum(-1)[..., None] - w @ x2
        g2 = x2 * w.sum(-2)[..., None] - xp.swapaxes(w, -1, -2) @ x1
        return _sum_to(g1, x1.shape), _sum_to(g2, x2.shape)


def _sum_to(g, shape):
    """The gradient of a batch-broadcast operand, summed back over the batch dims it was broadcast along."""
    extra = g.ndim - len(shape)
    if extra:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


# ---- the scaled products ---------------------------------------------------------------------------

def _scale(value, dtype):
    """alpha or beta as torch applies it: an int for integer dtypes, a bool for bool tensors."""
    if dtype is _dtypes.bool:
        return builtins.bool(value)
    return value if dtype.is_floating_point else builtins.int(value)


def _scaled_sum(input, product, beta, alpha):
    """``beta * input + alpha * product`` with input broadcast to the product's shape; beta = 0 ignores
    input's values (NaN included), as torch does."""
    base = input.expand(product.shape)
    beta, alpha = _scale(beta, product.dtype), _scale(alpha, product.dtype)
    if product.dtype is _dtypes.bool:  # bool tensors: ``and`` for the scales, ``or`` for the sum
        terms = [t for t, keep in ((base, beta), (product, alpha)) if keep]
        return terms[0] | terms[1] if len(terms) == 2 else terms[0].clone() if terms else product & False
    scaled = product if alpha == 1 else mul(product, alpha)
    if beta == 0:
        return scaled if scaled is not product else product.clone()
    return add(base if beta == 1 else mul(base, beta), scaled)


def _same_dtype(message, *tensors):
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(message.format(*(_LEGACY_TYPE_NAMES[t.dtype.name] for t in tensors)))


@with_out("input", "mat1", "mat2")
@inplace_variant
@tensor_method
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``: input broadcast to the (n, p) product; one dtype for all."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{'mat1' if mat1.ndim != 2 else 'mat2'} must be a matrix, got "
                           f"{(mat1 if mat1.ndim != 2 else mat2).ndim}-D tensor")
    _same_dtype("self and mat2 must have the same dtype, but got {} and {}", input, mat2)
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@with_out("input", "mat", "vec")
@inplace_variant
@tensor_method
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``: input broadcast to the (n,) product; one dtype for all."""
    _same_dtype("addmv input tensors must have the same dtype, but got {}, {}, and {}", input, mat, vec)
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@with_out("input", "vec1", "vec2")
@inplace_variant
@tensor_method
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``, in the promoted dtype of the three."""
    for name, vec in (("vec1", vec1), ("vec2", vec2)):
        if vec.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {vec.ndim}-D")
    dtype = _dtypes.result_type([t.dtype for t in (input, vec1, vec2)], ())
    input, vec1, vec2 = (_cast(t, dtype) for t in (input, vec1, vec2))
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


def _check_batches(name, batch1, batch2):
    for arg, t in (("batch1", batch1), ("batch2", batch2)):
        if t.ndim != 3:
            raise RuntimeError(f"{arg} must be a 3D tensor, got {t.ndim}-D")
    if batch1.shape[0] != batch2.shape[0]:
        if name == "addbmm":
            raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and "
                               f"{batch2.shape[0]}")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{batch1.shape[0]}, "
                           f"{batch1.shape[2]}] but got: [{batch2.shape[0]}, {batch2.shape[1]}].")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                           f"{batch2.shape[1]}x{batch2.shape[2]})")


@with_out("input", "batch1", "batch2")
@inplace_variant
@tensor_method
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * bmm(batch1, batch2)``: input broadcast to the (b, n, p) products."""
    _check_batches("baddbmm", batch1, batch2)
    _same_dtype("self and mat2 must have the same dtype, but got {} and {}", input, batch2)
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


@with_out("input", "batch1", "batch2")
@inplace_variant
@tensor_method
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``: the products reduced over the batch."""
    _check_batches("addbmm", batch1, batch2)
    _same_dtype("self and mat2 must have the same dtype, but got {} and {}", input, batch2)
    return _scaled_sum(input, sum(bmm(batch1, batch2), 0), beta, alpha)


# ---- other products --------------------------------------------------------------------------------

def _check_tensor(op, name, value, position):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}")


@with_out("input", "other")
@tensor_method
def kron(input, other):
    """The Kronecker product: every element of ``input`` times the whole of ``other``, blocks laid out
    along each dimension (the fewer dims padded with leading ones)."""
    _check_tensor("kron", "other", other, 2)
    n = builtins.max(input.ndim, other.ndim)
    a_shape = (1,) * (n - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (n - other.ndim) + tuple(other.shape)
    a = reshape(input, [s for k in a_shape for s in (k, 1)])
    b = reshape(other, [s for k in b_shape for s in (1, k)])
    return reshape(mul(a, b), [x * y for x, y in zip(a_shape, b_shape)])


@with_out("input", "other")
@tensor_method
def inner(input, other):
    """The sum over the last dimension of the products of ``input`` and ``other``: shape
    ``input.shape[:-1] + other.shape[:-1]`` (a 0-d operand scales the other)."""
    _check_tensor("inner", "other", other, 2)
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    if input.dtype is not other.dtype:
        raise RuntimeError("both inputs should have same dtype")
    n = input.shape[-1]
    flat = matmul(reshape(input, (-1, n)), reshape(other, (-1, n)).t())
    return reshape(flat, tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


@with_out("input", "other")
@tensor_method
def vdot(input, other):
    """The dot product of two 1-d tensors of one size and dtype (real tensors: ``dot``)."""
    _check_tensor("vdot", "other", other, 2)
    if input.ndim == 1 and other.ndim == 1 and input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}]"
                           f" to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
                           "elements respectively")
    if input.ndim == 1 and other.ndim == 1 and input.dtype is not other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_LEGACY_TYPE_NAMES[input.dtype.name]} and {_LEGACY_TYPE_NAMES[other.dtype.name]}")
    return dot(input, other)


def block_diag(*tensors):
    """The tensors (each 0-, 1- or 2-d; a 1-d one is a row) laid out along the diagonal of one matrix,
    zeros elsewhere, in their promoted dtype."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"block_diag(): argument 'tensors' must be a sequence of Tensors, got "
                            f"{type(t).__name__} at position {i}")
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
    if not tensors:
        from rlpipe._creation import zeros
        return zeros(1, 0)
    dtype = _dtypes.result_type([t.dtype for t in tensors], ())
    blocks = [_cast(reshape(t, (1, -1)) if t.ndim < 2 else t, dtype) for t in tensors]
    width = builtins.sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(_padded_row(b, left, width - left - b.shape[1]))
        left += b.shape[1]
    return cat(rows, 0)


def _padded_row(block, left, right):
    """``block`` with ``left`` zero columns before it and ``right`` after."""
    from rlpipe._creation import zeros
    pad = lambda n: zeros(block.shape[0], n, dtype=block.dtype, device=block.device)
    return cat([pad(left), block, pad(right)], 1)


def _check_weights(name, weights, observations, floating):
    if weights.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{weights.ndim} dimensions")
    if weights.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {weights.numel()} != {observations}")
    if weights.is_floating_point() != floating:
        kind = "floating point" if floating else "integral"
        raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} with "
                           f"{_LEGACY_TYPE_NAMES[weights.dtype.name]} dtype")
    if builtins.bool((weights._data < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


@torch_function("input")
@tensor_method
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in ``input``'s rows (observations in columns; a 1-d input
    is one variable), with the frequency weights ``fweights`` (integers) and observation weights
    ``aweights`` (floats); ``correction=1`` is the unbiased estimate. One variable gives a 0-d tensor."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = reshape(input, (1, -1)) if input.ndim < 2 else input
    if not x.is_floating_point():
        x = _cast(x, _dtypes.get_default_dtype())
    observations = x.shape[1]
    weights = None
    for name, w, floating in (("fweights", fweights, False), ("aweights", aweights, True)):
        if w is not None:
            _check_weights(name, w, observations, floating)
            w = _cast(w, x.dtype)
            weights = w if weights is None else mul(weights, w)
    if weights is None:
        mean = div(sum(x, 1, keepdim=True), observations)
        norm = observations - correction
    else:
        total = sum(weights)
        mean = sum(mul(x, weights), 1, keepdim=True) / total
        norm = total - (correction * sum(mul(weights, aweights)) / total if aweights is not None and correction
                        else correction)
    if builtins.float(norm) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=3)
        norm = norm * 0 if isinstance(norm, Tensor) else 0
    centred = sub(x, mean)
    product = mm(centred, (centred if weights is None else mul(centred, weights)).t())
    return squeeze(div(product, norm))


@torch_function("input")
@tensor_method
def corrcoef(input):
    """The Pearson correlation coefficients of the variables in ``input``'s rows (observations in
    columns), clipped to [-1, 1]; a constant variable gives NaN, as in torch."""
    c = cov(input)
    if c.ndim == 0:
        return div(c, c)
    std = sqrt(diag(c))
    return clamp(div(div(c, unsqueeze(std, 1)), unsqueeze(std, 0)), -1, 1)


_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@torch_function("x1", "x2")
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distances between each row vector of ``x1`` (..., P, M) and each of ``x2`` (..., R, M):
    (..., P, R), batch dims broadcast. For p = 2 with more than 25 rows on either side (or with
    ``compute_mode="use_mm_for_euclid_dist"``) through a matrix product, as torch; otherwise directly."""
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, t in (("X1", x1), ("X2", x2)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
        if not t.is_floating_point():
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{_LEGACY_TYPE_NAMES[t.dtype.name]}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"expected scalar type {_LEGACY_TYPE_NAMES[x1.dtype.name]} but found "
                           f"{_LEGACY_TYPE_NAMES[x2.dtype.name]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    try:
        np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"cdist: the batch dimensions {list(x1.shape[:-2])} and {list(x2.shape[:-2])} cannot be "
                           "broadcast") from None
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or compute_mode == _COMPUTE_MODES[0] and (
            x1.shape[-2] > 25 or x2.shape[-2] > 25)):
        return EuclideanCdist.apply(x1, x2)
    return Cdist.apply(x1, x2, builtins.float(p))


@torch_function("input")
def pdist(input, p=2):
    """The p-norm distance between each pair of rows of the 2-d ``input`` (row i before row j, i < j),
    as the upper triangle of ``cdist(input, input)`` read row by row."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    n = input.shape[0]
    rows, cols = np.triu_indices(n, 1)
    from rlpipe._creation import tensor
    first = tensor(rows, device=input.device)
    second = tensor(cols, device=input.device)
    return cdist(input.index_select(0, first).unsqueeze(1), input.index_select(0, second).unsqueeze(1), p).reshape(-1)


def _contracted_dims(a, b, dims):
    """The two lists of dims ``tensordot`` sums over: the last ``dims`` of a with the first of b, or
    the lists given (a pair of lists, or a 2 x k tensor)."""
    if isinstance(dims, Tensor):
        dims = dims.tolist() if dims.ndim else builtins.int(dims.item())
    if isinstance(dims, (builtins.int, np.integer)):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        return list(range(-dims, 0)), list(range(dims))
    first, second = ([d] if isinstance(d, (builtins.int, np.integer)) else list(d) for d in dims)
    if len(first) != len(second):
        raise RuntimeError("both dimension lists should have same length")
    return first, second


@torch_function("a", "b")
def tensordot(a, b, dims=2, out=None):
    """The sum of products of ``a`` and ``b`` over the contracted dims (see ``dims``: the last ``dims``
    of a with the first of b, or two lists of dims): a's other dims followed by b's."""
    if out is not None:
        return _write_out(out, tensordot, (a, b), {"dims": dims})
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    first, second = _contracted_dims(a, b, dims)
    for d1, d2 in zip(first, second):
        if a.shape[d1] != b.shape[d2]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[d1]} in dim {d1} "
                               f"and second has size {b.shape[d2]} in dim {d2}")
    first, second = [a._dim(d) for d in first], [b._dim(d) for d in second]
    kept_a = [d for d in range(a.ndim) if d not in first]
    kept_b = [d for d in range(b.ndim) if d not in second]
    size = builtins.int(np.prod([a.shape[d] for d in first]))
    left = reshape(a.permute(*kept_a, *first), (-1, size))
    right = reshape(b.permute(*second, *kept_b), (size, -1))
    return reshape(matmul(left, right), [a.shape[d] for d in kept_a] + [b.shape[d] for d in kept_b])


@tensor_method
def ger(input, vec2):
    """``outer``'s older name: the outer product of two 1-d tensors."""
    for name, vec in (("self", input), ("vec2", vec2)):
        if vec.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {vec.ndim}-D")
    return outer(input, vec2)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-d ``x``: columns ``x ** (N - 1)`` down to ``x ** 0`` (``increasing``:
    the other way round); ``N`` columns, len(x) by default. Bools count as int64."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    from rlpipe._creation import arange
    base = _cast(x, _dtypes.int64) if x.dtype is _dtypes.bool else x
    powers = arange(n, device=x.device)
    if not increasing:
        powers = powers.flip(0)
    if n == 0:
        return reshape(base, (-1, 1))[:, :0]
    return unsqueeze(base, 1) ** _cast(powers, base.dtype)


def chain_matmul(*matrices, out=None):
    """The product of the given 2-d matrices, left to right (``linalg.multi_dot``'s older form)."""
    if out is not None:
        return _write_out(out, chain_matmul, matrices, {})
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    result = matrices[0]
    for m in matrices[1:]:
        result = mm(result, m)
    return result if len(matrices) > 1 else result.clone()
