"""Attention for ``rlpipe.nn.functional``: ``scaled_dot_product_attention`` and
``multi_head_attention_forward`` (what ``nn.MultiheadAttention`` and the Transformer layers call), with
torch's argument names, masking rules and errors.

Attention itself is one fused Function (``primitives.ScaledDotProductAttention``); the rest composes
differentiable ops (linear, views, cat), so every input, the float masks included, gets its gradient.
"""
import math
import warnings

from .. import _dtypes
from .. import primitives as P
from .._creation import zeros
from .._dispatch import torch_function
from .._tensor import Tensor
from ..random import rand
from .attention import _check_some_backend_enabled
from .attention.bias import CausalBias, CausalVariant
from ..primitives import ScaledDotProductAttention

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

# torch's C++ names of dtypes, which its attention errors print
_CPP_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                   "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                   "uint8": "unsigned char", "bool": "bool"}


def _cpp_name(t):
    """How torch's C++ core names ``t``'s dtype in its messages."""
    return _CPP_TYPE_NAMES.get(t.dtype.name, t.dtype.name)


# ---- scaled dot-product attention -----------------------------------------------------------------

def _check_sdpa_inputs(query, key, value, attn_mask, dropout_p, is_causal):
    """torch's argument checks of scaled_dot_product_attention (RuntimeError, torch's messages)."""
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_cpp_name(query)} key.dtype: {_cpp_name(key)} and value.dtype: {_cpp_name(value)} "
                           "instead.")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Float but found {P._LEGACY_TYPE_NAMES[query.dtype.name]}")
    if attn_mask is not None and attn_mask.dtype not in (_dtypes.bool, _dtypes.float32, query.dtype):
        raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {_cpp_name(attn_mask)} and  query.dtype: {_cpp_name(query)} instead.")
    if attn_mask is not None and is_causal and not query.ndim == key.ndim == value.ndim == 4:
        # (torch's 4-D kernels apply both; its other paths refuse the pair)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if dropout_p > 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if key.shape[-1] != query.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: key's last dimension must equal query's "
                           f"({query.shape[-1]}), but got key of shape {tuple(key.shape)}")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same sequence length "
                           f"(dim -2), but got key of shape {tuple(key.shape)} and value of shape "
                           f"{tuple(value.shape)}")


