"""``Module``: the base class of every layer, policy and network.

The behaviour is PyTorch's ``torch.nn.Module``: attribute assignment registers parameters,
buffers and submodules; iteration yields them in registration order, shared ones once;
``state_dict``/``load_state_dict`` use dotted names; hooks run in ``_call_impl``'s order.

This module is ``Module``'s public home and holds its core: attributes, registration, lookup by
dotted path, hooks (global and per module) and ``__call__``. ``Module`` derives its iteration,
modes and device/dtype moves from ``_module_traversal`` and its ``state_dict``/``load_state_dict``
from ``_module_state``; ``_module_backward_hooks`` wires full backward hooks into the graph.
"""
import functools
import inspect
import itertools
import warnings
import weakref
from collections import OrderedDict

from ... import _dtypes
from ..._dispatch import is_not_a_tensor_error, not_a_tensor_error
from ..._tensor import Tensor, wrap
from ...autograd.function import as_array, null_context
from ...autograd.grad_mode import state as _grad_state
from ...utils.hooks import RemovableHandle
from ..parameter import Buffer, Parameter
from ._module_backward_hooks import BackwardHookFunction, _BackwardHook
from ._module_state import _EXTRA_STATE_KEY_SUFFIX, _IncompatibleKeys, _StateDictMixin  # noqa: F401 - re-exported
from ._module_traversal import _parse_to, _TraversalMixin  # noqa: F401 - re-exported

__all__ = ["register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_backward_hook",
           "register_module_full_backward_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook", "register_module_parameter_registration_hook", "Module"]

# the parts' classes name this module as theirs, as before the split (pickles record that path)
for _cls in (_IncompatibleKeys, BackwardHookFunction, _BackwardHook):
    _cls.__module__ = __name__
del _cls


# hooks that apply to every module
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()
_global_is_full_backward_hook = None
_global_buffer_registration_hooks = OrderedDict()
_global_module_registration_hooks = OrderedDict()
_global_parameter_registration_hooks = OrderedDict()

# a new value after every attribute assignment or deletion on any module: Sequential's cached inference
# plan (_inference_plan.py) was built for one value of it, and rebuilds when it changed. Each value is a
# fresh tick (next() on a count is atomic), set once the change is made: a plan built meanwhile, from
# a value read before it looked at the modules, can never match again.
_ticks = itertools.count(1)
attribute_epoch = [0]


def register_module_buffer_registration_hook(hook):
    """hook(module, name, buffer) runs whenever any module registers a buffer; a value it returns
    is registered instead."""
    return RemovableHandle.add(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook):
    """hook(module, name, submodule) runs whenever any module registers a submodule; a value it
    returns is registered instead."""
    return RemovableHandle.add(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook):
    """hook(module, name, param) runs whenever any module registers a parameter; a value it returns
    is registered instead."""
    return RemovableHandle.add(_global_parameter_registration_hooks, hook)


def _run_registration_hooks(hooks, module, name, value):
    for hook in hooks.values():
        output = hook(module, name, value)
        if output is not None:
            value = output
    return value


def register_module_forward_pre_hook(hook):
    """hook(module, args) runs before every module's forward; it may return new args."""
    return RemovableHandle.add(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) runs after every module's forward; it may return a new output."""
    handle = RemovableHandle(_global_forward_hooks,
                             extra_dict=[_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called])
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) runs for every module before its input gradients are computed; it
    may return a new grad_output."""
    return RemovableHandle.add(_global_backward_pre_hooks, hook)


def _set_global_backward_kind(full):
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
                           "Please use only one of them.")
    _global_is_full_backward_hook = full


def register_module_backward_hook(hook):
    """Deprecated (use register_module_full_backward_hook): hook(module, grad_input, grad_output) on
    the last node of every module's forward."""
    _set_global_backward_kind(False)
    return RemovableHandle.add(_global_backward_hooks, hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) runs for every module once its input gradients exist."""
    _set_global_backward_kind(True)
    return RemovableHandle.add(_global_backward_hooks, hook)


class _WrappedHook:
    """A hook called with its module prepended (when given one), which it refers to weakly, so a
    module's own hook tables do not keep it alive; it pickles with the module."""

    def __init__(self, hook, module=None):
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = module is not None
        if self.with_module:
            self.module = weakref.ref(module)

    def __call__(self, *args, **kwargs):
        if not self.with_module:
            return self.hook(*args, **kwargs)
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args, **kwargs)

    def __getstate__(self):
        state = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            state["module"] = self.module()
        return state

    def __setstate__(self, state):
        self.hook, self.with_module = state["hook"], state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


