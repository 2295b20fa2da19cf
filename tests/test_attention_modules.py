"""Attention and the Transformer modules beyond the recorded torch values (test_attention_golden.py):
gradcheck, dropout, masking edge cases, construction, and every bad-input error (type and torch's
message); the golden cases again on the CUDA backend."""
import copy
import math
import re

import numpy as np
import pytest

import rlpipe as r
from rlpipe import nn
from rlpipe.nn import functional as F
from rlpipe.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel
from rlpipe.nn.attention.bias import CausalBias, CausalVariant, causal_lower_right, causal_upper_left
from rlpipe.nn.modules import activation
from rlpipe.nn.modules.transformer import _detect_is_causal_mask

from test_attention_golden import CASES, check_against_golden

SDPA = F.scaled_dot_product_attention
D = r.float64


def _randn(*shape, grad=False):
    return r.randn(*shape, dtype=D, requires_grad=grad)


# ---- gradcheck ------------------------------------------------------------------------------------

def test_sdpa_passes_gradcheck_with_a_float_mask_and_a_fully_masked_row():
    mask = _randn(3, 4, grad=True)
    blocked = r.tensor([[0.0] * 4, [-math.inf] * 4, [0.0, -math.inf, 0.0, 0.0]], dtype=D)
    assert r.autograd.gradcheck(lambda q, k, v, m: SDPA(q, k, v, m + blocked, scale=0.8),
                                (_randn(2, 3, 2, grad=True), _randn(2, 4, 2, grad=True), _randn(2, 4, 3, grad=True),
                                 mask))


def test_multi_head_attention_forward_passes_gradcheck_in_every_input_and_parameter():
    padding = r.tensor([[False, False, True], [False, False, False]])
    mask = r.tensor([[False, False, True], [False, True, False]])

    def run(q, k, v, w_q, w_k, w_v, in_bias, bias_k, bias_v, w_out, b_out):
        return F.multi_head_attention_forward(
            q, k, v, 4, 2, None, in_bias, bias_k, bias_v, True, 0.0, w_out, b_out, key_padding_mask=padding,
            attn_mask=mask, use_separate_proj_weight=True, q_proj_weight=w_q, k_proj_weight=w_k, v_proj_weight=w_v,
            average_attn_weights=False)

    shapes = [(2, 2, 4), (3, 2, 3), (3, 2, 2), (4, 4), (4, 3), (4, 2), (12,), (1, 1, 4), (1, 1, 4), (4, 4), (4,)]
    assert r.autograd.gradcheck(run, tuple(_randn(*s, grad=True) for s in shapes))


@pytest.mark.parametrize("layer", ["encoder", "decoder"])
def test_transformer_layers_pass_gradcheck(layer):
    r.manual_seed(1)
    if layer == "encoder":
        module = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation="gelu", dtype=D)
        inputs = (_randn(3, 2, 4, grad=True),)
    else:
        module = nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, norm_first=True, batch_first=True, dtype=D)
        inputs = (_randn(2, 3, 4, grad=True), _randn(2, 2, 4, grad=True))
    assert r.autograd.gradcheck(lambda *x: module(*x), inputs)
    module(*inputs).sum().backward()
    assert all(p.grad is not None for p in module.parameters())


# ---- dropout --------------------------------------------------------------------------------------

def test_sdpa_dropout_zeroes_weights_and_rescales_the_rest():
    r.manual_seed(3)
    q, k = _randn(4, 8, 3), _randn(4, 8, 3)
    identity = r.eye(8, dtype=D).expand(4, 8, 8)  # value = I: the output is the attention weights themselves
    weights = SDPA(q, k, identity)
    dropped = SDPA(q, k, identity, dropout_p=0.25)
    kept = dropped.detach().numpy() != 0
    np.testing.assert_allclose(dropped.detach().numpy()[kept], weights.detach().numpy()[kept] / 0.75, rtol=1e-12)
    assert 0.55 < kept.mean() < 0.95
    assert (SDPA(q, k, identity, dropout_p=1.0).detach().numpy() == 0).all()
    no_dropout = SDPA(q, k, identity, dropout_p=-0.5).detach().numpy()  # a negative p drops nothing, as in torch
    np.testing.assert_array_equal(no_dropout, weights.detach().numpy())


