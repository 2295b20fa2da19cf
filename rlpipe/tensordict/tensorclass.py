"""tensordict's tensorclasses: ``@tensorclass`` on a dataclass-style class, or the ``TensorClass`` base
class (``class Pair(TensorClass): a: Tensor``), give typed fields over a TensorDict.

An instance keeps its entries in a TensorDict, ``_tensordict``: tensors, nested tensorclasses (stored as
their own TensorDict, given back as their class, known from the field's annotation or from the value
assigned), and other objects as non-tensor data; a field set to None has no entry. Every TensorDict
method is forwarded, and a TensorDict result is given back as the tensorclass (``tc[0]``, ``tc.clone()``,
``tc.unbind(0)``, ``rlpipe.stack([tc, tc])``). The non-tensor data classes (``NonTensorData``...) live in
``_nontensor.py``; the package's ``__init__`` puts them here too, where tensordict has them.
"""
import collections.abc
import dataclasses
import functools
import inspect
import json
import os
import sys
import types
import typing
import weakref

import numpy as np

from .. import serialization as _serialization
from ..utils import _pytree
from .._tensor import Tensor
from .._creation import _LegacyTensorType, as_tensor
from ._nontensor import NonTensorData
from ._repr import _REPR_OPTIONS, _leaf_repr, _shape_str
from ._td import TensorDict
from .base import TensorDictBase, _non_tensor_value
from .keys import unravel_key_to_tuple
from . import _io, _tc_state
from .utils import is_tensorclass

__all__ = ["tensorclass", "TensorClass", "is_tensorclass", "from_dataclass"]

# members of a decorated class not carried over: the instance layout, and what @dataclass generates
_NOT_COPIED = frozenset({"__dict__", "__weakref__", "__init__", "__repr__", "__eq__", "__hash__", "__match_args__",
                         "__dataclass_fields__", "__dataclass_params__"})
# TensorClass members that @tensorclass does not install on the class it decorates in place
_NOT_INSTALLED = frozenset({"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__"})
_OPTIONS = ("autocast", "nocast", "frozen", "shadow", "tensor_only")
# methods whose TensorDict result stays a TensorDict (or is not one to wrap)
_RAW_RESULTS = frozenset({"to_tensordict", "to_dict", "state_dict", "items", "values", "keys", "get", "pop",
                          "flatten_keys", "unflatten_keys", "to_namedtuple", "tolist", "numpy"})


# every tensorclass this process defined, by module and qualified name: load_memmap finds the class a
# folder records here (JSON names only; nothing is unpickled)
_CLASSES = weakref.WeakValueDictionary()
_CLASS_FILE = "tensorclass.json"


def _class_id(cls):
    return f"{cls.__module__}:{cls.__qualname__}"


def _record_class(prefix, cls):
    """Writes ``prefix/tensorclass.json`` naming ``cls`` (nothing without a prefix)."""
    if prefix is not None:
        with open(os.path.join(os.fspath(prefix), _CLASS_FILE), "w") as f:
            json.dump({"class": _class_id(cls)}, f)


def _load_class(prefix, td):
    """``td`` as the tensorclass ``prefix`` records, when this process defines it; else ``td``."""
    path = os.path.join(os.fspath(prefix), _CLASS_FILE)
    if not os.path.exists(path):
        return td
    with open(path) as f:
        cls = _CLASSES.get(json.load(f).get("class"))
    return td if cls is None else cls.from_tensordict(td, safe=False)


_io.TENSORCLASS_LOADER[0] = _load_class


class _Field:
    """The descriptor of one field: reads the entry of the instance's TensorDict (None when absent)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner):
        if obj is None:
            if self.name in owner._defaults:
                return owner._defaults[self.name]
            raise AttributeError(f"type object '{owner.__name__}' has no attribute '{self.name}'")
        td = obj._tensordict
        value = td._tensordict.get(self.name) if type(td) is TensorDict else td.get(self.name, None)
        if type(value) is Tensor:
            return value
        if value is None and self.name in obj.__dict__.get("_deleted", ()):
            raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{self.name}' (deleted)")
        return obj._from_entry(self.name, value)

    def __set__(self, obj, value):
        obj.__dict__.get("_deleted", set()).discard(self.name)
        obj._set_field(self.name, value)

    def __delete__(self, obj):
        """``del tc.field``: the entry is removed and the attribute reads as missing until set again,
        as in tensordict."""
        obj._set_field(self.name, None)
        obj.__dict__.setdefault("_deleted", set()).add(self.name)


def _field_default(value):
    """A class attribute as a field's default: a ``dataclasses.field``'s default (or factory) or itself."""
    if isinstance(value, dataclasses.Field):
        if value.default_factory is not dataclasses.MISSING:
            return _Factory(value.default_factory)
        return value.default
    return value


class _Factory:
    """A field's ``default_factory``, called at each construction."""
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def _own_annotations(klass):
    """The names ``klass`` itself annotates (ClassVar ones left out)."""
    notes = klass.__dict__.get("__annotations__", {})
    return [name for name, note in notes.items() if "ClassVar" not in str(note)]


