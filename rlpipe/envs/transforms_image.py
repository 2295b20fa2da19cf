"""torchrl 0.14's image transforms: ``ToTensorImage``, ``GrayScale``, ``Resize``, ``CenterCrop``,
``Crop`` and ``CatFrames``, and the Atari ones that step or read the base env (first among an env's
transforms): ``FrameSkipTransform``, ``NoopResetEnv`` and ``EndOfLifeTransform``, written against
TensorDicts and specs as torchrl's are (``step_protocol.py``, THE RULE), with array frame hooks
behind them: Atari pipelines run these on every step, so no TensorDict is built per step.

The images are NumPy arrays on the host, channels first (``[..., C, H, W]``) after
``ToTensorImage``, as torchvision's. Like torchrl, ``Resize(w, h)``, ``Crop(w, h)`` and
``CenterCrop(w, h)`` give images of height ``w`` and width ``h`` (torchrl hands ``[w, h]`` to
torchvision, which reads ``[height, width]``).

``Resize`` computes torch's antialiased bilinear and bicubic filters (which torchrl's ``Resize``
runs through torchvision; a port of Pillow's) as banded matrix products in NumPy (``_resample``),
so the values agree with torch's to float32 rounding; OpenCV's ``INTER_LINEAR`` does not antialias
when it shrinks, and its ``INTER_AREA`` is a box filter.
"""
import warnings

import numpy as np

from .. import _dtypes
from .._creation import as_tensor
from .._tensor import host_array
from ..random import randint
from ..tensordict import unravel_key_to_tuple
from ._resample import resample
from .specs import Bounded, Composite, Unbounded
from .step_protocol import (REWARD, STEP_EXTRAS, TERMINATED, TRUNCATED, ArrayMapping, TransformProtocol, _done_like,
                            frame_of, frame_to_tensordict)
from .transformed_env import Transform, TransformedEnv, _key_str

__all__ = ["CatFrames", "CenterCrop", "Crop", "EndOfLifeTransform", "FrameSkipTransform", "GrayScale",
           "NoopResetEnv", "Resize", "ToTensorImage"]

IMAGE_KEYS = ["pixels"]
_RESERVED = frozenset(STEP_EXTRAS) | {("done",), ("action",)}
_GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale (ITU-R 601-2 luma)
_GRAY_WORK = {np.float64: tuple(map(np.float64, _GRAY_WEIGHTS)), np.float32: tuple(map(np.float32, _GRAY_WEIGHTS))}


class _ImageTransform(ArrayMapping, Transform):
    """A stateless map of each ``in_keys`` image (``_map``, on host arrays) into ``out_keys``; its
    spec goes through the same map (a ``Bounded`` spec's bounds included), as torchrl's
    ``_apply_to_composite`` hooks do. Reset observations are mapped too."""

    def __init__(self, in_keys=None, out_keys=None):
        in_keys = IMAGE_KEYS if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        name = type(self).__name__
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"{name}: in_keys and out_keys must have the same length, got {len(self.in_keys)} "
                             f"and {len(self.out_keys)}")
        for key in self.in_keys + self.out_keys:
            if key in _RESERVED:
                raise ValueError(f"{name}: {_key_str(key)!r} is not an image (observation keys only)")

    forward = TransformProtocol.forward  # torchrl's: a missing in key is a KeyError

    def _map(self, image):
        raise NotImplementedError

    def _apply_transform(self, value):
        return as_tensor(self._map(host_array(value)), device=getattr(value, "device", None))

    def _reset(self, tensordict, tensordict_reset):
        mode = self._missing_tolerance
        self._missing_tolerance = True
        try:
            return self._call(tensordict_reset)
        finally:
            self._missing_tolerance = mode

    def _frame_call(self, frame):
        out = None
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = frame.get(in_key)
            if value is not None:
                out = dict(frame) if out is None else out
                out[out_key] = self._map(value)
        return frame if out is None else out

    def _out_dtype(self, spec):
        return spec.dtype

    def transform_observation_spec(self, observation_spec):
        return _map_specs(self, observation_spec, lambda spec: _mapped_spec(spec, self._map, self._out_dtype(spec)))

    def __repr__(self):
        return f"{type(self).__name__}(keys={[_key_str(k) for k in self.in_keys]})"


def _map_specs(transform, observation_spec, transform_spec):
    """Each in key's spec of ``observation_spec`` through ``transform_spec`` into its out key; a leaf
    spec (not a ``Composite``) goes through itself, as torchrl's ``_apply_to_composite``."""
    if not isinstance(observation_spec, Composite):
        return transform_spec(observation_spec)
    keys = {unravel_key_to_tuple(k) for k in observation_spec.keys(True, True)}
    for in_key, out_key in zip(transform.in_keys, transform.out_keys):
        if in_key in keys:
            observation_spec[out_key] = transform_spec(observation_spec[in_key])
    return observation_spec


