"""Fused activations and their backward passes: one CUDA launch where CuPy would take several calls.

Each kernel's reference is its op's own formula, written against ``ctx.xp`` in
``rlpipe/primitives/activations.py`` (no CPU version here: off the GPU the op runs that formula).
The kernels take the arrays, then the op's scalar parameters; a backward kernel returns the dtype the
op's formula gives (NumPy's promotion of its two arrays, or the gradient's for the relu family).
"""
from ._registry import Source, define

_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715
_INV_SQRT_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


def _c(value):
    """A float constant as C source, precise to the last bit."""
    return "acc_t(%r)" % float(value)


# inner argument of tanh in the tanh approximation of GELU, from v
_GELU_TANH_ARG = "%s * (v + %s * v * v * v)" % (_c(_SQRT_2_OVER_PI), _c(_GELU_C))
# standard normal CDF at v, through erf
_NORMAL_CDF = "acc_t(0.5) * (acc_t(1) + erf(v * %s))" % _c(_INV_SQRT_2)


def _common(xp, a, b):
    """``a`` and ``b`` in the dtype NumPy would compute them in."""
    if a.dtype == b.dtype:
        return a, b
    dtype = xp.result_type(a.dtype, b.dtype)
    return a.astype(dtype, copy=False), b.astype(dtype, copy=False)


def _arrays_then_floats(arrays, promote=False):
    """A launcher: the first ``arrays`` arguments as they are (``promote``: the first two in NumPy's common
    dtype), the rest (the op's scalar parameters) as float64 kernel arguments."""
    def launch(backend, compiled, *args):
        head = _common(backend.xp, *args[:2]) + args[2:arrays] if promote else args[:arrays]
        return backend.run(compiled[0], *head, *map(float, args[arrays:]))
    return launch


def _activation(name, in_params, out_params, body, arrays, promote=False):
    define(name, sources=[Source(name, in_params, out_params, body)], launch=_arrays_then_floats(arrays, promote))


# grad * !(x <= 0), as the formula: NaN inputs pass the gradient, and an infinite gradient at x <= 0 gives NaN
_activation("relu_backward", "X x, T grad", "T dx",
            "dx = (T)((acc_t)grad * (x <= X(0) ? acc_t(0) : acc_t(1)));", arrays=2)

_activation("leaky_relu", "T x, float64 slope", "T y",
            "const acc_t v = (acc_t)x;\n"
            "y = (T)(v > acc_t(0) ? v : v * (acc_t)slope);", arrays=1)

_activation("leaky_relu_backward", "X x, T grad, float64 slope", "T dx",
            "const acc_t g = (acc_t)grad;\n"
            "dx = (T)(rlpipe_positive(x) ? g : g * (acc_t)slope);", arrays=2)

_activation("sigmoid", "T x", "T y",
            "y = (T)rlpipe_sigmoid((acc_t)x);", arrays=1)

_activation("sigmoid_backward", "T y, T grad", "T dx",
            "const acc_t s = (acc_t)y;\n"
            "dx = (T)((acc_t)grad * s * (acc_t(1) - s));", arrays=2, promote=True)

_activation("tanh_backward", "T y, T grad", "T dx",
            "const acc_t t = (acc_t)y;\n"
            "dx = (T)((acc_t)grad * (acc_t(1) - t * t));", arrays=2, promote=True)

_activation("gelu", "T x", "T y",
            "const acc_t v = (acc_t)x;\n"
            "y = (T)(acc_t(0.5) * v * (acc_t(1) + erf(v * %s)));" % _c(_INV_SQRT_2), arrays=1)

_activation("gelu_tanh", "T x", "T y",
            "const acc_t v = (acc_t)x;\n"
            "y = (T)(acc_t(0.5) * v * (acc_t(1) + tanh(%s)));" % _GELU_TANH_ARG, arrays=1)

_activation("gelu_backward", "T x, T grad", "T dx",
            "const acc_t v = (acc_t)x;\n"
            "const acc_t cdf = %s;\n"
            "const acc_t pdf = %s * exp(acc_t(-0.5) * v * v);\n"
            "dx = (T)((acc_t)grad * (cdf + v * pdf));" % (_NORMAL_CDF, _c(_INV_SQRT_2PI)), arrays=2, promote=True)

_activation("gelu_tanh_backward", "T x, T grad", "T dx",
            "const acc_t v = (acc_t)x;\n"
            "const acc_t k = %s;\n"
            "const acc_t c = %s;\n"
            "const acc_t t = tanh(%s);\n"
            "dx = (T)((acc_t)grad * (acc_t(0.5) * (acc_t(1) + t)\n"
            "    + acc_t(0.5) * v * (acc_t(1) - t * t) * k * (acc_t(1) + acc_t(3) * c * v * v)));"
            % (_c(_SQRT_2_OVER_PI), _c(_GELU_C), _GELU_TANH_ARG), arrays=2, promote=True)

# linear above the threshold (as torch does), else log1p(exp(beta * x)) / beta without overflow
_activation("softplus", "T x, float64 beta, float64 threshold", "T y",
            "const acc_t v = (acc_t)x;\n"
            "const acc_t b = (acc_t)beta;\n"
            "const acc_t bv = v * b;\n"
            "const acc_t soft = ((bv > acc_t(0) ? bv : acc_t(0)) + log1p(exp(-fabs(bv)))) / b;\n"
            "y = (T)(bv > (acc_t)threshold ? v : soft);", arrays=1)

_activation("softplus_backward", "T x, T grad, float64 beta, float64 threshold", "T dx",
            "const acc_t bv = (acc_t)x * (acc_t)beta;\n"
            "const acc_t g = (acc_t)grad;\n"
            "dx = (T)(bv > (acc_t)threshold ? g : g * rlpipe_sigmoid(bv));", arrays=2, promote=True)
