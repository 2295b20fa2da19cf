"""CUDA backend: CuPy arrays and hand-written fused kernels.

This module offers the names of ``cpu.py``: the array namespace, device helpers, ``scatter_add``,
``index_add``, ``below``, the special functions (``erf``, ``erfinv``), the optimizer steps and the random
generator. Where an op's formula (written in the op itself, in ``rlpipe/primitives``) would take
several CuPy calls, ``fused`` maps its name to one hand-written ``cupy.ElementwiseKernel`` that
computes the same formula in one launch; each optimizer step likewise updates the parameter and
its state buffers in one launch per parameter. Kernels accept float16, float32 and float64
arrays: they load the values into ``acc_t`` (float for half and single precision, double for
double precision), compute there, and store the result in the array's own dtype. Scalar
hyperparameters travel as float64 kernel arguments and are narrowed to ``acc_t`` inside, the way
NumPy narrows a Python float that meets a float32 array. Every call runs on the device that
holds its first array.

Importing this module raises ImportError when CuPy is missing; ``backends/__init__.py``
turns that into a message saying what to install.
"""
import functools

import numpy as np

import cupy
import cupyx

from . import cpu as _cpu

xp = cupy
name = "cuda"
ndarray = cupy.ndarray
bfloat16 = None  # no bfloat16 arrays on this backend: supports() says so

# What CuPy raises when the driver, the runtime or the GPU is missing or unusable: its
# CUDARuntimeError and CUDADriverError are RuntimeErrors; a missing library is an OSError or
# an ImportError.
_CUDA_ERRORS = (RuntimeError, OSError, ImportError)


def is_available():
    """True when CuPy can see at least one GPU; False on any CUDA error."""
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except _CUDA_ERRORS:
        return False


def device_count():
    """How many GPUs CuPy can see (0 when CUDA cannot start)."""
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except _CUDA_ERRORS:
        return 0


def current_device():
    """The index of the GPU that new arrays and kernels use by default."""
    return cupy.cuda.runtime.getDevice()


def set_device(index):
    cupy.cuda.runtime.setDevice(index)


def synchronize(index=None):
    """Wait until every queued kernel on GPU ``index`` (the current one by default) is done."""
    cupy.cuda.Device(index).synchronize()


def asarray(obj, dtype=None, index=None):
    """An array on GPU ``index`` (the current one by default) from host data or a CuPy array.

    A CuPy array that lives on another GPU is copied over; one already in place comes back
    as it is (or cast when ``dtype`` asks for another type).
    """
    device = cupy.cuda.Device(index)
    with device:
        if isinstance(obj, cupy.ndarray) and obj.device.id != device.id:
            obj = obj.copy()  # ndarray.copy() allocates on the current device
        return cupy.asarray(obj, dtype=dtype)


def full(shape, value, dtype, index=None):
    """An array of ``shape`` filled with ``value`` on GPU ``index`` (the current one by default)."""
    with cupy.cuda.Device(index):
        return cupy.full(shape, value, dtype=dtype)


def to_host(a):
    """A NumPy copy of ``a`` (waits for the GPU)."""
    return cupy.asnumpy(a)


def supports(dtype):
    """Whether arrays of ``dtype`` can live on this backend: every dtype but bfloat16."""
    try:
        return np.dtype(dtype).name != "bfloat16"
    except TypeError:
        return False


def may_share_memory(a, b):
    if isinstance(a, cupy.ndarray) and isinstance(b, cupy.ndarray):
        return bool(cupy.may_share_memory(a, b))
    return False  # a host array never shares memory with a device one


def writable(a):
    """Whether ``a`` may be written in place. CuPy arrays carry no writeable flag; the case to refuse
    is a broadcast view, where a zero stride puts several elements on one memory location."""
    return not any(stride == 0 and size > 1 for stride, size in zip(a.strides, a.shape))


