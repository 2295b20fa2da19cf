"""``TensorDictModule`` and ``TensorDictSequential``: modules that read and write TensorDict entries.

The behaviour is tensordict.nn's (0.14):

* ``TensorDictModule(module, in_keys, out_keys)`` reads ``in_keys`` from the tensordict it is called
  with, calls ``module(*values)`` and writes the output(s) to ``out_keys`` of the same tensordict
  (in place), which it returns. It is an ``rlpipe.nn.Module`` whose child is ``module``, so
  ``parameters()``, ``state_dict()`` (``"module.weight"`` ...) and ``to(...)`` reach the wrapped network.
* ``TensorDictSequential(*modules)`` runs TensorDictModules (or any callable taking and returning a
  tensordict) one after the other on the same tensordict. Its ``in_keys`` are the keys it needs from
  outside (read by a module and not written by an earlier one) and its ``out_keys`` everything written.
* Both accept plain tensors instead of a tensordict (tensordict's ``dispatch``): ``module(x)`` or
  ``module(obs=x)`` returns the output tensor, or a tuple of them in ``out_keys`` order.

Keys are strings or tuples of strings (nested entries); ``("a", ("b", "c"))`` and ``("a",)`` are
unravelled to ``("a", "b", "c")`` and ``"a"`` as tensordict's ``unravel_key`` does.
"""
import collections
import collections.abc
from textwrap import indent

from ..._device import device as _device
from ..._tensor import Tensor
from ...nn.modules.container import ModuleDict, ModuleList
from ...nn.modules.module import Module
from ..keys import unravel_key, unravel_key_list

__all__ = ["TensorDictModule", "TensorDictModuleBase", "TensorDictSequential", "WrapModule", "unravel_key",
           "unravel_key_list"]

_MISSING = object()


# ---------------------------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------------------------
def _key_list(keys, what):
    """A list of unravelled keys from a key or a list/tuple-of-keys argument."""
    err = (f"{what} must be of type list, str or tuples of str." if what == "out_keys" else
           f"{what} must be of type list, str or tuples of str, or dict.")
    if isinstance(keys, (str, tuple)):
        # a tuple is one nested key, as in tensordict ("a", "b") is the entry td["a", "b"]
        keys = [keys]
    elif not isinstance(keys, collections.abc.Sequence) or isinstance(keys, (bytes, bytearray)):
        raise ValueError(err)  # noqa: TRY004 - tensordict raises ValueError for bad key lists
    try:
        return unravel_key_list(list(keys))
    except TypeError:
        raise ValueError(err) from None


def _dispatch_name(key):
    """The keyword that stands for a key in a dispatched call: nested parts joined by '_'."""
    return key if isinstance(key, str) else "_".join(key)


# ---------------------------------------------------------------------------------------------
# tensordict helpers (the TensorDict class is imported lazily: rlpipe.tensordict imports this file)
# ---------------------------------------------------------------------------------------------
_TD_CLASSES = []  # filled on first use: rlpipe.tensordict imports this file


def _td_classes():
    if not _TD_CLASSES:
        from rlpipe.tensordict import _td  # absolute: see rlpipe.tensordict.TensorDict.pad
        names = ("TensorDictBase", "TensorDict")
        _TD_CLASSES.append(tuple(getattr(_td, n) for n in names if isinstance(getattr(_td, n, None), type)))
    return _TD_CLASSES[0]


def is_tensor_collection(obj):
    """True for TensorDict instances (and objects that walk like one)."""
    if isinstance(obj, _td_classes()):
        return True
    if isinstance(obj, Tensor) or obj is None:
        return False
    return all(hasattr(obj, name) for name in ("batch_size", "keys", "get", "set"))


def _new_td(values=None, batch_size=()):
    from rlpipe.tensordict._td import TensorDict
    td = TensorDict({}, batch_size=list(batch_size))
    for key, value in (values or {}).items():
        td.set(key, value)
    return td


def _shallow_copy(td):
    """A new tensordict holding the same tensors, so that writes to it leave ``td``'s keys alone."""
    copy = getattr(td, "copy", None)
    if copy is not None:
        return copy()
    return td.clone(recurse=False)


