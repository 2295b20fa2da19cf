"""Devices: ``rlpipe.device("cpu")``, ``rlpipe.device("cuda:0")``."""
from . import backends


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
            if not num.isdigit():
                raise RuntimeError(f"Invalid device string: {type_or_spec!r}")
            index = int(num)
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


CPU = device("cpu")


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
