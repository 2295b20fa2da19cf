"""``rlpipe.linalg`` (torch.linalg): the linear-algebra functions rlpipe has, at torch's paths."""
from .primitives.linalg import cross as _cross, linalg_svd as svd
from .primitives.reductions import norm as _norm

__all__ = ["svd", "svdvals", "cross", "vector_norm"]


def svdvals(A, *, driver=None):
    """The singular values of A (the last two dims), in descending order."""
    return svd(A, full_matrices=False).S


def cross(input, other, *, dim=-1):
    """The cross product along ``dim`` (the last one by default, unlike ``torch.cross``'s first size-3 dim)."""
    return _cross(input, other, dim=dim)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ``ord``-norm of ``x`` over ``dim`` (all elements by default), as ``Tensor.norm``."""
    return _norm(x, ord, dim, keepdim, dtype)