def _has(td, key):
    return td.get(key, _MISSING) is not _MISSING


def _update(dst, src, keys):
    """dst[key] = src[key] for each key of ``keys`` that ``src`` holds; returns dst."""
    for key in keys:
        value = src.get(key, _MISSING)
        if value is not _MISSING:
            dst.set(key, value)
    return dst


# ---------------------------------------------------------------------------------------------
# modules
# ---------------------------------------------------------------------------------------------
class TensorDictModuleBase(Module):
    """Base class of the modules that read ``in_keys`` and write ``out_keys`` of a tensordict:
    ``forward(tensordict) -> tensordict``."""
    in_keys = ()
    out_keys = ()

    @staticmethod
    def is_tdmodule_compatible(module):
        """Whether ``module`` declares ``in_keys`` and ``out_keys``."""
        return hasattr(module, "in_keys") and hasattr(module, "out_keys")

    @property
    def device(self):
        """The device of the module's first parameter (None without parameters)."""
        for p in self.parameters():
            return p.device
        return _device("cpu")

    def _dispatch(self, args, kwargs):
        """(tensordict, remaining args, remaining kwargs, dispatched) from a call: a tensordict as the
        first argument (or ``tensordict=``), or tensors for the ``in_keys`` as positional arguments in
        order and/or keywords (nested parts joined by ``_``)."""
        if args and is_tensor_collection(args[0]):
            return args[0], args[1:], kwargs, False
        if not args and is_tensor_collection(kwargs.get("tensordict")):
            kwargs = dict(kwargs)
            return kwargs.pop("tensordict"), (), kwargs, False
        kwargs = dict(kwargs)
        values = {}
        args = list(args)
        for key in self.in_keys:
            name = _dispatch_name(key)
            if args:
                if name in kwargs:
                    raise RuntimeError(f"Duplicated argument in args and kwargs: {name!r}.")
                values[key] = args.pop(0)
            elif name in kwargs:
                values[key] = kwargs.pop(name)
        return _new_td(values), tuple(args), kwargs, True

    def _dispatch_result(self, tensordict):
        out = tuple(tensordict[key] for key in self.out_keys)
        return out[0] if len(out) == 1 else out

    def reset_parameters_recursive(self):
        """Calls ``reset_parameters()`` on every submodule that has one."""
        any_reset = False
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()
                any_reset = True
        return any_reset

    def __repr__(self):
        return f"{type(self).__name__}()"