def _mapped_spec(spec, function, dtype=None):
    """``spec`` after ``function``, a map of host arrays: a ``Bounded`` spec's bounds go through it
    (as torchrl's image transforms map ``space.low``/``space.high``), other specs take its shape."""
    dtype = spec.dtype if dtype is None else dtype
    if isinstance(spec, Bounded):
        low, high = function(host_array(spec.low)), function(host_array(spec.high))
        return Bounded(low=as_tensor(low), high=as_tensor(high), shape=low.shape, dtype=dtype, device=spec.device)
    shape = function(np.zeros(tuple(spec.shape), dtype=spec.dtype.np)).shape
    return spec._with(shape=shape, dtype=dtype, reshape=True)


def _check_image(image, owner, ndim=3):
    if image.ndim < ndim:
        raise ValueError(f"{owner}: an image needs at least {ndim} dims ([..., C, H, W]), got shape "
                         f"{tuple(image.shape)}")


# ---- ToTensorImage, GrayScale --------------------------------------------------------------------------

class ToTensorImage(_ImageTransform):
    """``[..., H, W, C]`` images (uint8 from Gymnasium) to ``[..., C, H, W]`` of ``dtype``, divided
    by 255 when ``from_int`` (None: when the input is not floating). ``unsqueeze``: a 3-dim image
    gets a leading dim of 1. ``shape_tolerant``: an image whose last dim is not 3 is not permuted."""

    def __init__(self, from_int=None, unsqueeze=False, dtype=None, *, in_keys=None, out_keys=None,
                 shape_tolerant=False):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.from_int = from_int
        self.unsqueeze = bool(unsqueeze)
        self.dtype = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
        self.shape_tolerant = bool(shape_tolerant)

    def _map(self, image):
        _check_image(image, "ToTensorImage")
        if self.from_int or (self.from_int is None and image.dtype.kind != "f"):
            # torch divides an integer image in float32 (its default dtype), a floating one in its own
            image = np.divide(image, np.float32(255), dtype=image.dtype if image.dtype.kind == "f" else np.float32)
        image = image.astype(self.dtype.np, copy=False)
        if not self.shape_tolerant or image.shape[-1] == 3:
            # a view, as torch's permute: the next transform reads it in place (a copy costs as much as GrayScale)
            ndim = image.ndim
            image = image.transpose(*range(ndim - 3), ndim - 1, ndim - 3, ndim - 2)
        return image[None] if self.unsqueeze and image.ndim == 3 else image

    def _out_dtype(self, spec):
        return self.dtype

    def __repr__(self):
        return (f"ToTensorImage(keys={[_key_str(k) for k in self.in_keys]}, from_int={self.from_int}, "
                f"dtype={self.dtype})")


class GrayScale(_ImageTransform):
    """RGB ``[..., 3, H, W]`` images to grayscale ``[..., 1, H, W]`` with torchvision's weights
    (0.2989, 0.587, 0.114); an integer image is truncated back to its dtype, as torchvision's
    ``.to(img.dtype)``. A 1-channel image is copied."""

    def _map(self, image):
        _check_image(image, "GrayScale")
        channels = image.shape[-3]
        if channels not in (1, 3):
            raise ValueError(f"GrayScale: images must have 1 or 3 channels at dim -3, got {channels} (shape "
                             f"{tuple(image.shape)}); ToTensorImage puts the channels first")
        if channels == 1:
            return image.copy()
        # torchvision's (w_r * r + w_g * g) + w_b * b, each product and sum rounded in ``work``: in place,
        # in two buffers
        work = np.float64 if image.dtype == np.float64 else np.float32
        w_r, w_g, w_b = _GRAY_WORK[work]
        gray = image[..., 0:1, :, :].astype(work)
        gray *= w_r
        term = image[..., 1:2, :, :].astype(work)
        term *= w_g
        gray += term
        np.copyto(term, image[..., 2:3, :, :])
        term *= w_b
        gray += term
        return gray.astype(image.dtype, copy=False)


# ---- cropping -------------------------------------------------------------------------------------

def _crop(image, top, left, height, width):
    """torchvision's ``crop``: the ``height`` x ``width`` window at (``top``, ``left``) of the last two
    dims; the part outside the image is zero."""
    h, w = image.shape[-2:]
    out = np.zeros(image.shape[:-2] + (height, width), dtype=image.dtype)
    y0, y1 = max(top, 0), min(top + height, h)
    x0, x1 = max(left, 0), min(left + width, w)
    if y1 > y0 and x1 > x0:
        out[..., y0 - top:y1 - top, x0 - left:x1 - left] = image[..., y0:y1, x0:x1]
    return out


def _positive_size(value, name, owner):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")
    return int(value)


