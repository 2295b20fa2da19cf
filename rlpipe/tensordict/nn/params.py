"""tensordict.nn.params' ``TensorDictParams``: a Module over a TensorDict whose leaves it registers
as its parameters and buffers (under their keys joined by "."), so that a parent Module's
``parameters()``, ``state_dict()``, ``to()`` and optimizers see them, while the object reads and
writes like the TensorDict (torchrl's losses keep their networks' parameters in these).

As tensordict 0.14: floating-point leaves become ``nn.Parameter`` (others buffers) unless
``no_convert=True`` (then Parameters stay, every other tensor is a buffer); a value set later is
converted the same way; methods that make a new TensorDict (``apply``, ``detach``, indexing) return
plain TensorDicts, ``clone`` and ``to`` a new TensorDictParams; ``lock_()`` forbids writes."""
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...nn.modules.module import Module
from ...nn.parameter import Buffer, Parameter
from .._lazy import LazyStackedTensorDict
from .._td import TensorDict
from ..base import TensorDictBase

__all__ = ["TensorDictParams"]


def _make_param(tensor):
    """``no_convert=False``: a floating-point tensor becomes a Parameter, another a Buffer."""
    if not isinstance(tensor, Tensor) or isinstance(tensor, (Parameter, Buffer)):
        return tensor
    return Parameter(tensor) if tensor.is_floating_point() else Buffer(tensor)


def _make_param_or_buffer(tensor):
    """``no_convert=True``: a Parameter stays; a tensor recording gradients stays as it is (its
    graph kept), registered as a buffer; any other becomes a Buffer."""
    if not isinstance(tensor, Tensor) or isinstance(tensor, (Parameter, Buffer)) or tensor.requires_grad:
        return tensor
    return Buffer(tensor)


def _convert_leaves(td, convert):
    """Converts ``td``'s leaves in place (nested TensorDicts too); a lazy stack is refused."""
    for key, value in list(td._tensordict.items()):
        if isinstance(value, LazyStackedTensorDict):
            raise RuntimeError("Using a LazyStackedTensorDict within a TensorDictParams isn't permitted.")
        if isinstance(value, TensorDictBase):
            _convert_leaves(value, convert)
        else:
            td._tensordict[key] = convert(value)
    return td


def _unwrap(value):
    if isinstance(value, TensorDictParams):
        return value._param_td
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