def _is_array(value):
    """Whether ``value`` is a NumPy (or CuPy) array: what a module gets where the caller forgot
    ``rlpipe.as_tensor``."""
    return not isinstance(value, Tensor) and any(c.__name__ == "ndarray" for c in type(value).__mro__)


def _array_argument(forward, args, kwargs):
    """``(name, value)`` of the first argument of ``forward`` that is an array (or holds one in a tuple or
    list, as an RNN's ``hx``), else None."""
    try:
        arguments = inspect.signature(forward).bind(*args, **kwargs).arguments
    except TypeError:  # the call did not even match the signature: name the inputs by position
        arguments = {**{f"input {i}": a for i, a in enumerate(args)}, **kwargs}
    for name, value in arguments.items():
        parts = value if isinstance(value, (tuple, list)) else (value,)
        found = next((part for part in parts if _is_array(part)), None)
        if found is not None:
            return name, found
    return None


def _raise_if_array_input(module, error, args, kwargs):
    """Where ``module``'s forward failed with ``error`` (an AttributeError or TypeError) and an input is a
    NumPy array, raises the TypeError the ops give for one (naming the argument, suggesting
    ``rlpipe.as_tensor``); returns where no input is an array or an inner op has already named it."""
    if is_not_a_tensor_error(error):
        return
    found = _array_argument(module.forward, args, kwargs)
    if found is None:
        return
    mistyped = not_a_tensor_error(f"{type(module).__name__}.forward", *found)
    # the array's own missing attribute leaves no doubt; any other failure stays attached as the cause
    raise mistyped from (None if getattr(error, "obj", None) is found[1] else error)


