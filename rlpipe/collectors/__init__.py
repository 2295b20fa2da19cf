"""Layer 6: collectors that step environments with policies and yield TensorDict batches.

torchrl 0.14 renamed its collectors; both spellings name the same classes here: ``Collector`` is
``SyncDataCollector``, ``MultiSyncCollector`` is ``MultiSyncDataCollector``, ``MultiAsyncCollector``
is ``MultiaSyncDataCollector``, ``AsyncCollector`` is a one-worker ``MultiaSyncDataCollector``,
``BaseCollector`` and ``MultiCollector`` are their bases."""
from .collectors import BaseCollector, Collector, SyncDataCollector, RandomPolicy
from .multi import MultiCollector, MultiSyncDataCollector, MultiaSyncDataCollector, MultiSyncCollector, \
    MultiAsyncCollector, AsyncCollector
from .evaluator import Evaluator
from . import collectors as _collectors, multi as _multi

# torchrl.collectors.collectors also exports the multi-process collectors, which build on that module
for _name in ("MultiCollector", "MultiSyncCollector", "MultiAsyncCollector", "MultiSyncDataCollector",
              "MultiaSyncDataCollector"):
    setattr(_collectors, _name, getattr(_multi, _name))

__all__ = ["SyncDataCollector", "MultiSyncDataCollector", "MultiaSyncDataCollector", "RandomPolicy",
           "BaseCollector", "Collector", "MultiCollector", "MultiSyncCollector", "MultiAsyncCollector",
           "AsyncCollector", "Evaluator"]
