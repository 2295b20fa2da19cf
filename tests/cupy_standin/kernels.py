"""The stand-in's ``cupy.ElementwiseKernel``: the kernel's own CUDA C source, run on the host.

A call follows CuPy's ``ElementwiseKernel.__call__`` (cupy/_core/_kernel.pyx): the same argument
checks, broadcasting, type rules for the placeholders (``T``, ``X``...) and typed parameters,
output allocation and errors. The kernel source is generated with CuPy's template (typedefs,
preamble, ``extern "C" __global__`` function, ``CUPY_FOR`` loop, ``_raw_x[_ind.get()]`` element
references) and compiled by the host C++ compiler after ``kernel_host.h``, which defines the CUDA
keywords, CuPy's ``CArray``/``CIndexer`` and CUDA's math overloads (and ``float16_host.h``, CuPy's
``float16``, when a float16 type appears). A small generated launcher builds the arguments from
pointers, shapes and strides and calls the kernel through ctypes, under CUDA's flush-to-zero.

Shared objects are cached on disk by a hash of their source and flags (``CUPY_STANDIN_CACHE_DIR``,
else a per-user folder in the temp dir), so a kernel is compiled once per signature.
"""
import ctypes
import hashlib
import os
import re
import string
import subprocess
import tempfile
import threading

import numpy as np

from ._array import _wrap, check_on_current, kernel_scalar, ndarray
from ._device import get_device_id

