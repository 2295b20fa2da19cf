"""``Tensor``: a backend array with autograd attributes.

This file holds the class's state and the methods that are not ops. The ops (``+``, ``sum``,
``reshape`` ...) are defined in ``primitives/``, each next to the ``Function`` it calls, and the
constructor and ``new_*`` methods in ``_creation.py``; ``@tensor_method`` attaches them to the class.
"""
import numpy as np

from . import _dtypes, _memory_format
from ._device import CPU
from ._dtypes import FLOATING_NP


class Tensor:
    """An n-dimensional array on a device that can record the ops applied to it for autograd.

    ``Tensor(data)`` follows PyTorch's legacy constructor: a default-dtype copy of ``data``, or
    ``Tensor(2, 3)`` for an uninitialized 2x3 tensor (``__init__`` is attached by ``_creation.py``,
    which owns tensor creation). Prefer ``rlpipe.tensor``.
    """
    __slots__ = ("_data", "_device", "_requires_grad", "_grad", "grad_fn", "_output_nr", "_vc",
                 "_view_of", "_hooks", "__weakref__", "__dict__")
    __array_priority__ = 1000  # NumPy defers `ndarray + Tensor` to Tensor.__radd__

    # ---- basic attributes ----
    @property
    def shape(self):
        """The size of each dimension, as a ``Size`` (a tuple)."""
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape as a ``Size``, or the length of dimension ``dim`` (negative counts from the end)."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[self._dim(dim)]

    @property
    def dtype(self):
        """The element type (``rlpipe.float32``...)."""
        return _dtypes.from_numpy_dtype(self._data.dtype)

    @property
    def device(self):
        """The device the data lives on (``cpu`` or ``cuda:N``)."""
        return self._device

    @property
    def ndim(self):
        """The number of dimensions."""
        return self._data.ndim

    def dim(self):
        """The number of dimensions (also ``ndimension()``)."""
        return self._data.ndim

    ndimension = dim  # torch's older name for dim()

    def numel(self):
        """The number of elements (also ``nelement()``)."""
        return int(self._data.size)

    nelement = numel

    def element_size(self):
        """Bytes per element."""
        return self._data.dtype.itemsize

    @property
    def itemsize(self):
        """Bytes per element (the property form of ``element_size()``)."""
        return self._data.dtype.itemsize

    @property
    def nbytes(self):
        """Bytes the elements take: ``numel() * element_size()``."""
        return int(self._data.nbytes)

    @property
    def is_cuda(self):
        """True when the tensor lives on a GPU."""
        return self._device.type == "cuda"

    @property
    def is_leaf(self):
        """True when no op recorded this tensor (no ``grad_fn``): backward accumulates into its ``.grad``."""
        return self.grad_fn is None

    def is_floating_point(self):
        """True for float16, bfloat16, float32 and float64 tensors."""
        return self._data.dtype in FLOATING_NP

    def is_complex(self):
        """Always False: rlpipe has no complex dtypes."""
        return False

    def is_contiguous(self, *, memory_format=None):
        """True when the elements are packed without gaps in ``memory_format``'s order: row-major by
        default, NHWC (``channels_last``) or NDHWC (``channels_last_3d``) from the real strides."""
        if memory_format is None or memory_format is _memory_format.contiguous_format:
            return bool(self._data.flags.c_contiguous)
        fmt = _memory_format.check(memory_format, "is_contiguous")
        return _memory_format.is_contiguous_in(self._data.shape, self.stride(), fmt)

    def stride(self, dim=None):
        """The step, in elements, between neighbours along each dim (one dim's when ``dim`` is given),
        as torch reports it: 0 along an expanded dim. A NumPy view may step backwards (negative)
        where torch would have copied."""
        steps = _memory_format.element_strides(self._data)
        if dim is None:
            return steps
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"stride(): argument 'dim' (position 1) must be int, not {type(dim).__name__}")
        if not steps:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        if not -len(steps) <= dim < len(steps):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-len(steps)}, "
                             f"{len(steps) - 1}], but got {dim})")
        return steps[dim]

    def data_ptr(self):
        """The address of the first element (for a view, its own first element, not its base's start)."""
        return _address(self._data, self._device)

    def untyped_storage(self):
        """The memory block this tensor's data lives in (a view reports its base's block)."""
        return UntypedStorage(self._data, self._device)

    @property
    def _version(self):
        return self._vc[0]

    @property
    def _base(self):
        return self._view_of[0] if self._view_of is not None else None

    def _is_view(self):
        return self._view_of is not None

    def _dim(self, dim):
        """A dimension index checked against ndim, negative values counted from the end."""
        n = max(self._data.ndim, 1)
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return int(dim) % n

    # ---- .data: a detached tensor over the same storage (not sharing the version counter) ----
    @property
    def data(self):
        """A tensor sharing this one's memory, detached from the graph; assigning one replaces this tensor's data."""
        out = wrap(self._data, self._device)
        return out

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be set to a Tensor, got {type(value).__name__}")
        self._data, self._device = value._data, value._device

    # ---- autograd ----
    @property
    def requires_grad(self):
        """Whether ops on this tensor are recorded for backward; only float tensors may set it."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    @property
    def grad(self):
        """The gradient accumulated by backward (None until then); an assigned one must match dtype, device and
        shape."""
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(f"assigned grad has data of a different type ({value.dtype} vs {self.dtype})")
            if value._device is not self._device:
                raise RuntimeError(f"assigned grad has data located on a different device ({value.device} vs "
                                   f"{self.device})")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"assigned grad has data of a different size ({list(value.shape)} vs "
                                   f"{list(self.shape)})")
        self._grad = value

    @property
    def retains_grad(self):
        """True after ``retain_grad()`` on a non-leaf tensor."""
        return self.__dict__.get("_retains_grad", False)

    def requires_grad_(self, requires_grad=True):
        """Sets ``requires_grad`` in place and returns the tensor; only a leaf may turn it off."""
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use "
                               "a computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        if requires_grad and self._data.dtype not in FLOATING_NP:
            raise RuntimeError(f"only Tensors of floating point and complex dtype can require gradients "
                               f"(got {self.dtype})")
        self._requires_grad = bool(requires_grad)
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Computes the gradient of this tensor with respect to the graph's leaves, into ``.grad``."""
        from rlpipe.autograd.engine import backward
        backward((self,), None if gradient is None else (gradient,), retain_graph, create_graph, inputs)

    def retain_grad(self):
        """Keeps ``.grad`` for this non-leaf tensor after backward."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self.retains_grad:
            return
        import weakref
        ref = weakref.ref(self)

        def keep(grad):
            t = ref()
            if t is not None:
                t.grad = grad.detach().clone() if t.grad is None else t.grad + grad.detach()
        self._register_node_hook(keep)
        self.__dict__["_retains_grad"] = True

    def register_hook(self, hook):
        """hook(grad) runs when this tensor's gradient is computed; it may return a replacement."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self._register_node_hook(hook)
        from rlpipe.utils.hooks import RemovableHandle
        if self._hooks is None:
            self._hooks = {}
        return RemovableHandle.add(self._hooks, hook)

    def _register_node_hook(self, hook):
        from rlpipe.utils.hooks import RemovableHandle
        node = self.grad_fn
        if node._tensor_hooks is None:
            node._tensor_hooks = {}
        return RemovableHandle.add(node._tensor_hooks.setdefault(self._output_nr, {}), hook)

    def detach(self):
        """The same data (and version counter), cut from the graph."""
        out = wrap(self._data, self._device)
        out._vc = self._vc
        return out

    def detach_(self):
        """Cuts this tensor from the graph in place (not allowed for a view that has a ``grad_fn``)."""
        if self._view_of is not None and self.grad_fn is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self._requires_grad = False
        return self

    # ---- conversion to Python and NumPy ----
    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item() if self._device is CPU else self._data.item()

    def tolist(self):
        """The data as nested Python lists of numbers (copied to the host from a GPU)."""
        return self._host().tolist()

    def numpy(self, *, force=False):
        """The NumPy array behind a CPU tensor (shared memory)."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self._device is not CPU:
            if not force:
                raise TypeError(f"can't convert {self._device} device type tensor to numpy. "
                                "Use Tensor.cpu() to copy the tensor to host memory first.")
            return self._device._backend.to_host(self._data)
        return self._data

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def _host(self):
        return self._data if self._device is CPU else self._device._backend.to_host(self._data)

    def __dlpack__(self, stream=None, **kwargs):
        if self._requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        if stream is None:
            return self._data.__dlpack__(**kwargs)
        return self._data.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __format__(self, spec):
        if self._data.ndim == 0:
            return format(self.item(), spec)
        return format(repr(self), spec)

    __hash__ = object.__hash__

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.")
        if id(self) not in memo:
            copy = wrap(self._data.copy(), self._device)
            copy._requires_grad = self._requires_grad
            if self.grad is not None:
                copy.grad = self.grad.__deepcopy__(memo)
            memo[id(self)] = copy
        return memo[id(self)]

    def share_memory_(self):
        """Moves a CPU tensor's data into shared memory: an anonymous shared mapping, which worker
        processes forked afterwards share (as torch's, it leaves no name in /dev/shm behind); no-op on a GPU."""
        if self._device is CPU and not self.is_shared():
            shared = self._device._backend.anonymous_shared(self._data.shape, self._data.dtype)
            shared[...] = self._data
            self._data = shared
            self.__dict__["_shared_block"] = shared.base  # marks the tensor shared (is_shared)
        return self

    def is_shared(self):
        """True after ``share_memory_()`` on a CPU tensor; always True on a GPU, as in torch."""
        return "_shared_block" in self.__dict__ or self._device is not CPU

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._host(), str(self._device), self._requires_grad))

    def __repr__(self):
        from rlpipe._format import tensor_repr
        return tensor_repr(self)

    def __str__(self):
        return self.__repr__()  # so subclasses (Parameter) print their own way


