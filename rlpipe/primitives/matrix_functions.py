"""torch.linalg's norms and matrix functions, composed of differentiable ops (their gradients come from
those): ``vector_norm``, ``matrix_norm``, ``norm``, ``pinv``, ``matrix_power``, ``matrix_exp``,
``cholesky_solve``, ``cholesky_inverse``, ``multi_dot``, ``vecdot``.
"""
import builtins
import math
import numbers

import numpy as np

from .. import _dtypes, return_types
from .._dispatch import torch_function
from .._tensor import tensor_method, wrap
from .common import _LEGACY_TYPE_NAMES, with_out
from .decompositions import _check_matrices, eigh, inv, solve_triangular
from .linalg import linalg_svd, matmul
from .reductions import amax, amin, norm as _p_norm

__all__ = ["vector_norm", "matrix_norm", "linalg_norm", "pinv", "pinverse", "matrix_power", "matrix_exp",
           "cholesky_solve", "cholesky_inverse", "multi_dot", "vecdot", "matrix_rank", "lstsq", "cond"]

_INF = float("inf")


@with_out("x")
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.vector_norm``: the ``ord``-norm of the elements over ``dim`` (all by default) seen as one
    vector: inf/-inf the largest/smallest magnitude, 0 the count of nonzeros."""
    if isinstance(ord, str) or not isinstance(ord, numbers.Number):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not {type(ord).__name__}")
    if not x.is_floating_point():
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{_LEGACY_TYPE_NAMES.get(x.dtype.name, x.dtype.name)}")
    if dim is not None and not isinstance(dim, int):
        dim = tuple(dim)
    return _p_norm(x, builtins.float(ord), dim, keepdim, dtype)


def _matrix_dims(A, dim, name):
    if len(dim) != 2:
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    dims = tuple(d % A.ndim if -A.ndim <= d < A.ndim else d for d in dim)
    if dims[0] == dims[1]:
        raise RuntimeError(f"{name}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return dims


def _reduce_pair(values, dims, keepdim, first, second):
    """``second`` over dims[1] of ``first`` over dims[0] (both kept), then the pair squeezed unless ``keepdim``."""
    out = second(first(values, dims[0]), dims[1])
    return out if keepdim else out.squeeze(builtins.max(dims)).squeeze(builtins.min(dims))


def _singular_values(A, dims, keepdim):
    """The singular values of the matrices spanned by ``dims``, with those dims moved last (or kept as 1s)."""
    s = linalg_svd(A.movedim(dims, (-2, -1)), full_matrices=False).S
    return s, (lambda r: r.unsqueeze(-1).unsqueeze(-1).movedim((-2, -1), dims)) if keepdim else (lambda r: r)


@with_out("A")
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """``torch.linalg.matrix_norm``: 'fro' (Frobenius), 'nuc' (sum of singular values), 2/-2 (largest/smallest
    singular value), 1/-1 (max/min column sum of magnitudes), inf/-inf (max/min row sum) over the two ``dim``."""
    name = "linalg.matrix_norm"
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    dims = _matrix_dims(A, tuple(dim), name)
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return vector_norm(A, 2, dims, keepdim)
    if ord in ("nuc", 2, -2):
        s, restore = _singular_values(A, dims, keepdim)
        return restore(s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1))
    if ord in (1, -1, _INF, -_INF):
        pick = amax if ord > 0 else amin
        along = dims if ord in (1, -1) else dims[::-1]
        return _reduce_pair(A.abs(), along, keepdim, lambda t, d: t.sum(d, keepdim=True),
                            lambda t, d: pick(t, d, keepdim=True))
    raise RuntimeError(f"{name}: Order {ord} not supported.")


@with_out("A")
def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.norm``: a vector norm over one dim (or all elements when neither ``ord`` nor ``dim`` is
    given), a matrix norm over two; with ``ord`` and no ``dim``, A must be 1-d or 2-d."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is None:
        if ord is None:
            return vector_norm(A, 2, None, keepdim, dtype=dtype)
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                               f"{A.ndim}D.")
        dim = tuple(range(A.ndim))
    dim = tuple(dim)
    if len(dim) == 1:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")


def _tolerance(s_max, m, n, dtype, atol, rtol):
    """torch's cut-off for small singular values: max(atol, rtol * the largest), rtol defaulting to eps * max(m, n)
    when neither is given (to 0 when only atol is)."""
    if rtol is None:
        rtol = 0.0 if atol is not None else builtins.float(np.finfo(dtype.np).eps) * builtins.max(m, n)
    tol = s_max * rtol
    if atol is not None:
        tol = tol.clamp(min=atol) if isinstance(atol, numbers.Number) else tol.maximum(atol)
    return tol


def _inverse_above(values, kept):
    """1 / values where ``kept``, 0 elsewhere (the cut values get a zero gradient, not nan)."""
    return values.where(kept, 1.0).reciprocal().where(kept, 0.0)


@with_out("A")
def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """``torch.linalg.pinv``: the Moore-Penrose pseudo-inverse through the SVD (the eigendecomposition when
    ``hermitian``), singular values at or below the tolerance treated as zero."""
    if A.ndim < 2 or not A.is_floating_point():
        raise RuntimeError(f"linalg.pinv({_LEGACY_TYPE_NAMES.get(A.dtype.name, A.dtype.name)}{{{list(A.shape)}}}): "
                           "expected a tensor with 2 or more dimensions of float, double, cfloat or cdouble types")
    m, n = A.shape[-2:]
    if hermitian:
        w, v = eigh(A)
        tol = _tolerance(w.abs().amax(-1, keepdim=True), m, n, A.dtype, atol, rtol)
        w_inv = _inverse_above(w, w.abs() > tol)
        return matmul(v * w_inv.unsqueeze(-2), v.mT)
    u, s, vh = linalg_svd(A, full_matrices=False)
    tol = _tolerance(s.amax(-1, keepdim=True), m, n, A.dtype, atol, rtol)
    s_inv = _inverse_above(s, s > tol)
    return matmul(vh.mT * s_inv.unsqueeze(-2), u.mT)


@torch_function("input")
@tensor_method
def pinverse(input, rcond=1e-15):
    """``torch.pinverse``: ``linalg.pinv`` with singular values below ``rcond`` times the largest cut."""
    return pinv(input, rtol=rcond)


def _identity_like(A):
    """Identity matrices of A's shape, dtype and device (constants)."""
    xp = A._device._backend.xp
    n = A.shape[-1]
    return wrap(xp.broadcast_to(xp.eye(n, dtype=A._data.dtype), tuple(A.shape)).copy(), A._device)