def _repeat_kv_heads(query, key, value):
    """Grouped-query attention: key's and value's heads (dim -3) repeated to query's number of heads."""
    if query.ndim < 3 or key.ndim < 3 or value.ndim < 3:
        raise RuntimeError("scaled_dot_product_attention: enable_gqa=True needs query, key and value with a heads "
                           f"dimension (-3), but got {query.ndim}-D, {key.ndim}-D and {value.ndim}-D tensors")
    heads = query.shape[-3]
    if heads % key.shape[-3] or heads % value.shape[-3]:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in ")
    return (key.repeat_interleave(heads // key.shape[-3], -3),
            value.repeat_interleave(heads // value.shape[-3], -3))


def _broadcast_shape(*shapes):
    """The shape the given shapes broadcast to, or None when they do not."""
    ndim = max(len(shape) for shape in shapes)
    out = []
    for sizes in zip(*[(1,) * (ndim - len(shape)) + tuple(shape) for shape in shapes]):
        sizes = {n for n in sizes if n != 1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _scores_shape(query, key, value, attn_mask):
    """The shape of the attention scores, (..., L, S); RuntimeError when the batch dims of query, key and value
    or the mask do not broadcast to it."""
    if _broadcast_shape(query.shape[:-2], key.shape[:-2], value.shape[:-2]) is None:
        raise RuntimeError(f"scaled_dot_product_attention: the batch dims of query {tuple(query.shape)}, key "
                           f"{tuple(key.shape)} and value {tuple(value.shape)} do not broadcast")
    shape = _broadcast_shape(query.shape[:-2], key.shape[:-2]) + (query.shape[-2], key.shape[-2])
    if attn_mask is not None and _broadcast_shape(shape, attn_mask.shape) != shape:
        raise RuntimeError(f"scaled_dot_product_attention: attn_mask of shape {tuple(attn_mask.shape)} does not "
                           f"broadcast to the attention scores' shape {shape}")
    return shape


def _dropout_keep(shape, p, like):
    """The scaled keep mask of dropout with probability ``p``: 0 or 1 / (1 - p) per attention weight."""
    if p >= 1:
        return zeros(shape, dtype=like.dtype, device=like.device)
    keep = rand(shape, dtype=like.dtype, device=like.device) >= p
    return keep.to(like.dtype) * (1.0 / (1.0 - p))


def _causal_bias_mask(bias, is_causal, query):
    """A CausalBias as (attn_mask, is_causal): the causal flag for the top-left variant (or a square one), the
    materialized mask for the bottom-right one."""
    if is_causal:
        raise ValueError("CausalBias should not be used with causal=True")
    if bias.seq_len_q == bias.seq_len_kv or bias.variant == CausalVariant.UPPER_LEFT:
        return None, True
    return bias._materialize(query.device), False


@torch_function("query", "key", "value")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """``softmax(query @ key.mT * scale + mask) @ value`` over the last two dims (sequence, features),
    batched over the leading ones, with torch's semantics: a bool ``attn_mask`` marks with True the
    positions that take part, a float one is added to the scores; ``is_causal`` lets position i attend to
    keys 0..i (together with a mask for 4-D inputs only, as torch); ``scale`` defaults to 1/sqrt(E);
    ``dropout_p`` drops attention weights (always: pass 0.0 in eval); ``enable_gqa`` repeats key/value heads
    (dim -3) to query's. A query row whose keys are all masked out gives zeros (and zero gradients), not nan."""
    if isinstance(attn_mask, CausalBias):
        attn_mask, is_causal = _causal_bias_mask(attn_mask, is_causal, query)
    _check_sdpa_inputs(query, key, value, attn_mask, dropout_p, is_causal)
    _check_some_backend_enabled()
    if enable_gqa:
        key, value = _repeat_kv_heads(query, key, value)
    shape = _scores_shape(query, key, value, attn_mask)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if attn_mask is not None and attn_mask.dtype != _dtypes.bool:
        attn_mask = attn_mask.to(query.dtype)
    keep = _dropout_keep(shape, dropout_p, query) if dropout_p > 0 else None
    return ScaledDotProductAttention.apply(query, key, value, attn_mask, keep, scale, is_causal)


# ---- multi-head attention -------------------------------------------------------------------------

def _none_or_dtype(input):
    """The dtype of a mask, or None when there is none."""
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask (True = masked out) as a float one of ``target_type`` (-inf where True, 0 elsewhere); a
    float mask unchanged. Warns when its dtype differs from the other mask's (``other_type``)."""
    if mask is None:
        return None
    if mask.dtype != _dtypes.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      "instead.", stacklevel=2)
    if mask.dtype == _dtypes.bool:
        mask = P.where(mask, -math.inf, zeros((), dtype=target_type, device=mask.device))
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the call is batched (3-D query) or not (2-D); AssertionError, as torch, for other shapes."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D "
                             "query tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
                             f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or {query.ndim - 1}-D "
                             f"but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.ndim}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return batched


def _linear(x, w, b):
    """``linear`` over the last dim of a (S, N, E) input as one (S * N, E) matrix product: a 3-D product is
    a loop of small ones, and on the transposed view a batch-first input arrives as, several times slower."""
    return P.linear(x.reshape(-1, x.shape[-1]), w, b).reshape(tuple(x.shape[:-1]) + (w.shape[0],))


def _in_projection_packed(q, k, v, w, b=None):
    """q, k and v through the three row blocks of the packed weight ``w`` (and bias ``b``); self-attention
    (q is k is v) as one matmul, key-value attention (k is v) as two."""
    embed_dim = q.shape[-1]
    if k is v and q is k:
        return _linear(q, w, b).chunk(3, -1)
    if k is v:
        q_part, kv_part = w.split([embed_dim, 2 * embed_dim])
        b_q, b_kv = (None, None) if b is None else b.split([embed_dim, 2 * embed_dim])
        return (_linear(q, q_part, b_q),) + tuple(_linear(k, kv_part, b_kv).chunk(2, -1))
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    """q, k and v through their own projection weights (kdim/vdim differing from embed_dim)."""
    e_q, e_k, e_v = q.shape[-1], k.shape[-1], v.shape[-1]
    for name, weight, expected in (("query", w_q, (e_q, e_q)), ("key", w_k, (e_q, e_k)), ("value", w_v, (e_q, e_v))):
        if tuple(weight.shape) != expected:
            raise AssertionError(f"expecting {name} weights shape of {expected}, but got {weight.shape}")
    for name, bias in (("query", b_q), ("key", b_k), ("value", b_v)):
        if bias is not None and tuple(bias.shape) != (e_q,):
            raise AssertionError(f"expecting {name} bias shape of {(e_q,)}, but got {bias.shape}")
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _pad_one_key(mask):
    """A float mask with one more key column of zeros (the key that bias_k or add_zero_attn appends)."""
    return P.cat([mask, zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype, device=mask.device)], -1)


def _checked_attn_mask(attn_mask, tgt_len, src_len, bsz, num_heads):
    """The 2-D (L, S) or 3-D (N * heads, L, S) attention mask as 4-D, (1, 1, L, S) or (N, heads, L, S);
    RuntimeError for another shape."""
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                               f"{(tgt_len, src_len)}.")
        return attn_mask.reshape(1, 1, tgt_len, src_len)
    if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
        raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                           f"{(bsz * num_heads, tgt_len, src_len)}.")
    return attn_mask.reshape(bsz, num_heads, tgt_len, src_len)


