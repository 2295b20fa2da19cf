"""Map-style and iterable datasets, ``TensorDataset``, ``ConcatDataset``, ``Subset`` and ``random_split``."""
import bisect
import math

from ...random import randperm


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define ``__iter__``."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset):
    """Sample ``i`` is the tuple of each tensor's row ``i``; all tensors need the same first size."""

    def __init__(self, *tensors):
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dimensions {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The samples of several map-style datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError(f"ConcatDataset: index {index} out of range for length {len(self)}")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for length {len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _split_lengths(lengths, total):
    """Integer lengths from ``lengths`` (ints, or fractions that sum to 1: floors, then one more each,
    round-robin, until the total is reached, as torch does)."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [math.floor(total * f) for f in lengths]
        for i in range(total - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != total:
        raise ValueError(f"random_split: sum of input lengths {sum(lengths)} does not equal the length of the input "
                         f"dataset {total}")
    return lengths


def random_split(dataset, lengths, generator=None):
    """Splits ``dataset`` into non-overlapping random ``Subset``s of the given lengths (or fractions)."""
    lengths = _split_lengths(list(lengths), len(dataset))
    order = randperm(sum(lengths), generator=generator).tolist()
    subsets, start = [], 0
    for n in lengths:
        subsets.append(Subset(dataset, order[start:start + n]))
        start += n
    return subsets
