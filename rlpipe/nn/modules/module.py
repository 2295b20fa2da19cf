"""``Module``: the base class of every layer, policy and network.

The behaviour is PyTorch's ``torch.nn.Module``: attribute assignment registers parameters,
buffers and submodules; iteration yields them in registration order, shared ones once;
``state_dict``/``load_state_dict`` use dotted names; hooks run in ``_call_impl``'s order.
"""
import functools
import inspect
import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ... import __future__ as _future
from ... import _dtypes
from ..._tensor import Tensor, wrap
from ...autograd.function import Function, as_array, null_context
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...autograd.grad_mode import state as _grad_state
from ...utils.hooks import RemovableHandle
from ..parameter import Buffer, Parameter, is_lazy

__all__ = ["register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_backward_hook",
           "register_module_full_backward_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook", "register_module_parameter_registration_hook", "Module"]

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"

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


def _typename(obj):
    if type(obj) is Tensor:
        return f"{_dtypes.shown_module()}.Tensor"
    module = type(obj).__module__
    return type(obj).__name__ if module == "builtins" else module.split(".")[0] + "." + type(obj).__name__


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
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
        self.add_module(name, module)

    def __setattr__(self, name, value):
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
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        if name not in module._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return getattr(module, name)

    def get_extra_state(self):
        """Override (with set_extra_state) to keep extra state in ``state_dict``."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    # ---- iteration ----------------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else \
            [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + "." if module_prefix else "") + name, value

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    # ---- modes and gradients ------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:  # zeroed in place: the same tensor stays p.grad
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def apply(self, fn):
        """Calls ``fn`` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- moving and casting -------------------------------------------------------------------
    def _replicate_for_data_parallel(self):
        """A shallow replica as torch's DataParallel makes one: it shares the submodules and buffers dicts'
        contents but holds no parameters of its own (the caller sets them, usually as views)."""
        replica = self.__new__(type(self))
        replica.__dict__ = self.__dict__.copy()
        replica._parameters = {}
        replica._buffers = replica._buffers.copy()
        replica._modules = replica._modules.copy()
        replica._is_replica = True
        return replica

    def _apply(self, fn, recurse=True):
        """Applies ``fn`` to every parameter, gradient and buffer. Parameters keep their identity
        (their data is swapped), so optimizers holding them stay valid."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        overwrite = _future.get_overwrite_module_params_on_conversion() and \
            not _future.get_swap_module_params_on_conversion()
        with no_grad():
            for key, param in self._parameters.items():
                if param is None:
                    continue
                if overwrite:  # rlpipe.__future__'s switch: new Parameter objects, as torch makes them
                    new = Parameter(fn(param), requires_grad=param.requires_grad)
                    if param.grad is not None:
                        new.grad = fn(param.grad).requires_grad_(param.grad.requires_grad)
                    self._parameters[key] = new
                    continue
                param.data = fn(param)
                if param.grad is not None:
                    param.grad.data = fn(param.grad)
            for key, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(tensor)``, ``to(device, dtype, non_blocking)``: only
        floating parameters and buffers change dtype."""
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)
        return self._apply(convert)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def _unsupported(self, kind):
        raise RuntimeError(f"rlpipe does not support {kind} devices; use cpu() or cuda()")

    def ipu(self, device=None):
        self._unsupported("IPU")

    def xpu(self, device=None):
        self._unsupported("XPU")

    def mtia(self, device=None):
        self._unsupported("MTIA")

    def _cast_floating(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self):
        return self._cast_floating(_dtypes.float32)

    def double(self):
        return self._cast_floating(_dtypes.float64)

    def half(self):
        return self._cast_floating(_dtypes.float16)

    def bfloat16(self):
        return self._cast_floating(_dtypes.bfloat16)

    def type(self, dst_type):
        """Casts every parameter and buffer (integer ones too) to ``dst_type``."""
        return self._apply(lambda t: t.to(dst_type))

    def to_empty(self, *, device, recurse=True):
        """Moves to ``device`` without copying values (they are uninitialized afterwards)."""
        from rlpipe._creation import empty_like
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def share_memory(self):
        return self._apply(lambda t: t.share_memory_())

    # ---- state_dict -----------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer by dotted name (detached unless
        ``keep_vars``)."""
        if args:  # the deprecated positional form (destination, prefix, keep_vars)
            warnings.warn("Positional args are being deprecated, use kwargs instead.", FutureWarning, stacklevel=2)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if is_lazy(param):  # a lazy module's placeholder that received a placeholder: nothing to copy
                continue
            if not isinstance(value, Tensor):
                # torch's words (its tests match them); rlpipe.Tensor is what rlpipe wants there
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(value)} (an rlpipe.Tensor is needed)")
                continue
            if param.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:  # an old checkpoint's format
                value = value[0]
            if value.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                                  f"the shape in current model is {param.shape}.")
                continue
            try:
                with no_grad():
                    if assign and _future.get_swap_module_params_on_conversion():
                        param.data = value.detach()  # the object stays, the checkpoint's data comes in
                    elif assign:
                        if isinstance(param, Parameter):
                            value = value.requires_grad_(param.requires_grad) if isinstance(value, Parameter) \
                                else Parameter(value, requires_grad=param.requires_grad)
                        setattr(self, name, value)
                    else:
                        param.copy_(value)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.size()} and whose dimensions in the checkpoint are {value.size()}, an "
                                  f"exception occurred : {ex.args}.")
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    head, _, rest = key[len(prefix):].partition(".")
                    if rest and head not in self._modules or not rest and head not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies parameters and buffers from ``state_dict``. Returns (missing_keys, unexpected_keys);
        with ``strict`` any of those, like a shape mismatch, raises one RuntimeError listing all."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, local_state, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state, prefix, local_metadata, True, missing_keys, unexpected_keys,
                                         error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state.items() if k.startswith(child_prefix)}, child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise RuntimeError("Hooks registered with ``register_load_state_dict_post_hook`` are not expected "
                                       "to return new values, if incompatible_keys need to be modified, it should be "
                                       "done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

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
            return self.forward(*args, **kwargs)
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
            result = self.forward(*args, **kwargs)
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


_TO_TAIL = "bool non_blocking = False, bool copy = False, *, memory_format memory_format = None)"
_TO_SIGNATURES = ("({m}.device device = None, {m}.dtype dtype = None, " + _TO_TAIL,
                  "({m}.dtype dtype, " + _TO_TAIL, "(Tensor tensor, " + _TO_TAIL)


def _parse_to(*args, **kwargs):
    """(device, dtype) from Tensor.to's three forms: ``(device, dtype, non_blocking, copy)``,
    ``(dtype, non_blocking, copy)`` and ``(tensor, non_blocking, copy)``; any other combination
    raises torch's TypeError."""
    from rlpipe._device import device as device_cls

    def type_name(a):
        if type(a) in (device_cls, _dtypes.dtype):
            return f"{_dtypes.shown_module()}.{type(a).__name__}"
        return "Tensor" if isinstance(a, Tensor) else type(a).__name__

    if len(args) > 4:
        raise TypeError(f"to() takes from 0 to 4 positional arguments but {len(args)} were given")
    first = args[0] if args else None
    names = ("tensor" if isinstance(first, Tensor) else "dtype" if isinstance(first, _dtypes.dtype) else "device",
             "non_blocking", "copy")
    if names[0] == "device":
        names = ("device", "dtype") + names[1:]
    given = dict(zip(names, args))
    checks = {"tensor": lambda v: isinstance(v, Tensor), "device": lambda v: isinstance(v, (str, int, device_cls)),
              "dtype": lambda v: isinstance(v, _dtypes.dtype), "non_blocking": lambda v: isinstance(v, bool),
              "copy": lambda v: isinstance(v, bool), "memory_format": lambda v: True}
    valid = len(args) <= len(names) and not set(given) & set(kwargs) and set(kwargs) <= set(checks) - {"tensor"}
    given.update(kwargs)
    if not valid or "tensor" in given and {"device", "dtype"} & set(kwargs) or \
            not all(v is None and k in ("device", "dtype", "memory_format") or checks[k](v) for k, v in given.items()):
        got = ", ".join([type_name(a) for a in args] + [f"{k}={type_name(v)}" for k, v in kwargs.items()])
        raise TypeError(f"to() received an invalid combination of arguments - got ({got}), but expected one of:\n"
                        + "\n".join(" * " + s.format(m=_dtypes.shown_module()) for s in _TO_SIGNATURES))
    if given.get("copy"):
        raise RuntimeError(".to() does not accept copy argument")
    if "tensor" in given:
        return given["tensor"].device, given["tensor"].dtype
    return given.get("device"), given.get("dtype")


