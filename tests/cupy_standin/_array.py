"""The stand-in's ``cupy.ndarray``: NumPy storage that behaves as device memory.

What CuPy does where it differs from NumPy, and this class does too:

- it is not an ``numpy.ndarray``: ``numpy.asarray(x)`` raises TypeError; ``x.get()`` and
  ``cupy.asnumpy(x)`` are the explicit ways to the host;
- ``flags`` has only ``c_contiguous``, ``f_contiguous`` and ``owndata``;
- reductions and scalar indexing give 0-d arrays, never NumPy scalars;
- a NumPy array given to an operator, a ufunc or a function raises TypeError ("Unsupported
  type"), while Python and NumPy scalars are accepted (CuPy's ``_scalar.CScalar`` rule);
- assignment refuses host arrays where CuPy does (gh-2079): ``a[basic] = value`` (ints,
  slices, None, ``...``) fills the view, so a host value must be a scalar (a NumPy array of
  ndim > 0 raises ValueError, a list TypeError); ``a[advanced] = value`` (an integer or
  boolean array or list in the index) copies a host array or list to the device first;
- every array lives on a device (``x.device``); an operation runs on the current device and
  raises ValueError for an array that lives on another one (no peer access between the fake
  devices); views stay on the device of the array they view.

The math is NumPy's, on the stored arrays.
"""
import numpy as np

from ._device import Device, get_device_id

_PYTHON_SCALARS = (int, float, bool, complex)


def _wrap(np_array, device_id):
    """A new stand-in array holding ``np_array`` (any layout, kept as it is) on ``device_id``."""
    out = ndarray.__new__(ndarray)
    out._array = np_array
    out._device_id = device_id
    return out


def unsupported(value):
    return TypeError("Unsupported type %s" % type(value))


def check_on_current(a, device_id):
    """CuPy's peer-access check: ``a`` must live on the device the operation runs on."""
    if a._device_id != device_id:
        raise ValueError(
            "The device where the array resides (%d) is different from the current device (%d). "
            "Peer access is unavailable between these devices." % (a._device_id, device_id))


def kernel_scalar(value):
    """A scalar argument as a kernel or ufunc takes it: Python and NumPy scalars only."""
    if type(value) in _PYTHON_SCALARS or isinstance(value, np.generic):
        return value
    raise unsupported(value)


def unwrap(value, device_id, strict=False):
    """``value`` with stand-in arrays replaced by their storage (checked against ``device_id``).

    Host arrays raise TypeError. ``strict`` (ufunc and kernel operands) accepts nothing but
    arrays and scalars; otherwise lists and tuples (of arrays, shapes, axes) are walked and
    anything else passes through.
    """
    if isinstance(value, ndarray):
        if device_id is not None:
            check_on_current(value, device_id)
        return value._array
    if strict:
        return kernel_scalar(value)
    if isinstance(value, np.ndarray):
        raise unsupported(value)
    if type(value) in (list, tuple):
        return type(value)(unwrap(v, device_id) for v in value)
    return value


