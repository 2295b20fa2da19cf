# ruff: noqa: F401 - this module re-exports the public API
"""rlpipe: reinforcement-learning data pipelines on a small autograd tensor core.

The core mirrors PyTorch's API: ``rlpipe.tensor``, ``rlpipe.zeros``, ``Tensor`` methods,
``rlpipe.autograd`` and the grad modes, on a NumPy (CPU) or CuPy (GPU) backend.
"""
import builtins as _builtins  # the dtypes below shadow int and bool
import os as _os

from ._dtypes import (dtype, bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
                      half, float, double, short, int, long, get_default_dtype, set_default_dtype,
                      promote_types, finfo, iinfo)
from ._device import device, set_default_device, get_default_device
from ._tensor import Tensor, Size, UntypedStorage
from ._memory_format import memory_format, contiguous_format, channels_last, channels_last_3d, preserve_format
# the functional API, from the modules that define each op (max, sum, abs... shadow the builtins on
# purpose, as torch's do)
from .primitives.elementwise import (add, sub, mul, div, true_divide, divide, floor_divide, remainder, pow, neg,
                                     negative, abs, absolute, sign, reciprocal, exp, expm1, log, log1p, log2, log10,
                                     sqrt, rsqrt, square, sin, cos, erf, floor, ceil, trunc, fix, round, clamp, clip,
                                     clamp_min, clamp_max, maximum, minimum, where, lerp, nan_to_num, erfc, frac,
                                     copysign, logaddexp)
from .primitives.comparison import (eq, ne, lt, le, gt, ge, greater, greater_equal, less, less_equal, not_equal,
                                    logical_and, logical_or, logical_xor, logical_not, bitwise_and, bitwise_or,
                                    bitwise_xor, bitwise_not, isnan, isinf, isfinite, signbit, isclose, allclose,
                                    equal, isposinf, isneginf, isreal)
from .primitives.activations import (tanh, sigmoid, relu, leaky_relu, gelu, softplus, softmax, log_softmax)
from .primitives.reductions import (sum, nansum, nanmean, diff, mean, prod, max, min, amax, amin, argmax, argmin,
                                    var, std, var_mean, std_mean, logsumexp, norm, all, any, count_nonzero, cumsum,
                                    cumprod, cummax, cummin, quantile)
from .primitives.sorting import (sort, argsort, msort, topk)
from .primitives.shape import (reshape, flatten, unflatten, squeeze, unsqueeze, permute, transpose, swapaxes,
                               swapdims, t, movedim, moveaxis, broadcast_to, broadcast_tensors, narrow, select, clone,
                               cat, concat, concatenate, stack, hstack, vstack, split, chunk, tensor_split, unbind,
                               flip, roll, fliplr, flipud, rot90, tile, atleast_1d, atleast_2d, atleast_3d, tril,
                               triu, diagonal, meshgrid)
from .primitives.indexing import (one_hot, gather, take_along_dim, scatter, scatter_add, index_select, masked_fill,
                                  masked_select, nonzero, unique, index_add, repeat_interleave)
from .primitives.linalg import (matmul, mm, mv, bmm, dot, outer, cross, svd, diag, diag_embed, trace, einsum)
from .primitives.special import (lgamma, digamma, atanh, arctanh, logit, asin, acos, atan, tan, sinh, cosh, arcsin,
                                 arccos, arctan)
from .primitives.decompositions import (cholesky, inverse, det, slogdet, logdet, triangular_solve, qr)
from .primitives.matrix_functions import (cholesky_solve, cholesky_inverse, pinverse, matrix_power, matrix_exp,
                                          solve, symeig, eig, legacy_lstsq as lstsq,
                                          legacy_matrix_rank as matrix_rank)
from .primitives.lu import (lu, lu_unpack, lu_solve)
from .primitives.pointwise import (atan2, arctan2, hypot, fmod, xlogy, fmax, fmin, sinc, exp2, asinh, acosh, arcsinh,
                                   arccosh, erfinv, float_power, logaddexp2, deg2rad, rad2deg, heaviside, positive,
                                   addcmul, addcdiv, subtract, multiply, sgn, rsub, ldexp, frexp, gcd, lcm, nextafter,
                                   result_type, can_cast, bitwise_left_shift, bitwise_right_shift, angle)
from .primitives.products import (addmm, addmv, addr, baddbmm, addbmm, kron, inner, vdot, block_diag, cov, corrcoef,
                                  cdist, pdist, tensordot, ger, vander, chain_matmul)
from .primitives.searching import (searchsorted, bucketize, bincount, histc, median, nanmedian, kthvalue, mode, aminmax,
                                   unique_consecutive, argwhere, isin, nanquantile, histogram)
from .primitives.index_ops import (scatter_reduce, take, index_copy, index_fill, index_put, put, masked_scatter,
                                   index_reduce, tril_indices, triu_indices, unravel_index, diagonal_scatter,
                                   select_scatter, slice_scatter)
from .primitives.splits import (hsplit, vsplit, dsplit, ravel, column_stack, cartesian_prod, combinations,
                                broadcast_shapes, dstack, row_stack, diagflat, split_with_sizes, unsafe_split,
                                unsafe_chunk, adjoint)
from .primitives.scans import logcumsumexp, trapezoid, trapz, cumulative_trapezoid, dist, gradient
from .primitives.gamma import polygamma, mvlgamma
from ._creation import (tensor, as_tensor, from_numpy, from_dlpack, zeros, ones, empty, empty_strided, full, zeros_like,
                        ones_like, empty_like, full_like, arange, linspace, logspace, eye)
