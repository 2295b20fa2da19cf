# ruff: noqa: F401 - this module re-exports the public API
"""torchrl.modules.tensordict_module: policies, value operators and exploration modules."""
from .common import SafeModule
from .actors import (Actor, ValueOperator, ProbabilisticActor, SafeProbabilisticModule,
                     SafeProbabilisticTensorDictSequential, QValueModule, QValueActor, ActorValueOperator,
                     ActorCriticWrapper)
from .exploration import EGreedyModule
from .rnn import GRUModule, LSTMModule, recurrent_mode, set_recurrent_mode
from .rnn import GRU, GRUCell, LSTM, LSTMCell
