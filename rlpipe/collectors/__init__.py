"""Layer 6: collectors that step environments with policies and yield TensorDict batches.

torchrl 0.14 renamed its collectors; both spellings name the same classes here: ``Collector`` is
``SyncDataCollector``, ``MultiSyncCollector`` is ``MultiSyncDataCollector``, ``MultiAsyncCollector``
is ``MultiaSyncDataCollector``, ``BaseCollector`` and ``MultiCollector`` are their bases."""
from .collectors import BaseCollector, Collector, SyncDataCollector, RandomPolicy
from .multi import MultiCollector, MultiSyncDataCollector, MultiaSyncDataCollector, MultiSyncCollector, \
    MultiAsyncCollector

__all__ = ["SyncDataCollector", "MultiSyncDataCollector", "MultiaSyncDataCollector", "RandomPolicy",
           "BaseCollector", "Collector", "MultiCollector", "MultiSyncCollector", "MultiAsyncCollector"]