def _type_hints(cls):
    """The fields' annotations, each string one evaluated in its module (the class's own name naming
    the class), left a string where that fails (a name local to a function)."""
    hints = {}
    for klass in reversed(cls.__mro__):
        hints.update(klass.__dict__.get("__annotations__", {}))
    scope = dict(vars(sys.modules[cls.__module__])) if cls.__module__ in sys.modules else {}
    scope.setdefault(cls.__name__, cls)
    for name, note in hints.items():
        if isinstance(note, str):
            try:
                hints[name] = eval(note, scope)  # noqa: S307 (an annotation, as typing.get_type_hints does)
            except Exception:  # not resolvable here: kept as the string
                pass
    return hints


def _is_reserved(name):
    """Whether a field may not be named ``name`` (a TensorDict attribute; tensordict's rule)."""
    return name != "data" and hasattr(TensorDict, name)


def _setup(cls, options):
    """Makes ``cls`` a tensorclass: collects its fields (with their parents'), defaults and options,
    and installs one descriptor per field."""
    fields = list(getattr(cls, "_fields", ()))
    defaults = dict(getattr(cls, "_defaults", {}))
    for name in _own_annotations(cls):
        if name not in fields:
            fields.append(name)
        if name in cls.__dict__:
            defaults[name] = _field_default(cls.__dict__[name])
    for name in fields:
        if not options["shadow"] and name not in getattr(cls, "_fields", ()) and _is_reserved(name):
            raise AttributeError(f"Attribute name {name} can't be used with @tensorclass or TensorClass. To allow "
                                 f"it, use @tensorclass(shadow=True) or TensorClass['shadow'].")
    cls._fields = tuple(fields)
    cls.__expected_keys__ = frozenset(fields)
    cls._defaults = defaults
    cls._is_tensorclass = True  # before the hints: a field may name the class itself
    _CLASSES[_class_id(cls)] = cls
    _serialization.register_type(cls, f"TensorClass:{_class_id(cls)}", lambda tc: {"tensordict": tc._tensordict},
                                 lambda state, cls=cls: cls.from_tensordict(state["tensordict"], safe=False))
    _pytree.register_pytree_node(cls, _pytree_children, _from_pytree_children)  # vmap maps over its fields
    _resolve_hints(cls)
    for option in _OPTIONS:
        setattr(cls, "_" + option, bool(options[option]))
    if cls._tensor_only:
        _check_tensor_only(cls)
    cls.__dataclass_fields__ = {name: _as_dataclass_field(cls, name) for name in fields}
    for name in fields:
        setattr(cls, name, _Field(name))
    cls.__signature__ = _signature(cls)
    if cls._frozen:  # hashable, as a frozen dataclass: by identity (its tensors compare elementwise)
        cls.__hash__ = object.__hash__


def _check_tensor_only(cls):
    """TypeError unless every field of a ``tensor_only`` class is typed as a tensor, a TensorDict or a
    tensorclass (or a union of those and None), and the class neither autocasts nor skips casts."""
    if cls._autocast or cls._nocast:
        raise TypeError(f"{cls.__name__}: tensor_only cannot be combined with autocast or nocast")
    for name, hint in cls._type_hints.items():
        if not _tensor_only_type(hint):
            raise TypeError(f"tensor_only requires types to be Tensor, Tensor-subtrypes or None; the field "
                            f"{name!r} of {cls.__name__} is annotated {hint!r}")


def _tensor_only_type(hint):
    """Whether a tensor_only field may carry the annotation ``hint``."""
    if hint is None or hint is type(None) or isinstance(hint, str):  # a forward reference: a class to come
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return all(_tensor_only_type(arg) for arg in typing.get_args(hint))
    return isinstance(hint, type) and (issubclass(hint, (Tensor, TensorDictBase)) or is_tensorclass(hint)
                                       or isinstance(hint, _LegacyTensorType))  # rlpipe.LongTensor...