# the dtypes cupyx.scatter_add takes; other integer and bool data is added as uint64
_SCATTER_ADD_DTYPES = frozenset(np.dtype(t) for t in (np.int32, np.uint32, np.uint64, np.float16, np.float32,
                                                      np.float64))


def below(values, n):
    """Whether every element of a non-empty integer (or bool) array lies in [0, n): seen as
    unsigned, negatives are above any n, so one max (one synchronization) decides."""
    return int(values.view(_cpu.UNSIGNED[values.dtype.itemsize]).max()) < n


def index_add(target, dim, positions, values):
    """``scatter_add`` of ``values`` at ``positions`` (1-d, int64) along ``dim`` where every
    position lies in [0, target.shape[dim]); else an IndexError, nothing written (cupyx's
    scatter_add does not check: here one max decides)."""
    if positions.size and not below(positions, target.shape[dim]):
        raise IndexError("a position out of range")
    scatter_add(target, _cpu.along(positions, dim), values)


def scatter_add(target, index, values):
    """target[index] += values, adding once per occurrence of a repeated index (atomics).

    cupyx.scatter_add refuses int64 and the narrow integer types; their sums are taken in uint64,
    whose wrap-around gives the same bits as two's-complement addition in any width."""
    with target.device:
        if target.dtype in _SCATTER_ADD_DTYPES:
            cupyx.scatter_add(target, index, values)
            return
        values = cupy.asarray(values).astype(np.int64, copy=False).astype(np.uint64)
        if target.dtype == np.int64:
            cupyx.scatter_add(target.view(np.uint64), index, values)
            return
        wide = target.astype(np.int64).astype(np.uint64)
        cupyx.scatter_add(wide, index, values)
        target[...] = wide.astype(target.dtype)


# ---- kernel plumbing ----------------------------------------------------------------------

# Code every kernel shares. The ElementwiseKernel machinery declares the type placeholder T
# (a typedef) before this preamble; the templates below take their own parameter U instead.
_PREAMBLE = r"""
template <typename U> struct rlpipe_acc { typedef float type; };
template <> struct rlpipe_acc<double> { typedef double type; };

template <typename U> __device__ bool rlpipe_positive(const U v) { return v > U(0); }

// 1 / (1 + exp(-v)) that never overflows: the exponent is never positive
template <typename U> __device__ U rlpipe_sigmoid(const U v) {
    const U e = exp(-fabs(v));
    return v >= U(0) ? U(1) / (U(1) + e) : e / (U(1) + e);
}

// max(a, b) that returns NaN when either one is NaN, as numpy.maximum does
template <typename U> __device__ U rlpipe_nan_max(const U a, const U b) {
    return (a > b || a != a) ? a : b;
}
"""

# First line of every kernel body: the type the arithmetic runs in.
_ACC = "typedef rlpipe_acc<T>::type acc_t;\n"


def _elementwise(kernel_name, in_params, out_params, body):
    """An ElementwiseKernel whose body computes in ``acc_t``; compiled on first use per dtype."""
    return cupy.ElementwiseKernel(in_params, out_params, _ACC + body, "rlpipe_" + kernel_name,
                                  preamble=_PREAMBLE)


def _run(kernel, *args):
    """Launch ``kernel`` on the device of its first argument (always an array here)."""
    with args[0].device:
        return kernel(*args)


def _common(a, b):
    """``a`` and ``b`` in the dtype NumPy would compute them in."""
    if a.dtype == b.dtype:
        return a, b
    dtype = np.result_type(a.dtype, b.dtype)
    return a.astype(dtype, copy=False), b.astype(dtype, copy=False)


def _c(value):
    """A float constant as C source, precise to the last bit."""
    return "acc_t(%r)" % float(value)


_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715
_INV_SQRT_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327

# inner argument of tanh in the tanh approximation of GELU, from v
_GELU_TANH_ARG = "%s * (v + %s * v * v * v)" % (_c(_SQRT_2_OVER_PI), _c(_GELU_C))
# standard normal CDF at v, through erf
_NORMAL_CDF = "acc_t(0.5) * (acc_t(1) + erf(v * %s))" % _c(_INV_SQRT_2)


