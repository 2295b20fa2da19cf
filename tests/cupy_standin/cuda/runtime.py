"""``cupy.cuda.runtime``: device count and current device of the stand-in's fake GPUs."""
from .. import _device


class CUDARuntimeError(RuntimeError):
    """What the CUDA runtime raises (a RuntimeError, as CuPy's is)."""


def getDeviceCount():
    return _device.DEVICE_COUNT


def getDevice():
    return _device.get_device_id()


def setDevice(device):
    _device.set_device_id(device)


def deviceCanAccessPeer(device, peer_device):
    return 0  # no peer access: arrays must be used on their own device