def _signature(cls):
    """The constructor's signature as ``inspect.signature`` shows it: the fields, then batch_size,
    device and names."""
    params = []
    for name in cls._fields:
        default = cls._defaults.get(name, inspect.Parameter.empty)
        default = None if isinstance(default, _Factory) else default
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
               for name in ("batch_size", "device", "names") if name not in cls.__expected_keys__]
    return inspect.Signature(params)


def _resolve_hints(cls):
    """Reads the fields' annotations into ``_type_hints`` and the tensorclass-typed ones into
    ``_nested_types``. Tried again at each construction while a string annotation is unresolved (a
    class defined later in its module)."""
    hints = _type_hints(cls)
    cls._type_hints = {name: hints.get(name, typing.Any) for name in cls._fields}
    cls._nested_types = {name: hint for name, hint in cls._type_hints.items()
                         if isinstance(hint, type) and is_tensorclass(hint)}
    cls._hints_resolved = not any(isinstance(hint, str) for hint in cls._type_hints.values())


def _plain_dict(mapping):
    """A mapping (a UserDict...) as a dict, nested mappings too."""
    return {k: _plain_dict(v) if isinstance(v, collections.abc.Mapping) else v for k, v in mapping.items()}


def _unwrap(value):
    """``value`` with every tensorclass (also inside lists, tuples and dicts) replaced by its TensorDict."""
    if is_tensorclass(value) and not isinstance(value, type):
        return value._tensordict
    if type(value) in (list, tuple):
        return type(value)(_unwrap(v) for v in value)
    if type(value) is dict:
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _td_property(name, doc):
    """A property reading and writing the inner TensorDict's attribute ``name``."""
    return property(lambda self: getattr(self._tensordict, name),
                    lambda self, value: setattr(self._tensordict, name, value), doc=doc)


def _td_classmethod(name):
    """A classmethod running TensorDict's classmethod ``name`` (tensorclass arguments unwrapped) and
    giving its result as the calling class."""
    def method(cls, *args, **kwargs):
        return cls._over(getattr(TensorDict, name)(*_unwrap(args), **_unwrap(kwargs)))
    method.__name__ = name
    method.__doc__ = f"TensorDict.{name}, its result as this class."
    return classmethod(method)


