"""Products: the Functions (matmul, linear: x @ w.T + b in one node, einsum) and the public ops
(matmul and the ``@`` operator, mm, bmm, dot, outer, cross, svd, diag, diag_embed, trace, einsum, linear;
``diagonal`` is a view, in shape.py).
"""
import builtins
import collections
import math
import string

import numpy as np

from .. import return_types
from .._dispatch import torch_function
from .._tensor import Tensor, tensor_method
from .base import Op, unbroadcast
from .common import _C_TYPE_NAMES, tensor_operator, _tensor_like, _write_out, with_out
from .elementwise import mul
from .shape import Diagonal, _diagonal_of, unsqueeze


class MatMul(Op):
    """a @ b (NumPy matmul: 1-d operands, broadcast batches); gradients g @ b.T and a.T @ g, summed back over broadcast
    batch dims."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        a, b = ctx.saved_tensors
        if a.ndim == 1 and b.ndim == 1:  # a dot product: g is 0-d
            return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = xp.expand_dims(g2, -2)
        if b.ndim == 1:
            g2 = xp.expand_dims(g2, -1)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = unbroadcast(g2 @ xp.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = unbroadcast(xp.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)
        return ga, gb


class Linear(Op):
    """x @ w.T + b in one op (nn.Linear's forward): fewer graph nodes and temporaries."""
    node_name = "AddmmBackward0"

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        x_shape, w_shape = x.shape, w.shape
        if 4 * x_shape[0] > w_shape[0] or not _weight_first_pays(x_shape, w_shape) or ctx.be.name != "cpu":
            out = x @ w.T  # (the first test, inline, settles the common case: many rows)
        else:
            out = _weight_first(ctx.xp, x, w)
        if b is not None:
            out += b
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])
        return (g @ w if need_x else None,
                g2.T @ x.reshape(-1, x.shape[-1]) if need_w else None,
                g2.sum(axis=0) if need_b else None)


def _weight_first_pays(x_shape, w_shape):
    """Whether ``x @ w.T`` runs faster on the CPU as ``(w @ x.T).T``: a few rows (2 up to a quarter of both
    of the weight's sides) against a wide weight, whose transposed product OpenBLAS runs slowly (32 rows
    through 3136 -> 512: 1010 -> 590 us with its AVX-512 kernels, 1083 -> 1036 us with AVX2 ones)."""
    # (on every Linear call: the common case, many rows, answers after one comparison)
    rows = x_shape[0] if len(x_shape) == 2 else math.prod(x_shape[:-1])
    return 4 * rows <= w_shape[0] and 4 * rows <= w_shape[-1] and 1 < rows and len(w_shape) == 2


def _weight_first(xp, x, w):
    """``x @ w.T`` computed as ``(w @ x.T).T``, made contiguous again."""
    rows = x.reshape(-1, x.shape[-1])
    return xp.ascontiguousarray((w @ rows.T).T).reshape(x.shape[:-1] + (w.shape[0],))


class Cross(Op):
    """The cross product of 3-vectors along ``dim`` (operands broadcast): the gradients are b x g and g x a."""

    @staticmethod
    def forward(ctx, a, b, dim):
        ctx.save_for_backward(a, b)
        ctx.dim = dim
        return ctx.xp.cross(a, b, axis=dim)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        cross = ctx.xp.cross
        return (unbroadcast(cross(b, g, axis=ctx.dim), a.shape) if ctx.needs_input_grad[0] else None,
                unbroadcast(cross(g, a, axis=ctx.dim), b.shape) if ctx.needs_input_grad[1] else None)


