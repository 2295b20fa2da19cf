"""Recurrent layers and cells against torch 2.13 (values, final states and every gradient, recorded by
tests/fixtures/make_rnn_golden.py), against finite differences (gradcheck), and packed sequences
against hand-computed cases."""
import json
import os
import warnings

import numpy as np
import pytest

import rlpipe as r
from rlpipe import nn
from rlpipe.nn.utils.rnn import (PackedSequence, invert_permutation, pack_padded_sequence, pack_sequence,
                                 pad_packed_sequence, pad_sequence, unpack_sequence, unpad_sequence)
import rlpipe.safetensors as st

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
GOLDEN = np.load(os.path.join(FIXTURES, "rnn_golden.npz"))
CASES = json.loads(str(GOLDEN["cases"]))
IN, HID = 3, 4


def _layer(case, dtype=r.float64):
    kw = dict(num_layers=case["num_layers"], bidirectional=case["bidirectional"], bias=case["bias"],
              batch_first=case["batch_first"], dtype=dtype)
    kind = case["kind"]
    if kind.startswith("RNN"):
        return nn.RNN(IN, HID, nonlinearity=kind[4:].lower(), **kw)
    if kind == "LSTM_PROJ":
        return nn.LSTM(IN, HID, proj_size=2, **kw)
    return getattr(nn, kind)(IN, HID, **kw)


def _cell(case):
    kind = case["kind"]
    if kind.startswith("RNN"):
        return nn.RNNCell(IN, HID, bias=case["bias"], nonlinearity=kind[4:].lower(), dtype=r.float64)
    return getattr(nn, kind + "Cell")(IN, HID, bias=case["bias"], dtype=r.float64)


def _arrays(k, group):
    prefix = f"c{k}/{group}/"
    return {name[len(prefix):]: GOLDEN[name] for name in GOLDEN.files if name.startswith(prefix)}


def _run(case, module, inputs):
    """The module's outputs by the golden file's names."""
    hidden = [inputs[k] for k in ("h0", "c0") if k in inputs]
    hx = (tuple(hidden) if len(hidden) == 2 else hidden[0]) if hidden else None
    if case["module"] == "cell":
        out = module(inputs["input"], hx)
        return dict(zip(("h", "c"), out if isinstance(out, tuple) else (out,)))
    x = inputs["input"]
    if case["input"] == "packed":
        x = pack_padded_sequence(x, case["lengths"], enforce_sorted=False)
    out, state = module(x, hx)
    outputs = {"output": out.data if case["input"] == "packed" else out}
    outputs.update(zip(("h_n", "c_n"), state if isinstance(state, tuple) else (state,)))
    return outputs


def _case_id(k):
    case = CASES[k]
    return f"c{k}-" + "-".join(f"{key}={value}" for key, value in case.items() if key not in ("hx",) or
                               not value)


def check_against_golden(k, device="cpu"):
    """Case ``k`` of the golden file run on ``device``: outputs, final states and every gradient of the
    weighted loss equal torch's to 1e-10 (float64)."""
    case = CASES[k]
    module = (_cell if case["module"] == "cell" else _layer)(case).to(device)
    missing, unexpected = module.load_state_dict({n: r.tensor(v) for n, v in _arrays(k, "param").items()})
    assert list(missing) == [] and list(unexpected) == []
    inputs = {n: r.tensor(v, device=device, requires_grad=True) for n, v in _arrays(k, "in").items()}
    outputs = _run(case, module, inputs)
    expected, weights = _arrays(k, "out"), _arrays(k, "gout")
    assert sorted(outputs) == sorted(expected)
    for name, value in outputs.items():
        assert value.device.type == r.device(device).type
        np.testing.assert_allclose(_host(value), expected[name], rtol=0, atol=1e-10, err_msg=name)
    loss = sum((value * r.tensor(weights[name], device=device)).sum() for name, value in outputs.items())
    loss.backward()
    leaves = {**inputs, **dict(module.named_parameters())}
    for name, grad in _arrays(k, "grad").items():
        np.testing.assert_allclose(_host(leaves[name].grad), grad, rtol=0, atol=1e-10, err_msg=f"grad {name}")