class TensorClass:
    """The base class of tensorclasses: ``class Pair(TensorClass): a: Tensor; b: str = "x"``.

    Options as class keywords (``class P(TensorClass, autocast=True)``) or by subscription
    (``class P(TensorClass["nocast", "frozen"])``): ``autocast`` casts values to the fields'
    annotations, ``nocast`` keeps numbers as non-tensor data, ``frozen`` locks the instance after
    construction, ``shadow`` allows fields named like TensorDict attributes."""

    _preset = frozenset()
    _autocast = _nocast = _frozen = _shadow = _tensor_only = False

    def __init_subclass__(cls, **options):
        unknown = set(options) - set(_OPTIONS)
        if unknown:
            raise TypeError(f"{cls.__name__}: unknown tensorclass options {sorted(unknown)}, expected some of "
                            f"{list(_OPTIONS)}")
        if cls.__dict__.get("_is_option_base"):
            return
        chosen = {o: options.get(o, o in cls._preset or getattr(cls, "_" + o, False)) for o in _OPTIONS}
        _setup(cls, chosen)

    def __class_getitem__(cls, item):
        """``TensorClass["autocast"]`` / ``TensorClass["nocast", "frozen"]``: a base with those options."""
        items = (item,) if isinstance(item, str) else tuple(item)
        unknown = [i for i in items if i not in _OPTIONS]
        if unknown:
            raise ValueError(f"TensorClass[...]: unknown options {unknown}, expected some of {list(_OPTIONS)}")
        return type(cls.__name__, (cls,), {"_preset": cls._preset | frozenset(items), "_is_option_base": True,
                                           "__module__": cls.__module__})

    def __init__(self, *args, batch_size=None, device=None, names=None, non_blocking=None, **kwargs):
        if not hasattr(type(self), "_fields"):
            raise NotImplementedError(f"{type(self).__name__} is an abstract base class and cannot be instantiated "
                                      "directly: subclass it with annotated fields")
        if not type(self)._hints_resolved:
            _resolve_hints(type(self))
        shadowed = {"batch_size": batch_size, "device": device, "names": names}
        for name in type(self).__expected_keys__ & shadowed.keys():  # fields named so (shadow=True)
            if shadowed[name] is not None:
                kwargs[name] = shadowed.pop(name)
        values = self._bind(args, kwargs)
        batch_size = shadowed.get("batch_size")
        td = TensorDict({}, batch_size=[] if batch_size is None else batch_size, device=shadowed.get("device"),
                        names=shadowed.get("names"))
        self.__dict__["_tensordict"] = td
        self.__dict__["_nested"] = type(self)._nested_types
        for name, value in values.items():
            setattr(self, name, value)  # through __setattr__, which a subclass may override
        if type(self)._frozen:
            td.lock_()
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    @classmethod
    def _bind(cls, args, kwargs):
        """{field: value} from the constructor's arguments, defaults filled in (dataclass's TypeErrors)."""
        if len(args) > len(cls._fields):
            raise TypeError(f"{cls.__name__}.__init__() takes {len(cls._fields) + 1} positional arguments but "
                            f"{len(args) + 1} were given (fields: {list(cls._fields)})")
        values = dict(zip(cls._fields, args))
        for name, value in kwargs.items():
            if name not in cls.__expected_keys__:
                raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument '{name}' "
                                f"(fields: {list(cls._fields)})")
            if name in values:
                raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument '{name}'")
            values[name] = value
        missing = [name for name in cls._fields if name not in values and name not in cls._defaults]
        if missing:
            raise TypeError(f"{cls.__name__}.__init__() missing {_missing_phrase(missing)}")
        for name in cls._fields:
            if name not in values:
                default = cls._defaults[name]
                values[name] = default.make() if isinstance(default, _Factory) else default
        return values

    # ---- wrapping and unwrapping ---------------------------------------------------------------
    @classmethod
    def _over(cls, td, nested=None):
        """An instance over ``td`` as it is (no check, no copy)."""
        out = object.__new__(cls)
        out.__dict__["_tensordict"] = td
        out.__dict__["_nested"] = cls._nested_types if nested is None else nested
        return out

    def _wrap(self, result):
        """A method's result as the caller sees it: our TensorDict is ourself, another TensorDict an
        instance of our class, a tuple/list of them a tuple/list of instances."""
        if result is self._tensordict:
            return self
        if isinstance(result, TensorDictBase) and not getattr(result, "_is_non_tensor", False):
            return type(self)._over(result, self._nested)
        if type(result) in (tuple, list) and result and all(isinstance(r, TensorDictBase) for r in result):
            return type(result)(self._wrap(r) for r in result)
        return result

    def _from_entry(self, name, value):
        """A field's entry as the field's value: None, a nested tensorclass, a non-tensor object."""
        if value is None:
            return None
        if getattr(value, "_is_non_tensor", False):  # tensor_only classes give the NonTensorData itself
            return value if type(self)._tensor_only else _non_tensor_value(value)
        nested = self._nested.get(name)
        if nested is not None and isinstance(value, TensorDictBase):
            return nested._over(value)
        return value

    def _set_field(self, name, value):
        """Stores ``value`` as the field ``name`` (None removes the entry)."""
        td = self._tensordict
        if name not in type(self).__expected_keys__:
            raise AttributeError(f"Cannot set the attribute '{name}', expected attributes are "
                                 f"{set(type(self)._fields)}.")
        if value is None:
            if td.is_locked:
                td._check_unlocked()
            if name in td.keys():
                td.del_(name)
            return
        value = self._cast(name, value)
        if is_tensorclass(value):
            if type(value) is not self._nested.get(name):
                self.__dict__["_nested"] = {**self._nested, name: type(value)}
            value = value._tensordict
        if type(self)._nocast and not isinstance(value, (Tensor, TensorDictBase, dict)):
            value = NonTensorData(value, batch_size=td.batch_size, device=td.device)
        td.set(name, value)

    def _cast(self, name, value):
        """``value`` for the field ``name``: a dict given to a tensorclass-typed field becomes that class;
        under ``tensor_only``, mappings become TensorDicts and anything else a tensor; under
        ``autocast``, a value is cast to the field's annotation (Tensor, int, float, bool, str,
        np.ndarray)."""
        cls, td = type(self), self._tensordict
        hint = cls._type_hints.get(name)
        if isinstance(value, dict) and name in cls._nested_types:
            return hint.from_dict(value, batch_size=td.batch_size)
        if isinstance(hint, type) and issubclass(hint, NonTensorData) and not isinstance(value, TensorDictBase):
            return hint(value, batch_size=td.batch_size, device=td.device)  # a field typed as non-tensor data
        if cls._tensor_only and not isinstance(value, (Tensor, TensorDictBase)) and not is_tensorclass(value):
            if isinstance(value, collections.abc.Mapping):
                return TensorDict(_plain_dict(value), batch_size=td.batch_size, device=td.device)
            return as_tensor(value, device=td.device)
        casts_to_td = cls._autocast and isinstance(hint, type) and issubclass(hint, TensorDictBase)
        if isinstance(value, dict) and not casts_to_td:  # kept as one object, as in tensordict 0.14
            return NonTensorData(value, batch_size=td.batch_size, device=td.device)
        if not cls._autocast or not isinstance(hint, type) or hint is typing.Any:
            return value
        try:
            if issubclass(hint, Tensor):
                return value if isinstance(value, Tensor) else as_tensor(value, device=td.device)
            if hint in (int, float, bool, str):
                return NonTensorData(hint(value), batch_size=td.batch_size, device=td.device)
            if hint is np.ndarray:
                return NonTensorData(np.asarray(value), batch_size=td.batch_size, device=td.device)
            if isinstance(value, hint) and not issubclass(hint, TensorDictBase) and not is_tensorclass(hint):
                return NonTensorData(value, batch_size=td.batch_size, device=td.device)  # kept as it is
        except (TypeError, ValueError) as err:
            raise TypeError(f"Failed to cast the value of '{name}' ({type(value).__name__}) to the type "
                            f"annotation {hint.__name__}") from err
        return value

    def __getattr__(self, name):
        td = self.__dict__.get("_tensordict")
        if td is None or name.startswith("__"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        try:
            attr = getattr(td, name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'") from None
        if not callable(attr) or name in _RAW_RESULTS:
            return self._wrap(attr) if isinstance(attr, TensorDictBase) else attr  # td.grad: a TensorDict

        @functools.wraps(attr)
        def forwarded(*args, **kwargs):
            return self._wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
        return forwarded

    def __setattr__(self, name, value):
        if name in type(self).__expected_keys__ or name.startswith("_") or hasattr(type(self), name):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(f"Cannot set the attribute '{name}', expected attributes are "
                             f"{set(type(self)._fields)}.")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """``rlpipe.stack([tc, tc])``, ``rlpipe.cat``... run on the TensorDicts; a TensorDict result is
        given back as the class of the first tensorclass among the arguments."""
        first = _first_tensorclass(args)
        classes = _tensorclass_types(args)
        if len(classes) > 1:  # torch's dispatch error: no class knows how to join the others
            raise TypeError(f"no implementation found for '{getattr(func, '__name__', func)}' on types that implement "
                            f"__torch_function__: {[c.__name__ for c in classes]} (Multiple dispatch failed)")
        return first._wrap(func(*_unwrap(args), **_unwrap(kwargs or {})))

    # ---- the TensorDict's shape, device and entries ----------------------------------------------
    batch_size = _td_property("batch_size", "The batch size (settable, as the TensorDict's).")
    @property
    def device(self):
        """The device (set it with ``to``: RuntimeError on assignment, as in tensordict)."""
        return self._tensordict.device

    @device.setter
    def device(self, value):
        raise RuntimeError("device cannot be set using tensorclass.device = device, because device cannot be "
                           "updated in-place. To update device, use tensorclass.to(new_device), which will return "
                           "a new tensorclass on the new device.")

    names = _td_property("names", "The dimension names (settable, as the TensorDict's).")

    @property
    def _non_tensordict(self):
        """tensordict's store of the None fields: {name: None} for every field without an entry."""
        present = self._tensordict.keys()
        return {name: None for name in self._fields if name not in present}

    @property
    def shape(self):
        """The batch size (``batch_size``'s other name)."""
        return self._tensordict.batch_size

    def select(self, *keys, inplace=False, strict=True, as_tensordict=False):
        """Only the fields ``keys`` (the others None); with ``as_tensordict``, the TensorDict of those
        entries instead."""
        out = self._tensordict.select(*keys, inplace=inplace, strict=strict)
        return out if as_tensordict else self._wrap(out)

    def get(self, key, *default, **options):
        """A field's value (``key`` a name, or a tuple walking nested tensorclasses); another name reads
        an attribute (``get("batch_size")``) or, failing that, the TensorDict (None where absent).
        ``options`` (``as_list``, ``as_padded_tensor``, ``default``...) go to the TensorDict's ``get``,
        as for a tensorclass over a lazy stack."""
        if options:
            return self._wrap(self._tensordict.get(key, *default, **options))
        try:
            path = unravel_key_to_tuple(key)
        except TypeError:
            raise KeyError(f"Only NestedKeys are supported. Got key {key!r}.") from None
        if path[0] not in type(self).__expected_keys__:
            if len(path) == 1 and hasattr(type(self), path[0]):
                return getattr(self, path[0])
            return self._wrap(self._tensordict.get(key, *default))
        value = getattr(self, path[0])
        if len(path) == 1:
            return value
        if not hasattr(value, "get") or isinstance(value, Tensor):
            if default:
                return default[0]
            raise KeyError(f"{type(self).__name__}.get({key!r}): the field '{path[0]}' is a "
                           f"{type(value).__name__}, which has no entry {path[1:]!r}")
        return value.get(path[1:], *default)

    def set(self, key, value, inplace=False, non_blocking=False):
        """Sets a field (``key`` a name, or a (nested) tuple walking nested tensorclasses); returns self."""
        path = unravel_key_to_tuple(key)
        if len(path) == 1:
            if inplace and getattr(self, path[0]) is not None:
                self._tensordict.set_(path[0], _unwrap(value))
            else:
                self._set_field(path[0], value)
        else:
            self.get(path[:1]).set(path[1:], value, inplace=inplace)
        return self

    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(i, str) for i in index)):
            raise ValueError(f"Invalid indexing arguments: {index}. Read a field as an attribute or with get()")
        return self._wrap(self._tensordict[_unwrap(index)])

    def __setitem__(self, index, value):
        if isinstance(index, str):
            self.set(index, value)
            return
        if is_tensorclass(value) and value.__expected_keys__ != type(self).__expected_keys__:
            raise ValueError(f"__setitem__ is only allowed for same-class or compatible class (i.e. same members) "
                             f"assignment: {type(self).__name__} has fields {sorted(self._fields)}, the "
                             f"{type(value).__name__} given has {sorted(value._fields)}")
        self._tensordict[_unwrap(index)] = _unwrap(value)

    def __len__(self):
        return len(self._tensordict)

    def __iter__(self):
        if not self.batch_size:
            raise StopIteration
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        return bool(self._tensordict)

    def __eq__(self, other):
        return self._wrap(self._tensordict == _unwrap(other))

    def __ne__(self, other):
        return self._wrap(self._tensordict != _unwrap(other))

    __hash__ = None

    def __enter__(self):
        self._tensordict.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tensordict.__exit__(*exc)

    def __getstate__(self):
        return {"_tensordict": self._tensordict, "_nested": self._nested}

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ---- conversions -----------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False, flatten=True):
        """The tensors under dotted keys with a ``_metadata`` attribute (class, non-tensor fields per
        level), as tensordict 0.14; ``flatten=False`` nests them in dicts."""
        return _tc_state.state_dict(self, destination, prefix, keep_vars, flatten)

    def load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=False):
        """Writes a ``state_dict()`` (flat, nested, or tensordict's older layout) into this instance."""
        return _tc_state.load_state_dict(self, state_dict, strict)

    def to_tensordict(self, *, retain_none=None):
        """A TensorDict with the same entries (copied), nested tensorclasses as TensorDicts."""
        return self._tensordict.to_tensordict()

    def to_dict(self, *, retain_none=True):
        """{field: value}: tensors, non-tensor objects, nested tensorclasses as dicts; None fields kept
        unless ``retain_none=False``."""
        out = self._tensordict.to_dict()
        if retain_none:
            out.update({name: None for name in self._fields if name not in out})
        return {name: out[name] for name in self._fields if name in out}

    @classmethod
    def _from_tensordict(cls, tensordict, non_tensordict=None, safe=True):
        """``from_tensordict``, then ``__post_init__`` where the class has one (tensordict's)."""
        out = cls.from_tensordict(tensordict, non_tensordict, safe)
        post_init = getattr(out, "__post_init__", None)
        if post_init is not None:
            post_init()
        return out

    @classmethod
    def from_tensordict(cls, tensordict, non_tensordict=None, safe=True):
        """An instance over ``tensordict`` (not copied); ``non_tensordict`` sets further fields. With
        ``safe``, a key that is not a field raises KeyError."""
        if safe:
            extra = sorted(set(tensordict.keys()) - cls.__expected_keys__)
            if extra:
                raise KeyError(f"{cls.__name__}.from_tensordict: keys {extra} are not fields of "
                               f"{cls.__name__} (fields: {list(cls._fields)})")
        out = cls._over(tensordict)
        for name, value in (non_tensordict or {}).items():
            out._set_field(name, value)
        return out

    @classmethod
    def from_dict(cls, input_dict, batch_size=None, device=None, batch_dims=None, *, auto_batch_size=None,
                  **kwargs):
        """An instance from ``{field: value}`` (nested dicts for nested tensorclasses), through
        ``TensorDict.from_dict`` (same batch-size rules)."""
        extra = sorted(set(input_dict) - cls.__expected_keys__)
        if extra:
            raise KeyError(f"{cls.__name__}.from_dict: keys {extra} are not fields of {cls.__name__} "
                           f"(fields: {list(cls._fields)})")
        present = {k: v for k, v in input_dict.items() if v is not None}
        td = TensorDict.from_dict(present, batch_size=batch_size, device=device, batch_dims=batch_dims,
                                  auto_batch_size=auto_batch_size)
        return cls.from_tensordict(td)

    @classmethod
    def load_memmap(cls, prefix, device=None, non_blocking=False, *, out=None, **kwargs):
        """An instance over the TensorDict saved at ``prefix`` by ``memmap_``/``memmap``: of the class
        the folder records when this process defines it (as tensordict), else of ``cls``."""
        loaded = TensorDict.load_memmap(prefix, device=device)
        return loaded if is_tensorclass(loaded) else cls.from_tensordict(loaded, safe=False)

    def memmap_(self, prefix=None, *args, **kwargs):
        """Memory-maps the fields in place (``TensorDict.memmap_``); under ``prefix`` the folder also
        records the class, so ``load_memmap`` gives this class back."""
        self._tensordict.memmap_(prefix, *args, **kwargs)
        _record_class(prefix, type(self))
        return self

    def memmap(self, prefix=None, *args, **kwargs):
        """A memory-mapped copy (``TensorDict.memmap``), its folder recording the class."""
        out = type(self).from_tensordict(self._tensordict.memmap(prefix, *args, **kwargs), safe=False)
        _record_class(prefix, type(self))
        return out

    def save(self, prefix=None, copy_existing=False, num_threads=0):
        """``memmap(prefix)``: the folder records the class, so ``TensorDict.load`` gives it back."""
        return self.memmap(prefix)

    dumps = save

    from_list = _td_classmethod("from_list")
    fromkeys = _td_classmethod("fromkeys")
    stack = _td_classmethod("stack")
    cat = _td_classmethod("cat")
    lazy_stack = _td_classmethod("lazy_stack")
    maybe_dense_stack = _td_classmethod("maybe_dense_stack")

    @classmethod
    def fields(cls):
        """The dataclass fields, as ``dataclasses.fields`` describes them."""
        return dataclasses.fields(cls)

    def __repr__(self):
        return _repr(self)


