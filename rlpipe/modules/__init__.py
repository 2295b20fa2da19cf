# ruff: noqa: F401 - this module re-exports the public API
"""torchrl.modules: networks (``MLP``, ``ConvNet``), actors and value operators, exploration modules,
torchrl's distributions and ``RandomPolicy``. Layer 6: it builds on TensorDict modules (layer 4) and env
specs (layer 5)."""
# ---- distributions (dist) ----
from .distributions import Delta, IndependentNormal, MaskedCategorical, OneHotCategorical, TanhNormal
# ---- networks, actors, exploration (modules) ----
from ..envs.utils import RandomPolicy
from ..tensordict.nn import NormalParamExtractor
from .models import MLP, ConvNet, DuelingCnnDQNet, DuelingMlpDQNet
from .tensordict_module import (SafeModule, Actor, ValueOperator, ProbabilisticActor, SafeProbabilisticModule,
                                SafeProbabilisticTensorDictSequential, QValueModule, QValueActor, EGreedyModule,
                                ActorValueOperator, ActorCriticWrapper,
                                GRUModule, LSTMModule, recurrent_mode, set_recurrent_mode, GRU, GRUCell, LSTM,
                                LSTMCell)

__all__ = ["RandomPolicy", "NormalParamExtractor", "MLP", "ConvNet", "DuelingCnnDQNet", "DuelingMlpDQNet",
           "SafeModule", "Actor", "ValueOperator",
           "ProbabilisticActor", "SafeProbabilisticModule", "SafeProbabilisticTensorDictSequential", "QValueModule",
           "QValueActor", "ActorValueOperator", "ActorCriticWrapper",
           "EGreedyModule", "Delta", "IndependentNormal", "MaskedCategorical", "OneHotCategorical",
           "TanhNormal", "GRUModule", "LSTMModule", "recurrent_mode", "set_recurrent_mode", "GRU", "GRUCell", "LSTM",
           "LSTMCell"]