def _host(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("k", range(len(CASES)), ids=_case_id)
def test_values_and_gradients_equal_torchs(k):
    check_against_golden(k)


def test_golden_file_covers_every_kind_and_argument():
    layers = [c for c in CASES if c["module"] == "layer"]
    assert {c["kind"] for c in layers} == {"RNN_TANH", "RNN_RELU", "LSTM", "GRU", "LSTM_PROJ"}
    for key in ("bias", "batch_first", "bidirectional", "hx"):
        assert {c[key] for c in layers} == {True, False}
    assert {c["num_layers"] for c in layers} == {1, 2}
    assert {c["input"] for c in layers} == {"padded", "unbatched", "packed"}
    assert str(GOLDEN["torch_version"]).startswith("2.13")


# ---- finite differences --------------------------------------------------------------------------

def _gradcheck_layer(kind, **kw):
    r.manual_seed(0)
    proj = {"proj_size": 2} if kind == "LSTM_PROJ" else {}
    cls = {"LSTM_PROJ": nn.LSTM, "LSTM": nn.LSTM, "GRU": nn.GRU, "RNN": nn.RNN}[kind]
    module = cls(2, 3, dtype=r.float64, **proj, **kw)
    names = [n for n, _ in module.named_parameters()]
    batch_first = kw.get("batch_first", False)
    x = r.randn((2, 3, 2) if batch_first else (3, 2, 2), dtype=r.float64, requires_grad=True)
    dirs_layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h0 = r.randn(dirs_layers, 2, 2 if proj else 3, dtype=r.float64, requires_grad=True)
    c0 = r.randn(dirs_layers, 2, 3, dtype=r.float64, requires_grad=True)
    params = [p for _, p in module.named_parameters()]

    def run(x, h0, c0, *params):
        state = dict(zip(names, params))
        out, hn = _call_with(module, state, x, (h0, c0) if "LSTM" in kind else h0)
        return (out, *hn) if isinstance(hn, tuple) else (out, hn)

    assert r.autograd.gradcheck(run, (x, h0, c0, *params))


def _call_with(module, state, x, hx):
    """module(x, hx) with its parameters replaced by ``state`` (tensors that are part of the graph)."""
    saved = dict(module.named_parameters())
    for name, value in state.items():
        del module._parameters[name]
        setattr(module, name, value)
    try:
        return module(x, hx)
    finally:
        for name, value in saved.items():
            delattr(module, name)
            module.register_parameter(name, value)


GRADCHECK_ARGS = [dict(), dict(bias=False), dict(batch_first=True), dict(bidirectional=True),
                  dict(num_layers=2, bidirectional=True), dict(num_layers=2, bias=False, batch_first=True)]


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU", "LSTM_PROJ"])
@pytest.mark.parametrize("kw", GRADCHECK_ARGS, ids=lambda kw: ",".join(kw) or "default")
def test_layers_pass_gradcheck(kind, kw):
    _gradcheck_layer(kind, **kw)


def test_relu_rnn_passes_gradcheck():
    _gradcheck_layer("RNN", nonlinearity="relu", num_layers=2)


@pytest.mark.parametrize("cls", [nn.RNNCell, nn.LSTMCell, nn.GRUCell])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_pass_gradcheck(cls, bias):
    r.manual_seed(1)
    cell = cls(2, 3, bias=bias, dtype=r.float64)
    names = [n for n, _ in cell.named_parameters()]
    x = r.randn(2, 2, dtype=r.float64, requires_grad=True)
    h = r.randn(2, 3, dtype=r.float64, requires_grad=True)
    c = r.randn(2, 3, dtype=r.float64, requires_grad=True)

    def run(x, h, c, *params):
        out = _call_with(cell, dict(zip(names, params)), x, (h, c) if cls is nn.LSTMCell else h)
        return out if isinstance(out, tuple) else (out,)

    assert r.autograd.gradcheck(run, (x, h, c, *[p for _, p in cell.named_parameters()]))


def test_packed_input_passes_gradcheck():
    r.manual_seed(2)
    lstm = nn.LSTM(2, 3, bidirectional=True, dtype=r.float64)
    x = r.randn(3, 3, 2, dtype=r.float64, requires_grad=True)

    def run(x):
        out, (h, c) = lstm(pack_padded_sequence(x, [2, 3, 1], enforce_sorted=False))
        return out.data, h, c

    assert r.autograd.gradcheck(run, (x,))


# ---- torch's state_dict through safetensors --------------------------------------------------------

def test_a_torch_state_dict_loads_through_safetensors_and_gives_torchs_output():
    lstm = nn.LSTM(IN, HID, num_layers=2, bidirectional=True, proj_size=2)
    assert st.load_model(lstm, os.path.join(FIXTURES, "rnn_lstm_torch.safetensors")) == (set(), [])
    out, (h, c) = lstm(r.tensor(GOLDEN["sft/input"]))
    np.testing.assert_allclose(out.detach().numpy(), GOLDEN["sft/output"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.detach().numpy(), GOLDEN["sft/h_n"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), GOLDEN["sft/c_n"], rtol=1e-5, atol=1e-6)


# ---- the module surface ----------------------------------------------------------------------------

def test_parameter_names_shapes_and_order_are_torchs():
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2, bias=True)
    shapes = [(n, tuple(p.shape)) for n, p in lstm.named_parameters()]
    assert shapes[:10] == [("weight_ih_l0", (16, 3)), ("weight_hh_l0", (16, 2)), ("bias_ih_l0", (16,)),
                           ("bias_hh_l0", (16,)), ("weight_hr_l0", (2, 4)), ("weight_ih_l0_reverse", (16, 3)),
                           ("weight_hh_l0_reverse", (16, 2)), ("bias_ih_l0_reverse", (16,)),
                           ("bias_hh_l0_reverse", (16,)), ("weight_hr_l0_reverse", (2, 4))]
    assert shapes[10] == ("weight_ih_l1", (16, 4))  # the layer below's two directions, projected
    assert [len(w) for w in lstm.all_weights] == [5, 5, 5, 5]
    assert lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse
    gru = nn.GRU(3, 4, bias=False)
    assert [(n, tuple(p.shape)) for n, p in gru.named_parameters()] == [("weight_ih_l0", (12, 3)),
                                                                        ("weight_hh_l0", (12, 4))]
    assert [n for n, _ in nn.RNNCell(3, 4, bias=False).named_parameters()] == ["weight_ih", "weight_hh"]
    assert nn.RNNCell(3, 4, bias=False).bias_ih is None


def test_initialisation_is_uniform_in_one_over_sqrt_hidden_size():
    r.manual_seed(0)
    for module in (nn.LSTM(8, 16, num_layers=2), nn.GRUCell(8, 16)):
        values = np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])
        assert np.abs(values).max() <= 0.25
        assert np.abs(values).max() > 0.24 and abs(values.mean()) < 0.02  # spread over the whole range