def _forward_operator(name):
    """``tc <op> other``: the TensorDict's operator, the result as the tensorclass."""
    def operator(self, *args):
        result = getattr(self._tensordict, name)(*_unwrap(args))
        return result if result is NotImplemented else self._wrap(result)
    operator.__name__ = name
    return operator


for _name in ("add", "radd", "iadd", "sub", "rsub", "isub", "mul", "rmul", "imul", "truediv", "rtruediv",
              "itruediv", "pow", "rpow", "ipow", "neg", "abs", "invert", "and", "or", "xor", "rand", "ror", "rxor",
              "lt", "le", "gt", "ge"):
    _dunder = f"__{_name}__"
    if hasattr(TensorDict, _dunder):
        setattr(TensorClass, _dunder, _forward_operator(_dunder))


def _as_dataclass_field(cls, name):
    """A ``dataclasses.Field`` describing one field (name, type, default)."""
    default = cls._defaults.get(name, dataclasses.MISSING)
    if isinstance(default, _Factory):
        made = dataclasses.field(default_factory=default.make)
    else:
        made = dataclasses.field(default=default)
    made.name, made.type = name, cls._type_hints.get(name)
    made._field_type = dataclasses._FIELD  # what dataclasses.fields() keeps
    return made


def _missing_phrase(missing):
    """Python's dataclass words for missing arguments: "2 required positional arguments: 'a' and 'b'"."""
    names = [f"'{name}'" for name in missing]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + ("," if len(names) > 2 else "") + \
        " and " + names[-1]
    return f"{len(missing)} required positional argument{'s' if len(missing) > 1 else ''}: {listed}"


