"""``generate_exp_name`` and ``get_logger``, as torchrl.record.loggers."""
import uuid
from datetime import datetime

__all__ = ["generate_exp_name", "get_logger"]


def generate_exp_name(model_name, experiment_name):
    """``<model>_<experiment>_<8 hex chars of a uuid4>_<yy_mm_dd-HH_MM_SS>``."""
    return "_".join((model_name, experiment_name, str(uuid.uuid4())[:8], datetime.now().strftime("%y_%m_%d-%H_%M_%S")))


def get_logger(logger_type, logger_name, experiment_name, **kwargs):
    """A logger by type: ``"csv"`` or ``"tensorboard"`` (``log_dir=logger_name``), None for ``""``/None.
    ``"wandb"`` and ``"mlflow"`` are not available in rlpipe (ValueError)."""
    from rlpipe.record.loggers.csv import CSVLogger
    from rlpipe.record.loggers.tensorboard import TensorboardLogger
    if logger_type in ("", None):
        return None
    if logger_type == "csv":
        return CSVLogger(experiment_name, log_dir=logger_name, **kwargs)
    if logger_type == "tensorboard":
        return TensorboardLogger(experiment_name, log_dir=logger_name, **kwargs)
    raise ValueError(f"logger_type {logger_type!r} is not supported: rlpipe has 'csv' and 'tensorboard'")