class Crop(_ImageTransform):
    """The window of height ``w`` and width ``h`` (``h=None``: ``w``) whose top-left pixel is
    (``top``, ``left``), as torchrl's ``Crop``; outside the image reads 0 (torchvision's crop)."""

    def __init__(self, w, h=None, top=0, left=0, in_keys=None, out_keys=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = _positive_size(w, "w", "Crop")
        self.h = self.w if not h else _positive_size(h, "h", "Crop")
        self.top, self.left = int(top), int(left)

    def _map(self, image):
        _check_image(image, "Crop", 2)
        return _crop(image, self.top, self.left, self.w, self.h)

    def __repr__(self):
        return f"Crop(w={self.w}, h={self.h}, top={self.top}, left={self.left}, keys={self.in_keys})"


class CenterCrop(_ImageTransform):
    """The centred window of height ``w`` and width ``h`` (``h=None``: ``w``), torchvision's
    ``center_crop``: the top-left corner rounds half to even, and an image smaller than the window
    is padded with zeros around it."""

    def __init__(self, w, h=None, in_keys=None, out_keys=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = _positive_size(w, "w", "CenterCrop")
        self.h = self.w if not h else _positive_size(h, "h", "CenterCrop")

    def _map(self, image):
        _check_image(image, "CenterCrop", 2)
        height, width = image.shape[-2:]
        top, left = self._corner(height, self.w), self._corner(width, self.h)
        return _crop(image, top, left, self.w, self.h)

    @staticmethod
    def _corner(size, crop):
        """Where torchvision's crop starts: after padding ``(crop - size) // 2`` in front when the
        image is smaller, the rounded middle of what is left."""
        if crop > size:
            pad_front, pad_back = (crop - size) // 2, (crop - size + 1) // 2
            return int(round((size + pad_front + pad_back - crop) / 2.0)) - pad_front
        return int(round((size - crop) / 2.0))

    def __repr__(self):
        return f"CenterCrop(w={self.w}, h={self.h}, keys={self.in_keys})"


# ---- resizing ---------------------------------------------------------------------------------------

_INTERPOLATIONS = ("nearest", "nearest-exact", "bilinear", "bicubic")
_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


def _nearest_index(size_in, size_out, exact):
    """torch's ``nearest`` (floor of ``i * scale``) or ``nearest-exact`` (pixel centres) source rows."""
    scale = np.float32(size_in) / np.float32(size_out)
    offset = np.float32(0.5) if exact else np.float32(0)
    index = np.floor((np.arange(size_out, dtype=np.float32) + offset) * scale).astype(np.int64)
    return np.minimum(index, size_in - 1)


def _antialiased(image, height, width, interpolation):
    """torchvision's tensor ``resize`` with ``antialias=True``: floating images in their precision
    (float16 through float32), integer ones in float32, rounded half to even and clamped into the
    integer type (only bicubic's overshoot can leave it: bilinear weights are convex)."""
    out = resample(image, height, width, interpolation, _FLOAT64 if image.dtype == _FLOAT64 else _FLOAT32)
    kind = image.dtype.kind
    if kind in "iub":
        np.rint(out, out=out)
    if kind in "iu" and interpolation == "bicubic":
        info = np.iinfo(image.dtype)
        np.minimum(np.maximum(out, info.min, out=out), info.max, out=out)
    return out.astype(image.dtype, copy=False)


class Resize(_ImageTransform):
    """Images resized to height ``w`` and width ``h`` (``h=None``: ``w``; a ``(w, h)`` pair works
    too), as torchrl's ``Resize``: torchvision's antialiased ``resize``. ``interpolation``:
    "bilinear" or "bicubic" (antialiased, ``_resample``), "nearest" or "nearest-exact". Integer
    images are resampled in float32 and rounded back, as torchvision's tensor path does."""

    def __init__(self, w, h=None, interpolation="bilinear", in_keys=None, out_keys=None):
        if isinstance(w, (list, tuple)):
            w, h = w
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = _positive_size(w, "w", "Resize")
        self.h = self.w if h is None else _positive_size(h, "h", "Resize")
        interpolation = getattr(interpolation, "value", interpolation)  # an InterpolationMode-like enum
        if interpolation not in _INTERPOLATIONS:
            raise ValueError(f"Resize: interpolation must be one of {list(_INTERPOLATIONS)}, got {interpolation!r}")
        self.interpolation = interpolation

    def _map(self, image):
        _check_image(image, "Resize", 2)
        if image.shape[-2:] == (self.w, self.h):
            return image
        if self.interpolation.startswith("nearest"):
            exact = self.interpolation == "nearest-exact"
            rows = _nearest_index(image.shape[-2], self.w, exact)
            cols = _nearest_index(image.shape[-1], self.h, exact)
            return image[..., rows[:, None], cols]
        return _antialiased(image, self.w, self.h, self.interpolation)

    def __repr__(self):
        return f"Resize(w={self.w}, h={self.h}, interpolation={self.interpolation}, keys={self.in_keys})"


# ---- CatFrames ------------------------------------------------------------------------------------

class CatFrames(Transform):
    """The last ``N`` frames of each ``in_keys`` entry concatenated along ``dim`` (negative, a
    feature dim) into ``out_keys``, as torchrl's ``CatFrames``.

    In an env, an episode's first window repeats its first frame (``padding="same"``) or is
    ``padding_value`` but for the newest frame (``"constant"``); each step drops the oldest frame.
    The window lives in the env's frames, so partial resets of vector envs restart only the envs
    that are done. Outside an env (``forward``, a replay buffer's), it unfolds trajectories along
    the time dim (named ``"time"``, else the last batch dim), split where ``("next", done_key)``
    is set; a ``("next", key)`` entry whose root ``key`` is an in key gets the windows the env
    would have produced. ``as_inverse``: the unfolding runs in ``inv`` instead (replay buffers only).
    Offline only, as torchrl 0.14's: ``future=True`` windows hold the ``N`` upcoming frames ``t .. t + N - 1``
    (past the trajectory's end: its last frame, or ``padding_value``; without a done entry each row is one
    trajectory), and ``mask_key`` names a ``[*batch, N]`` bool entry, True where a slot is padding.
    """

    ACCEPTED_PADDING = {"same", "constant", "zeros"}
    _CAT_DIM_ERR = ("dim must be < 0 to accommodate for tensordict of different batch-sizes (since negative dims "
                    "are batch invariant).")

    def __init__(self, N, dim, in_keys=None, out_keys=None, padding="same", padding_value=0, as_inverse=False,
                 reset_key=None, done_key=None, future=False, mask_key=None):
        super().__init__(in_keys=IMAGE_KEYS if in_keys is None else in_keys, out_keys=out_keys)
        self.N = _positive_size(N, "N", "CatFrames")
        if dim >= 0:
            raise ValueError(self._CAT_DIM_ERR)
        if padding not in self.ACCEPTED_PADDING:
            raise ValueError(f"padding must be one of {self.ACCEPTED_PADDING}")
        if padding == "zeros":
            raise RuntimeError("Padding option 'zeros' will is deprecated")
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"CatFrames: in_keys and out_keys must have the same length, got {len(self.in_keys)} "
                             f"and {len(self.out_keys)}")
        if reset_key is not None and unravel_key_to_tuple(reset_key) != ("_reset",):
            raise NotImplementedError(f"CatFrames: rlpipe envs have one reset key, '_reset'; got {reset_key!r}")
        self.dim = int(dim)
        self.padding, self.padding_value = padding, padding_value
        self.as_inverse = bool(as_inverse)
        self.reset_key = "_reset"
        self.done_key = "done" if done_key is None else done_key
        self.future, self.mask_key = bool(future), mask_key

    # ---- in an env: the window travels in the frames ----
    def _env_check(self):
        if self.future:
            raise RuntimeError("CatFrames(future=True) cannot run on the environment step path: forward-looking "
                               "windows require the full trajectory and are only available offline (replay buffer / "
                               "data pipelines).")
        if self.mask_key is not None:
            raise RuntimeError("CatFrames(mask_key=...) is only available offline (forward / unfolding): the online "
                               "step path does not build per-window validity masks.")
        if self.as_inverse:
            raise RuntimeError("CatFrames as inverse is not supported as a transform for environments, only for "
                               "replay buffers.")

    def _first_window(self, frame):
        """The window at an episode's first frame ``frame``."""
        if self.padding == "same":
            return self._stack_copies(frame)
        pad = np.full_like(frame, self.padding_value)
        return np.concatenate([pad] * (self.N - 1) + [frame], axis=self.dim)

    def _next_window(self, window, frame):
        """``window`` without its oldest frame, ``frame`` appended."""
        axis = window.ndim + self.dim
        kept = window[(slice(None),) * axis + (slice(frame.shape[axis], None),)]
        return np.concatenate([kept, frame], axis=axis)

    def _frame_reset(self, frame):
        self._env_check()
        out = dict(frame)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            out[out_key] = self._first_window(self._get(frame, in_key))
        return out

    def _inverts_actions(self):
        """False: in an env the action passes unchanged (``as_inverse`` is refused there), so the step
        path skips the TensorDict round trip of the inverse hook."""
        return False

    def _frame_step(self, root, next_frame, action):
        out = dict(next_frame)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            out[out_key] = self._next_window(root[out_key], self._get(next_frame, in_key))
        return out

    def _frame_continue(self, next_frame, frame, done):
        out = dict(frame)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = self._get(frame, in_key)
            rows = done.reshape(done.shape[:-1])  # the envs whose episode starts: a fresh window
            window = next_frame[out_key].copy()
            window[rows] = self._first_window(value[rows])
            out[out_key] = window
        return out

    # torchrl's TensorDict methods, on the same windows
    def _reset(self, tensordict, tensordict_reset):
        self._env_check()
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict_reset.get(in_key)
            tensordict_reset.set(out_key, as_tensor(self._first_window(host_array(value)), device=value.device))
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = next_tensordict.get(in_key)
            window = self._next_window(host_array(tensordict.get(out_key)), host_array(value))
            next_tensordict.set(out_key, as_tensor(window, device=value.device))
        return next_tensordict

    def _call(self, next_tensordict, _reset=None):
        """torchrl's windows kept in the transform (a TensorDict called outside an env, step by step):
        each call appends the frame to its in key's window, which starts as ``padding_value``;
        ``_reset`` (a mask of the batch, or True) restarts the window of those rows as an env's reset."""
        self._env_check()
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = next_tensordict.get(in_key)
            frame = host_array(value)
            window = self._cat_buffers.get(in_key)
            if window is None or window.shape != self._stack_copies(frame).shape:
                window = np.full(self._stack_copies(frame).shape, self.padding_value, dtype=frame.dtype)
            if _reset is None:
                window = self._next_window(window, frame)
            else:
                rows = _batch_mask(_reset, next_tensordict.batch_size, frame.ndim)
                window = np.where(rows, self._first_window(frame), window)
            self._cat_buffers[in_key] = window
            next_tensordict.set(out_key, as_tensor(window.copy(), device=value.device))
        return next_tensordict

    @property
    def _cat_buffers(self):
        """The windows of ``_call``, by in key (made on first use)."""
        buffers = self.__dict__.get("_cat_buffer_dict")
        if buffers is None:
            buffers = self.__dict__["_cat_buffer_dict"] = {}
        return buffers

    @staticmethod
    def _get(frame, key):
        value = frame.get(key)
        if value is None:
            raise KeyError(f"CatFrames: {_key_str(key)!r} not found in the env's observations (keys: "
                           f"{sorted(map(str, frame))})")
        return value

    def transform_observation_spec(self, observation_spec):
        """Each in key's spec stacked ``N`` times along ``dim`` into its out key (bounds included)."""
        return _map_specs(self, observation_spec, lambda spec: _mapped_spec(spec, self._stack_copies))

    def _stack_copies(self, frame):
        return np.concatenate([frame] * self.N, axis=self.dim)

    # ---- outside an env: unfolding trajectories ----
    def forward(self, tensordict):
        return tensordict if self.as_inverse else self.unfolding(tensordict)

    def _inv_call(self, tensordict):
        return self.unfolding(tensordict) if self.as_inverse else tensordict

    def unfolding(self, tensordict):
        """Every step's window of each in key along the time dim of ``tensordict`` (class docstring); with
        ``future``, the windows of the upcoming frames; with ``mask_key``, which slots are padding."""
        if not tensordict.batch_dims:
            raise ValueError("CatFrames cannot process unbatched tensordict instances. Make sure your input has "
                             "more than one dimension and the time dimension is marked as 'time'.")
        time, batch_dims = self._time_dim(tensordict), tensordict.batch_dims
        bounds, slots, inside = self._trajectory_slots(tensordict, time)
        pairs = dict(zip(self.in_keys, self.out_keys))
        results = []
        for in_key, out_key in pairs.items():
            value = tensordict.get(in_key)
            data = _time_last(host_array(value), time, batch_dims)
            first = None
            if in_key[0] == "next" and in_key[1:] in pairs:  # the root frames start the next windows
                if self.future:
                    raise NotImplementedError("CatFrames(future=True) does not support processing a ('next', key) "
                                              "entry alongside its root counterpart: the one-step-offset fixup is "
                                              "only implemented for history (backward) windows.")
                first = _time_last(host_array(tensordict.get(in_key[1:])), time, batch_dims)
            windows = self._windows(data, slots, inside, bounds, first)
            results.append((out_key, _time_back(windows, value.shape, time, batch_dims), value.device))
        if self.mask_key is not None:
            shape = tuple(tensordict.batch_size) + (self.N,)
            results.append((self.mask_key, _time_back(~inside, shape, time, batch_dims), tensordict.device))
        for out_key, windows, device in results:
            tensordict.set(out_key, as_tensor(windows, device=device))
        return tensordict

    def _trajectory_slots(self, tensordict, time):
        """(bounds, slots, inside): for each [batch, time] step, where its trajectory starts (its end with
        ``future``), the step each window slot shows ([time, N]) and whether that slot lies inside the
        trajectory ([batch, time, N])."""
        done = tensordict.get(("next",) + unravel_key_to_tuple(self.done_key), None)
        if done is None:
            if not self.future:
                raise KeyError(f"CatFrames.unfolding requires the {('next', self.done_key)} entry to delimit "
                               "trajectories. Make sure the sampled data carries its done state, or use "
                               "forward-looking windows (future=True) to treat each batch row as a single "
                               "contiguous trajectory.")
            done = np.zeros(tuple(tensordict.batch_size), dtype=bool)  # each row is one trajectory
        done = _time_last(host_array(done), time, tensordict.batch_dims)
        ended = done.reshape(done.shape[:2] + (-1,)).any(-1)
        offsets = np.arange(self.N) - (0 if self.future else self.N - 1)
        slots = np.arange(ended.shape[1])[:, None] + offsets
        if self.future:
            bounds = _trajectory_ends(ended)
            return bounds, slots, slots <= bounds[:, :, None]
        bounds = _trajectory_starts(ended)
        return bounds, slots, slots >= bounds[:, :, None]

    @staticmethod
    def _time_dim(tensordict):
        names = list(tensordict.names)
        if "time" in names:
            return names.index("time")
        warnings.warn("The last dimension of the tensordict should be marked as 'time'. CatFrames will unfold the "
                      "data along the time dimension assuming that the time dimension is the last dimension of the "
                      "input tensordict.", UserWarning, stacklevel=3)
        return tensordict.batch_dims - 1

    def _windows(self, data, slots, inside, bounds, first):
        """The windows of ``data`` ([batch, time, *features]): [batch, time, *features] with the
        ``N`` frames concatenated along ``dim`` (``_trajectory_slots``: a slot outside the trajectory
        shows its bound's frame, or ``padding_value``). ``first``: the root frames, for next frames."""
        N = self.N
        starts = bounds[:, :, None]
        rows = np.arange(data.shape[0])[:, None, None]
        windows = data[rows, np.where(inside, slots, starts)]  # [batch, time, N, *features]
        outside = _done_like(~inside[..., None], windows)
        if first is not None:  # the slot before the start shows the trajectory's first root frame
            start_frame = first[rows, starts]
            windows = np.where(outside, start_frame, windows)
            outside = outside & _done_like((slots < starts - 1)[..., None], windows)
        if self.padding == "constant":
            windows = np.where(outside, np.asarray(self.padding_value, dtype=windows.dtype), windows)
        axis = data.ndim + self.dim  # the cat dim, in data; the window dim goes just before it
        if axis < 2:
            raise ValueError(f"CatFrames: dim {self.dim} must be a feature dim of the entries (they have "
                             f"{data.ndim - 2} feature dims)")
        windows = np.moveaxis(windows, 2, axis)
        shape = windows.shape[:axis] + (N * windows.shape[axis + 1],) + windows.shape[axis + 2:]
        return windows.reshape(shape)

    def __repr__(self):
        return f"CatFrames(N={self.N}, dim={self.dim}, keys={[_key_str(k) for k in self.in_keys]})"


def _batch_mask(mask, batch_size, ndim):
    """A reset mask (one bool, or one per row of ``batch_size``, maybe with a trailing dim of 1) shaped to
    broadcast over ``ndim``-dim entries."""
    mask = np.asarray(host_array(mask), dtype=bool)
    if mask.ndim > len(batch_size):
        mask = mask.reshape(tuple(batch_size))
    return mask.reshape(mask.shape + (1,) * (ndim - mask.ndim))


def _time_last(value, time, batch_dims):
    """``value`` as [batch, time, *features]: the time dim moved after the other batch dims, which are flattened."""
    value = np.moveaxis(value, time, batch_dims - 1)
    return value.reshape((-1,) + value.shape[batch_dims - 1:])


def _time_back(windows, shape, time, batch_dims):
    """``_time_last``'s inverse for ``windows`` of an entry shaped ``shape``."""
    batch = tuple(shape[:batch_dims])
    moved = batch[:time] + batch[time + 1:] + (batch[time],)
    return np.moveaxis(windows.reshape(moved + windows.shape[2:]), batch_dims - 1, time)


def _trajectory_ends(done):
    """For every step of ``done`` ([batch, time], bool), the step its trajectory ends at (the last one
    where no done comes before)."""
    n_time = done.shape[1]
    last = done.copy()
    last[:, -1] = True
    at = np.where(last, np.arange(n_time), n_time)
    return np.minimum.accumulate(at[:, ::-1], axis=1)[:, ::-1]


def _trajectory_starts(done):
    """For every step of ``done`` ([batch, time], bool), the step its trajectory starts at."""
    n_time = done.shape[1]
    restart = np.zeros(done.shape, dtype=bool)
    restart[:, 0] = True
    restart[:, 1:] = done[:, :-1]
    return np.maximum.accumulate(np.where(restart, np.arange(n_time), 0), axis=1)


# ---- transforms that act on the base env (Atari) ----------------------------------------------------

_MAX_NOOPS_TRIALS = 10
_FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."  # torchrl's words


class _BaseEnvTransform(Transform):
    """A transform that steps or reads the base env itself. It must come first among the env's
    transforms, after only other such transforms: the frames it makes come straight from the base
    env, with none of the transforms before it applied (torchrl steps its ``parent``: the base env
    and those transforms). One that only reads the env (``_makes_frames`` False: ``EndOfLifeTransform``)
    may follow any of them, as in torchrl's Atari stacks (``NoopResetEnv`` then ``EndOfLifeTransform``);
    one that makes frames follows only others that do."""

    _makes_frames = True

    def _env(self):
        node = self._container
        while node is not None and not isinstance(node, TransformedEnv):
            node = node._container
        if node is None:
            raise RuntimeError(f"{type(self).__name__} can only be used when appended to a transformed env.")
        leaves = node._leaf_list()
        before = leaves[:next(i for i, leaf in enumerate(leaves) if leaf is self)]
        if not all(isinstance(t, _BaseEnvTransform) and (t._makes_frames or not self._makes_frames) for t in before):
            allowed = "NoopResetEnv, FrameSkipTransform" + ("" if self._makes_frames else ", EndOfLifeTransform")
            raise NotImplementedError(
                f"{type(self).__name__} must be the first transform of its env on rlpipe (it steps or reads the base "
                f"env, before any other transform), preceded only by {allowed}; got "
                f"{[type(t).__name__ for t in before]} before it")
        return node.base_env

    def forward(self, tensordict):
        """Outside an env, the data as it is (torchrl's ``_call``)."""
        return tensordict

    def _env_or_raise(self, message):
        """The base env; outside an env, ``RuntimeError(message)`` (torchrl's words for a missing parent)."""
        node = self._container
        while node is not None and not isinstance(node, TransformedEnv):
            node = node._container
        if node is None:
            raise RuntimeError(message)
        return self._env()

    @staticmethod
    def _through_frames(hook, tensordict):
        """A TensorDict method (torchrl's ``_reset``/``_step``) run by the frame ``hook`` on the arrays of
        ``tensordict``, whose entries it updates."""
        frame = hook(frame_of(tensordict))
        return frame_to_tensordict(frame, tensordict.batch_size, tensordict.device, td=tensordict)


class FrameSkipTransform(_BaseEnvTransform):
    """Each action repeated ``frame_skip`` times on the base env, the rewards summed. Like rlpipe's
    ``GymEnv(frame_skip=...)`` (unlike torchrl, which steps on into the next episode) the repeats
    stop after a step where any env is done."""

    def __init__(self, frame_skip=1):
        super().__init__()
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, (int, np.integer)) or frame_skip < 1:
            raise ValueError(f"frame_skip should have a value greater or equal to one, got {frame_skip!r}.")
        self.frame_skip = int(frame_skip)

    def _frame_step(self, root, next_frame, action):
        if self.frame_skip == 1:
            return next_frame
        env = self._env()
        if env._skips_rows:
            raise ValueError("FrameSkipTransform needs an env that resets its done envs in the same step (a "
                             "NEXT_STEP autoreset would skip a repeated step)")
        frame, reward = next_frame, next_frame[REWARD]
        for _ in range(self.frame_skip - 1):
            if np.any(frame[TERMINATED]) or np.any(frame[TRUNCATED]):
                break
            obs, step_reward, terminated, truncated = env._step_frame(action)
            frame = dict(obs)
            frame[TERMINATED], frame[TRUNCATED] = terminated, truncated
            reward = reward + step_reward
        frame = dict(frame)
        frame[REWARD] = reward
        return frame

    def _step(self, tensordict, next_tensordict):
        """torchrl's step hook: the repeats of ``_frame_step`` on ``next_tensordict``."""
        self._env_or_raise("parent not found for FrameSkipTransform")
        action = host_array(tensordict.get("action"))
        return self._through_frames(lambda frame: self._frame_step(None, frame, action), next_tensordict)

    def forward(self, tensordict):
        raise RuntimeError("FrameSkipTransform can only be used when appended to a transformed env.")

    def __repr__(self):
        return f"FrameSkipTransform(frame_skip={self.frame_skip})"


