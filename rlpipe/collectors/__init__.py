"""Layer 6: collectors that step environments with policies and yield TensorDict batches."""
from .collectors import SyncDataCollector, RandomPolicy
from .multi import MultiSyncDataCollector, MultiaSyncDataCollector

__all__ = ["SyncDataCollector", "MultiSyncDataCollector", "MultiaSyncDataCollector", "RandomPolicy"]
