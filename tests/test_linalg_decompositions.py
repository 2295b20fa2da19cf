"""rlpipe.linalg's factorizations, solvers and matrix functions: values against NumPy/SciPy, gradients by
gradcheck in float64, torch's errors (type and message, recorded from torch 2.13)."""
import numpy as np
import pytest
import scipy.linalg

import rlpipe as r
from rlpipe.autograd import gradcheck

RNG = np.random.default_rng(7)
MATS = RNG.standard_normal((2, 3, 3))
SPD = MATS @ MATS.transpose(0, 2, 1) + 3 * np.eye(3)
RHS = RNG.standard_normal((2, 3, 2))


def t(a, grad=False):
    return r.tensor(a, dtype=r.float64, requires_grad=grad)


def sym(a):
    """Symmetric from any input, so that finite differences see the function of a symmetric matrix."""
    return (a + a.mT) / 2


def spd(a):
    return a @ a.mT + 3 * r.eye(a.shape[-1], dtype=a.dtype)


# ---- values ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, ours, ref", [
    ("cholesky", lambda: r.linalg.cholesky(t(SPD)), lambda: np.linalg.cholesky(SPD)),
    ("cholesky_upper", lambda: r.linalg.cholesky(t(SPD), upper=True),
     lambda: np.linalg.cholesky(SPD).transpose(0, 2, 1)),
    ("torch_cholesky", lambda: t(SPD).cholesky(), lambda: np.linalg.cholesky(SPD)),
    ("solve", lambda: r.linalg.solve(t(MATS), t(RHS)), lambda: np.linalg.solve(MATS, RHS)),
    ("solve_vector", lambda: r.linalg.solve(t(MATS), t(RHS[..., 0])),
     lambda: np.linalg.solve(MATS, RHS[..., :1])[..., 0]),
    ("solve_broadcast", lambda: r.linalg.solve(t(MATS[0]), t(RHS)), lambda: np.linalg.solve(MATS[0], RHS)),
    ("solve_right", lambda: r.linalg.solve(t(MATS), t(RHS.transpose(0, 2, 1)), left=False),
     lambda: np.linalg.solve(MATS.transpose(0, 2, 1), RHS).transpose(0, 2, 1)),
    ("inv", lambda: r.linalg.inv(t(MATS)), lambda: np.linalg.inv(MATS)),
    ("inverse", lambda: t(MATS).inverse(), lambda: np.linalg.inv(MATS)),
    ("det", lambda: r.linalg.det(t(MATS)), lambda: np.linalg.det(MATS)),
    ("logdet", lambda: r.logdet(t(SPD)), lambda: np.log(np.linalg.det(SPD))),
    ("slogdet", lambda: r.linalg.slogdet(t(MATS)).logabsdet, lambda: np.linalg.slogdet(MATS)[1]),
    ("slogdet_sign", lambda: r.slogdet(t(MATS)).sign, lambda: np.linalg.slogdet(MATS)[0]),
    ("solve_triangular", lambda: r.linalg.solve_triangular(t(MATS), t(RHS), upper=True),
     lambda: np.stack([scipy.linalg.solve_triangular(m, b) for m, b in zip(MATS, RHS)])),
    ("solve_triangular_unit_lower", lambda: r.linalg.solve_triangular(t(MATS), t(RHS), upper=False,
                                                                      unitriangular=True),
     lambda: np.stack([scipy.linalg.solve_triangular(m, b, lower=True, unit_diagonal=True)
                       for m, b in zip(MATS, RHS)])),
    ("solve_triangular_right", lambda: r.linalg.solve_triangular(t(MATS), t(RHS.transpose(0, 2, 1)), upper=True,
                                                                 left=False),
     lambda: np.stack([scipy.linalg.solve_triangular(m, b, trans="T") for m, b in zip(MATS, RHS)]).transpose(0, 2, 1)),
    ("triangular_solve", lambda: r.triangular_solve(t(RHS), t(MATS)).solution,
     lambda: np.stack([scipy.linalg.solve_triangular(m, b) for m, b in zip(MATS, RHS)])),
    ("triangular_solve_transpose", lambda: t(RHS).triangular_solve(t(MATS), upper=False, transpose=True)[0],
     lambda: np.stack([scipy.linalg.solve_triangular(m, b, lower=True, trans="T") for m, b in zip(MATS, RHS)])),
    ("cholesky_solve", lambda: r.cholesky_solve(t(RHS), r.linalg.cholesky(t(SPD))), lambda: np.linalg.solve(SPD, RHS)),
    ("cholesky_solve_upper", lambda: r.cholesky_solve(t(RHS), r.linalg.cholesky(t(SPD), upper=True), upper=True),
     lambda: np.linalg.solve(SPD, RHS)),
    ("cholesky_inverse", lambda: r.cholesky_inverse(r.linalg.cholesky(t(SPD[0]))), lambda: np.linalg.inv(SPD[0])),
    ("eigvalsh", lambda: r.linalg.eigvalsh(t(SPD)), lambda: np.linalg.eigvalsh(SPD)),
    ("eigvalsh_upper", lambda: r.linalg.eigvalsh(t(MATS), UPLO="U"), lambda: np.linalg.eigvalsh(MATS, UPLO="U")),
    ("qr_r", lambda: r.linalg.qr(t(MATS), mode="r").R.abs(), lambda: np.abs(np.linalg.qr(MATS, mode="r"))),
    ("pinv", lambda: r.linalg.pinv(t(MATS[:, :2])), lambda: np.linalg.pinv(MATS[:, :2])),
    ("pinv_hermitian", lambda: r.linalg.pinv(t(SPD), hermitian=True), lambda: np.linalg.pinv(SPD)),
    ("pinv_cut", lambda: r.linalg.pinv(t(np.diag([1.0, 1e-3])), atol=1e-2), lambda: np.diag([1.0, 0.0])),
    ("pinverse", lambda: t(MATS).pinverse(), lambda: np.linalg.pinv(MATS)),
    ("matrix_power_3", lambda: r.linalg.matrix_power(t(MATS), 3), lambda: np.linalg.matrix_power(MATS, 3)),
    ("matrix_power_neg", lambda: t(MATS).matrix_power(-2), lambda: np.linalg.matrix_power(MATS, -2)),
    ("matrix_power_0", lambda: r.matrix_power(t(MATS), 0), lambda: np.broadcast_to(np.eye(3), MATS.shape)),
    ("matrix_exp", lambda: r.linalg.matrix_exp(t(3 * MATS)),
     lambda: np.stack([scipy.linalg.expm(3 * m) for m in MATS])),
    ("vector_norm", lambda: r.linalg.vector_norm(t(MATS), 3, dim=(0, 2)),
     lambda: (np.abs(MATS) ** 3).sum((0, 2)) ** (1 / 3)),
    ("vector_norm_0", lambda: r.linalg.vector_norm(t(np.array([0.0, 2.0, -1.0])), 0), lambda: np.array(2.0)),
    ("matrix_norm_fro", lambda: r.linalg.matrix_norm(t(MATS)), lambda: np.linalg.norm(MATS, "fro", axis=(1, 2))),
    ("matrix_norm_nuc", lambda: r.linalg.matrix_norm(t(MATS), "nuc"), lambda: np.linalg.norm(MATS, "nuc", axis=(1, 2))),
    ("matrix_norm_2", lambda: r.linalg.matrix_norm(t(MATS), 2), lambda: np.linalg.norm(MATS, 2, axis=(1, 2))),
    ("matrix_norm_-2", lambda: r.linalg.matrix_norm(t(MATS), -2), lambda: np.linalg.norm(MATS, -2, axis=(1, 2))),
    ("matrix_norm_1", lambda: r.linalg.matrix_norm(t(MATS), 1), lambda: np.linalg.norm(MATS, 1, axis=(1, 2))),
    ("matrix_norm_-inf_dims", lambda: r.linalg.matrix_norm(t(MATS), -np.inf, dim=(0, 2), keepdim=True),
     lambda: np.linalg.norm(MATS, -np.inf, axis=(0, 2), keepdims=True)),
    ("matrix_norm_nuc_keepdim", lambda: r.linalg.matrix_norm(t(MATS), "nuc", dim=(2, 0), keepdim=True),
     lambda: np.linalg.norm(MATS, "nuc", axis=(2, 0), keepdims=True)),
    ("norm_default", lambda: r.linalg.norm(t(MATS)), lambda: np.linalg.norm(MATS.ravel())),
    ("norm_matrix_inf", lambda: r.linalg.norm(t(MATS[0]), np.inf), lambda: np.linalg.norm(MATS[0], np.inf)),
    ("norm_dim", lambda: r.linalg.norm(t(MATS), 1, dim=1), lambda: np.linalg.norm(MATS, 1, axis=1)),
    ("multi_dot", lambda: r.linalg.multi_dot([t(MATS[0]), t(MATS[1]), t(RHS[0])]), lambda: MATS[0] @ MATS[1] @ RHS[0]),
    ("vecdot", lambda: r.linalg.vecdot(t(MATS), t(MATS[0])), lambda: (MATS * MATS[0]).sum(-1)),
])
def test_values(name, ours, ref):
    out = ours()
    np.testing.assert_allclose(out.numpy(), ref(), rtol=1e-9, atol=1e-10)


