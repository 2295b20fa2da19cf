"""``Parameter`` and ``Buffer``: tensors that a Module registers when they are assigned to it."""
from .._creation import empty
from .._tensor import Tensor, init_from


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
