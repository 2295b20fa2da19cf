"""``rlpipe.accelerator`` (torch.accelerator): the device-agnostic questions "is there an accelerator,
which one, how many", answered for rlpipe's only accelerator kind, CUDA through CuPy."""
from . import cuda
from ._device import device as _device


def is_available():
    """True when a CUDA GPU is usable (CuPy installed, at least one GPU visible)."""
    return cuda.is_available()


def current_accelerator(check_available=False):
    """``device('cuda')`` where CUDA is the accelerator, else None (with ``check_available``, also None
    when no GPU is usable right now)."""
    if check_available and not is_available():
        return None
    return _device("cuda") if is_available() else None


def device_count():
    """The number of usable GPUs (0 without one)."""
    return cuda.device_count()


def current_device_index():
    """The index of the current GPU; RuntimeError without one, as torch raises."""
    if not is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    return cuda.current_device()


def set_device_index(device):
    """Makes ``device`` (an index, 'cuda:N' or a device) the current GPU."""
    cuda.set_device(device)


def synchronize(device=None):
    """Waits for the GPU's queued work (nothing to wait for without one)."""
    if is_available():
        cuda.synchronize(device)