def test_modules_drop_out_in_training_only():
    r.manual_seed(4)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, dtype=D)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, dtype=D)
    x = _randn(5, 3, 8)
    layer.eval(), mha.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
    np.testing.assert_array_equal(mha(x, x, x)[0].detach().numpy(), mha(x, x, x)[0].detach().numpy())
    without = copy.deepcopy(layer)
    for m in without.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    without.self_attn.dropout = 0.0
    np.testing.assert_allclose(layer(x).detach().numpy(), without(x).detach().numpy(), rtol=0, atol=1e-12)
    layer.train(), mha.train()
    assert not np.allclose(layer(x).detach().numpy(), layer(x).detach().numpy())
    weights = mha(x, x, x, average_attn_weights=False)[1].detach().numpy()
    assert (weights == 0).any()  # the returned weights are the dropped ones, as torch's


# ---- masking edge cases ---------------------------------------------------------------------------

def test_a_fully_padded_batch_element_gives_nan_with_weights_and_zeros_without_as_torch():
    r.manual_seed(5)
    mha = nn.MultiheadAttention(4, 2, bias=False, dtype=D)
    q, k = _randn(3, 2, 4), _randn(5, 2, 4)
    padding = r.zeros(2, 5, dtype=r.bool)
    padding[1] = True
    out, weights = mha(q, k, k, key_padding_mask=padding)
    assert np.isnan(out.detach().numpy()[:, 1]).all() and np.isnan(weights.detach().numpy()[1]).all()
    assert np.isfinite(out.detach().numpy()[:, 0]).all()
    out, weights = mha(q, k, k, key_padding_mask=padding, need_weights=False)
    assert weights is None and (out.detach().numpy()[:, 1] == 0).all()  # no bias: the zero attention projects to 0


def test_static_key_and_value_replace_the_projected_ones():
    r.manual_seed(6)
    mha = nn.MultiheadAttention(4, 2, dtype=D)
    q, k, v = _randn(3, 2, 4), _randn(5, 2, 4), _randn(5, 2, 4)
    w_k, w_v = mha.in_proj_weight[4:8], mha.in_proj_weight[8:]
    b_k, b_v = mha.in_proj_bias[4:8], mha.in_proj_bias[8:]
    heads = lambda x: x.reshape(5, 4, 2).transpose(0, 1)  # noqa: E731 - (S, N, E) -> (N * heads, S, head_dim)
    static_k, static_v = heads(F.linear(k, w_k, b_k)), heads(F.linear(v, w_v, b_v))
    args = (4, 2, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0, mha.out_proj.weight,
            mha.out_proj.bias)
    expected = mha(q, k, v)
    got = F.multi_head_attention_forward(q, r.zeros(5, 2, 4, dtype=D), r.zeros(5, 2, 4, dtype=D), *args,
                                         static_k=static_k, static_v=static_v)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=1e-12)


def test_is_causal_builds_the_top_left_causal_mask():
    q, k, v = _randn(2, 3, 4), _randn(2, 5, 4), _randn(2, 5, 2)
    allowed = r.tensor(np.tril(np.ones((3, 5), bool)))
    np.testing.assert_array_equal(SDPA(q, k, v, is_causal=True).detach().numpy(),
                                  SDPA(q, k, v, allowed).detach().numpy())


def test_batch_dims_broadcast_with_their_gradients():
    q, k, v = _randn(2, 1, 3, 4, grad=True), _randn(1, 3, 5, 4, grad=True), _randn(3, 5, 2, grad=True)
    out = SDPA(q, k, v)
    expected = SDPA(q.expand(2, 3, 3, 4), k.expand(2, 3, 5, 4), v.expand(2, 3, 5, 2))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=0, atol=1e-14)
    assert r.autograd.gradcheck(lambda *x: SDPA(*x), (q, k, v))


