"""Matrix factorizations and solvers (torch.linalg's): the Functions (Cholesky, Solve, TriangularSolve,
Inv, Det, Slogdet, Eigh, Qr) over the backend's LAPACK (``xp.linalg``), each with torch's gradient
formula, and their public ops with torch's checks and error messages. Everything works on batches
of matrices in the last two dims.

A factorization that fails (a matrix that is not positive-definite, a singular one) raises
``LinAlgError`` (a RuntimeError, as ``torch.linalg.LinAlgError``) naming the batch element and the
failing minor or pivot, found again on a host copy of that element.
"""
import builtins
import contextlib

import numpy as np

from .. import return_types
from .._dispatch import torch_function
from .._tensor import tensor_method, wrap
from .base import Op, unbroadcast
from .common import _LEGACY_TYPE_NAMES, with_out

__all__ = ["LinAlgError", "linalg_cholesky", "cholesky", "cholesky_ex", "linalg_solve", "solve_triangular",
           "triangular_solve", "inv", "inverse", "det", "slogdet", "eigh", "eigvalsh", "linalg_qr", "qr",
           "linalg_det", "linalg_slogdet", "logdet"]


class LinAlgError(RuntimeError):
    """A matrix factorization could not be completed (torch.linalg.LinAlgError)."""


class _Failed(Exception):
    """Raised inside a forward when LAPACK refuses the input; the public op writes the message."""


def _mT(x):
    return x.swapaxes(-1, -2)


def _common_batch(xp, a, b):
    """a and b broadcast to one batch shape (CuPy's solvers do not broadcast batches themselves)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])


@contextlib.contextmanager
def _lapack_errors(xp):
    """Turns the backend's LinAlgError (CuPy raises one only when asked to check) into ``_Failed``."""
    check = contextlib.nullcontext()
    if xp is not np:
        import cupyx
        if hasattr(cupyx, "errstate"):
            check = cupyx.errstate(linalg="raise")
    try:
        with check:
            yield
    except np.linalg.LinAlgError:
        raise _Failed() from None


# ---- the Functions --------------------------------------------------------------------------------

class Cholesky(Op):
    """The lower factor L of A = L L^T (its transpose when ``upper``), from A's lower triangle; the gradient is
    torch's: L^-T phi(L^T gL) L^-1 (phi: the lower triangle with the diagonal halved), made symmetric."""

    @staticmethod
    def forward(ctx, a, upper):
        with _lapack_errors(ctx.xp):
            low = ctx.xp.linalg.cholesky(a)
        ctx.args = low, upper
        return _mT(low).copy() if upper else low

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        low, upper = ctx.args
        if upper:
            g = _mT(g)
        phi = xp.tril(_mT(low) @ g)
        idx = xp.arange(phi.shape[-1])
        phi[..., idx, idx] *= 0.5
        inv_low = xp.linalg.inv(low)
        ga = _mT(inv_low) @ phi @ inv_low
        return 0.5 * (ga + _mT(ga)), None


class Solve(Op):
    """X with A X = B (batches broadcast); the gradients are gB = A^-T gX and gA = -gB X^T."""

    @staticmethod
    def forward(ctx, a, b):
        shapes = a.shape, b.shape
        a, b = _common_batch(ctx.xp, a, b)
        with _lapack_errors(ctx.xp):
            x = ctx.xp.linalg.solve(a, b)
        ctx.args = a, x, shapes
        return x

    @staticmethod
    def backward(ctx, g):
        a, x, (a_shape, b_shape) = ctx.args
        gb = ctx.xp.linalg.solve(_mT(a), g)
        ga = unbroadcast(-gb @ _mT(x), a_shape) if ctx.needs_input_grad[0] else None
        return ga, unbroadcast(gb, b_shape)


def _triangle(xp, a, upper, unitriangular):
    """The triangle of ``a`` that a triangular solve reads, with ones on the diagonal when ``unitriangular``."""
    t = xp.triu(a, 1 if unitriangular else 0) if upper else xp.tril(a, -1 if unitriangular else 0)
    if unitriangular:
        idx = xp.arange(t.shape[-1])
        t[..., idx, idx] = 1
    return t


