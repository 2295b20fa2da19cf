"""Antialiased separable resampling of images, as torch's ``F.interpolate(..., antialias=True)`` and
Pillow's ``Image.resize`` compute it (torch's kernels are a port of Pillow's): each output pixel is a
weighted sum of the input pixels under a filter (triangle for bilinear, Keys' cubic with a = -0.5 for
bicubic) stretched by the downscaling factor, with the weights of each output normalised to sum 1.

The resampling along one axis is a matrix with a narrow band (about ``2 * support * scale`` taps per
output row). Dense products waste most of their work on zeros and a loop over taps runs in Python, so
the outputs are cut into blocks of a few consecutive rows: every block reads one window of the input
whose start advances by a fixed stride, which makes the windows one strided view and the whole pass
one batched BLAS product of ``[blocks, block, window]`` weights with ``[..., blocks, window, columns]``.
The weights are computed once per (input size, output size, filter) and cached.
"""
import functools

import numpy as np

from ..nn._functional_resample import antialias_rows

_MAX_BLOCK = 16
# a layout's cost per output row: its window's multiply-adds per column, plus a share of each BLAS call's
# overhead, worth about 40 multiply-adds per column (fitted on 210x160 -> 84x84: 26 us with 4 and 8 rows
# per block on the two axes, 29 us with 6 and 10, 32 us with 12 and 16)
_CALL_COST = 40


def _layout(nonzero, size_in, block):
    """(block, stride, front, window) of blocks of ``block`` outputs (``nonzero``: each output's taps):
    the stride whose windows, the smallest that cover every block's taps, are smallest."""
    blocks = -(-len(nonzero) // block)
    # a filter can weigh an edge of its window 0 (bicubic at whole offsets): spans over every row of a block
    spans = [(min(taps[0] for taps in nonzero[b * block:b * block + block]),
              max(taps[-1] for taps in nonzero[b * block:b * block + block]) + 1) for b in range(blocks)]
    best = None
    for stride in range(1, max(2, 2 * block * size_in // len(nonzero) + 2)):
        front = max(b * stride - first for b, (first, _) in enumerate(spans))
        window = max(last - (b * stride - front) for b, (_, last) in enumerate(spans))
        if best is None or (window, front) < best[3:1:-1]:
            best = (block, stride, front, window)
    return best


def _cost(layout):
    block, _, _, window = layout
    return window + _CALL_COST / block


def filter_weights(size_in, size_out, mode):
    """The ``[size_out, size_in]`` float64 matrix of Pillow's antialiased resampling along one axis
    (``precompute_coeffs`` in Pillow's Resample.c, ``_compute_weights_aa`` in torch): the rows of
    ``F.interpolate``'s antialiased taps."""
    weights = np.zeros((size_out, size_in))
    for out, (first, taps) in enumerate(antialias_rows(size_in, size_out, size_in / size_out, mode)):
        weights[out, first:first + len(taps)] = taps
    return weights


class _AxisPlan:
    """The blocked form of one axis's weights: block ``b`` (``block`` outputs) reads the ``window``
    inputs from ``b * stride - front`` of the input padded with ``front`` zeros before and ``back``
    after; ``weights`` is ``[blocks, block, window]``."""

    __slots__ = ("size_out", "stride", "front", "back", "window", "weights")

    def __init__(self, dense, dtype):
        size_out, size_in = dense.shape
        nonzero = [np.flatnonzero(row) for row in dense]
        block, self.stride, self.front, self.window = min(
            (_layout(nonzero, size_in, block) for block in range(1, _MAX_BLOCK + 1)), key=_cost)
        blocks = -(-size_out // block)
        self.size_out = size_out
        self.back = max(0, (blocks - 1) * self.stride - self.front + self.window - size_in)
        self.weights = np.zeros((blocks, block, self.window), dtype=dtype)
        for out, taps in enumerate(nonzero):
            index, row = divmod(out, block)
            start = index * self.stride - self.front
            self.weights[index, row, taps[0] - start:taps[-1] + 1 - start] = dense[out, taps[0]:taps[-1] + 1]

    def apply(self, planes):
        """``planes`` ``[N, size_in, C]`` (any real dtype, any strides) resampled along dim 1 into
        ``[N, size_out, C]`` in the weights' dtype. The copy into the zero-padded buffer converts the
        dtype and gathers a transposed view in the same pass."""
        count, size_in, columns = planes.shape
        padded = np.zeros((count, self.front + size_in + self.back, columns), dtype=self.weights.dtype)
        padded[:, self.front:self.front + size_in] = planes
        row = padded.strides[1]
        windows = np.ndarray((count, len(self.weights), self.window, columns), padded.dtype, padded,
                             strides=(padded.strides[0], self.stride * row, row, padded.itemsize))
        out = np.matmul(self.weights, windows)
        blocks, block = self.weights.shape[:2]
        return out.reshape(count, blocks * block, columns)[:, :self.size_out]


@functools.lru_cache(maxsize=64)
def axis_plan(size_in, size_out, mode, dtype):
    """The cached blocked weights of one axis (``dtype``: float32 or float64, a NumPy dtype)."""
    return _AxisPlan(filter_weights(size_in, size_out, mode), dtype)


def resample(image, height, width, mode, dtype=np.float32):
    """``image`` ``[..., H, W]`` (any real dtype) resampled to a new C-ordered ``[..., height, width]``
    array of ``dtype`` (float32 or float64, the precision of the sums) with the antialiased ``mode``
    filter ("bilinear" or "bicubic")."""
    dtype = np.dtype(dtype)
    size_h, size_w = image.shape[-2:]
    planes = image.reshape((-1, size_h, size_w))
    if size_h != height:
        planes = axis_plan(size_h, height, mode, dtype).apply(planes)
    if size_w != width:
        planes = axis_plan(size_w, width, mode, dtype).apply(planes.transpose(0, 2, 1)).transpose(0, 2, 1)
    out = np.empty(image.shape[:-2] + (height, width), dtype=dtype)
    out.reshape(planes.shape)[...] = planes
    return out
