"""Variable-length sequences for the recurrent layers: ``PackedSequence`` and the functions that
pack, pad and unpad batches of sequences (torch.nn.utils.rnn's API).

A packed sequence holds the steps of a batch of sequences sorted by decreasing length, time-major:
``data`` has the ``batch_sizes[0]`` first steps, then the ``batch_sizes[1]`` second steps, and so on.
Every function here is built from differentiable ops, so gradients flow through packing and padding.
"""
from collections import namedtuple
from collections.abc import Iterable

from ... import primitives as ops
from ..._creation import as_tensor, full, tensor
from ..._dtypes import float16, float32, float64, int8, int16, int32, int64, uint8

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """The packed steps of a batch of sequences (``data``), how many sequences are still running at each
    step (``batch_sizes``, int64 on the CPU), and the permutation that sorted the batch by decreasing length
    (``sorted_indices``) with its inverse (``unsorted_indices``), both None when the batch came sorted.

    Make one with ``pack_padded_sequence`` or ``pack_sequence`` rather than by hand.
    """
    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # torch also accepts the pair (data, batch_sizes) as the first argument
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise ValueError(f"PackedSequence: expected batch_sizes, or data given as the pair (data, "
                                 f"batch_sizes), got data of type {type(data).__name__} and no batch_sizes")
            data, batch_sizes = data
        if batch_sizes.device.type != "cpu":
            raise ValueError(f"PackedSequence: batch_sizes should always be on the CPU, got {batch_sizes.device}")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """This sequence with ``data`` converted as ``Tensor.to`` does (the index tensors follow its device);
        ``self`` when nothing changes."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self):
        """This sequence with its data on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None):
        """This sequence with its data on a GPU (``device``, or the current one)."""
        return self.to("cuda" if device is None else device)

    def double(self):
        """This sequence with float64 data."""
        return self.to(dtype=float64)

    def float(self):
        """This sequence with float32 data."""
        return self.to(dtype=float32)

    def half(self):
        """This sequence with float16 data."""
        return self.to(dtype=float16)

    def long(self):
        """This sequence with int64 data."""
        return self.to(dtype=int64)

    def int(self):
        """This sequence with int32 data."""
        return self.to(dtype=int32)

    def short(self):
        """This sequence with int16 data."""
        return self.to(dtype=int16)

    def char(self):
        """This sequence with int8 data."""
        return self.to(dtype=int8)

    def byte(self):
        """This sequence with uint8 data."""
        return self.to(dtype=uint8)

    @property
    def is_cuda(self):
        """Whether the data lives on a GPU."""
        return self.data.is_cuda

    def is_pinned(self):
        """Always False: rlpipe has no pinned host memory."""
        return False


def invert_permutation(permutation):
    """The inverse of ``permutation`` (None stays None)."""
    if permutation is None:
        return None
    return ops.argsort(permutation)


def _lengths_list(lengths):
    if hasattr(lengths, "tolist"):
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def _batch_sizes(lengths):
    """How many of the sequences (sorted by decreasing ``lengths``) are still running at each step."""
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0])] if lengths else []


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch ``[T, B, *]`` (``[B, T, *]`` with ``batch_first``) of sequences of the given
    ``lengths``; with ``enforce_sorted=False`` the batch need not be sorted by decreasing length."""
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    sorted_indices = None
    if not enforce_sorted:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        lengths = [lengths[i] for i in order]
        sorted_indices = tensor(order, dtype=int64, device=input.device)
        if len(lengths) == input.size(batch_dim):
            input = input.index_select(batch_dim, sorted_indices)
    _check_lengths(lengths, input.size(batch_dim), input.size(1 - batch_dim))
    if batch_first:
        input = input.transpose(0, 1)
    batch_sizes = _batch_sizes(lengths)
    data = ops.cat([input[t, :n] for t, n in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices, None)


def _check_lengths(lengths, batch_size, max_steps):
    if len(lengths) != batch_size:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={batch_size})")
    if any(n <= 0 for n in lengths):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if any(a < b for a, b in zip(lengths, lengths[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                           "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           "sidestep this requirement if you do not need ONNX exportability.")
    if lengths[0] > max_steps:  # torch reads past the end here; rlpipe refuses
        raise RuntimeError(f"pack_padded_sequence: the longest length is {lengths[0]}, but the input has only "
                           f"{max_steps} steps")


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Unpacks ``sequence`` into a padded batch ``[T, B, *]`` (``[B, T, *]`` with ``batch_first``) filled with
    ``padding_value`` past each sequence's end, ``T`` being ``total_length`` when given; returns it with
    the lengths (an int64 CPU tensor), both in the batch's original order."""
    data, batch_sizes = sequence.data, [int(n) for n in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    batch, rest = batch_sizes[0], tuple(data.shape[1:])
    rows, offset = [], 0
    for n in batch_sizes:
        rows.append(_padded(data[offset:offset + n], batch, padding_value, 0))
        offset += n
    rows += [full((batch, *rest), padding_value, dtype=data.dtype, device=data.device)] * (steps - len(rows))
    padded = ops.stack(rows, 0)
    lengths = tensor([sum(1 for n in batch_sizes if n > b) for b in range(batch)], dtype=int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return padded, lengths


def _padded(x, size, padding_value, dim, left=False):
    """``x`` grown to ``size`` along ``dim`` with ``padding_value`` (before it when ``left``)."""
    missing = size - x.shape[dim]
    if missing == 0:
        return x
    shape = list(x.shape)
    shape[dim] = missing
    pad = full(shape, padding_value, dtype=x.dtype, device=x.device)
    return ops.cat([pad, x] if left else [x, pad], dim)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences ``[L_i, *]`` into ``[max L, B, *]`` (``[B, max L, *]`` with ``batch_first``),
    filling with ``padding_value`` after each sequence (before it with ``padding_side="left"``)."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = tuple(sequences)
    longest = max(s.size(0) for s in sequences)
    padded = [_padded(s, longest, padding_value, 0, left=padding_side == "left") for s in sequences]
    return ops.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences ``[L_i, *]`` in a padded batch, cut to ``lengths``."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of sequences ``[L_i, *]`` (sorted by decreasing length unless ``enforce_sorted=False``)."""
    lengths = as_tensor([s.size(0) for s in sequences], dtype=int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a ``PackedSequence`` holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