# ---- fused activations and their backward passes ------------------------------------

# grad * !(x <= 0), as the formula: NaN inputs pass the gradient, and an infinite gradient at x <= 0 gives NaN
_RELU_BACKWARD = _elementwise(
    "relu_backward", "X x, T grad", "T dx",
    "dx = (T)((acc_t)grad * (x <= X(0) ? acc_t(0) : acc_t(1)));")

_LEAKY_RELU = _elementwise(
    "leaky_relu", "T x, float64 slope", "T y",
    "const acc_t v = (acc_t)x;\n"
    "y = (T)(v > acc_t(0) ? v : v * (acc_t)slope);")

_LEAKY_RELU_BACKWARD = _elementwise(
    "leaky_relu_backward", "X x, T grad, float64 slope", "T dx",
    "const acc_t g = (acc_t)grad;\n"
    "dx = (T)(rlpipe_positive(x) ? g : g * (acc_t)slope);")

_SIGMOID = _elementwise(
    "sigmoid", "T x", "T y",
    "y = (T)rlpipe_sigmoid((acc_t)x);")

_SIGMOID_BACKWARD = _elementwise(
    "sigmoid_backward", "T y, T grad", "T dx",
    "const acc_t s = (acc_t)y;\n"
    "dx = (T)((acc_t)grad * s * (acc_t(1) - s));")

_TANH_BACKWARD = _elementwise(
    "tanh_backward", "T y, T grad", "T dx",
    "const acc_t t = (acc_t)y;\n"
    "dx = (T)((acc_t)grad * (acc_t(1) - t * t));")

_GELU = _elementwise(
    "gelu", "T x", "T y",
    "const acc_t v = (acc_t)x;\n"
    "y = (T)(acc_t(0.5) * v * (acc_t(1) + erf(v * %s)));" % _c(_INV_SQRT_2))

_GELU_TANH = _elementwise(
    "gelu_tanh", "T x", "T y",
    "const acc_t v = (acc_t)x;\n"
    "y = (T)(acc_t(0.5) * v * (acc_t(1) + tanh(%s)));" % _GELU_TANH_ARG)

_GELU_BACKWARD = _elementwise(
    "gelu_backward", "T x, T grad", "T dx",
    "const acc_t v = (acc_t)x;\n"
    "const acc_t cdf = %s;\n"
    "const acc_t pdf = %s * exp(acc_t(-0.5) * v * v);\n"
    "dx = (T)((acc_t)grad * (cdf + v * pdf));" % (_NORMAL_CDF, _c(_INV_SQRT_2PI)))

_GELU_TANH_BACKWARD = _elementwise(
    "gelu_tanh_backward", "T x, T grad", "T dx",
    "const acc_t v = (acc_t)x;\n"
    "const acc_t k = %s;\n"
    "const acc_t c = %s;\n"
    "const acc_t t = tanh(%s);\n"
    "dx = (T)((acc_t)grad * (acc_t(0.5) * (acc_t(1) + t)\n"
    "    + acc_t(0.5) * v * (acc_t(1) - t * t) * k * (acc_t(1) + acc_t(3) * c * v * v)));"
    % (_c(_SQRT_2_OVER_PI), _c(_GELU_C), _GELU_TANH_ARG))

# linear above the threshold (as torch does), else log1p(exp(beta * x)) / beta without overflow
_SOFTPLUS = _elementwise(
    "softplus", "T x, float64 beta, float64 threshold", "T y",
    "const acc_t v = (acc_t)x;\n"
    "const acc_t b = (acc_t)beta;\n"
    "const acc_t bv = v * b;\n"
    "const acc_t soft = ((bv > acc_t(0) ? bv : acc_t(0)) + log1p(exp(-fabs(bv)))) / b;\n"
    "y = (T)(bv > (acc_t)threshold ? v : soft);")

