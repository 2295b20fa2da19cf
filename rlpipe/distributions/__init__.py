"""Probability distributions with torch.distributions' API and module layout: parameters, shapes
(``batch_shape``/``event_shape``), ``sample``/``rsample``, ``log_prob``, ``entropy``, moments, argument
validation and ``kl_divergence``. Sampling draws from rlpipe's generators (``rlpipe.manual_seed``),
so streams differ from torch's for the same seed."""
from . import constraints
from .distribution import Distribution
from .bernoulli import Bernoulli
from .categorical import Categorical
from .independent import Independent
from .normal import Normal
from .kl import kl_divergence, register_kl

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "Normal", "constraints", "kl_divergence",
           "register_kl"]
