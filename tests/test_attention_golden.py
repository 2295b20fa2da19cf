"""scaled_dot_product_attention, MultiheadAttention and the Transformer modules against torch 2.13: values
and every gradient (inputs, float masks, parameters), recorded in float64 by
tests/fixtures/make_attention_golden.py; torch's state_dicts load under their own names."""
import json
import os
import warnings

import numpy as np
import pytest

import rlpipe as r
from rlpipe import nn
from rlpipe.nn import functional as F

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
GOLDEN = np.load(os.path.join(FIXTURES, "attention_golden.npz"))
CASES = json.loads(str(GOLDEN["cases"]))
ACTIVATIONS = {"tanh_callable": r.tanh}


def _arrays(k, group):
    prefix = f"c{k}/{group}/"
    return {name[len(prefix):]: GOLDEN[name] for name in GOLDEN.files if name.startswith(prefix)}


def build_module(case):
    """The rlpipe module of a case, float64, in eval mode (dropout off), as the fixture builds torch's."""
    kind, ctor = case["kind"], dict(case["ctor"])
    if kind == "mha":
        return nn.MultiheadAttention(6, 2, dtype=r.float64, **ctor).eval()
    if "activation" in ctor:
        ctor["activation"] = ACTIVATIONS.get(ctor["activation"], ctor["activation"])
    if kind in ("TransformerEncoder", "TransformerDecoder"):
        layer = getattr(nn, kind + "Layer")(dtype=r.float64, **ctor["layer"])
        norm = nn.LayerNorm(6, dtype=r.float64) if ctor["norm"] else None
        return getattr(nn, kind)(layer, ctor["num_layers"], norm).eval()
    return getattr(nn, kind)(dtype=r.float64, **ctor).eval()


def _leaf(array, device, grad):
    """A golden input as a tensor, requiring grad when ``grad`` (float ones only)."""
    return r.tensor(array, device=device, requires_grad=grad and array.dtype == np.float64)


def run_case(k, device="cpu"):
    """Case ``k`` on ``device``: the module (or None), the leaves by name and the outputs by name."""
    case = CASES[k]
    leaves = {n: _leaf(v, device, n in case["args"] or case.get("grad_masks", False))
              for n, v in _arrays(k, "in").items()}
    args = [leaves[name] for name in case["args"]]
    masks = {n: t for n, t in leaves.items() if n not in case["args"]}
    if case["kind"] == "sdpa":
        return None, leaves, {"output": F.scaled_dot_product_attention(*args, **masks, **case["call"])}
    module = build_module(case).to(device)
    missing, unexpected = module.load_state_dict({n: r.tensor(v) for n, v in _arrays(k, "param").items()})
    assert list(missing) == [] and list(unexpected) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's warning on mixed bool/float masks, which some cases use
        result = module(*args, **masks, **case["call"])
    names = ("output", "weights") if case["kind"] == "mha" else ("output",)
    result = result if isinstance(result, tuple) else (result,)
    return module, leaves, {n: value for n, value in zip(names, result) if value is not None}


def check_against_golden(k, device="cpu", atol=1e-10):
    """Outputs and every gradient of the weighted loss equal torch's (float64)."""
    module, leaves, outputs = run_case(k, device)
    expected, weights = _arrays(k, "out"), _arrays(k, "gout")
    assert sorted(outputs) == sorted(expected)
    for name, value in outputs.items():
        assert value.device.type == r.device(device).type
        np.testing.assert_allclose(_host(value), expected[name], rtol=0, atol=atol, err_msg=name)
    loss = sum((value * r.tensor(weights[name], device=device)).sum() for name, value in outputs.items())
    loss.backward()
    if module is not None:
        leaves.update(module.named_parameters())
    grads = _arrays(k, "grad")
    assert sorted(grads) == sorted(n for n, t in leaves.items() if t.requires_grad)
    for name, grad in grads.items():
        np.testing.assert_allclose(_host(leaves[name].grad), grad, rtol=0, atol=atol, err_msg=f"grad {name}")


def _host(t):
    return t.detach().cpu().numpy()


def _case_id(k):
    case = CASES[k]
    return f"c{k}-{case['kind']}-" + "-".join(f"{key}={value}" for key, value in
                                              {**case.get("ctor", {}), **case["call"]}.items())


@pytest.mark.parametrize("k", range(len(CASES)), ids=_case_id)
def test_values_and_gradients_equal_torchs(k):
    check_against_golden(k)


def test_golden_file_covers_every_module_and_option():
    kinds = {c["kind"] for c in CASES}
    assert kinds == {"sdpa", "mha", "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
                     "TransformerDecoder", "Transformer"}
    options = set()
    for case in CASES:
        options.update(case["call"])
        options.update(case.get("ctor", {}))
    assert {"is_causal", "scale", "enable_gqa", "need_weights", "average_attn_weights", "kdim", "vdim", "bias",
            "add_bias_kv", "add_zero_attn", "batch_first", "norm_first", "activation", "layer_norm_eps",
            "tgt_is_causal"} <= options
