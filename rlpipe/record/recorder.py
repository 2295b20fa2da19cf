"""``VideoRecorder``: an env transform that keeps the rendered frames and hands them to a logger."""
import numpy as np

from .._creation import from_numpy
from ..envs.transformed_env import Transform

__all__ = ["VideoRecorder"]


class VideoRecorder(Transform):
    """Collects the ``in_keys`` frames (default ``"pixels"``: ``[H, W, 3]`` or ``[3, H, W]`` uint8, or
    ``[H, W]`` grey) of every reset and step it sees; ``dump()`` logs them as one video
    (``logger.log_video(tag, [1, T, 3, H, W], step=...)``) and starts over.

    As torchrl: ``skip`` (default 2 in an unbatched env, else 1; 1 outside an env) keeps one frame in ``skip``,
    ``max_frames`` caps the buffer, ``fps`` and other keyword arguments go to ``log_video``, and
    ``dump_on_done`` dumps when the episode ends. Frames of a batched env are kept side by side
    (stacked along the width), where torchrl builds a grid; ``center_crop`` is not supported.
    """

    def __init__(self, logger, tag, in_keys=None, skip=None, center_crop=None, make_grid=None, out_keys=None,
                 fps=None, max_frames=None, dump_on_done=False, **kwargs):
        if max_frames is not None and max_frames <= 0:
            raise ValueError(f"max_frames must be a positive integer, got {max_frames}.")
        if center_crop:
            raise NotImplementedError("VideoRecorder: center_crop is not supported by rlpipe")
        super().__init__(in_keys=["pixels"] if in_keys is None else in_keys, out_keys=out_keys)
        self.video_kwargs = dict(kwargs, **({} if fps is None else {"fps": fps}))
        self.iter = 0
        self._skip = skip
        self.logger = logger
        self.tag = tag
        self.count = 0
        self.make_grid = make_grid
        self.max_frames = max_frames
        self.dump_on_done = dump_on_done
        self.obs = []

    @property
    def skip(self):
        """Records every ``skip``-th frame; unless set, 1 under a batched env and 2 otherwise, as torchrl decides."""
        if self._skip is None:  # decided once, when first needed (the env is known by then)
            parent = self.parent
            if parent is None:
                return 1
            self._skip = 1 if len(parent.batch_size) else 2
        return self._skip

    @skip.setter
    def skip(self, value):
        self._skip = value

    def _record(self, frame):
        self.count += 1
        if self.count % self.skip or (self.max_frames is not None and len(self.obs) >= self.max_frames):
            return
        for key in self.in_keys:
            pixels = frame.get(key)
            if pixels is not None:
                self.obs.append(_to_chw(np.asarray(pixels)))

    def _call(self, next_tensordict):
        """Records the frame of ``next_tensordict`` (a TensorDict or a frame: both have ``get``)."""
        self._record(next_tensordict)
        return next_tensordict

    def _frame_reset(self, frame):
        return self._call(frame)

    def _frame_continue(self, next_frame, frame, done):
        if np.any(done):  # an episode restarted: its first frame (a frame carried over was recorded by _step)
            self._record(frame)
        return frame

    def _frame_step(self, root, next_frame, action):
        self._record(next_frame)
        if self.dump_on_done and bool(np.all(next_frame[("terminated",)] | next_frame[("truncated",)])):
            self.dump()
        return next_frame

    def dump(self, suffix=None, step=None):
        """Logs the frames kept so far as one video (nothing to log: no call) and empties the buffer."""
        if self.obs and self.logger is not None:
            video = from_numpy(np.stack(self.obs)[None])
            tag = self.tag if suffix is None else f"{self.tag}_{suffix}"
            self.logger.log_video(name=tag, video=video, step=self.iter if step is None else step,
                                  **self.video_kwargs)
        self.iter += 1
        self.count = 0
        self.obs = []

    def __repr__(self):
        return f"{type(self).__name__}(tag={self.tag}, keys={self.in_keys}, frames={len(self.obs)})"


def _to_chw(pixels):
    """A frame as ``[3, H, W]`` uint8; batched frames ``[*B, H, W, C]`` side by side along the width."""
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if pixels.shape[-3] in (1, 3) and pixels.shape[-1] not in (1, 3):  # channels first
        pixels = np.moveaxis(pixels, -3, -1)
    if pixels.shape[-1] not in (1, 3):
        raise RuntimeError(f"Invalid observation shape, got: {pixels.shape}")
    if pixels.ndim > 3:
        pixels = pixels.reshape((-1,) + pixels.shape[-3:])
        pixels = np.concatenate(list(pixels), axis=1)
    pixels = np.broadcast_to(pixels, pixels.shape[:-1] + (3,))
    return np.ascontiguousarray(np.moveaxis(pixels, -1, 0), dtype=np.uint8)
