# ruff: noqa: F401 - this module re-exports the public API
"""torchrl.record.loggers: CSV and TensorBoard loggers."""
from .common import Logger
from .csv import CSVLogger
from .tensorboard import TensorboardLogger
from .utils import generate_exp_name, get_logger
