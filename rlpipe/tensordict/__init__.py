"""Layer 4: ``TensorDict``, the batched nested container, and the modules that read and write it."""
from .. import serialization as _serialization
from ..testing import assert_allclose_td
from ._td import (TensorDict, _from_state, _to_state, get_defaults_to_none, get_printoptions, set_get_defaults_to_none,
                  set_printoptions)
from .base import (LazyStackedTensorDict, TensorDictBase, is_tensor_collection, is_tensorclass,
                   tensorclass)
from .functional import merge_tensordicts, pad, pad_sequence
from .keys import unravel_key, unravel_key_list, unravel_key_to_tuple
from .nn import TensorDictModule, TensorDictSequential

_serialization.register_type(TensorDict, "TensorDict", _to_state, _from_state)

__all__ = ["assert_allclose_td", "TensorDict", "TensorDictBase", "LazyStackedTensorDict", "is_tensor_collection",
           "is_tensorclass", "tensorclass", "TensorDictModule", "TensorDictSequential", "get_defaults_to_none",
           "get_printoptions", "merge_tensordicts", "pad", "pad_sequence", "set_get_defaults_to_none",
           "set_printoptions", "unravel_key", "unravel_key_list", "unravel_key_to_tuple"]
