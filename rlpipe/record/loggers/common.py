"""The ``Logger`` base and the video writer shared by the loggers."""
import numpy as np

from ..._tensor import Tensor
from ...tensordict import is_tensor_collection

__all__ = ["Logger", "write_video"]


class Logger:
    """A logger writes scalars, videos and hyper-parameters of one experiment (``exp_name``) under
    ``log_dir``; ``experiment`` is the backend object created by ``_create_experiment``."""

    def __init__(self, exp_name, log_dir):
        self.exp_name = exp_name
        self.log_dir = log_dir
        self.experiment = self._create_experiment()

    def _create_experiment(self):
        raise NotImplementedError

    def log_scalar(self, name, value, step=None):
        """Records ``value`` under ``name`` at ``step``."""
        raise NotImplementedError

    def log_metrics(self, metrics, step=None, *, keys_sep="/"):
        """Records every scalar of ``metrics`` (a dict, or a TensorDict whose nested keys are joined with
        ``keys_sep``) at ``step``; tensors become Python numbers (lists when they hold several values).
        Returns the converted dict, as torchrl's."""
        if is_tensor_collection(metrics):
            metrics = {keys_sep.join((key,) if isinstance(key, str) else key): value
                       for key, value in metrics.items(True, True)}
        safe = {name: _plain(value) for name, value in metrics.items()}
        for name, value in safe.items():
            self.log_scalar(name, value, step=step)
        return safe

    def log_video(self, name, video, step=None, **kwargs):
        """Records ``video`` (frames, uint8) under ``name`` at ``step``."""
        raise NotImplementedError

    def log_hparams(self, cfg):
        """Records the hyper-parameters ``cfg`` (a dict or a config object)."""
        raise NotImplementedError

    def log_histogram(self, name, data, **kwargs):
        """Records the distribution of the values in ``data`` under ``name``."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(exp_name={self.exp_name}, log_dir={self.log_dir})"


def _plain(value):
    """A tensor as a Python number (one element) or nested list; anything else as it is."""
    if not isinstance(value, Tensor):
        return value
    value = value.detach().cpu()
    return value.item() if value.numel() == 1 else value.tolist()


def write_video(filename, frames, fps=30, **kwargs):
    """Writes ``frames`` (uint8 ``[T, H, W, 3]``) to an mp4 file through imageio's ffmpeg plugin
    (``pip install rlpipe[video]``). Frame sizes not divisible by 16 are kept as they are (no resize);
    ``kwargs`` go to the writer (``codec``, ``quality``, ``output_params``...)."""
    try:
        import imageio
    except ImportError as err:
        raise ImportError("writing mp4 videos needs imageio and imageio-ffmpeg: pip install 'rlpipe[video]' "
                          "(or pip install imageio imageio-ffmpeg)") from err
    frames = np.asarray(frames, dtype=np.uint8)
    kwargs.setdefault("macro_block_size", 1)
    try:
        writer = imageio.get_writer(filename, format="FFMPEG", mode="I", fps=fps, **kwargs)
    except (ImportError, ValueError) as err:
        raise ImportError("writing mp4 videos needs the imageio-ffmpeg plugin: pip install imageio-ffmpeg") from err
    with writer:
        for frame in frames:
            writer.append_data(frame)
