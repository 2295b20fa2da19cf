"""Random numbers: ``Generator``, ``manual_seed`` and the sampling functions.

Each device has a default generator. The streams differ from PyTorch's (rlpipe draws with
NumPy's PCG64 on the CPU and CuPy's generator on a GPU), so the same seed gives the same
numbers run after run, but not the numbers PyTorch would give.
"""
import builtins

import numpy as np

from . import _dtypes
from ._creation import _size, _device, create_into, laid_out, like_order
from ._device import CPU, resolve
from ._dispatch import handle_torch_function, has_torch_function
from ._tensor import Tensor, wrap

DEFAULT_SEED = 67280421310721  # PyTorch's initial seed for its default CPU generator


class Generator:
    """A seeded random stream for one device."""

    def __init__(self, device="cpu"):
        self.device = resolve(device)
        self._seed = DEFAULT_SEED
        self._state = self.device._backend.RandomState(self._seed, self.device.index)

    def manual_seed(self, seed):
        """Restarts this generator's stream from ``seed`` (negative seeds wrap modulo 2**64, as in torch); returns the
        generator."""
        seed = builtins.int(seed)
        if seed < 0:
            seed += 1 << 64
        if not 0 <= seed < 1 << 64:
            raise RuntimeError(f"Overflow when unpacking long: seed must be in [-2**63, 2**64), got {seed}")
        self._seed = seed
        self._state = self.device._backend.RandomState(seed, self.device.index)
        return self

    def seed(self):
        """Reseeds from a fresh random 63-bit seed and returns it."""
        import secrets
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def initial_seed(self):
        """The seed this generator's stream last started from."""
        return self._seed

    def get_state(self):
        """The stream's state (for ``set_state``); its format is the backend's, not torch's ByteTensor."""
        return self._state.get_state()

    def set_state(self, state):
        """Restores a state from ``get_state``; returns the generator."""
        self._state.set_state(state)
        return self

    def __repr__(self):
        return f"<rlpipe.Generator object (device={self.device})>"


default_generator = Generator("cpu")
_cuda_generators = {}
_cuda_seed = [None]


def _generator_for(dev, generator):
    if generator is not None:
        if generator.device is not dev:
            raise RuntimeError(f"Expected a '{dev.type}' device type for generator but found '{generator.device.type}'")
        return generator
    if dev is CPU:
        return default_generator
    gen = _cuda_generators.get(dev.index)
    if gen is None:
        gen = _cuda_generators[dev.index] = Generator(dev)
        if _cuda_seed[0] is not None:
            gen.manual_seed(_cuda_seed[0])
    return gen


def manual_seed(seed):
    """Seeds the default generator of every device (GPUs included, now or when first used)."""
    default_generator.manual_seed(seed)
    _cuda_seed[0] = builtins.int(seed)
    for gen in _cuda_generators.values():
        gen.manual_seed(seed)
    return default_generator


def seed():
    """Reseeds the default CPU generator from a fresh random seed and returns it."""
    return default_generator.seed()


def initial_seed():
    """The seed the default CPU generator last started from."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default CPU generator's state (backend format, not torch's ByteTensor)."""
    return default_generator.get_state()


def set_rng_state(state):
    """Restores the default CPU generator's state from ``get_rng_state``."""
    default_generator.set_state(state)


def _float_dtype(dtype):
    dt = _dtypes.get_default_dtype() if dtype is None else _dtypes.as_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"expected a floating point dtype for random floats, got {dt}")
    return dt


# rlpipe.func.vmap puts a function here while a vmapped function runs: it decides whether a draw is
# allowed and whether it differs across the batch (its ``randomness``), calling _plain_draw for the numbers
vmap_draw_hook = [None]


def _draw(kind, size, dtype, device, generator, requires_grad, **params):
    if vmap_draw_hook[0] is not None:
        return vmap_draw_hook[0](_plain_draw, kind, size, dtype, device, generator, requires_grad, params)
    return _plain_draw(kind, size, dtype, device, generator, requires_grad, params)


def _plain_draw(kind, size, dtype, device, generator, requires_grad, params):
    dev = _device(device)
    state = _generator_for(dev, generator)._state
    if kind == "integers":  # (its arguments come in another order)
        t = wrap(state.integers(params["low"], params["high"], size, dtype.np), dev)
    else:
        t = wrap(getattr(state, kind)(size, dtype.np, **params), dev)
    return t.requires_grad_(True) if requires_grad else t


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, out=None):
    """Uniform samples in [0, 1)."""
    if out is not None:
        return create_into(out, rand, size, dtype, generator=generator)
    return _draw("uniform", _size(size), _float_dtype(dtype), device, generator, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, out=None):
    """Standard normal samples."""
    if out is not None:
        return create_into(out, randn, size, dtype, generator=generator)
    return _draw("normal", _size(size), _float_dtype(dtype), device, generator, requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint(): missing the size argument, e.g. randint(10, (3,))")
        low, high, size = 0, low, high
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dt = _dtypes.int64 if dtype is None else _dtypes.as_dtype(dtype)
    return _draw("integers", _size((size,) if isinstance(size, int) else (size,)), dt, device, generator, requires_grad,
                 low=low, high=high)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got {n}")
    dev = _device(device)
    out = wrap(_generator_for(dev, generator)._state.permutation(n), dev)
    return out if dtype is None else out.to(dtype)


def randint_like(input, low=0, high=None, *, dtype=None, device=None):
    """Random integers in [low, high) (``randint_like(x, high)``: [0, high)) with input's shape, dtype and device unless
    given."""
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype, device=device or input.device)