def test_repr_is_torchs():
    # torch 2.13's reprs of the same modules
    assert repr(nn.RNN(3, 4, nonlinearity="relu")) == "RNN(3, 4)"
    assert repr(nn.RNNCell(3, 4, bias=False, nonlinearity="relu")) == "RNNCell(3, 4, bias=False, nonlinearity=relu)"
    with pytest.warns(UserWarning):
        assert nn.LSTM(3, 4, 1, dropout=0.5).dropout == 0.5
    lstm = nn.LSTM(3, 4, 2, proj_size=2, dropout=0.5, bidirectional=True, batch_first=True, bias=False)
    assert repr(lstm) == ("LSTM(3, 4, proj_size=2, num_layers=2, bias=False, batch_first=True, dropout=0.5, "
                          "bidirectional=True)")
    assert repr(nn.GRUCell(3, 4)) == "GRUCell(3, 4)"
    assert lstm.flatten_parameters() is None


def test_positional_arguments_are_torchs():
    rnn = nn.RNN(3, 4, 2, "relu", False, True, 0.0, True)
    assert (rnn.num_layers, rnn.nonlinearity, rnn.bias, rnn.batch_first, rnn.bidirectional) == (2, "relu", False,
                                                                                                 True, True)
    lstm = nn.LSTM(3, 4, 2, False, True, 0.0, True, 2)
    assert (lstm.bias, lstm.batch_first, lstm.bidirectional, lstm.proj_size) == (False, True, True, 2)


def test_default_state_is_zeros():
    r.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, proj_size=2)
    x = r.randn(5, 2, 3)
    out, (h, c) = lstm(x)
    out0, (h0, c0) = lstm(x, (r.zeros(2, 2, 2), r.zeros(2, 2, 4)))
    assert r.equal(out, out0) and r.equal(h, h0) and r.equal(c, c0)
    assert tuple(out.shape) == (5, 2, 2) and tuple(h.shape) == (2, 2, 2) and tuple(c.shape) == (2, 2, 4)