class Svd(Op):
    """(U, S, Vh) with A = U diag(S) Vh (NumPy's/CuPy's LAPACK); the gradient is torch's formula for the
    reduced factors, with the extra columns of full ones narrowed away (their gradient is undefined)."""

    @staticmethod
    def forward(ctx, a, full_matrices):
        u, s, vh = ctx.xp.linalg.svd(a, full_matrices=full_matrices)
        k = s.shape[-1]
        ctx.args = u[..., :k], s, vh[..., :k, :]
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        xp = ctx.xp
        u, s, vh = ctx.args
        k = s.shape[-1]
        gu, gvh = gu[..., :k], gvh[..., :k, :]
        m, n = u.shape[-2], vh.shape[-1]
        mT = lambda x: xp.swapaxes(x, -1, -2)  # noqa: E731
        if not gu.any() and not gvh.any():  # only S is used: no division by the gaps between singular values
            return (u * gs[..., None, :]) @ vh, None
        v, gv = mT(vh), mT(gvh)
        s2 = s * s
        gaps = s2[..., None, :] - s2[..., :, None]
        idx = xp.arange(k)
        gaps[..., idx, idx] = 1
        skew = lambda x: x - mT(x)  # noqa: E731
        ga = (skew(mT(u) @ gu) * s[..., None, :] + s[..., :, None] * skew(mT(v) @ gv)) / gaps
        ga[..., idx, idx] += gs
        if m > k:
            gu_sinv = gu / s[..., None, :]
            ga = (u @ ga + gu_sinv - u @ (mT(u) @ gu_sinv)) @ vh
        elif n > k:
            gv_sinv = gv / s[..., None, :]
            ga = u @ (ga @ vh + mT(gv_sinv) - (mT(gv_sinv) @ v) @ vh)
        else:
            ga = u @ ga @ vh
        return ga, None


class DiagEmbed(Op):
    """The last dim of ``v`` laid on diagonal ``offset`` of square matrices of zeros in the output dims
    ``dim1``/``dim2``; the gradient reads that diagonal back."""

    @staticmethod
    def forward(ctx, v, offset, dim1, dim2):
        xp = ctx.xp
        n = v.shape[-1] + builtins.abs(offset)
        out = xp.zeros(v.shape[:-1] + (n, n), dtype=v.dtype)
        _diagonal_of(xp, out, offset, -2, -1)[...] = v
        ctx.args = offset, dim1, dim2
        return xp.moveaxis(out, (-2, -1), (dim1, dim2))

    @staticmethod
    def backward(ctx, g):
        offset, dim1, dim2 = ctx.args
        return ctx.xp.diagonal(g, offset, dim1, dim2).copy(), None, None, None


class Einsum(Op):
    """einsum with an explicit equation (the public ``einsum`` makes it explicit and expands '...')."""

    @staticmethod
    def forward(ctx, *operands, inputs, output):
        ctx.save_for_backward(*operands)
        ctx.args = inputs, output
        return ctx.xp.einsum(",".join(inputs) + "->" + output, *operands)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        operands = ctx.saved_tensors
        inputs, output = ctx.args
        grads = [None] * len(operands)
        for k, others, present in einsum_grad_terms(inputs, output, ctx.needs_input_grad):
            x = operands[k]
            partial = xp.einsum(",".join([output] + others) + "->" + present,
                                g, *[o for j, o in enumerate(operands) if j != k])
            partial = partial.reshape(einsum_unreduced_shape(partial.shape, present, inputs[k]))
            grads[k] = (unbroadcast(xp.broadcast_to(partial, xp.broadcast_shapes(partial.shape, x.shape)), x.shape)
                        .astype(x.dtype, copy=False))
        return tuple(grads)


def einsum_grad_terms(inputs, output, needs_input_grad):
    """For each operand k whose gradient is needed: k, the other operands' subscripts and the subscripts of k
    that the contraction of the output gradient with the others keeps (one operand repeating a subscript is
    refused)."""
    for k, sub in enumerate(inputs):
        if not needs_input_grad[k]:
            continue
        if len(set(sub)) != len(sub):
            raise RuntimeError(f"einsum backward: repeated subscripts within one operand ({sub!r}) "
                               "are not supported by rlpipe")
        others = [s for j, s in enumerate(inputs) if j != k]
        yield k, others, "".join(c for c in sub if c in output or any(c in s for s in others))


def einsum_unreduced_shape(shape, present, sub):
    """The shape of a partial gradient over ``present`` laid out along operand subscripts ``sub`` (size 1 for the
    subscripts summed away)."""
    return [shape[present.index(c)] if c in present else 1 for c in sub]


# ---- the public ops -------------------------------------------------------------------------------

