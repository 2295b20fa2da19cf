"""Optimizer steps, in place on a parameter and its state buffers: torch.optim's SGD, Adam/AdamW, RMSprop
and Adagrad updates (``sgd_step``, ``adam_step``, ``rmsprop_step``, ``adagrad_step``).

The references are short runs of array calls that write into the state buffers or one scratch array: on
small parameters the fixed cost of a call dominates, so they avoid temporaries and, on NumPy, pass their
constants as cached 0-d arrays (``_scalar``), which NumPy takes faster than Python floats. A
half-precision parameter is updated in float32 (``_in_float32``), as the CUDA kernels do. On CUDA each
step is one launch per parameter; buffers that an option leaves unused are absent from that variant's
kernel (one kernel per set of buffers), the other options are kernel arguments.
"""
import functools

from ..backends import cpu
from ._registry import Source, define

_NUMPY = cpu.xp


# ---- the references -------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _scalar(xp, value, dtype):
    """``value`` as a constant of ``dtype`` for arrays of ``xp``: on NumPy a read-only 0-d array (constants
    recur across parameters and steps), elsewhere a NumPy scalar (a device namespace takes no host array)."""
    if xp is not _NUMPY:
        return dtype.type(value)
    out = xp.array(value, dtype)
    out.flags.writeable = False
    return out


def _in_float32(step, args):
    """Runs ``step(**args)`` on float32 copies of its arrays, then rounds the results back into
    the parameter and state buffers (every array but ``grad``). ``args`` is the caller's
    ``locals()`` taken before it defines anything, so exactly its arguments."""
    xp = args["xp"]
    wide = {k: v.astype(xp.float32) if isinstance(v, xp.ndarray) else v for k, v in args.items()}
    step(**wide)
    for key, value in args.items():
        if key != "grad" and isinstance(value, xp.ndarray):
            value[...] = wide[key]


def _array(xp, x):
    """NumPy gives 0-d results as scalars; the steps write into their scratch arrays."""
    return x if type(x) is xp.ndarray else xp.array(x)


def _direction(xp, param, grad, weight_decay, maximize):
    """The gradient an update follows: negated to maximize, plus ``weight_decay * param``.

    Without either it is ``grad`` itself, so callers must not write into the result."""
    if weight_decay:
        g = _array(xp, param * _scalar(xp, weight_decay, param.dtype))
        return xp.subtract(g, grad, out=g) if maximize else xp.add(g, grad, out=g)
    return xp.negative(grad) if maximize else grad


@cpu.without_fp_warnings
def sgd_step(xp, param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, nesterov,
             maximize, first_step):
    """One torch.optim.SGD update of ``param`` (and ``momentum_buffer`` when momentum > 0)."""
    if param.dtype.itemsize < 4:
        return _in_float32(sgd_step, locals())
    g = _direction(xp, param, grad, weight_decay, maximize)
    if momentum:
        if first_step:
            momentum_buffer[...] = g
        else:
            momentum_buffer *= momentum
            momentum_buffer += (1 - dampening) * g
        g = g + momentum * momentum_buffer if nesterov else momentum_buffer
    param -= lr * g


@cpu.without_fp_warnings
def adam_step(xp, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
              weight_decay, amsgrad, maximize, decoupled):
    """One torch.optim.Adam (``decoupled=False``) or AdamW (``decoupled=True``) update.

    ``step`` is the step count after this update (1 on the first call).
    """
    if param.dtype.itemsize < 4:
        return _in_float32(adam_step, locals())
    dtype = param.dtype
    if weight_decay and decoupled:
        param *= _scalar(xp, 1 - lr * weight_decay, dtype)
        weight_decay = 0
    g = _direction(xp, param, grad, weight_decay, maximize)
    # both averages move part of the way to their targets: x += (1 - beta) * (target - x)
    scratch = _array(xp, xp.subtract(g, exp_avg))
    scratch *= _scalar(xp, 1 - beta1, dtype)
    exp_avg += scratch
    xp.multiply(g, g, out=scratch)
    scratch -= exp_avg_sq
    scratch *= _scalar(xp, 1 - beta2, dtype)
    exp_avg_sq += scratch
    if amsgrad:
        xp.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        exp_avg_sq = max_exp_avg_sq
    # param -= lr / bias1 * exp_avg / (sqrt(v) / bias2_sqrt + eps), multiplied through by bias2_sqrt
    bias2_sqrt = (1 - beta2 ** step) ** 0.5
    xp.sqrt(exp_avg_sq, out=scratch)
    scratch += _scalar(xp, eps * bias2_sqrt, dtype)
    xp.divide(exp_avg, scratch, out=scratch)
    scratch *= _scalar(xp, lr * bias2_sqrt / (1 - beta1 ** step), dtype)
    param -= scratch


