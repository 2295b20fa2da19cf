"""The rlpipe functions a TensorDict answers through ``__torch_function__`` (tensordict's module of
the same name): ``rlpipe.stack(tds)``, ``rlpipe.where(mask, td, 0)``, ``rlpipe.zeros_like(td)``,
``rlpipe.autograd.grad(td_out, td_in)``, ``rlpipe.nn.functional.mse_loss(td, td)`` ...

The core calls a handler with the function's own arguments, defaults included (see
``rlpipe._dispatch``); each handler maps them onto the TensorDict's methods.
"""
from .. import _creation, primitives as _ops, autograd as _autograd, random as _random
from ..nn import functional as _F
from ._math import _NO_DIM, _is_td


def _written(result, out):
    """The result of a function called with ``out=``: written into that TensorDict, which is returned."""
    return result if out is None else result._into(out)


def _only_tensordicts(name, items):
    """Tensors first, then a TensorDict: the core's TypeError for a TensorDict among Tensors (a
    TensorDict first is TensorDict.stack/cat's to check)."""
    if not _is_td(items[0]):
        element = next(item for item in items if _is_td(item))
        raise TypeError(f"{name}(): expected a sequence of Tensors, got an element of type {type(element).__name__}")


def _stack(tensordicts, dim=0, *, out=None, contiguous=False):
    """``rlpipe.stack`` of TensorDicts (with ``out``: written into that TensorDict; ``contiguous``: a
    lazy result made dense)."""
    _only_tensordicts("stack", tensordicts)
    result = type(tensordicts[0]).stack(tensordicts, dim)
    return _written(result.contiguous() if contiguous else result, out)


def _cat(tensordicts, dim=0, *, out=None):
    """``rlpipe.cat`` of TensorDicts (with ``out``: written into that TensorDict)."""
    _only_tensordicts("cat", tensordicts)
    result = type(tensordicts[0]).cat(tensordicts, dim)
    return _written(result, out)


def _method(name):
    """Handler: ``rlpipe.<name>(td, *args)`` is ``td.<name>(*args)``."""
    return lambda td, *args, **kwargs: getattr(td, name)(*args, **kwargs)


def _reduction(name):
    """Handler for rlpipe.sum/mean/prod(td, dim, keepdim, dtype=..., out=...)."""
    def handler(td, dim=None, keepdim=False, *, dtype=None, out=None):
        return _written(getattr(td, name)(_NO_DIM if dim is None else dim, keepdim, dtype=dtype), out)
    return handler


def _spread(name):
    """Handler for rlpipe.std/var(td, dim, unbiased, keepdim, correction=...)."""
    def handler(td, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if correction is None:
            correction = 0 if unbiased is False else 1
        return getattr(td, name)(_NO_DIM if dim is None else dim, keepdim, correction=correction)
    return handler


def _like(fn):
    """Handler for ``rlpipe.zeros_like(td, ...)`` and its kin: the function on every leaf (as in
    tensordict, ``requires_grad`` and ``memory_format`` are refused)."""
    def handler(td, *args, dtype=None, device=None, requires_grad=False, memory_format=None):
        refused = [k for k, v in (("requires_grad", requires_grad), ("memory_format", memory_format)) if v]
        if refused:
            raise RuntimeError(f"keyword arguments {refused} are not supported with {fn.__name__} with TensorDict")
        out = td._map(lambda t: fn(t, *args, dtype=dtype, device=device))
        if td._has_names():
            out._set_names(td.names)
        return out if device is None else out.to(device)
    return handler


def _where(condition, input=None, other=None):
    if _is_td(input):
        return input.where(condition, other)
    return other.where(~condition, input)


def _symmetric(name):
    """maximum/minimum/eq/ne: the TensorDict (or non-tensor data) may be either operand."""
    def handler(input, other):
        return getattr(input, name)(other) if _is_td(input) else getattr(other, name)(input)
    return handler


def _gather(td, dim, index, *, sparse_grad=False, out=None):
    if sparse_grad:
        raise NotImplementedError("sparse_grad=True not implemented for rlpipe.gather(tensordict, ...)")
    result = td.gather(dim, index)
    return _written(result, out)


def _where_out(condition, input=None, other=None, *, out=None):
    result = _where(condition, input, other)
    return _written(result, out)


def _loss(fn):
    """Handler for rlpipe.nn.functional losses: the loss of every pair of leaves; reduced losses
    give a TensorDict of batch size []."""
    def handler(input, target, size_average=None, reduce=None, reduction="mean", **kwargs):
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
        return input.apply(lambda x, y: fn(x, y, size_average, reduce, reduction, **kwargs), target,
                           batch_size=None if reduction == "none" else [])
    return handler


def _grad(outputs, inputs, grad_outputs=None, **kwargs):
    """rlpipe.autograd.grad(td_out, td_in, td_grad_out): a TensorDict of gradients shaped like ``inputs``."""
    def single(value, name):
        value = value[0] if isinstance(value, tuple) and len(value) == 1 else value
        if value is not None and not _is_td(value):
            raise ValueError(f"rlpipe.autograd.grad for TensorDict only supports one TensorDict as {name}")
        return value
    outputs, inputs, grad_outputs = single(outputs, "output"), single(inputs, "input"), \
        single(grad_outputs, "grad_output")
    keys, leaves = zip(*inputs._leaf_items())
    grads = _autograd.grad([t for _, t in outputs._leaf_items()], list(leaves),
                           None if grad_outputs is None else [t for _, t in grad_outputs._leaf_items()], **kwargs)
    found = dict(zip(keys, grads))
    return inputs._rebuild(found)


def _clone(td, memory_format=None):
    return td.clone()


TD_HANDLED_FUNCTIONS = {getattr(_ops, name): _method(name) for name in (
    "unbind split chunk masked_select squeeze unsqueeze permute transpose flatten unflatten flip roll "
    "narrow movedim expand fliplr flipud rot90 tile atleast_1d atleast_2d atleast_3d").split()}
TD_HANDLED_FUNCTIONS.update({getattr(_ops, name): _reduction(name) for name in ("sum", "mean", "prod")})
TD_HANDLED_FUNCTIONS.update({getattr(_ops, name): _spread(name) for name in ("std", "var")})
TD_HANDLED_FUNCTIONS.update({
    _ops.where: _where_out, _ops.maximum: _symmetric("maximum"), _ops.minimum: _symmetric("minimum"),
    _ops.eq: _symmetric("__eq__"), _ops.ne: _symmetric("__ne__"),
    _ops.stack: _stack, _ops.cat: _cat, _ops.clone: _clone, _ops.gather: _gather, _autograd.grad: _grad})
TD_HANDLED_FUNCTIONS.update({fn: _loss(fn) for fn in (_F.l1_loss, _F.mse_loss, _F.smooth_l1_loss)})
TD_HANDLED_FUNCTIONS.update({fn: _like(fn) for fn in (_creation.zeros_like, _creation.ones_like,
                                                      _creation.empty_like, _creation.full_like,
                                                      _random.rand_like, _random.randn_like)})