def _static_kv(static, name, bsz, num_heads, head_dim):
    """A caller's precomputed key or value, (N * heads, S, head_dim), checked, as (N, heads, S, head_dim)."""
    if static.shape[0] != bsz * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz * num_heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static.reshape(bsz, num_heads, -1, head_dim)


def _split_heads(x, bsz, num_heads, head_dim):
    """(S, N, E) -> (N, heads, S, head_dim)."""
    return x.reshape(x.shape[0], bsz, num_heads, head_dim).permute(1, 2, 0, 3)


def _merged_masks(attn_mask, key_padding_mask, bsz, src_len):
    """The 4-D attention mask plus the key-padding mask (N, S) as (N, 1, 1, S)."""
    if key_padding_mask.shape[0] != bsz:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
    if key_padding_mask.shape[1] != src_len:
        raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                             f"{key_padding_mask.shape[1]}")
    per_batch = key_padding_mask.reshape(bsz, 1, 1, src_len)
    return per_batch if attn_mask is None else attn_mask + per_batch


def _weights_attention(q, k, v, attn_mask, dropout_p, average_attn_weights):
    """Attention of (N, heads, L, head_dim) q over k, v through explicit weights (torch's need_weights path:
    a plain softmax, so a fully masked row is nan); the outputs and the weights, averaged over heads if asked."""
    scores = P.matmul(q * math.sqrt(1.0 / float(q.shape[-1])), k.transpose(-2, -1))
    if attn_mask is not None:
        scores = attn_mask + scores
    weights = P.softmax(scores, -1)
    if dropout_p > 0:  # (torch returns the weights after dropout)
        weights = weights * _dropout_keep(tuple(weights.shape), dropout_p, weights)
    return P.matmul(weights, v), weights.mean(1) if average_attn_weights else weights


def _project(query, key, value, embed_dim, in_proj_weight, in_proj_bias, use_separate_proj_weight,
             q_proj_weight, k_proj_weight, v_proj_weight):
    """The in-projection of query, key and value: packed (``in_proj_weight``) or separate weights."""
    if not use_separate_proj_weight:
        if key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        return _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}")
    for name, weight in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
        if weight is None:
            raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
    biases = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
    return _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, *biases)


