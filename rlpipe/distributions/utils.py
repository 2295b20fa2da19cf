"""Helpers shared by the distributions (torch.distributions.utils' names)."""
import numbers

import numpy as np

from .. import primitives as _ops, _dtypes
from .._creation import tensor
from .._tensor import Tensor, Size
from ..autograd import enable_grad
from ..random import randn, rand

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits", "lazy_property", "euler_constant",
           "tril_matrix_to_vec", "vec_to_tril_matrix", "is_tensor_like"]

euler_constant = 0.57721566490153286060  # the Euler-Mascheroni constant


def broadcast_all(*values):
    """Broadcasts tensors and numbers to one shape; numbers become tensors of the first tensor's dtype and
    device (the default dtype when all are numbers)."""
    if not all(_tensor_like(v) or isinstance(v, numbers.Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or rlpipe.Tensor, got "
                         + ", ".join(type(v).__name__ for v in values))
    like = next((v for v in values if _tensor_like(v)), None)
    options = dict(dtype=_dtypes.get_default_dtype()) if like is None else dict(dtype=like.dtype, device=like.device)
    return tuple(_ops.broadcast_tensors(*[v if _tensor_like(v) else tensor(v, **options) for v in values]))


def _tensor_like(value):
    """A Tensor, or (as in torch) an object standing for one through ``__torch_function__`` (vmap's)."""
    return isinstance(value, Tensor) or hasattr(type(value), "__torch_function__")


def finfo_of(dtype):
    """NumPy's float info (eps, tiny, max...) for an rlpipe float dtype."""
    return np.finfo(dtype.np)


def standard_normal(shape, dtype, device):
    """N(0, 1) samples of ``shape``."""
    return randn(shape, dtype=dtype, device=device)


def standard_uniform(shape, dtype, device):
    """Samples uniform in [0, 1) of ``shape``."""
    return rand(shape, dtype=dtype, device=device)


def sum_rightmost(value, dim):
    """Sums the ``dim`` rightmost dimensions."""
    return value if dim == 0 else value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


def forwarded_property(holder, name, doc):
    """A read-only property giving ``self.<holder>.<name>`` (a parameter of the distribution one wraps)."""
    return property(lambda self: getattr(getattr(self, holder), name), doc=doc)


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: sigmoid for a binary variable, softmax over the last dim otherwise."""
    return logits.sigmoid() if is_binary else _ops.softmax(logits, -1)


def clamp_probs(probs):
    """Probabilities kept eps away from 0 and 1 (eps of their dtype)."""
    eps = float(finfo_of(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities (clamped eps away from 0 and 1): log(p / (1 - p)) for a binary variable, log(p)
    otherwise."""
    clamped = clamp_probs(probs)
    return clamped.log() - (-clamped).log1p() if is_binary else clamped.log()


def extended_size(*parts):
    """The concatenation of shapes as a Size."""
    return Size(tuple(d for part in parts for d in part))


class lazy_property:
    """A property computed on first access (with grad enabled) and then stored on the instance, as
    torch's: ``Categorical(logits=...).probs`` is derived once."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def batch_shape_for(given, broadcast):
    """``()`` when every parameter in ``given`` was a Python number, else the shape of ``broadcast`` (a parameter
    after ``broadcast_all``)."""
    return Size() if all(isinstance(p, numbers.Number) for p in given) else broadcast.size()


def xlogy(x, y):
    """x * log(y), 0 where x is 0."""
    return _ops.where(x == 0, 0.0, x * y.log())


def tiny_of(dtype):
    """The smallest positive normal number of a float dtype."""
    return float(finfo_of(dtype).tiny)


def eps_of(dtype):
    """The machine epsilon of a float dtype."""
    return float(finfo_of(dtype).eps)


class BinaryParameters:
    """Mixin for distributions of binary trials given by ``probs`` or ``logits``: the other one is derived on first
    use, and ``param_shape`` is the given one's shape."""

    def _set_binary_parameter(self, probs, logits, *others):
        """Broadcasts ``others`` with the given one of probs/logits and stores it; returns the broadcast others."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        *rest, param = broadcast_all(*others, probs if probs is not None else logits)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        self._param = param
        return [r.type_as(param) for r in rest]

    def _expand_binary(self, new):
        """After ``_expand_parameters``: points the new instance's ``_param`` at its given parameter."""
        new._param = new.__dict__["probs"] if "probs" in self.__dict__ else new.__dict__["logits"]
        return new

    @lazy_property
    def logits(self):
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        """The probability of the outcome each trial counts."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        """The shape of the probs or logits parameter."""
        return self._param.size()


def is_tensor_like(value):
    """Whether ``value`` is a Tensor or stands for one through ``__torch_function__``."""
    return _tensor_like(value)


def _tril_positions(n, diag):
    rows, cols = np.tril_indices(n, diag)
    return rows.tolist(), cols.tolist()


def tril_matrix_to_vec(mat, diag=0):
    """The lower-triangular entries (below diagonal ``diag``) of each square matrix, row by row, as a vector."""
    n = mat.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = _tril_positions(n, diag)
    return mat[..., rows, cols]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of ``tril_matrix_to_vec``: square matrices with ``vec`` laid row by row into their lower triangle."""
    k = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * k + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > float(finfo_of(vec.dtype).eps):
        raise ValueError(f"The size of last dimension is {k} which cannot be expressed as the lower triangular part "
                         "of a square D x D matrix.")
    n = round(n)
    rows, cols = _tril_positions(n, diag)
    flat_positions = [r * n + c for r, c in zip(rows, cols)]
    flat = vec.new_zeros(tuple(vec.shape[:-1]) + (n * n,))
    flat = _ops.index_add(flat, -1, tensor(flat_positions, device=vec.device), vec)
    return flat.reshape(tuple(vec.shape[:-1]) + (n, n))
