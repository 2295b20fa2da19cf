"""``rlpipe.cuda``: is a GPU usable, how many, wait for it, seed it."""
from .. import backends


def is_available():
    """True when CuPy is installed and sees at least one GPU."""
    return backends.cuda_available()


def device_count():
    """The number of visible GPUs (0 when CUDA is unavailable)."""
    return backends.cuda_backend().device_count() if is_available() else 0


def synchronize(device=None):
    """Waits until every kernel queued on the GPU has finished."""
    from rlpipe._device import resolve
    index = None if device is None else resolve(device if not isinstance(device, int) else f"cuda:{device}").index
    backends.cuda_backend().synchronize(index)


def current_device():
    """The index of CuPy's current GPU."""
    return backends.cuda_backend().current_device()


def set_device(device):
    """Makes ``device`` (an index, 'cuda:N' or a device) the current GPU."""
    from rlpipe._device import resolve
    backends.cuda_backend().set_device(resolve(device if not isinstance(device, int) else f"cuda:{device}").index)


def manual_seed(seed):
    """Seeds the generators of every GPU (rlpipe keeps one seed for all of them)."""
    from rlpipe import random
    random._cuda_seed[0] = int(seed)
    for gen in random._cuda_generators.values():
        gen.manual_seed(seed)


manual_seed_all = manual_seed
