"""``rlpipe.nn.attention.bias``: torch's causal biases, masks that ``scaled_dot_product_attention`` takes as
``attn_mask``: ``causal_upper_left`` (query i sees keys 0..i) and ``causal_lower_right`` (the diagonal ends
in the bottom-right corner: the last query sees every key, as when queries are the newest of the keys)."""
import enum
import warnings

from ... import _dtypes
from ..._creation import ones

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(enum.IntEnum):
    """Where the causal diagonal is anchored: the top-left corner or the bottom-right one."""
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask of ``seq_len_q`` queries over ``seq_len_kv`` keys, kept as its variant and sizes (not
    materialized) until attention needs it. Unlike torch's it is no Tensor subclass: pass it as
    ``attn_mask``, or call ``_materialize()`` for the bool mask (True = attend)."""

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise AssertionError(f"variant must be a CausalVariant, got {type(variant).__name__}")
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            warnings.warn("Lower right causal bias will produce NaNs in the output when seq_len_q > seq_len_kv!",
                          stacklevel=2)

    def _upper_left(self, device):
        """The mask with query i attending to keys 0..i."""
        return ones(self.seq_len_q, self.seq_len_kv, dtype=_dtypes.bool, device=device).tril()

    def _lower_right(self, device):
        """The mask with query i attending to keys 0..i + (seq_len_kv - seq_len_q)."""
        return ones(self.seq_len_q, self.seq_len_kv, dtype=_dtypes.bool, device=device).tril(
            self.seq_len_kv - self.seq_len_q)

    def _materialize(self, device=None):
        """The bool mask (True = attend) on ``device`` (the CPU by default)."""
        device = "cpu" if device is None else device
        if self.variant == CausalVariant.UPPER_LEFT:
            return self._upper_left(device)
        return self._lower_right(device)

    def __repr__(self):
        return repr(self._materialize())


def _two_sizes(size, name):
    """(seq_len_q, seq_len_kv) from ``name``'s arguments; AssertionError, as torch, for another count."""
    if len(size) != 2:
        raise AssertionError(f"{name} only supports 2D tensors")
    return size


def causal_upper_left(*size):
    """A causal bias of (seq_len_q, seq_len_kv) anchored at the top-left corner (query i sees keys 0..i)."""
    return CausalBias(CausalVariant.UPPER_LEFT, *_two_sizes(size, "causal_upper_left"))


def causal_lower_right(*size):
    """A causal bias of (seq_len_q, seq_len_kv) anchored at the bottom-right corner (the last query sees every
    key)."""
    return CausalBias(CausalVariant.LOWER_RIGHT, *_two_sizes(size, "causal_lower_right"))
