"""``TensorboardLogger`` through the ``tensorboard`` package's own summary writer (tensorboardX-free)."""
import os

from ..._tensor import host_array
from .common import Logger

__all__ = ["TensorboardLogger"]


def _summary_writer(log_dir):
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.compat.proto.event_pb2 import Event
    except ImportError as err:
        raise ImportError("TensorboardLogger needs the tensorboard package: pip install tensorboard") from err
    return EventFileWriter(log_dir), Summary, Event


class _Experiment:
    """Writes scalar and text summaries to an event file (what TensorBoard reads)."""

    def __init__(self, log_dir):
        self.writer, self._summary, self._event = _summary_writer(log_dir)
        self.log_dir = log_dir

    def _write(self, summary, step):
        import time
        self.writer.add_event(self._event(summary=summary, wall_time=time.time(), step=step))
        self.writer.flush()

    def add_scalar(self, name, value, global_step=None):
        value = self._summary.Value(tag=name, simple_value=float(value))
        self._write(self._summary(value=[value]), global_step or 0)

    def add_text(self, tag, text, global_step=None):
        from tensorboard.plugins.text.summary_v2 import text_pb
        self._write(text_pb(tag, text), global_step or 0)

    def close(self):
        self.writer.close()


class TensorboardLogger(Logger):
    """Logs scalars and hyper-parameters to TensorBoard event files under ``<log_dir>/<exp_name>``
    (``log_dir`` default ``"tb_logs"``). Videos are written as mp4 files beside them (``videos/``),
    not as TensorBoard summaries: a deliberate difference from torchrl."""

    def __init__(self, exp_name, log_dir="tb_logs"):
        super().__init__(exp_name=exp_name, log_dir=log_dir)

    def _create_experiment(self):
        path = os.path.join(self.log_dir, self.exp_name)
        os.makedirs(path, exist_ok=True)
        return _Experiment(path)

    def log_scalar(self, name, value, step=None):
        self.experiment.add_scalar(name, value, global_step=step)

    def log_video(self, name, video, step=None, fps=30, **kwargs):
        from rlpipe.record.loggers.csv import CSVExperiment
        CSVExperiment(self.experiment.log_dir, video_format="mp4", video_fps=fps).add_video(
            name, host_array(video), global_step=step, **kwargs)

    def log_hparams(self, cfg):
        self.experiment.add_text("hparams", "\n".join(f"{k}: {v}" for k, v in sorted(cfg.items())))
