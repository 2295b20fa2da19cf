"""``rlpipe.nn.attention``: torch.nn.attention's backend selection for ``scaled_dot_product_attention``.

rlpipe has one attention kernel (``primitives.ScaledDotProductAttention``), on the CPU and on CUDA, and it
stands in for every backend torch names: ``sdpa_kernel`` records the selection (scripts that pick
``SDPBackend.FLASH_ATTENTION`` run unchanged); only an empty selection makes attention fail, as in torch.
"""
import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """The attention backends torch can pick between (same names and values)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_DEFAULT_ORDER = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                  SDPBackend.MATH, SDPBackend.OVERRIDEABLE]
_enabled = list(_DEFAULT_ORDER)


def _cur_sdpa_kernel_backends(with_priority=False):
    """The backends enabled now (in priority order)."""
    return list(_enabled)


def _check_some_backend_enabled():
    """RuntimeError, torch's, when ``sdpa_kernel`` left no backend enabled."""
    if not _enabled:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due to "
                           "turning off both the math kernel and the fused kernels.")


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Within the block only ``backends`` (one SDPBackend or a list) are enabled for attention; the previous
    selection comes back on exit. rlpipe's one kernel serves whichever is enabled."""
    global _enabled
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    previous = _enabled
    _enabled = list(dict.fromkeys(backends))
    try:
        yield {}
    finally:
        _enabled = previous