def test_factorizations_reconstruct():
    q, rr = r.linalg.qr(t(MATS[:, :, :2]))
    assert q.shape == (2, 3, 2) and rr.shape == (2, 2, 2)
    np.testing.assert_allclose((q @ rr).numpy(), MATS[:, :, :2], atol=1e-12)
    q, rr = r.linalg.qr(t(MATS[:, :, :2]), mode="complete")
    assert q.shape == (2, 3, 3) and rr.shape == (2, 3, 2)
    np.testing.assert_allclose((q.mT @ q).numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-12)
    q, rr = r.qr(t(MATS[0, :2]))
    np.testing.assert_allclose((q @ rr).numpy(), MATS[0, :2], atol=1e-12)
    w, v = r.linalg.eigh(t(SPD))
    np.testing.assert_allclose((v @ r.diag_embed(w) @ v.mT).numpy(), SPD, atol=1e-12)


def test_float32_and_torch_values():
    """Values recorded from torch 2.13 (float32)."""
    a = r.tensor([[4.0, 2.0], [2.0, 3.0]])
    assert a.cholesky().dtype == r.float32
    np.testing.assert_allclose(r.linalg.cholesky(a).numpy(), [[2.0, 0.0], [1.0, 1.4142135]], rtol=1e-6)
    np.testing.assert_allclose(r.linalg.inv(a).numpy(), [[0.375, -0.25], [-0.25, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(r.det(a).item(), 8.0, rtol=1e-6)
    sign, logabs = r.linalg.slogdet(r.tensor([[1.0, 2.0], [2.0, 4.0]]))
    assert sign.item() == 0 and logabs.item() == -np.inf
    assert np.isnan(r.logdet(r.tensor([[-1.0, 0.0], [0.0, 1.0]])).item())


def test_cholesky_ex_reports_the_failing_minor():
    a = r.stack([r.eye(2), r.tensor([[1.0, 2.0], [2.0, 1.0]])])
    low, info = r.linalg.cholesky_ex(a)
    assert info.dtype == r.int32 and info.tolist() == [0, 2]
    assert low.tolist() == [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [2.0, -3.0]]]  # torch 2.13's partial factor
    _, info = r.linalg.cholesky_ex(r.tensor(SPD))
    assert info.tolist() == [0, 0]


# ---- gradients ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, fn, inputs", [
    ("cholesky", lambda a: r.linalg.cholesky(spd(a)), (MATS,)),
    ("cholesky_upper", lambda a: r.linalg.cholesky(spd(a), upper=True), (MATS,)),
    ("cholesky_ex", lambda a: r.linalg.cholesky_ex(spd(a)).L, (MATS[0],)),
    ("solve", lambda a, b: r.linalg.solve(a, b), (MATS, RHS)),
    ("solve_broadcast_vector", lambda a, b: r.linalg.solve(a, b), (MATS, RHS[0, :, 0])),
    ("solve_right", lambda a, b: r.linalg.solve(a, b, left=False), (MATS[0], RHS.transpose(0, 2, 1))),
    ("solve_triangular", lambda a, b: r.linalg.solve_triangular(a, b, upper=False), (MATS + 3 * np.eye(3), RHS)),
    ("solve_triangular_unit", lambda a, b: r.linalg.solve_triangular(a, b, upper=True, unitriangular=True,
                                                                      left=False), (MATS, RHS.transpose(0, 2, 1))),
    ("inv", r.linalg.inv, (MATS,)),
    ("det", r.linalg.det, (MATS,)),
    ("det_singular", r.det, (np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 0.0]]),)),
    ("slogdet", lambda a: r.linalg.slogdet(a).logabsdet, (MATS,)),
    ("logdet", lambda a: r.logdet(spd(a)), (MATS,)),
    ("eigh", lambda a: tuple(r.linalg.eigh(sym(a))), (SPD,)),
    ("eigh_vectors_fixed_sign", lambda a: r.linalg.eigh(sym(a)).eigenvectors.abs(), (SPD,)),
    ("eigvalsh", lambda a: r.linalg.eigvalsh(sym(a)), (MATS,)),
    ("qr_tall", lambda a: tuple(r.linalg.qr(a)), (MATS[:, :, :2],)),
    ("qr_square", lambda a: tuple(r.linalg.qr(a)), (MATS,)),
    ("qr_wide", lambda a: tuple(r.linalg.qr(a)), (MATS[:, :2],)),
    ("cholesky_solve", lambda b, low: r.cholesky_solve(b, low + 3 * r.eye(3, dtype=r.float64)), (RHS, MATS)),
    ("pinv", r.linalg.pinv, (MATS[:, :2],)),
    ("matrix_power", lambda a: r.linalg.matrix_power(a, -3), (MATS,)),
    ("matrix_exp", r.linalg.matrix_exp, (2 * MATS,)),
    ("matrix_norm_nuc", lambda a: r.linalg.matrix_norm(a, "nuc"), (MATS,)),
    ("matrix_norm_inf", lambda a: r.linalg.matrix_norm(a, np.inf), (MATS,)),
    ("vector_norm", lambda a: r.linalg.vector_norm(a, 3, dim=-1), (MATS,)),
])
def test_gradcheck(name, fn, inputs):
    assert gradcheck(fn, tuple(t(x, grad=True) for x in inputs))


