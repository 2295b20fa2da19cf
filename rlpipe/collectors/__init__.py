"""Layer 6: collectors that step environments with policies and yield TensorDict batches."""
from .collectors import SyncDataCollector, RandomPolicy

__all__ = ["SyncDataCollector", "RandomPolicy"]
