# ruff: noqa: F401 - this module re-exports the public API
"""torchrl.record: loggers (CSV, TensorBoard) and the ``VideoRecorder`` env transform. Layer 6."""
from .loggers import CSVLogger, TensorboardLogger, Logger, generate_exp_name, get_logger
from .recorder import VideoRecorder
from .run_log import RunLog, progress_bar

__all__ = ["CSVLogger", "TensorboardLogger", "Logger", "generate_exp_name", "get_logger", "VideoRecorder",
           "RunLog", "progress_bar"]
