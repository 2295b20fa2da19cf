"""rlpipe.safetensors: files written by torch 2.13 (tests/fixtures, made with safetensors.torch.save_file)
and by the safetensors package's NumPy API load bit for bit and round-trip; crafted files fail cleanly
and loading runs no code."""
import json
import os
import pickle
import struct

import ml_dtypes
import numpy as np
import pytest

import rlpipe as r

safetensors_numpy = pytest.importorskip("safetensors.numpy")
import rlpipe.safetensors as st  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
TORCH_MLP = os.path.join(FIXTURES, "torch_mlp.safetensors")  # nn.Sequential(Linear(3, 4), Tanh(), Linear(4, 2))
TORCH_DTYPES = os.path.join(FIXTURES, "torch_dtypes.safetensors")


def _mlp():
    return r.nn.Sequential(r.nn.Linear(3, 4), r.nn.Tanh(), r.nn.Linear(4, 2))


def _split(data):
    """A safetensors file's header (parsed) and its data bytes."""
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def test_torch_written_weights_load_into_a_module_and_give_torchs_output(tmp_path):
    model = _mlp()
    assert st.load_model(model, TORCH_MLP) == (set(), [])
    # torch 2.13: the first weights and the output of the same model on [[0.5, -1.0, 2.0]]
    assert model[0].weight.flatten()[:3].tolist() == [-0.004322517663240433, 0.3097158372402191, -0.4751853346824646]
    assert model[2].bias.tolist() == [-0.08059167861938477, 0.05290704965591431]
    np.testing.assert_allclose(model(r.tensor([[0.5, -1.0, 2.0]])).tolist(),
                               [[-0.07085598260164261, -0.059851646423339844]], rtol=1e-6)
    # saving them again writes torch's file byte for byte
    st.save_file(model.state_dict(), tmp_path / "again.safetensors")
    assert (tmp_path / "again.safetensors").read_bytes() == open(TORCH_MLP, "rb").read()


def test_every_dtype_torch_wrote_round_trips_bit_for_bit(tmp_path):
    tensors = st.load_file(TORCH_DTYPES)
    assert {k: (v.dtype.name, v.tolist()) for k, v in tensors.items()} == {
        "half": ("float16", [1.5, -2.25, 65504.0]), "bf16": ("bfloat16", [1.0, 3.140625, -0.0078125]),
        "steps": ("int64", [3, -7, 2 ** 40]), "mask": ("bool", [True, False, True]),
        "bytes": ("uint8", [0, 255, 7]), "f64": ("float64", [[0.1, 1e-300]])}
    data = st.save(tensors, metadata={"format": "pt", "note": "torch 2.13"})
    assert _split(data) == _split(open(TORCH_DTYPES, "rb").read())
    from safetensors import safe_open
    with safe_open(TORCH_DTYPES, framework="np") as f:
        assert f.metadata() == {"format": "pt", "note": "torch 2.13"}


def test_a_file_written_by_the_numpy_api_loads_into_state_dict_and_back(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"0.weight": rng.standard_normal((4, 3)).astype(np.float32), "0.bias": np.float32([1, 2, 3, 4]),
              "2.weight": rng.standard_normal((2, 4)).astype(np.float32), "2.bias": np.float32([-0.5, 0.25])}
    path = tmp_path / "numpy.safetensors"
    safetensors_numpy.save_file(arrays, str(path))
    model = _mlp()
    missing, unexpected = model.load_state_dict(st.load_file(path))
    assert not missing and not unexpected
    for name, value in model.state_dict().items():
        assert value.numpy().tobytes() == arrays[name].tobytes()
    st.save_file(model.state_dict(), tmp_path / "back.safetensors")
    back = safetensors_numpy.load_file(str(tmp_path / "back.safetensors"))
    assert {k: v.tobytes() for k, v in back.items()} == {k: v.tobytes() for k, v in arrays.items()}
    assert st.load(st.save({"x": r.tensor([1.0, 2.0], dtype=r.bfloat16)}))["x"].numpy().tobytes() == \
        np.array([1.0, 2.0], dtype=ml_dtypes.bfloat16).tobytes()