class TriangularSolve(Op):
    """X with T X = B, T the upper or lower triangle of A (unit diagonal when ``unitriangular``); the gradient
    of A is that of a general solve kept to the triangle that was read."""

    @staticmethod
    def forward(ctx, a, b, upper, unitriangular):
        xp = ctx.xp
        shapes = a.shape, b.shape
        t, b = _common_batch(xp, _triangle(xp, a, upper, unitriangular), b)
        x = xp.linalg.solve(t, b)
        ctx.args = t, x, *shapes, upper, unitriangular
        return x

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        t, x, a_shape, b_shape, upper, unitriangular = ctx.args
        gb = xp.linalg.solve(_mT(t), g)
        ga = None
        if ctx.needs_input_grad[0]:
            full = -gb @ _mT(x)
            k = 1 if unitriangular else 0
            ga = unbroadcast(xp.triu(full, k) if upper else xp.tril(full, -k), a_shape)
        return ga, unbroadcast(gb, b_shape), None, None


class Inv(Op):
    """A^-1; the gradient is -X^T g X^T."""

    @staticmethod
    def forward(ctx, a):
        with _lapack_errors(ctx.xp):
            x = ctx.xp.linalg.inv(a)
        ctx.args = x
        return x

    @staticmethod
    def backward(ctx, g):
        x_t = _mT(ctx.args)
        return -(x_t @ g @ x_t)


def _products_of_others(xp, s):
    """For each i along the last dim, the product of every other element (no division: exact at zeros)."""
    ones = xp.ones_like(s[..., :1])
    before = xp.cumprod(xp.concatenate([ones, s[..., :-1]], -1), -1)
    after = xp.flip(xp.cumprod(xp.flip(xp.concatenate([s[..., 1:], ones], -1), -1), -1), -1)
    return before * after


class Det(Op):
    """det(A) (LU); the gradient is g times A's cofactor matrix, written through the SVD A = U S V^T as
    det(U) det(V) U diag(prod of the other singular values) V^T, so singular matrices get theirs too."""

    @staticmethod
    def forward(ctx, a):
        ctx.args = a
        return ctx.xp.linalg.det(a)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        u, s, vh = xp.linalg.svd(ctx.args)
        signs = xp.linalg.det(u) * xp.linalg.det(vh)
        cofactor = (u * _products_of_others(xp, s)[..., None, :]) @ vh
        return (g * signs)[..., None, None] * cofactor


class Slogdet(Op):
    """(sign, log |det A|); the gradient of the log is A^-T (the sign's is zero)."""

    @staticmethod
    def forward(ctx, a):
        sign, logabs = ctx.xp.linalg.slogdet(a)
        ctx.args = a
        return ctx.xp.asarray(sign), ctx.xp.asarray(logabs)

    @staticmethod
    def backward(ctx, gsign, glogabs):
        return glogabs[..., None, None] * _mT(ctx.xp.linalg.inv(ctx.args))


class Eigh(Op):
    """(eigenvalues ascending, eigenvectors) of a symmetric matrix, read from its ``uplo`` triangle; the gradient
    is torch's: V (diag(gL) + skew(V^T gV) / (L_j - L_i)) V^T."""

    @staticmethod
    def forward(ctx, a, uplo):
        w, v = ctx.xp.linalg.eigh(a, UPLO=uplo)
        ctx.args = w, v
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        xp = ctx.xp
        w, v = ctx.args
        inner = _mT(v) @ gv
        inner = 0.5 * (inner - _mT(inner))
        gaps = w[..., None, :] - w[..., :, None]
        idx = xp.arange(w.shape[-1])
        gaps[..., idx, idx] = 1
        inner = inner / gaps
        inner[..., idx, idx] = gw
        return v @ inner @ _mT(v), None


def _qr_backward(xp, q, r, gq, gr):
    """The gradient of A = QR for A with at least as many rows as columns (reduced factors):
    (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q, copyltu making M symmetric from its lower triangle."""
    m = r @ _mT(gr) - _mT(gq) @ q
    low = xp.tril(m, -1)
    sym = low + _mT(low) + xp.tril(xp.triu(m))  # (the diagonal of m, once)
    rhs = gq + q @ sym
    return _mT(xp.linalg.solve(r, _mT(rhs)))  # rhs R^-T


