"""The ``__torch_function__`` protocol: top-level functions hand non-tensor arguments to their type.

``rlpipe.stack(tds)``, ``rlpipe.where(mask, td, 0)``, ``rlpipe.zeros_like(td)``... must work on
containers defined in higher layers (``TensorDict``) without the core importing them. As in
PyTorch, such a function first tests the arguments that may hold a container::

    if type(input) is not Tensor and has_torch_function(input):
        return handle_torch_function(clone, (input,), {"memory_format": memory_format})

and, when one's type defines ``__torch_function__(func, types, args, kwargs)``, returns what that
hook returns (``NotImplemented`` from every hook raises TypeError). The call passes the function's
own arguments, defaults included, in its signature's order. Plain tensors pay one ``type(x) is
Tensor`` test per watched argument.
"""
from ._dtypes import shown_module
from ._tensor import Tensor

NO_HOOK = frozenset({Tensor, int, float, bool, type(None), str})


def _hook_type(value):
    """The type of ``value`` (or of the first element of a list/tuple of them) if it defines the hook."""
    t = type(value)
    if (t is list or t is tuple) and value:
        t = type(value[0])
    if t in NO_HOOK or issubclass(t, Tensor):
        return None
    return t if getattr(t, "__torch_function__", None) is not None else None


def has_torch_function(*values):
    """True when one of ``values`` (or the first element of one that is a list/tuple) has a type that
    implements ``__torch_function__`` and is not a Tensor."""
    return any(_hook_type(v) is not None for v in values)


def handle_torch_function(func, args, kwargs, relevant=None):
    """Calls the hooks of the types found among ``relevant`` (``args`` by default) in turn, returning
    the first result that is not NotImplemented."""
    types = []
    for value in (args if relevant is None else relevant):
        t = _hook_type(value)
        if t is not None and t not in types:
            types.append(t)
    for t in types:
        result = t.__torch_function__(func, tuple(types), args, kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"no implementation found for '{shown_module()}.{func.__name__}' on types that implement "
                    f"__torch_function__: {[t.__name__ for t in types]}")