def _canonical_masks(query, key_padding_mask, attn_mask, need_weights, is_causal):
    """Both masks as float (or None), and whether SDPA may take ``is_causal`` instead of the mask."""
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask), "attn_mask",
                                       query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        return key_padding_mask, None, True  # the hint alone: SDPA builds the causal mask
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
    return key_padding_mask, attn_mask, is_causal and key_padding_mask is None


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention over sequence-first inputs, query (L, N, E) and key/value (S, N, E) (or
    unbatched (L, E), (S, E)), as ``nn.MultiheadAttention`` computes it: the in-projection, optional
    bias_k/bias_v and zero keys, the masks (bool True = masked out, or float, added), attention per
    head, the out-projection. Returns the output (L, N, E) and, with ``need_weights``, the attention
    weights, (N, L, S) averaged over heads or (N, heads, L, S); else None."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    key_padding_mask, attn_mask, is_causal = _canonical_masks(query, key_padding_mask, attn_mask, need_weights,
                                                              is_causal)
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    q, k, v = _project(query, key, value, embed_dim, in_proj_weight, in_proj_bias, use_separate_proj_weight,
                       q_proj_weight, k_proj_weight, v_proj_weight)
    if attn_mask is not None:
        attn_mask = _checked_attn_mask(attn_mask, tgt_len, key.shape[0], bsz, num_heads)
    k, v, attn_mask, key_padding_mask = _extra_keys(k, v, attn_mask, key_padding_mask, bias_k, bias_v,
                                                    static_k, static_v, bsz)
    heads = (bsz, num_heads, head_dim)
    q = _split_heads(q, *heads)  # (N, heads, L, head_dim), and k, v (N, heads, S, head_dim)
    k = _split_heads(k, *heads) if static_k is None else _static_kv(static_k, "static_k", *heads)
    v = _split_heads(v, *heads) if static_v is None else _static_kv(static_v, "static_v", *heads)
    if add_zero_attn:
        k, v, attn_mask, key_padding_mask = _zero_key(k, v, attn_mask, key_padding_mask)
    if key_padding_mask is not None:
        attn_mask = _merged_masks(attn_mask, key_padding_mask, bsz, k.shape[2])
    dropout_p = dropout_p if training else 0.0
    if need_weights:
        output, weights = _weights_attention(q, k, v, attn_mask, dropout_p, average_attn_weights)
    else:
        output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
        weights = None
    output = output.permute(2, 0, 1, 3).reshape(tgt_len * bsz, embed_dim)
    output = P.linear(output, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not batched:
        output = output.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return output, weights


def _extra_keys(k, v, attn_mask, key_padding_mask, bias_k, bias_v, static_k, static_v, bsz):
    """k and v (S, N, E) with the learned bias_k/bias_v appended as one more key, and the masks padded to
    match; unchanged when there are none."""
    if bias_k is None or bias_v is None:
        if bias_k is not None:
            raise AssertionError("bias_k is set but bias_v is None")
        if bias_v is not None:
            raise AssertionError("bias_v is set but bias_k is None")
        return k, v, attn_mask, key_padding_mask
    if static_k is not None:
        raise AssertionError("bias cannot be added to static key.")
    if static_v is not None:
        raise AssertionError("bias cannot be added to static value.")
    k = P.cat([k, bias_k.repeat(1, bsz, 1)])
    v = P.cat([v, bias_v.repeat(1, bsz, 1)])
    return k, v, _pad_optional(attn_mask), _pad_optional(key_padding_mask)


def _zero_key(k, v, attn_mask, key_padding_mask):
    """k and v (N, heads, S, head_dim) with a key and value of zeros appended (add_zero_attn)."""
    zero = zeros(tuple(k.shape[:2]) + (1, k.shape[3]), dtype=k.dtype, device=k.device)
    return (P.cat([k, zero], 2), P.cat([v, zero.to(v.dtype)], 2), _pad_optional(attn_mask),
            _pad_optional(key_padding_mask))


def _pad_optional(mask):
    """``_pad_one_key`` of a mask that may be None."""
    return None if mask is None else _pad_one_key(mask)