@cpu.without_fp_warnings
def rmsprop_step(xp, param, grad, square_avg, momentum_buffer, grad_avg, lr, alpha, eps, weight_decay,
                 momentum, centered, maximize):
    """One torch.optim.RMSprop update (buffers given as None when unused)."""
    if param.dtype.itemsize < 4:
        return _in_float32(rmsprop_step, locals())
    dtype = param.dtype
    g = _direction(xp, param, grad, weight_decay, maximize)
    rate = _scalar(xp, 1 - alpha, dtype)
    scratch = _array(xp, xp.multiply(g, g))  # the averages move (1 - alpha) of the way to g * g and g
    scratch -= square_avg
    scratch *= rate
    square_avg += scratch
    if centered:
        xp.subtract(g, grad_avg, out=scratch)
        scratch *= rate
        grad_avg += scratch
        xp.multiply(grad_avg, grad_avg, out=scratch)
        xp.subtract(square_avg, scratch, out=scratch)
        xp.sqrt(scratch, out=scratch)
    else:
        xp.sqrt(square_avg, out=scratch)
    scratch += _scalar(xp, eps, dtype)
    xp.divide(g, scratch, out=scratch)
    if momentum > 0:
        momentum_buffer *= _scalar(xp, momentum, dtype)
        momentum_buffer += scratch
        xp.multiply(momentum_buffer, _scalar(xp, lr, dtype), out=scratch)
    else:
        scratch *= _scalar(xp, lr, dtype)
    param -= scratch


@cpu.without_fp_warnings
def adagrad_step(xp, param, grad, state_sum, step, lr, lr_decay, weight_decay, eps, maximize):
    """One torch.optim.Adagrad update of ``param`` and ``state_sum`` (dense gradients).

    ``step`` is the step count after this update (1 on the first call).
    """
    if param.dtype.itemsize < 4:
        return _in_float32(adagrad_step, locals())
    dtype = param.dtype
    g = _direction(xp, param, grad, weight_decay, maximize)
    scratch = _array(xp, xp.multiply(g, g))
    state_sum += scratch
    xp.sqrt(state_sum, out=scratch)
    scratch += _scalar(xp, eps, dtype)
    xp.divide(g, scratch, out=scratch)
    scratch *= _scalar(xp, lr / (1 + (step - 1) * lr_decay), dtype)
    param -= scratch


# ---- the CUDA kernels -----------------------------------------------------------------------

# the gradient as the update sees it: negated to maximize, plus L2 weight decay (torch order)
_GRAD = ("acc_t g = (acc_t)grad;\n"
         "if (maximize) g = -g;\n"
         "if (weight_decay != 0.0) g = g + (acc_t)weight_decay * (acc_t)param;\n")