_HERE = os.path.dirname(os.path.abspath(__file__))
_HEADERS = ("kernel_host.h", "float16_host.h")
_CXX = os.environ.get("CXX", "g++")
_CXX_FLAGS = ("-std=c++17", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-Wno-unknown-pragmas")

# CuPy's C names for the dtypes (cupy/_core/_scalar.pyx); complex kernels are not emulated
_TYPENAMES = {np.dtype(name): c_name for name, c_name in (
    ("float64", "double"), ("float32", "float"), ("float16", "float16"), ("int64", "long long"),
    ("int32", "int"), ("int16", "short"), ("int8", "signed char"), ("uint64", "unsigned long long"),
    ("uint32", "unsigned int"), ("uint16", "unsigned short"), ("uint8", "unsigned char"), ("bool", "bool"))}

# CuPy's kernel template (_get_simple_elementwise_kernel_code), with its typedefs and element references
_KERNEL_TEMPLATE = string.Template('''
    ${type_decls}${typedef_preamble}
    ${preamble}
    extern "C" __global__ void ${name}(${params}) {
      ${loop_prep};
      #pragma unroll 1
      CUPY_FOR(i, _ind.size()) {
        _ind.set(i);
        ${operation};
      }
      ${after_loop};
    }
    ''')

_VALID_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


class CompileException(Exception):
    """The host compiler rejected a kernel's source (CuPy raises its own CompileException there)."""

    def __init__(self, log, source, name):
        super().__init__(log)
        self.source = source
        self.name = name


class ParameterInfo:
    """One parameter of ``in_params``/``out_params``, parsed as CuPy does: ``[raw] type name``."""

    __slots__ = ("name", "dtype", "ctype", "raw", "is_const")

    def __init__(self, param, is_const):
        self.dtype = self.ctype = None
        self.raw = False
        self.is_const = is_const
        words = param.split()
        if len(words) < 2:
            raise Exception("Syntax error: %s" % param)
        type_name, self.name = words[-2:]
        if type_name == "CIndexer":
            pass
        elif len(type_name) == 1:  # a type placeholder: T, X...
            self.ctype = type_name
        else:
            self.dtype = np.dtype(type_name)
            self.ctype = _typename(self.dtype)
        for keyword in words[:-2]:
            if keyword == "raw":
                self.raw = True
            elif keyword == "_non_const":
                self.is_const = False
            else:
                raise Exception('Unknown keyword "%s"' % keyword)

    def __repr__(self):
        return "<ParameterInfo(name=%r dtype=%r ctype=%r raw=%r is_const=%r)>" % (
            self.name, self.dtype, self.ctype, self.raw, self.is_const)


def _parse_params(text, is_const):
    if len(text) == 0:
        return ()
    return tuple(ParameterInfo(param, is_const) for param in text.strip().split(","))


def _typename(dtype):
    try:
        return _TYPENAMES[np.dtype(dtype)]
    except KeyError:
        raise TypeError("the CuPy stand-in runs no kernel on %s data" % np.dtype(dtype)) from None


def _decide_params_type(in_params, out_params, in_dtypes, out_dtypes):
    """CuPy's _decide_params_type_core: the dtype of every parameter and the placeholder typedefs.

    Arrays sharing a placeholder must have one dtype; an array given for a typed parameter must
    have that dtype. Scalars (``None`` here) take the type of their parameter.
    """
    type_dict = {}
    for p, dtype in zip(out_params, out_dtypes):
        _bind(type_dict, p, dtype)
    for p, dtype in zip(in_params, in_dtypes):
        if dtype is not None:
            _bind(type_dict, p, dtype)
    in_types = tuple(type_dict[p.ctype] if p.dtype is None else p.dtype for p in in_params)
    out_types = tuple(type_dict[p.ctype] if p.dtype is None else p.dtype for p in out_params)
    return in_types, out_types, tuple(sorted(type_dict.items()))


def _bind(type_dict, p, dtype):
    """Check ``dtype`` against parameter ``p`` and record the placeholder it decides (CuPy's messages)."""
    if p.dtype is not None:
        if np.dtype(dtype) != p.dtype:
            raise TypeError("Type is mismatched. %s %s %s" % (p.name, dtype, p.dtype))
    elif p.ctype in type_dict:
        bound = type_dict[p.ctype]
        if np.dtype(bound) != np.dtype(dtype):
            raise TypeError("Type is mismatched. %s %s %s %s" % (p.name, dtype, bound, p.ctype))
    else:
        type_dict[p.ctype] = dtype


def _broadcast_shape(arrays):
    try:
        return np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ValueError("operands could not be broadcast together with shapes "
                         + ", ".join(str(a.shape) for a in arrays)) from None


def _scalar_storage(value, dtype):
    """``value`` stored as ``dtype`` the way CuPy's CScalar.apply_dtype packs it (NumPy assignment)."""
    holder = np.empty((), dtype)
    holder[()] = value
    return holder


class ElementwiseKernel:
    """``cupy.ElementwiseKernel``: same constructor, call signature, type rules and errors."""

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True, preamble="",
                 no_return=False, return_tuple=False, **kwargs):
        if not _VALID_NAME.match(name):
            raise ValueError('Invalid kernel name: "%s"' % name)
        unknown = set(kwargs) - {"options", "loop_prep", "after_loop"}
        if unknown:
            raise TypeError("ElementwiseKernel got unexpected keyword arguments %s" % sorted(unknown))
        self.in_params = _parse_params(in_params, True)
        self.out_params = _parse_params(out_params, False)
        self.nin = len(self.in_params)
        self.nout = len(self.out_params)
        self.nargs = self.nin + self.nout
        self.params = self.in_params + self.out_params + _parse_params("CIndexer _ind", False)
        self.operation = operation
        self.name = self.__name__ = name
        self.reduce_dims = reduce_dims
        self.preamble = preamble
        self.no_return = no_return
        self.return_tuple = return_tuple
        self.kwargs = kwargs
        if "i" in [p.name for p in self.in_params + self.out_params]:
            raise ValueError("Can not use 'i' as a parameter name")
        self._launchers = {}  # argument signature -> compiled launcher

    def __call__(self, *args, **kwargs):
        size = kwargs.pop("size", -1)
        kwargs.pop("stream", None)
        block_size = kwargs.pop("block_size", 128)
        if kwargs:
            raise TypeError("Wrong arguments %s" % kwargs)
        if block_size <= 0:
            raise ValueError("block_size must be greater than zero")
        if len(args) not in (self.nin, self.nargs):
            raise TypeError("Wrong number of arguments for {!r}. It must be either {} or {} (with outputs), "
                            "but given {}.".format(self.name, self.nin, self.nargs, len(args)))
        device_id = get_device_id()
        args = [_preprocess(arg, device_id) for arg in args]
        in_args, out_args = args[:self.nin], args[self.nin:]

        arrays = [a for a, p in zip(args, self.params) if isinstance(a, ndarray) and not p.raw]
        if size != -1 and arrays:
            raise ValueError("Specified 'size' can be used only if all of the ndarray are 'raw'.")
        if size == -1 and not arrays:
            raise ValueError("Loop size is undecided.")
        shape = _broadcast_shape(arrays)

        for a in out_args:
            if not isinstance(a, ndarray):
                raise TypeError("Output arguments type must be cupy.ndarray")
        in_types, out_types, type_map = _decide_params_type(
            self.in_params, self.out_params,
            tuple(a.dtype if isinstance(a, ndarray) else None for a in in_args),
            tuple(a.dtype for a in out_args))
        if size != -1:
            shape = (size,)
        out_args = self._outputs(out_args, out_types, shape, size != -1, device_id)

        if self.no_return:
            result = None
        elif not self.return_tuple and self.nout == 1:
            result = out_args[0]
        else:
            result = tuple(out_args)
        if 0 in shape:
            return result

        operands = [a._array if isinstance(a, ndarray) else _Scalar(a, dtype) for a, dtype in zip(in_args, in_types)]
        self._launch(operands + [a._array for a in out_args], shape, type_map)
        return result

    def _outputs(self, out_args, out_types, shape, size_given, device_id):
        """The given outputs checked against ``shape``, or new arrays of ``out_types`` on the device."""
        if not out_args:
            if any(p.raw for p in self.out_params) and not size_given:
                raise ValueError("Output array size is Undecided")
            return [_wrap(np.empty(shape, dtype), device_id) for dtype in out_types]
        for p, a in zip(self.out_params, out_args):
            if not p.raw and a.shape != shape:
                raise ValueError("Out shape is mismatched")
        return out_args

    def _launch(self, operands, shape, type_map):
        """Run the kernel over ``shape`` on NumPy storage and scalars, compiling it on first use."""
        params = self.params[:-1]
        views = [np.broadcast_to(x, shape) if _is_broadcast(x, p, shape) else x for x, p in zip(operands, params)]
        looped = [v for v, p in zip(views, params) if isinstance(v, np.ndarray) and not p.raw]
        if self.reduce_dims and len(shape) > 1 and all(v.flags.c_contiguous for v in looped):
            shape = (int(np.prod(shape)),)  # CuPy's reduce_dims: contiguous arrays run as one dimension
            views = [v.reshape(shape) if any(v is w for w in looped) else v for v in views]
        signature = tuple(_describe(v) for v in views) + (("indexer", len(shape)),)
        launcher = self._launchers.get((signature, type_map))
        if launcher is None:
            launcher = self._launchers[signature, type_map] = _Launcher(self._source(signature, type_map),
                                                                        self.name, signature)
        launcher(views, shape)

    def _source(self, signature, type_map):
        """The kernel's C++ source as CuPy generates it, after the host header, with its launcher."""
        used = {dtype for _, dtype in type_map} | {kind[1] for kind in signature if kind[0] != "indexer"}
        type_decls = '#include "float16_host.h"\n' if np.dtype(np.float16) in used else ""
        declarations, references = [], []
        for p, kind in zip(self.params, signature):
            c_type, name = _c_parameter(p, kind)
            declarations.append(("const " if p.is_const else "") + c_type + " " + name)
            if kind[0] == "array" and not p.raw:
                references.append(("const {t} &{n} = _raw_{n}[_ind.get()];" if p.is_const
                                   else "{t} &{n} = _raw_{n}[_ind.get()];").format(t=p.ctype, n=p.name))
        kernel = _KERNEL_TEMPLATE.substitute(
            type_decls=type_decls,
            typedef_preamble="".join("typedef %s %s;\n" % (_typename(dtype), ctype) for ctype, dtype in type_map),
            preamble=self.preamble, name=self.name, params=", ".join(declarations),
            loop_prep=self.kwargs.get("loop_prep", ""), after_loop=self.kwargs.get("after_loop", ""),
            operation="\n".join(references + [self.operation]))
        return '#include "kernel_host.h"\n' + kernel + _launcher_source(self.params, signature, self.name)


