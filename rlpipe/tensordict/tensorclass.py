"""tensordict.tensorclass's names. rlpipe has no tensorclasses and no non-tensor data (out of scope:
a TensorDict holds the same entries under string keys), so each name here exists, for code that
imports it, and raises NotImplementedError when used."""
import sys
import types

from .._utils import unavailable

__all__ = ["tensorclass", "TensorClass", "NonTensorData", "NonTensorDataBase", "NonTensorStack", "is_tensorclass"]

_WHY = "rlpipe has no tensorclasses: use a TensorDict with the same entries"
_NON_TENSOR = "rlpipe has no non-tensor data: a TensorDict holds tensors and TensorDicts only"


def is_tensorclass(obj):
    """Always False: rlpipe has no tensorclasses."""
    return False


def tensorclass(cls=None, **kwargs):
    """tensordict's ``@tensorclass`` decorator. Decorating works (so a module that defines a tensorclass
    at import time still loads), but the class it returns raises NotImplementedError when built.
    Unlike tensordict, no TensorDict-like class is generated."""
    def wrap(target):
        return unavailable(target.__name__, _WHY)
    if cls is None:
        return wrap
    if isinstance(cls, type):
        return wrap(cls)
    raise TypeError(f"tensorclass expects a class to decorate, got {type(cls).__name__}")


TensorClass = unavailable("TensorClass", _WHY)
NonTensorDataBase = unavailable("NonTensorDataBase", _NON_TENSOR)
NonTensorData = unavailable("NonTensorData", _NON_TENSOR, NonTensorDataBase)
NonTensorStack = unavailable("NonTensorStack", _NON_TENSOR)
MetaData = NonTensorData


class _CallableModule(types.ModuleType):
    """This module, callable as the ``tensorclass`` decorator. ``tensordict.tensorclass`` names both this
    module and the decorator; an import of the module made under another name (an import alias) rebinds
    the package's attribute to the module, so the module decorates too."""

    def __call__(self, cls=None, **kwargs):
        return tensorclass(cls, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
