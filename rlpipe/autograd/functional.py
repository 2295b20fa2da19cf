"""``torch.autograd.functional``: ``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``hvp`` and ``vhp`` of a
Python function of tensors, built on ``autograd.grad`` (the second-order ones on ``create_graph=True``).
With ``create_graph=True`` the results stay on the graph of the given inputs, so they can be
differentiated again; otherwise they are detached."""
from .._creation import zeros_like
from .._tensor import Tensor
from ..primitives import reshape, stack
from .engine import grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(name, arg, what):
    """(tuple of tensors, whether ``arg`` was a tuple); TypeError naming ``what`` for anything else."""
    is_tuple = isinstance(arg, (tuple, list))
    items = tuple(arg) if is_tuple else (arg,)
    if not all(isinstance(t, Tensor) for t in items):
        raise TypeError(f"The {what} given to {name} must be either a Tensor or a tuple of Tensors but the given "
                        f"{what} has type {type(arg) if not is_tuple else [type(t) for t in items]}.")
    return items, is_tuple


def _call(name, func, inputs, create_graph=False):
    """Runs ``func`` on fresh leaves that require grad (with ``create_graph``, on views of the inputs
    that require grad, so the results reach them): (leaves, outputs, inputs_were_tuple, outputs_were_tuple)."""
    inputs, in_tuple = _as_tuple(name, inputs, "inputs")
    leaves = tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(True)
                   for t in inputs)
    with enable_grad():
        outputs = func(*leaves)
    outputs, out_tuple = _as_tuple(name, outputs, "outputs of the user-provided function")
    return leaves, outputs, in_tuple, out_tuple


def _grads(outputs, leaves, grad_outputs, create_graph=False):
    """d(sum outputs * grad_outputs)/d(leaves), zeros for the leaves the outputs do not depend on."""
    wired = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not wired:
        return tuple(zeros_like(t) for t in leaves)
    found = grad([o for o, _ in wired], leaves, [g for _, g in wired], retain_graph=True, allow_unused=True,
                 create_graph=create_graph)
    return tuple(zeros_like(t) if g is None else g for t, g in zip(leaves, found))


def _detached(tensors, create_graph):
    """``tensors`` as they are with ``create_graph``, else detached (torch's functional API returns no graph)."""
    return tuple(tensors) if create_graph else tuple(t.detach() for t in tensors)


