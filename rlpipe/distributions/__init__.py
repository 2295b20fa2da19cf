"""Probability distributions with torch.distributions' API and module layout: parameters, shapes
(``batch_shape``/``event_shape``), ``sample``/``rsample``, ``log_prob``, ``entropy``, moments, argument
validation, transforms and ``kl_divergence``. Sampling draws from rlpipe's generators
(``rlpipe.manual_seed``), so the numbers differ from torch's for the same seed."""
from . import constraints, transforms
from .distribution import Distribution
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .independent import Independent
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .transforms import (AffineTransform, ComposeTransform, ExpTransform, SigmoidTransform, TanhTransform,
                         Transform, identity_transform, AbsTransform, PowerTransform, SoftplusTransform,
                         SoftmaxTransform, StickBreakingTransform, IndependentTransform, ReshapeTransform,
                         LowerCholeskyTransform, CumulativeDistributionTransform, PositiveDefiniteTransform,
                         CatTransform, StackTransform, CorrCholeskyTransform)
from .multivariate_normal import MultivariateNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .laplace import Laplace
from .exponential import Exponential
from .gamma import Gamma
from .chi2 import Chi2
from .dirichlet import Dirichlet
from .log_normal import LogNormal
from .gumbel import Gumbel
from .cauchy import Cauchy
from .studentT import StudentT
from .poisson import Poisson
from .geometric import Geometric
from .binomial import Binomial
from .multinomial import Multinomial
from .mixture_same_family import MixtureSameFamily
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from .relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
from .half_normal import HalfNormal
from .half_cauchy import HalfCauchy
from .pareto import Pareto
from .weibull import Weibull
from .kumaraswamy import Kumaraswamy
from .inverse_gamma import InverseGamma
from .fishersnedecor import FisherSnedecor
from .negative_binomial import NegativeBinomial
from .logistic_normal import LogisticNormal
from .von_mises import VonMises
from .continuous_bernoulli import ContinuousBernoulli
from .exp_family import ExponentialFamily
from .generalized_pareto import GeneralizedPareto
from .lkj_cholesky import LKJCholesky
from .wishart import Wishart
from .kl import kl_divergence, register_kl
from .constraint_registry import biject_to, transform_to
from . import constraint_registry

__all__ = ["AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform", "Distribution", "ExpTransform",
           "Independent", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "SigmoidTransform",
           "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "constraints", "identity_transform",
           "kl_divergence", "register_kl", "transforms", "MultivariateNormal", "LowRankMultivariateNormal", "Laplace",
           "Exponential", "Gamma", "Chi2", "Dirichlet", "LogNormal", "Gumbel", "Cauchy", "StudentT", "Poisson",
           "Geometric", "Binomial", "Multinomial", "MixtureSameFamily", "LogitRelaxedBernoulli", "RelaxedBernoulli",
           "ExpRelaxedCategorical", "RelaxedOneHotCategorical", "HalfNormal", "HalfCauchy", "Pareto", "Weibull",
           "Kumaraswamy", "InverseGamma", "FisherSnedecor", "NegativeBinomial", "LogisticNormal", "AbsTransform",
           "PowerTransform", "SoftplusTransform", "SoftmaxTransform", "StickBreakingTransform", "IndependentTransform",
           "ReshapeTransform", "LowerCholeskyTransform", "CumulativeDistributionTransform", "PositiveDefiniteTransform",
           "biject_to", "transform_to", "constraint_registry", "VonMises", "ContinuousBernoulli",
           "ExponentialFamily", "CatTransform", "StackTransform",
           "GeneralizedPareto", "LKJCholesky", "Wishart", "CorrCholeskyTransform"]
