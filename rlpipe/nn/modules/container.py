"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from itertools import chain, islice

from ..._tensor import Tensor
from ..parameter import Parameter
from ._inference_plan import run_planned
from .module import Module, _addindent


def _index(idx, size):
    """A non-negative index into a container of ``size`` items (IndexError when out of range)."""
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


class _ModuleSequence:
    """What Sequential and ModuleList share: modules kept under the keys '0', '1', ..."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Adds ``module`` at the end (under the next index); returns self."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        """Removes the module at ``key`` (an index) and returns it."""
        module = self[key]
        del self[key]
        return module

    def _renumber(self, modules):
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(modules))

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_ModuleSequence, Module):
    """Runs its modules one after the other, each on the previous one's output.
    ``Sequential(a, b)`` or ``Sequential(OrderedDict(name=module, ...))``."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input):
        out = run_planned(self, input)  # None unless the inference fast path applies
        if out is not None:
            return out
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return next(islice(self._modules.values(), _index(idx, len(self)), None))

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self))]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self))]]):
            delattr(self, key)
        self._renumber(self._modules.values())  # torch keeps the keys 0..n-1 in order

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        return self.extend(other)

    @staticmethod
    def _check_factor(other):
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {Sequential} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {Sequential}")

    def __mul__(self, other):
        self._check_factor(other)
        return Sequential(*[m for _ in range(other) for m in self])

    __rmul__ = __mul__

    def __imul__(self, other):
        self._check_factor(other)
        for module in list(self) * (other - 1):
            self.append(module)
        return self

    def insert(self, index, module):
        """Puts ``module`` before position ``index`` (negative counts from the end) and renumbers; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        items = list(self._modules.values())
        items.insert(index + n if index < 0 else index, module)
        self._renumber(items)
        return self

    def extend(self, sequential):
        """Appends each module of ``sequential`` (any iterable of modules); returns self."""
        for module in sequential:
            self.append(module)
        return self


class ModuleList(_ModuleSequence, Module):
    """A list of modules, registered so that parameters() and to() see them."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self))), module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self))]]):
            delattr(self, key)
        self._renumber(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(chain(self, other))

    def insert(self, index, module):
        """Puts ``module`` before position ``index`` and renumbers the modules after it."""
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules = OrderedDict()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def extend(self, modules):
        """Appends each module of the iterable ``modules``; TypeError for a single module or tensor; returns self."""
        if isinstance(modules, (Module, Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        for module in modules:
            self.append(module)
        return self

    def __repr__(self):
        # torch folds runs of identical children: "(0-2): 3 x Linear(...)"
        lines, items = [], list(self._modules.items())
        i = 0
        while i < len(items):
            j = i
            while j + 1 < len(items) and repr(items[j + 1][1]) == repr(items[i][1]):
                j += 1
            body = _addindent(repr(items[i][1]), 2)
            name = items[i][0] if j == i else f"{items[i][0]}-{items[j][0]}"
            lines.append(f"({name}): {body}" if j == i else f"({name}): {j - i + 1} x {body}")
            i = j + 1
        if not lines:
            return self._get_name() + "()"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward: iterate over it and call its modules")


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        """Removes every module."""
        self._modules.clear()

    def pop(self, key):
        """Removes the module under ``key`` and returns it."""
        value = self[key]
        del self[key]
        return value

    def keys(self):
        """The names of the modules, in insertion order."""
        return self._modules.keys()

    def items(self):
        """``(name, module)`` pairs, in insertion order."""
        return self._modules.items()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules):
        """Adds (or replaces) modules from a mapping or an iterable of (key, module) pairs."""
        if isinstance(modules, (OrderedDict, ModuleDict, Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        _update_from_pairs(self, modules, "ModuleDict")

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward: look up its modules and call them")


def _update_from_pairs(target, pairs, kind):
    """Sets ``target[k] = v`` for each (k, v) of ``pairs``, raising torch's errors for an element that
    is not a pair."""
    for j, pair in enumerate(pairs):
        if not isinstance(pair, Iterable):
            raise TypeError(f"{kind} update sequence element #{j} should be Iterable; is{type(pair).__name__}")
        if len(pair) != 2:
            raise ValueError(f"{kind} update sequence element #{j} has length {len(pair)}; 2 is required")
        target[pair[0]] = pair[1]


def _entry_repr(key, value, type_name):
    """One line of ParameterList/ParameterDict's repr, as torch 2.x prints it."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{type_name} of size {'x'.join(map(str, value.shape))}{device}]"


def _as_parameter(value):
    return value if isinstance(value, Parameter) or not isinstance(value, Tensor) else Parameter(value)


class ParameterList(Module):
    """A list of parameters (plain tensors are wrapped into Parameters), registered on the module."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx, param):
        setattr(self, str(_index(idx, len(self))), _as_parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        """Adds ``value`` at the end (a tensor becomes a Parameter); returns self."""
        self._size += 1
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values):
        """Appends each value of the iterable ``values``; TypeError for a single tensor; returns self."""
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(i, p, str(p.dtype) if isinstance(p, Tensor) else None) for i, p in enumerate(self))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward")


class ParameterDict(Module):
    """An ordered dict of parameters (plain tensors are wrapped into Parameters)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        """The parameter names, in insertion order."""
        return self._keys.keys()

    def items(self):
        """``(name, parameter)`` pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The parameters, in insertion order."""
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        """The parameter under ``key``, or ``default`` when there is none."""
        return self[key] if key in self else default

    def pop(self, key):
        """Removes the parameter under ``key`` and returns it."""
        value = self[key]
        del self[key]
        return value

    def clear(self):
        """Removes every parameter."""
        for key in list(self._keys):
            del self[key]

    def __reversed__(self):
        return reversed(list(self._keys))

    def popitem(self):
        """Removes and returns the last (key, value) pair."""
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        """``self[key]``, first set to ``default`` when ``key`` is absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self):
        """A new ParameterDict holding the same parameter objects (a shallow copy)."""
        return ParameterDict(OrderedDict(self.items()))

    def fromkeys(self, keys, default=None):
        """A new ParameterDict with each of ``keys`` set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def __or__(self, other):
        merged = self.copy()
        merged.update(other)
        return merged

    def __ror__(self, other):
        merged = other.copy()
        merged.update(self)
        return merged

    def __ior__(self, other):
        self.update(other)
        return self

    def update(self, parameters):
        """Adds (or replaces) entries from a mapping or an iterable of (key, value) pairs. As in torch, an
        OrderedDict, a ParameterDict or pairs keep their order; a plain dict's keys go in sorted."""
        if not isinstance(parameters, Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)  # torch's words, "ParametersDict" included
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            _update_from_pairs(self, parameters, "ParameterDict")
            return
        for key, value in pairs:
            self[key] = value

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, p.type() if isinstance(p, Tensor) else None) for k, p in self.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward")