def test_save_model_drops_tied_tensors_and_load_model_fills_them(tmp_path):
    shared = r.nn.Module()
    shared.a = r.nn.Linear(2, 2)
    shared.b = r.nn.Linear(2, 2)
    shared.b.weight = shared.a.weight  # tied
    path = tmp_path / "tied.safetensors"
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        st.save_file(shared.state_dict(), path)
    st.save_model(shared, path)
    assert sorted(st.load_file(path)) == ["a.bias", "a.weight", "b.bias"]
    other = r.nn.Module()
    other.a = r.nn.Linear(2, 2)
    other.b = r.nn.Linear(2, 2)
    other.b.weight = other.a.weight
    assert st.load_model(other, path) == (set(), [])
    assert other.b.weight.tolist() == shared.a.weight.tolist()
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "extra.bias", "extra.weight"'):
        bigger = _mlp()
        bigger.extra = r.nn.Linear(1, 1)
        st.load_model(bigger, TORCH_MLP)
    assert st.load_model(bigger, TORCH_MLP, strict=False)[0] == {"extra.bias", "extra.weight"}


@pytest.mark.parametrize("tensors, error, message", [
    ([r.ones(1)], ValueError, "Expected a dict of [str, rlpipe.Tensor]"),
    ({"x": np.ones(1)}, ValueError, "Key `x` is invalid, expected rlpipe.Tensor"),
    ({"x": r.ones(2, 3).T}, ValueError, "You are trying to save a non contiguous tensor: `x`"),
])
def test_bad_tensors_are_refused(tensors, error, message):
    with pytest.raises(error) as e:
        st.save(tensors)
    assert message in str(e.value)


def _file(header, data=b""):
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


CRAFTED = {
    "empty": b"",
    "short_length": b"\x01\x02",
    "length_past_the_end": struct.pack("<Q", 10 ** 12) + b"{}",
    "not_json": struct.pack("<Q", 5) + b"{nope",
    "offsets_past_the_data": _file({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
    "shape_does_not_match_bytes": _file({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
    "overlapping_tensors": _file({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                  "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
    "unknown_dtype": _file({"x": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_files_raise_a_safetensor_error(tmp_path, name):
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(CRAFTED[name])
    with pytest.raises(st.SafetensorError):
        st.load_file(path)
    with pytest.raises(st.SafetensorError):
        st.load(CRAFTED[name])


def test_a_dtype_rlpipe_lacks_is_named():
    data = safetensors_numpy.save({"x": np.array([1, 2], dtype=np.uint32)})
    with pytest.raises(ValueError, match="tensor 'x' has dtype U32, which rlpipe does not support"):
        st.load(data)


class _Payload:
    """Unpickling this object writes a marker file: a pickle-based loader would run it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_loading_never_runs_code(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "model.safetensors"
    path.write_bytes(pickle.dumps({"weight": _Payload(str(marker))}))
    with pytest.raises(st.SafetensorError):
        st.load_file(path)
    assert not marker.exists()
    # a payload hidden in the metadata is only ever a string
    data = st.save({"x": r.ones(1)}, metadata={"code": pickle.dumps(_Payload(str(marker))).hex()})
    assert st.load(data)["x"].tolist() == [1.0] and not marker.exists()


def test_missing_package_names_the_extra(monkeypatch):
    import importlib
    import sys
    for name in [m for m in sys.modules if m == "safetensors" or m.startswith("safetensors.")] + ["safetensors"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "rlpipe.safetensors")
    with pytest.raises(ImportError, match=r"pip install 'rlpipe\[safetensors\]'"):
        importlib.import_module("rlpipe.safetensors")