class TensorDictParams(Module):
    """A TensorDict's leaves registered as a Module's parameters and buffers (see the module docstring).

    >>> p = TensorDictParams(TensorDict(w=rlpipe.ones(2), n=rlpipe.tensor(3)))
    >>> [name for name, _ in p.named_parameters()], [name for name, _ in p.named_buffers()]
    (['w'], ['n'])
    """

    def __init__(self, parameters=None, *, no_convert=False, lock=False, **kwargs):
        super().__init__()
        if parameters is None:
            parameters = kwargs
        elif kwargs:
            raise TypeError(f"parameters cannot be passed along with extra keyword arguments, but got "
                            f"{list(kwargs)} extra args.")
        if isinstance(parameters, dict):
            parameters = TensorDict(parameters)
        elif isinstance(parameters, TensorDictParams):
            no_convert, parameters = parameters.no_convert, parameters._param_td
        elif not isinstance(parameters, TensorDict):
            raise TypeError(f"TensorDictParams expects a TensorDict or a dict, got {type(parameters).__name__}")
        self.__dict__["_param_td"] = _convert_leaves(parameters, self._converter(no_convert))
        self.__dict__["no_convert"] = no_convert
        self.__dict__["_params_locked"] = False
        self._lock_content = lock
        if lock:
            parameters.lock_()
        self._reset_params()

    @staticmethod
    def _converter(no_convert):
        return _make_param_or_buffer if no_convert else _make_param

    def _reset_params(self):
        """Registers the leaves again: floating Parameters as parameters, the others as buffers."""
        self._parameters.clear()
        self._buffers.clear()
        for key, value in self._param_td.items(True, True):
            name = key if isinstance(key, str) else ".".join(key)
            (self._parameters if isinstance(value, Parameter) else self._buffers)[name] = value

    # ---- reading: the TensorDict's -----------------------------------------------------------------
    def __getattr__(self, name):
        if not name.startswith("_"):
            td = self.__dict__.get("_param_td")
            if td is not None and hasattr(td, name):
                attr = getattr(td, name)
                if not callable(attr):
                    return attr
                return self._forwarded(attr)
        return super().__getattr__(name)

    def _forwarded(self, method):
        def call(*args, **kwargs):
            out = method(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
            return self if out is self._param_td else out
        call.__name__ = getattr(method, "__name__", "method")
        call.__doc__ = method.__doc__
        return call

    def __getitem__(self, index):
        out = self._param_td[index]
        return self if out is self._param_td else out

    def __iter__(self):
        return iter(self._param_td)

    def __len__(self):
        return len(self._param_td)

    def __repr__(self):
        return f"TensorDictParams(params={self._param_td})"

    def __eq__(self, other):
        return self._param_td == _unwrap(other)

    def __ne__(self, other):
        return self._param_td != _unwrap(other)

    __hash__ = Module.__hash__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """``rlpipe.stack([params, ...])`` and the other TensorDict functions run on the TensorDicts."""
        return func(*_unwrap(args), **{k: _unwrap(v) for k, v in (kwargs or {}).items()})

    @property
    def data(self):
        """The leaves' data (detached, sharing memory) in a plain TensorDict."""
        return self._param_td.data

    @property
    def grad(self):
        """The leaves' gradients in a plain TensorDict."""
        return self._param_td.grad

    # ---- writing: converted, then registered ----------------------------------------------------
    @property
    def is_locked(self):
        """Whether writes are refused (``lock_()``; the TensorDict held may be locked on its own)."""
        return self._params_locked

    def lock_(self):
        """Refuses writes until ``unlock_()``."""
        self.__dict__["_params_locked"] = True
        return self

    def unlock_(self):
        """Allows writes again."""
        self.__dict__["_params_locked"] = False
        return self

    def _write(self, name, *args, **kwargs):
        """``td.<name>(*args)`` on the TensorDict held (unlocked for the call), its new tensors
        converted, then the leaves registered again."""
        if self._params_locked:
            raise RuntimeError("Cannot modify locked TensorDict. For in-place modification, consider using the "
                               "`set_()` method and make sure the key is present.")
        convert = self._converter(self.no_convert)
        args = [convert(a) if isinstance(a, Tensor) else _unwrap(a) for a in args]
        td = self._param_td
        relock = td.is_locked
        td.unlock_()
        try:
            out = getattr(td, name)(*args, **kwargs)
            _convert_leaves(td, convert)
        finally:
            if relock:
                td.lock_()
            self._reset_params()
        return self if out is td else out

    def __setitem__(self, key, value):
        self._write("__setitem__", key, value)

    def set(self, key, item, inplace=False, **kwargs):
        """Sets ``item`` (converted to a Parameter or buffer) at ``key``; returns self."""
        return self._write("set", key, item, inplace=inplace, **kwargs)

    def update(self, input_dict_or_td, clone=False, inplace=False, **kwargs):
        """Updates the entries (new tensors converted); returns self."""
        return self._write("update", input_dict_or_td, clone=clone, inplace=inplace, **kwargs)

    def pop(self, key, *default):
        """Removes ``key`` and returns its value (unregistered)."""
        return self._write("pop", key, *default)

    def del_(self, key):
        """Deletes ``key``; returns self."""
        return self._write("del_", key)

    def rename_key_(self, old_key, new_key, safe=False):
        """Renames a key (registered under its new name); returns self."""
        return self._write("rename_key_", old_key, new_key, safe=safe)

    def apply(self, fn, *others, inplace=False, **kwargs):
        """``TensorDict.apply``: a plain TensorDict, or (``inplace=True``) the results written into
        the leaves (converted and registered again)."""
        if not inplace:
            return self._param_td.apply(fn, *_unwrap(others), **kwargs)
        return self._write("apply", fn, *others, inplace=True, **kwargs)

    def named_apply(self, fn, *others, inplace=False, **kwargs):
        """``TensorDict.named_apply`` (see ``apply``)."""
        if not inplace:
            return self._param_td.named_apply(fn, *_unwrap(others), **kwargs)
        return self._write("named_apply", fn, *others, inplace=True, **kwargs)

    # ---- copies and moves -------------------------------------------------------------------------
    def clone(self, recurse=True, **kwargs):
        """A new TensorDictParams of new Parameters and buffers holding copies of the data, detached
        (a leaf found under two keys stays shared); ``recurse=False``: over the same leaves."""
        if not recurse:
            return TensorDictParams(self._param_td.clone(False), no_convert=self.no_convert)
        memo = {}

        def copy(tensor):
            if id(tensor) not in memo:
                data = tensor.detach().clone()
                memo[id(tensor)] = Parameter(data, tensor.requires_grad) if isinstance(tensor, Parameter) \
                    else Buffer(data)
            return memo[id(tensor)]
        return TensorDictParams(self._param_td.apply(copy), no_convert=True)

    def to(self, *args, **kwargs):
        """A TensorDict's ``to``: a new TensorDictParams over the moved TensorDict (self if nothing moves)."""
        moved = self._param_td.to(*args, **kwargs)
        return self if moved is self._param_td else TensorDictParams(moved, no_convert=self.no_convert)

    def cpu(self):
        """``to("cpu")``."""
        return self.to("cpu")

    def cuda(self, device=None):
        """``to("cuda")`` (or the given GPU)."""
        return self.to("cuda" if device is None else device)

    def _apply(self, fn, recurse=True):
        """A parent Module's ``to``/``float``/``share_memory``...: Parameters keep their identity (their
        data changes); the new buffers go into the TensorDict in place of the old ones."""
        old = dict(self._buffers)
        super()._apply(fn, recurse)
        moved = {id(old[name]): new for name, new in self._buffers.items() if new is not old[name]}
        if moved:
            _convert_leaves(self._param_td, lambda t: moved.get(id(t), t))
        leaf = next(iter(self._param_td.values(True, True)), None)
        if self._param_td.device is not None and leaf is not None:
            self._param_td._device = leaf.device
        return self

    # ---- state dicts: the flat names ("a.b") the leaves are registered under --------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """The leaves in the TensorDict's key order (as tensordict's ``state_dict(flatten=True)``)."""
        registered = {**self._parameters, **self._buffers}
        for key in self._param_td.keys(True, True):
            name = key if isinstance(key, str) else ".".join(key)
            destination[prefix + name] = registered[name] if keep_vars else registered[name].detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """Copies ``state_dict``'s values into the leaves in place (keys: ``prefix`` + the flat names)."""
        local = {**self._parameters, **self._buffers}
        with no_grad():
            for name, tensor in local.items():
                key = prefix + name
                if key not in state_dict:
                    missing_keys.append(key)
                elif tuple(state_dict[key].shape) != tuple(tensor.shape):
                    error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                      f"{state_dict[key].shape} from checkpoint, the shape in current model is "
                                      f"{tensor.shape}.")
                else:
                    tensor.copy_(state_dict[key])
        if strict:
            unexpected_keys.extend(k for k in state_dict if k.startswith(prefix) and k[len(prefix):] not in local)


TensorDictBase._params_type = TensorDictParams  # what TensorDict.from_module(as_module=True) builds