class BackwardHookFunction(Function):
    """An identity op around a module's inputs and outputs whose node carries the module's backward
    hooks: the output node sees grad_output, the input node grad_input."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads

    def name(self):
        return "BackwardHookFunctionBackward"


class _BackwardHook:
    """Wires a module's full backward (pre-)hooks through BackwardHookFunction nodes, as torch's
    utils.hooks.BackwardHook does."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_index = self.output_index = None

    @staticmethod
    def _pack(indices, values, size):
        out = [None] * size
        for i, v in zip(indices, values):
            out[i] = v
        return tuple(out)

    def _wrap_tensors(self, on_node, args):
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (any(t.requires_grad for t in tensors) and is_grad_enabled()):
            return args, None
        wrapped = BackwardHookFunction.apply(*tensors)
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        node = next(t.grad_fn for t in wrapped if t.grad_fn is not None)
        on_node(node)
        out = list(args)
        for i, t in zip(index, wrapped):
            out[i] = t
        return tuple(out), index

    def setup_input_hook(self, args):
        def on_node(node):
            def hook(grad_input, _):
                if self.grad_outputs is None:
                    return None
                result = self._pack(self.input_index, grad_input, self.n_inputs)
                for user_hook in self.user_hooks:
                    out = user_hook(self.module, result, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(result):
                        raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(out)}, "
                                           f"but expected {len(result)}")
                    result = out
                self.grad_outputs = None
                return tuple(result[i] for i in self.input_index)
            node.register_hook(hook)
        wrapped, self.input_index = self._wrap_tensors(on_node, args)
        self.n_inputs = len(args)
        return wrapped

    def setup_output_hook(self, result):
        def on_node(node):
            def hook(_, grad_output):
                self.grad_outputs = self._pack(self.output_index, grad_output, self.n_outputs)
                for pre_hook in self.user_pre_hooks:
                    out = pre_hook(self.module, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(self.grad_outputs):
                        raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                           f"{len(out)}, but expected {len(self.grad_outputs)}")
                    self.grad_outputs = out
                local = self.grad_outputs
                if self.input_index is None:  # no input needs a gradient: the hooks run now
                    for user_hook in self.user_hooks:
                        out = user_hook(self.module, self._pack([], [], self.n_inputs), self.grad_outputs)
                        if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
                            raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                               "always return None or None for all gradients.")
                    self.grad_outputs = None
                return tuple(local[i] for i in self.output_index)
            node.register_hook(hook)
        single = not isinstance(result, tuple)
        wrapped, self.output_index = self._wrap_tensors(on_node, (result,) if single else result)
        self.n_outputs = 1 if single else len(result)
        return wrapped[0] if single else wrapped


