"""Layer 1: one module per device kind. Nothing above this layer does math with numpy or cupy."""
from . import cpu
from . import cudnn, mps  # noqa: F401 - torch.backends' flags modules, for scripts that set them

_CUDA_HINT = ("the cuda backend needs CuPy and an NVIDIA GPU: install rlpipe with the extra that "
              "matches your CUDA toolkit, pip install 'rlpipe[cuda12]' or 'rlpipe[cuda13]'")
_cuda = None


def cuda_backend():
    """The CuPy backend module; RuntimeError saying what to install when it cannot load."""
    global _cuda
    if _cuda is None:
        try:
            from rlpipe.backends import cuda as module
        except ImportError as e:
            raise RuntimeError(f"{_CUDA_HINT} ({e})") from None
        if not module.is_available():
            raise RuntimeError(f"{_CUDA_HINT} (CuPy is installed but found no usable GPU)")
        _cuda = module
    return _cuda


def cuda_available():
    """True when the CUDA backend loads (CuPy imports and finds a GPU)."""
    try:
        cuda_backend()
        return True
    except RuntimeError:
        return False


def get(device_type):
    """The backend module for ``"cpu"`` or ``"cuda"``; RuntimeError for another device type."""
    if device_type == "cpu":
        return cpu
    if device_type == "cuda":
        return cuda_backend()
    raise RuntimeError(f"device type {device_type!r} is not supported by rlpipe; expected 'cpu' or 'cuda'")