def test_qr_complete_tall_refuses_backward():
    a = t(MATS[0, :, :2], grad=True)
    q, _ = r.linalg.qr(a, mode="complete")
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        q.sum().backward()


# ---- errors (torch 2.13's types and messages) -----------------------------------------------------

NOT_PD = [[1.0, 2.0], [2.0, 1.0]]
SINGULAR = [[1.0, 2.0], [2.0, 4.0]]


@pytest.mark.parametrize("call, error, message", [
    (lambda: r.linalg.cholesky(r.tensor(NOT_PD)), r.linalg.LinAlgError,
     "linalg.cholesky: The factorization could not be completed because the input is not positive-definite (the "
     "leading minor of order 2 is not positive-definite)."),
    (lambda: r.linalg.cholesky(r.stack([r.eye(2), r.tensor(NOT_PD)])), r.linalg.LinAlgError,
     "linalg.cholesky: (Batch element 1): The factorization could not be completed because the input is not "
     "positive-definite (the leading minor of order 2 is not positive-definite)."),
    (lambda: r.linalg.cholesky_ex(r.tensor(NOT_PD), check_errors=True), r.linalg.LinAlgError,
     "linalg.cholesky_ex: The factorization could not be completed"),
    (lambda: r.linalg.cholesky(r.ones(2, 3)), RuntimeError,
     "linalg.cholesky: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: r.linalg.cholesky(r.ones(3)), RuntimeError,
     "linalg.cholesky: The input tensor A must have at least 2 dimensions."),
    (lambda: r.linalg.cholesky(r.eye(2, dtype=r.int64)), RuntimeError,
     "linalg.cholesky: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: r.linalg.inv(r.tensor(SINGULAR)), r.linalg.LinAlgError,
     "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input matrix is "
     "singular."),
    (lambda: r.linalg.inv(r.stack([r.eye(2), r.tensor(SINGULAR)])), r.linalg.LinAlgError,
     "linalg.inv: (Batch element 1): The diagonal element 2 is zero"),
    (lambda: r.linalg.inv(r.eye(2, dtype=r.int64)), RuntimeError,
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: r.linalg.solve(r.stack([r.eye(2), r.tensor(SINGULAR)]), r.ones(2)), r.linalg.LinAlgError,
     "torch.linalg.solve: (Batch element 1): The solver failed because the input matrix is singular."),
    (lambda: r.linalg.solve(r.eye(2), r.ones(3)), RuntimeError,
     "linalg.solve: Incompatible shapes of A and B for the equation AX = B (2x2 and 3x1)"),
    (lambda: r.linalg.solve(r.eye(2), r.ones(2, 1, dtype=r.float64)), RuntimeError,
     "linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B of type Double instead"),
    (lambda: r.linalg.det(r.ones(2, 3)), RuntimeError,
     "linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: r.linalg.solve_triangular(r.eye(2), r.ones(2), upper=True), RuntimeError,
     "linalg.solve_triangular: The input tensor B must have at least 2 dimensions."),
    (lambda: r.linalg.solve_triangular(r.eye(2), r.ones(3, 1), upper=True), RuntimeError,
     "linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B (2x2 and 3x1)"),
    (lambda: r.linalg.solve_triangular(r.eye(2), r.ones(2, 1)), TypeError, "upper"),
    (lambda: r.linalg.eigh(r.eye(2), UPLO="X"), RuntimeError, "Expected UPLO argument to be 'L' or 'U', but got X"),
    (lambda: r.linalg.qr(r.ones(2, 3), mode="x"), RuntimeError,
     "qr received unrecognized mode 'x' but expected one of 'reduced' (default), 'r', or 'complete'"),
    (lambda: r.linalg.qr(r.ones(3)), RuntimeError, "linalg.qr: The input tensor A must have at least 2 dimensions."),
    (lambda: r.linalg.matrix_power(r.ones(2, 3), 2), RuntimeError,
     "linalg.matrix_power: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: r.linalg.matrix_power(r.eye(2), 1.5), TypeError, "argument 'n' must be int, not float"),
    (lambda: r.linalg.matrix_power(r.tensor(SINGULAR), -1), r.linalg.LinAlgError, "linalg.inv: The diagonal element"),
    (lambda: r.linalg.matrix_norm(r.ones(3)), RuntimeError,
     "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."),
    (lambda: r.linalg.matrix_norm(r.ones(3, 3), ord=3), RuntimeError, "linalg.matrix_norm: Order 3 not supported."),
    (lambda: r.linalg.matrix_norm(r.ones(2, 3), dim=(0, 0)), RuntimeError,
     "linalg.matrix_norm: dims must be different. Got (0, 0)"),
    (lambda: r.linalg.vector_norm(r.ones(3, 3), ord="fro"), TypeError,
     "linalg_vector_norm(): argument 'ord' must be Number, not str"),
    (lambda: r.linalg.norm(r.ones(3, 3, 3), ord=2), RuntimeError,
     "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."),
    (lambda: r.linalg.norm(r.ones(2, 3), dim=(0, 1, 2)), RuntimeError,
     "linalg.norm: If dim is specified, it must be of length 1 or 2. Got [0, 1, 2]"),
    (lambda: r.cholesky_solve(r.ones(2, 1), r.eye(3)), RuntimeError,
     "Incompatible matrix sizes for cholesky_solve: each A matrix is 3 by 3 but each b matrix is 2 by 1"),
    (lambda: r.cholesky_solve(r.ones(2), r.eye(2)), RuntimeError,
     "b should have at least 2 dimensions, but has 1 dimensions instead"),
    (lambda: r.linalg.pinv(r.ones(3)), RuntimeError,
     "linalg.pinv(Float{[3]}): expected a tensor with 2 or more dimensions of float, double, cfloat or cdouble types"),
    (lambda: r.linalg.multi_dot([r.eye(2)]), RuntimeError, "multi_dot(): expected at least 2 tensors but got 1"),
])
def test_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
    assert issubclass(r.linalg.LinAlgError, RuntimeError)


def test_failed_call_leaves_input_usable():
    a = r.tensor(NOT_PD, requires_grad=True)
    with pytest.raises(r.linalg.LinAlgError):
        r.linalg.cholesky(a)
    r.linalg.cholesky(a @ a.mT + r.eye(2)).sum().backward()
    assert a.grad.shape == (2, 2)


def test_out_argument():
    out = r.empty(3, 3, dtype=r.float64)
    res = r.linalg.inv(t(MATS[0]), out=out)
    assert res is out
    np.testing.assert_allclose(out.numpy(), np.linalg.inv(MATS[0]))


@pytest.mark.cuda
def test_cuda_errors_and_cholesky_ex():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    bad = r.stack([r.eye(2), r.tensor(NOT_PD)]).to("cuda")
    with pytest.raises(r.linalg.LinAlgError, match=r"\(Batch element 1\).*leading minor of order 2"):
        r.linalg.cholesky(bad)
    low, info = r.linalg.cholesky_ex(bad)
    assert low.device.type == "cuda" and info.device.type == "cuda" and info.cpu().tolist() == [0, 2]
    with pytest.raises(r.linalg.LinAlgError, match="The diagonal element 2 is zero"):
        r.linalg.inv(r.tensor(SINGULAR, device="cuda"))
    packed, pivots = r.linalg.lu_factor(t(MATS).to("cuda"))
    np.testing.assert_allclose(packed.cpu().numpy(), r.linalg.lu_factor(t(MATS)).LU.numpy(), rtol=1e-12)
    assert pivots.device.type == "cuda" and pivots.cpu().tolist() == r.linalg.lu_factor(t(MATS)).pivots.tolist()
    x = r.linalg.lu_solve(packed, pivots, t(RHS).to("cuda"), adjoint=True)
    np.testing.assert_allclose(x.cpu().numpy(), np.linalg.solve(MATS.transpose(0, 2, 1), RHS), rtol=1e-9)
    a = t(MATS).to("cuda").requires_grad_()
    r.linalg.qr(a).Q.sum().backward()
    np.testing.assert_allclose(a.grad.cpu().numpy(), _qr_grad_cpu(), rtol=1e-10)


def _qr_grad_cpu():
    a = t(MATS, grad=True)
    r.linalg.qr(a).Q.sum().backward()
    return a.grad.numpy()


# ---- least squares, rank, condition, the removed names ------------------------------------------

TALL = RNG.standard_normal((2, 4, 3))
TALL_RHS = RNG.standard_normal((2, 4, 2))


def test_lstsq_rank_cond_against_numpy():
    result = r.linalg.lstsq(t(TALL), t(TALL_RHS), driver="gelsd")
    for k in range(2):
        x, res, rank, s = np.linalg.lstsq(TALL[k], TALL_RHS[k], rcond=None)
        np.testing.assert_allclose(result.solution.numpy()[k], x, rtol=1e-9)
        np.testing.assert_allclose(result.residuals.numpy()[k], res, rtol=1e-9)
        assert result.rank.tolist()[k] == rank
        np.testing.assert_allclose(result.singular_values.numpy()[k], s, rtol=1e-9)
    default = r.linalg.lstsq(t(TALL), t(TALL_RHS))  # gelsy, as torch's CPU default: no residuals nor values
    assert default.residuals.shape == (0,) and default.singular_values.shape == (0,) and default.rank.tolist() == [3, 3]
    wide = r.linalg.lstsq(t(TALL[0].T), t(TALL_RHS[0, :3])).solution  # the minimum-norm solution
    np.testing.assert_allclose(wide.numpy(), np.linalg.lstsq(TALL[0].T, TALL_RHS[0, :3], rcond=None)[0], rtol=1e-9)
    deficient = np.array([[1.0, 2.0], [2.0, 4.0], [1.0, 1.0]])[:2]
    assert r.linalg.matrix_rank(t(deficient)).item() == 1 and r.linalg.matrix_rank(t(deficient)).dtype == r.int64
    assert r.linalg.matrix_rank(t(SPD), hermitian=True).tolist() == [3, 3]
    np.testing.assert_allclose(r.linalg.cond(t(MATS)).numpy(), np.linalg.cond(MATS), rtol=1e-9)
    np.testing.assert_allclose(r.linalg.cond(t(MATS), "fro").numpy(), np.linalg.cond(MATS, "fro"), rtol=1e-9)
    np.testing.assert_allclose(r.chain_matmul(t(MATS[0]), t(MATS[1])).numpy(), MATS[0] @ MATS[1])
    assert gradcheck(lambda a, b: r.linalg.lstsq(a, b).solution, (t(TALL, grad=True), t(TALL_RHS, grad=True)))


# torch 2.13's words for the names it removed in 1.9 (torch/_linalg_utils.py)
REMOVED = "This function was deprecated since version 1.9 and is now removed."


@pytest.mark.parametrize("call, start", [
    (lambda: r.solve(r.eye(2), r.eye(2)), REMOVED + " `torch.solve` is deprecated in favor of `torch.linalg.solve`."),
    (lambda: r.eye(2).solve(r.eye(2)), REMOVED + " `torch.solve` is deprecated"),
    (lambda: r.symeig(r.eye(2)), REMOVED + " The default behavior has changed"),
    (lambda: r.eig(r.eye(2), True), REMOVED + " `torch.linalg.eig` returns complex tensors"),
    (lambda: r.lstsq(r.eye(2), r.eye(2)), REMOVED + " `torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`."),
    (lambda: r.matrix_rank(r.eye(2)), REMOVED + "\nPlease use the `torch.linalg.matrix_rank` function instead."),
    (lambda: r.linalg.lstsq(r.ones(3, 2), r.ones(2, 1)), "torch.linalg.lstsq: input.size(-2) should match "
                                                          "other.size(-2)"),
    (lambda: r.linalg.lstsq(r.ones(3, 2), r.ones(3, 1), driver="x"), "torch.linalg.lstsq: parameter `driver` should "
                                                                      "be one of (gels, gelsy, gelsd, gelss)"),
    (lambda: r.linalg.matrix_rank(r.ones(3)), "linalg.matrix_rank: The input tensor A must have at least 2 dims"),
])
def test_removed_and_lstsq_errors(call, start):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value).startswith(start.replace("dims", "dimensions."))


