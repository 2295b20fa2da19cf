"""``CSVLogger``: scalars as CSV files, videos and texts as files, in torchrl's layout:

``<log_dir>/<exp_name>/scalars/<name>.csv`` (``step,value`` lines), ``.../videos/<tag>_<step>.<ext>``,
``.../texts/<tag><step>.txt``.
"""
import os
from collections import defaultdict

import numpy as np

from ..._tensor import Tensor, host_array
from .common import Logger, write_video

__all__ = ["CSVLogger", "CSVExperiment"]

_VIDEO_FORMATS = ("pt", "memmap", "mp4")


class CSVExperiment:
    """The files of one CSV experiment under ``log_dir``."""

    def __init__(self, log_dir, *, video_format="pt", video_fps=30):
        if video_format not in _VIDEO_FORMATS:
            raise ValueError(f"Unknown video format {video_format}. Must be one of 'pt', 'memmap' or 'mp4'.")
        self.scalars = defaultdict(list)
        self.videos_counter = defaultdict(int)
        self.text_counter = defaultdict(int)
        self.log_dir = log_dir
        self.video_format = video_format
        self.video_fps = video_fps
        for sub in ("", "scalars", "videos", "texts"):
            os.makedirs(os.path.join(log_dir, sub), exist_ok=True)
        self.files = {}

    def _file(self, path, mode):
        if path not in self.files:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self.files[path] = open(path, mode)  # noqa: SIM115 - kept open, appended to, closed in close()
        return self.files[path]

    def add_scalar(self, name, value, global_step=None):
        """Appends ``global_step,value`` to ``scalars/<name>.csv`` (the step defaults to the count so far)."""
        if global_step is None:
            global_step = len(self.scalars[name])
        value = float(value)
        self.scalars[name].append((global_step, value))
        out = self._file(os.path.join(self.log_dir, "scalars", name + ".csv"), "a+")
        out.write(f"{global_step},{value}\n")
        out.flush()

    def add_video(self, tag, vid_tensor, global_step=None, **kwargs):
        """Writes ``vid_tensor`` (``[..., T, C, H, W]`` uint8) as ``videos/<tag>_<step>.<format>``: ``"pt"``
        with ``rlpipe.save``, ``"memmap"`` as raw bytes, ``"mp4"`` through imageio's ffmpeg plugin."""
        if global_step is None:
            global_step = self.videos_counter[tag]
            self.videos_counter[tag] += 1
        path = os.path.join(self.log_dir, "videos", f"{tag}_{global_step}.{self.video_format}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if self.video_format == "pt":
            from rlpipe.serialization import save
            save(vid_tensor, path)
        elif self.video_format == "memmap":
            host_array(vid_tensor).tofile(path)
        else:
            frames = host_array(vid_tensor) if isinstance(vid_tensor, Tensor) else np.asarray(vid_tensor)
            if frames.shape[-3] not in (1, 3):
                raise RuntimeError("expected the video tensor to be of format [T, C, H, W] but the third channel "
                                   f"starting from the end isn't in (1, 3) but is {frames.shape[-3]}.")
            frames = frames.reshape((-1,) + frames.shape[-3:]).transpose(0, 2, 3, 1)
            frames = np.broadcast_to(frames, frames.shape[:-1] + (3,))
            kwargs.setdefault("fps", self.video_fps)
            write_video(path, frames, **kwargs)

    def add_text(self, tag, text, global_step=None):
        """Writes ``text`` to ``texts/<tag><step>.txt`` (the step defaults to a per-tag counter)."""
        if global_step is None:
            global_step = self.text_counter[tag]
            self.text_counter[tag] += 1
        out = self._file(os.path.join(self.log_dir, "texts", f"{tag}{global_step}.txt"), "w+")
        out.writelines(text)
        out.flush()

    def close(self):
        """Closes the files this experiment opened."""
        for f in getattr(self, "files", {}).values():  # (a constructor that failed has none)
            f.close()
        self.files = {}

    def __del__(self):
        self.close()

    def __repr__(self):
        return f"CSVExperiment(log_dir={self.log_dir})"


class CSVLogger(Logger):
    """A dependency-free logger writing CSV files (torchrl's ``CSVLogger``).

    Args:
        exp_name: the experiment's name (a folder under ``log_dir``).
        log_dir: default ``"csv_logs"`` (relative to the working directory).
        video_format: ``"pt"`` (default), ``"memmap"`` or ``"mp4"`` (needs ``rlpipe[video]``).
        video_fps: frames per second of mp4 videos (default 30).
    """

    def __init__(self, exp_name, log_dir=None, video_format="pt", video_fps=30):
        self.video_format = video_format
        self.video_fps = video_fps
        super().__init__(exp_name=exp_name, log_dir="csv_logs" if log_dir is None else log_dir)

    def _create_experiment(self):
        return CSVExperiment(os.path.join(self.log_dir, self.exp_name), video_format=self.video_format,
                             video_fps=self.video_fps)

    def log_scalar(self, name, value, step=None):
        self.experiment.add_scalar(name, value, global_step=step)

    def log_video(self, name, video, step=None, **kwargs):
        """Logs a ``[N, T, C, H, W]`` video (C is 1 or 3)."""
        if video.dim() != 5 or video.size(dim=2) not in {1, 3}:
            raise Exception("Wrong format of the video tensor. Should be ((N), T, C, H, W)")  # noqa: TRY002 - torchrl's
        self.experiment.add_video(tag=name, vid_tensor=video, global_step=step, **kwargs)

    def log_hparams(self, cfg):
        """Writes ``key: value`` lines, sorted by key, to ``texts/hparams0.txt``."""
        self.experiment.add_text("hparams", "\n".join(f"{k}: {v}" for k, v in sorted(cfg.items())))

    def log_histogram(self, name, data, **kwargs):
        raise NotImplementedError("Logging histograms in cvs is not permitted.")

    def __repr__(self):
        return f"CSVLogger(exp_name={self.exp_name}, experiment={self.experiment!r})"
