"""torchrl's sample units: what each index a sampler draws expands into."""
import abc

from ..._utils import unavailable

__all__ = ["SampleUnit", "Transition", "Sequence"]


class SampleUnit(abc.ABC):
    """Expands the anchor indices a sampler drew into the records of the batch:
    ``expand(index, info, storage) -> (index, info)``; it must not change the storage."""

    @abc.abstractmethod
    def expand(self, index, info, storage):
        ...


class Transition(SampleUnit):
    """The identity unit: every anchor is one transition (the classic replay sample)."""

    def expand(self, index, info, storage):
        return index, info


Sequence = unavailable("Sequence", "windows of records around each anchor (burn-in, bootstrap) are not "
                       "implemented; use SliceSampler", SampleUnit)
Sequence.__abstractmethods__ = frozenset()  # so that building it reaches the NotImplementedError
