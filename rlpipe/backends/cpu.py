"""CPU backend: NumPy arrays and the reference versions of the kernels.

Every backend module exposes the same names: ``xp`` (the array namespace), the activation
kernels with their backward passes, the optimizer update steps (in place on the arrays),
``scatter_add`` (unbuffered ``a[index] += values``), random generators, and device helpers.
The CUDA backend mirrors this file with fused CuPy kernels; this file is its reference.
"""
import numpy as np

try:  # bfloat16 for NumPy comes from ml_dtypes
    import ml_dtypes
    bfloat16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    bfloat16 = None

xp = np
name = "cpu"
ndarray = np.ndarray


def is_available():
    return True


def device_count():
    return 1


def synchronize(index=None):
    pass


def asarray(obj, dtype=None, index=None):
    """An array on this backend from host data (array, list, scalar or CPU array)."""
    if hasattr(obj, "__cuda_array_interface__"):  # a CuPy array coming back to the host
        obj = obj.get()
    return np.asarray(obj, dtype=dtype)


def full(shape, value, dtype, index=None):
    return np.full(shape, value, dtype=dtype)


def to_host(a):
    return a


def supports(dtype):
    return True


def quietly():
    """A context in which division by zero and invalid values give inf/nan without warnings,
    as on a GPU and in torch (used where such values are expected or masked out)."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


def may_share_memory(a, b):
    return np.may_share_memory(a, b)


def scatter_add(target, index, values):
    """target[index] += values, adding once per occurrence of a repeated index."""
    np.add.at(target, index, values)


def erf(x):
    from scipy.special import erf as _erf  # SciPy's erf is exact to float64 precision
    return _erf(x).astype(x.dtype, copy=False)


# ---- activations and their backward passes -------------------------------------------

def relu(x):
    return np.maximum(x, 0)  # a Python 0 keeps x's dtype (NumPy 2's weak scalars)


def relu_backward(x, grad):
    return grad * ~(x <= 0)  # nan passes the gradient, as in torch


def leaky_relu(x, slope):
    return np.where(x > 0, x, x * x.dtype.type(slope))


def leaky_relu_backward(x, grad, slope):
    return np.where(x > 0, grad, grad * grad.dtype.type(slope))


def sigmoid(x):
    # exp of a non-positive number never overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def sigmoid_backward(y, grad):
    return grad * y * (1 - y)


def tanh(x):
    return np.tanh(x)


def tanh_backward(y, grad):
    return grad * (1 - y * y)


_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715
_INV_SQRT_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


def gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(x.dtype.type(_SQRT_2_OVER_PI) * (x + x.dtype.type(_GELU_C) * x ** 3)))
    return 0.5 * x * (1 + erf(x * x.dtype.type(_INV_SQRT_2)))


def gelu_backward(x, grad, approximate="none"):
    if approximate == "tanh":
        k = x.dtype.type(_SQRT_2_OVER_PI)
        c = x.dtype.type(_GELU_C)
        t = np.tanh(k * (x + c * x ** 3))
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x))
    cdf = 0.5 * (1 + erf(x * x.dtype.type(_INV_SQRT_2)))
    pdf = x.dtype.type(_INV_SQRT_2PI) * np.exp(-0.5 * x * x)
    return grad * (cdf + x * pdf)


def softplus(x, beta=1.0, threshold=20.0):
    bx = x * x.dtype.type(beta)
    # log1p(exp(bx)) computed without overflow; linear above the threshold, as torch does
    soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / x.dtype.type(beta)
    return np.where(bx > threshold, x, soft)


def softplus_backward(x, grad, beta=1.0, threshold=20.0):
    bx = x * x.dtype.type(beta)
    return np.where(bx > threshold, grad, grad * sigmoid(bx))


# ---- optimizer steps, in place -----------------------------------------------------------

def sgd_step(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, nesterov,
             maximize, first_step):
    """One torch.optim.SGD update of ``param`` (and ``momentum_buffer`` when momentum > 0)."""
    g = -grad if maximize else grad
    if weight_decay:
        g = g + weight_decay * param
    if momentum:
        if first_step:
            momentum_buffer[...] = g
        else:
            momentum_buffer *= momentum
            momentum_buffer += (1 - dampening) * g
        g = g + momentum * momentum_buffer if nesterov else momentum_buffer
    param -= lr * g


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, amsgrad, maximize, decoupled):
    """One torch.optim.Adam (``decoupled=False``) or AdamW (``decoupled=True``) update.

    ``step`` is the step count after this update (1 on the first call).
    """
    g = -grad if maximize else grad
    if weight_decay:
        if decoupled:
            param *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * param
    exp_avg *= beta1
    exp_avg += (1 - beta1) * g
    exp_avg_sq *= beta2
    exp_avg_sq += (1 - beta2) * g * g
    bias1 = 1 - beta1 ** step
    bias2_sqrt = (1 - beta2 ** step) ** 0.5
    second = exp_avg_sq
    if amsgrad:
        np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        second = max_exp_avg_sq
    denom = np.sqrt(second) / bias2_sqrt + eps
    param -= (lr / bias1) * exp_avg / denom


def rmsprop_step(param, grad, square_avg, momentum_buffer, grad_avg, lr, alpha, eps, weight_decay,
                 momentum, centered, maximize):
    """One torch.optim.RMSprop update (buffers given as None when unused)."""
    g = -grad if maximize else grad
    if weight_decay:
        g = g + weight_decay * param
    square_avg *= alpha
    square_avg += (1 - alpha) * g * g
    if centered:
        grad_avg *= alpha
        grad_avg += (1 - alpha) * g
        avg = np.sqrt(square_avg - grad_avg * grad_avg) + eps
    else:
        avg = np.sqrt(square_avg) + eps
    if momentum > 0:
        momentum_buffer *= momentum
        momentum_buffer += g / avg
        param -= lr * momentum_buffer
    else:
        param -= lr * g / avg


# ---- random numbers -----------------------------------------------------------------

class RandomState:
    """The bit generator behind an ``rlpipe.Generator`` on the CPU."""

    def __init__(self, seed, index=None):
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def uniform(self, shape, dtype, low=0.0, high=1.0):
        out = self.rng.random(shape, dtype=np.float64 if dtype != np.float32 else np.float32)
        if low != 0.0 or high != 1.0:
            return (out * (high - low) + low).astype(dtype, copy=False)
        out = out.astype(dtype, copy=False)
        if out.dtype.itemsize < 4:  # rounding to a half type can reach 1.0; keep [0, 1)
            np.minimum(out, out.dtype.type(1 - 2.0 ** -(ml_dtypes.finfo(out.dtype).nmant + 1)), out=out)
        return out

    def normal(self, shape, dtype, mean=0.0, std=1.0):
        out = self.rng.standard_normal(shape, dtype=np.float64 if dtype != np.float32 else np.float32)
        if mean != 0.0 or std != 1.0:
            out = out * std + mean
        return out.astype(dtype, copy=False)

    def integers(self, low, high, shape, dtype):
        return self.rng.integers(low, high, size=shape, dtype=np.int64).astype(dtype, copy=False)

    def permutation(self, n):
        return self.rng.permutation(n).astype(np.int64, copy=False)

    def get_state(self):
        return self.rng.bit_generator.state

    def set_state(self, state):
        self.rng.bit_generator.state = state
