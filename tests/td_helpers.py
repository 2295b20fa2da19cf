"""Helpers shared by the TensorDict, MultiStep and postprocs tests: NumPy <-> TensorDict by hand."""
import numpy as np

import rlpipe
from rlpipe import TensorDict


def arr(x, copy=True):
    """A NumPy copy of a tensor (a view with ``copy=False``), or the array itself."""
    if isinstance(x, rlpipe.Tensor):
        host = x.detach().cpu().numpy()
        return np.array(host) if copy else np.asarray(host)
    return np.asarray(x)


def leaves(td, prefix=()):
    """{tuple key: leaf} walked by hand with ``keys()`` and ``get`` (not ``items(True, True)``)."""
    out = {}
    for key in td.keys():
        value = td.get(key)
        if isinstance(value, TensorDict):
            out.update(leaves(value, prefix + (key,)))
        else:
            out[prefix + (key,)] = value
    return out


def make_td(arrays, batch_shape, device=None):
    """A TensorDict with the tuple-keyed NumPy ``arrays`` as leaves (each array copied)."""
    source = {}
    for key, value in arrays.items():
        node = source
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = rlpipe.tensor(np.array(value))
    td = TensorDict(source, batch_size=list(batch_shape))
    return td if device is None else td.to(device)