class _Scalar:
    """A scalar kernel argument, stored in its parameter's dtype."""

    __slots__ = ("storage", "dtype")

    def __init__(self, value, dtype):
        self.storage = _scalar_storage(value, dtype)
        self.dtype = self.storage.dtype


def _preprocess(arg, device_id):
    """CuPy's _preprocess_arg: arrays must be on the current device; else a Python/NumPy scalar."""
    if isinstance(arg, ndarray):
        check_on_current(arg, device_id)
        return arg
    return kernel_scalar(arg)  # TypeError for a host array or anything else


def _is_broadcast(operand, p, shape):
    return isinstance(operand, np.ndarray) and not p.raw and operand.shape != shape


def _describe(operand):
    """What the generated source depends on: the kind, dtype, ndim and contiguity of an argument."""
    if isinstance(operand, _Scalar):
        return ("scalar", operand.dtype)
    return ("array", operand.dtype, operand.ndim, bool(operand.flags.c_contiguous))


def _c_parameter(p, kind):
    """The C type and name of parameter ``p`` in the kernel's signature, as CuPy's _ArgInfo writes them."""
    if kind[0] == "indexer":
        return "CIndexer<%d, 1>" % kind[1], p.name
    if kind[0] == "array":
        _, dtype, ndim, c_contiguous = kind
        return "CArray<%s, %d, %d, 1>" % (_typename(dtype), ndim, c_contiguous), p.name if p.raw else "_raw_" + p.name
    return _typename(kind[1]), p.name