class TensorDictModule(TensorDictModuleBase):
    """Wraps a callable (typically an ``nn.Module``) so that it reads its inputs from, and writes its
    outputs to, a TensorDict.

    Args:
        module: the callable; it gets the ``in_keys`` values as positional arguments (in order) and
            returns a tensor, a tuple of tensors (one per out-key), or a dict / tensordict holding the
            out-keys.
        in_keys: a key (``"obs"``, ``("agent", "obs")``) or a list of them. A dict maps keyword
            argument names to keys (``{"x": "obs"}``; with ``out_to_in_map=False``, keys to names).
        out_keys: a key or a list of them, as many as the module returns; ``"_"`` discards an output.

    Keyword Args:
        out_to_in_map (bool): how a dict ``in_keys`` is read (see above). Defaults to ``True``.
        inplace (bool or "empty"): ``True`` (default) writes to the given tensordict; ``False`` to a new
            empty TensorDict (empty batch size); ``"empty"`` to ``tensordict.empty()``.
        method (str): the method of ``module`` to call instead of ``__call__``.
        method_kwargs (dict): extra keyword arguments for that call.
        strict (bool): if ``True`` a missing in-key raises ``KeyError`` before the call. If ``False``
            (default, as tensordict) ``None`` is passed in its place, and if the module then fails the
            error is a ``KeyError`` naming the missing keys.

    Example:
        >>> module = TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
        >>> td = module(TensorDict({"obs": rlpipe.randn(4, 3)}, batch_size=[4]))
        >>> td["action"].shape
        rlpipe.Size([4, 2])
    """
    _IN_KEY_ERR = "in_keys must be of type list, str or tuples of str, or dict."
    _OUT_KEY_ERR = "out_keys must be of type list, str or tuples of str."

    def __init__(self, module, in_keys, out_keys, *, out_to_in_map=None, inplace=True, method=None,
                 method_kwargs=None, strict=False, get_kwargs=None):
        super().__init__()
        if isinstance(in_keys, collections.abc.Mapping):
            if out_to_in_map is None:
                out_to_in_map = True
            kwarg_names, keys = [], []
            for k, v in in_keys.items():
                name, key = (k, v) if out_to_in_map else (v, k)
                kwarg_names.append(name)
                keys.append(key)
            in_keys = keys
            self._kwargs = kwarg_names
        else:
            if out_to_in_map is not None:
                import warnings
                warnings.warn("out_to_in_map is not None but is only used when in_key is a dictionary.",
                              stacklevel=2)
            self._kwargs = None
        in_keys = _key_list(in_keys, "in_keys")
        out_keys = _key_list(out_keys, "out_keys")
        if isinstance(module, type) or (method is None and not callable(module)):
            raise ValueError(f"Module {module} of type {type(module)} is not callable. Typical accepted types are "
                             "nn.Module or TensorDictModule. If you need to call a specific method from your module, "
                             "pass the `method` keyword argument to the TensorDictModule constructor.")
        if method is not None and not callable(getattr(module, method, None)):
            raise ValueError(f"{type(module).__name__} has no method {method!r}")
        if inplace not in (None, True, False, "empty"):
            raise ValueError("The only accepted valued for inplace is `None`, `True`, `False`, or `'empty'`. "
                             f"Got inplace={inplace} instead.")
        if "_" in in_keys:
            import warnings
            warnings.warn('key "_" is for ignoring output, it should not be used in input keys', stacklevel=2)
        self.in_keys = in_keys
        self.out_keys = out_keys
        self._out_keys_source = list(out_keys)
        self.module = module
        self.inplace = inplace
        self.method = method
        self.method_kwargs = dict(method_kwargs or {})
        self.strict = strict
        self._get_kwargs = dict(get_kwargs or {})

    # ---- out-key selection -------------------------------------------------------------------
    @property
    def out_keys_source(self):
        """The out-keys the module was built with (``out_keys`` may be a selection of them)."""
        return self._out_keys_source

    def select_out_keys(self, *out_keys):
        """Writes only these out-keys from now on (in place; undone by ``reset_out_keys``)."""
        out_keys = unravel_key_list(out_keys)
        missing = [k for k in out_keys if k not in self._out_keys_source]
        if missing:
            raise ValueError(f"Some keys are not part of the module out_keys: {missing} "
                             f"(out_keys={self._out_keys_source}).")
        self.out_keys = out_keys
        return self

    def reset_out_keys(self):
        """Restores the out_keys given at construction."""
        self.out_keys = list(self._out_keys_source)
        return self

    # ---- the call ----------------------------------------------------------------------------
    def _call_module(self, tensors, **kwargs):
        kwargs.update(self.method_kwargs)
        # a Module is a submodule: read from the table, without Module.__getattr__'s lookup chain
        module = self._modules.get("module")
        if module is None:  # a plain callable, stored as an attribute
            module = self.module
        if self.method is None:
            return module(*tensors, **kwargs)
        return getattr(module, self.method)(*tensors, **kwargs)

    def _read(self, tensordict, key):
        value = tensordict.get(key, _MISSING, **self._get_kwargs)
        if value is _MISSING:
            if self.strict:
                raise KeyError(f"key {key!r} not found in the input tensordict (keys: "
                               f"{sorted(map(str, tensordict.keys(include_nested=True)))}); "
                               f"{type(self).__name__} needs in_keys={self.in_keys}.")
            return None
        return value

    def _write_to_tensordict(self, tensordict, tensors, tensordict_out=None):
        if tensordict_out is None:
            if self.inplace is True or self.inplace is None:
                tensordict_out = tensordict
            elif self.inplace == "empty":
                tensordict_out = tensordict.empty()
            else:
                tensordict_out = _new_td()
        source = self._out_keys_source
        if len(tensors) != len(source):
            raise RuntimeError(
                f"{type(self).__name__}: the module returned {len(tensors)} "
                f"{'value' if len(tensors) == 1 else 'values'} but there "
                f"{'is' if len(source) == 1 else 'are'} {len(source)} out_keys ({source}); "
                "return one tensor per out-key (use '_' as the out-key of an output to discard).")
        selected = self.out_keys
        for key, value in zip(source, tensors):
            if key != "_" and key in selected:
                tensordict_out.set(key, value)
        return tensordict_out

    def forward(self, *args, tensordict_out=None, **kwargs):
        """``forward(tensordict, *, tensordict_out=None, **kwargs)``: reads the in-keys, calls the module
        (``kwargs`` are passed on to it) and writes the out-keys; returns the tensordict written to."""
        tensordict, args, kwargs, dispatched = self._dispatch(args, kwargs)
        if args:
            raise ValueError("Got a non-empty list of extra agruments, when none was expected.")
        try:
            values = read = [self._read(tensordict, key) for key in self.in_keys]
            if self._kwargs is not None:
                kwargs.update(zip(self._kwargs, values))
                values = ()
            try:
                out = self._call_module(values, **kwargs)
                if type(out) is Tensor:  # the usual single output: no collection to look into
                    out = (out,)
                elif out is None:
                    out = ()
                else:
                    is_td = is_tensor_collection(out)
                    if (is_td or isinstance(out, collections.abc.Mapping)) and all(
                            _has(out, key) if is_td else key in out for key in self._out_keys_source):
                        out = tuple(out.get(key) for key in self._out_keys_source)
                    if not isinstance(out, tuple):
                        out = (out,)
                result = self._write_to_tensordict(tensordict, out, tensordict_out)
            except Exception as err:
                # strict=False: a missing input was passed as None; if anything then fails, that is the cause
                missing = [key for key, value in zip(self.in_keys, read) if value is None]
                if missing:
                    what = f"in_key {missing[0]!r} is" if len(missing) == 1 else f"in_keys {missing} are"
                    raise KeyError(
                        f"{type(self).__name__}: {what} missing from the input tensordict (which has keys "
                        f"{sorted(map(str, tensordict.keys(include_nested=True)))}); the module was called with "
                        f"None in their place and failed with {type(err).__name__}: {err}") from err
                raise
        except Exception as err:
            if hasattr(err, "add_note"):
                module = self.module if isinstance(self.module, Module) else repr(self.module)
                err.add_note(f"{type(self).__name__} failed with operation\n{indent(str(module), 4 * ' ')}\n"
                             f"    in_keys={self.in_keys}\n    out_keys={self.out_keys}.")
            raise
        if dispatched:
            return self._dispatch_result(result)
        return result

    def __repr__(self):
        fields = indent(f"module={self.module},\n"
                        f"device={self.device},\n"
                        f"in_keys={self.in_keys},\n"
                        f"out_keys={self.out_keys}", 4 * " ")
        return f"{type(self).__name__}(\n{fields})"

    def __getattr__(self, name):
        # parameters, buffers and submodules first (Module's lookup), then the wrapped module's public
        # attributes, as tensordict does: td_module.weight is td_module.module.weight
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_"):
                raise
            d = self.__dict__
            module = d.get("_modules", {}).get("module", d.get("module", _MISSING))
            if module is _MISSING or module is None:
                raise
            return getattr(module, name)