@pytest.mark.parametrize("dtype, atol", [(r.bfloat16, 0.05), (r.float16, 0.01), (r.float32, 1e-6)])
def test_low_precision_keeps_its_dtype_and_stays_close_to_float64(dtype, atol):
    q, mask = _randn(2, 2, 3, 4), _randn(3, 3)
    exact = SDPA(q, q, q, attn_mask=mask)
    low_q, low_mask = q.to(dtype).requires_grad_(), mask.to(dtype).requires_grad_()
    out = SDPA(low_q, low_q, low_q, attn_mask=low_mask)
    out.sum().backward()
    assert out.dtype == low_q.grad.dtype == low_mask.grad.dtype == dtype
    np.testing.assert_allclose(out.detach().double().numpy(), exact.detach().numpy(), rtol=0, atol=atol)


def test_is_causal_with_a_mask_applies_both_for_4d_inputs_as_torch():
    q, k, v = _randn(1, 2, 3, 4), _randn(1, 2, 5, 4), _randn(1, 2, 5, 2)
    causal = np.tril(np.ones((3, 5), bool))
    allowed = np.array([[True, False, True, True, True], [False, True, True, False, True], [True] * 5])
    both = SDPA(q, k, v, r.tensor(allowed), is_causal=True)
    np.testing.assert_array_equal(both.detach().numpy(), SDPA(q, k, v, r.tensor(allowed & causal)).detach().numpy())
    bias = _randn(3, 5)
    expected = SDPA(q, k, v, bias.masked_fill(r.tensor(~causal), -math.inf))
    np.testing.assert_allclose(SDPA(q, k, v, bias, is_causal=True).detach().numpy(), expected.detach().numpy(),
                               rtol=0, atol=1e-15)


def test_empty_sequences():
    assert SDPA(_randn(2, 0, 3), _randn(2, 4, 3), _randn(2, 4, 5)).shape == (2, 0, 5)
    out = SDPA(_randn(2, 3, 3), _randn(2, 0, 3), _randn(2, 0, 5))
    assert out.shape == (2, 3, 5) and (out.detach().numpy() == 0).all()


def test_generate_square_subsequent_mask_and_causal_detection():
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=D)
    assert mask.dtype == D
    np.testing.assert_array_equal(mask.detach().numpy(), [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])
    assert nn.Transformer.generate_square_subsequent_mask(2).dtype == r.float32
    assert _detect_is_causal_mask(mask) and _detect_is_causal_mask(mask, size=3)
    assert not _detect_is_causal_mask(mask, size=4) and not _detect_is_causal_mask(mask, is_causal=False)
    assert not _detect_is_causal_mask(r.zeros(3, 3)) and _detect_is_causal_mask(None, is_causal=True)


# ---- construction ---------------------------------------------------------------------------------

def test_multihead_attention_parameters_and_initialization_follow_torch():
    mha = nn.MultiheadAttention(6, 3, kdim=4, vdim=5, add_bias_kv=True)
    assert [n for n, _ in mha.named_parameters()] == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                      "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                                      "out_proj.bias"]
    assert mha.in_proj_weight is None and mha.head_dim == 2 and not mha._qkv_same_embed_dim
    assert (mha.in_proj_bias.detach().numpy() == 0).all() and (mha.out_proj.bias.detach().numpy() == 0).all()
    bound = math.sqrt(6 / (6 + 4))  # xavier_uniform_ of (6, 4)
    assert np.abs(mha.k_proj_weight.detach().numpy()).max() <= bound
    assert activation.MultiheadAttention is nn.MultiheadAttention  # torch.nn.modules.activation's home for it
    plain = nn.MultiheadAttention(6, 3, bias=False)
    assert [n for n, _ in plain.named_parameters()] == ["in_proj_weight", "out_proj.weight"]
    assert plain.bias_k is None and type(plain.out_proj).__name__ == "NonDynamicallyQuantizableLinear"


