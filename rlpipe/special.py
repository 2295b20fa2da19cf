"""``torch.special``: the special functions under torch's names, each the core op of that name
(``expit`` is ``sigmoid``, ``gammaln`` is ``lgamma``, ``psi`` is ``digamma``, ``multigammaln`` is
``mvlgamma``) or one of the gamma family and probability functions of ``primitives.gamma``.
"""
# ruff: noqa: F401 - this module re-exports functions defined in the core
from .primitives.activations import log_softmax, sigmoid as expit, softmax
from .primitives.elementwise import erf, erfc, expm1, log1p, round
from .primitives.gamma import entr, multigammaln, ndtr, ndtri, polygamma, xlog1py, zeta
from .primitives.pointwise import erfinv, exp2, sinc, xlogy
from .primitives.reductions import logsumexp
from .primitives.special import digamma, digamma as psi, lgamma as gammaln, logit

__all__ = ["expit", "softmax", "log_softmax", "erf", "erfc", "erfinv", "expm1", "exp2", "log1p", "round", "sinc",
           "xlogy", "xlog1py", "entr", "ndtr", "ndtri", "polygamma", "multigammaln", "zeta", "logsumexp", "digamma",
           "psi", "gammaln", "logit"]