@with_out("A")
@tensor_method
def matrix_power(A, n):
    """``torch.linalg.matrix_power``: A to the integer power ``n`` (by squaring; a negative n inverts first, 0
    gives identities)."""
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {A.shape[-2]} "
                           f"by {A.shape[-1]} matrices")
    if n == 0:
        return _identity_like(A)
    base = inv(A) if n < 0 else A
    result, n = None, builtins.abs(n)
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


_EXP_TERMS = 18  # Taylor terms after scaling to a 1-norm <= 1/2: the truncation error is below 1e-22


@torch_function("A")
@tensor_method
def matrix_exp(A):
    """``torch.linalg.matrix_exp``: the matrix exponential, by scaling and squaring around a Taylor polynomial (one
    scaling for the whole batch, from its largest 1-norm)."""
    _check_matrices(A, "linalg.matrix_exp")
    if A.numel() == 0:
        return A.clone()
    largest = builtins.float(A.detach().abs().sum(-2).amax())
    squarings = builtins.max(0, math.ceil(math.log2(largest / 0.5))) if largest > 0 else 0
    scaled = A / (2.0 ** squarings)
    eye = _identity_like(A)
    result = eye
    for k in range(_EXP_TERMS, 0, -1):
        result = eye + matmul(scaled, result) / k
    for _ in range(squarings):
        result = matmul(result, result)
    return result


@with_out("input", "input2")
@tensor_method
def cholesky_solve(input, input2, upper=False):
    """``torch.cholesky_solve``: X with A X = ``input`` where ``input2`` is A's Cholesky factor (lower, or upper
    when ``upper``)."""
    if input.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {input.ndim} dimensions instead")
    if input2.ndim < 2:
        raise RuntimeError(f"u should have at least 2 dimensions, but has {input2.ndim} dimensions instead")
    if input2.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {input2.shape[-2]} by "
                           f"{input2.shape[-1]} but each b matrix is {input.shape[-2]} by {input.shape[-1]}")
    low = input2.mT if upper else input2
    y = solve_triangular(low, input, upper=False)
    return solve_triangular(low.mT, y, upper=True)


@with_out("input")
@tensor_method
def cholesky_inverse(input, upper=False):
    """``torch.cholesky_inverse``: A^-1 from A's Cholesky factor (lower, or upper when ``upper``)."""
    _check_matrices(input, "cholesky_inverse")
    return cholesky_solve(_identity_like(input), input, upper)


def multi_dot(tensors):
    """``torch.linalg.multi_dot``: the product of a chain of matrices (a 1-d first or last one is a row or column
    vector), multiplied left to right."""
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    result = tensors[0]
    for t in tensors[1:]:
        result = matmul(result, t)
    return result


def vecdot(x, y, *, dim=-1):
    """``torch.linalg.vecdot``: the dot products of x and y (broadcast) along ``dim``."""
    return (x * y).sum(dim)