@with_out("input", "other")
@tensor_operator("matmul", inplace=False)
@tensor_method
def matmul(input, other):
    """The matrix product with NumPy's and torch's rules: dot product for two vectors, batched and broadcast above 2
    dims; both operands must share a dtype. Also ``@``."""
    if not isinstance(input, Tensor):
        input = _tensor_like(input, other)
    if not isinstance(other, Tensor):
        other = _tensor_like(other, input)
    if input._data.dtype != other._data.dtype:  # equal, not identical: unpickled arrays have their own dtype objects
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_C_TYPE_NAMES.get(input.dtype.name)}"
                           f" != {_C_TYPE_NAMES.get(other.dtype.name)}")
    try:
        return MatMul.apply(input, other)
    except RuntimeError:
        raise RuntimeError(_matmul_error(input, other)) from None


def _matmul_error(a, b):
    if a.ndim == 0 or b.ndim == 0:
        return f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D"
    k_a, k_b = a.shape[-1], (b.shape[-2] if b.ndim > 1 else b.shape[0])
    rows = builtins.int(np.prod(a.shape[:-1])) if a.ndim > 1 else 1
    if k_a != k_b:
        return f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and {k_b}x{b.shape[-1] if b.ndim > 1 else 1})"
    return f"matmul: batch dimensions {list(a.shape[:-2])} and {list(b.shape[:-2])} cannot be broadcast"


@torch_function("input", "weight", "bias")
def linear(input, weight, bias=None):
    """input @ weight.T + bias, as one fused op (what nn.Linear runs)."""
    dt = input._data.dtype
    if weight._data.dtype != dt or bias is not None and bias._data.dtype != dt:
        raise RuntimeError(f"linear: expected input, weight and bias of one dtype, got {input.dtype}, "
                           f"{weight.dtype} and {None if bias is None else bias.dtype}")
    try:
        return Linear.apply(input, weight, bias)
    except (RuntimeError, AttributeError):  # the shapes are checked only once something failed
        x, w = input._data, weight._data
        if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({builtins.int(np.prod(x.shape[:-1]))}x"
                               f"{x.shape[-1] if x.ndim else 1} and {w.shape[-1]}x{w.shape[0]})") from None
        if bias is not None and bias._data.shape not in ((w.shape[0],), (1,), ()):
            raise RuntimeError(f"linear: bias of shape {list(bias.shape)} does not match {w.shape[0]} output "
                               "features") from None
        raise


@tensor_method
def mm(input, mat2, *, out=None):
    """The product of two matrices (2-d only)."""
    if out is not None:  # (a hand-off, not with_out's wrapper, which would cost every call)
        return _write_out(out, mm, (input, mat2), {})
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm(): expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


@tensor_method
def bmm(input, mat2):
    """The products of two batches of matrices (3-d, equal batch sizes), without broadcasting."""
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm(): expected 3D tensors, got {input.ndim}D and {mat2.ndim}D")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm(): batch sizes differ: {input.shape[0]} and {mat2.shape[0]}")
    return matmul(input, mat2)


@tensor_method
def mv(input, vec, *, out=None):
    """The product of a matrix and a vector, as a vector."""
    if out is not None:
        return _write_out(out, mv, (input, vec), {})
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat ({input.shape[0]}x{input.shape[1]}), "
                           f"vec ({vec.shape[0]})")
    return matmul(input, vec)


