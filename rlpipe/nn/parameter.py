"""``Parameter`` and ``Buffer``: tensors that a Module registers when they are assigned to it."""
from .._creation import empty
from .._tensor import Tensor, init_from
from ..serialization import register_parameter_type


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning it to a Module attribute registers it, and
    ``parameters()`` yields it. It shares memory with ``data`` and requires grad by default."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        param = init_from(Tensor.__new__(cls), data.detach())
        return param.requires_grad_(requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happened in __new__

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        # like torch: a fresh Parameter with the same values, without .grad
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.detach().clone(), self.requires_grad)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


register_parameter_type(Parameter)


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute (``persistent=False``: left
    out of ``state_dict``). The module stores a plain tensor sharing its memory."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        buffer = init_from(Tensor.__new__(cls), data.detach())
        buffer.persistent = persistent
        return buffer

    def __init__(self, data=None, *, persistent=True):
        pass


_UNINITIALIZED_HINT = ("This error happens when you are using a `LazyModule` or explicitly manipulating "
                       "`UninitializedParameter` objects. When using LazyModules, call `forward` with a dummy batch "
                       "to initialize the parameters before using them.")


class UninitializedTensorMixin:
    """A placeholder tensor whose shape is not known yet (lazy modules). It remembers its device and
    dtype (in an empty array); ``materialize(shape)`` gives it data and turns it into ``cls_to_become``.
    Its shape cannot be read and it cannot take part in an op, as in torch."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Allocates uninitialized data of ``shape`` and turns this object into ``cls_to_become``,
        in place: whoever holds it (an optimizer, a module) sees the materialized tensor."""
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        self.data = empty(shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        """Not available before materialization: RuntimeError saying to run ``forward`` first."""
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
            "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
            "`forward` to initialize the parameters before accessing their attributes.")

    def _refuse(self, *args, **kwargs):
        """What size(), dim(), numel(), len(), indexing and arithmetic do on a placeholder: ValueError saying to run
        ``forward`` first."""
        raise ValueError(f"Attempted to use an uninitialized parameter. {_UNINITIALIZED_HINT}")

    size = dim = numel = nelement = __len__ = __getitem__ = __setitem__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __matmul__ = __neg__ = _refuse
    ndim = property(_refuse)

    def copy_(self, src, non_blocking=False):
        """From another placeholder: nothing to copy (as torch, which allows ``copy_`` on placeholders).
        From a tensor: materializes to its shape first, then copies (a target network deep-copied from a
        lazy module gets its values this way)."""
        if is_lazy(src):
            return self
        self.materialize(src.shape)
        return self.copy_(src, non_blocking)

    def detach(self):
        """Another placeholder of the same device and dtype (a state_dict keeps placeholders, as torch's)."""
        return type(self)(requires_grad=False, device=self.device, dtype=self.dtype)

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad, self.device, self.dtype))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is set on a lazy module's first call (``materialize``); it then becomes
    a plain ``Parameter``, keeping its identity."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is set on a lazy module's first call; it then becomes a plain ``Tensor``."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        buffer = init_from(Tensor.__new__(cls), empty(0, device=device, dtype=dtype))
        buffer.persistent = persistent
        return buffer.requires_grad_(requires_grad)

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(param):
    """Whether ``param`` is a placeholder that a lazy module has not materialized yet."""
    return isinstance(param, UninitializedTensorMixin)
