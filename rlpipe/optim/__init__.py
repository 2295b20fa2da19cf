# ruff: noqa: F401 - this module re-exports the public API
"""Optimizers and learning-rate schedules with torch.optim's interface.

Each optimizer updates its parameters in place through the step kernels of ``rlpipe.kernels`` (NumPy
on the CPU, one fused CuPy kernel per parameter on a GPU); half-precision parameters are updated
in float32 arithmetic.
"""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam
from .adamw import AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .radam import RAdam
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "RAdam", "lr_scheduler"]
