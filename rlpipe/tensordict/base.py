"""tensordict.base's names for code that type-checks TensorDicts. rlpipe has one TensorDict class (no
lazy stacks, no tensorclasses), so the base class is that class."""
from .._utils import unavailable
from ._td import TensorDict

__all__ = ["TensorDictBase", "is_tensor_collection", "is_tensorclass", "tensorclass", "LazyStackedTensorDict"]

# tensordict's abstract base: every rlpipe TensorDict is one, so isinstance(td, TensorDictBase) holds
TensorDictBase = TensorDict


def is_tensor_collection(obj):
    """Whether ``obj`` (an instance or a class) is a TensorDict: rlpipe's only tensor collection."""
    return issubclass(obj if isinstance(obj, type) else type(obj), TensorDict)


def is_tensorclass(obj):
    """Always False: rlpipe has no tensorclasses (``tensorclass`` raises NotImplementedError)."""
    return False


def tensorclass(cls=None, **kwargs):
    """tensordict's ``@tensorclass`` decorator: not available in rlpipe (a TensorDict holds the same
    entries under string keys)."""
    raise NotImplementedError("tensorclass is not available in rlpipe: use a TensorDict with the same entries")


class _LazyStack:
    maybe_dense_stack = staticmethod(TensorDict.maybe_dense_stack)

    @classmethod
    def lazy_stack(cls, items, dim=0, **kwargs):
        raise NotImplementedError("LazyStackedTensorDict.lazy_stack is not available in rlpipe: lazy stacks are "
                                  "not implemented; TensorDict.stack stacks densely")


LazyStackedTensorDict = unavailable("LazyStackedTensorDict", "lazy stacks are not implemented; TensorDict.stack "
                                    "stacks densely", _LazyStack)