def _tensorclass_types(args):
    """The distinct tensorclasses among ``args`` (also inside lists and tuples), in order."""
    found = []
    for value in args:
        inner = _tensorclass_types(value) if type(value) in (list, tuple) else [type(value)] if (
            is_tensorclass(value) and not isinstance(value, type)) else []
        found += [c for c in inner if c not in found]
    return found


def _first_tensorclass(args):
    """The first tensorclass among ``args`` (also inside lists and tuples)."""
    for value in args:
        if type(value) in (list, tuple):
            found = _first_tensorclass(value)
            if found is not None:
                return found
        elif is_tensorclass(value) and not isinstance(value, type):
            return value
    return None


def _repr(tc):
    """tensordict's layout: the entries sorted by name, the None fields, batch size, device, is_shared."""
    td = tc._tensordict
    entries = []
    for name in sorted(td.keys()):
        value = getattr(tc, name) if name in tc._nested else td.get(name)
        shown = _leaf_repr(value, _REPR_OPTIONS) if isinstance(value, Tensor) else repr(value)
        entries.append(f"{name}={shown}")
    entries += [f"{name}=None" for name in tc._fields if name not in td.keys()]
    opts = _REPR_OPTIONS
    if opts["show_batch_size"]:  # a field named batch_size (shadow=True) shows the batch size as shape
        label = "shape" if "batch_size" in tc.__expected_keys__ else "batch_size"
        if label not in tc.__expected_keys__:
            entries.append(f"{label}={_shape_str(td.batch_size)}")
    if opts["show_device"] and "device" not in tc.__expected_keys__:
        entries.append(f"device={td.device}")
    if opts["show_is_shared"]:
        entries.append(f"is_shared={td.is_shared()}")
    body = ",\n".join(entries)
    return f"{type(tc).__name__}(\n" + "\n".join("    " + line for line in body.split("\n")) + ")"