def _rebuild(array, device, requires_grad):
    from rlpipe._creation import tensor
    return tensor(array, device=device, requires_grad=requires_grad)


def size_repr(shape):
    """A shape as torch prints it: ``torch.Size([2, 3])``, or ``rlpipe.Size([2, 3])`` unless rlpipe
    stands in for torch (see ``_dtypes.shown_module``). Every repr and message that shows a shape uses it."""
    return f"{_dtypes.shown_module()}.Size({list(shape)})"


def _address(array, device):
    """The address of the first element of a NumPy (CPU) or CuPy (GPU) array."""
    return array.__array_interface__["data"][0] if device is CPU else array.data.ptr


class UntypedStorage:
    """The memory block under a tensor, as ``Tensor.untyped_storage()`` gives it: ``data_ptr()`` is
    the block's start address, which views of one tensor share, and ``nbytes()`` its size."""
    __slots__ = ("_root", "device")

    def __init__(self, array, device):
        kind = np.ndarray if isinstance(array, np.ndarray) else type(array)
        while isinstance(array.base, kind):  # walk from a view to the array that owns the block
            array = array.base
        self._root, self.device = array, device

    def data_ptr(self):
        """The start address of the whole memory block."""
        return _address(self._root, self.device)

    def nbytes(self):
        """The block's size in bytes (also ``size()`` and ``len()``)."""
        return int(self._root.nbytes)

    size = nbytes
    __len__ = nbytes

    def element_size(self):
        """Always 1: a storage counts bytes."""
        return 1

    def __repr__(self):
        return f"UntypedStorage(nbytes={self.nbytes()}, device={self.device})"


