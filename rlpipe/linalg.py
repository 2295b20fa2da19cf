"""``rlpipe.linalg`` (torch.linalg): factorizations, solvers, inverses, determinants, norms and matrix
functions at torch's paths, each differentiable."""
from .primitives.linalg import cross as _cross, linalg_svd as svd, matmul
from .primitives.decompositions import (LinAlgError, cholesky_ex, eigh, eigvalsh, inv, linalg_cholesky as cholesky,
                                        linalg_det as det, linalg_qr as qr, linalg_slogdet as slogdet,
                                        linalg_solve as solve, solve_triangular)
from .primitives.matrix_functions import (cond, linalg_norm as norm, lstsq, matrix_exp, matrix_norm, matrix_power,
                                          matrix_rank, multi_dot, pinv, vecdot, vector_norm)
from .primitives.lu import linalg_lu as lu, linalg_lu_solve as lu_solve, lu_factor, lu_factor_ex
from .primitives.shape import diagonal as _diagonal

__all__ = ["svd", "svdvals", "cross", "LinAlgError", "cholesky", "cholesky_ex", "det", "diagonal", "eigh",
           "eigvalsh", "inv", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "multi_dot", "norm", "pinv", "qr",
           "slogdet", "solve", "solve_triangular", "vecdot", "vector_norm", "cond", "lstsq", "matrix_rank",
           "lu", "lu_factor", "lu_factor_ex", "lu_solve"]


def svdvals(A, *, driver=None):
    """The singular values of A (the last two dims), in descending order."""
    return svd(A, full_matrices=False).S


def cross(input, other, *, dim=-1):
    """The cross product along ``dim`` (the last one by default, unlike ``torch.cross``'s first size-3 dim)."""
    return _cross(input, other, dim=dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: ``torch.diagonal`` with the last two dims by default."""
    return _diagonal(A, offset, dim1, dim2)