_SOFTPLUS_BACKWARD = _elementwise(
    "softplus_backward", "T x, T grad, float64 beta, float64 threshold", "T dx",
    "const acc_t bv = (acc_t)x * (acc_t)beta;\n"
    "const acc_t g = (acc_t)grad;\n"
    "dx = (T)(bv > (acc_t)threshold ? g : g * rlpipe_sigmoid(bv));")

_ERF = _elementwise(
    "erf", "T x", "T y",
    "y = (T)erf((acc_t)x);")


def erf(x):
    return _run(_ERF, x)


def erfinv(x):
    from cupyx.scipy.special import erfinv as _erfinv
    return _erfinv(x).astype(x.dtype, copy=False)


def lgamma(x):
    from cupyx.scipy.special import gammaln
    return gammaln(x).astype(x.dtype, copy=False)


def digamma(x):
    from cupyx.scipy.special import digamma as _digamma
    return _digamma(x).astype(x.dtype, copy=False)


def zeta(s, q):
    """The Hurwitz zeta function (trigamma is zeta(2, q))."""
    from cupyx.scipy.special import zeta as _zeta
    return _zeta(s, q).astype(q.dtype, copy=False)

# MultiStep's window lengths and discounted sums (rlpipe/postprocs/multistep.py), one thread per step t of
# a [rows, steps] batch: m = min(n, steps - t, 1 + first done at or after t) (the batch ends early before an
# invalid step; an invalid step itself gets 1), and the reward summed over the window in the reward's dtype,
# term by term in the order the CPU adds them (discounts[k] = gamma ** k, rounded to T as NumPy rounds it;
# each product rounded to T too: CuPy's float16 multiplies in float and would carry the extra precision).
_N_STEP_RETURNS = cupy.ElementwiseKernel(
    "raw bool done, raw bool valid, raw T reward, raw float64 discounts, int64 steps, int64 n",
    "int64 m, T total",
    "const long long t = i % steps;\n"
    "long long length = 1;\n"
    "if (valid[i]) {\n"
    "    length = n;\n"
    "    for (long long k = 0; k < n; ++k) {\n"
    "        if (done[i + k] || t + k + 1 >= steps || !valid[i + k + 1]) {\n"
    "            length = k + 1;\n"
    "            break;\n"
    "        }\n"
    "    }\n"
    "}\n"
    "T sum = T(0);\n"
    "for (long long k = 0; k < length; ++k) sum = sum + (T)(reward[i + k] * (T)discounts[k]);\n"
    "m = length;\n"
    "total = sum;",
    "rlpipe_n_step_returns")


def _n_step_returns(done, valid, reward, gamma, n):
    """(m, discounted reward sums) for [rows, steps] arrays (see ``_N_STEP_RETURNS``)."""
    with reward.device:
        discounts = cupy.asarray([float(gamma ** k) for k in range(n)], dtype=np.float64)
        m = cupy.empty(reward.shape, np.int64)
        total = cupy.empty_like(reward)
        _N_STEP_RETURNS(done, valid, reward, discounts, reward.shape[-1], n, m, total)
        return m, total


