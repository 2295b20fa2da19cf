"""LU factorization with partial pivoting (torch.linalg's ``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve`` and
the older ``torch.lu``, ``lu_unpack``, ``lu_solve``): a vectorized Doolittle elimination over the batch (LAPACK's
getrf order of pivots, 1-based int32 as torch's), differentiable for square matrices."""
import builtins

import numpy as np

from .. import return_types
from .._tensor import tensor_method, wrap
from .base import Op
from .decompositions import _check_matrices, solve_triangular

__all__ = ["lu_factor", "lu_factor_ex", "linalg_lu", "lu_solve", "linalg_lu_solve", "lu", "lu_unpack"]


def _mT(x):
    return x.swapaxes(-1, -2)


def _eliminate(xp, a):
    """(packed LU, 1-based pivots, info) of the matrices of ``a`` (..., m, n), eliminating column by column."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = builtins.min(m, n)
    lu = a.reshape((-1, m, n)).copy()
    count = lu.shape[0]
    rows = xp.arange(count)
    pivots = xp.zeros((count, k), dtype=xp.int32)
    info = xp.zeros((count,), dtype=xp.int32)
    for j in range(k):
        p = j + xp.argmax(xp.abs(lu[:, j:, j]), axis=1)
        pivots[:, j] = (p + 1).astype(xp.int32)
        row_j, row_p = lu[rows, j].copy(), lu[rows, p].copy()
        lu[rows, j], lu[rows, p] = row_p, row_j
        pivot = lu[:, j, j]
        zero = pivot == 0
        info = xp.where(zero & (info == 0), j + 1, info).astype(xp.int32)
        lu[:, j + 1:, j] /= xp.where(zero, 1, pivot)[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), pivots.reshape(batch + (k,)), info.reshape(batch)


def _permutation(xp, pivots, m):
    """perm with A[perm[i]] = (L U)[i]: the row swaps of ``pivots`` (1-based) applied to 0..m-1."""
    flat = pivots.reshape((-1, pivots.shape[-1])).astype(xp.int64) - 1
    rows = xp.arange(flat.shape[0])
    perm = xp.broadcast_to(xp.arange(m), (flat.shape[0], m)).copy()
    for j in range(flat.shape[1]):
        at_j, at_p = perm[rows, j].copy(), perm[rows, flat[:, j]].copy()
        perm[rows, j], perm[rows, flat[:, j]] = at_p, at_j
    return perm.reshape(pivots.shape[:-1] + (m,))


class LuFactor(Op):
    """The packed LU factors (strict lower part: L's, unit diagonal implied; upper part: U) and pivots of A; the
    gradient (square A) is torch's: P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T."""

    @staticmethod
    def forward(ctx, a):
        xp = ctx.xp
        lu_packed, pivots, info = _eliminate(xp, a)
        ctx.mark_non_differentiable(pivots, info)
        ctx.args = lu_packed, pivots
        return lu_packed, pivots, info

    @staticmethod
    def backward(ctx, g, _gpivots, _ginfo):
        xp = ctx.xp
        lu_packed, pivots = ctx.args
        m, n = lu_packed.shape[-2:]
        if m != n:
            raise RuntimeError("linalg.lu_factor: rlpipe differentiates the LU factorization of square matrices only")
        eye = xp.eye(n, dtype=lu_packed.dtype)
        low, up = xp.tril(lu_packed, -1) + eye, xp.triu(lu_packed)
        phi = xp.tril(_mT(low) @ xp.tril(g, -1), -1) + xp.triu(xp.triu(g) @ _mT(up))
        inner = xp.linalg.solve(_mT(low), phi)
        inner = _mT(xp.linalg.solve(up, _mT(inner)))
        perm = _permutation(xp, pivots, n).reshape((-1, n))
        flat = inner.reshape((-1, n, n))
        ga = xp.empty_like(flat)
        ga[xp.arange(flat.shape[0])[:, None], perm] = flat  # rows back to A's order: gA = P M
        return ga.reshape(inner.shape)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """``torch.linalg.lu_factor_ex``: (LU, pivots, info), info the 1-based position of U's first zero diagonal
    entry (0 when none), per matrix."""
    if A.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} "
                           "instead")
    _check_matrices(A, "linalg.lu_factor", square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    packed, pivots, info = LuFactor.apply(A)
    if check_errors and bool((info > 0).any()):
        _raise_zero_pivot(info, "torch.linalg.lu_factor_ex")
    return return_types.linalg_lu_factor_ex(packed, pivots, info)


def _raise_zero_pivot(info, name):
    first = builtins.int(info.reshape(-1)[(info.reshape(-1) > 0).int().argmax()])
    raise RuntimeError(f"{name}: U[{first},{first}] is zero and using it on lu_solve would result in a division by "
                       "zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or "
                       "linalg.lu_factor_ex(A, pivot)")


def lu_factor(A, *, pivot=True):
    """``torch.linalg.lu_factor``: (LU, pivots) with A = P L U; RuntimeError where U has a zero on its diagonal."""
    packed, pivots, info = lu_factor_ex(A, pivot=pivot)
    if bool((info > 0).any()):
        _raise_zero_pivot(info, "torch.linalg.lu_factor")
    return return_types.linalg_lu_factor(packed, pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """``torch.lu_unpack``: (P, L, U) from packed factors and pivots (empty tensors for the parts not unpacked)."""
    m, n = LU_data.shape[-2:]
    k = builtins.min(m, n)
    empty = LU_data.new_empty((0,))
    low = up = empty
    if unpack_data:
        low = (LU_data[..., :, :k].tril(-1) + _identity(LU_data, m, k))
        up = LU_data[..., :k, :].triu()
    perm_matrix = empty
    if unpack_pivots:
        xp = LU_data._device._backend.xp
        perm = _permutation(xp, LU_pivots._data, m)
        eye = xp.eye(m, dtype=LU_data._data.dtype)
        perm_matrix = wrap(xp.ascontiguousarray(_mT(eye[perm])), LU_data.device)  # P[perm[i], i] = 1
    return return_types.lu_unpack(perm_matrix, low, up)


def _identity(like, m, k):
    xp = like._device._backend.xp
    return wrap(xp.eye(m, k, dtype=like._data.dtype), like.device)


def linalg_lu(A, *, pivot=True):
    """``torch.linalg.lu``: (P, L, U) with A = P L U, L unit lower triangular; differentiable in L and U (square A)."""
    packed, pivots = lu_factor_ex(A, pivot=pivot)[:2]
    return return_types.linalg_lu(*lu_unpack(packed, pivots))


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """``torch.linalg.lu_solve``: X with A X = B (X A = B when ``left=False``; A^T in place of A with ``adjoint``),
    A given by ``lu_factor``'s (LU, pivots)."""
    if not left:
        return linalg_lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    xp = LU._device._backend.xp
    perm = wrap(_permutation(xp, pivots._data, LU.shape[-1]).astype(np.int64), LU.device)
    if adjoint:  # A^T X = B with A^T = U^T L^T P^T
        y = solve_triangular(LU.mT, B, upper=False)
        z = solve_triangular(LU.mT, y, upper=True, unitriangular=True)
        return _take_rows(z, perm.argsort(-1))
    y = solve_triangular(LU, _take_rows(B, perm), upper=False, unitriangular=True)  # L U X = P^T B
    return solve_triangular(LU, y, upper=True)


def _take_rows(x, perm):
    """Rows of x in the order ``perm`` (batches broadcast): out[..., i, :] = x[..., perm[i], :]."""
    batch = tuple(np.broadcast_shapes(tuple(x.shape[:-2]), tuple(perm.shape[:-1])))
    x = x.expand(batch + tuple(x.shape[-2:]))
    index = perm.expand(batch + tuple(perm.shape[-1:])).unsqueeze(-1).expand(batch + tuple(x.shape[-2:]))
    return x.gather(-2, index)


@tensor_method
def lu(A, pivot=True, get_infos=False):
    """``torch.lu`` (deprecated there): (LU, pivots), and the infos with ``get_infos`` (without, a zero pivot
    raises)."""
    packed, pivots, info = lu_factor_ex(A, pivot=pivot)
    if get_infos:
        return return_types._lu_with_info(packed, pivots, info)
    if bool((info > 0).any()):
        _raise_zero_pivot(info, "torch.linalg.lu_factor")
    return packed, pivots


@tensor_method
def lu_solve(input, LU_data, LU_pivots):
    """``torch.lu_solve`` (deprecated there): ``linalg.lu_solve(LU_data, LU_pivots, input)``."""
    return linalg_lu_solve(LU_data, LU_pivots, input)

