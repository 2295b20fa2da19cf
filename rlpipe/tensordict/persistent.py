"""tensordict.persistent's names. ``PersistentTensorDict`` is an HDF5-backed TensorDict built on
h5py, which rlpipe does not depend on: the name stays importable (tensordict's own test helpers
and user code import it at module level) and behaves as tensordict's does where h5py is missing,
raising ModuleNotFoundError when built."""

__all__ = ["PersistentTensorDict"]

_has_h5 = False  # tensordict's flag for h5py being importable: rlpipe never uses h5py

_NO_H5PY = ("Could not load h5py: rlpipe does not depend on h5py, so PersistentTensorDict (an HDF5-backed "
            "TensorDict) is not available; use TensorDict.memmap / load_memmap or consolidate(filename) instead")


class PersistentTensorDict:
    """tensordict's HDF5-backed TensorDict: ModuleNotFoundError (rlpipe has no h5py)."""

    def __init__(self, *args, **kwargs):
        raise ModuleNotFoundError(_NO_H5PY)

    @classmethod
    def from_h5(cls, filename, mode="r"):
        """ModuleNotFoundError: rlpipe has no h5py."""
        raise ModuleNotFoundError(_NO_H5PY)

    @classmethod
    def from_dict(cls, input_dict, filename, *args, **kwargs):
        """ModuleNotFoundError: rlpipe has no h5py."""
        raise ModuleNotFoundError(_NO_H5PY)
