"""``gradcheck``: analytical gradients against central finite differences; ``gradgradcheck``: the same
for the gradients themselves (second derivatives, through ``create_graph=True``)."""
import numpy as np

from .engine import grad
from .grad_mode import enable_grad, no_grad
from .._tensor import Tensor, wrap


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` (unless ``raise_exception=False``) when analytical and numerical gradients differ."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _flat_outputs(func, inputs):
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              fast_mode=False, masked=None):
    """True when ``func``'s backward matches finite differences for every input that requires grad.

    Use float64 inputs: in float32 the finite differences are too coarse for the default tolerances.
    """
    inputs = _as_tuple(inputs)
    wrt = [(i, x) for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i, x in wrt:
        if x.dtype.name != "float64":
            import warnings
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision floating point.",
                          stacklevel=2)
    outputs = _flat_outputs(func, inputs)
    for k, out in enumerate(outputs):
        if not out._requires_grad:
            continue
        analytical = _analytical(out, [x for _, x in wrt])
        for (i, x), a in zip(wrt, analytical):
            n = _numerical(func, inputs, k, x, eps)
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                                     f"numerical:{n}\nanalytical:{a}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0, check_undefined_grad=True,
                  check_grad_dtypes=False, check_batched_grad=False, check_fwd_over_rev=False,
                  check_rev_over_rev=True, fast_mode=False, masked=False):
    """True when the second derivatives of ``func`` match finite differences of its first derivatives:
    ``gradcheck`` of ``(inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs, create_graph=True)``.

    Left out, ``grad_outputs`` are random normal tensors (a fixed seed) that require grad, so the
    check covers both the inputs and the incoming gradients. Use float64 inputs.
    """
    inputs = _as_tuple(inputs)
    outputs = [o for o in _flat_outputs(func, inputs) if o._requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            wrap(o._device._backend.xp.asarray(rng.standard_normal(o._data.shape).astype(o._data.dtype)),
                 o._device).requires_grad_(True)
            for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"gradgradcheck: grad_outputs has {len(grad_outputs)} tensors, expected one per "
                         f"differentiable output of func ({len(outputs)})")
    n_inputs = len(inputs)

    def first_derivatives(*args):
        ins, gos = args[:n_inputs], args[n_inputs:]
        with enable_grad():  # also when gradcheck's finite differences call this under no_grad
            outs = [o for o in _flat_outputs(func, ins) if o._requires_grad]
            wrt = [x for x in ins if isinstance(x, Tensor) and x._requires_grad]
            found = grad(outs, wrt, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in found if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)


def _analytical(out, wrt):
    """The Jacobian d out / d x for each x, one row per output element (vector-Jacobian products)."""
    xp = out.device._backend.xp
    rows = [[] for _ in wrt]
    for j in range(out.numel()):
        seed = xp.zeros(out.numel(), dtype=out._data.dtype)
        seed[j] = 1
        from rlpipe._tensor import wrap
        gs = grad(out, wrt, grad_outputs=wrap(seed.reshape(out._data.shape), out.device), retain_graph=True,
                  allow_unused=True)
        for r, (g, x) in zip(rows, zip(gs, wrt)):
            r.append(np.zeros(x.numel()) if g is None else np.asarray(g._host(), dtype=np.float64).reshape(-1))
    return [np.array(r).reshape(out.numel(), x.numel()).T for r, x in zip(rows, wrt)]


def _numerical(func, inputs, k, x, eps):
    """The same Jacobian from central differences, nudging x's elements one at a time."""
    data = x._data
    flat_index = list(np.ndindex(*data.shape)) if data.ndim else [()]
    n_out = _flat_outputs(func, inputs)[k].numel()
    columns = []
    with no_grad():
        for idx in flat_index:
            old = data[idx].item()
            data[idx] = old + eps
            plus = np.array(_flat_outputs(func, inputs)[k]._host(), dtype=np.float64).reshape(-1)
            data[idx] = old - eps
            minus = np.array(_flat_outputs(func, inputs)[k]._host(), dtype=np.float64).reshape(-1)
            data[idx] = old
            columns.append((plus - minus) / (2 * eps))
    return np.array(columns).reshape(len(flat_index), n_out)
