"""torchrl.objectives: value estimators and loss modules (layer 6)."""
from .value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, ValueEstimators

__all__ = ["GAE", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator", "ValueEstimators"]
