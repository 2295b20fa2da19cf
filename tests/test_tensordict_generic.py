"""TensorDict behaviours that tensordict 0.14's test_generic.py checks (values taken from tensordict
0.14.3 or from the equivalent NumPy / bool-mask computation)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.tensordict import TensorDict, set_get_defaults_to_none

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(rlpipe.__file__)))


# ---- uint8 index: a mask, as in torch ------------------------------------------------------------
def test_uint8_index_is_a_mask():
    base = np.arange(60.0).reshape(3, 4, 5)
    mask = np.array([1, 0, 2], dtype=np.uint8)
    index = rlpipe.tensor(mask)
    td = TensorDict({"a": rlpipe.tensor(base), "n": {"b": rlpipe.tensor(base)}}, [3, 4, 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that uint8 masks are deprecated
        sub = td[index]
    assert sub.batch_size == rlpipe.Size([2, 4, 5]) and sub["n"].batch_size == rlpipe.Size([2, 4, 5])
    np.testing.assert_array_equal(sub["a"].numpy(), base[mask.astype(bool)])
    np.testing.assert_array_equal(sub["n", "b"].numpy(), base[mask.astype(bool)])


def test_uint8_index_setitem_writes_the_masked_rows():
    base = np.arange(60.0).reshape(3, 4, 5)
    mask = rlpipe.tensor([1, 0, 2], dtype=rlpipe.uint8)
    td = TensorDict({"a": rlpipe.tensor(base)}, [3, 4, 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        td[mask] = TensorDict({"a": -rlpipe.ones(2, 4, 5)}, [2, 4, 5])
    expected = base.copy()
    expected[[0, 2]] = -1
    np.testing.assert_array_equal(td["a"].numpy(), expected)


def test_uint8_mask_with_ellipsis_uses_its_dims():
    td = TensorDict({"a": rlpipe.zeros(3, 4, 5)}, [3, 4, 5])
    mask = rlpipe.ones(3, 4, dtype=rlpipe.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert td[mask, ...].batch_size == rlpipe.Size([12, 5])


def test_uint8_index_with_wrong_length_raises():
    td = TensorDict({"a": rlpipe.zeros(3, 4)}, [3, 4])
    with warnings.catch_warnings(), pytest.raises(IndexError):
        warnings.simplefilter("ignore")
        td[rlpipe.tensor([1, 0], dtype=rlpipe.uint8)]


# ---- TensorDict.pad(inplace=, safe=) -------------------------------------------------------------
def _td_to_pad():
    return TensorDict({"a": rlpipe.ones(3, 4, 1), "nested": {"c": rlpipe.ones(3, 4, 2)}}, [3, 4])


def test_pad_method_inplace_keeps_the_tensordicts():
    td = _td_to_pad()
    nested = td["nested"]
    out = td.pad([0, 1, 0, 2], value=0.0, inplace=True)
    assert out is td and td["nested"] is nested
    assert td.batch_size == rlpipe.Size([4, 6]) and nested.batch_size == rlpipe.Size([4, 6])
    expected = np.zeros((4, 6, 1))
    expected[:3, :4] = 1
    np.testing.assert_array_equal(td["a"].numpy(), expected)
    assert td["nested", "c"].shape == rlpipe.Size([4, 6, 2])


def test_pad_method_not_inplace_leaves_the_input():
    td = _td_to_pad()
    out = td.pad([1, 0], value=5.0)
    assert out is not td and td.batch_size == rlpipe.Size([3, 4])
    assert out.batch_size == rlpipe.Size([4, 4]) and (out["a"][0] == 5).all() and (out["a"][1:] == 1).all()


@pytest.mark.parametrize("safe", [True, False])
def test_pad_method_negative_size_raises_before_any_change(safe):
    td = _td_to_pad()
    a = td["a"]
    with pytest.raises(RuntimeError, match="negative output size"):
        td.pad([-10, 0, 0, 0], inplace=True, safe=safe)
    assert td["a"] is a and td.batch_size == rlpipe.Size([3, 4])


# ---- through an import alias (torch -> rlpipe), as peers' code runs ------------------------------
_ALIASED = """
import importlib, importlib.abc, importlib.util, sys, warnings

class Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in ("torch", "tensordict"):
            return importlib.util.spec_from_loader(fullname, self)
    def create_module(self, spec):
        root, _, rest = spec.name.partition(".")
        target = {"torch": "rlpipe", "tensordict": "rlpipe.tensordict"}[root]
        return importlib.import_module(target + ("." + rest if rest else ""))
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, Alias())
warnings.simplefilter("error")
import tempfile
import torch
from tensordict._td import TensorDict
import tensordict._math, tensordict.functional  # the import replaces these modules' __spec__
td = TensorDict({"a": torch.ones(3, 4)}, [3, 4])
td.pad([0, 1], inplace=True)
torch.stack([td, td])
td.to(torch.float64)
with tempfile.TemporaryDirectory() as d:
    td.clone().memmap_(d)
    TensorDict.load_memmap(d)
import tensordict.nn.common, tensordict.nn.probabilistic
from tensordict.nn import TensorDictModule
TensorDictModule(torch.nn.Linear(4, 2), in_keys=["a"], out_keys=["b"])(TensorDict({"a": torch.ones(3, 4)}, [3]))
assert tensordict.nn.common.is_tensor_collection(td)
tensordict.nn.probabilistic._distribution_named("normal")
print("ok")
"""


def test_no_import_warning_through_an_import_alias():
    # a relative import inside a function warns (ImportWarning) once an alias finder has replaced
    # the module's __spec__; tensordict's tests turn every warning into an error
    env = dict(os.environ, PYTHONPATH=_ROOT)
    out = subprocess.run([sys.executable, "-c", _ALIASED], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


# ---- consolidate ---------------------------------------------------------------------------------
def _td_to_consolidate():
    return TensorDict({"a": rlpipe.arange(6.0).view(2, 3),
                       "b": TensorDict({"c": rlpipe.ones(2, dtype=rlpipe.float16)}, [2])}, [2])


def test_consolidate_copies_leaves_into_one_padded_storage():
    td = _td_to_consolidate()
    out = td.consolidate()
    storage = out._consolidated["storage"]
    # tensordict 0.14.3: float32 [2, 3] (24 bytes) then float16 [2] (4 bytes, padded to 8): 32 bytes
    assert storage.dtype == rlpipe.uint8 and storage.shape == rlpipe.Size([32])
    assert out.is_consolidated() and not td.is_consolidated() and not out["b"].is_consolidated()
    assert out.is_locked and out["b"].is_locked and not td.is_locked
    assert (out == td).all() and out["b", "c"].dtype == rlpipe.float16
    meta = out._consolidated["metadata"]
    assert meta["leaves"]["a"][1:] == ([2, 3], 0, 24, 0) and meta["b"]["leaves"]["c"][1:] == ([2], 24, 32, 4)
    storage *= 0  # the leaves are views of the storage
    assert (out["a"] == 0).all() and (out["b", "c"] == 0).all() and (td["a"] == rlpipe.arange(6.0).view(2, 3)).all()
    out.set("a", rlpipe.ones(2, 3), inplace=True)  # a locked TensorDict still takes in-place writes
    np.testing.assert_array_equal(storage.numpy()[:24].view(np.float32), np.ones(6, np.float32))


def test_consolidate_of_a_consolidated_tensordict_is_itself():
    out = _td_to_consolidate().consolidate()
    assert out.consolidate() is out
    moved = out.to("cpu")  # device None -> cpu: a new TensorDict, consolidated and locked (tensordict 0.14.3)
    assert moved is not out and moved.device == rlpipe.device("cpu") and moved.is_consolidated() and moved.is_locked
    assert moved.to("cpu") is moved


def test_consolidate_unlock_drops_the_storage_link():
    out = _td_to_consolidate().consolidate()
    with out.unlock_():
        assert not out.is_locked and not out.is_consolidated()
        out["new"] = rlpipe.zeros(2)
    assert out.is_locked and not out.is_consolidated()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        out["other"] = rlpipe.zeros(2)


def test_consolidate_detaches_and_accepts_non_contiguous_leaves():
    base = rlpipe.arange(24.0, requires_grad=True)
    transposed = base.reshape(2, 3, 4).transpose(0, 1)
    strided = rlpipe.arange(48).reshape(3, 4, 4)[..., ::2]
    out = TensorDict({"t": transposed, "s": strided}, []).consolidate()
    assert not out["t"].requires_grad and (out["t"] == transposed).all() and (out["s"] == strided).all()
    assert out["s"].dtype == rlpipe.int64 and out["s"].shape == rlpipe.Size([3, 4, 2])


def test_consolidate_into_a_file(tmp_path):
    path = tmp_path / "td.mmap"
    out = _td_to_consolidate().consolidate(filename=path)
    assert out.device == rlpipe.device("cpu") and out.is_consolidated()
    out.set_("a", rlpipe.full((2, 3), 7.0))
    out._consolidated["storage"].numpy().flush()
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.uint8)[:24].view(np.float32), np.full(6, 7.0, np.float32))


def test_consolidate_inplace_and_return_early():
    td = _td_to_consolidate()
    nested = td["b"]
    out = td.consolidate(inplace=True)
    assert out is td and td["b"] is nested and td.is_consolidated() and td.is_locked
    td._consolidated["storage"].zero_()
    assert (td["a"] == 0).all()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        TensorDict({"a": rlpipe.zeros(3)}, [3]).lock_().consolidate(inplace=True)
    future = _td_to_consolidate().consolidate(return_early=True)
    assert future.result().is_consolidated()
    assert type(future).__name__ == "TensorDictFuture" and future.done()  # tensordict's future class
    with pytest.raises(NotImplementedError, match="use_buffer"):
        _td_to_consolidate().consolidate(return_early=True, use_buffer=True)
    with pytest.raises(NotImplementedError, match="non_blocking"):
        _td_to_consolidate().consolidate(return_early=True, non_blocking=True)


def test_consolidate_rejects_a_file_off_the_cpu(tmp_path):
    with pytest.raises(ValueError, match="file-backed storage lives on the cpu, got device='cuda'"):
        _td_to_consolidate().consolidate(filename=tmp_path / "x", device="cuda")


def test_consolidate_empty_and_clone():
    out = TensorDict({}, [3]).consolidate()
    assert out.is_consolidated() and out._consolidated["storage"].shape == rlpipe.Size([0])
    clone = _td_to_consolidate().consolidate().clone()  # as tensordict: a plain, unlocked copy
    assert not clone.is_consolidated() and not clone.is_locked


# ---- Tensor.stride ---------------------------------------------------------------------------------
def test_tensor_stride_matches_torch():
    # values from torch 2.13
    t = rlpipe.zeros(3, 4)
    assert t.stride() == (4, 1) and t.stride(-1) == 1 and t.stride(0) == 4
    assert t.expand(2, 3, 4).stride() == (0, 4, 1)
    assert rlpipe.arange(48).reshape(3, 4, 4)[..., ::2].stride() == (16, 4, 2)
    assert rlpipe.zeros(()).stride() == ()
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        t.stride(2)
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        rlpipe.zeros(()).stride(0)
    with pytest.raises(TypeError, match="must be int, not str"):
        t.stride("a")


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_consolidate_onto_cuda_and_back():
    td = _td_to_consolidate()
    out = td.consolidate(device="cuda")
    assert out.device.type == "cuda" and out["b", "c"].device.type == "cuda" and out.is_consolidated()
    assert out._consolidated["storage"].device.type == "cuda"
    back = out.to("cpu")
    assert back.is_consolidated() and back.is_locked and (back == td).all()
    out._consolidated["storage"].zero_()
    assert (out["a"] == 0).all() and (out["b", "c"] == 0).all()


# ---- get() of a missing key is None, but operations that need the key still raise ----------------
def test_apply_with_another_tensordict_lacking_a_key_raises():
    # tensordict 0.14.3: KeyError 'key "x" not found in TensorDict with keys [\'y\']'
    a, b = TensorDict({"x": rlpipe.zeros(2)}, []), TensorDict({"y": rlpipe.zeros(2)}, [])
    with pytest.raises(KeyError, match='key "x" not found in TensorDict with keys'):
        a.apply(lambda x, y: x, b)
    assert a.apply(lambda x, y: x + 1 if y is None else y, b, default=None)["x"].tolist() == [1.0, 1.0]


def test_get_at_and_entry_class_of_a_missing_key_follow_get():
    # tensordict 0.14.3: get_at("b", 0) is None, get_at("b", 0, default=5) is 5, entry_class("b") is NoneType
    td = TensorDict({"a": rlpipe.zeros(3)}, [3])
    assert td.get_at("b", 0) is None and td.get_at("b", 0, default=5) == 5
    assert td.entry_class("b") is type(None) and td.entry_class("a") is rlpipe.Tensor
    assert td.get_at("a", 1).item() == 0
    set_get_defaults_to_none(False)  # a plain switch, as in tensordict
    try:
        with pytest.raises(KeyError, match='key "b" not found'):
            td.get_at("b", 0)
        with pytest.raises(KeyError, match='key "b" not found'):
            td.entry_class("b")
    finally:
        set_get_defaults_to_none(True)
