"""``MultiheadAttention``: torch.nn.MultiheadAttention, with its parameter names, so a torch
``state_dict`` loads as is."""
from ..._creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """A ``Linear`` under torch's name for MultiheadAttention's ``out_proj`` (torch uses the type to
    keep quantization off it; here it only keeps the name, in reprs and type checks)."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features each (torch's layer).

    Parameters as in torch: ``in_proj_weight`` (3E, E) packs the query, key and value projections when
    ``kdim`` and ``vdim`` equal ``embed_dim``; otherwise ``q_proj_weight`` (E, E), ``k_proj_weight``
    (E, kdim), ``v_proj_weight`` (E, vdim). ``in_proj_bias`` (3E) and ``out_proj`` (a Linear E -> E)
    with ``bias``; ``bias_k``/``bias_v`` (1, 1, E) with ``add_bias_kv``. Inputs are (L, N, E), or
    (N, L, E) with ``batch_first``, or unbatched (L, E). ``forward`` returns the output and the attention
    weights (None unless ``need_weights``). ``dropout`` drops attention weights in training only.
    Unlike torch there is no separate inference fast path: eval gives the same values through the same
    code (torch's fast path returns the same up to rounding)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        factory = {"device": device, "dtype": dtype}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **factory))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **factory))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **factory))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), **factory))
            self.bias_v = Parameter(empty((1, 1, embed_dim), **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """torch's initialization: Xavier-uniform projections, zero biases, Xavier-normal bias_k/bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Attention of ``query`` over ``key``/``value``: the output and the weights (or None); masks:
        ``key_padding_mask`` (N, S) and ``attn_mask`` (L, S) or (N * heads, L, S), bool (True = masked
        out) or float (added to the scores)."""
        batched = query.ndim == 3
        key_padding_mask = F._canonical_mask(key_padding_mask, "key_padding_mask", F._none_or_dtype(attn_mask),
                                             "attn_mask", query.dtype)
        attn_mask = F._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if self.batch_first and batched:
            query, key, value = _sequence_first(query, key, value)
        separate = {} if self._qkv_same_embed_dim else {
            "use_separate_proj_weight": True, "q_proj_weight": self.q_proj_weight,
            "k_proj_weight": self.k_proj_weight, "v_proj_weight": self.v_proj_weight}
        output, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal, **separate)
        if self.batch_first and batched:
            output = output.transpose(1, 0)
        return output, weights

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """The attention mask and the key-padding mask merged into one (N, heads, L, L) float mask, and
        its kind (1: key padding only, 2: with an attention mask; None: no mask), as torch's."""
        mask_type = merged = None
        if key_padding_mask is not None:
            mask_type, merged = 1, key_padding_mask
        if attn_mask is not None:
            batch_size, seq_len, _ = query.shape
            mask_type = 2
            if attn_mask.ndim == 3:
                merged = attn_mask.reshape(batch_size, -1, seq_len, seq_len)
            else:
                merged = attn_mask.reshape(1, 1, seq_len, seq_len).expand(batch_size, self.num_heads, -1, -1)
            if key_padding_mask is not None:
                merged = merged + key_padding_mask.reshape(batch_size, 1, 1, seq_len).expand(
                    -1, self.num_heads, -1, -1)
        return merged, mask_type


def _sequence_first(query, key, value):
    """Batch-first (N, L, E) inputs as (L, N, E), keeping ``query is key is value`` where it held (the
    in-projection uses it)."""
    if key is value:
        if query is key:
            query = key = value = query.transpose(1, 0)
            return query, key, value
        query, key = query.transpose(1, 0), key.transpose(1, 0)
        return query, key, key
    return query.transpose(1, 0), key.transpose(1, 0), value.transpose(1, 0)