def tensorclass(cls=None, *, autocast=False, frozen=False, nocast=False, shadow=False, tensor_only=False):
    """tensordict's ``@tensorclass`` decorator (also ``@tensorclass(autocast=True)``...): the class itself,
    given TensorClass's methods (its own win) and its fields' descriptors, as tensordict does (it is not a
    ``TensorClass`` subclass; a subclass of a tensorclass is a tensorclass too)."""
    options = {"autocast": autocast, "frozen": frozen, "nocast": nocast, "shadow": shadow,
               "tensor_only": tensor_only}
    if autocast and nocast:
        raise ValueError("tensorclass: autocast and nocast cannot both be True")

    def wrap(target):
        if not isinstance(target, type):
            raise TypeError(f"tensorclass expects a class to decorate, got {type(target).__name__}")
        if issubclass(target, TensorClass):
            return type(target.__name__, (target,), {"__module__": target.__module__}, **options)
        for name in _NOT_COPIED & set(target.__dict__) - {"__dict__", "__weakref__"}:
            delattr(target, name)  # what @dataclass generated: TensorClass's take over
        for name, member in TensorClass.__dict__.items():
            if name not in target.__dict__ and name not in _NOT_INSTALLED:
                setattr(target, name, member)
        _setup(target, {**{o: False for o in _OPTIONS}, **options})
        return target
    if cls is None:
        return wrap
    return wrap(cls)


def from_dataclass(obj, *, dest_cls=None, **kwargs):
    """A tensorclass instance (or, given a class, a tensorclass) from a dataclass."""
    if isinstance(obj, type):
        return tensorclass(_copy_class(obj), **kwargs)
    target = dest_cls or tensorclass(_copy_class(type(obj)), **kwargs)
    return target(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})


def _copy_class(cls):
    """A new class with ``cls``'s name, bases and members (so decorating it leaves ``cls`` as it is)."""
    namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    return type(cls.__name__, cls.__bases__, namespace)


class _CallableModule(types.ModuleType):
    """This module, callable as the ``tensorclass`` decorator. ``tensordict.tensorclass`` names both this
    module and the decorator; an import of the module made under another name (an import alias) rebinds
    the package's attribute to the module, so the module decorates too."""

    def __call__(self, cls=None, **kwargs):
        return tensorclass(cls, **kwargs)


sys.modules[__name__].__class__ = _CallableModule


def _pytree_children(tc):
    """A tensorclass as a pytree node: its TensorDict (whose entries are the leaves), and its class."""
    return [tc._tensordict], type(tc)


def _from_pytree_children(children, cls):
    return cls._over(children[0])
