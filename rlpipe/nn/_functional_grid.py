"""``nn.functional``'s ``affine_grid`` and ``grid_sample`` (2-D), composed of differentiable tensor ops: the
sample is a weighted sum of gathered input pixels, the weights are functions of the grid, so both the input
and the grid get gradients (random-shift augmentations such as DrQ's, spatial transformers)."""
import builtins
import warnings

from .. import _dtypes
from .. import primitives as ops
from .._creation import arange, linspace, ones, ones_like, zeros
from ..primitives import _require_float

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


def _steps(n, align_corners, like):
    """n positions spanning [-1, 1] (the pixel centres without ``align_corners``, the corners with it)."""
    if n <= 1:
        return zeros(1, dtype=like.dtype, device=like.device)
    steps = linspace(-1, 1, n, dtype=like.dtype, device=like.device)
    return steps if align_corners else steps * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid [N, H, W, 2] of the 2-D affine maps ``theta`` [N, 2, 3] for an output of ``size``
    (N, C, H, W): each output pixel's normalized (x, y) in [-1, 1] sent through its sample's map."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(size)
    if len(size) == 5:
        raise NotImplementedError("affine_grid: 3-D affine transforms (5-D sizes) are not implemented in rlpipe")
    if len(size) != 4:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if theta.ndim != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got {theta.shape}.")
    if align_corners and builtins.min(size[-2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif builtins.min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, 3] but got: "
                           f"[{theta.shape[0]}, 3].")
    n, _, h, w = size
    xs = ops.expand(ops.reshape(_steps(w, align_corners, theta), (1, w)), (h, w))
    ys = ops.expand(ops.reshape(_steps(h, align_corners, theta), (h, 1)), (h, w))
    base = ops.stack([xs, ys, ones(h, w, dtype=theta.dtype, device=theta.device)], -1)
    grid = ops.matmul(ops.reshape(base, (1, h * w, 3)), ops.transpose(theta, 1, 2))
    return ops.reshape(grid, (n, h, w, 2))


def _reflect(coord, twice_low, twice_high):
    """coord reflected into [twice_low / 2, twice_high / 2] as often as it takes (torch's reflect_coordinates)."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = ops.abs(coord - low)
    flips = ops.floor(coord / span).detach()
    extra = coord - flips * span
    return ops.where(ops.remainder(flips, 2) == 0, extra + low, span - extra + low)


def _source(coord, size, padding_mode, align_corners):
    """Normalized coordinates [-1, 1] as input pixel coordinates, clipped or reflected by ``padding_mode``."""
    coord = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
    if padding_mode != "zeros":
        coord = ops.clamp(coord, 0, size - 1)
    return coord


def _sample(input, xs, ys, weights):
    """sum_k weights[k] * input[n, :, ys[k], xs[k]] over corners k (xs, ys, weights [K, N, L]; corners outside
    the input count zero) as [N, C, L]. The input is read as a table of pixel rows [N*H*W, C] with a zero
    row last, where the corners outside point, so all corners come from one row gather."""
    n, c, h, w = input.shape
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    sample = ops.reshape(arange(n, device=input.device) * (h * w), (1, n, 1))
    rows = ops.where(inside, (ys * w + xs).to(_dtypes.int64) + sample, n * h * w)
    pixels = ops.reshape(ops.permute(input, (0, 2, 3, 1)), (n * h * w, c))
    table = ops.cat([pixels, zeros(1, c, dtype=input.dtype, device=input.device)])
    values = ops.reshape(ops.index_select(table, 0, ops.reshape(rows, (-1,))), tuple(rows.shape) + (c,))
    return ops.permute(ops.einsum("knlc,knl->nlc", values, weights), (0, 2, 1))


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples input [N, C, H, W] at the normalized (x, y) positions of grid [N, Ho, Wo, 2] ((-1, -1) is the
    top-left corner or pixel centre, (1, 1) the bottom-right) into [N, C, Ho, Wo], bilinearly or from the
    nearest pixel; outside the input, ``padding_mode`` gives zeros, the border's values or a reflection."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode 'bicubic' is not implemented in rlpipe; use 'bilinear'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    _check_grid(input, grid)
    n, c, h, w = input.shape
    ho, wo = grid.shape[1:3]
    coords = ops.reshape(grid, (n, ho * wo, 2))
    ix = _source(coords[..., 0], w, padding_mode, align_corners)
    iy = _source(coords[..., 1], h, padding_mode, align_corners)
    if mode == "nearest":
        nearest = (ops.unsqueeze(ops.round(ix).detach(), 0), ops.unsqueeze(ops.round(iy).detach(), 0))
        out = _sample(input, *nearest, ones_like(nearest[0]))
    else:
        x0, y0 = ops.floor(ix).detach(), ops.floor(iy).detach()
        wx, wy = ix - x0, iy - y0
        xs = ops.stack([x0, x0 + 1, x0, x0 + 1])
        ys = ops.stack([y0, y0, y0 + 1, y0 + 1])
        weights = ops.stack([(1 - wx) * (1 - wy), wx * (1 - wy), (1 - wx) * wy, wx * wy])
        out = _sample(input, xs, ys, weights)
    return ops.reshape(out, (n, c, ho, wo))


def _check_grid(input, grid):
    if input.shape[0:1] != grid.shape[0:1]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    if input.ndim != 4 or grid.ndim != 4:
        raise NotImplementedError(f"grid_sample: rlpipe samples 4-D inputs with 4-D grids only, got input with sizes "
                                  f"{list(input.shape)} and grid with sizes {list(grid.shape)}")
    for d in (2, 3):
        if input.shape[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {d} being empty")
    if grid.dtype is not input.dtype:
        names = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}
        raise RuntimeError(f"expected scalar type {names.get(input.dtype.name, input.dtype.name)} but found "
                           f"{names.get(grid.dtype.name, grid.dtype.name)}")
    _require_float(input, "grid_sampler_2d_cpu_kernel_impl")