def test_dropout_acts_between_layers_only_while_training():
    r.manual_seed(0)
    rnn = nn.RNN(3, 4, num_layers=2, dropout=1.0)  # everything the first layer gives is dropped
    x = r.randn(5, 2, 3)
    out, h = rnn(x)
    top = nn.RNN(4, 4)
    top.load_state_dict({k[:-1] + "0": v for k, v in rnn.state_dict().items() if k.endswith("l1")})
    expected, _ = top(r.zeros(5, 2, 4))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), atol=1e-7)
    rnn.eval()
    first = nn.RNN(3, 4)
    first.load_state_dict({k: v for k, v in rnn.state_dict().items() if k.endswith("l0")})
    expected, _ = top(first(x)[0])
    np.testing.assert_allclose(rnn(x)[0].detach().numpy(), expected.detach().numpy(), atol=1e-7)


def test_unbatched_input_matches_a_batch_of_one():
    r.manual_seed(0)
    gru = nn.GRU(3, 4, num_layers=2, bidirectional=True)
    x, h0 = r.randn(5, 3), r.randn(4, 4)
    out, h = gru(x, h0)
    out1, h1 = gru(x.unsqueeze(1), h0.unsqueeze(1))
    assert r.equal(out, out1.squeeze(1)) and r.equal(h, h1.squeeze(1))


# ---- torch's errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("make, args, error, message", [
    (lambda: nn.LSTM(3, 4), (r.zeros(2, 3, 4, 3),), ValueError, "LSTM: Expected input to be 2D or 3D, got 4D instead"),
    (lambda: nn.GRU(3, 4), (r.zeros(3),), ValueError, "GRU: Expected input to be 2D or 3D, got 1D tensor instead"),
    (lambda: nn.RNN(3, 4), (r.zeros(2, 2, 5),), RuntimeError,
     "input.size(-1) must be equal to input_size. Expected 3, got 5"),
    (lambda: nn.LSTM(3, 4), (r.zeros(0, 2, 3),), RuntimeError, "Expected sequence length to be larger than 0 in RNN"),
    (lambda: nn.GRU(3, 4, batch_first=True), (r.zeros(2, 0, 3),), RuntimeError,
     "Expected sequence length to be larger than 0 in RNN"),
    (lambda: nn.RNN(3, 4), (r.zeros(0, 3),), RuntimeError, "Expected sequence length to be larger than 0 in RNN"),
    (lambda: nn.RNN(3, 4), (r.zeros(2, 2, 3), r.zeros(1, 3, 4)), RuntimeError,
     "Expected hidden size (1, 2, 4), got [1, 3, 4]"),
    (lambda: nn.RNN(3, 4), (r.zeros(2, 2, 3), r.zeros(2, 4)), RuntimeError,
     "For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
    (lambda: nn.GRU(3, 4), (r.zeros(2, 3), r.zeros(1, 1, 4)), RuntimeError,
     "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"),
    (lambda: nn.LSTM(3, 4), (r.zeros(2, 2, 3), (r.zeros(1, 2, 4), r.zeros(2, 4))), RuntimeError,
     "For batched 3-D input, hx and cx should also be 3-D but got (3-D, 2-D) tensors"),
    (lambda: nn.LSTM(3, 4, proj_size=2), (r.zeros(2, 2, 3), (r.zeros(1, 2, 4), r.zeros(1, 2, 4))), RuntimeError,
     "Expected hidden[0] size (1, 2, 2), got [1, 2, 4]"),
    (lambda: nn.LSTM(3, 4), (r.zeros(2, 2, 3), (r.zeros(1, 2, 4), r.zeros(1, 2, 3))), RuntimeError,
     "Expected hidden[1] size (1, 2, 4), got [1, 2, 3]"),
    (lambda: nn.LSTM(3, 4), (r.zeros(2, 2, 3, dtype=r.float64),), ValueError,
     "RNN input dtype (rlpipe.float64) does not match weight dtype (rlpipe.float32)"),
    (lambda: nn.RNNCell(3, 4), (r.zeros(2, 5),), RuntimeError, "input has inconsistent input_size: got 5 expected 3"),
    (lambda: nn.RNNCell(3, 4), (r.zeros(2, 3), r.zeros(3, 4)), RuntimeError,
     "Input batch size 2 doesn't match hidden0 batch size 3"),
    (lambda: nn.LSTMCell(3, 4), (r.zeros(2, 3), (r.zeros(2, 4), r.zeros(2, 5))), RuntimeError,
     "hidden1 has inconsistent hidden_size: got 5, expected 4"),
    (lambda: nn.GRUCell(3, 4), (r.zeros(1, 2, 3),), ValueError,
     "GRUCell: Expected input to be 1D or 2D, got 3D instead"),
    (lambda: nn.LSTMCell(3, 4), (r.zeros(3), (r.zeros(1, 1, 4), r.zeros(4))), ValueError,
     "LSTMCell: Expected hx[0] to be 1D or 2D, got 3D instead"),
])
def test_bad_inputs_raise_torchs_errors(make, args, error, message):
    module = make()
    with pytest.raises(error) as info:
        module(*args)
    assert message in str(info.value)
    assert module(r.zeros(2, 3))[0] is not None  # still usable


