"""Memory formats: torch's ``contiguous_format``, ``channels_last``, ``channels_last_3d`` and
``preserve_format`` over backend arrays, which carry real strides.

A channels-last tensor keeps its NCHW shape; its array is a transposed view of a C-contiguous NHWC
array, so ``stride()`` reports torch's channels-last strides. The rules below (which layout a format
asks for, which strides count as contiguous in it, which format a tensor's strides suggest) are
torch's (c10's ``Contiguity.h`` and ``MemoryFormat.h``), written against shapes and element strides.
"""
from . import _dtypes


class memory_format:
    """The layout a tensor's elements have in memory; the four instances are the module constants."""
    __slots__ = ("_name",)

    def __new__(cls, *args, **kwargs):
        raise TypeError(f"cannot create '{_dtypes.shown_module()}.memory_format' instances")

    def __repr__(self):
        return f"{_dtypes.shown_module()}.{self._name}"

    def __reduce__(self):
        return self._name  # pickles as the module attribute of that name: the same instance comes back


def _make(name):
    fmt = object.__new__(memory_format)
    fmt._name = name
    return fmt


contiguous_format = _make("contiguous_format")
channels_last = _make("channels_last")
channels_last_3d = _make("channels_last_3d")
preserve_format = _make("preserve_format")

# for each channels-last format: its rank and the dims from fastest- to slowest-varying in memory
_CHANNELS_LAST = {channels_last: (4, (1, 3, 2, 0)), channels_last_3d: (5, (1, 4, 3, 2, 0))}


def check(fmt, fname):
    """``fmt`` itself when it is a memory format (None stands for ``default``), else torch's TypeError."""
    if fmt is None:
        return None
    if type(fmt) is not memory_format:
        raise TypeError(f"{fname}(): argument 'memory_format' must be {_dtypes.shown_module()}.memory_format, "
                        f"not {type(fmt).__name__}")
    return fmt


def _fastest_first(fmt, ndim):
    """The dims of an ``ndim``-rank tensor in ``fmt`` from fastest- to slowest-varying in memory."""
    if fmt in _CHANNELS_LAST:
        rank, dims = _CHANNELS_LAST[fmt]
        if ndim != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format")
        return dims
    return tuple(range(ndim - 1, -1, -1))


def _dense_in(shape, strides, dims):
    """True when the strides along ``dims`` (fastest first) are those of a packed array, size-1 dims
    skipped."""
    expected = 1
    for d in dims:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def is_contiguous_in(shape, strides, fmt):
    """torch's ``is_contiguous(memory_format=fmt)`` for element ``strides``: an empty tensor is
    contiguous; a channels-last format asks for its own rank."""
    if fmt in _CHANNELS_LAST:
        rank, dims = _CHANNELS_LAST[fmt]
        return len(shape) == rank and _dense_in(shape, strides, dims)
    return 0 in shape or _dense_in(shape, strides, range(len(shape) - 1, -1, -1))


def _strides_like(shape, strides, dims):
    """torch's ``is_channels_last_strides_2d/3d``: the strides grow along ``dims`` (ambiguous
    size-1 cases fall back to row-major)."""
    if strides[1] == 0:
        return False
    smallest = 0
    for d in dims:
        if shape[d] == 0 or strides[d] < smallest or (d == 0 and smallest == strides[1]):
            return False
        smallest = strides[d] * shape[d] if shape[d] > 1 else strides[d]
    return True


def suggested(shape, strides):
    """The format a tensor's strides suggest (torch's ``suggest_memory_format``)."""
    for fmt, (rank, dims) in _CHANNELS_LAST.items():
        if len(shape) == rank and _strides_like(shape, strides, dims):
            return fmt
    return contiguous_format


def _swap(shape, strides, a, b):
    """TensorIterator's comparison, which ``infer_dense_strides`` follows: 1 when dim ``a`` varies
    slower than dim ``b`` (larger stride; on a tie, larger size), -1 when faster, 0 when open."""
    if strides[a] == 0 or strides[b] == 0:
        return 0
    if strides[a] != strides[b]:
        return 1 if strides[a] > strides[b] else -1
    return 1 if shape[a] > shape[b] else 0


def _stride_order(shape, strides):
    """The dims slowest-varying first, by their strides (torch's ``infer_dense_strides``: an
    insertion sort from the row-major order that leaves ambiguous dims where they are)."""
    perm = list(range(len(shape) - 1, -1, -1))  # fastest first
    for i in range(1, len(perm)):
        at = i
        for before in range(i - 1, -1, -1):
            verdict = _swap(shape, strides, perm[before], perm[at])
            if verdict > 0:
                perm[before], perm[at] = perm[at], perm[before]
                at = before
            elif verdict < 0:
                break
    return tuple(reversed(perm))


def order_for(shape, strides, fmt):
    """The dims slowest-varying first of a fresh array in ``fmt`` (None: row-major); ``preserve_format``
    keeps the input's order of strides, as torch's ``empty_like`` does."""
    if fmt is preserve_format:
        order = _stride_order(shape, strides)
        return None if order == tuple(range(len(shape))) else order
    if fmt is None or fmt is contiguous_format:
        return None
    return tuple(reversed(_fastest_first(fmt, len(shape))))


def array_order(fmt, ndim):
    """The order ``order_for`` gives a new tensor of rank ``ndim`` in ``fmt`` (``rlpipe.empty``), which
    has no input to preserve."""
    if fmt is preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    if fmt is None or fmt is contiguous_format:
        return None
    return tuple(reversed(_fastest_first(fmt, ndim)))


def inverse(order):
    """The transpose that undoes the transpose ``order``."""
    return sorted(range(len(order)), key=order.__getitem__)


def copied_in(xp, a, order):
    """A copy of array ``a`` with the same values, laid out in ``order`` (None: row-major)."""
    if order is None:
        return a.copy()  # row-major, whatever a's layout
    moved = a.transpose(order)
    if a.size:
        out = moved.copy()
    else:  # NumPy gives an empty array zero strides; torch's (and the format checks) are the row-major ones
        out = xp.lib.stride_tricks.as_strided(moved.copy(), moved.shape, _row_major_bytes(moved.shape, a.itemsize))
    return out.transpose(inverse(order))


def _row_major_bytes(shape, itemsize):
    """The byte strides of a row-major array of ``shape``."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def element_strides(a):
    """An array's strides in elements."""
    return tuple(s // a.dtype.itemsize for s in a.strides)
