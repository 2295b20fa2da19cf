"""Padding layers over ``F.pad``: zero, constant, reflection, replication and circular padding of the last
one (``*1d``) or two (``*2d``) dimensions. ``padding`` is an int (the same on every side) or a tuple
(left, right) / (left, right, top, bottom)."""
from .. import functional as F
from .module import Module
from .utils import _pair, _quadruple

__all__ = ["ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d", "CircularPad2d"]


class _PadNd(Module):
    """Pads with ``F.pad`` in ``_mode``; ``_expand`` makes the padding tuple from an int."""
    _mode = "constant"
    _expand = staticmethod(_pair)

    def __init__(self, padding):
        super().__init__()
        self.padding = type(self)._expand(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """Pads with the constant ``value``."""

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with ``value``."""


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with ``value``."""
    _expand = staticmethod(_quadruple)


class ZeroPad1d(ConstantPad1d):
    """Pads the last dimension with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dimensions with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pads the last dimension with its reflection about the edge (the edge itself not repeated)."""
    _mode = "reflect"


class ReflectionPad2d(_PadNd):
    """Pads the last two dimensions with their reflection about the edges."""
    _mode = "reflect"
    _expand = staticmethod(_quadruple)


class ReplicationPad1d(_PadNd):
    """Pads the last dimension by repeating its edge values."""
    _mode = "replicate"


class ReplicationPad2d(_PadNd):
    """Pads the last two dimensions by repeating their edge values."""
    _mode = "replicate"
    _expand = staticmethod(_quadruple)


class _CircularPadNd(_PadNd):
    """Pads by wrapping around (the other end's values), for inputs of ``_ranks`` dimensions."""
    _mode = "circular"
    _ranks = (2, 3)

    def forward(self, input):
        if input.ndim not in self._ranks:
            raise ValueError(f"expected {self._ranks[0]}D or {self._ranks[1]}D input (got {input.ndim}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pads the last dimension circularly: the left padding comes from the right end and vice versa."""


class CircularPad2d(_CircularPadNd):
    """Pads the last two dimensions circularly."""
    _expand = staticmethod(_quadruple)
    _ranks = (3, 4)