def _check_tolerances(A, name):
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if not A.is_floating_point():
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{_LEGACY_TYPE_NAMES.get(A.dtype.name, A.dtype.name)}")


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """``torch.linalg.matrix_rank``: the number of singular values (eigenvalue magnitudes when ``hermitian``) above
    ``pinv``'s tolerance, as int64."""
    _check_tolerances(A, "linalg.matrix_rank")
    m, n = A.shape[-2:]
    values = eigh(A).eigenvalues.abs() if hermitian else linalg_svd(A, full_matrices=False).S
    values = values.detach()
    tol = _tolerance(values.amax(-1, keepdim=True), m, n, A.dtype, atol, rtol)
    return (values > tol).sum(-1)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """``torch.linalg.lstsq``: (solution, residuals, rank, singular_values) of min ||A X - B|| (the minimum-norm
    solution where A is rank-deficient), through the pseudo-inverse; as torch's drivers, residuals only for
    tall full-rank A with 'gels'/'gelsd'/'gelss', rank for all but 'gels', singular values for 'gelsd'/'gelss'."""
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    _check_tolerances(A, "torch.linalg.lstsq")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    if A.shape[-2] != b.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2:]
    solution = matmul(pinv(A, rtol=rcond), b)
    empty = A.new_empty((0,))
    rank = matrix_rank(A, rtol=rcond) if driver != "gels" else A.new_empty((0,), dtype=_dtypes.int64)
    residuals = empty
    if m > n and driver != "gelsy" and bool((matrix_rank(A) == n).all()):
        residuals = (matmul(A, solution) - b).pow(2).sum(-2)
    singular_values = linalg_svd(A, full_matrices=False).S if driver in ("gelsd", "gelss") else empty
    if vector:
        solution = solution.squeeze(-1)
        residuals = residuals.squeeze(-1) if residuals.numel() else residuals
    return return_types.linalg_lstsq(solution, residuals, rank, singular_values)


def cond(A, p=None):
    """``torch.linalg.cond``: the condition number ||A|| ||A^-1|| in the ``p`` norm (2 by default: the ratio of the
    largest to the smallest singular value)."""
    _check_tolerances(A, "linalg.cond")
    if p in (None, 2, -2):
        s = linalg_svd(A, full_matrices=False).S
        ratio = s[..., 0] / s[..., -1]
        return ratio if p != -2 else ratio.reciprocal()
    return matrix_norm(A, p) * matrix_norm(inv(A), p)

def _removed(name, message):
    """A name torch keeps only to say it was removed: calling it raises torch's RuntimeError."""
    def removed(*args, **kwargs):
        raise RuntimeError("This function was deprecated since version 1.9 and is now removed." + message)
    removed.__name__ = name
    removed.__doc__ = f"``torch.{name}``, removed in torch 1.9: raises torch's RuntimeError saying what replaces it."
    return removed


solve = _removed("solve", " `torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` has its "
                 "arguments reversed and does not return the LU factorization.\n\nTo get the LU factorization see "
                 "`torch.lu`, which can be used with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, "
                 "A).solution should be replaced with:\nX = torch.linalg.solve(A, B)")
symeig = _removed("symeig", " The default behavior has changed from using the upper triangular portion of the matrix "
                  "by default to using the lower triangular portion.\n\nL, _ = torch.symeig(A, upper=upper) should be "
                  "replaced with:\nL = torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = "
                  "torch.symeig(A, eigenvectors=True) should be replaced with:\nL, V = torch.linalg.eigh(A, UPLO='U' "
                  "if upper else 'L')")
eig = _removed("eig", " `torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than real "
               "tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced with:\nL_complex = "
               "torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, eigenvectors=True) should be replaced with:\n"
               "L_complex, V_complex = torch.linalg.eig(A)")
legacy_lstsq = _removed("lstsq", " `torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n`torch.linalg.lstsq` "
                        "has reversed arguments and does not return the QR decomposition in the returned tuple "
                        "(although it returns other information about the problem).\n\nTo get the QR decomposition "
                        "consider using `torch.linalg.qr`.\n\nThe returned solution in `torch.lstsq` stored the "
                        "residuals of the solution in the last m - n columns of the returned value whenever m > n. In "
                        "torch.linalg.lstsq, the residuals are in the field 'residuals' of the returned named tuple."
                        "\n\nThe unpacking of the solution, as in\nX, _ = torch.lstsq(B, A).solution[:A.size(1)]\n"
                        "should be replaced with:\nX = torch.linalg.lstsq(A, B).solution")
legacy_matrix_rank = _removed("matrix_rank", "\nPlease use the `torch.linalg.matrix_rank` function instead. The "
                              "parameter 'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.")
for _method in (solve, symeig, eig, legacy_lstsq):
    tensor_method(_method.__name__)(_method)