def _typename(obj):
    if type(obj) is Tensor:
        return f"{_dtypes.shown_module()}.Tensor"
    module = type(obj).__module__
    return type(obj).__name__ if module == "builtins" else module.split(".")[0] + "." + type(obj).__name__


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module(_TraversalMixin, _StateDictMixin):
    """Base class for all neural network modules: subclass it, create submodules and parameters
    in ``__init__`` after ``super().__init__()``, and compute in ``forward``."""
    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if not self.call_super_init and kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        if not self.call_super_init and args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} "
                            "were given")
        state = object.__setattr__
        state(self, "training", True)
        state(self, "_parameters", OrderedDict())
        state(self, "_buffers", OrderedDict())
        state(self, "_non_persistent_buffers_set", set())
        state(self, "_backward_pre_hooks", OrderedDict())
        state(self, "_backward_hooks", OrderedDict())
        state(self, "_is_full_backward_hook", None)
        state(self, "_forward_hooks", OrderedDict())
        state(self, "_forward_hooks_with_kwargs", OrderedDict())
        state(self, "_forward_hooks_always_called", OrderedDict())
        state(self, "_forward_pre_hooks", OrderedDict())
        state(self, "_forward_pre_hooks_with_kwargs", OrderedDict())
        state(self, "_state_dict_hooks", OrderedDict())
        state(self, "_state_dict_pre_hooks", OrderedDict())
        state(self, "_load_state_dict_pre_hooks", OrderedDict())
        state(self, "_load_state_dict_post_hooks", OrderedDict())
        state(self, "_modules", OrderedDict())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """The module's computation, which subclasses define; call the module (``m(x)``) rather than ``forward`` so that
        its hooks run."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- registration ------------------------------------------------------------------------
    def _check_new_name(self, kind, name, own):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f"{kind} name can't contain \".\"" + (f", got: {name}" if kind == "module" else ""))
        if name == "":
            raise KeyError(f"{kind} name can't be empty string \"\"")
        if hasattr(self, name) and name not in own:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a tensor that is state but not a parameter (e.g. running statistics); a
        non-persistent one is left out of ``state_dict``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(rlpipe Tensor or None required)")
        self._buffers[name] = _run_registration_hooks(_global_buffer_registration_hooks, self, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Adds a parameter (or None, a declared but absent parameter)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_new_name("parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(rlpipe.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             f"explicitly. To express '{name}' as a function of another Tensor, compute the value "
                             "in the forward() method.")
        self._parameters[name] = _run_registration_hooks(_global_parameter_registration_hooks, self, name, param)

    def add_module(self, name, module):
        """Adds a child module, reachable as an attribute called ``name``."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_new_name("module", name, self._modules)
        self._modules[name] = _run_registration_hooks(_global_module_registration_hooks, self, name, module)

    def register_module(self, name, module):
        """``add_module(name, module)`` under torch's other name."""
        self.add_module(name, module)

    def __setattr__(self, name, value):
        try:
            self._set_module_attribute(name, value)
        finally:
            attribute_epoch[0] = next(_ticks)

    def _set_module_attribute(self, name, value):
        def remove_from(*containers):
            for c in containers:
                if name in c:
                    if isinstance(c, dict):
                        del c[name]
                    else:
                        c.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(rlpipe.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = _run_registration_hooks(_global_module_registration_hooks, self, name, value)
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(rlpipe.nn.Module or None expected)")
                modules[name] = _run_registration_hooks(_global_module_registration_hooks, self, name, value)
            else:
                buffers = self.__dict__.get("_buffers")
                if isinstance(value, Buffer) or buffers is not None and name in buffers:
                    if buffers is None:
                        raise AttributeError("cannot assign buffer before Module.__init__() call")
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(rlpipe.nn.Buffer, rlpipe.Tensor or None expected)")
                    persistent = value.persistent if isinstance(value, Buffer) else \
                        name not in self._non_persistent_buffers_set
                    self._register_buffer_compat(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def _register_buffer_compat(self, name, value, persistent):
        # a subclass may override register_buffer(name, tensor) without ``persistent``, as torch allows
        register = self.register_buffer
        if getattr(register, "__func__", None) is Module.register_buffer or \
                "persistent" in inspect.signature(register).parameters:
            register(name, value, persistent)
        elif not persistent:
            raise RuntimeError("Registering a non-persistent buffer on a Module subclass that implements "
                               "register_buffer() without the persistent argument is not allowed.")
        else:
            register(name, value)

    def __getattr__(self, name):
        # only called when normal lookup fails: parameters, buffers and modules live in their dicts
        d = self.__dict__
        if "_parameters" in d:
            for table in (d["_parameters"], d["_buffers"], d["_modules"]):
                if name in table:
                    return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        try:
            self._delete_module_attribute(name)
        finally:
            attribute_epoch[0] = next(_ticks)

    def _delete_module_attribute(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = dir(type(self)) + list(self.__dict__) + list(self._parameters) + list(self._modules) + \
            list(self._buffers)
        return sorted(k for k in keys if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)
        # a module pickled by an older version may lack some of the tables
        for name in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                     "_forward_hooks_always_called", "_state_dict_hooks", "_state_dict_pre_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks", "_backward_pre_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        self.__dict__.setdefault("_non_persistent_buffers_set", set())
        self.__dict__.setdefault("_is_full_backward_hook", None)

    # ---- lookup by dotted path ----------------------------------------------------------------
    def _get_name(self):
        return type(self).__name__

    def get_submodule(self, target):
        """The module at a dotted path such as ``"net.0"`` (``""`` is this module)."""
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def set_submodule(self, target, module, strict=False):
        """Replaces (or, unless ``strict``, adds) the submodule at a dotted path."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        """The Parameter at the dotted path ``target`` ("block.0.weight"); AttributeError naming the missing part."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at the dotted path ``target`` ("norm.running_mean"); AttributeError naming the missing part."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        if name not in module._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return getattr(module, name)

    # ---- hook registration ----------------------------------------------------------------------
    @staticmethod
    def _add_hook(table, hook, prepend=False, extra=()):
        handle = RemovableHandle(table, extra_dict=list(extra))
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args; with_kwargs: hook(module, args, kwargs) -> None or
        (new_args, new_kwargs)."""
        handle = self._add_hook(self._forward_pre_hooks, hook, prepend, [self._forward_pre_hooks_with_kwargs])
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) -> None or a new output (with_kwargs: hook(module, args, kwargs,
        output)); always_call: runs even when forward raises."""
        handle = self._add_hook(self._forward_hooks, hook, prepend,
                                [self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, before the module's input gradients
        are computed."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input, once the gradients with
        respect to the module's inputs are computed."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = True
        return self._add_hook(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """Deprecated: hook(module, grad_input, grad_output) on the last op of forward only; prefer
        register_full_backward_hook."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = False
        return self._add_hook(self._backward_hooks, hook)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars) runs before state_dict collects anything."""
        return self._add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, may edit state_dict in place."""
        hook._from_public_api = True
        return self._add_hook(self._state_dict_hooks, hook)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """As register_load_state_dict_pre_hook, but the hook gets the module first only with
        ``with_module``."""
        return self._add_hook(self._load_state_dict_pre_hooks, _WrappedHook(hook, self if with_module else None))

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) runs before this module loads its entries."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None runs after load_state_dict."""
        return self._add_hook(self._load_state_dict_post_hooks, hook)

    # ---- calling ----------------------------------------------------------------------------------
    def _call_impl(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks
                or _global_forward_hooks or _global_forward_pre_hooks or _global_backward_hooks
                or _global_backward_pre_hooks):
            try:
                return self.forward(*args, **kwargs)
            except (AttributeError, TypeError) as error:
                _raise_if_array_input(self, error, args, kwargs)
                raise
        result = None
        called_always = set()

        def run():
            nonlocal result, args, kwargs
            full_hooks, plain_hooks = self._backward_hook_lists()
            pre_hooks = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
            for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    out = hook(self, args, kwargs)
                    if out is not None:
                        if not (isinstance(out, tuple) and len(out) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {out}.")
                        args, kwargs = out
                else:
                    out = hook(self, args)
                    if out is not None:
                        args = out if isinstance(out, tuple) else (out,)
            backward_hook = None
            if full_hooks or pre_hooks:
                backward_hook = _BackwardHook(self, full_hooks, pre_hooks)
                args = backward_hook.setup_input_hook(args)
            try:
                result = self.forward(*args, **kwargs)
            except (AttributeError, TypeError) as error:
                _raise_if_array_input(self, error, args, kwargs)
                raise
            for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                    called_always.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
                    out = hook(self, args, kwargs, result)
                else:
                    out = hook(self, args, result)
                if out is not None:
                    result = out
            if backward_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple of "
                                  f"Tensors but received {type(result)}", stacklevel=2)
                result = backward_hook.setup_output_hook(result)
            if plain_hooks:
                first = result
                while not isinstance(first, Tensor):
                    first = next(v for v in first.values() if isinstance(v, Tensor)) if isinstance(first, dict) \
                        else first[0]
                if first.grad_fn is not None:
                    for hook in plain_hooks:
                        first.grad_fn.register_hook(_WrappedHook(hook, self))
                    self._warn_non_full_backward_hook(args, result, first.grad_fn)
            return result

        try:
            return run()
        except Exception:
            for table, always, with_kwargs in (
                    (_global_forward_hooks, _global_forward_hooks_always_called, _global_forward_hooks_with_kwargs),
                    (self._forward_hooks, self._forward_hooks_always_called, self._forward_hooks_with_kwargs)):
                for hook_id, hook in table.items():
                    if hook_id in always and hook_id not in called_always:
                        try:
                            out = hook(self, args, kwargs, result) if hook_id in with_kwargs else \
                                hook(self, args, result)
                            if out is not None:
                                result = out
                        except Exception as e:
                            warnings.warn("forward hook with ``always_call=True`` raised an exception that was "
                                          f"silenced as another error was raised in forward: {e}", stacklevel=2)
            raise

    __call__ = _call_impl

    @staticmethod
    def _warn_non_full_backward_hook(inputs, result, grad_fn):
        """torch's FutureWarnings where a legacy backward hook will see only part of the gradients."""
        def warn(subject, missing, hint=True):
            warnings.warn(f"Using {subject} is deprecated and will be removed in future versions. This hook will be "
                          f"missing some {missing}." + (" Please use register_full_backward_hook to get the "
                                                        "documented behavior." if hint else ""),
                          FutureWarning, stacklevel=5)
        result = (result,) if isinstance(result, Tensor) else result
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            return warn("non-full backward hooks on a Module that does not return a single Tensor or a tuple of "
                        "Tensors", "of the grad_output")
        if not all(isinstance(i, Tensor) for i in inputs):
            return warn("non-full backward hooks on a Module that does not take as input a single Tensor or a tuple "
                        "of Tensors", "of the grad_input")
        out_nodes = {r.grad_fn for r in result if r.grad_fn is not None}
        if not out_nodes or len(out_nodes) == 1 and grad_fn not in out_nodes:
            warn("a non-full backward hook when outputs are nested in python data structure", "grad_output", False)
        elif len(out_nodes) > 1:
            warn("a non-full backward hook when outputs are generated by different autograd Nodes", "grad_output")
        elif {i.grad_fn for i in inputs if i.grad_fn is not None} != {n for n, _ in grad_fn.next_functions}:
            warn("a non-full backward hook when the forward contains multiple autograd Nodes", "grad_input")

    def _backward_hook_lists(self):
        full, plain = [], []
        for is_full, hooks in ((_global_is_full_backward_hook, _global_backward_hooks),
                               (self._is_full_backward_hook, self._backward_hooks)):
            if is_full is True:
                full += hooks.values()
            elif is_full is False:
                plain += hooks.values()
        return full, plain

    # ---- compile ----------------------------------------------------------------------------------
    def compile(self, *args, **kwargs):
        """rlpipe has no compiler: this keeps ``forward`` as it is and warns (PyTorch's compile would
        trace and optimize it in place)."""
        warnings.warn("Module.compile(): rlpipe has no compiler; the module runs unchanged", UserWarning, stacklevel=2)

    # ---- printing ---------------------------------------------------------------------------------
    def extra_repr(self):
        """Override to describe the module's settings inside its repr."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = ["(" + key + "): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


def run_without_graph(modules, input):
    """``modules`` applied in turn to ``input`` on raw backend arrays, wrapped into a Tensor once at
    the end, or None when this inference fast path does not apply (the caller then runs the modules
    as usual, which also raises any error the inputs deserve).

    It applies with grad disabled, to a floating-point input, when every module's own class defines
    ``_inference_op(dtype, device)`` (giving the raw Function and its extra arguments: the same
    forward the usual path runs) and no hook or patched ``forward`` is anywhere in the way. A batch-1
    MLP policy then costs about NumPy's own time rather than several Tensors and calls per layer.
    """
    if _grad_state.grad or type(input) is not Tensor or _global_forward_pre_hooks or _global_forward_hooks:
        return None
    steps = inference_steps(modules, input._data.dtype, input._device)
    return None if steps is None else run_steps(steps, input, null_context(input._device._backend))


def inference_steps(modules, dtype, device):
    """[(a Function's forward, its extra arguments)] of ``modules``' ``_inference_op``s for an input
    of ``dtype`` on ``device``, or None when one of them has none, or a hook, a patched ``forward``
    or a parameter that is not a Tensor (vmap's batched ones, swapped in by ``functional_call``) is
    in the way."""
    if dtype.kind != "f":
        return None
    steps = []
    for m in modules:
        op = type(m).__dict__.get("_inference_op")
        if op is None or m._forward_hooks or m._forward_pre_hooks or "forward" in m.__dict__ or \
                not all(isinstance(p, Tensor) for p in m._parameters.values() if p is not None):
            return None
        step = op(m, dtype, device)
        if step is None:
            return None
        steps.append((step[0].forward, step[1]))
    return steps


def run_steps(steps, input, ctx):
    """``inference_steps``' result applied to ``input``'s array (``ctx``: the backend's null context),
    wrapped once; None where NumPy (or CuPy) refuses the shapes: the usual path then reruns these
    pure ops and raises torch's error (Function.apply translates the same two). Any other error is a
    bug here, so it propagates."""
    x = input._data
    try:
        for forward, extra in steps:
            x = forward(ctx, x, *extra)
    except (ValueError, TypeError):
        return None
    device = input._device
    return wrap(x if type(x) is device._backend.ndarray else as_array(x, device), device)