# GAE and TD(lambda) (rlpipe/objectives/value/functional.py), one thread per row of [rows, steps] arrays, running
# backwards over time: x[t] = b[t] + gamma * lmbda * (1 - done[t]) * x[t + 1], where b[t] is the TD error
# r + gamma * v'[t] - v[t] for GAE and r + gamma * v'[t] * (1 - lmbda * (1 - done[t])) for TD(lambda) (v' is zero
# where terminated; TD(lambda)'s last step counts as done: it bootstraps). Writes advantage and value_target.
_VALUE_ESTIMATE = _elementwise(
    "value_estimate",
    "raw T reward, raw T value, raw T next_value, raw bool done, raw bool terminated, float64 gamma, "
    "float64 lmbda, bool gae, int64 steps",
    "raw T advantage, raw T value_target",
    "const acc_t g = (acc_t)gamma;\n"
    "const acc_t l = (acc_t)lmbda;\n"
    "const acc_t decay = (acc_t)(gamma * lmbda);\n"
    "acc_t carry = acc_t(0);\n"
    "for (long long t = steps - 1; t >= 0; --t) {\n"
    "    const long long j = i * steps + t;\n"
    "    const acc_t next = terminated[j] ? acc_t(0) : (acc_t)next_value[j];\n"
    "    const acc_t v = (acc_t)value[j];\n"
    "    const bool goes_on = !done[j] && (gae || t + 1 < steps);\n"
    "    const acc_t tail = goes_on ? decay * carry : acc_t(0);\n"
    "    if (gae) {\n"
    "        carry = (acc_t)reward[j] + g * next - v + tail;\n"
    "        advantage[j] = (T)carry;\n"
    "        value_target[j] = (T)(carry + v);\n"
    "    } else {\n"
    "        carry = (acc_t)reward[j] + g * next * (goes_on ? acc_t(1) - l : acc_t(1)) + tail;\n"
    "        advantage[j] = (T)(carry - v);\n"
    "        value_target[j] = (T)carry;\n"
    "    }\n"
    "}")


def _value_estimate(reward, value, next_value, done, terminated, gamma, lmbda, gae):
    """(advantage, value_target) of GAE or TD(lambda) for [rows, steps] arrays (see ``_VALUE_ESTIMATE``)."""
    with reward.device:
        reward, value, next_value, done, terminated = (cupy.ascontiguousarray(a) for a in (
            reward, value, next_value, done, terminated))
        advantage = cupy.empty_like(value)
        target = cupy.empty_like(value)
        rows, steps = value.shape
        _VALUE_ESTIMATE(reward, value, next_value, done, terminated, float(gamma), float(lmbda), bool(gae), steps,
                        advantage, target, size=rows)
        return advantage, target


# The ops' formulas that run here as one kernel launch instead of several CuPy calls, by name
# (the primitives look them up); each takes the arrays, then the op's scalar parameters.
fused = {
    "relu_backward": lambda x, grad: _run(_RELU_BACKWARD, x, grad),
    "leaky_relu": lambda x, slope: _run(_LEAKY_RELU, x, float(slope)),
    "leaky_relu_backward": lambda x, grad, slope: _run(_LEAKY_RELU_BACKWARD, x, grad, float(slope)),
    "sigmoid": lambda x: _run(_SIGMOID, x),
    "sigmoid_backward": lambda y, grad: _run(_SIGMOID_BACKWARD, *_common(y, grad)),
    "tanh_backward": lambda y, grad: _run(_TANH_BACKWARD, *_common(y, grad)),
    "gelu": lambda x: _run(_GELU, x),
    "gelu_tanh": lambda x: _run(_GELU_TANH, x),
    "gelu_backward": lambda x, grad: _run(_GELU_BACKWARD, *_common(x, grad)),
    "gelu_tanh_backward": lambda x, grad: _run(_GELU_TANH_BACKWARD, *_common(x, grad)),
    "softplus": lambda x, beta, threshold: _run(_SOFTPLUS, x, float(beta), float(threshold)),
    "softplus_backward": lambda x, grad, beta, threshold: _run(_SOFTPLUS_BACKWARD, *_common(x, grad),
                                                               float(beta), float(threshold)),
    "n_step_returns": _n_step_returns,
    "value_estimate": _value_estimate,
}


# ---- optimizer steps, in place -----------------------------------------------------------
# Buffers that an option leaves unused are absent from that variant's kernel, so each optimizer
# has one kernel per set of buffers; the other options are kernel arguments.