@tensor_method
def dot(input, other):
    """The dot product of two 1-d tensors, as a 0-d tensor."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


@tensor_method
def outer(input, vec2):
    """The outer product of two vectors: ``out[i, j] = input[i] * vec2[j]``."""
    return mul(unsqueeze(input, 1), unsqueeze(vec2, 0))


@tensor_method
def cross(input, other, dim=None):
    """The cross product of two (broadcast) tensors of 3-vectors along ``dim``; without ``dim``, the first
    dimension of size 3, as torch.cross does (``torch.linalg.cross`` defaults to -1)."""
    try:
        shape = np.broadcast_shapes(input.shape, other.shape)
    except ValueError:
        raise RuntimeError(f"cross: the shapes {list(input.shape)} and {list(other.shape)} cannot be broadcast "
                           "together") from None
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input (shapes {list(input.shape)} and "
                               f"{list(other.shape)})")
    end_dim = dim - len(shape) if dim >= 0 else dim  # counted from the end, where broadcasting aligns
    sizes = [t.shape[end_dim] if t.ndim >= -end_dim else 1 for t in (input, other)]
    if sizes != [3, 3]:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {sizes[0]} and {sizes[1]}")
    if input._data.dtype != other._data.dtype:
        raise RuntimeError(f"cross: expected both inputs of one dtype, got {input.dtype} and {other.dtype}")
    return Cross.apply(input, other, end_dim)


def linalg_svd(A, full_matrices=True, *, driver=None):
    """``torch.linalg.svd``: (U, S, Vh) with A = U diag(S) Vh, over the last two dims; ``full_matrices``
    gives square U and Vh."""
    if A.ndim < 2:
        raise RuntimeError(f"linalg.svd: The input tensor A must have at least 2 dimensions, got {A.ndim}")
    if not A.is_floating_point():
        raise RuntimeError(f"linalg.svd: Expected a floating point or complex tensor as input. Got {A.dtype}")
    return return_types.linalg_svd(*Svd.apply(A, builtins.bool(full_matrices)))


@tensor_method
def svd(input, some=True, compute_uv=True):
    """``torch.svd``: (U, S, V), V (not its transpose) with input = U diag(S) V^T; ``some=False`` gives
    square factors; without ``compute_uv``, U and V are zeros."""
    if input.ndim < 2:
        raise RuntimeError(f"linalg.svd: The input tensor A must have at least 2 dimensions, got {input.ndim}")
    u, s, vh = linalg_svd(input, full_matrices=not some)
    if not compute_uv:
        return return_types.svd(u.detach() * 0, s, vh.detach().mT * 0)
    return return_types.svd(u, s, vh.mT)


@tensor_method
def diag(input, diagonal=0):
    """A 1-d input laid on diagonal ``diagonal`` of a square matrix, or that diagonal of a 2-d input."""
    if input.ndim == 1:
        return DiagEmbed.apply(input, builtins.int(diagonal), 0, 1)
    if input.ndim == 2:
        return Diagonal.apply(input, builtins.int(diagonal), 0, 1).clone()  # a copy, as torch.diag's
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


@torch_function("input")
@tensor_method
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """The last dim of ``input`` laid on diagonal ``offset`` of square matrices of zeros, which take the
    output dims ``dim1`` and ``dim2`` (torch's ``diag_embed``)."""
    ndim = input.ndim + 1
    d1, d2 = (d + ndim if d < 0 else d for d in (dim1, dim2))
    for dim, d in ((dim1, d1), (dim2, d2)):
        if not 0 <= d < ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
                             f"but got {dim})")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return DiagEmbed.apply(input, builtins.int(offset), d1, d2)


@tensor_method
def trace(input):
    """The sum of the main diagonal of a matrix (integers summed as int64, as torch does)."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return Diagonal.apply(input, 0, 0, 1).sum()  # (sum reads the diagonal view into a new array)


def einsum(equation, *operands):
    """Einstein summation, with '...' and the implicit (no '->') form."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ValueError(f"einsum(): the equation has {len(inputs)} operands but {len(operands)} were given")
    free = [c for c in string.ascii_letters if c not in equation]
    ranks = [op.ndim - (len(sub) - 3) for sub, op in zip(inputs, operands) if "..." in sub]
    ellipsis_letters = "".join(free[:builtins.max(ranks, default=0)])
    expanded = []
    for sub, op in zip(inputs, operands):
        if "..." in sub:  # an operand with fewer '...' dims takes the rightmost letters, as broadcasting does
            n = op.ndim - (len(sub) - 3)
            sub = sub.replace("...", ellipsis_letters[len(ellipsis_letters) - n:] if n > 0 else "")
        if len(sub) != op.ndim:
            raise ValueError(f"einsum(): the subscripts {sub!r} do not match an operand with {op.ndim} dimensions")
        expanded.append(sub)
    if arrow:
        output = rhs.replace("...", ellipsis_letters)
    else:
        counts = collections.Counter("".join(expanded))
        output = ellipsis_letters + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ellipsis_letters))
    if len({o._data.dtype for o in operands}) > 1:
        raise RuntimeError(f"einsum(): operands do not have the same dtype: {[o.dtype.name for o in operands]}")
    return Einsum.apply(*operands, inputs=tuple(expanded), output=output)
