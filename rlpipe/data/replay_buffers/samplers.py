"""Samplers: which storage positions a replay-buffer sample reads.

``RandomSampler`` draws uniformly with replacement, ``SamplerWithoutReplacement`` walks through
a permutation, ``PrioritizedSampler`` draws position ``i`` with probability
``(p_i + eps) ** alpha / sum_j (p_j + eps) ** alpha`` from a sum-tree and returns the
importance weights. Random numbers come from ``rlpipe``'s default CPU generator (so
``rlpipe.manual_seed`` makes sampling reproducible) or the buffer's ``generator``.

This module is the samplers' public home: ``_sampler_base`` holds the interface and the basic
samplers, ``_prioritized_sampler`` the sum-tree and ``PrioritizedSampler``, ``_slice_samplers``
the slice samplers, and this module ``StalenessAwareSampler`` and the names rlpipe lacks. Every
class reports this module as its ``__module__`` (so pickles and reprs name the path users import from).
"""
import numpy as np

from ..._tensor import Tensor, wrap
from ..._utils import unavailable
from ...tensordict import TensorDict
from ._prioritized_sampler import PrioritizedSampler, SumMinTree
from ._sampler_base import (  # noqa: F401 - EMPTY_STORAGE_ERROR, as_index_array: re-exported
    _WITHOUT_REPLACEMENT,
    EMPTY_STORAGE_ERROR,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
    _as_flat_array,
    as_index_array,
    empty_storage_error,
)
from ._slice_samplers import PrioritizedSliceSampler, SliceSampler, SliceSamplerWithoutReplacement

__all__ = ["Sampler", "RandomSampler", "SamplerWithoutReplacement", "PrioritizedSampler", "SumMinTree",
           "SliceSampler", "SliceSamplerWithoutReplacement", "PrioritizedSliceSampler", "ConsumingSampler",
           "PromptGroupSampler", "StalenessAwareSampler", "StreamingSliceSampler", "SamplerEnsemble"]

# the parts' classes name this module as theirs: pickles record the path users import them from
for _cls in (Sampler, RandomSampler, SamplerWithoutReplacement, SumMinTree, PrioritizedSampler, SliceSampler,
             SliceSamplerWithoutReplacement, PrioritizedSliceSampler):
    _cls.__module__ = __name__
del _cls


def _freshness(staleness):
    """torchrl's default staleness weight, ``1 / (staleness + 1)``."""
    return 1.0 / (staleness + 1.0)