@pytest.mark.parametrize("make, error, message", [
    (lambda: nn.LSTM(3, 4, proj_size=4), ValueError, "proj_size has to be smaller than hidden_size"),
    (lambda: nn.GRU(3, 4, proj_size=2), ValueError, "proj_size argument is only supported for LSTM, not RNN or GRU"),
    (lambda: nn.RNN(3, 4, nonlinearity="gelu"), ValueError,
     "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."),
    (lambda: nn.LSTM(3, 4, dropout=1.5), ValueError, "dropout should be a number in range [0, 1]"),
    (lambda: nn.LSTM(3, 0), ValueError, "hidden_size must be greater than zero"),
    (lambda: nn.LSTM(3.0, 4), TypeError, "input_size should be of type int, got: float"),
    (lambda: nn.LSTM(3, 4, num_layers=0), ValueError, "num_layers must be greater than zero"),
    (lambda: nn.LSTM(3, 4, bias=1), TypeError, "bias should be of type bool, got: int"),
])
def test_bad_arguments_raise_torchs_errors(make, error, message):
    with warnings.catch_warnings(), pytest.raises(error) as info:
        warnings.simplefilter("ignore")
        make()
    assert message in str(info.value)


# ---- packed sequences (hand-computed) ------------------------------------------------------------

def test_pack_padded_sequence_by_hand():
    padded = r.tensor([[1.0, 4.0, 6.0], [2.0, 5.0, 0.0], [3.0, 0.0, 0.0]])  # [T=3, B=3], lengths 3, 2, 1
    packed = pack_padded_sequence(padded, [3, 2, 1])
    assert packed.data.tolist() == [1.0, 4.0, 6.0, 2.0, 5.0, 3.0]
    assert packed.batch_sizes.tolist() == [3, 2, 1] and packed.batch_sizes.dtype == r.int64
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    shuffled = r.tensor([[6.0, 0.0, 0.0], [1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])  # batch-first, lengths 1, 3, 2
    unsorted = pack_padded_sequence(shuffled, [1, 3, 2], batch_first=True, enforce_sorted=False)
    assert unsorted.data.tolist() == [1.0, 4.0, 6.0, 2.0, 5.0, 3.0]
    assert unsorted.sorted_indices.tolist() == [1, 2, 0] and unsorted.unsorted_indices.tolist() == [2, 0, 1]
    assert invert_permutation(r.tensor([1, 2, 0])).tolist() == [2, 0, 1]


def test_pad_packed_sequence_by_hand():
    packed = PackedSequence(r.tensor([1.0, 4.0, 2.0, 5.0, 3.0]), r.tensor([2, 2, 1]))
    padded, lengths = pad_packed_sequence(packed, padding_value=-1.0, total_length=4)
    assert padded.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, -1.0], [-1.0, -1.0]]
    assert lengths.tolist() == [3, 2]
    padded, _ = pad_packed_sequence(packed, batch_first=True)
    assert padded.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]]
    with pytest.raises(ValueError, match="total_length=2 and max sequence length being 3"):
        pad_packed_sequence(packed, total_length=2)


def test_round_trips_keep_the_original_order():
    seqs = [r.tensor([[1.0], [2.0]]), r.tensor([[3.0], [4.0], [5.0]]), r.tensor([[6.0]])]
    packed = pack_sequence(seqs, enforce_sorted=False)
    assert packed.data.flatten().tolist() == [3.0, 1.0, 6.0, 4.0, 2.0, 5.0]
    assert [s.flatten().tolist() for s in unpack_sequence(packed)] == [[1.0, 2.0], [3.0, 4.0, 5.0], [6.0]]
    padded, lengths = pad_packed_sequence(packed)
    assert lengths.tolist() == [2, 3, 1]
    assert padded[:, :, 0].t().tolist() == [[1.0, 2.0, 0.0], [3.0, 4.0, 5.0], [6.0, 0.0, 0.0]]
    back = unpad_sequence(padded, lengths)
    assert [s.flatten().tolist() for s in back] == [[1.0, 2.0], [3.0, 4.0, 5.0], [6.0]]
    assert pad_sequence(seqs, batch_first=True, padding_value=9.0)[:, :, 0].tolist() == [[1.0, 2.0, 9.0],
                                                                                         [3.0, 4.0, 5.0],
                                                                                         [6.0, 9.0, 9.0]]
    assert pad_sequence(seqs, batch_first=True, padding_side="left")[:, :, 0].tolist() == [[0.0, 1.0, 2.0],
                                                                                           [3.0, 4.0, 5.0],
                                                                                           [0.0, 0.0, 6.0]]


