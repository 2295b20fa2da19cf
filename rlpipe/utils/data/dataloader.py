"""``DataLoader``: batches of samples from a dataset, and ``default_collate``, which assembles them."""
import collections.abc

import numpy as np

from ..._creation import as_tensor, tensor
from ..._dtypes import float64
from ..._tensor import Tensor
from ...primitives import stack
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

_COLLATE_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_collate(batch):
    """One batch from a list of samples, by their type: tensors and NumPy arrays are stacked, numbers
    become a tensor (float64 for floats, int64 for ints), strings stay a sequence, and dicts, named
    tuples and sequences are collated field by field (a tuple becomes a list, as in torch)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        if elem.dtype.kind in "USO":
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return stack([as_tensor(b) for b in batch], 0) if elem.ndim else as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return tensor(list(batch), dtype=float64)
    if isinstance(elem, int):  # bool included: a bool tensor
        return tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(field) for field in zip(*batch)]
        return fields if isinstance(elem, tuple) else _rebuild(elem, fields)
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def _rebuild(elem, collated):
    """``collated`` in elem's own container type where that type can be built from it, else a plain one."""
    try:
        return type(elem)(collated)
    except TypeError:
        return collated


def default_convert(data):
    """One sample as tensors, unbatched (what ``batch_size=None`` yields): NumPy arrays become tensors, the
    containers are converted field by field, anything else is left alone."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO":
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild(data, {key: default_convert(v) for key, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild(data, [default_convert(d) for d in data])
    return data


def get_worker_info():
    """None: rlpipe's loader reads in the calling process, which is where torch returns None too."""
    return None


class DataLoader:
    """Iterates over ``dataset`` in batches of ``batch_size`` samples assembled by ``collate_fn``
    (``default_collate``), in order or shuffled (``shuffle=True``, ``sampler``, ``batch_sampler``), as
    torch.utils.data.DataLoader does. ``num_workers`` is accepted but batches are read in the calling
    process; ``pin_memory`` has no effect on the CPU."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers option should be non-negative; use num_workers=0 to disable "
                             f"multiprocessing (got num_workers={num_workers!r})")
        if timeout < 0:
            raise ValueError(f"timeout option should be non-negative, but got timeout={timeout}")
        self.dataset, self.num_workers, self.pin_memory, self.timeout = dataset, num_workers, pin_memory, timeout
        self.worker_init_fn, self.generator, self.drop_last = worker_init_fn, generator, drop_last
        self._iterable = isinstance(dataset, IterableDataset)
        self.sampler, self.batch_sampler = self._samplers(batch_size, shuffle, sampler, batch_sampler, drop_last)
        self.batch_size = None if batch_sampler is not None else batch_size
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_convert if self.batch_size is None and batch_sampler is None else default_collate)

    def _samplers(self, batch_size, shuffle, sampler, batch_sampler, drop_last):
        """(sampler, batch_sampler) from the arguments, with torch's checks of their combinations."""
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler and batch_sampler "
                                 "options")
            return None, None
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            return None, batch_sampler
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            sampler = (RandomSampler(self.dataset, generator=self.generator) if shuffle
                       else SequentialSampler(self.dataset))
        return sampler, None if batch_size is None else BatchSampler(sampler, batch_size, drop_last)

    def __iter__(self):
        if self._iterable:
            return self._iter_stream()
        if self.batch_sampler is None:
            return (self.collate_fn(self.dataset[i]) for i in self.sampler)
        return (self.collate_fn([self.dataset[i] for i in indices]) for indices in self.batch_sampler)

    def _iter_stream(self):
        if self.batch_size is None:
            yield from (self.collate_fn(sample) for sample in self.dataset)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)  # TypeError, as in torch, for a stream without a length
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
