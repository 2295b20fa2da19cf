"""tensordict.base's names for code that type-checks TensorDicts. rlpipe has one TensorDict class (no
lazy stacks, no tensorclasses), so the base class is that class."""
from .._tensor import Tensor
from ._lazy import LazyStackedTensorDict
from ._td import TensorDict, is_tensor_collection
from .tensorclass import is_tensorclass, tensorclass

__all__ = ["TensorDictBase", "is_tensor_collection", "is_tensorclass", "tensorclass", "LazyStackedTensorDict",
           "is_leaf_nontensor"]

# tensordict's abstract base: every rlpipe TensorDict is one, so isinstance(td, TensorDictBase) holds
TensorDictBase = TensorDict


def _is_leaf_nontensor(cls):
    """``is_leaf`` test for ``keys``/``items``/``apply``: a class is a leaf when it is a Tensor class
    (rlpipe has no non-tensor data, tensordict's other kind of leaf)."""
    return issubclass(cls, Tensor)


is_leaf_nontensor = _is_leaf_nontensor


def _is_tensor_collection(cls):
    """Whether the class ``cls`` is a tensor collection (rlpipe's: TensorDict and its subclasses)."""
    return issubclass(cls, TensorDict)

# tensordict's is_leaf that also treats nested (jagged) tensors as leaves: rlpipe has no nested tensors
_NESTED_TENSORS_AS_LISTS = _is_leaf_nontensor