def test_packing_errors_are_torchs():
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_padded_sequence(r.zeros(3, 2), [2, 3])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        pack_padded_sequence(r.zeros(3, 2), [0, 3], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to batch_size, but got 3"):
        pack_padded_sequence(r.zeros(3, 2), [3, 2, 1])
    for padded, lengths in ((r.zeros(0, 0), []), (r.zeros(3, 0, 2), [])):  # torch 2.13's message for both
        with pytest.raises(RuntimeError, match="Cannot pack empty tensors"):
            pack_padded_sequence(padded, lengths)
    with pytest.raises(RuntimeError, match="padding_side to be one of left or right, but got x"):
        pad_sequence([r.zeros(2)], padding_side="x")


def test_gradients_flow_through_packing():
    x = r.tensor([[1.0, 4.0], [2.0, 5.0], [3.0, 0.0]], requires_grad=True)
    packed = pack_padded_sequence(x, [3, 2])
    (packed.data * r.tensor([1.0, 2.0, 3.0, 4.0, 5.0])).sum().backward()
    assert x.grad.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]]


@pytest.mark.parametrize("cls", [nn.RNN, nn.LSTM, nn.GRU])
def test_packed_batch_equals_each_sequence_run_alone(cls):
    r.manual_seed(3)
    module = cls(2, 3, num_layers=2, bidirectional=True, dtype=r.float64)
    seqs = [r.randn(n, 2, dtype=r.float64) for n in (2, 4, 1, 4)]
    out, state = module(pack_sequence(seqs, enforce_sorted=False))
    padded, lengths = pad_packed_sequence(out, batch_first=True)
    assert lengths.tolist() == [2, 4, 1, 4]
    states = state if isinstance(state, tuple) else (state,)
    for i, seq in enumerate(seqs):
        alone, alone_state = module(seq)
        np.testing.assert_allclose(padded[i, :len(seq)].detach().numpy(), alone.detach().numpy(), atol=1e-12)
        assert padded[i, len(seq):].abs().sum().item() == 0.0
        for s, a in zip(states, alone_state if isinstance(alone_state, tuple) else (alone_state,)):
            np.testing.assert_allclose(s[:, i].detach().numpy(), a.detach().numpy(), atol=1e-12)


def test_packed_input_with_a_given_state_is_sorted_and_unsorted():
    r.manual_seed(4)
    gru = nn.GRU(2, 3, dtype=r.float64)
    seqs = [r.randn(n, 2, dtype=r.float64) for n in (1, 3)]
    h0 = r.randn(1, 2, 3, dtype=r.float64)
    _, h = gru(pack_sequence(seqs, enforce_sorted=False), h0)
    for i, seq in enumerate(seqs):
        np.testing.assert_allclose(h[0, i].detach().numpy(), gru(seq, h0[:, i])[1][0].detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_a_layer_under_vmap_equals_the_loop_over_the_batch_values_and_gradients(cls):
    """vmap hands the layer batched tensors, which run the per-step ops (the fused LSTM node takes plain
    tensors only; it used to be handed the batched ones and fail)."""
    from rlpipe.func import vmap
    r.manual_seed(5)
    layer = cls(3, 4, dtype=r.float64)
    x = r.randn(5, 2, 6, 3, dtype=r.float64, requires_grad=True)
    got = vmap(lambda seq: layer(seq)[0])(x)
    want = r.stack([layer(seq)[0] for seq in x])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-12)
    weights = r.randn(*got.shape, dtype=r.float64)
    grads = r.autograd.grad((got * weights).sum(), [x, layer.weight_hh_l0])
    grads_want = r.autograd.grad((want * weights).sum(), [x, layer.weight_hh_l0])
    for g, w in zip(grads, grads_want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-12)