def _drawn_like(draw, input, dtype, device, requires_grad, order):
    """``draw``'s samples with input's shape, dtype and device unless given, laid out in ``order``."""
    return laid_out(order, input.shape, lambda shape: draw(shape, dtype=dtype or input.dtype,
                                                           device=device or input.device), requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Uniform samples in [0, 1) with input's shape, dtype and device unless given, laid out as ``clone``
    lays it out."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(rand_like, (input,), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad, "memory_format": memory_format})
    return _drawn_like(rand, input, dtype, device, requires_grad, like_order(input, memory_format, "rand_like"))


def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Standard normal samples with input's shape, dtype and device unless given, laid out as ``clone`` lays it out."""
    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(randn_like, (input,), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad, "memory_format": memory_format})
    return _drawn_like(randn, input, dtype, device, requires_grad, like_order(input, memory_format, "randn_like"))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Normal samples: from tensors of means and/or stds (broadcast), or floats with ``size``."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        like = mean if isinstance(mean, Tensor) else std
        from rlpipe.primitives import broadcast_tensors
        shape = tuple(broadcast_tensors(mean, std)[0].shape) if isinstance(mean, Tensor) and \
            isinstance(std, Tensor) else tuple(like.shape)
        if isinstance(std, Tensor) and bool((std < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        return _draw("normal", shape, like.dtype, like.device, generator, False) * std + mean
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if size is None:
        raise TypeError("normal(): with float mean and std, size is required")
    return _draw("normal", _size((size,) if isinstance(size, int) else (size,)), _float_dtype(dtype), device,
                 generator, requires_grad, mean=float(mean), std=float(std))


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p``), else 0, in input's dtype."""
    probs = input if p is None else p
    u = _draw("uniform", tuple(input.shape), input.dtype if input.is_floating_point() else _dtypes.float32,
              input.device, generator, False)
    return (u < probs).to(input.dtype)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Category indices drawn from each row of non-negative weights: by inverse CDF with
    replacement, by Gumbel top-k without."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim}")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    xp = input._device._backend.xp
    w = input.detach()._data.reshape(-1, n).astype("float64")
    if not bool(xp.isfinite(w).all()) or bool((w < 0).any()) or bool((w.sum(-1) <= 0).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0, or a row sums to 0")
    u = _draw("uniform", (w.shape[0], num_samples if replacement else n), _dtypes.float64, input.device,
              generator, False)._data
    if replacement:
        cdf = xp.cumsum(w / w.sum(-1, keepdims=True), axis=-1)
        idx = xp.minimum((cdf[:, None, :] <= u[:, :, None]).sum(-1), n - 1)
    else:
        with_log = xp.where(w > 0, xp.log(xp.where(w > 0, w, 1)), -xp.inf)
        keys = with_log - xp.log(-xp.log(xp.clip(u, 1e-300, 1.0)))
        idx = xp.argsort(-keys, axis=-1, kind="stable")[:, :num_samples]
    out = idx.astype("int64").reshape(tuple(input.shape[:-1]) + (num_samples,))
    return wrap(out, input.device)


# in-place sampling methods, used by initializers
def _fill_with(self, kind, generator, **params):
    sample = _draw(kind, tuple(self.shape), self.dtype, self.device, generator, False, **params)
    return self.copy_(sample)


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Fills the tensor with samples uniform in [a, b), in place."""
    return _fill_with(self, "uniform", generator, low=float(a), high=float(b))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fills the tensor with normal samples of the given ``mean`` and ``std``, in place."""
    return _fill_with(self, "normal", generator, mean=float(mean), std=float(std))


# torch's bound of random_() with no arguments: floats hold every integer up to 2**mantissa exactly
_MANTISSA_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _unbounded_random_high(dtype):
    """The exclusive upper bound of ``random_()`` with no arguments for ``dtype``, as torch draws it."""
    if dtype.name in _MANTISSA_BITS:
        return 2 ** _MANTISSA_BITS[dtype.name] + 1
    if dtype.name == "bool":
        return 2
    return int(np.iinfo(dtype.name).max)


def random_(self, low=None, high=None, *, generator=None):
    """Fills the tensor with integers uniform in [low, high) (``random_(high)``: [0, high); no
    argument: [0, the dtype's largest exactly held integer]), in place."""
    if low is None and high is None:
        low, high = 0, _unbounded_random_high(self.dtype)
    elif high is None:
        low, high = 0, low
    values = randint(low, high, tuple(self.shape), generator=generator, device=self.device)
    return self.copy_(values)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fills the tensor with 1 with probability ``p`` (a number or a tensor), else 0, in place."""
    u = _draw("uniform", tuple(self.shape), _dtypes.float64, self.device, generator, False)
    return self.copy_(u < p)


def exponential_(self, lambd=1.0, *, generator=None):
    """Fills the tensor with exponential samples of rate ``lambd`` (inverse CDF of uniform draws), in place."""
    u = _draw("uniform", tuple(self.shape), self.dtype, self.device, generator, False)
    return self.copy_(-(1 - u).log() / lambd)


Tensor.uniform_ = uniform_
Tensor.normal_ = normal_
Tensor.random_ = random_
Tensor.bernoulli_ = bernoulli_
Tensor.exponential_ = exponential_


def _bernoulli_method(self, p=None, *, generator=None):
    """1 with probability given by this tensor's values (or ``p``), else 0, in this tensor's dtype."""
    return bernoulli(self, p, generator=generator)


Tensor.bernoulli = _bernoulli_method
Tensor.multinomial = multinomial
