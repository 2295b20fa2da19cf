"""Locking (a locked TensorDict takes in-place writes only), what a locked TensorDict caches, shared
memory, and the ``with`` blocks that undo an op at their end (``with td.lock_():``,
``with td.permute(1, 0) as view:``): ``_WITH_INVERSES`` says how each op is undone."""
import weakref
from functools import wraps

from .. import primitives as _ops
from .base import TensorDictBase


class _LockMixin:
    """lock_/unlock_, the lock graph of nested TensorDicts, the locked cache and share_memory_."""
    __slots__ = ()

    @property
    def is_locked(self):
        return self._locked

    def lock_(self):
        """Locks this TensorDict and every nested one: entries can then be written in place only
        (``set_``, ``update_``, ``td[idx] = ...``), never added, removed or replaced. Returns self;
        ``with td.lock_():`` locks for the block only."""
        if not self._locked:
            self._propagate_lock(None)
        return self

    def _propagate_lock(self, parents):
        """Locks self and its nested TensorDicts, recording in each the TensorDicts above it whose
        lock holds it (a TensorDict nested under two roots stays locked while either is)."""
        self._locked = True
        if parents is None:
            parents = []
        else:
            mine = getattr(self, "_lock_parents", None) or []
            self._lock_parents = mine + [r for r in parents if not any(r is m for m in mine)]
            parents = list(parents)
        parents.append(weakref.ref(self))
        for value in self._tensordict.values():
            if isinstance(value, TensorDictBase):
                value._propagate_lock(parents)

    def unlock_(self):
        """Unlocks this TensorDict and every nested one. RuntimeError (and everything stays locked)
        when one of them is also held by a locked TensorDict that is not below self."""
        nested = self._propagate_unlock()
        try:
            for sub in nested:
                sub._check_unlock()
            self._check_unlock()
        except RuntimeError:
            self.lock_()
            raise
        return self

    def _propagate_unlock(self):
        self._locked = False
        self._cache_store = None
        self._memmap_state = False
        self._consolidated = None  # writes may now replace leaves: no longer views of one storage
        self._shared_state = False
        nested = []
        for value in self._tensordict.values():
            if isinstance(value, TensorDictBase):
                nested.extend(value._propagate_unlock())
                nested.append(value)
        return nested

    def _check_unlock(self):
        for ref in getattr(self, "_lock_parents", None) or ():
            parent = ref()
            if parent is not None and parent._locked:
                raise RuntimeError("Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                                   "tensordict first. If the tensordict is part of multiple graphs, group the graphs "
                                   "under a common tensordict an unlock this root.")
        self._lock_parents = []

    @is_locked.setter
    def is_locked(self, value):
        if value:
            self.lock_()
        else:
            self.unlock_()

    @property
    def _lock_parents_weakrefs(self):
        """Weak references to the TensorDicts whose lock holds this one (tensordict's attribute)."""
        return getattr(self, "_lock_parents", None) or []

    @property
    def _is_locked(self):
        return self._locked

    @property
    def _cache(self):
        """What a locked TensorDict remembers (None when unlocked)."""
        return getattr(self, "_cache_store", None)

    def _cached(self, name, args, compute):
        """``compute()``, remembered under (name, args) while the TensorDict is locked: its keys
        cannot change then, so flatten_keys/unflatten_keys give the same TensorDict every call."""
        if not self._locked:
            return compute()
        cache = getattr(self, "_cache_store", None)
        if cache is None:
            cache = self._cache_store = {}
        key = name if args is None else (name, args)
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def _check_unlocked(self):
        if self._locked:
            raise RuntimeError("Cannot modify locked TensorDict. For in-place modification, consider using the "
                               "`set_()` method and make sure the key is present.")

    def is_shared(self):
        """True once share_memory_ moved this TensorDict (or one it is nested in) into shared memory,
        until it is unlocked; always True on a CUDA device. As tensordict documents, a TensorDict
        merely holding shared tensors, or one indexed from a shared one, is not shared (tensordict
        0.14.3 does call ``td[0]``, ``view`` and ``unbind`` results of a shared TensorDict shared)."""
        if self._device is not None and self._device.type == "cuda":
            return True
        return getattr(self, "_shared_state", False) is True

    def _locked_if_self(self, out):
        if self._locked and out is not None and not out._locked:
            out.lock_()
            out._last_op = None
        return out

    def share_memory_(self):
        """Moves every leaf into shared memory (``Tensor.share_memory_``: memory that worker processes
        forked afterwards share) and locks the TensorDict; is_shared() is then True for it and its
        nested TensorDicts, as in tensordict. RuntimeError on a memory-mapped TensorDict."""
        if self.is_memmap():
            raise RuntimeError("memmap and shared memory are mutually exclusive features.")
        for td in self._all_tensordicts():
            for value in td._tensordict.values():
                if not isinstance(value, TensorDictBase):
                    value.share_memory_()
            td._shared_state = True
        return self.lock_()


# ---- `with` blocks: `with td.lock_():` and `with td.permute(...) as view:` -----------------------------
def _update_source(source, result):
    """Writes ``result`` back into ``source`` when a `with` block over a reshaped view ends."""
    return source.update_(result) if source.is_locked else source.update(result)