def test_transformer_layers_are_independent_copies_and_nested_tensor_is_a_no_op():
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    assert encoder.layers[0] is not layer and encoder.layers[0].linear1.weight is not encoder.layers[1].linear1.weight
    with r.no_grad():
        encoder.layers[0].linear1.weight.add_(1.0)
    first, second = (layer.linear1.weight.detach().numpy() for layer in encoder.layers)
    assert not np.allclose(first, second)
    plain = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    plain.load_state_dict(encoder.state_dict())
    x, padding = r.randn(2, 3, 4), r.tensor([[False, False, True], [False, False, False]])
    np.testing.assert_array_equal(encoder(x, src_key_padding_mask=padding).detach().numpy(),
                                  plain(x, src_key_padding_mask=padding).detach().numpy())
    assert encoder.enable_nested_tensor and not encoder.use_nested_tensor


def test_transformer_builds_torchs_modules():
    model = nn.Transformer(8, 2, 1, 2, 16, activation="gelu", norm_first=True, bias=False)
    assert len(model.decoder.layers) == 2 and model.decoder.layers[0].activation is F.gelu
    assert isinstance(model.encoder.norm, nn.LayerNorm) and model.encoder.norm.bias is None
    assert model.encoder.layers[0].activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(8, 2).activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(8, 2, activation=r.tanh).activation_relu_or_gelu == 0
    custom = nn.Identity()
    assert nn.Transformer(8, 2, custom_encoder=custom).encoder is custom
    out = model(r.randn(4, 3, 8), r.randn(5, 3, 8), tgt_mask=model.generate_square_subsequent_mask(5))
    assert out.shape == (5, 3, 8)


def test_sdpa_kernel_selects_and_restores_backends():
    q = _randn(1, 2, 3, 4)
    default = _cur_sdpa_kernel_backends()
    assert default[0] is SDPBackend.CUDNN_ATTENTION and len(default) == 5 and int(SDPBackend.FLASH_ATTENTION) == 1
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION) as state:
        assert state == {} and _cur_sdpa_kernel_backends() == [SDPBackend.FLASH_ATTENTION]
        np.testing.assert_array_equal(SDPA(q, q, q).detach().numpy(), SDPA(q, q, q).detach().numpy())
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]):
        assert _cur_sdpa_kernel_backends() == [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]
    with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention was found"):
        with sdpa_kernel([]):
            SDPA(q, q, q)
    assert _cur_sdpa_kernel_backends() == default
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend or a list of SDPBackend "
                                             "instances, got str"):
        with sdpa_kernel("math"):
            pass


def test_torchs_private_helpers_are_reachable_from_functional():
    x, w, b = _randn(3, 2, 4), _randn(12, 4), _randn(12)
    packed = F._in_projection_packed(x, x, x, w, b)
    separate = F._in_projection(x, x, x, w[:4], w[4:8], w[8:], b[:4], b[4:8], b[8:])
    for got, block in zip(packed, separate):
        np.testing.assert_allclose(got.detach().numpy(), block.detach().numpy(), rtol=0, atol=1e-14)
    assert F._mha_shape_check(x, x, x, None, None, 2) and not F._mha_shape_check(x[0], x[0], x[0], None, None, 2)
    assert F._none_or_dtype(x) == D and F._none_or_dtype(None) is None
    mask = F._canonical_mask(r.tensor([True, False]), "m", None, "", D)
    np.testing.assert_array_equal(mask.detach().numpy(), [-np.inf, 0.0])


def test_causal_biases_mask_as_torchs():
    q, k, v = _randn(1, 2, 3, 4), _randn(1, 2, 5, 4), _randn(1, 2, 5, 2)
    lower_right = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]  # query i sees keys 0..i + (5 - 3)
    bias = causal_lower_right(3, 5)
    assert bias.variant is CausalVariant.LOWER_RIGHT and (bias.seq_len_q, bias.seq_len_kv) == (3, 5)
    np.testing.assert_array_equal(bias._materialize().numpy(), np.array(lower_right, bool))
    assert "True" in repr(bias)
    np.testing.assert_array_equal(SDPA(q, k, v, attn_mask=bias).detach().numpy(),
                                  SDPA(q, k, v, attn_mask=r.tensor(np.array(lower_right, bool))).detach().numpy())
    np.testing.assert_array_equal(SDPA(q, k, v, attn_mask=causal_upper_left(3, 5)).detach().numpy(),
                                  SDPA(q, k, v, is_causal=True).detach().numpy())
    with pytest.raises(ValueError, match="CausalBias should not be used with causal=True"):
        SDPA(q, k, v, attn_mask=bias, is_causal=True)
    with pytest.raises(AssertionError, match="causal_upper_left only supports 2D tensors"):
        causal_upper_left(1, 2, 3)
    with pytest.raises(AssertionError, match="variant must be a CausalVariant, got int"):
        CausalBias(1, 2, 2)
    with pytest.warns(UserWarning, match="Lower right causal bias will produce NaNs in the output when seq_len_q > "
                                         "seq_len_kv!"):
        causal_lower_right(4, 2)


