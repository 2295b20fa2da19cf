"""Consolidated transport: TensorDict.from_consolidated, is_consolidated and pickling of a
consolidated TensorDict as one storage plus metadata (tensordict 0.14.3)."""
import json
import pickle

import numpy as np
import pytest

import rlpipe
from rlpipe.tensordict import NonTensorData, NonTensorStack, TensorDict

# bit patterns a value-wise comparison would miss: -0.0, a NaN with a payload, subnormals
_F32_BITS = np.array([0x80000000, 0x7FC00123, 0x00000001, 0x3F800000], dtype=np.uint32)


def _arrays():
    """key -> NumPy array of every kind of leaf: the independent truth of the round trips."""
    rng = np.random.default_rng(0)
    return {
        "f32": _F32_BITS.view(np.float32),
        "f64": rng.standard_normal((4, 3)),
        "f16": rng.standard_normal((4, 1)).astype(np.float16),
        "i64": rng.integers(-2**62, 2**62, (4, 2)),
        "i8": np.array([-128, 0, 1, 127], dtype=np.int8),
        "u8": np.array([0, 1, 254, 255], dtype=np.uint8),
        "b": np.array([True, False, False, True]),
        "empty": np.zeros((4, 0), np.float32),
    }


def _td():
    arrays = _arrays()
    td = TensorDict({k: rlpipe.tensor(v) for k, v in arrays.items()}, [4], names=["env"])
    td["bf16"] = rlpipe.tensor([1.5, -2.0, 3.25, 0.0], dtype=rlpipe.bfloat16)
    td["next"] = TensorDict({"obs": rlpipe.tensor(arrays["f64"]), "done": rlpipe.tensor(arrays["b"]),
                             "deeper": TensorDict({"i16": rlpipe.tensor(np.arange(4, dtype=np.int16))}, [4])}, [4])
    td["label"] = NonTensorData("pong", batch_size=[4])
    td["tags"] = NonTensorStack.from_list(["a", "b", "c", "d"])
    return td