def run_without_graph(modules, input):
    """``modules`` applied in turn to ``input`` on raw backend arrays, wrapped into a Tensor once at
    the end, or None when this inference fast path does not apply (the caller then runs the modules
    as usual, which also raises any error the inputs deserve).

    It applies with grad disabled, to a floating-point input, when every module's own class defines
    ``_inference_op(dtype, device)`` (giving the raw Function and its extra arguments: the same
    forward the usual path runs) and no hook or patched ``forward`` is anywhere in the way. A batch-1
    MLP policy then costs about NumPy's own time rather than several Tensors and calls per layer.
    """
    if _grad_state[0] or type(input) is not Tensor or _global_forward_pre_hooks or _global_forward_hooks:
        return None
    x = input._data
    if x.dtype.kind != "f":
        return None
    dtype, device = x.dtype, input._device
    ctx = null_context(device._backend)
    try:
        for m in modules:
            op = type(m).__dict__.get("_inference_op")
            if op is None or m._forward_hooks or m._forward_pre_hooks or "forward" in m.__dict__:
                return None
            step = op(m, dtype, device)
            if step is None:
                return None
            x = step[0].forward(ctx, x, *step[1])
    except (ValueError, TypeError):
        # NumPy's (or CuPy's) words for a bad shape: the usual path reruns these pure ops and raises torch's
        # error (Function.apply translates the same two). Any other error is a bug here, so it propagates.
        return None
    return wrap(as_array(x, device), device)