# ---- errors ---------------------------------------------------------------------------------------

_Q, _K, _V = _randn(2, 3, 4), _randn(2, 5, 4), _randn(2, 5, 6)
_MHA = nn.MultiheadAttention(4, 2, dtype=D)
_X, _KV = _randn(3, 2, 4), _randn(5, 2, 4)
_PAD = r.zeros(2, 5, dtype=r.bool)
_MHA_ARGS = (4, 2, _MHA.in_proj_weight, _MHA.in_proj_bias, None, None, False, 0.0, _MHA.out_proj.weight, None)
_TR = nn.Transformer(4, 2, 1, 1, 8)

ERRORS = [
    ("sdpa dtypes", lambda: SDPA(_Q.float(), _K, _V), RuntimeError,
     "Expected query, key, and value to have the same dtype, but got query.dtype: float key.dtype: double and "
     "value.dtype: double instead."),
    ("sdpa 1-D", lambda: SDPA(_Q[0, 0], _K[0, 0], _V[0, 0]), RuntimeError,
     "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: 1 key.dim: 1 and "
     "value.dim: 1 instead."),
    ("sdpa integer", lambda: SDPA(_Q.long(), _K.long(), _V.long()), RuntimeError,
     "expected scalar type Float but found Long"),
    ("sdpa mask dtype", lambda: SDPA(_Q, _K, _V, r.ones(3, 5, dtype=r.int64)), RuntimeError,
     "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: long int and  "
     "query.dtype: double instead."),
    ("sdpa mask and causal", lambda: SDPA(_Q, _K, _V, r.ones(3, 5, dtype=r.bool), is_causal=True), RuntimeError,
     "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"),
    ("sdpa dropout", lambda: SDPA(_Q, _K, _V, dropout_p=1.5), RuntimeError,
     "dropout probability has to be between 0 and 1, but got 1.5"),
    ("sdpa key features", lambda: SDPA(_Q, _randn(2, 5, 3), _V), RuntimeError,
     "key's last dimension must equal query's (4), but got key of shape (2, 5, 3)"),
    ("sdpa value length", lambda: SDPA(_Q, _K, _V[:, :4]), RuntimeError,
     "key and value must have the same sequence length (dim -2), but got key of shape (2, 5, 4) and value of shape "
     "(2, 4, 6)"),
    ("sdpa mask shape", lambda: SDPA(_Q, _K, _V, r.zeros(2, 2, 3, 5, dtype=D)), RuntimeError,
     "attn_mask of shape (2, 2, 3, 5) does not broadcast to the attention scores' shape (2, 3, 5)"),
    ("sdpa batch dims", lambda: SDPA(_Q, _K, _randn(3, 5, 6)), RuntimeError,
     "the batch dims of query (2, 3, 4), key (2, 5, 4) and value (3, 5, 6) do not broadcast"),
    ("sdpa gqa heads", lambda: SDPA(_randn(1, 4, 3, 2), _randn(1, 3, 5, 2), _randn(1, 3, 5, 2), enable_gqa=True),
     RuntimeError, "Number of heads in key and value must divide the number of heads in "),
    ("sdpa gqa dims", lambda: SDPA(_Q[0], _K[0], _V[0], enable_gqa=True), RuntimeError,
     "enable_gqa=True needs query, key and value with a heads dimension (-3), but got 2-D, 2-D and 2-D tensors"),
    ("sdpa not a tensor", lambda: SDPA([1.0], _K, _V), TypeError, "argument 'query' must be"),
    ("sdpa scale by position", lambda: SDPA(_Q, _K, _V, None, 0.0, False, 0.5), TypeError,
     "takes from 3 to 6 positional arguments but 7 were given"),
    ("mha sizes", lambda: nn.MultiheadAttention(0, 2), ValueError,
     "embed_dim and num_heads must be greater than 0, got embed_dim=0 and num_heads=2 instead"),
    ("mha heads", lambda: nn.MultiheadAttention(5, 2), AssertionError, "embed_dim must be divisible by num_heads"),
    ("mha 4-D", lambda: _MHA(_X[None], _X[None], _X[None]), AssertionError,
     "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"),
    ("mha key dims", lambda: _MHA(_X, _KV[0], _KV[0]), AssertionError,
     "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and 2-D tensors respectively"),
    ("mha padding dims", lambda: _MHA(_X, _KV, _KV, key_padding_mask=_PAD[0]), AssertionError,
     "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but found 1-D tensor instead"),
    ("mha padding dtype", lambda: _MHA(_X, _KV, _KV, key_padding_mask=_PAD.long()), AssertionError,
     "only bool and floating types of key_padding_mask are supported"),
    ("mha mask dims", lambda: _MHA(_X, _KV, _KV, attn_mask=r.zeros(5, dtype=D)), AssertionError,
     "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found 1-D tensor instead"),
    ("mha 2-D mask", lambda: _MHA(_X, _KV, _KV, attn_mask=r.zeros(3, 4, dtype=D)), RuntimeError,
     "The shape of the 2D attn_mask is rlpipe.Size([3, 4]), but should be (3, 5)."),
    ("mha 3-D mask", lambda: _MHA(_X, _KV, _KV, attn_mask=r.zeros(3, 3, 5, dtype=D)), RuntimeError,
     "The shape of the 3D attn_mask is rlpipe.Size([3, 3, 5]), but should be (4, 3, 5)."),
    ("mha unbatched mask", lambda: _MHA(_X[:, 0], _KV[:, 0], _KV[:, 0], attn_mask=r.zeros(3, 3, 5, dtype=D)),
     AssertionError, "Expected `attn_mask` shape to be (2, 3, 5) but got rlpipe.Size([3, 3, 5])"),
    ("mha causal without mask", lambda: _MHA(_X, _KV, _KV, is_causal=True), RuntimeError,
     "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
     "`generate_square_subsequent_mask` to create this mask."),
    ("mha embed dim", lambda: _MHA(_randn(3, 2, 6), _KV, _KV), AssertionError,
     "was expecting embedding dimension of 4, but got 6"),
    ("mha key value shapes", lambda: _MHA(_X, _KV, _KV[:4]), AssertionError,
     "key shape rlpipe.Size([5, 2, 4]) does not match value shape rlpipe.Size([4, 2, 4])"),
    ("mha padding length", lambda: _MHA(_X, _KV, _KV, key_padding_mask=_PAD[:, :4]), AssertionError,
     "Expected key_padded_mask.shape[1] to be 5, but got 4"),
    ("mha padding batch", lambda: _MHA(_X, _KV, _KV, key_padding_mask=_PAD[:1]), AssertionError,
     "Expected key_padded_mask.shape[0] to be 2, but got 1"),
    ("mha_forward heads", lambda: F.multi_head_attention_forward(_X, _KV, _KV, 4, 3, *_MHA_ARGS[2:]), AssertionError,
     "embed_dim 4 not divisible by num_heads 3"),
    ("mha_forward in_proj", lambda: F.multi_head_attention_forward(_X, _KV, _KV, 4, 2, None, *_MHA_ARGS[3:]),
     AssertionError, "use_separate_proj_weight is False but in_proj_weight is None"),
    ("mha_forward separate", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, *_MHA_ARGS, use_separate_proj_weight=True, q_proj_weight=_MHA.in_proj_weight[:4]),
     AssertionError, "use_separate_proj_weight is True but k_proj_weight is None"),
    ("mha_forward separate shapes", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV[:, :1], *_MHA_ARGS, use_separate_proj_weight=True), AssertionError,
     "key's sequence and batch dims rlpipe.Size([5, 2]) do not match value's rlpipe.Size([5, 1])"),
    ("mha_forward weight shape", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, *_MHA_ARGS, use_separate_proj_weight=True, q_proj_weight=_MHA.in_proj_weight[:4],
        k_proj_weight=_MHA.in_proj_weight[:3], v_proj_weight=_MHA.in_proj_weight[:4]), AssertionError,
     "expecting key weights shape of (4, 4), but got rlpipe.Size([3, 4])"),
    ("mha_forward bias shape", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, 4, 2, None, r.zeros(6, dtype=D), *_MHA_ARGS[4:], use_separate_proj_weight=True,
        q_proj_weight=_MHA.in_proj_weight[:4], k_proj_weight=_MHA.in_proj_weight[4:8],
        v_proj_weight=_MHA.in_proj_weight[8:]), AssertionError, "expecting query bias shape of (4,), but got "
     "rlpipe.Size([2])"),
    ("mha_forward bias_v", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, 4, 2, _MHA.in_proj_weight, None, r.zeros(1, 1, 4, dtype=D), None, *_MHA_ARGS[6:]),
     AssertionError, "bias_k is set but bias_v is None"),
    ("mha_forward bias_k", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, 4, 2, _MHA.in_proj_weight, None, None, r.zeros(1, 1, 4, dtype=D), *_MHA_ARGS[6:]),
     AssertionError, "bias_v is set but bias_k is None"),
    ("mha_forward static with bias", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, 4, 2, _MHA.in_proj_weight, None, r.zeros(1, 1, 4, dtype=D), r.zeros(1, 1, 4, dtype=D),
        *_MHA_ARGS[6:], static_k=r.zeros(4, 5, 2, dtype=D)), AssertionError, "bias cannot be added to static key."),
    ("mha_forward static_k", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, *_MHA_ARGS, static_k=r.zeros(3, 5, 2, dtype=D)), AssertionError,
     "expecting static_k.size(0) of 4, but got 3"),
    ("mha_forward static_v", lambda: F.multi_head_attention_forward(
        _X, _KV, _KV, *_MHA_ARGS, static_v=r.zeros(4, 5, 3, dtype=D)), AssertionError,
     "expecting static_v.size(2) of 2, but got 3"),
    ("none_or_dtype", lambda: F._none_or_dtype(3), RuntimeError,
     "input to _none_or_dtype() must be None or torch.Tensor"),
    ("activation", lambda: nn.TransformerEncoderLayer(4, 2, activation="tanh"), RuntimeError,
     "activation should be relu/gelu, not tanh"),
    ("transformer batch", lambda: _TR(r.randn(3, 2, 4), r.randn(3, 3, 4)), RuntimeError,
     "the batch number of src and tgt must be equal"),
    ("transformer d_model", lambda: _TR(r.randn(3, 2, 4), r.randn(3, 2, 5)), RuntimeError,
     "the feature number of src and tgt must be equal to d_model"),
]


@pytest.mark.parametrize("call, error, message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_input_raises_torchs_error(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_a_failed_call_leaves_the_module_usable():
    before = {k: v.clone() for k, v in _MHA.state_dict().items()}
    with pytest.raises(AssertionError):
        _MHA(_X, _KV, _KV, key_padding_mask=_PAD[:1])
    assert all((before[k] == v).all() for k, v in _MHA.state_dict().items())
    assert _MHA(_X, _KV, _KV)[0].shape == (3, 2, 4)


def test_mismatched_mask_types_warn_as_torch():
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        _MHA(_X, _KV, _KV, key_padding_mask=_PAD, attn_mask=r.zeros(3, 5, dtype=D))


# ---- the CUDA backend -----------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("k", range(len(CASES)))
def test_golden_cases_on_cuda(k):
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable (CuPy or a GPU missing)")
    check_against_golden(k, device="cuda", atol=1e-9)