# the gradient as the update sees it: negated to maximize, plus L2 weight decay (torch order)
_GRAD = ("acc_t g = (acc_t)grad;\n"
         "if (maximize) g = -g;\n"
         "if (weight_decay != 0.0) g = g + (acc_t)weight_decay * (acc_t)param;\n")


@functools.lru_cache(maxsize=None)
def _sgd_kernel(with_momentum):
    ins = "T grad, float64 lr, float64 weight_decay, bool maximize"
    if not with_momentum:
        return _elementwise("sgd", ins, "T param",
                            _GRAD + "param = (T)((acc_t)param - (acc_t)lr * g);")
    return _elementwise(
        "sgd_momentum",
        ins + ", float64 momentum, float64 one_minus_dampening, bool nesterov, bool first_step",
        "T param, T momentum_buffer",
        _GRAD
        + "const acc_t m = (acc_t)momentum;\n"
          "const acc_t b = first_step ? g\n"
          "    : m * (acc_t)momentum_buffer + (acc_t)one_minus_dampening * g;\n"
          "momentum_buffer = (T)b;\n"
          "const acc_t d = nesterov ? g + m * b : b;\n"
          "param = (T)((acc_t)param - (acc_t)lr * d);")


@functools.lru_cache(maxsize=None)
def _adam_kernel(amsgrad):
    outs = "T param, T exp_avg, T exp_avg_sq" + (", T max_exp_avg_sq" if amsgrad else "")
    if amsgrad:
        second = ("const acc_t second = rlpipe_nan_max((acc_t)max_exp_avg_sq, v);\n"
                  "max_exp_avg_sq = (T)second;\n")
    else:
        second = "const acc_t second = v;\n"
    return _elementwise(
        "adam_amsgrad" if amsgrad else "adam",
        "T grad, float64 weight_decay, bool decoupled, bool maximize, float64 decay,"
        " float64 beta1, float64 one_minus_beta1, float64 beta2, float64 one_minus_beta2,"
        " float64 bias2_sqrt, float64 eps, float64 step_size",
        outs,
        "acc_t g = (acc_t)grad;\n"
        "if (maximize) g = -g;\n"
        "acc_t p = (acc_t)param;\n"
        "if (weight_decay != 0.0) {\n"
        "    if (decoupled) p = p * (acc_t)decay;\n"  # AdamW: shrink the weights first
        "    else g = g + (acc_t)weight_decay * p;\n"
        "}\n"
        "const acc_t m = (acc_t)beta1 * (acc_t)exp_avg + (acc_t)one_minus_beta1 * g;\n"
        "const acc_t v = (acc_t)beta2 * (acc_t)exp_avg_sq + (acc_t)one_minus_beta2 * g * g;\n"
        "exp_avg = (T)m;\n"
        "exp_avg_sq = (T)v;\n"
        + second
        + "const acc_t denom = sqrt(second) / (acc_t)bias2_sqrt + (acc_t)eps;\n"
          "param = (T)(p - (acc_t)step_size * m / denom);")


@functools.lru_cache(maxsize=None)
def _rmsprop_kernel(centered, with_momentum):
    ins = ("T grad, float64 lr, float64 weight_decay, bool maximize, float64 alpha,"
           " float64 one_minus_alpha, float64 eps")
    outs = "T param, T square_avg"
    body = (_GRAD
            + "const acc_t sq = (acc_t)alpha * (acc_t)square_avg\n"
              "    + (acc_t)one_minus_alpha * g * g;\n"
              "square_avg = (T)sq;\n")
    if centered:
        outs += ", T grad_avg"
        body += ("const acc_t ga = (acc_t)alpha * (acc_t)grad_avg + (acc_t)one_minus_alpha * g;\n"
                 "grad_avg = (T)ga;\n"
                 "const acc_t avg = sqrt(sq - ga * ga) + (acc_t)eps;\n")
    else:
        body += "const acc_t avg = sqrt(sq) + (acc_t)eps;\n"
    if with_momentum:
        ins += ", float64 momentum"
        outs += ", T momentum_buffer"
        body += ("const acc_t b = (acc_t)momentum * (acc_t)momentum_buffer + g / avg;\n"
                 "momentum_buffer = (T)b;\n"
                 "param = (T)((acc_t)param - (acc_t)lr * b);")
    else:
        body += "param = (T)((acc_t)param - (acc_t)lr * g / avg);"
    kernel_name = ("rmsprop" + ("_centered" if centered else "")
                   + ("_momentum" if with_momentum else ""))
    return _elementwise(kernel_name, ins, outs, body)


