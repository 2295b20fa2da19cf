"""The ``__torch_function__`` protocol: top-level functions hand non-tensor arguments to their type.

``rlpipe.stack(tds)``, ``rlpipe.where(mask, td, 0)``, ``rlpipe.zeros_like(td)``... must work on
containers defined in higher layers (``TensorDict``) without the core importing them. As in
PyTorch, a function declared ``overridable`` looks at the arguments that may hold such a container;
when one's type defines ``__torch_function__(func, types, args, kwargs)``, the call goes to it
(``NotImplemented`` from every hook raises TypeError). Plain tensors take the direct path: the only
cost is one ``type(x) is Tensor`` test per watched argument.
"""
import functools
import inspect

from ._tensor import Tensor


def _hooked(value):
    """The type of ``value`` (or of the first element of a list/tuple of them) when it defines the hook."""
    t = type(value)
    if t is Tensor:
        return None
    if (t is list or t is tuple) and value:
        t = type(value[0])
        if t is Tensor:
            return None
    return t if getattr(t, "__torch_function__", None) is not None and not issubclass(t, Tensor) else None


def handle_torch_function(public, args, kwargs, hooked):
    """Calls the hooks of the ``hooked`` types in turn until one does not return NotImplemented."""
    for t in hooked:
        result = t.__torch_function__(public, tuple(hooked), args, kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"no implementation found for '{public.__module__}.{public.__name__}' on types that implement "
                    f"__torch_function__: {[t.__name__ for t in hooked]}")


def overridable(*names):
    """Decorator: the function's arguments ``names`` (all of them when none is given) may hold a
    container whose type implements ``__torch_function__``; such a call is handed to that hook.
    Apply it outermost, after ``tensor_method``, so that the Tensor methods stay unwrapped."""
    def decorate(fn):
        params = list(inspect.signature(fn).parameters)
        watched = [(params.index(n), n) for n in (names or params)]

        @functools.wraps(fn)
        def public(*args, **kwargs):
            n = len(args)
            for i, name in watched:
                value = args[i] if i < n else kwargs.get(name)
                if type(value) is not Tensor and value is not None and _hooked(value) is not None:
                    hooked = []
                    for j, key in watched:
                        t = _hooked(args[j] if j < n else kwargs.get(key))
                        if t is not None and t not in hooked:
                            hooked.append(t)
                    return handle_torch_function(public, args, kwargs, hooked)
            return fn(*args, **kwargs)
        return public
    return decorate
