"""tensordict.tensorclass's names. rlpipe has no tensorclasses (out of scope: a TensorDict holds the
same entries under string keys): ``tensorclass``/``TensorClass`` exist for code that imports them and
raise NotImplementedError when used. The non-tensor data classes (``NonTensorData``,
``NonTensorStack``, ``MetaData``) live in ``_nontensor.py``, a module above this one; the package's
``__init__`` puts them here too, where tensordict has them."""
import sys
import types

from .._utils import unavailable

__all__ = ["tensorclass", "TensorClass", "is_tensorclass"]

_WHY = "rlpipe has no tensorclasses: use a TensorDict with the same entries"


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


class _CallableModule(types.ModuleType):
    """This module, callable as the ``tensorclass`` decorator. ``tensordict.tensorclass`` names both this
    module and the decorator; an import of the module made under another name (an import alias) rebinds
    the package's attribute to the module, so the module decorates too."""

    def __call__(self, cls=None, **kwargs):
        return tensorclass(cls, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