def _vector(name, v, tensors, condition):
    """``v`` as a tuple; left out, a one where ``tensors`` is a single one-element tensor (else RuntimeError)."""
    if v is not None:
        return _as_tuple(name, v, "v")[0]
    if len(tensors) != 1 or tensors[0].numel() != 1:
        raise RuntimeError(f"The vector v can only be None if {condition}.")
    return (zeros_like(tensors[0]) + 1,)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product of ``func`` at ``inputs`` with ``v`` (which may
    be left out when ``func`` returns a single one-element tensor)."""
    leaves, outputs, in_tuple, out_tuple = _call("vjp", func, inputs, create_graph)
    v = _vector("vjp", v, outputs, "the user-provided function returns a single Tensor with a single element")
    _check_v("vjp", v, outputs, "the outputs")
    products = _detached(_grads(outputs, leaves, v, create_graph), create_graph)
    detached = _detached(outputs, create_graph)
    return (detached if out_tuple else detached[0]), (products if in_tuple else products[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for each output and input, a tensor of shape
    ``output.shape + input.shape`` (nested in tuples the way ``inputs`` and the outputs are)."""
    leaves, outputs, in_tuple, out_tuple = _call("jacobian", func, inputs, create_graph)
    blocks = []
    for out in outputs:
        flat = reshape(out, (-1,))
        rows = [_detached(_grads((flat[i],), leaves, (zeros_like(flat[i]) + 1,), create_graph), create_graph)
                for i in range(flat.shape[0])]
        blocks.append(tuple(
            reshape(stack([row[k] for row in rows]) if rows else zeros_like(leaf).reshape((0,) + tuple(leaf.shape)),
                    tuple(out.shape) + tuple(leaf.shape))
            for k, leaf in enumerate(leaves)))
    per_output = [b if in_tuple else b[0] for b in blocks]
    return tuple(per_output) if out_tuple else per_output[0]


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, from the Jacobian (``v`` may be left out for
    a single one-element input); with ``create_graph`` both stay on the graph of ``inputs``."""
    given, _ = _as_tuple("jvp", inputs, "inputs")
    v = _vector("jvp", v, given, "the input to the user-provided function is a single Tensor with a single element")
    with enable_grad():
        outputs = func(*(given if create_graph else (t.detach() for t in given)))
        jac = jacobian(func, given, create_graph=create_graph)
        outs, out_tuple = (tuple(outputs), True) if isinstance(outputs, (tuple, list)) else ((outputs,), False)
        jac = jac if out_tuple else (jac,)
        products = tuple(
            sum(reshape(reshape(j, (o.numel(), -1)) @ reshape(vi, (-1,)), tuple(o.shape)) for j, vi in zip(row, v))
            for o, row in zip(outs, jac))
    outs, products = _detached(outs, create_graph), _detached(products, create_graph)
    return (outs if out_tuple else outs[0]), (products if out_tuple else products[0])


def _check_v(name, v, tensors, what):
    """RuntimeError when the shapes of ``v`` differ from those of ``tensors``."""
    if [tuple(t.shape) for t in v] != [tuple(o.shape) for o in tensors]:
        raise RuntimeError(f"{name}: v has shapes {[list(t.shape) for t in v]} but {what} have shapes "
                           f"{[list(o.shape) for o in tensors]}")


def _scalar_output(name, outputs):
    """The one output of ``func`` (as ``_call`` gives them), refused unless it is a single one-element tensor."""
    if len(outputs) != 1:
        raise RuntimeError(f"The function given to {name} should return a single Tensor, got {len(outputs)} outputs")
    out = outputs[0]
    if out.numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single element, "
                           f"got shape {list(out.shape)}")
    return out.reshape(())


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``: the Jacobian of its gradient (one block
    ``inputs[i].shape + inputs[j].shape`` per pair of inputs when ``inputs`` is a tuple)."""
    def gradient(*leaves):
        with enable_grad():
            out = _scalar_output("hessian", _as_tuple("hessian", func(*leaves), "outputs of the user-provided "
                                                                                "function")[0])
            return _grads((out,), leaves, (zeros_like(out) + 1,), create_graph=True)

    inputs_tuple, in_tuple = _as_tuple("hessian", inputs, "inputs")
    result = jacobian(gradient, inputs_tuple, create_graph=create_graph)
    return result if in_tuple else result[0][0]


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of a scalar ``func``, by differentiating
    (gradient . v) without building the Hessian."""
    return _second_order("hvp", func, inputs, v, create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): for a twice-differentiable scalar ``func`` the Hessian is symmetric, so
    this equals ``hvp``."""
    return _second_order("vhp", func, inputs, v, create_graph)


def _second_order(name, func, inputs, v, create_graph):
    """d(gradient(func) . v)/d(inputs), with ``func``'s value."""
    leaves, outputs, in_tuple, _ = _call(name, func, inputs, create_graph)
    out = _scalar_output(name, outputs)
    with enable_grad():
        v = _vector(name, v, leaves, "the input to the user-provided function is a single Tensor with a single element")
        _check_v(name, v, leaves, "the inputs")
        gradient = _grads((out,), leaves, (zeros_like(out) + 1,), create_graph=True)
        wired = [(g, vi) for g, vi in zip(gradient, v) if g.requires_grad]
        products = _grads([g for g, _ in wired], leaves, [vi for _, vi in wired], create_graph)
    products = _detached(products, create_graph)
    value = out if create_graph else out.detach()
    return value, (products if in_tuple else products[0])
