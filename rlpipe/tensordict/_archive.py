"""tensordict's memmap archives (pack_memmap and friends): persistent storage, out of rlpipe's scope.
Each name exists for code that imports it and raises NotImplementedError when used."""
from .._utils import unavailable

__all__ = ["_ArchiveReader", "pack_memmap", "unpack_memmap", "is_memmap_archive",
           "refresh_archive_checksums"]

_WHY = "memmap archives are persistent storage, out of scope"
_ArchiveReader = unavailable("_ArchiveReader", _WHY)


def _unavailable_function(name):
    def function(*args, **kwargs):
        raise NotImplementedError(f"{name} is not available in rlpipe: {_WHY}")
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"tensordict.{name}: not available in rlpipe ({_WHY})."
    return function


pack_memmap = _unavailable_function("pack_memmap")
unpack_memmap = _unavailable_function("unpack_memmap")
is_memmap_archive = _unavailable_function("is_memmap_archive")
refresh_archive_checksums = _unavailable_function("refresh_archive_checksums")