class Size(tuple):
    """A tensor's shape: a tuple of ints."""

    def __repr__(self):
        return size_repr(self)

    def numel(self):
        """The product of the sizes: the number of elements of a tensor of this shape."""
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        out = tuple.__getitem__(self, item)
        return Size(out) if isinstance(item, slice) else out

    def __add__(self, other):
        # torch.Size + tuple (either side) is a Size: a batch size built by concatenation keeps numel()
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))


def method_decorator(attach):
    """Turns ``attach(fn, names)`` into a decorator used bare (``@deco``: the function's own name) or
    with names (``@deco("abs", "absolute")``)."""
    def decorator(*names):
        if len(names) == 1 and callable(names[0]):
            return attach(names[0], (names[0].__name__,))
        return lambda fn: attach(fn, names)
    decorator.__name__, decorator.__doc__ = attach.__name__, attach.__doc__
    return decorator


@method_decorator
def tensor_method(fn, names):
    """Decorator: makes ``fn``, defined in the module that owns its logic, a Tensor attribute under its
    own name or each of ``names``. The attribute is ``fn`` itself, so a method call costs no more."""
    for name in names:
        setattr(Tensor, name, fn)
    return fn


_new = Tensor.__new__


def host_array(value):
    """A NumPy array of ``value``: a tensor's data (copied off a GPU, without its graph), or
    ``np.asarray`` of anything else."""
    return value.detach()._host() if isinstance(value, Tensor) else np.asarray(value)


def wrap(data, device=CPU):
    """A new leaf Tensor around a backend array (no copy)."""
    t = _new(Tensor)
    t._data = data
    t._device = device
    t._requires_grad = False
    t._grad = None
    t.grad_fn = None
    t._output_nr = 0
    t._vc = [0]
    t._view_of = None
    t._hooks = None
    return t


_STATE = ("_data", "_device", "_requires_grad", "_grad", "grad_fn", "_output_nr", "_vc", "_view_of", "_hooks")


def init_from(t, src):
    """Gives an already-created Tensor (a subclass instance, say) the state of ``src``."""
    for name in _STATE:
        setattr(t, name, getattr(src, name))
    return t