class Qr(Op):
    """(Q, R) with A = QR (``mode`` 'reduced' or 'complete'); the gradient is the reduced one, with the wide case
    A = Q [X | Y] split into a square part and the rest."""

    @staticmethod
    def forward(ctx, a, mode):
        q, r = ctx.xp.linalg.qr(a, mode=mode)
        ctx.args = q, r, a.shape, mode
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        xp = ctx.xp
        q, r, shape, mode = ctx.args
        m, n = shape[-2:]
        if mode == "complete" and m > n:  # the extra columns of Q are arbitrary
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        if m >= n:
            return _qr_backward(xp, q[..., :, :n], r[..., :n, :], gq[..., :, :n], gr[..., :n, :]), None
        x_r, y_r = r[..., :, :m], r[..., :, m:]
        gy = q @ gr[..., :, m:]
        gx = _qr_backward(xp, q, x_r, gq + q @ y_r @ _mT(gr[..., :, m:]), gr[..., :, :m])
        return xp.concatenate([gx, gy], -1), None


# ---- checks and error messages ---------------------------------------------------------------------

def _check_matrices(A, name, square=True, arg="A"):
    """torch's checks of a batch of matrices: at least 2-d, square, floating."""
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: {arg} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    if not A.is_floating_point():
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{_LEGACY_TYPE_NAMES.get(A.dtype.name, A.dtype.name)}")


def _host_batches(A):
    """The matrices of A as a NumPy (n, rows, cols) array (copied from the device)."""
    host = A._device._backend.to_host(A.detach()._data)
    return host.reshape((-1,) + host.shape[-2:])


