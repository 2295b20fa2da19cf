"""torchrl's sample units: what each index a sampler draws expands into."""
import abc

from ..._utils import unavailable

__all__ = ["SampleUnit", "Transition", "Sequence"]


class SampleUnit(abc.ABC):
    """Expands the anchor indices a sampler drew into the records of the batch:
    ``expand(index, info, storage) -> (index, info)``; it must not change the storage."""

    @abc.abstractmethod
    def expand(self, index, info, storage):
        """The storage positions and info that a sampled ``index`` stands for (itself, for a plain unit)."""
        ...


class Transition(SampleUnit):
    """The identity unit: every anchor is one transition (the classic replay sample)."""

    def expand(self, index, info, storage):
        """A transition is one item: the index and info unchanged."""
        return index, info


Sequence = unavailable("Sequence", "windows of records around each anchor (burn-in, bootstrap) are not "
                       "implemented; use SliceSampler", SampleUnit)
Sequence.__abstractmethods__ = frozenset()  # so that building it reaches the NotImplementedError