def wrap_result(result, device_id, sources=()):
    """NumPy results as stand-in arrays: NumPy scalars become 0-d arrays, as CuPy's do.

    A result that is the storage of one of ``sources`` (an ``out=`` argument, an in-place
    method) comes back as that very array; one that views a source's memory stays on its device.
    """
    if isinstance(result, np.ndarray):
        for source in sources:
            if result is source._array:
                return source
        for source in sources:
            if np.may_share_memory(result, source._array):
                return _wrap(result, source._device_id)
        return _wrap(result, device_id)
    if isinstance(result, np.generic):
        return _wrap(np.asarray(result), device_id)
    if isinstance(result, (list, tuple)):
        items = [wrap_result(r, device_id, sources) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else type(result)(items)
    return result


def arrays_in(values):
    """The stand-in arrays among ``values`` (looking one level into lists and tuples)."""
    found = []
    for value in values:
        if isinstance(value, ndarray):
            found.append(value)
        elif type(value) in (list, tuple):
            found.extend(v for v in value if isinstance(v, ndarray))
    return found


def call_numpy(func, args, kwargs, strict=False, check_device=True):
    """``func(*args, **kwargs)`` on the stored arrays, run on the current device, wrapped back."""
    device_id = get_device_id()
    check = device_id if check_device else None
    np_args = [unwrap(a, check, strict) for a in args]
    np_kwargs = {k: _unwrap_keyword(k, v, check, strict) for k, v in kwargs.items()}
    sources = arrays_in(list(args) + list(kwargs.values()))
    return wrap_result(func(*np_args, **np_kwargs), device_id, sources)


def _unwrap_keyword(name, value, device_id, strict):
    if name == "out" and value is not None:
        outs = value if isinstance(value, tuple) else (value,)
        for out in outs:
            if not isinstance(out, ndarray):
                raise TypeError("Output arguments must be cupy.ndarray, not %s" % type(out))
        return unwrap(value, device_id)
    if name in ("dtype", "casting", "order", "axis", "keepdims", "axes"):
        return value
    return unwrap(value, device_id, strict)


class Flags:
    """CuPy's ``ndarray.flags``: three read-only booleans, nothing about writeability."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, c_contiguous, f_contiguous, owndata):
        self.c_contiguous = c_contiguous
        self.f_contiguous = f_contiguous
        self.owndata = owndata

    def __getitem__(self, name):
        keys = {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous", "OWNDATA": "owndata"}
        if name not in keys:
            raise KeyError("%s is not defined for cupy.ndarray.flags" % name)
        return getattr(self, keys[name])

    def __repr__(self):
        return "\n".join("  %s : %s" % (k.upper(), getattr(self, k)) for k in self.__slots__)


def _binary(ufunc_name):
    def forward(self, other):
        return _ufunc(ufunc_name)(self, other)

    def reflected(self, other):
        return _ufunc(ufunc_name)(other, self)

    def in_place(self, other):
        return _ufunc(ufunc_name)(self, other, out=self)

    return forward, reflected, in_place


def _unary(ufunc_name):
    def method(self):
        return _ufunc(ufunc_name)(self)
    return method


def _ufunc(name):
    """The stand-in's ufunc ``name`` (looked up late: the package defines them)."""
    from . import _ufuncs
    return getattr(_ufuncs, name)


def _namespace():
    import sys
    return sys.modules[__package__]


class ndarray:
    """``cupy.ndarray`` over a NumPy array (``_array``) on a fake device (``device``)."""

    __slots__ = ("_array", "_device_id", "__weakref__")
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is None:
            storage = np.empty(shape, dtype=dtype, order=order)
            device_id = get_device_id()
        else:
            storage = memptr.view_as(shape, dtype, strides)
            device_id = memptr.device_id
        self._array = storage
        self._device_id = device_id

    # ---- host transfer ---------------------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def get(self, stream=None, order="C", out=None, blocking=True):
        """A NumPy copy of the array (into ``out`` when given)."""
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
            if out.shape != self.shape:
                raise ValueError("Shape mismatch. Old shape: %s, new shape: %s" % (out.shape, self.shape))
            out[...] = self._array
            return out
        return np.array(self._array, order=order, copy=True)

    def set(self, arr, stream=None):
        """Copy the NumPy array ``arr`` (same shape and dtype) into this array."""
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if self.dtype != arr.dtype:
            raise TypeError("{} array cannot be set to {} array".format(arr.dtype, self.dtype))
        if self.shape != arr.shape:
            raise ValueError("Shape mismatch. Old shape: {}, new shape: {}".format(self.shape, arr.shape))
        self._array[...] = arr

    def tolist(self):
        return self._array.tolist()

    def item(self, *args):
        return self._array.item(*args)

    def tobytes(self, order="C"):
        return self._array.tobytes(order)

    def __reduce__(self):
        from . import array
        return array, (self.get(),)

    # ---- attributes ---------------------------------------------------------------------

    @property
    def device(self):
        return Device(self._device_id)

    @property
    def flags(self):
        f = self._array.flags
        return Flags(f.c_contiguous, f.f_contiguous, f.owndata)

    shape = property(lambda self: self._array.shape)
    dtype = property(lambda self: self._array.dtype)
    ndim = property(lambda self: self._array.ndim)
    size = property(lambda self: self._array.size)
    itemsize = property(lambda self: self._array.itemsize)
    nbytes = property(lambda self: self._array.nbytes)
    strides = property(lambda self: self._array.strides)

    @shape.setter
    def shape(self, value):
        self._array.shape = value

    @property
    def data(self):
        """A ``cupy.cuda.MemoryPointer`` to the first element (``.ptr``, ``.device_id``)."""
        from .cuda import MemoryPointer
        return MemoryPointer._at(self._array.__array_interface__["data"][0], self._device_id)

    @property
    def __cuda_array_interface__(self):
        """What CuPy publishes for device-array consumers (the address is the host storage's)."""
        interface = self._array.__array_interface__
        return {"shape": interface["shape"], "typestr": interface["typestr"], "data": interface["data"],
                "strides": interface["strides"], "descr": interface["descr"], "version": 3}

    @property
    def base(self):
        return None if self._array.base is None else _wrap(self._array.base, self._device_id)

    @property
    def T(self):
        return _wrap(self._array.T, self._device_id)

    @property
    def mT(self):
        return _wrap(self._array.mT, self._device_id)

    @property
    def real(self):
        return _wrap(self._array.real, self._device_id)

    @property
    def imag(self):
        return _wrap(self._array.imag, self._device_id)

    # ---- Python protocols ---------------------------------------------------------------

    def __len__(self):
        if self._array.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._array)

    def __iter__(self):
        if self._array.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._array)))

    def __bool__(self):
        return bool(self._array)

    def __int__(self):
        return int(self._array)

    def __float__(self):
        return float(self._array)

    def __complex__(self):
        return complex(self._array)

    def __repr__(self):
        return repr(self._array)

    def __str__(self):
        return str(self._array)

    def __format__(self, spec):
        return format(self._array, spec) if self._array.ndim == 0 else format(str(self), spec)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __dlpack_device__(self):
        return (2, self._device_id)  # kDLCUDA

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        raise BufferError("the CuPy stand-in has no DLPack export: its memory is not on a GPU")

    # ---- indexing -------------------------------------------------------------------------

    def __getitem__(self, key):
        key = _index(key)
        return call_numpy(type(self._array).__getitem__, (self, key), {}, check_device=_is_advanced(key))

    def __setitem__(self, key, value):
        # CuPy's _scatter_op: an advanced index copies a host value to the device (cupy.array);
        # a basic one calls fill() with any value that is not a cupy.ndarray
        key = _index(key)
        if not _scatters(key):
            value = value if isinstance(value, ndarray) else _fill_value(value, self.dtype)
        elif isinstance(value, np.ndarray):
            value = _wrap(value, get_device_id())
        call_numpy(type(self._array).__setitem__, (self, key, value), {})

    # ---- the NumPy protocols: dispatch to the stand-in's functions ----------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        mine = getattr(_namespace(), ufunc.__name__, None)
        if mine is None:
            return NotImplemented
        return (mine if method == "__call__" else getattr(mine, method))(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        mine = getattr(_namespace(), func.__name__, None)
        if mine is None or mine is func:
            return NotImplemented
        return mine(*args, **kwargs)

    # ---- methods that leave the device or cross it ----------------------------------------------

    def copy(self, order="C"):
        """A copy on the current device (CuPy copies across devices here)."""
        return _wrap(np.array(self._array, order=order, copy=True), get_device_id())

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        kwargs = {} if casting is None else {"casting": casting}
        return call_numpy(type(self._array).astype, (self, dtype), dict(order=order, copy=True, **kwargs))

    def fill(self, value):
        if isinstance(value, ndarray):
            if value.ndim:
                raise ValueError("non-scalar cupy.ndarray cannot be used for fill")
            value = value._array.astype(self.dtype).item()
        self._array.fill(_fill_value(value, self.dtype))

    def view(self, dtype=None):
        return _wrap(self._array.view() if dtype is None else self._array.view(dtype), self._device_id)


def _index(key):
    """An index as CuPy reads it: NumPy arrays and lists are copied to the device (allowed)."""
    if isinstance(key, tuple):
        return tuple(_index_part(k) for k in key)
    return _index_part(key)


def _index_part(part):
    if isinstance(part, (np.ndarray, list)):
        return _wrap(np.asarray(part), get_device_id())
    return part


def _fill_value(value, dtype):
    """A host value as CuPy's ``fill`` takes it: a scalar, or a 0-d NumPy array (its item)."""
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        return value.astype(dtype).item()
    return kernel_scalar(value)


def _scatters(key):
    """Whether CuPy assigns through ``key`` by scatter (an array index; CuPy turns bools into
    arrays too) rather than by filling a view."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(p, (ndarray, bool, np.bool_)) for p in parts)


def _is_advanced(key):
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(p, ndarray) for p in parts)


def _view_method(name):
    """A method that only makes a view (no kernel): it works from any current device."""
    def method(self, *args, **kwargs):
        return call_numpy(getattr(np.ndarray, name), (self,) + args, kwargs, check_device=False)
    method.__name__ = name
    return method


def _kernel_method(name):
    """A method that launches a kernel: on the current device, with its checks."""
    def method(self, *args, **kwargs):
        return call_numpy(getattr(np.ndarray, name), (self,) + args, kwargs)
    method.__name__ = name
    return method


def writable_diagonal(a, *args, **kwargs):
    """NumPy's diagonal, writable where ``a`` is: CuPy's diagonal is a plain view one can write through, where
    NumPy hands it out read-only."""
    view = np.diagonal(a, *args, **kwargs)
    if a.flags.writeable:
        view.flags.writeable = True
    return view


# reshape, ravel and flatten copy when they must; a copy is a kernel, so they check the device
for _name in ("transpose", "swapaxes", "squeeze"):
    setattr(ndarray, _name, _view_method(_name))
ndarray.diagonal = lambda self, *args, **kwargs: call_numpy(writable_diagonal, (self,) + args, kwargs,
                                                            check_device=False)
for _name in ("all", "any", "argmax", "argmin", "argpartition", "argsort", "choose", "clip", "compress",
              "conj", "conjugate", "cumprod", "cumsum", "dot", "flatten", "max", "mean", "min", "nonzero",
              "partition", "prod", "ptp", "put", "ravel", "repeat", "reshape", "round", "searchsorted",
              "sort", "std", "sum", "take", "trace", "var"):
    if hasattr(np.ndarray, _name):
        setattr(ndarray, _name, _kernel_method(_name))
ndarray.ptp = lambda self, *args, **kwargs: call_numpy(np.ptp, (self,) + args, kwargs)

for _op, _name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "true_divide"),
                   ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "power"),
                   ("matmul", "matmul"), ("and", "bitwise_and"), ("or", "bitwise_or"),
                   ("xor", "bitwise_xor"), ("lshift", "left_shift"), ("rshift", "right_shift")):
    _f, _r, _i = _binary(_name)
    setattr(ndarray, "__%s__" % _op, _f)
    setattr(ndarray, "__r%s__" % _op, _r)
    setattr(ndarray, "__i%s__" % _op, _i)
for _op, _name in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                   ("gt", "greater"), ("ge", "greater_equal")):
    setattr(ndarray, "__%s__" % _op, _binary(_name)[0])
for _op, _name in (("neg", "negative"), ("pos", "positive"), ("abs", "absolute"), ("invert", "invert")):
    setattr(ndarray, "__%s__" % _op, _unary(_name))
del ndarray.__imatmul__  # CuPy has no in-place matmul
ndarray.__divmod__ = lambda self, other: _ufunc("divmod")(self, other)
ndarray.__rdivmod__ = lambda self, other: _ufunc("divmod")(other, self)