from ._creation import (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor,
                        CharTensor, ByteTensor, BoolTensor)  # torch's legacy constructors
from .random import (Generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state, rand, randn,
                     randint, randperm, rand_like, randn_like, randint_like, normal, bernoulli, multinomial,
                     default_generator)
from .autograd import (no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
                       is_inference_mode_enabled)
from . import autograd, cuda, accelerator, backends, compiler
from .backends import cpu as _cpu_backend
from . import linalg
from . import __future__  # torch.__future__'s switches for module conversions
from . import return_types
from . import special  # torch.special
from .serialization import save, load
from . import nn, optim, distributions  # as torch exposes torch.nn, torch.optim and torch.distributions
from . import func
from .utils import data as _utils_data  # noqa: F401 - torch.utils.data is there after a bare import torch
from .autograd import functional as _autograd_functional  # noqa: F401 - so is torch.autograd.functional
from .func import vmap
from .nn._compile import compile  # noqa: A001 - torch.compile's name, shadowing the builtin as torch does
from .nn._torch_ops import (conv1d, conv2d, conv_transpose1d, conv_transpose2d, max_pool1d, max_pool1d_with_indices,
                           max_pool2d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d, pairwise_distance,
                           rms_norm, alpha_dropout, feature_alpha_dropout, pixel_shuffle, pixel_unshuffle,
                           channel_shuffle, native_channel_shuffle, group_norm, instance_norm, grid_sampler,
                           affine_grid_generator, conv3d, max_pool3d)
from . import tensordict, testing, postprocs, data
from .tensordict import TensorDict
from ._utils import timeit, logger, compile_with_warmup  # noqa: F401 - torchrl's top-level helpers (rlpipe is also torchrl's root)

from math import pi, e, inf, nan  # torch's constants, the same Python floats

Tensor.__module__ = "rlpipe"  # prints as <class 'rlpipe.Tensor'>

__version__ = "0.1.0"


def is_tensor(obj):
    """True when ``obj`` is an rlpipe Tensor (a Parameter included)."""
    return isinstance(obj, Tensor)


def numel(input):
    """The number of elements of ``input``."""
    return input.numel()


def is_floating_point(input):
    """True when ``input`` has a float dtype."""
    return input.is_floating_point()


def _inplace_function(name):
    """``torch.<name>(input, ...)``, which is ``input.<name>(...)``: the op writes into ``input`` and returns it."""
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``input.{name}(...)``: writes the result into ``input`` and returns it."
    return function


# torch's in-place ops as functions (``torch.sin_(x)``, ``torch.relu_(x)``), one per in-place Tensor method
for _name in """abs_ acos_ asin_ atan_ atanh_ ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ detach_ erf_ erfc_
exp_ expm1_ fill_ floor_ frac_ log1p_ log_ logit_ nan_to_num_ neg_ reciprocal_ relu_ round_ rsqrt_ sigmoid_ sin_
sinh_ sqrt_ tan_ tanh_ trunc_ zero_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asinh_ deg2rad_
exp2_ index_put_ rad2deg_ sinc_ xlogy_ fix_ log10_ log2_ negative_ square_ gcd_ lcm_ ldexp_""".split():
    globals()[_name] = _inplace_function(_name)
del _name

# torch's deprecated ``has_*`` flags, still read by older scripts (``if torch.has_cuda: ...``)
_DEPRECATED_FLAGS = {"has_cuda": ("rlpipe.cuda.is_available", cuda.is_available),
                     "has_cudnn": ("rlpipe.backends.cudnn.is_available", backends.cudnn.is_available),
                     "has_mps": ("rlpipe.backends.mps.is_built", backends.mps.is_built)}


def __getattr__(name):
    """torch's deprecated module flags (``has_cuda``...): the answer of their replacement, with torch's warning."""
    if name in _DEPRECATED_FLAGS:
        replacement, answer = _DEPRECATED_FLAGS[name]
        import warnings
        warnings.warn(f"'{name}' is deprecated, please use '{replacement}()'", UserWarning, stacklevel=2)
        return answer()
    raise AttributeError(f"module 'rlpipe' has no attribute '{name}'")

_MATMUL_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """Records torch's float32 matmul precision setting ("highest", "high" or "medium"). rlpipe's
    backends always multiply float32 at full precision, so the setting changes no result."""
    if not isinstance(precision, str):
        raise TypeError(f"set_float32_matmul_precision: precision must be a str, got {type(precision).__name__}")
    if precision not in _MATMUL_PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: precision must be one of {_MATMUL_PRECISIONS}, "
                         f"got {precision!r}")
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    """The value last given to ``set_float32_matmul_precision`` ("highest" by default)."""
    return _matmul_precision[0]


_num_threads = [None]  # what set_num_threads was given, where NumPy's BLAS cannot be reached


def set_num_threads(n):
    """Sets the number of threads the CPU backend's matrix products use (NumPy's bundled OpenBLAS;
    with another BLAS the value is only recorded, for ``get_num_threads``)."""
    if isinstance(n, _builtins.bool) or not isinstance(n, _builtins.int):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n}")
    _num_threads[0] = n
    _cpu_backend.set_blas_threads(n)


def get_num_threads():
    """The number of threads the CPU backend's matrix products use."""
    threads = _cpu_backend.blas_threads()
    if threads is not None:
        return threads
    return _num_threads[0] or _os.cpu_count() or 1
