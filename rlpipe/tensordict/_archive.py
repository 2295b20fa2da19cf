"""Memmap archives (tensordict 0.14's ``pack_memmap`` and friends): a memory-mapped TensorDict's
folder as one zip file whose entries mirror the folder (``meta.json`` first at every level), so that
``unzip`` gives back a folder ``load_memmap`` reads, and ``load_memmap`` reads the archive itself.

rlpipe's folders hold rlpipe's memmap format (``.npy`` leaves), so its archives are rlpipe's, not
tensordict's. ``load_memmap`` of an archive extracts it to a temporary folder and maps the files
there (tensordict maps the archive in place); the archive itself is never written.
"""
import contextlib
import shutil
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from .._utils import unavailable

__all__ = ["pack_memmap", "unpack_memmap", "is_memmap_archive", "refresh_archive_checksums"]

_COMPRESSIONS = {None: zipfile.ZIP_STORED, "stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED,
                 "deflated": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2, "lzma": zipfile.ZIP_LZMA}
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # a zip local file header's fixed part
_CENTRAL_RECORD_SIZE = 46

# tensordict's reader of an archive in place (a private class its tests import): rlpipe extracts instead
_ArchiveReader = unavailable("_ArchiveReader", "rlpipe extracts memmap archives instead of reading them in place")


def _compression(compression):
    if isinstance(compression, int) and not isinstance(compression, bool):
        return compression
    key = compression.lower() if isinstance(compression, str) else compression
    if key not in _COMPRESSIONS:
        raise ValueError(f"Unknown compression {compression!r}. Expected one of "
                         f"{sorted(k for k in _COMPRESSIONS if isinstance(k, str))} or a zipfile compression constant.")
    return _COMPRESSIONS[key]


def is_memmap_archive(path):
    """Whether ``path`` is a zip file with a top-level ``meta.json`` (a folder is not)."""
    path = Path(path)
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return "meta.json" in archive.namelist()


def _folder_files(folder):
    """The files of a memmap folder, ``meta.json`` first at every level, then by name."""
    entries = sorted(folder.iterdir(), key=lambda p: p.name)
    files = [p for p in entries if p.is_file()]
    yield from sorted(files, key=lambda p: p.name != "meta.json")
    for sub in (p for p in entries if p.is_dir()):
        yield from _folder_files(sub)


def pack_memmap(prefix, archive_path, *, compression=None, compresslevel=None):
    """Writes the memmap folder ``prefix`` (what ``memmap(prefix)`` made) into the zip archive
    ``archive_path``, leaves stored uncompressed unless ``compression`` ("deflate", "bzip2",
    "lzma" or a zipfile constant) says otherwise; returns the archive's path."""
    prefix, archive_path = Path(prefix), Path(archive_path)
    if not (prefix / "meta.json").is_file():
        raise ValueError(f"{prefix} does not look like a memory-mapped tensordict directory (no meta.json found).")
    method = _compression(compression)
    with zipfile.ZipFile(archive_path, "w", allowZip64=True) as archive:
        for path in _folder_files(prefix):
            archive.write(path, path.relative_to(prefix).as_posix(), compress_type=method,
                          compresslevel=compresslevel)
    return archive_path


def unpack_memmap(archive_path, prefix):
    """Extracts the archive into the folder ``prefix`` (``unzip``); returns the folder's path.
    An entry naming a place outside ``prefix`` is refused (ValueError), nothing extracted."""
    archive_path, prefix = Path(archive_path), Path(prefix)
    if not is_memmap_archive(archive_path):
        raise ValueError(f"{archive_path} is not a memory-mapped tensordict archive.")
    with zipfile.ZipFile(archive_path) as archive:
        for name in archive.namelist():
            parts = PurePosixPath(name).parts
            if PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
                raise ValueError(f"unpack_memmap: the entry {name!r} of {archive_path} points outside {prefix}")
        archive.extractall(prefix)
    return prefix


@contextlib.contextmanager
def extracted(archive_path):
    """A temporary folder holding the archive's files, removed on exit (maps of its files stay valid)."""
    folder = tempfile.mkdtemp(prefix="rlpipe-memmap-archive-")
    try:
        yield str(unpack_memmap(archive_path, folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def refresh_archive_checksums(archive_path):
    """Recomputes the CRC-32 that the archive records for each uncompressed entry (after its bytes
    were changed in place), so that ``unzip`` and ``zipfile`` accept it again; returns its path."""
    archive_path = Path(archive_path)
    if not is_memmap_archive(archive_path):
        raise ValueError(f"{archive_path} is not a memory-mapped tensordict archive.")
    with zipfile.ZipFile(archive_path) as archive:
        infos, central = archive.infolist(), archive.start_dir
    crcs = {}
    with open(archive_path, "r+b") as f:
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x8 or info.is_dir():
                continue  # a compressed entry cannot have been written in place; rlpipe writes no descriptors
            f.seek(info.header_offset)
            header = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
            f.seek(info.header_offset + _LOCAL_HEADER.size + header[9] + header[10])
            crcs[info.filename] = zlib.crc32(f.read(info.file_size))
            f.seek(info.header_offset + 14)
            f.write(struct.pack("<I", crcs[info.filename]))
        for _ in infos:  # the central directory's copy of each CRC
            f.seek(central)
            record = f.read(_CENTRAL_RECORD_SIZE)
            name_len, extra_len, comment_len = struct.unpack_from("<3H", record, 28)
            name = f.read(name_len).decode("utf-8" if struct.unpack_from("<H", record, 8)[0] & 0x800 else "cp437")
            if name in crcs:
                f.seek(central + 16)
                f.write(struct.pack("<I", crcs[name]))
            central += _CENTRAL_RECORD_SIZE + name_len + extra_len + comment_len
    return archive_path