class NoopResetEnv(_BaseEnvTransform):
    """After each reset, ``noops`` random actions (``random``: a number drawn in [0, noops) from
    rlpipe's generator); an episode that ends meanwhile is reset and the noops start over, up to
    10 times. For an env of one instance, as torchrl's."""

    def __init__(self, noops=30, random=True):
        super().__init__()
        if isinstance(noops, bool) or not isinstance(noops, (int, np.integer)) or noops < 0:
            raise ValueError(f"NoopResetEnv: noops must be a non-negative int, got {noops!r}")
        self.noops, self.random = int(noops), bool(random)

    def _frame_reset(self, frame):
        env = self._env()
        if int(np.prod(tuple(env.batch_size))) > 1:
            raise ValueError("The parent environment batch-size is non-null. NoopResetEnv is designed to work on "
                             "single env instances, as partial reset is currently not supported.")
        noops = int(randint(self.noops, (1,)).item()) if self.random and self.noops else self.noops
        for _ in range(_MAX_NOOPS_TRIALS + 1):
            obs = self._run_noops(env, frame, noops)
            if obs is not None:
                return obs
            frame = env._reset_frame()
        raise RuntimeError(f"Parent env was repeatedly done or truncated before the sampled number of noops "
                           f"(={noops}) could be applied. ")

    @staticmethod
    def _run_noops(env, frame, noops):
        """The observations after ``noops`` random actions from ``frame``; None if the episode ends."""
        for _ in range(noops):
            frame, _, terminated, truncated = env._step_frame(host_array(env.action_spec.rand()))
            if np.any(terminated) or np.any(truncated):
                return None
        return frame

    def _frame_step(self, root, next_frame, action):
        """A step as it is: the noops are part of resets only (the default hook would build TensorDicts)."""
        return next_frame

    def _reset(self, tensordict, tensordict_reset):
        """torchrl's reset hook: the noops of ``_frame_reset`` from ``tensordict_reset``'s observations."""
        self._env_or_raise("NoopResetEnv.parent not found. Make sure that the parent is set.")
        return self._through_frames(self._frame_reset, tensordict_reset)

    def _step(self, tensordict, next_tensordict):
        """torchrl's step hook: the step as it is."""
        return next_tensordict

    def _frame_continue(self, next_frame, frame, done):
        return self._frame_reset(frame) if np.any(done) else frame

    def __repr__(self):
        return f"NoopResetEnv(noops={self.noops}, random={self.random})"