_ADAGRAD = _elementwise(
    "adagrad",
    "T grad, float64 weight_decay, bool maximize, float64 clr, float64 eps",
    "T param, T state_sum",
    _GRAD
    + "const acc_t s = (acc_t)state_sum + g * g;\n"
      "state_sum = (T)s;\n"
      "param = (T)((acc_t)param - (acc_t)clr * g / (sqrt(s) + (acc_t)eps));")


def sgd_step(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, nesterov,
             maximize, first_step):
    """One torch.optim.SGD update of ``param`` (and ``momentum_buffer`` when momentum > 0)."""
    common = (grad, float(lr), float(weight_decay), bool(maximize))
    if momentum:
        _run(_sgd_kernel(True), *common, float(momentum), float(1 - dampening), bool(nesterov),
             bool(first_step), param, momentum_buffer)
    else:
        _run(_sgd_kernel(False), *common, param)


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, amsgrad, maximize, decoupled):
    """One torch.optim.Adam (``decoupled=False``) or AdamW (``decoupled=True``) update.

    ``step`` is the step count after this update (1 on the first call).
    """
    bias1 = 1 - beta1 ** step
    bias2_sqrt = (1 - beta2 ** step) ** 0.5
    buffers = (param, exp_avg, exp_avg_sq) + ((max_exp_avg_sq,) if amsgrad else ())
    _run(_adam_kernel(bool(amsgrad)), grad, float(weight_decay), bool(decoupled), bool(maximize),
         float(1 - lr * weight_decay), float(beta1), float(1 - beta1), float(beta2),
         float(1 - beta2), float(bias2_sqrt), float(eps), float(lr / bias1), *buffers)


def rmsprop_step(param, grad, square_avg, momentum_buffer, grad_avg, lr, alpha, eps, weight_decay,
                 momentum, centered, maximize):
    """One torch.optim.RMSprop update (buffers given as None when unused)."""
    args = [grad, float(lr), float(weight_decay), bool(maximize), float(alpha), float(1 - alpha),
            float(eps)]
    buffers = [param, square_avg]
    if centered:
        buffers.append(grad_avg)
    if momentum > 0:
        args.append(float(momentum))
        buffers.append(momentum_buffer)
    _run(_rmsprop_kernel(bool(centered), momentum > 0), *args, *buffers)


def adagrad_step(param, grad, state_sum, step, lr, lr_decay, weight_decay, eps, maximize):
    """One torch.optim.Adagrad update of ``param`` and ``state_sum`` (dense gradients).

    ``step`` is the step count after this update (1 on the first call).
    """
    _run(_ADAGRAD, grad, float(weight_decay), bool(maximize),
         float(lr / (1 + (step - 1) * lr_decay)), float(eps), param, state_sum)


def all_kernels():
    """Every ElementwiseKernel this module launches, each optimizer variant included (for compile checks)."""
    module_level = [k for k in globals().values() if isinstance(k, cupy.ElementwiseKernel)]
    return (module_level
            + [_sgd_kernel(momentum) for momentum in (False, True)]
            + [_adam_kernel(amsgrad) for amsgrad in (False, True)]
            + [_rmsprop_kernel(centered, momentum) for centered in (False, True) for momentum in (False, True)])


# ---- random numbers -----------------------------------------------------------------

