"""tensordict.persistent's names: H5-backed TensorDicts are out of rlpipe's scope."""
from .._utils import unavailable

__all__ = ["PersistentTensorDict"]

_has_h5 = False  # tensordict's flag for h5py being importable: rlpipe never uses h5py
PersistentTensorDict = unavailable("PersistentTensorDict", "H5 persistent storage is out of scope")