# ---- LU ---------------------------------------------------------------------------------------------------

def test_lu_factor_matches_lapack_and_reconstructs():
    batch = RNG.standard_normal((3, 4, 4))
    packed, pivots = r.linalg.lu_factor(t(batch))
    assert pivots.dtype == r.int32 and pivots.shape == (3, 4)
    for k in range(3):
        lu_ref, piv_ref = scipy.linalg.lu_factor(batch[k])
        np.testing.assert_allclose(packed.numpy()[k], lu_ref, rtol=1e-10, atol=1e-12)
        assert (pivots.numpy()[k] == piv_ref + 1).all()
    p, low, up = r.linalg.lu(t(batch))
    np.testing.assert_allclose((p @ low @ up).numpy(), batch, atol=1e-12)
    wide = RNG.standard_normal((3, 5))
    p, low, up = r.lu_unpack(*r.lu(t(wide)))
    assert low.shape == (3, 3) and up.shape == (3, 5)
    np.testing.assert_allclose((p @ low @ up).numpy(), wide, atol=1e-12)
    b = RNG.standard_normal((3, 4, 2))
    np.testing.assert_allclose((t(batch) @ r.linalg.lu_solve(packed, pivots, t(b))).numpy(), b, atol=1e-10)
    np.testing.assert_allclose(r.linalg.lu_solve(packed, pivots, t(b), adjoint=True).numpy(),
                               np.linalg.solve(batch.transpose(0, 2, 1), b), rtol=1e-9)
    np.testing.assert_allclose(r.linalg.lu_solve(packed, pivots, t(b).mT, left=False).numpy(),
                               np.linalg.solve(batch.transpose(0, 2, 1), b).transpose(0, 2, 1), rtol=1e-9)
    np.testing.assert_allclose(r.lu_solve(t(b), packed, pivots).numpy(), np.linalg.solve(batch, b), rtol=1e-9)
    _, _, info = r.linalg.lu_factor_ex(t([[1.0, 2.0], [2.0, 4.0]]))
    assert info.item() == 2 and info.dtype == r.int32