def _assert_bit_exact(got, want):
    """Same keys, classes, batch sizes, names and every leaf's dtype, shape and bytes."""
    assert type(got) is type(want) and got.batch_size == want.batch_size and got.names == want.names
    assert sorted(got.keys()) == sorted(want.keys())
    for key in want.keys():
        a, b = got.get(key), want.get(key)
        if isinstance(b, rlpipe.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape, key
            assert a.numpy().tobytes() == b.numpy().tobytes(), key
        elif getattr(b, "_is_non_tensor", False):
            assert type(a) is type(b) and a.tolist() == b.tolist() and a.batch_size == b.batch_size, key
        else:
            _assert_bit_exact(a, b)


def test_leaves_survive_bit_exact_from_the_independent_arrays():
    out = TensorDict.from_consolidated(_td().consolidate())
    for key, array in _arrays().items():
        assert out[key].numpy().dtype == array.dtype and out[key].numpy().tobytes() == array.tobytes(), key
    assert out["f32"].numpy().view(np.uint32).tolist() == _F32_BITS.tolist()
    assert out["bf16"].tolist() == [1.5, -2.0, 3.25, 0.0] and out["bf16"].dtype == rlpipe.bfloat16
    assert out["next", "deeper", "i16"].tolist() == [0, 1, 2, 3] and out["next", "deeper", "i16"].dtype == rlpipe.int16
    assert out["label"] == "pong" and out["tags"] == ["a", "b", "c", "d"] and out.names == ["env"]


@pytest.mark.parametrize("route", ["tensordict", "pickle", "file", "bytes", "uint8 tensor"])
def test_round_trips_are_bit_exact(route, tmp_path):
    td = _td()
    consolidated = td.consolidate(tmp_path / "c.bin") if route in ("file", "bytes", "uint8 tensor") \
        else td.consolidate()
    raw = (tmp_path / "c.bin").read_bytes() if route != "tensordict" and route != "pickle" else None
    out = {"tensordict": lambda: TensorDict.from_consolidated(consolidated),
           "pickle": lambda: pickle.loads(pickle.dumps(consolidated)),
           "file": lambda: TensorDict.from_consolidated(tmp_path / "c.bin"),
           "bytes": lambda: TensorDict.from_consolidated(raw),
           "uint8 tensor": lambda: TensorDict.from_consolidated(rlpipe.tensor(np.frombuffer(raw, np.uint8)))}[route]()
    _assert_bit_exact(out, td)
    assert out.is_consolidated() and out.is_locked and not out["next"].is_consolidated()
    assert out.device == consolidated.device and out["next"].device == consolidated["next"].device


def test_zero_dim_leaves_in_a_batchless_tensordict_round_trip():
    td = TensorDict({"scalar": rlpipe.tensor(np.float32(7.0)), "n": {"flag": rlpipe.tensor(True)}}, [])
    for out in (TensorDict.from_consolidated(td.consolidate()), pickle.loads(pickle.dumps(td.consolidate()))):
        _assert_bit_exact(out, td)
        assert out["scalar"].shape == rlpipe.Size([]) and out["scalar"].item() == 7.0 and out["n", "flag"].item()


def test_the_result_is_a_view_of_one_storage():
    source = _td().consolidate()
    out = TensorDict.from_consolidated(source)
    assert out._consolidated["storage"] is source._consolidated["storage"]
    source._consolidated["storage"].zero_()
    assert (out["i64"] == 0).all() and (out["next", "obs"] == 0).all()


def test_pickle_sends_the_storage_once_and_the_result_shares_it():
    td = TensorDict({"obs": rlpipe.ones(10_000, 4), "next": {"obs": rlpipe.ones(10_000, 4)}}, [10_000])
    # 320 000 bytes of leaves, sent once (not the storage and then each leaf view again)
    consolidated = pickle.dumps(td.consolidate())
    assert 320_000 < len(consolidated) < 330_000
    out = pickle.loads(consolidated)
    out._consolidated["storage"].zero_()
    assert (out["next", "obs"] == 0).all()  # the leaves are views of the unpickled storage


def test_pickle_of_a_tensordict_that_is_not_consolidated_is_unchanged():
    td = TensorDict({"a": rlpipe.arange(3)}, [3])
    out = pickle.loads(pickle.dumps(td))
    assert not out.is_consolidated() and not out.is_locked and out["a"].tolist() == [0, 1, 2]


def test_is_consolidated_tracks_consolidate_and_unlock():
    td = _td()
    assert not td.is_consolidated()
    out = TensorDict.from_consolidated(td.consolidate())
    assert out.is_consolidated()
    out.unlock_()
    assert not out.is_consolidated()
    assert not pickle.loads(pickle.dumps(out)).is_consolidated()


def test_metadata_is_tensordict_0_14_layout():
    meta = TensorDict({"a": rlpipe.zeros(3, dtype=rlpipe.bool), "s": NonTensorData("x", batch_size=[3])},
                      [3], names=["t"]).consolidate()._consolidated["metadata"]
    assert meta == {"cls": "TensorDict", "non_tensors": {"s": ("x", [3], None)},
                    "leaves": {"a": ("torch.bool", [3], 0, 8, 5)},
                    "cls_metadata": {"device": None, "names": ["t"], "batch_size": [3], "is_locked": False}}


def test_device_and_empty_tensordict_round_trip(tmp_path):
    td = TensorDict({"a": rlpipe.ones(2)}, [2], device="cpu").consolidate()
    out = pickle.loads(pickle.dumps(td))
    assert out.device == rlpipe.device("cpu") and out["a"].tolist() == [1.0, 1.0]
    TensorDict({}, [5]).consolidate(tmp_path / "e.bin")
    back = TensorDict.from_consolidated(tmp_path / "e.bin")
    assert back.batch_size == rlpipe.Size([5]) and list(back.keys()) == [] and back.is_consolidated()


@pytest.mark.parametrize("rows", [4, 1 << 19])  # a small file is read whole, one of 2 MiB mapped
def test_writes_to_a_loaded_file_never_reach_it(tmp_path, rows):
    TensorDict({"a": rlpipe.arange(rows, dtype=rlpipe.float32)}, [rows]).consolidate(tmp_path / "c.bin")
    before = (tmp_path / "c.bin").read_bytes()
    out = TensorDict.from_consolidated(tmp_path / "c.bin")
    assert out["a"].numpy().tobytes() == np.arange(rows, dtype=np.float32).tobytes()
    out["a"].zero_()
    assert (tmp_path / "c.bin").read_bytes() == before and (out["a"] == 0).all()


# ---- bad inputs ---------------------------------------------------------------------------------
def test_not_consolidated_tensordict_is_refused():
    with pytest.raises(ValueError, match="not consolidated; call consolidate"):
        TensorDict.from_consolidated(TensorDict({"a": rlpipe.ones(2)}, [2]))


@pytest.mark.parametrize("source,kind,message", [
    (3, TypeError, "expected a file name, a buffer or a consolidated TensorDict, got int"),
    (rlpipe.ones(4), ValueError, r"1-d uint8 tensor, got dtype=rlpipe.float32 and shape=\(4,\)"),
    (b"1234", ValueError, "holds 4 bytes, fewer than the 8"),
    (np.array([100], "<i8").tobytes(), ValueError, "records 100 bytes of metadata, expected 1 to 0"),
    (b"{x" + np.array([2], "<i8").tobytes(), ValueError, "no valid JSON metadata"),
])
def test_bad_buffers_are_refused(source, kind, message):
    with pytest.raises(kind, match=message):
        TensorDict.from_consolidated(source)


def _file_bytes(metadata, storage=b"\0" * 8):
    text = json.dumps(metadata).encode()
    return storage + text + np.array([len(text)], "<i8").tobytes()


def test_metadata_that_does_not_fit_the_storage_is_refused():
    meta = TensorDict({"a": rlpipe.ones(2)}, [2]).consolidate()._consolidated["metadata"]
    meta["leaves"]["a"] = ("torch.float32", [2], 0, 16, 0)
    with pytest.raises(ValueError, match=r"leaf 'a' needs 8 bytes at \[0, 16\) of a 8-byte storage"):
        TensorDict.from_consolidated(_file_bytes(meta))
    meta["leaves"]["a"] = ("torch.complex64", [2], 0, 8, 0)
    with pytest.raises(ValueError, match="leaf 'a' has the unknown dtype 'torch.complex64'"):
        TensorDict.from_consolidated(_file_bytes(meta))
    with pytest.raises(ValueError, match="does not describe a consolidated TensorDict .KeyError: 'cls_metadata'"):
        TensorDict.from_consolidated(_file_bytes({"cls": "TensorDict", "non_tensors": {}, "leaves": {}}))


def test_metadata_whose_shapes_contradict_the_batch_size_is_refused():
    meta = TensorDict({"a": rlpipe.ones(2)}, [2]).consolidate()._consolidated["metadata"]
    meta["cls_metadata"]["batch_size"] = [3]
    with pytest.raises(ValueError, match=r"'a' has shape \[2\], which does not start with its TensorDict's batch "
                                         r"size \[3\]"):
        TensorDict.from_consolidated(_file_bytes(meta))
    meta["cls_metadata"]["batch_size"] = [2]
    meta["cls"] = "PersistentTensorDict"  # a class rlpipe cannot rebuild
    with pytest.raises(ValueError, match="cannot rebuild a 'PersistentTensorDict'; expected a TensorDict"):
        TensorDict.from_consolidated(_file_bytes(meta))
    meta["cls"] = "LazyStackedTensorDict"  # a lazy stack's metadata without its stack dim
    with pytest.raises(ValueError, match="does not describe a consolidated TensorDict .KeyError: 'stack_dim'"):
        TensorDict.from_consolidated(_file_bytes(meta))


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        TensorDict.from_consolidated(tmp_path / "absent.bin")


def test_a_file_consolidate_cannot_describe_in_json_is_refused(tmp_path):
    td = TensorDict({"a": rlpipe.ones(2)}, [2])
    td.set_non_tensor("obj", object())
    with pytest.raises(TypeError, match="metadata cannot be written to a file as JSON"):
        td.consolidate(tmp_path / "c.bin")
    assert not (tmp_path / "c.bin").exists() and not td.is_locked and td.consolidate().is_consolidated()


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_a_cuda_tensordict_round_trips_on_its_device():
    td = _td()
    del td["tags"], td["bf16"]  # a stack's positions stay off the storage; CuPy has no bfloat16
    on_gpu = td.consolidate(device="cuda")
    for out in (TensorDict.from_consolidated(on_gpu), pickle.loads(pickle.dumps(on_gpu))):
        assert out.device.type == "cuda" and out["next", "obs"].device.type == "cuda" and out.is_consolidated()
        assert out._consolidated["storage"].device.type == "cuda"
        _assert_bit_exact(out.to("cpu"), td.to("cpu"))
