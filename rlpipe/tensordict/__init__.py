"""Layer 4: ``TensorDict``, the batched nested container, and the modules that read and write it.

Layout (a module imports only modules of the lines above its own or of its own line; no import cycles):

- ``keys.py``, ``memmap.py``, ``_common.py``: nested keys, ``MemoryMappedTensor``, shared sentinels and
  switches.
- ``_math.py``: ``TensorDictMath``, arithmetic, elementwise math and reductions written against the contract;
  ``_torch_func.py``: the rlpipe functions a TensorDict answers (``rlpipe.stack(tds)``...).
- ``base.py``: ``TensorDictBase``, the abstract contract every kind of TensorDict implements (storage, per-leaf
  functions, batch ops, locking) and the behaviour shared by all kinds, written against it.
- ``_entries.py`` (storage: get/set/update/keys, batch size, device), ``_lock.py`` (locking, caches, ``with``
  blocks), ``_apply.py`` (per-leaf functions, copies, ``to``), ``_index.py`` (``td[index]`` read and write),
  ``_shape.py`` (reshape/permute/stack/cat...), ``_names.py`` (dim names), ``_io.py`` (memmap, consolidate,
  state dicts, pickling; ``_consolidate.py`` lays out the buffer and rebuilds from it: ``from_consolidated``
  and unpickling), ``_construct.py`` (``from_dict``/``from_any``/``tolist``...), ``_repr.py`` (printing): one
  mixin each, over the slots of the dense TensorDict.
- ``_td.py``: ``TensorDict``, the dense kind (its slots and the mixins), and ``_SubTensorDict``, a view at an
  index that writes through to its source.
- ``functional.py``, ``utils.py``, ``persistent.py``, ``_archive.py``: tensordict's module-level functions
  and the names rlpipe keeps for code that imports them; ``_lazy.py``: ``LazyStackedTensorDict``, stacks
  of TensorDicts kept apart (entries may differ in shape), its indexing in ``_lazy_index.py``;
  ``_nontensor.py``: ``NonTensorData`` and ``NonTensorStack``, Python objects as entries; ``nn/``: the
  TensorDict modules.
- ``tensorclass.py``: ``@tensorclass`` and ``TensorClass``, typed fields over a TensorDict (``is_tensorclass``
  is in ``utils.py``).
"""
import sys as _sys

from .. import primitives as _primitives, serialization as _serialization
from .._tensor import Tensor
from ..utils import _pytree
from ._construct import tree_flatten_td, tree_unflatten_td
from ._common import get_defaults_to_none, set_get_defaults_to_none
from ._repr import get_printoptions, set_printoptions
from ._td import TensorDict, _from_state, _to_state, consolidated_state, from_consolidated_state
from ._archive import is_memmap_archive, pack_memmap, refresh_archive_checksums, unpack_memmap
from ._lazy import LazyStackedTensorDict, lazy_stack
from .base import TensorDictBase, is_leaf_nontensor, is_tensor_collection
from .functional import dense_stack_tds, merge_tensordicts, pad, pad_sequence
from .memmap import MemoryMappedTensor
from .persistent import PersistentTensorDict
from ._nontensor import MetaData, NonTensorData, NonTensorDataBase, NonTensorStack
from .tensorclass import TensorClass, is_tensorclass, tensorclass
from .utils import (assert_allclose_td, assert_close, capture_non_tensor_stack, is_non_tensor, lazy_legacy,
                    list_to_stack, set_capture_non_tensor_stack,
                    set_lazy_legacy, set_list_to_stack)
from .keys import unravel_key, unravel_key_list, unravel_key_to_tuple
from .nn import TensorDictModule, TensorDictParams, TensorDictSequential

# the non-tensor classes also where tensordict has them (the package's `tensorclass` attribute is the
# decorator, so the module is read from sys.modules)
for _name in ("MetaData", "NonTensorData", "NonTensorDataBase", "NonTensorStack"):
    setattr(_sys.modules[__name__ + ".tensorclass"], _name, globals()[_name])
