"""The ``__torch_function__`` protocol: top-level functions hand non-tensor arguments to their type.

``rlpipe.stack(tds)``, ``rlpipe.where(mask, td, 0)``, ``rlpipe.zeros_like(td)``... must work on
containers defined in higher layers (``TensorDict``) without the core importing them. As in
PyTorch, such a function is declared with ``@torch_function("input")`` (naming the arguments that
may hold a container); it first tests them and, when one's type defines
``__torch_function__(func, types, args, kwargs)``, returns what that hook returns
(``NotImplemented`` from every hook raises TypeError). The hook gets the function's own
arguments, defaults included, in its signature's order (keyword-only ones in ``kwargs``). Plain
tensors pay one ``type(x) is Tensor`` test (``type(x) in NO_HOOK`` for several watched arguments).
The same generated wrapper gives an op torch's ``out=`` argument (``torch_function(..., out=writer)``):
one ``out is not None`` test when it is not used.
"""
import functools
import inspect

from ._dtypes import shown_module
from ._tensor import Tensor

NO_HOOK = frozenset({Tensor, int, float, bool, type(None), str})


def _hook_type(value):
    """The type of ``value`` (or of the first element of a list/tuple of them that is not a plain
    Tensor) if it defines the hook."""
    t = type(value)
    if (t is list or t is tuple) and value:
        t = next((type(v) for v in value if type(v) is not Tensor), Tensor)
    if t in NO_HOOK or issubclass(t, Tensor):
        return None
    return t if getattr(t, "__torch_function__", None) is not None else None


def has_torch_function(*values):
    """True when one of ``values`` (or the first element of one that is a list/tuple, plain Tensors
    skipped) has a type that implements ``__torch_function__`` and is not a Tensor."""
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


def torch_function(*watched, public=None, out=None):
    """Decorator: the function first offers its call to the ``__torch_function__`` hook of the
    types of its ``watched`` arguments (by name), passing itself (or ``public``) as ``func``.
    ``out``: a writer ``out(out_tensor, fn, args, kwargs)`` that the call goes through when the
    caller passes ``out=`` (a keyword the wrapper adds; ``fn`` itself never sees it).

    The test is generated inline in a wrapper with the function's own signature, so a call costs
    one extra Python call and no argument binding. A Tensor method declared under this decorator
    (``@tensor_method`` below it) is the undecorated function: its ``self`` is a Tensor, whose type
    has no hook; declare it above where another watched argument may hold a container. Inside an
    op whose input has passed the test, call such ops as methods (``input.permute(order)``)."""
    def decorate(fn):
        return _hook_checking(fn, watched, public, out)
    return decorate


_CHECK = """
def {name}({params}):
    if {test} and has_torch_function({watched}):
        return handle_torch_function(public, ({args}), {{{kwargs}}})
{out_branch}    try:
        return fn({call})
    except AttributeError as error:
        mistyped = not_a_tensor(error, {name!r}, {watched_names!r}, ({watched},))
        if mistyped is None:
            raise
        raise mistyped from None
"""
_OUT_BRANCH = """    if out is not None:
        return write_out(out, fn, ({args}), {{{kwargs}}})
"""


def _not_a_tensor(error, name, watched_names, watched):
    """The TypeError for an op that failed on a watched argument that is no Tensor (an ``error``
    raised on that very object, such as a NumPy array's missing ``_data``), else None."""
    for arg_name, value in zip(watched_names, watched):
        if error.obj is value and not isinstance(value, Tensor):
            return not_a_tensor_error(name, arg_name, value)
    return None


def not_a_tensor_error(name, arg_name, value):
    """The TypeError for ``value``, no Tensor, passed as argument ``arg_name`` of ``name`` (an op, or a
    module's forward): it names both, the type it got, and how to convert it. ``is_not_a_tensor_error``
    recognizes it."""
    error = TypeError(f"{name}(): argument {arg_name!r} must be {shown_module()}.Tensor, got "
                      f"{type(value).__module__}.{type(value).__qualname__}; convert it with "
                      f"{shown_module()}.as_tensor(x) (or {shown_module()}.from_numpy(x) to share a NumPy "
                      "array's memory)")
    error._rlpipe_not_a_tensor = True
    return error


def is_not_a_tensor_error(error):
    """Whether ``error`` is one that ``not_a_tensor_error`` made (an inner op already named the argument)."""
    return getattr(error, "_rlpipe_not_a_tensor", False)


def _hook_checking(fn, watched, public, write_out=None):
    """``fn`` behind the hook test of ``torch_function`` (and the ``out=`` branch), compiled from
    ``_CHECK``."""
    signature = inspect.signature(fn).parameters
    unknown = [w for w in watched if w not in signature]
    if unknown:
        raise ValueError(f"torch_function: {fn.__name__} has no argument named {unknown[0]!r}")
    params, args, kwargs, call = [], [], [], []
    for p in signature.values():
        if p.kind is p.VAR_POSITIONAL:
            params.append("*" + p.name)
            args.append("*" + p.name)
            call.append("*" + p.name)
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            kwargs.append("**" + p.name)
            call.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not any(q.startswith("*") for q in params):
                params.append("*")
            params.append(p.name if p.default is p.empty else p.name + "=None")  # defaults copied below
            kwargs.append(f"{p.name!r}: {p.name}")
            call.append(f"{p.name}={p.name}")
        else:
            params.append(p.name if p.default is p.empty else p.name + "=None")
            args.append(p.name)
            call.append(p.name)
    out_branch = ""
    if write_out is not None:
        out_branch = _OUT_BRANCH.format(args="".join(a + ", " for a in args), kwargs=", ".join(kwargs))
        if not any(q[0] == "*" and q[:2] != "**" for q in params):
            params.insert(len(params) - params[-1].startswith("**"), "*")
        params.insert(len(params) - params[-1].startswith("**"), "out=None")
        kwargs.append("'out': out")
    test = f"type({watched[0]}) is not Tensor" if len(watched) == 1 else \
        "(" + " or ".join(f"type({w}) not in NO_HOOK" for w in watched) + ")"
    source = _CHECK.format(name=fn.__name__, params=", ".join(params), test=test, watched=", ".join(watched),
                           args="".join(a + ", " for a in args), kwargs=", ".join(kwargs), call=", ".join(call),
                           out_branch=out_branch, watched_names=tuple(watched))
    namespace = {"Tensor": Tensor, "NO_HOOK": NO_HOOK, "has_torch_function": has_torch_function,
                 "handle_torch_function": handle_torch_function, "fn": fn, "write_out": write_out,
                 "not_a_tensor": _not_a_tensor}
    exec(compile(source, f"<torch_function check of {fn.__module__}.{fn.__qualname__}>", "exec"), namespace)
    wrapper = functools.update_wrapper(namespace[fn.__name__], fn)
    wrapper.__defaults__, wrapper.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    if write_out is not None:
        wrapper.__kwdefaults__ = {**(fn.__kwdefaults__ or {}), "out": None}
    namespace["public"] = wrapper if public is None else public
    return wrapper