@pytest.mark.parametrize("name, fn, inputs", [
    ("lu_factor", lambda a: r.linalg.lu_factor(a).LU, (MATS,)),
    ("lu", lambda a: tuple(r.linalg.lu(a))[1:], (MATS,)),
    ("lu_solve", lambda a, b: r.linalg.lu_solve(*r.linalg.lu_factor(a), b), (MATS, RHS)),
    ("lu_solve_adjoint", lambda a, b: r.linalg.lu_solve(*r.linalg.lu_factor(a), b, adjoint=True), (MATS, RHS)),
])
def test_lu_gradcheck(name, fn, inputs):
    assert gradcheck(fn, tuple(t(x, grad=True) for x in inputs))


@pytest.mark.parametrize("call, message", [
    (lambda: r.linalg.lu_factor(t([[1.0, 2.0], [2.0, 4.0]])),
     "torch.linalg.lu_factor: U[2,2] is zero and using it on lu_solve would result in a division by zero."),
    (lambda: r.linalg.lu_factor(t(MATS), pivot=False), "linalg.lu_factor: LU without pivoting is not implemented "
                                                        "on the CPU"),
    (lambda: r.linalg.lu_factor(r.ones(3)), "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                                            "[3] instead"),
    (lambda: r.linalg.lu_factor(r.eye(2, dtype=r.int64)), "linalg.lu_factor: Expected a floating point or complex "
                                                          "tensor as input. Got Long"),
])
def test_lu_errors(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value).startswith(message)
