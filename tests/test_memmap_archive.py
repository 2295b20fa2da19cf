"""Memmap archives (tensordict 0.14's pack_memmap / unpack_memmap / is_memmap_archive /
refresh_archive_checksums) over rlpipe's memmap folders, and load_memmap reading an archive."""
import zipfile

import numpy as np
import pytest

import rlpipe
from rlpipe.tensordict import (LazyStackedTensorDict, TensorDict, is_memmap_archive, pack_memmap,
                               refresh_archive_checksums, tensorclass, unpack_memmap)


@tensorclass
class Frame:
    """A tensorclass saved in an archive."""
    pixels: rlpipe.Tensor
    label: str


def _td():
    return TensorDict(a=rlpipe.arange(6.0).reshape(3, 2), b=TensorDict(c=rlpipe.tensor([1, 2, 3]), batch_size=[3]),
                      s="hello", batch_size=[3])


def test_pack_then_load_the_archive(tmp_path):
    td = _td()
    td.memmap(tmp_path / "saved")
    archive = pack_memmap(tmp_path / "saved", tmp_path / "saved.tdz")
    assert archive == tmp_path / "saved.tdz" and is_memmap_archive(archive)
    names = zipfile.ZipFile(archive).namelist()
    assert names[0] == "meta.json" and names.index("b/meta.json") < names.index("b/c.memmap")
    assert all(info.compress_type == zipfile.ZIP_STORED for info in zipfile.ZipFile(archive).infolist())
    loaded = TensorDict.load_memmap(archive)
    assert loaded.is_memmap() and loaded["a"].tolist() == td["a"].tolist()
    assert loaded["b", "c"].tolist() == [1, 2, 3] and loaded["s"] == "hello"


def test_lazy_stacks_and_tensorclasses_come_back_from_archives(tmp_path):
    stack = LazyStackedTensorDict(TensorDict(x=rlpipe.zeros(2)), TensorDict(x=rlpipe.ones(3)))
    stack.memmap(tmp_path / "stack")
    back = LazyStackedTensorDict.load_memmap(pack_memmap(tmp_path / "stack", tmp_path / "stack.tdz"))
    assert [t.tolist() for t in back.get("x", as_list=True)] == [[0.0, 0.0], [1.0, 1.0, 1.0]]
    frame = Frame(pixels=rlpipe.ones(2, 4), label="cat", batch_size=[2])
    frame.memmap(tmp_path / "frame")
    back = TensorDict.load_memmap(pack_memmap(tmp_path / "frame", tmp_path / "frame.tdz"))
    assert type(back) is Frame and back.label == "cat" and back.pixels.shape == (2, 4)


def test_compressed_archives_are_smaller_and_load(tmp_path):
    TensorDict(z=rlpipe.zeros(10_000)).memmap(tmp_path / "zeros")
    stored = pack_memmap(tmp_path / "zeros", tmp_path / "stored.tdz")
    deflated = pack_memmap(tmp_path / "zeros", tmp_path / "deflated.tdz", compression="deflate", compresslevel=9)
    assert deflated.stat().st_size * 10 < stored.stat().st_size
    assert TensorDict.load_memmap(deflated)["z"].sum().item() == 0.0


def test_unpack_gives_a_folder_load_memmap_reads(tmp_path):
    _td().memmap(tmp_path / "saved")
    pack_memmap(tmp_path / "saved", tmp_path / "saved.tdz")
    folder = unpack_memmap(tmp_path / "saved.tdz", tmp_path / "out")
    assert folder == tmp_path / "out" and (folder / "b" / "meta.json").is_file()
    assert TensorDict.load_memmap(folder)["b", "c"].tolist() == [1, 2, 3]


def test_is_memmap_archive_only_for_zips_with_a_meta_json(tmp_path):
    _td().memmap(tmp_path / "saved")
    assert not is_memmap_archive(tmp_path / "saved")  # a folder
    (tmp_path / "text").write_text("not a zip")
    assert not is_memmap_archive(tmp_path / "text") and not is_memmap_archive(tmp_path / "absent")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as other:
        other.writestr("readme.txt", "hello")
    assert not is_memmap_archive(tmp_path / "other.zip")


def test_refresh_archive_checksums_after_an_in_place_write(tmp_path):
    TensorDict(a=rlpipe.zeros(4)).memmap(tmp_path / "saved")
    archive = pack_memmap(tmp_path / "saved", tmp_path / "saved.tdz")
    info = zipfile.ZipFile(archive).getinfo("a.memmap")
    raw = bytearray(archive.read_bytes())
    name_len, extra_len = np.frombuffer(bytes(raw[info.header_offset + 26:info.header_offset + 30]), "<u2")
    payload = info.header_offset + 30 + int(name_len) + int(extra_len)
    raw[payload + info.file_size - 4:payload + info.file_size] = np.float32(7.0).tobytes()  # the last element
    archive.write_bytes(bytes(raw))
    assert zipfile.ZipFile(archive).testzip() == "a.memmap"  # its CRC no longer matches
    assert refresh_archive_checksums(archive) == archive
    assert zipfile.ZipFile(archive).testzip() is None
    assert TensorDict.load_memmap(archive)["a"].tolist() == [0.0, 0.0, 0.0, 7.0]


def test_bad_inputs_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty does not look like a memory-mapped tensordict directory"):
        pack_memmap(tmp_path / "empty", tmp_path / "x.tdz")
    _td().memmap(tmp_path / "saved")
    with pytest.raises(ValueError, match=r"Unknown compression 'zip'. Expected one of \['bzip2', 'deflate'"):
        pack_memmap(tmp_path / "saved", tmp_path / "x.tdz", compression="zip")
    assert not (tmp_path / "x.tdz").exists()
    for call in (lambda: unpack_memmap(tmp_path / "saved", tmp_path / "o"),
                 lambda: refresh_archive_checksums(tmp_path / "saved")):
        with pytest.raises(ValueError, match="saved is not a memory-mapped tensordict archive"):
            call()
    with zipfile.ZipFile(tmp_path / "evil.tdz", "w") as evil:
        evil.writestr("meta.json", "{}")
        evil.writestr("../escape.txt", "x")
    with pytest.raises(ValueError, match="the entry '../escape.txt' of .*evil.tdz points outside"):
        unpack_memmap(tmp_path / "evil.tdz", tmp_path / "o")
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "o").exists()
