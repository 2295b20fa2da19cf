"""``rlpipe.nn.init``: torch.nn.init's initializers. Each fills its tensor in place without
recording a graph and returns it; random ones draw from ``generator`` (the default one when None).
"""
import math
import warnings

from .. import primitives as P
from .. import primitives as ops
from .._creation import arange, eye as _identity
from .._tensor import wrap
from ..autograd import no_grad
from ..random import randn, randperm

__all__ = """calculate_gain uniform_ normal_ trunc_normal_ constant_ ones_ zeros_ eye_ dirac_ xavier_uniform_
xavier_normal_ kaiming_uniform_ kaiming_normal_ orthogonal_ sparse_""".split()

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The factor torch recommends scaling a layer's initial weights by for this nonlinearity."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out): dims 1 and 0 times the receptive field (the product of the dims after them)."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills ``tensor`` with samples uniform in [a, b), without recording a graph; returns it."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills ``tensor`` with normal samples of ``mean`` and ``std``, without recording a graph; returns it."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) values restricted to [a, b], by inverting the normal CDF of uniform draws."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    with no_grad():
        lo, hi = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        tensor.copy_(P.Erfinv.apply(tensor))
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
        return tensor


def constant_(tensor, val):
    """Fills ``tensor`` with ``val``, without recording a graph; returns it."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    """Fills ``tensor`` with 1, without recording a graph; returns it."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fills ``tensor`` with 0, without recording a graph; returns it."""
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    """The identity matrix (a 2-D tensor only)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(_identity(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor, groups=1):
    """The identity of a 3-, 4- or 5-D convolution weight: a 1 at each kernel's centre where the
    output channel (within its group) equals the input channel."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    centre = tuple(s // 2 for s in sizes[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, sizes[1])):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def _empty_no_op(tensor):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al., 2015); ``a`` is leaky_relu's negative slope."""
    if _empty_no_op(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if _empty_no_op(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (dims after the first flattened), from the QR factorization of a
    normal matrix with the signs of R's diagonal folded into Q so that Q is uniformly distributed."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    dtype = tensor.dtype if tensor.dtype.itemsize >= 4 else None  # QR needs single or double precision
    with no_grad():
        flat = randn(rows, cols, dtype=dtype, device=tensor.device, generator=generator)
        if rows < cols:
            flat = flat.t()
        q, r = _reduced_qr(flat)
        diagonal = arange(min(rows, cols), device=r.device)
        q = q * ops.sign(r[diagonal, diagonal])
        if rows < cols:
            q = q.t()
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """N(0, std^2) values with a ``sparsity`` fraction of each column set to zero."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros_per_column = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for c in range(cols):
            tensor[randperm(rows, generator=generator, device=tensor.device)[:zeros_per_column], c] = 0
    return tensor


def _reduced_qr(a):
    """The reduced QR factorization of a 2-D tensor, by its backend's linalg (not recorded on the graph)."""
    q, r = a._device._backend.xp.linalg.qr(a.detach()._data)
    return wrap(q, a._device), wrap(r, a._device)


def _deprecated(method):
    """torch's old name of ``method`` (without the trailing underscore): the same call, with a FutureWarning."""
    new_name = method.__name__

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{new_name[:-1]}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning,
                      stacklevel=2)
        return method(*args, **kwargs)
    deprecated_init.__name__ = new_name[:-1]
    deprecated_init.__doc__ = f"Deprecated (as in torch): ``{new_name}``, with a FutureWarning."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