class EndOfLifeTransform(_BaseEnvTransform):
    """Writes ``lives_key`` (int64, the base env's lives, read at ``eol_attribute``: an int, an
    array or a callable, on the base env or, failing that, on the Gymnasium env it wraps) and
    ``eol_key`` (shaped like ``done``): True after a step that lost a life or ended the episode.
    The end of a life does not end the episode: a loss can read it in place of ``done``."""

    _makes_frames = False  # it reads the base env's lives: the frames are those of the transforms before it

    def __init__(self, eol_key="end-of-life", lives_key="lives", done_key="done", eol_attribute="unwrapped.ale.lives"):
        super().__init__(in_keys=[done_key], out_keys=[eol_key, lives_key])
        if unravel_key_to_tuple(done_key) != ("done",):
            raise NotImplementedError(f"EndOfLifeTransform: rlpipe envs have one done key, 'done'; got {done_key!r}")
        self.eol_key, self.lives_key, self.done_key = eol_key, lives_key, done_key
        self.eol_attribute = eol_attribute.split(".")

    NO_PARENT_ERR = "The {} transform is being executed without a parent env. This is currently not supported."

    def _lives(self, env):
        first = self.eol_attribute[0]
        lives = getattr(env, first) if hasattr(env, first) else getattr(env._env, first)
        for name in self.eol_attribute[1:]:
            lives = [getattr(x, name) for x in lives] if isinstance(lives, list) else getattr(lives, name)
        if isinstance(lives, list):
            lives = [x() if callable(x) else x for x in lives]
        elif callable(lives):
            lives = lives()
        return np.asarray(lives, dtype=np.int64).reshape(tuple(env.batch_size))

    def _frame_reset(self, frame):
        env = self._env()
        out = dict(frame)
        out[unravel_key_to_tuple(self.lives_key)] = self._lives(env)
        out[unravel_key_to_tuple(self.eol_key)] = np.zeros(tuple(env.batch_size) + (1,), dtype=bool)
        return out

    def _frame_step(self, root, next_frame, action):
        lives_key = unravel_key_to_tuple(self.lives_key)
        lives = self._lives(self._env())
        lost = (root[lives_key] > lives).reshape(next_frame[TERMINATED].shape)
        out = dict(next_frame)
        out[lives_key] = lives
        out[unravel_key_to_tuple(self.eol_key)] = lost | next_frame[TERMINATED] | next_frame[TRUNCATED]
        return out

    def _reset(self, tensordict, tensordict_reset):
        """torchrl's reset hook: ``lives_key`` and a False ``eol_key`` in ``tensordict_reset``."""
        self._env_or_raise(self.NO_PARENT_ERR.format(type(self)))
        return self._through_frames(self._frame_reset, tensordict_reset)

    def _step(self, tensordict, next_tensordict):
        """torchrl's step hook: ``lives_key`` and ``eol_key`` in ``next_tensordict``, from ``tensordict``'s lives."""
        self._env_or_raise(self.NO_PARENT_ERR.format(type(self)))
        root = frame_of(tensordict)
        return self._through_frames(lambda frame: self._frame_step(root, frame, None), next_tensordict)

    def forward(self, tensordict):
        """Not outside an env (torchrl's ``FORWARD_NOT_IMPLEMENTED``): it reads the env's lives."""
        raise RuntimeError(_FORWARD_NOT_IMPLEMENTED.format(type(self)))

    def _frame_continue(self, next_frame, frame, done):
        out = self._frame_reset(frame)
        eol_key = unravel_key_to_tuple(self.eol_key)
        out[eol_key] = np.where(done, False, next_frame[eol_key])
        return out

    def transform_observation_spec(self, observation_spec):
        """Adds ``eol_key`` (the done spec's) and ``lives_key`` (int64, the env's batch shape)."""
        env = self._env()
        observation_spec[self.eol_key] = self._parent_spec("done")["done"].clone()
        observation_spec[self.lives_key] = Unbounded(shape=env.batch_size, device=env.device, dtype=_dtypes.int64)
        return observation_spec

    def __repr__(self):
        return f"EndOfLifeTransform(eol_key={self.eol_key!r}, lives_key={self.lives_key!r})"
