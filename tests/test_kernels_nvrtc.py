"""Every CUDA kernel of rlpipe compiles with NVRTC for each dtype and each supported GPU architecture: the
cuda backend's own (``erf``) and every source of every kernel in the ``rlpipe.kernels`` registry, so a
kernel registered there is compiled here without further ado.

No GPU is needed: CuPy generates a kernel's CUDA source from its parameters, operation and preamble
in plain Python, and NVRTC is a library. The source is the one CuPy builds when the kernel is
launched on contiguous arrays (its own code generator is called), and the options are the ones CuPy
compiles it with (its include paths and language standard, ``-ftz=true``, ``-arch=sm_XX``).

This needs the real CuPy (not the test stand-in) and NVRTC with the CUDA headers:
``pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12``; without them the
module is skipped, and so it is under ``RLPIPE_CUPY_STANDIN=1``, whose stand-in hides a real CuPy.
"""
import sys

import numpy as np
import pytest


def skip_reason(error):
    """Why the module cannot run, as the case is: the session's CuPy stand-in hides the real CuPy, or
    CuPy or NVRTC is missing (``error``, what the import raised)."""
    if getattr(sys.modules.get("cupy"), "__name__", None) == "cupy_standin":
        return ("NVRTC check skipped: the CuPy stand-in (RLPIPE_CUPY_STANDIN=1) replaces CuPy in this test "
                "session; run this module without RLPIPE_CUPY_STANDIN to compile with the real CuPy and NVRTC")
    return ("NVRTC check needs the real CuPy and NVRTC (pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12 "
            f"nvidia-cuda-runtime-cu12): {error!r}")


try:
    import cupy
    from cupy._core import _carray, _kernel, _scalar
    from cupy._core import core as cupy_core
    from cupy.cuda import nvrtc
    NVRTC_VERSION = nvrtc.getVersion()  # loads libnvrtc: fails here when it is missing
except (ImportError, AttributeError, RuntimeError, OSError) as error:
    pytest.skip(skip_reason(error), allow_module_level=True)

from rlpipe import kernels  # noqa: E402
from rlpipe.backends import cuda  # noqa: E402  (after the skip: it imports cupy)

ARCHS = ("75", "80", "90")
DTYPES = (np.float16, np.float32, np.float64)

# CuPy's _ArgKind values (a cdef enum, so not importable): what kind of kernel argument an _ArgInfo describes
_NDARRAY, _INDEXER, _SCALAR = 1, 2, 3


def launch_source(kernel, dtype):
    """The CUDA source CuPy generates when ``kernel`` is launched on contiguous arrays of ``dtype``.

    Parameters typed by a placeholder (``T x``) get such arrays, typed parameters (``float64 lr``,
    ``bool maximize``) get scalars, and ``raw`` ones arrays of their own type, as rlpipe passes them.
    Contiguous arrays of any shape reach the kernel as one dimension (CuPy's reduce_dims) with 32-bit
    indexing; ``raw`` arrays keep their shape, two dimensions in rlpipe's kernels ([rows, steps]).
    """
    dtype = np.dtype(dtype)

    def dtype_of(p):
        return dtype if p.dtype is None else np.dtype(p.dtype)

    in_dtypes = tuple(dtype_of(p) if p.raw or p.dtype is None else None for p in kernel.in_params)
    out_dtypes = tuple(dtype_of(p) for p in kernel.out_params)
    _, _, type_map = _kernel._decide_params_type(kernel.in_params, kernel.out_params, in_dtypes, out_dtypes)
    arginfos = tuple(
        _kernel._ArgInfo(_NDARRAY, cupy.ndarray, dtype_of(p), 2, True, True) if p.raw
        else _kernel._ArgInfo(_NDARRAY, cupy.ndarray, dtype_of(p), 1, True, True) if p.dtype is None or output
        else _kernel._ArgInfo(_SCALAR, _scalar.CScalar, p.dtype, 0, True, True)
        for params, output in ((kernel.in_params, False), (kernel.out_params, True)) for p in params)
    arginfos += (_kernel._ArgInfo(_INDEXER, _carray.Indexer, None, 1, True, True),)
    code = _kernel._get_elementwise_kernel_code(arginfos, type_map, kernel.params, kernel.operation,
                                                kernel.name, kernel.preamble, **kernel.kwargs)
    # compile_with_cache puts CuPy's headers first
    return "".join("#include <%s>\n" % header for header in cupy_core._cupy_header_list) + code


def compile_options(kernel, arch):
    """The NVRTC options CuPy compiles ``kernel`` with for GPU architecture ``sm_<arch>``."""
    options = cupy_core.assemble_cupy_compiler_options(tuple(kernel.kwargs.get("options", ())))
    return options + ("-ftz=true", f"-arch=sm_{arch}", "--device-as-default-execution-space")


def nvrtc_compile(source, options):
    """Compile ``source`` to a cubin; AssertionError with NVRTC's log when it does not compile."""
    program = nvrtc.createProgram(source, "kern.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, options)
        except nvrtc.NVRTCError:
            raise AssertionError(nvrtc.getProgramLog(program)) from None
        return nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)


KERNELS = cuda.all_kernels() + kernels.cuda_kernels(cuda)


def test_every_kernel_is_listed():
    names = [kernel.name for kernel in KERNELS]
    assert len(names) == len(set(names)), names
    sources = [source for kernel in kernels.KERNELS.values() for source in kernel.sources]
    assert len(KERNELS) == len(cuda.all_kernels()) + len(sources)
    assert {"rlpipe_erf"} | {"rlpipe_" + source.name for source in sources} == set(names)
    for name in ("rlpipe_relu_backward", "rlpipe_gelu_tanh_backward", "rlpipe_sgd_momentum", "rlpipe_adam_amsgrad",
                 "rlpipe_rmsprop_centered_momentum", "rlpipe_adagrad"):
        assert name in names


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda kernel: kernel.name)
def test_kernel_compiles(kernel, dtype):
    source = launch_source(kernel, dtype)
    for arch in ARCHS:
        cubin = nvrtc_compile(source, compile_options(kernel, arch))
        assert cubin, f"{kernel.name} ({np.dtype(dtype).name}, sm_{arch}): empty cubin"