_serialization.register_type(TensorDict, "TensorDict", _to_state, _from_state)
_pytree.register_pytree_node(TensorDict, tree_flatten_td, tree_unflatten_td)
# saved as its values; loaded into a new anonymous memory map
_serialization.register_type(MemoryMappedTensor, "MemoryMappedTensor", Tensor.detach, MemoryMappedTensor.from_tensor)
load_memmap = TensorDict.load_memmap


# rlpipe.save/load of lazy stacks and non-tensor data: plain data only (a non-tensor object must be
# one save stores: numbers, strings, lists, tuples, dicts of those), never pickled
def _lazy_state(td):
    return consolidated_state(td) or {"tensordicts": list(td.tensordicts), "stack_dim": td.stack_dim}


def _lazy_from_state(state):
    if "consolidated" in state:
        return from_consolidated_state(LazyStackedTensorDict, state)
    return LazyStackedTensorDict(*state["tensordicts"], stack_dim=int(state["stack_dim"]))


def _non_tensor_state(value):
    return {"data": value.tolist() if isinstance(value, NonTensorStack) else value.data,
            "batch_size": list(value.batch_size)}


_serialization.register_type(LazyStackedTensorDict, "LazyStackedTensorDict", _lazy_state, _lazy_from_state)
_serialization.register_type(NonTensorData, "NonTensorData", _non_tensor_state,
                             lambda state: NonTensorData(state["data"], batch_size=state["batch_size"]))
_serialization.register_type(NonTensorStack, "NonTensorStack", _non_tensor_state,
                             lambda state: NonTensorStack.from_list(state["data"]))

__all__ = ["assert_allclose_td", "TensorDict", "TensorDictBase", "LazyStackedTensorDict", "is_tensor_collection",
           "is_tensorclass", "tensorclass", "TensorDictModule", "TensorDictParams", "TensorDictSequential",
           "get_defaults_to_none",
           "get_printoptions", "merge_tensordicts", "pad", "pad_sequence", "set_get_defaults_to_none",
           "set_printoptions", "unravel_key", "unravel_key_list", "unravel_key_to_tuple",
           "is_memmap_archive", "pack_memmap", "refresh_archive_checksums", "unpack_memmap", "lazy_stack",
           "is_leaf_nontensor", "dense_stack_tds", "MemoryMappedTensor", "PersistentTensorDict", "MetaData",
           "NonTensorData", "NonTensorDataBase", "NonTensorStack", "TensorClass", "capture_non_tensor_stack",
           "lazy_legacy", "list_to_stack", "set_capture_non_tensor_stack", "set_lazy_legacy", "set_list_to_stack",
           "load_memmap", "is_non_tensor", "cat", "stack", "assert_close"]


def stack(input, dim=0, *, out=None):
    """tensordict.stack: ``rlpipe.stack`` of TensorDicts or tensorclasses."""
    return _primitives.stack(input, dim, out=out)


def cat(input, dim=0, *, out=None):
    """tensordict.cat: ``rlpipe.cat`` of TensorDicts or tensorclasses."""
    return _primitives.cat(input, dim, out=out)


def from_module(module, as_module=False, lock=True, use_state_dict=False):
    """tensordict.from_module: the module's parameters and buffers in a TensorDict (locked by default,
    unlike ``TensorDict.from_module``, as tensordict)."""
    return TensorDict.from_module(module, as_module=as_module, lock=lock, use_state_dict=use_state_dict)


def from_modules(*modules, as_module=False, lock=True, use_state_dict=False, lazy_stack=False,
                 expand_identical=False):
    """tensordict.from_modules: the parameters of several alike modules stacked (for ``vmap``)."""
    return TensorDict.from_modules(*modules, as_module=as_module, lock=lock, use_state_dict=use_state_dict,
                                   lazy_stack=lazy_stack, expand_identical=expand_identical)


__all__ += ["from_module", "from_modules"]