def _cholesky_partial(a):
    """LAPACK's unblocked Cholesky of one matrix's lower triangle: (the factor as far as it got, info), info the
    order of the first leading minor that is not positive-definite (0 when none); the failing diagonal entry
    keeps its non-positive value and the rest of A stays, as LAPACK leaves them."""
    low = np.tril(a).astype(np.float64)
    n = a.shape[-1]
    for j in range(n):
        d = low[j, j] - low[j, :j] @ low[j, :j]
        if not d > 0:
            low[j, j] = d
            return low, j + 1
        low[j, j] = np.sqrt(d)
        low[j + 1:, j] = (low[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return low, 0


def _zero_pivot(a):
    """The 1-based position of LU's first zero diagonal element (partial pivoting, as LAPACK's getrf), 0 if none."""
    u = a.astype(np.float64).copy()
    n = u.shape[-1]
    for j in range(n):
        p = j + int(np.argmax(np.abs(u[j:, j])))
        if u[p, j] == 0:
            return j + 1
        u[[j, p]] = u[[p, j]]
        u[j + 1:, j:] -= np.outer(u[j + 1:, j] / u[j, j], u[j, j:])
    return 0


def _batch_prefix(A, index):
    return f"(Batch element {index}): " if A.ndim > 2 else ""


def _not_positive_definite(A, name):
    """The LinAlgError for the first matrix of A that is not positive-definite."""
    for index, a in enumerate(_host_batches(A)):
        info = _cholesky_partial(a)[1]
        if info:
            return LinAlgError(f"{name}: {_batch_prefix(A, index)}The factorization could not be completed because "
                               f"the input is not positive-definite (the leading minor of order {info} is not "
                               "positive-definite).")
    return LinAlgError(f"{name}: The factorization could not be completed because the input is not "
                       "positive-definite.")


def _singular(A, name, message):
    """The LinAlgError of ``name`` for the first singular matrix of A; ``message(pivot)`` words it."""
    for index, a in enumerate(_host_batches(A)):
        pivot = _zero_pivot(a)
        if pivot:
            return LinAlgError(f"{name}: {_batch_prefix(A, index)}{message(pivot)}")
    return LinAlgError(f"{name}: {message(0)}")


# ---- the public ops --------------------------------------------------------------------------------

@with_out("A")
def linalg_cholesky(A, *, upper=False):
    """``torch.linalg.cholesky``: L with A = L L^T for symmetric positive-definite A (only its lower triangle is
    read); ``upper`` gives U = L^T. LinAlgError when a matrix is not positive-definite."""
    _check_matrices(A, "linalg.cholesky")
    try:
        return Cholesky.apply(A, builtins.bool(upper))
    except _Failed:
        raise _not_positive_definite(A, "linalg.cholesky") from None


@torch_function("input")
@tensor_method
def cholesky(input, upper=False):
    """``torch.cholesky`` (deprecated there for ``torch.linalg.cholesky``): the Cholesky factor, lower unless
    ``upper``."""
    return linalg_cholesky(input, upper=upper)


def cholesky_ex(A, *, upper=False, check_errors=False):
    """``torch.linalg.cholesky_ex``: (L, info) without raising: info (int32, one per matrix) is 0 or the order
    of the first leading minor that is not positive-definite, whose L is LAPACK's partial factor."""
    _check_matrices(A, "linalg.cholesky")
    try:
        low = Cholesky.apply(A, builtins.bool(upper))
        info = np.zeros(A.shape[:-2], dtype=np.int32)
    except _Failed:
        if check_errors:
            raise _not_positive_definite(A, "linalg.cholesky_ex") from None
        low, info = _partial_factors(A, upper)
    xp = A._device._backend.xp
    return return_types.linalg_cholesky_ex(low, wrap(xp.asarray(info), A._device))


def _partial_factors(A, upper):
    """cholesky_ex's results for a batch where some matrix failed, computed per matrix on the host (no gradient)."""
    parts = [_cholesky_partial(a) for a in _host_batches(A)]
    low = np.stack([p[0] for p in parts]).astype(A._data.dtype).reshape(A.shape)
    info = np.array([p[1] for p in parts], dtype=np.int32).reshape(A.shape[:-2])
    xp = A._device._backend.xp
    return wrap(xp.asarray(_mT(low) if upper else low), A._device), info


def _vector_rhs(A, B):
    """Whether B is a (batch of) vector(s) rather than matrices, by torch's rule for linalg.solve."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _check_same_dtype(A, B, name):
    if A._data.dtype != B._data.dtype:
        names = _LEGACY_TYPE_NAMES[A.dtype.name], _LEGACY_TYPE_NAMES[B.dtype.name]
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of type {names[0]} and B of "
                           f"type {names[1]} instead")


def _check_system(A, B, name):
    """torch's shape check of A X = B (B with matrices already)."""
    if A.shape[-1] != B.shape[-2]:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation AX = B ({A.shape[-2]}x"
                           f"{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    try:
        np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"{name}: the batch dimensions of A {list(A.shape[:-2])} and B {list(B.shape[:-2])} "
                           "cannot be broadcast") from None


@with_out("A", "B")
def linalg_solve(A, B, *, left=True):
    """``torch.linalg.solve``: X with A X = B (X A = B when ``left=False``), batches broadcast; B may be a
    vector or a batch of vectors. LinAlgError for a singular A."""
    _check_matrices(A, "linalg.solve")
    _check_same_dtype(A, B, "linalg.solve")
    vector = _vector_rhs(A, B)
    if not left:
        if vector:
            raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is not supported for "
                               "left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1)")
        return linalg_solve(A.mT, B.mT).mT
    b = B.unsqueeze(-1) if vector else B
    _check_system(A, b, "linalg.solve")
    try:
        x = Solve.apply(A, b)
    except _Failed:
        raise _singular(A, "torch.linalg.solve",
                        lambda _: "The solver failed because the input matrix is singular.") from None
    return x.squeeze(-1) if vector else x


@with_out("A", "B")
def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """``torch.linalg.solve_triangular``: X with T X = B (X T = B when ``left=False``), T the upper or lower
    triangle of A (the other is not read; a unit diagonal is assumed with ``unitriangular``)."""
    _check_matrices(A, "linalg.solve_triangular")
    _check_matrices(B, "linalg.solve_triangular", square=False, arg="B")
    _check_same_dtype(A, B, "linalg.solve_triangular")
    if not left:
        return solve_triangular(A.mT, B.mT, upper=not upper, unitriangular=unitriangular).mT
    _check_system(A, B, "linalg.solve_triangular")
    return TriangularSolve.apply(A, B, builtins.bool(upper), builtins.bool(unitriangular))


@tensor_method
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """``torch.triangular_solve`` (deprecated there): (X, A's clone) with T X = input, or T^T X = input when
    ``transpose``; T is A's upper triangle unless ``upper=False``."""
    if input.ndim < 2 or A.ndim < 2:
        raise RuntimeError(f"triangular_solve: expected b and A of at least 2 dims, got {input.ndim} and {A.ndim}")
    coefficient = A.mT if transpose else A
    x = solve_triangular(coefficient, input, upper=builtins.bool(upper) != builtins.bool(transpose),
                         unitriangular=unitriangular)
    return return_types.triangular_solve(x, A.clone())


@with_out("A")
def inv(A):
    """``torch.linalg.inv``: the inverse of each square matrix; LinAlgError for a singular one."""
    _check_matrices(A, "linalg.inv")
    try:
        return Inv.apply(A)
    except _Failed:
        raise _singular(A, "linalg.inv", lambda pivot: f"The diagonal element {pivot} is zero, the inversion "
                                                       "could not be completed because the input matrix is "
                                                       "singular.") from None


@torch_function("input")
@tensor_method
def inverse(input):
    """``torch.inverse``: ``torch.linalg.inv``."""
    return inv(input)


@with_out("A")
def linalg_det(A):
    """``torch.linalg.det``: the determinant of each square matrix (differentiable at singular ones too)."""
    _check_matrices(A, "linalg.det")
    return Det.apply(A)


@torch_function("input")
@tensor_method
def det(input):
    """``torch.det``: the determinant of each square matrix."""
    return linalg_det(input)


def linalg_slogdet(A):
    """``torch.linalg.slogdet``: (sign, log |det|) of each square matrix; (0, -inf) for a singular one."""
    _check_matrices(A, "linalg.slogdet")
    return return_types.linalg_slogdet(*Slogdet.apply(A))


@torch_function("input")
@tensor_method
def slogdet(input):
    """``torch.slogdet``: (sign, log |det|) of each square matrix."""
    return return_types.slogdet(*linalg_slogdet(input))


@torch_function("input")
@tensor_method
def logdet(input):
    """``torch.logdet``: log det of each square matrix: nan where the determinant is negative, -inf where it is 0."""
    _check_matrices(input, "linalg.slogdet")
    sign, logabs = Slogdet.apply(input)
    return logabs.where(sign >= 0, float("nan"))


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A, UPLO="L"):
    """``torch.linalg.eigh``: (eigenvalues in ascending order, eigenvectors as columns) of symmetric matrices,
    read from the ``UPLO`` triangle."""
    _check_matrices(A, "linalg.eigh")
    _check_uplo(UPLO)
    return return_types.linalg_eigh(*Eigh.apply(A, UPLO))


def eigvalsh(A, UPLO="L"):
    """``torch.linalg.eigvalsh``: the eigenvalues of symmetric matrices, ascending."""
    _check_matrices(A, "linalg.eigvalsh")
    _check_uplo(UPLO)
    return Eigh.apply(A, UPLO)[0]


_QR_MODES = ("reduced", "complete", "r")


def linalg_qr(A, mode="reduced"):
    """``torch.linalg.qr``: (Q, R) with A = QR, Q with orthonormal columns and R upper triangular; 'complete'
    gives a square Q, 'r' only R (Q empty, and no gradient)."""
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    _check_matrices(A, "linalg.qr", square=False)
    if mode == "r":
        r = Qr.apply(A.detach(), "reduced")[1]
        return return_types.linalg_qr(A.new_empty((0,)), r)
    return return_types.linalg_qr(*Qr.apply(A, mode))


@tensor_method
def qr(input, some=True):
    """``torch.qr`` (deprecated there): (Q, R), reduced unless ``some=False``."""
    return return_types.qr(*linalg_qr(input, "reduced" if some else "complete"))
