"""Fake GPUs for the stand-in: two devices, a per-thread current device, CuPy's ``Device`` API."""
import threading

DEVICE_COUNT = 2  # two devices, so that multi-GPU code paths run too

_state = threading.local()


def get_device_id():
    """The index of the current device of this thread (0 until set)."""
    return getattr(_state, "current", 0)


def check_device_id(index):
    """``index`` as an int; the error CUDA gives for a device that does not exist."""
    index = int(index)
    if not 0 <= index < DEVICE_COUNT:
        from .cuda.runtime import CUDARuntimeError
        raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
    return index


def set_device_id(index):
    _state.current = check_device_id(index)


class Device:
    """``cupy.cuda.Device``: a device index that works as a context manager.

    Entering makes the device current for this thread; leaving restores the one current
    before. ``Device()`` (or ``Device(None)``) is the current device.
    """

    __slots__ = ("id", "_previous")

    def __init__(self, device=None):
        if isinstance(device, Device):
            device = device.id
        self.id = get_device_id() if device is None else check_device_id(device)
        self._previous = []

    def __enter__(self):
        self._previous.append(get_device_id())
        set_device_id(self.id)
        return self

    def __exit__(self, *exc):
        set_device_id(self._previous.pop())

    def use(self):
        set_device_id(self.id)

    def synchronize(self):
        """Nothing runs asynchronously here: returns at once."""

    @property
    def compute_capability(self):
        return "90"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __int__(self):
        return self.id

    def __repr__(self):
        return "<CUDA Device %d>" % self.id