_SGD_IN = "T grad, float64 lr, float64 weight_decay, bool maximize"
_SGD = [
    Source("sgd", _SGD_IN, "T param", _GRAD + "param = (T)((acc_t)param - (acc_t)lr * g);"),
    Source("sgd_momentum", _SGD_IN + ", float64 momentum, float64 one_minus_dampening, bool nesterov, bool first_step",
           "T param, T momentum_buffer",
           _GRAD
           + "const acc_t m = (acc_t)momentum;\n"
             "const acc_t b = first_step ? g\n"
             "    : m * (acc_t)momentum_buffer + (acc_t)one_minus_dampening * g;\n"
             "momentum_buffer = (T)b;\n"
             "const acc_t d = nesterov ? g + m * b : b;\n"
             "param = (T)((acc_t)param - (acc_t)lr * d);"),
]


def _adam_source(amsgrad):
    outs = "T param, T exp_avg, T exp_avg_sq" + (", T max_exp_avg_sq" if amsgrad else "")
    if amsgrad:
        second = ("const acc_t second = rlpipe_nan_max((acc_t)max_exp_avg_sq, v);\n"
                  "max_exp_avg_sq = (T)second;\n")
    else:
        second = "const acc_t second = v;\n"
    return Source(
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


def _rmsprop_source(centered, with_momentum):
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
    return Source("rmsprop" + ("_centered" if centered else "") + ("_momentum" if with_momentum else ""),
                  ins, outs, body)


_ADAGRAD = Source(
    "adagrad",
    "T grad, float64 weight_decay, bool maximize, float64 clr, float64 eps",
    "T param, T state_sum",
    _GRAD
    + "const acc_t s = (acc_t)state_sum + g * g;\n"
      "state_sum = (T)s;\n"
      "param = (T)((acc_t)param - (acc_t)clr * g / (sqrt(s) + (acc_t)eps));")


def _launch_sgd(backend, compiled, param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, nesterov,
                maximize, first_step):
    common = (grad, float(lr), float(weight_decay), bool(maximize))
    if momentum:
        backend.run(compiled[1], *common, float(momentum), float(1 - dampening), bool(nesterov),
                    bool(first_step), param, momentum_buffer)
    else:
        backend.run(compiled[0], *common, param)


def _launch_adam(backend, compiled, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, eps,
                 weight_decay, amsgrad, maximize, decoupled):
    bias1 = 1 - beta1 ** step
    bias2_sqrt = (1 - beta2 ** step) ** 0.5
    buffers = (param, exp_avg, exp_avg_sq) + ((max_exp_avg_sq,) if amsgrad else ())
    backend.run(compiled[bool(amsgrad)], grad, float(weight_decay), bool(decoupled), bool(maximize),
                float(1 - lr * weight_decay), float(beta1), float(1 - beta1), float(beta2),
                float(1 - beta2), float(bias2_sqrt), float(eps), float(lr / bias1), *buffers)


def _launch_rmsprop(backend, compiled, param, grad, square_avg, momentum_buffer, grad_avg, lr, alpha, eps,
                    weight_decay, momentum, centered, maximize):
    args = [grad, float(lr), float(weight_decay), bool(maximize), float(alpha), float(1 - alpha), float(eps)]
    buffers = [param, square_avg]
    if centered:
        buffers.append(grad_avg)
    if momentum > 0:
        args.append(float(momentum))
        buffers.append(momentum_buffer)
    backend.run(compiled[2 * bool(centered) + (momentum > 0)], *args, *buffers)


def _launch_adagrad(backend, compiled, param, grad, state_sum, step, lr, lr_decay, weight_decay, eps, maximize):
    backend.run(compiled[0], grad, float(weight_decay), bool(maximize),
                float(lr / (1 + (step - 1) * lr_decay)), float(eps), param, state_sum)


define("sgd_step", reference=sgd_step, sources=_SGD, launch=_launch_sgd, host=True)
define("adam_step", reference=adam_step, sources=[_adam_source(False), _adam_source(True)], launch=_launch_adam,
       host=True)
define("rmsprop_step", reference=rmsprop_step, launch=_launch_rmsprop, host=True,
       sources=[_rmsprop_source(centered, momentum) for centered in (False, True) for momentum in (False, True)])
define("adagrad_step", reference=adagrad_step, sources=[_ADAGRAD], launch=_launch_adagrad, host=True)