class RandomState:
    """The bit generator behind an ``rlpipe.Generator`` on a GPU.

    cuRAND's Philox4x32-10 through ``cupy.random.Generator``. Its whole state is one device
    buffer of per-thread cuRAND states, so ``get_state`` copies that buffer to the host and
    ``set_state`` copies it back: the draws after a restore are exactly the ones that
    followed the snapshot.
    """

    _KIND = "cupy.random.Philox4x3210"

    def __init__(self, seed, index=None):
        self.device = cupy.cuda.Device(index)
        with self.device:
            self.bits = cupy.random.Philox4x3210(seed)
            self.rng = cupy.random.Generator(self.bits)

    def uniform(self, shape, dtype, low=0.0, high=1.0):
        with self.device:
            out = self.rng.random(shape, dtype=np.float64 if dtype != np.float32 else np.float32)
            if low != 0.0 or high != 1.0:
                return (out * (high - low) + low).astype(dtype, copy=False)
            out = out.astype(dtype, copy=False)
            if out.dtype.itemsize < 4:  # rounding to float16 can reach 1.0; keep [0, 1) as the CPU does
                cupy.minimum(out, out.dtype.type(1 - 2.0 ** -(np.finfo(out.dtype).nmant + 1)), out=out)
            return out

    def normal(self, shape, dtype, mean=0.0, std=1.0):
        with self.device:
            out = self.rng.standard_normal(
                shape, dtype=np.float64 if dtype != np.float32 else np.float32)
            if mean != 0.0 or std != 1.0:
                out = out * std + mean
            return out.astype(dtype, copy=False)

    def integers(self, low, high, shape, dtype):
        with self.device:
            out = self.rng.integers(low, high, size=shape, dtype=np.int64)
            return out.astype(dtype, copy=False)

    def standard_gamma(self, concentration):
        """Gamma(concentration, 1) draws, one per element, in the concentration's dtype."""
        with self.device:
            return self.rng.standard_gamma(concentration, dtype=np.float64).astype(concentration.dtype, copy=False)

    def permutation(self, n):
        """A random ordering of range(n): the order that sorts n random 63-bit keys."""
        with self.device:
            keys = self.rng.integers(0, 2 ** 63 - 1, size=int(n), dtype=np.int64)
            return cupy.argsort(keys).astype(np.int64, copy=False)

    def _state_buffer(self):
        """The device buffer holding the cuRAND states (an int8 view of it)."""
        buffer = getattr(self.bits, "_state", None)
        if isinstance(buffer, cupy.ndarray):
            return buffer
        try:  # no such attribute in this CuPy: find the buffer through its pointer and size
            nbytes = self.bits._state_size() * self.bits._type_size()
            memory = cupy.cuda.UnownedMemory(self.bits.state(), nbytes, self.bits,
                                             self.device.id)
            return cupy.ndarray((nbytes,), np.int8, cupy.cuda.MemoryPointer(memory, 0))
        except (AttributeError, TypeError) as e:
            raise RuntimeError(
                "get_state/set_state are unsupported on cuda with this CuPy version: its "
                "cupy.random generator does not expose its state buffer") from e

    def get_state(self):
        """A host snapshot of the generator (a dict holding a NumPy int8 array)."""
        with self.device:
            return {"bit_generator": self._KIND, "state": self._state_buffer().get()}

    def set_state(self, state):
        """Restore a snapshot taken by ``get_state`` (on any RandomState of this backend)."""
        saved = state.get("bit_generator") if isinstance(state, dict) else None
        if saved != self._KIND:
            raise ValueError(f"not a state of the cuda backend's generator ({self._KIND}): "
                             f"{saved!r}")
        data = np.ascontiguousarray(cupy.asnumpy(state["state"]), dtype=np.int8)
        with self.device:
            buffer = self._state_buffer()
            if data.shape != buffer.shape:
                raise ValueError(f"generator state of {data.size} bytes does not fit this "
                                 f"generator's {buffer.size}")
            buffer.set(data)