class StalenessAwareSampler(Sampler):
    """Samples by freshness, for asynchronous training where stored data comes from older policy
    versions (torchrl's): an item's staleness is ``consumer_version - policy_version`` (its
    ``version_key`` entry), items staler than ``max_staleness`` are never drawn (``-1``: no
    limit), and the others are drawn with probability proportional to
    ``staleness_weight_fn(staleness)`` (default ``1 / (staleness + 1)``; a callable taking and
    returning a float Tensor), without replacement when there are enough of them. The info holds
    ``"staleness"``. The training loop moves ``consumer_version`` on (``consumer_version = step``
    or ``increment_consumer_version()``)."""

    def __init__(self, max_staleness=-1, staleness_weight_fn=None, version_key="policy_version"):
        if staleness_weight_fn is not None and not callable(staleness_weight_fn):
            raise TypeError(f"StalenessAwareSampler: staleness_weight_fn must be callable, got "
                            f"{type(staleness_weight_fn).__name__}")
        self.max_staleness = max_staleness
        self._version_key = version_key
        self._weight_fn = staleness_weight_fn
        self._consumer_version = 0

    @property
    def consumer_version(self):
        """The policy version samples are judged against (staleness = this minus the item's version)."""
        return self._consumer_version

    @consumer_version.setter
    def consumer_version(self, value):
        self._consumer_version = value

    def increment_consumer_version(self):
        """Moves the consumer version on by one (after a policy update)."""
        self._consumer_version += 1

    def _versions(self, storage, n):
        whole = getattr(storage, "_storage", None)
        stored = whole if isinstance(whole, TensorDict) else storage[:]
        versions = stored.get(self._version_key, None) if isinstance(stored, TensorDict) else None
        if versions is None:
            raise KeyError(f"Could not find key {self._version_key!r} in the replay buffer storage. Make sure data "
                           "written to the buffer contains this key (e.g. stamped by the PolicyVersion transform).")
        return _as_flat_array(versions)[:n, 0].astype(np.float64)

    def _weights(self, staleness):
        if self._weight_fn is None:
            return _freshness(staleness)
        weights = self._weight_fn(wrap(staleness.astype(np.float32)))
        return np.asarray(weights.detach().cpu()._data if isinstance(weights, Tensor) else weights, dtype=np.float64)

    def _sample(self, storage, batch_size):
        n = len(storage)
        if n == 0:
            raise empty_storage_error()
        staleness = self._consumer_version - self._versions(storage, n)
        valid = np.arange(n, dtype=np.int64)
        if self.max_staleness >= 0:
            valid = valid[staleness <= self.max_staleness]
            if not valid.size:
                raise RuntimeError(f"All {n} entries in the buffer exceed max_staleness={self.max_staleness} "
                                   f"(consumer_version={self._consumer_version}). Increase max_staleness or update "
                                   "the collector's policy weights more often.")
        weights = self._weights(staleness[valid])
        if weights.shape != valid.shape or not (np.isfinite(weights) & (weights >= 0)).all() or not weights.sum() > 0:
            raise ValueError("StalenessAwareSampler: staleness_weight_fn must return one finite, non-negative weight "
                             f"per item, not all zero; got {weights!r}")
        if batch_size > valid.size:  # with replacement: more draws than eligible items
            chosen = np.searchsorted(np.cumsum(weights), self._uniform(batch_size) * weights.sum(), side="right")
            chosen = np.minimum(chosen, valid.size - 1)
        else:  # without replacement: the largest u ** (1 / w) (Efraimidis-Spirakis)
            with np.errstate(divide="ignore"):
                keys = np.log(self._uniform(valid.size)) / weights
            chosen = np.argsort(-keys, kind="stable")[:batch_size]
        index = valid[chosen]
        return index, {"staleness": staleness[index].astype(np.float32)}

    def _empty(self):
        self._consumer_version = 0

    def state_dict(self):
        """The consumer version and the settings."""
        return {"type": type(self).__name__, "consumer_version": self._consumer_version,
                "max_staleness": self.max_staleness}

    def _load_plan(self, state, stored=None):
        if isinstance(state, dict) and "type" not in state:  # torchrl's keys only
            state = dict(state, type=type(self).__name__)
        super()._load_plan(state)
        try:
            version, max_staleness = int(state["consumer_version"]), int(state["max_staleness"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"load_state_dict: bad StalenessAwareSampler state ({e})") from None

        def apply():
            self._consumer_version, self.max_staleness = version, max_staleness
        return apply

    def __repr__(self):
        return f"{type(self).__name__}(consumer_version={self._consumer_version}, max_staleness={self.max_staleness})"


_WITHOUT_REPLACEMENT.update({RandomSampler: SamplerWithoutReplacement, SliceSampler: SliceSamplerWithoutReplacement})

ConsumingSampler = unavailable("ConsumingSampler", "consuming items after max_sample_count draws (with the "
                               "buffer's free list of slots) is not implemented", Sampler)
PromptGroupSampler = unavailable("PromptGroupSampler", "rlpipe has no LLM samplers", Sampler)
StreamingSliceSampler = unavailable("StreamingSliceSampler", "streaming slices are not implemented", Sampler)
SamplerEnsemble = unavailable("SamplerEnsemble", "ensembles of samplers are not implemented", Sampler)
