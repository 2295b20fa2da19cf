"""MemoryMappedTensor leaves of memory-mapped TensorDicts, memmap_() without a prefix leaving no
files behind, and share_memory_. Expected types, strings and messages are what tensordict 0.14.3 gives."""
import io
import os
import tempfile

import numpy as np
import pytest

import rlpipe
from rlpipe.tensordict import MemoryMappedTensor, TensorDict


def _td():
    return TensorDict(a=rlpipe.zeros(4, 3), b=TensorDict(c=rlpipe.zeros(4)), batch_size=[4])


@pytest.fixture
def tmpdir_watch(tmp_path, monkeypatch):
    """The folder tempfile hands out (and TMPDIR points to) for this test; listed at its end."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setenv("TMPDIR", str(where))
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


def test_memmap_repr_matches_tensordict(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    td = TensorDict(a=rlpipe.zeros(4, 3, 2, 1, 5, dtype=rlpipe.uint8), batch_size=[4, 3, 2, 1]).memmap_()
    # tensordict 0.14.3 (test_repr.py::test_repr_memmap), with rlpipe's module name
    assert repr(td) == """TensorDict(
    fields={
        a: MemoryMappedTensor(shape=rlpipe.Size([4, 3, 2, 1, 5]), device=cpu, dtype=rlpipe.uint8, is_shared=False)},
    batch_size=rlpipe.Size([4, 3, 2, 1]),
    device=cpu,
    is_shared=False)"""
    assert repr(MemoryMappedTensor.from_tensor(rlpipe.ones(3))) == "MemoryMappedTensor([1., 1., 1.])"
    assert repr(td["a"][0, 0, 0, 0]).startswith("MemoryMappedTensor([0, 0, 0, 0, 0], dtype=rlpipe.uint8)")


def test_memmap_gives_memory_mapped_leaves_on_the_cpu_device():
    td = _td()
    assert td.device is None
    td.memmap_()
    a = td["a"]
    assert type(a) is MemoryMappedTensor and isinstance(a, rlpipe.Tensor) and not a.is_shared()
    assert type(td["b", "c"]) is MemoryMappedTensor
    # tensordict 0.14.3: a memory-mapped TensorDict and its nested ones report cpu
    assert td.device == rlpipe.device("cpu") and td["b"].device == rlpipe.device("cpu")
    assert type(td.memmap()["a"]) is MemoryMappedTensor and td.memmap().device == rlpipe.device("cpu")


def test_which_results_stay_memory_mapped():
    td = _td().memmap_()
    a = td["a"]
    mapped = {"a[0]": a[0], "a[0, 1]": a[0, 1], "a[...]": a[...], "td[0]['a']": td[0]["a"],
              "a.unbind(0)[0]": a.unbind(0)[0], "a.contiguous()": a.contiguous(), "a.float()": a.float()}
    plain = {"a + 1": a + 1, "a[[0, 1]]": a[[0, 1]], "a[tensor]": a[rlpipe.tensor([0, 1])], "a[a > 0]": a[a > 0],
             "a.view(12)": a.view(12), "a.reshape(12)": a.reshape(12), "a.clone()": a.clone(),
             "a.detach()": a.detach(), "td[tensor]['a']": td[rlpipe.tensor([0, 1])]["a"],
             "td.clone()['a']": td.clone()["a"], "td.apply(f)['a']": td.apply(lambda x: x + 1)["a"]}
    # the types tensordict 0.14.3 gives for the same expressions
    assert {k: type(v).__name__ for k, v in mapped.items()} == dict.fromkeys(mapped, "MemoryMappedTensor")
    assert {k: type(v).__name__ for k, v in plain.items()} == dict.fromkeys(plain, "Tensor")


def test_views_write_through_to_the_map():
    td = TensorDict(a=rlpipe.zeros(4, 3), batch_size=[4]).memmap_()
    view = td[1]["a"]
    view[2] = 7.0
    assert td["a"][1, 2].item() == 7.0


def test_filename(tmp_path):
    anonymous = MemoryMappedTensor.from_tensor(rlpipe.ones(3))
    with pytest.raises(RuntimeError, match="^The MemoryMappedTensor has no file associated.$"):
        anonymous.filename
    td = TensorDict(a=rlpipe.arange(3.0), batch_size=[3]).memmap_(tmp_path / "x")
    assert td["a"].filename == str(tmp_path / "x" / "a.memmap")
    assert td[0:2]["a"].filename == str(tmp_path / "x" / "a.memmap")
    loaded = TensorDict.load_memmap(tmp_path / "x")
    assert type(loaded["a"]) is MemoryMappedTensor and loaded["a"].filename == str(tmp_path / "x" / "a.memmap")



def test_a_map_over_a_file_is_shared(tmp_path, monkeypatch):
    """tensordict 0.14.3 maps files shared: those leaves (and their basic-index views) report is_shared()
    and print is_shared=True; anonymous maps, copies and advanced-index results do not."""
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    td = TensorDict(a=rlpipe.ones(3, 2), batch_size=[3]).memmap_(tmp_path / "x")
    a = td["a"]
    assert a.is_shared() and a[0].is_shared() and td[0]["a"].is_shared()
    assert not a[[0, 1]].is_shared() and not (a + 1).is_shared() and not a.clone().is_shared()
    assert TensorDict.load_memmap(tmp_path / "x")["a"].is_shared()
    assert not MemoryMappedTensor.from_tensor(rlpipe.ones(2)).is_shared()
    assert MemoryMappedTensor.from_tensor(rlpipe.ones(2), filename=tmp_path / "m.npy").is_shared()
    assert not td.is_shared()
    assert repr(td) == """TensorDict(
    fields={
        a: MemoryMappedTensor(shape=rlpipe.Size([3, 2]), device=cpu, dtype=rlpipe.float32, is_shared=True)},
    batch_size=rlpipe.Size([3]),
    device=cpu,
    is_shared=False)"""

def test_from_tensor(tmp_path):
    source = rlpipe.arange(6, dtype=rlpipe.int32).view(2, 3)
    m = MemoryMappedTensor(source)
    assert type(m) is MemoryMappedTensor and m.dtype is rlpipe.int32 and m.tolist() == source.tolist()
    m[0, 0] = 100
    assert source[0, 0].item() == 0  # a copy
    path = tmp_path / "m.npy"
    on_disk = MemoryMappedTensor.from_tensor(source, filename=path)
    np.testing.assert_array_equal(np.load(path), source.numpy())
    assert on_disk.filename == str(path)
    with pytest.raises(RuntimeError, match=f"^The file {path} already exists.$"):
        MemoryMappedTensor.from_tensor(source, filename=path)
    zeros = MemoryMappedTensor.from_tensor(source, filename=path, existsok=True, copy_data=False)
    assert zeros.tolist() == [[0, 0, 0], [0, 0, 0]]


def test_memmap_without_prefix_leaves_no_files(tmpdir_watch):
    """tensordict's memmap_() with no prefix maps anonymous memory: nothing appears in the temp folder
    (rlpipe used to make an rlpipe-memmap-* folder there and never remove it)."""
    td = _td().memmap_()
    copy = _td().memmap()
    like = _td().memmap_like()
    assert td.is_memmap() and copy.is_memmap() and like.is_memmap()
    assert os.listdir(tmpdir_watch) == []
    del td, copy, like
    assert os.listdir(tmpdir_watch) == []


def test_memmap_again_without_prefix_moves_nothing():
    td = _td().memmap_()
    leaves = {key: td[key] for key in td.keys(True, True)}
    assert td.memmap_() is td and all(td[key] is leaf for key, leaf in leaves.items())


def test_save_and_load_a_memory_mapped_tensordict():
    td = TensorDict(a=rlpipe.arange(12.0).view(4, 3), batch_size=[4]).memmap_()
    buffer = io.BytesIO()
    rlpipe.save({"td": td, "a": td["a"]}, buffer)
    buffer.seek(0)
    loaded = rlpipe.load(buffer)
    assert type(loaded["a"]) is MemoryMappedTensor and loaded["a"].tolist() == td["a"].tolist()
    assert type(loaded["td"]["a"]) is MemoryMappedTensor and (loaded["td"] == td).all()


def test_share_memory_moves_leaves_and_marks_the_tensordict(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    td = TensorDict(a=rlpipe.zeros(4, 3, 2, 1, 5), batch_size=[4, 3, 2, 1])
    a = td["a"]
    assert not td.is_shared() and not a.is_shared()
    assert td.share_memory_() is td and td.is_locked
    assert td["a"] is a and a.is_shared()
    # tensordict 0.14.3 (test_repr.py::test_repr_share_memory), with rlpipe's module name
    assert repr(td) == """TensorDict(
    fields={
        a: Tensor(shape=rlpipe.Size([4, 3, 2, 1, 5]), device=cpu, dtype=rlpipe.float32, is_shared=True)},
    batch_size=rlpipe.Size([4, 3, 2, 1]),
    device=None,
    is_shared=True)"""


def test_shared_state_ends_with_unlock_and_is_not_copied():
    td = _td().share_memory_()
    assert td.is_shared() and td["b"].is_shared() and td["b", "c"].is_shared()
    assert not td.clone().is_shared() and not td.select("a").is_shared() and not td[1:3].is_shared()
    td.unlock_()
    # tensordict 0.14.3: unlocking ends the shared state; the leaves stay in shared memory
    assert not td.is_shared() and not td["b"].is_shared() and td["a"].is_shared()
    td.lock_()
    assert not td.is_shared()


def test_share_memory_and_memmap_exclude_each_other():
    shared = _td().share_memory_()
    with pytest.raises(RuntimeError, match="^memmap and shared memory are mutually exclusive features.$"):
        shared.memmap_()
    assert not shared.is_memmap() and type(shared["a"]) is rlpipe.Tensor
    mapped = _td().memmap_()
    with pytest.raises(RuntimeError, match="^memmap and shared memory are mutually exclusive features.$"):
        mapped.share_memory_()
    assert not mapped.is_shared() and not mapped["a"].is_shared() and type(mapped["a"]) is MemoryMappedTensor


def test_share_memory_of_a_sub_tensordict_raises():
    td = _td()
    with pytest.raises(RuntimeError, match="^Casting a sub-tensordict values to shared memory cannot be done.$"):
        td._get_sub_tensordict(0).share_memory_()
    assert not td.is_shared() and not td["a"].is_shared() and not td.is_locked


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_a_cuda_tensordict_is_shared():
    assert TensorDict(a=rlpipe.zeros(2), batch_size=[2], device="cuda").is_shared()  # tensordict: always on CUDA
    assert not TensorDict(a=rlpipe.zeros(2), batch_size=[2]).is_shared()


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_memmap_of_a_gpu_leaf_fails_and_changes_nothing():
    td = TensorDict(a=rlpipe.zeros(2), b=rlpipe.zeros(2, device="cuda"), batch_size=[2])
    with pytest.raises(RuntimeError, match=r"memmap_: 'b' is on cuda:0; move the TensorDict to the CPU first"):
        td.memmap_()
    assert type(td["a"]) is rlpipe.Tensor and not td.is_memmap() and not td.is_locked


def test_memmap_into_the_folder_it_already_lives_in_keeps_the_data(tmp_path):
    td = TensorDict(a=rlpipe.arange(6.0), batch_size=[6])
    td.memmap_(tmp_path)
    td.memmap_(tmp_path)  # rewriting a leaf's own file must not truncate what it maps first
    assert td["a"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert TensorDict.load_memmap(tmp_path)["a"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    again = MemoryMappedTensor.from_tensor(td["a"], filename=td["a"].filename, existsok=True)
    assert again.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("entries", [{"meta.json": {"a": rlpipe.zeros(2)}},
                                     {"x": rlpipe.zeros(2), "x.memmap": {"a": rlpipe.zeros(2)}}],
                         ids=["nested meta.json", "leaf beside a nested x.memmap"])
def test_memmap_refuses_colliding_file_names_before_writing_anything(tmp_path, entries):
    td = TensorDict({"first": rlpipe.ones(2), **entries}, [2])
    with pytest.raises(ValueError, match="a name another entry"):
        td.memmap_(tmp_path)
    assert not td.is_locked and not any(isinstance(v, MemoryMappedTensor) for v in td.values(True, True))
    assert os.listdir(tmp_path) == []
