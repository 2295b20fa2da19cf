"""Value estimators (torchrl.objectives.value): the functional estimates and the TensorDict modules."""
from .advantages import (GAE, TD0Estimate, TD0Estimator, TD1Estimate, TD1Estimator, TDLambdaEstimate,
                         TDLambdaEstimator, ValueEstimatorBase, ValueEstimators)

__all__ = ["GAE", "TD0Estimate", "TD0Estimator", "TD1Estimate", "TD1Estimator", "TDLambdaEstimate",
           "TDLambdaEstimator", "ValueEstimatorBase", "ValueEstimators"]
