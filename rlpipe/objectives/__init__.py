"""torchrl.objectives: value estimators and loss modules (layer 6)."""
from .common import LossModule
from .dqn import DQNLoss
from .ddpg import DDPGLoss
from .ppo import ClipPPOLoss, KLPENPPOLoss, PPOLoss
from .sac import DiscreteSACLoss, SACLoss
from .utils import HardUpdate, SoftUpdate, TargetNetUpdater, ValueEstimators, default_value_kwargs, distance_loss, \
    hold_out_net, group_optimizers
from .value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator

__all__ = ["ClipPPOLoss", "DDPGLoss", "DQNLoss", "DiscreteSACLoss", "GAE", "HardUpdate", "KLPENPPOLoss",
           "LossModule", "PPOLoss", "SACLoss", "SoftUpdate", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator",
           "TargetNetUpdater", "ValueEstimators", "default_value_kwargs", "distance_loss", "hold_out_net",
           "group_optimizers"]
