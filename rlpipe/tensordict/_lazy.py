"""tensordict._lazy's names: lazy stacks and lazy custom-op views are out of rlpipe's scope (stacking
is dense). They exist for code that imports them and raise NotImplementedError when built."""
from .._utils import unavailable
from ._td import TensorDict

__all__ = ["LazyStackedTensorDict", "_CustomOpTensorDict"]


class _LazyStack:
    maybe_dense_stack = staticmethod(TensorDict.maybe_dense_stack)

    @classmethod
    def lazy_stack(cls, items, dim=0, **kwargs):
        raise NotImplementedError("LazyStackedTensorDict.lazy_stack is not available in rlpipe: lazy stacks are "
                                  "not implemented; TensorDict.stack stacks densely")


LazyStackedTensorDict = unavailable("LazyStackedTensorDict", "lazy stacks are not implemented; TensorDict.stack "
                                    "stacks densely", _LazyStack)
_CustomOpTensorDict = unavailable("_CustomOpTensorDict", "lazy views are not implemented; TensorDict's shape "
                                  "ops return TensorDicts")


def lazy_stack(items, dim=0, **kwargs):
    """tensordict.lazy_stack: not available in rlpipe (no lazy stacks; ``TensorDict.stack`` is dense)."""
    return LazyStackedTensorDict.lazy_stack(items, dim, **kwargs)