def _launcher_source(params, signature, name):
    """A C entry point that builds each kernel argument from pointers and a shape/stride layout."""
    lines = ['extern "C" void standin_launch(void* const* pointers, const long long* layout, int flush) {',
             "    const long long* at = layout;"]
    for k, (p, kind) in enumerate(zip(params, signature)):
        c_type, _ = _c_parameter(p, kind)
        if kind[0] == "indexer":
            lines.append("    %s a%d(at);" % (c_type, k))
        elif kind[0] == "array":
            ndim = kind[2]
            lines.append("    %s a%d(static_cast<%s*>(pointers[%d]), at, at + %d); at += %d;"
                         % (c_type, k, _typename(kind[1]), k, ndim, 2 * ndim))
        else:
            lines.append("    const %s a%d = *static_cast<const %s*>(pointers[%d]);" % (c_type, k, c_type, k))
    lines += ["    standin_flush_denormals flush_denormals(flush != 0);",
              "    %s(%s);" % (name, ", ".join("a%d" % k for k in range(len(signature)))),
              "}", ""]
    return "\n".join(lines)


class _Launcher:
    """One compiled kernel signature: calls it on NumPy views through ctypes."""

    def __init__(self, source, name, signature):
        self._function = _compile(source, name)
        float_types = {kind[1] for kind in signature if kind[0] == "array" and kind[1].kind == "f"}
        # CUDA flushes single-precision denormals only; the host flag would flush doubles too
        self._flush = int(bool(float_types) and np.dtype(np.float64) not in float_types)

    def __call__(self, views, shape):
        pointers = [(v if isinstance(v, np.ndarray) else v.storage).ctypes.data for v in views]
        layout = []
        for v in views:
            if isinstance(v, np.ndarray):
                layout += v.shape
                layout += v.strides
        layout += shape
        self._function((ctypes.c_void_p * len(pointers))(*pointers),
                       (ctypes.c_longlong * len(layout))(*layout), self._flush)


def _cache_dir():
    return os.environ.get("CUPY_STANDIN_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "cupy-standin-kernels-%d" % os.getuid())


def _headers_digest():
    digest = hashlib.sha256(" ".join((_CXX,) + _CXX_FLAGS).encode())
    for header in _HEADERS:
        with open(os.path.join(_HERE, header), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


_HEADERS_DIGEST = _headers_digest()
_compile_lock = threading.Lock()


def _compile(source, name):
    """``source`` built into a shared object (once: cached on disk by its hash); its launch function."""
    key = hashlib.sha256((_HEADERS_DIGEST + source).encode()).hexdigest()[:40]
    cache = _cache_dir()
    library = os.path.join(cache, "%s_%s.so" % (name, key))
    with _compile_lock:
        if not os.path.exists(library):
            os.makedirs(cache, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=cache) as work:
                source_path = os.path.join(work, name + ".cpp")
                with open(source_path, "w") as f:
                    f.write(source)
                built = os.path.join(work, name + ".so")
                command = [_CXX, *_CXX_FLAGS, "-I", _HERE, "-o", built, source_path]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    raise CompileException(done.stderr, source, name)
                os.replace(built, library)  # atomic: other processes see the whole file or none
        function = ctypes.CDLL(library).standin_launch
    function.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong), ctypes.c_int)
    function.restype = None
    return function


def _not_emulated(kind):
    """A kernel class the stand-in does not run: constructing one says so (rlpipe's backend has none)."""

    def refuse(self, *args, **kwargs):
        raise NotImplementedError("the CuPy stand-in runs no %s: rlpipe's CUDA backend launches none" % kind)

    return type(kind, (), {"__init__": refuse, "__doc__": "``cupy.%s``: not emulated." % kind})


ReductionKernel = _not_emulated("ReductionKernel")
RawKernel = _not_emulated("RawKernel")
