# ruff: noqa: F401 - this module re-exports the public API
"""rlpipe: reinforcement-learning data pipelines on a small autograd tensor core.

The core mirrors PyTorch's API: ``rlpipe.tensor``, ``rlpipe.zeros``, ``Tensor`` methods,
``rlpipe.autograd`` and the grad modes, on a NumPy (CPU) or CuPy (GPU) backend.
"""
from ._dtypes import (dtype, bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
                      half, float, double, short, int, long, get_default_dtype, set_default_dtype,
                      promote_types, finfo, iinfo)
from ._device import device, set_default_device, get_default_device
from ._tensor import Tensor, Size, UntypedStorage
from . import _ops
from ._ops import *  # noqa: F401,F403 - the functional API (add, sum, cat, where, ...)
from ._ops import max, min, sum, all, any, abs, round, pow  # shadowing builtins on purpose, as torch does
from ._creation import (tensor, as_tensor, from_numpy, from_dlpack, zeros, ones, empty, empty_strided, full, zeros_like,
                        ones_like, empty_like, full_like, arange, linspace, logspace, eye)
from ._creation import (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor,
                        CharTensor, ByteTensor, BoolTensor)  # torch's legacy constructors
from .random import (Generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state, rand, randn,
                     randint, randperm, rand_like, randn_like, randint_like, normal, bernoulli, multinomial,
                     default_generator)
from .autograd import (no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
                       is_inference_mode_enabled)
from . import autograd, cuda, backends
from . import __future__  # torch.__future__'s switches for module conversions
from . import return_types
from .serialization import save, load
from . import nn, optim, distributions  # as torch exposes torch.nn, torch.optim and torch.distributions
from .nn._compile import compile  # noqa: A001 - torch.compile's name, shadowing the builtin as torch does
from . import tensordict, testing, postprocs, data
from .tensordict import TensorDict

Tensor.__module__ = "rlpipe"  # prints as <class 'rlpipe.Tensor'>

__version__ = "0.1.0"


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.is_floating_point()