def _unsqueeze_inverse(out, source, args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    if dim is None:
        raise RuntimeError("Cannot use td.unsqueeze() as a decorator if the dimension is implicit.")
    return _update_source(source, out.squeeze(dim))


def _squeeze_inverse(out, source, args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    if dim is None:
        raise RuntimeError("Cannot use td.squeeze() as a decorator if the dimension is implicit.")
    return _update_source(source, out.unsqueeze(dim))


def _permute_inverse(out, source, args, kwargs):
    dims = [d % len(out.batch_size) for d in _ops._shape_arg(args or (kwargs.get("dims"),))]
    return _update_source(source, out.permute([dims.index(i) for i in range(len(dims))]))


def _flatten_inverse(out, source, args, kwargs):
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    start, end = start % source.batch_dims, end % source.batch_dims
    return _update_source(source, out.unflatten(start, source.batch_size[start:end + 1]))


def _unflatten_inverse(out, source, args, kwargs):
    dim = args[0] if args else kwargs["dim"]
    sizes = args[1] if len(args) > 1 else kwargs["unflattened_size"]
    dim = dim % source.batch_dims
    return _update_source(source, out.flatten(dim, dim + len(sizes) - 1))


def _roll_inverse(out, source, args, kwargs):
    shifts = args[0] if args else kwargs["shifts"]
    dims = args[1] if len(args) > 1 else kwargs.get("dims")
    back = -shifts if isinstance(shifts, int) else tuple(-s for s in shifts)
    return _update_source(source, out.roll(back, dims))


def _movedim_inverse(out, source, args, kwargs):
    src = args[0] if args else kwargs["source"]
    dst = args[1] if len(args) > 1 else kwargs["destination"]
    return _update_source(source, out.movedim(dst, src))


def _separator(args, kwargs):
    return args[0] if args else kwargs.get("separator", ".")


# name of the method -> how the end of its `with` block undoes it (``out`` is what the method
# returned, ``source`` the TensorDict it was called on), as tensordict's context managers do
def _to_module_inverse(out, source, args, kwargs):
    """Puts back what ``to_module`` replaced; the values it takes out go into ``source`` (when alive)."""
    restored = out.to_module(*args, **{**kwargs, "swap_dest": source})
    if restored is not None:
        restored._last_op = None  # putting back is not something a later `with` block should undo


_WITH_INVERSES = {
    "lock_": lambda out, source, args, kwargs: out.unlock_(),
    "unlock_": lambda out, source, args, kwargs: out.lock_(),
    "transpose": lambda out, source, args, kwargs: _update_source(source, out.transpose(*args, **kwargs)),
    "permute": _permute_inverse,
    "unsqueeze": _unsqueeze_inverse,
    "squeeze": _squeeze_inverse,
    "view": lambda out, source, args, kwargs: _update_source(source, out.view(source.batch_size)),
    "flatten": _flatten_inverse,
    "unflatten": _unflatten_inverse,
    "flatten_keys": lambda out, source, args, kwargs: _update_source(
        source, out.unflatten_keys(_separator(args, kwargs))),
    "unflatten_keys": lambda out, source, args, kwargs: _update_source(
        source, out.flatten_keys(_separator(args, kwargs))),
    "flip": lambda out, source, args, kwargs: _update_source(source, out.flip(*args, **kwargs)),
    "roll": _roll_inverse,
    "movedim": _movedim_inverse,
    "to_module": _to_module_inverse,
}


def _with_block(name, method, lock_toggle):
    """``method`` that also records on its result how a `with` block around it is undone.
    ``lock_toggle``: lock_/unlock_ record nothing when the lock state did not change."""
    @wraps(method)
    def recorded(self, *args, **kwargs):
        before = self._locked
        out = method(self, *args, **kwargs)
        if isinstance(out, TensorDictBase):
            if lock_toggle and self._locked is before:
                out._last_op = None
            else:
                out._last_op = (name, args, kwargs, weakref.ref(self))
        return out
    return recorded


def _enter(self):
    queue = getattr(self, "_last_op_queue", None)
    if queue is None:
        queue = self._last_op_queue = []
    queue.append(getattr(self, "_last_op", None))
    self._last_op = None
    return self


def _exit(self, exc_type, exc_value, traceback):
    """Undoes the op that made this `with` block. A lock change and a to_module are undone even when
    the block raised; a reshaped view is written back only when the block ended normally (tensordict skips
    both on an error, which leaves a TensorDict unlocked after a failed `with td.unlock_():`)."""
    last = self._last_op_queue.pop()
    if last is None:
        return False
    name, args, kwargs, ref = last
    if exc_type is not None and name not in ("lock_", "unlock_", "to_module"):
        return False
    source = ref()
    if source is not None or name in ("lock_", "unlock_", "to_module"):
        _WITH_INVERSES[name](self, source, args, kwargs)
        self._last_op = None  # the inverse recorded itself (lock_/unlock_): nothing left to undo
    return False


def _lock_like_source(method):
    """``method`` whose result is locked when self is, as tensordict's shape ops and casts do."""
    @wraps(method)
    def keeps_lock(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        if self._locked and isinstance(out, TensorDictBase) and out is not self and not out._locked:
            out.lock_()
            out._last_op = None  # locking the result is not something a `with` block should undo
            if self.is_memmap():
                out._mark_memmap()
        return out
    return keeps_lock