class WrapModule(TensorDictModuleBase):
    """A module around a callable ``func(tensordict) -> tensordict``; TensorDictSequential wraps the plain
    callables it is given in one. ``in_keys``/``out_keys`` only inform the sequence (they are not checked)."""

    def __init__(self, func, *, inplace=False, in_keys=None, out_keys=None):
        super().__init__()
        self.func = func
        self.inplace = inplace
        self.in_keys = [] if in_keys is None else _key_list(in_keys, "in_keys")
        self.out_keys = [] if out_keys is None else _key_list(out_keys, "out_keys")

    def forward(self, tensordict):
        """Calls the wrapped function on the TensorDict."""
        result = self.func(tensordict)
        if self.inplace and result is not tensordict:
            return tensordict.update(result)
        return result


class TensorDictSequential(TensorDictModule):
    """Runs TensorDict modules one after the other on the same tensordict.

    Args:
        *modules: TensorDictModules (anything with ``in_keys`` and ``out_keys``) or callables taking and
            returning a tensordict (wrapped in :class:`WrapModule`, whose keys are not tracked). A single
            list, or a dict / OrderedDict of named modules, is accepted too.

    Keyword Args:
        partial_tolerant (bool): if ``True``, a module whose in-keys are not all present is skipped.
        selected_out_keys (list of keys): the out-keys to keep. The sequence then runs on a shallow copy of
            the input and writes only these entries (and entries of the input it replaced) back to the input;
            intermediate entries are not kept. ``out_keys`` becomes this list.
        inplace (bool, "empty" or None): ``None`` (default) returns the tensordict the modules wrote to (the
            input); ``True`` writes the out-keys to the input, ``False`` to a new empty TensorDict,
            ``"empty"`` to ``tensordict.empty()``.

    ``in_keys`` lists, in order, the keys the modules read that no earlier module writes; ``out_keys`` the
    keys they write (a key written twice is listed at its last position).
    """

    def __init__(self, *modules, partial_tolerant=False, selected_out_keys=None, inplace=None):
        if len(modules) == 1 and isinstance(modules[0], collections.abc.Mapping):
            named = collections.OrderedDict(modules[0])
            converted = self._convert_modules(list(named.values()))
            in_keys, out_keys = self._compute_in_and_out_keys(converted)
            container = ModuleDict(collections.OrderedDict(zip(named, converted)))
        else:
            if len(modules) == 1 and isinstance(modules[0], collections.abc.MutableSequence):
                modules = modules[0]
            converted = self._convert_modules(list(modules))
            in_keys, out_keys = self._compute_in_and_out_keys(converted)
            container = ModuleList(converted)
        super().__init__(module=container, in_keys=in_keys, out_keys=out_keys, inplace=True)
        self.inplace = inplace
        self.partial_tolerant = partial_tolerant
        self._select_before_return = False
        if selected_out_keys:
            self.select_out_keys(*unravel_key_list(list(selected_out_keys)))

    @staticmethod
    def _convert_modules(modules):
        out = []
        for module in modules:
            if TensorDictModuleBase.is_tdmodule_compatible(module) and isinstance(module, Module):
                out.append(module)
            elif callable(module):
                out.append(WrapModule(module))
            else:
                raise TypeError(f"TensorDictSequential: {module!r} is neither a TensorDict module nor a callable")
        return out

    @staticmethod
    def _compute_in_and_out_keys(modules):
        in_keys, out_keys = [], []
        for module in modules:
            for key in unravel_key_list(module.in_keys):
                if key not in out_keys and key not in in_keys:
                    in_keys.append(key)
            out_keys.extend(unravel_key_list(module.out_keys))
        # a key written several times counts once, at its last position (as tensordict)
        out_keys = [k for i, k in enumerate(out_keys) if k not in out_keys[i + 1:]]
        return in_keys, out_keys

    def select_out_keys(self, *out_keys):
        out_keys = unravel_key_list(out_keys)
        missing = [k for k in out_keys if k not in self._out_keys_source]
        if missing:
            raise ValueError(f"All keys in selected_out_keys must be in out_keys: {missing} are not in "
                             f"{self._out_keys_source}.")
        self._select_before_return = True
        self.out_keys = out_keys
        return self

    def reset_out_keys(self):
        """Restores the out_keys the modules give, after a select_out_keys."""
        self._select_before_return = False
        self.out_keys = list(self._out_keys_source)
        return self

    def _module_iter(self):
        if isinstance(self.module, ModuleDict):
            return list(self.module._modules.values())
        return list(self.module)

    def _run_module(self, module, tensordict, **kwargs):
        if self.partial_tolerant and not all(_has(tensordict, key) for key in module.in_keys):
            return tensordict
        return module(tensordict, **kwargs)

    def forward(self, *args, tensordict_out=None, **kwargs):
        """``forward(tensordict, tensordict_out=None)``: runs every module; returns the tensordict."""
        tensordict, args, kwargs, dispatched = self._dispatch(args, kwargs)
        if args:
            if tensordict_out is not None or len(args) > 1:
                raise ValueError("Got a non-empty list of extra agruments, when none was expected.")
            tensordict_out, = args
        if kwargs:
            raise RuntimeError("TensorDictSequential does not support keyword arguments other than 'tensordict_out' "
                               f"or in_keys: {self.in_keys}. Got {list(kwargs)} instead.")
        if tensordict_out is not None or self._select_before_return:
            tensordict_exec = _shallow_copy(tensordict)
        else:
            tensordict_exec = tensordict
        if tensordict_out is None:
            if self.inplace is True:
                tensordict_out = tensordict
            elif self.inplace is False:
                tensordict_out = _new_td()
            elif self.inplace == "empty":
                tensordict_out = tensordict.empty()
        for i, module in enumerate(self._module_iter()):
            try:
                tensordict_exec = self._run_module(module, tensordict_exec)
            except Exception as err:
                if hasattr(err, "add_note"):
                    err.add_note(f"Failed while executing module '{self._module_name(i)}'.")
                raise
        if tensordict_out is not None:
            result = _update(tensordict_out, tensordict_exec, self.out_keys)
        else:
            result = tensordict_exec
            if self._select_before_return:
                # the selected outputs, and whatever the modules replaced among the input's own entries
                keys = list(self.out_keys)
                keys += [k for k in tensordict.keys(include_nested=True, leaves_only=True) if k not in keys]
                result = _update(tensordict, tensordict_exec, keys)
        if dispatched:
            return self._dispatch_result(result)
        return result

    def _module_name(self, i):
        return list(self.module._modules)[i] if isinstance(self.module, ModuleDict) else i

    def select_subsequence(self, in_keys=None, out_keys=None):
        """A new sequence with only the modules that depend on ``in_keys`` (default: all) and that are
        needed for ``out_keys`` (default: all)."""
        in_keys = list(self.in_keys) if in_keys is None else unravel_key_list(list(in_keys))
        out_keys = list(self.out_keys) if out_keys is None else unravel_key_list(list(out_keys))
        modules = self._module_iter()
        keep = set(range(len(modules)))
        for i, module in enumerate(modules):
            if type(module) is TensorDictSequential:
                try:
                    module = modules[i] = module.select_subsequence(in_keys=in_keys)
                except ValueError:
                    keep.discard(i)
                    continue
            if all(key in in_keys for key in module.in_keys):
                in_keys.extend(module.out_keys)
            else:
                keep.discard(i)
        for i in reversed(range(len(modules))):
            if i not in keep:
                continue
            module = modules[i]
            if any(key in out_keys for key in module.out_keys):
                if type(module) is TensorDictSequential:
                    module = modules[i] = module.select_subsequence(out_keys=out_keys)
                out_keys.extend(module.in_keys)
            else:
                keep.discard(i)
        kept = [modules[i] for i in sorted(keep)]
        if not kept:
            raise ValueError("No modules left after selection. Make sure that in_keys and out_keys are coherent.")
        if isinstance(self.module, ModuleDict):
            names = list(self.module._modules)
            return type(self)(collections.OrderedDict((names[i], modules[i]) for i in sorted(keep)))
        return type(self)(*kept)

    def __len__(self):
        return len(self.module)

    def __getitem__(self, index):
        if isinstance(index, (int, str)):
            return self.module[index]
        return type(self)(*self.module[index])

    def __setitem__(self, index, module):
        self.module[index] = module

    def __delitem__(self, index):
        del self.module[index]
