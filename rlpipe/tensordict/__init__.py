"""Layer 4: ``TensorDict``, the batched nested container, and the modules that read and write it."""
from .. import serialization as _serialization
from .._tensor import Tensor
from ._common import get_defaults_to_none, set_get_defaults_to_none
from ._repr import get_printoptions, set_printoptions
from ._td import TensorDict, _from_state, _to_state
from ._archive import is_memmap_archive, pack_memmap, refresh_archive_checksums, unpack_memmap
from ._lazy import LazyStackedTensorDict, lazy_stack
from .base import TensorDictBase, is_leaf_nontensor, is_tensor_collection, is_tensorclass, tensorclass
from .functional import dense_stack_tds, merge_tensordicts, pad, pad_sequence
from .memmap import MemoryMappedTensor
from .persistent import PersistentTensorDict
from .tensorclass import MetaData, NonTensorData, NonTensorStack, TensorClass
from .utils import (assert_allclose_td, capture_non_tensor_stack, lazy_legacy, list_to_stack,
                    set_capture_non_tensor_stack,
                    set_lazy_legacy, set_list_to_stack)
from .keys import unravel_key, unravel_key_list, unravel_key_to_tuple
from .nn import TensorDictModule, TensorDictSequential

_serialization.register_type(TensorDict, "TensorDict", _to_state, _from_state)
# saved as its values; loaded into a new anonymous memory map
_serialization.register_type(MemoryMappedTensor, "MemoryMappedTensor", Tensor.detach, MemoryMappedTensor.from_tensor)
load_memmap = TensorDict.load_memmap

__all__ = ["assert_allclose_td", "TensorDict", "TensorDictBase", "LazyStackedTensorDict", "is_tensor_collection",
           "is_tensorclass", "tensorclass", "TensorDictModule", "TensorDictSequential", "get_defaults_to_none",
           "get_printoptions", "merge_tensordicts", "pad", "pad_sequence", "set_get_defaults_to_none",
           "set_printoptions", "unravel_key", "unravel_key_list", "unravel_key_to_tuple",
           "is_memmap_archive", "pack_memmap", "refresh_archive_checksums", "unpack_memmap", "lazy_stack",
           "is_leaf_nontensor", "dense_stack_tds", "MemoryMappedTensor", "PersistentTensorDict", "MetaData",
           "NonTensorData", "NonTensorStack", "TensorClass", "capture_non_tensor_stack", "lazy_legacy",
           "list_to_stack", "set_capture_non_tensor_stack", "set_lazy_legacy", "set_list_to_stack", "load_memmap"]
