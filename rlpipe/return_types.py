"""The named tuples that reductions returning (values, indices) give, as ``torch.return_types``."""
from ._ops import (cummax_return as cummax, cummin_return as cummin, max_return as max,  # noqa: F401
                   min_return as min, sort_return as sort, topk_return as topk)

__all__ = ["cummax", "cummin", "max", "min", "sort", "topk"]
