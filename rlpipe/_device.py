"""Devices: ``rlpipe.device("cpu")``, ``rlpipe.device("cuda:0")``."""
import operator

from . import backends


def _checked_index(index):
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"device(): the device index must be an int, got {index!r}")
    if index < 0:
        raise RuntimeError(f"device(): the device index must be >= 0, got index={index!r}")
    return operator.index(index)


class device:
    """Where a tensor's data lives. Instances are interned, so ``is`` compares them."""
    __slots__ = ("type", "index", "_str", "_backend")
    _interned = {}

    def __new__(cls, type_or_spec, index=None):
        if isinstance(type_or_spec, device):
            return type_or_spec
        if isinstance(type_or_spec, int) and not isinstance(type_or_spec, bool):
            type_or_spec, index = "cuda", type_or_spec
        if not isinstance(type_or_spec, str):
            raise TypeError(f"device(): expected a string like 'cpu' or 'cuda:0', got {type_or_spec!r}")
        kind, _, num = type_or_spec.partition(":")
        if num:
            if index is not None:
                raise RuntimeError(f"device(): index given twice in {type_or_spec!r} and index={index}")
            if not (num.isascii() and num.isdigit()):  # str.isdigit alone passes '¹', which int() refuses
                raise RuntimeError(f"Invalid device string: {type_or_spec!r}")
            index = int(num)
        if index is not None:
            index = _checked_index(index)
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"device type {kind!r} is not supported by rlpipe; "
                               f"expected 'cpu', 'cuda' or 'cuda:N' (got {type_or_spec!r})")
        if kind == "cpu":
            index = None
        key = (kind, index)
        dev = cls._interned.get(key)
        if dev is None:
            dev = object.__new__(cls)
            dev.type, dev.index = kind, index
            dev._str = kind if index is None else f"{kind}:{index}"
            dev._backend = backends.cpu if kind == "cpu" else None  # cuda's is set by resolve()
            cls._interned[key] = dev
        return dev

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self._str

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        return self is other

    def __hash__(self):
        return hash(self._str)

    def __reduce__(self):
        return (device, (self._str,))

    def __enter__(self):
        """``with rlpipe.device("cuda"):`` makes this the default device inside the block."""
        _entered.append(_default[0])
        _default[0] = resolve(self)
        return self

    def __exit__(self, *exc_info):
        _default[0] = _entered.pop()


CPU = device("cpu")
_default = [CPU]  # where creation functions put a tensor when no device is given
_entered = []  # the defaults that ``with device(...)`` blocks replaced, innermost last


def set_default_device(device):
    """Where creation functions (``zeros``, ``tensor``, ``rand`` ...) and new modules' parameters go
    when no device is given; None means the CPU again."""
    _default[0] = CPU if device is None else resolve(device)


def get_default_device():
    """The device creation functions use when none is given (the CPU unless changed)."""
    return _default[0]


def resolve(spec):
    """A concrete device: 'cuda' becomes 'cuda:<current>', and the backend must load."""
    dev = device(spec)
    if dev.type == "cuda":
        cuda = backends.cuda_backend()
        if dev.index is None:
            dev = device("cuda", cuda.current_device())
        elif dev.index >= cuda.device_count():
            raise RuntimeError(f"CUDA device {dev.index} does not exist: {cuda.device_count()} device(s) found")
        dev._backend = cuda
    return dev
