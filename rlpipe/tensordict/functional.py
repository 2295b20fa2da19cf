"""tensordict.functional for TensorDicts: ``pad`` (batch dims), ``pad_sequence`` (stack TensorDicts
of different lengths) and ``merge_tensordicts``."""
from .. import primitives as _ops
from .._creation import full as _full
from ._td import TensorDict

__all__ = ["merge_tensordicts", "pad", "pad_sequence"]


def pad(tensordict, pad_size, value=0.0, inplace=False, safe=True):
    """Pads the batch dims of every leaf with ``value``: see ``TensorDict.pad``."""
    return tensordict.pad(pad_size, value, inplace=inplace, safe=safe)


def pad_sequence(list_of_tensordicts, pad_dim=0, padding_value=0.0, out=None, return_mask=False):
    """Stacks TensorDicts whose leaves differ in length along dim ``pad_dim`` (a batch dim, or the
    first feature dim of TensorDicts of batch size []), each padded with ``padding_value`` to the
    longest. ``return_mask`` (True or a key) adds a TensorDict of bools, True where data is real,
    under ``"masks"`` (or that key)."""
    tds = list(list_of_tensordicts)
    if not tds:
        raise RuntimeError("pad_sequence cannot pad an empty list of TensorDicts")
    keys = [k for k in tds[0].keys(True, True)]
    for i, td in enumerate(tds):
        if sorted(map(str, td.keys(True, True))) != sorted(map(str, keys)):
            raise KeyError(f"pad_sequence: the TensorDict at position {i} has other keys than the first")
    if pad_dim < 0:
        raise ValueError(f"pad_sequence: pad_dim must be >= 0, got {pad_dim}")
    batch = list(tds[0].batch_size)
    if pad_dim < len(batch):  # padding a batch dim: the result's batch dim is the longest
        batch[pad_dim] = max(td.batch_size[pad_dim] for td in tds)
    result = TensorDict(batch_size=[len(tds), *batch], device=tds[0].device)
    masks = TensorDict(batch_size=[len(tds), *batch], device=tds[0].device)
    for key in keys:
        leaves = [td.get(key) for td in tds]
        length = max(t.shape[pad_dim] for t in leaves)
        padded, mask_rows = [], []
        for t in leaves:
            extra = length - t.shape[pad_dim]
            shape = list(t.shape)
            shape[pad_dim] = extra
            filler = _full(tuple(shape), padding_value, dtype=t.dtype, device=t.device)
            padded.append(_ops.cat([t, filler], pad_dim))
            mask = _full((length,), False, device=t.device)
            mask[:t.shape[pad_dim]] = True
            lead = tuple(t.shape[:pad_dim])
            mask_rows.append(mask.reshape((1,) * len(lead) + (length,)).expand(lead + (length,)))
        result.set(key, _ops.stack(padded, 0))
        masks.set(key, _ops.stack(mask_rows, 0))
    if return_mask:
        result.set("masks" if return_mask is True else return_mask, masks)
    if out is not None:
        return out.update_(result)
    return result


def merge_tensordicts(*tensordicts, callback_exist=None):
    """One TensorDict with the leaves of all of ``tensordicts`` (the first one's batch size). A key
    several of them hold takes the first one's value, or ``callback_exist(*values)`` when every
    TensorDict holds it (``callback_exist`` may be a dict of callables by nested key)."""
    if len(tensordicts) < 2:
        raise RuntimeError(f"at least 2 tensordicts must be provided, got {len(tensordicts)}")
    out = tensordicts[0].empty(recurse=True)
    seen = []
    for td in tensordicts:
        seen.extend(k for k in td.keys(True, True) if k not in seen)
    for key in seen:
        values = [td.get(key, None) for td in tensordicts]
        callback = callback_exist.get(key) if isinstance(callback_exist, dict) else callback_exist
        if callback is not None and all(v is not None for v in values):
            out.set(key, callback(*values))
        else:
            out.set(key, next(v for v in values if v is not None))
    return out


def dense_stack_tds(td_list, dim=0):
    """Stacks TensorDicts densely along ``dim``; a lazy stack is made dense (``contiguous``)."""
    if isinstance(td_list, TensorDict):
        return td_list
    if isinstance(td_list, TensorDict._lazy_type):
        return td_list.contiguous()
    return TensorDict.stack(list(td_list), dim)
