"""torch.testing._internal.common_device_type for rlpipe: ``instantiate_device_type_tests`` turns a generic
test class into its ``...CPU`` class (tests named ``test_x_cpu`` / ``test_x_cpu_float32``, the ``device``
and ``dtype`` arguments filled in), the ``@dtypes`` family, ``precisionOverride``/``toleranceOverride``,
and the device skips. Only the CPU class is generated: rlpipe's GPU path is CuPy's, tested by its own
suite. Decorators for devices or features rlpipe lacks skip with the reason."""
import collections
import functools
import inspect
import os
import unittest

from ... import _dtypes
from .common_cuda import tf32_on_and_off, with_tf32_off  # noqa: F401  (torch's tests import them from here)
from .common_utils import TEST_CUDA, TEST_WITH_ROCM, TestCase, _dtype_name  # noqa: F401  (re-exported as torch)

__all__ = ["instantiate_device_type_tests", "dtypes", "dtypesIfCPU", "dtypesIfCUDA", "onlyCPU", "onlyCUDA",
           "onlyNativeDeviceTypes", "skipMeta", "deviceCountAtLeast", "largeTensorTest", "precisionOverride",
           "toleranceOverride", "tol", "get_all_device_types"]


class CPUTestBase(TestCase):
    """The base of the generated ``...CPU`` classes: device type "cpu", one device."""
    device_type = "cpu"

    @classmethod
    def get_primary_device(cls):
        """The device every test gets as ``device``: "cpu"."""
        return "cpu"

    @classmethod
    def get_all_devices(cls):
        """The devices a ``deviceCountAtLeast`` test gets as ``devices``: ["cpu"]."""
        return ["cpu"]


def get_all_device_types():
    """["cpu"], with "cuda" after it when rlpipe sees a GPU."""
    return ["cpu", "cuda"] if TEST_CUDA else ["cpu"]


def _dtype_suffix(dtypes):
    if dtypes is None:
        return ""
    if isinstance(dtypes, (list, tuple)):
        return "_" + "_".join(_dtype_name(d) for d in dtypes) if dtypes else ""
    return "_" + _dtype_name(dtypes)


def _dtype_cases(test, dtypes):
    """The dtype parametrization of ``test``: ``dtype`` (or ``dtypes`` for tuples) per item, no name part
    (the dtype goes after the device in the name)."""
    for d in dtypes:
        yield test, "", ({"dtypes": d} if isinstance(d, (list, tuple)) else {"dtype": d}), []


def _cases(test, device_type):
    from rlpipe.testing._internal.common_utils import _compose, _no_parameters
    cases = getattr(test, "parametrize_fn", _no_parameters)
    table = getattr(test, "dtypes", None)
    if table is None:
        return cases(test)
    if "all" not in table:
        raise AssertionError(f"@dtypes is mandatory when using @dtypesIf however '{test.__name__}' didn't specify it")
    chosen = table.get(device_type, table["all"])
    return _compose(cases, lambda t: _dtype_cases(t, chosen))(test)


def _generated_test(test, kwargs, decorators, name):
    """The test method: applies the case's decorators, sets the dtype's precision override, calls
    ``test(self, **kwargs)``, then restores the class's tolerances."""
    for decorator in decorators:
        test = decorator(test)

    @functools.wraps(test)
    def generated(self):
        saved = self.precision, self.rel_tol
        dtype = kwargs.get("dtypes", kwargs.get("dtype"))
        try:
            if dtype is not None:
                self.precision = getattr(test, "precision_overrides", {}).get(dtype, self.precision)
                self.precision, self.rel_tol = getattr(test, "tolerance_overrides", {}).get(
                    dtype, tol(self.precision, self.rel_tol))
            return test(self, **kwargs)
        finally:
            self.precision, self.rel_tol = saved
    generated.__name__ = generated.__qualname__ = name
    return generated


def _device_kwargs(test, base):
    params = inspect.signature(test).parameters
    if "devices" in params or hasattr(test, "num_required_devices"):
        return {"devices": base.get_all_devices()}
    if "device" in params:
        return {"device": base.get_primary_device()}
    return {}


def instantiate_device_type_tests(generic_test_class, scope, except_for=None, only_for=None, include_lazy=False,
                                  allow_mps=False, allow_xpu=False):
    """Puts ``{Name}CPU`` in ``scope`` in place of ``generic_test_class`` (removed from it): every
    ``test*`` method becomes ``{test}{_params}_cpu{_dtype}`` called with ``device="cpu"`` (or ``devices``)
    and its ``dtype``/parameters; other members are copied. ``only_for``/``except_for`` name device types
    (only "cpu" is generated here)."""
    del include_lazy, allow_mps, allow_xpu  # no lazy, MPS or XPU devices in rlpipe
    scope.pop(generic_test_class.__name__, None)
    wanted = [only_for] if isinstance(only_for, str) else only_for
    unwanted = [except_for] if isinstance(except_for, str) else (except_for or [])
    if (wanted is not None and "cpu" not in wanted) or "cpu" in unwanted:
        return
    # as torch: the CPU class derives from the generic class's bases (not from the generic class), gets its
    # non-test members as they are and one generated method per test case
    empty = type("Empty" + generic_test_class.__name__, generic_test_class.__bases__, {})
    name = generic_test_class.__name__ + "CPU"
    cls = type(name, (CPUTestBase, empty), {"__module__": generic_test_class.__module__, "__qualname__": name})
    for attr, member in vars(generic_test_class).items():
        if attr in vars(empty):
            continue
        if not attr.startswith("test"):
            setattr(cls, attr, member)
            continue
        for test, suffix, kwargs, decorators in _cases(member, "cpu"):
            dtype_suffix = _dtype_suffix(kwargs.get("dtypes", kwargs.get("dtype")))
            test_name = f"{attr}{'_' + suffix if suffix else ''}_cpu{dtype_suffix}"
            if test_name in vars(cls):
                raise AssertionError(f"Redefinition of test {test_name}")
            setattr(cls, test_name, _generated_test(test, {**_device_kwargs(test, CPUTestBase), **kwargs},
                                                    decorators, test_name))
    scope[name] = cls


# ---- @dtypes ------------------------------------------------------------------------------------------------

class dtypes:
    """``@dtypes(torch.float32, torch.float64)``: one test per dtype, given as ``dtype`` and named
    ``..._float32``; tuples of dtypes give ``dtypes`` and names like ``..._float32_int64``.
    ``device_type`` restricts it to one device type (``dtypesIfCPU``/``dtypesIfCUDA``)."""

    def __init__(self, *args, device_type="all"):
        if args and isinstance(args[0], (list, tuple)):
            for arg in args:
                if not isinstance(arg, (list, tuple)) or not all(isinstance(d, _dtypes.dtype) for d in arg):
                    raise TypeError(f"@dtypes: expected every argument to be a list or tuple of dtypes, got {arg!r}")
        elif not all(isinstance(d, _dtypes.dtype) for d in args):
            bad = next(d for d in args if not isinstance(d, _dtypes.dtype))
            raise TypeError(f"@dtypes: expected dtypes, got {bad!r} ({type(bad).__name__})")
        self.args = args
        self.device_type = device_type

    def __call__(self, fn):
        table = dict(getattr(fn, "dtypes", {}))
        if self.device_type in table:
            raise RuntimeError(f"@dtypes for device type {self.device_type!r} given twice on {fn.__name__}")
        table[self.device_type] = self.args
        fn.dtypes = table
        return fn


class dtypesIfCPU(dtypes):
    """``@dtypes`` for the CPU only (a plain ``@dtypes`` is still required)."""

    def __init__(self, *args):
        super().__init__(*args, device_type="cpu")


class dtypesIfCUDA(dtypes):
    """``@dtypes`` for CUDA only; it has no effect on the CPU classes generated here."""

    def __init__(self, *args):
        super().__init__(*args, device_type="cuda")


class dtypesIfXPU(dtypes):
    """``@dtypes`` for XPU only (rlpipe has no XPU device)."""

    def __init__(self, *args):
        super().__init__(*args, device_type="xpu")


class dtypesIfMPS(dtypes):
    """``@dtypes`` for MPS only (rlpipe has no MPS device)."""

    def __init__(self, *args):
        super().__init__(*args, device_type="mps")


# ---- tolerances ---------------------------------------------------------------------------------------------

tol = collections.namedtuple("tol", ["atol", "rtol"])


class precisionOverride:
    """``@precisionOverride({torch.float16: 1e-2})``: the least atol ``assertEqual`` uses in the test
    generated for that dtype."""

    def __init__(self, d):
        if not isinstance(d, dict) or not all(isinstance(k, _dtypes.dtype) for k in d):
            raise TypeError(f"precisionOverride: expected a dict from dtypes to precisions, got {d!r}")
        self.d = d

    def __call__(self, fn):
        fn.precision_overrides = self.d
        return fn


class toleranceOverride:
    """``@toleranceOverride({torch.float32: tol(atol=1e-3, rtol=1e-3)})``: the least atol and rtol
    ``assertEqual`` uses in the test generated for that dtype."""

    def __init__(self, d):
        if not isinstance(d, dict) or not all(isinstance(k, _dtypes.dtype) and isinstance(v, tol)
                                              for k, v in d.items()):
            raise TypeError(f"toleranceOverride: expected a dict from dtypes to tol(atol, rtol), got {d!r}")
        self.d = d

    def __call__(self, fn):
        fn.tolerance_overrides = self.d
        return fn


# ---- device skips -------------------------------------------------------------------------------------------

def _skip_unless_device(device_types, reason):
    """Skips the test when the class's device type is not one of ``device_types``."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            if self.device_type not in device_types:
                raise unittest.SkipTest(reason)
            return fn(self, *args, **kwargs)
        return wrapper
    return decorator


def onlyOn(device_type):
    """Runs the test only on ``device_type`` (a name or a list of names)."""
    types = [device_type] if isinstance(device_type, str) else list(device_type)
    return _skip_unless_device(types, f"Only runs on {device_type}")


def onlyCPU(fn):
    """Runs the test only in the CPU class."""
    return onlyOn("cpu")(fn)


def onlyCUDA(fn):
    """Runs the test only in a CUDA class: skipped here (only CPU classes are generated)."""
    return onlyOn("cuda")(fn)


def onlyMPS(fn):
    """Runs the test only on MPS: skipped (rlpipe has no MPS device)."""
    return onlyOn("mps")(fn)


def onlyXPU(fn):
    """Runs the test only on XPU: skipped (rlpipe has no XPU device)."""
    return onlyOn("xpu")(fn)


def onlyCUDAAndPRIVATEUSE1(fn):
    """Runs the test only on CUDA or an out-of-tree backend: skipped here."""
    return _skip_unless_device(("cuda", "privateuse1"), "onlyCUDAAndPRIVATEUSE1: CUDA only")(fn)


def onlyNativeDeviceTypes(fn):
    """Runs the test on torch's native device types (cpu, cuda, meta): the CPU test runs."""
    return _skip_unless_device(("cpu", "cuda", "meta"), "onlyNativeDeviceTypes: doesn't run on this device")(fn)


def onlyNativeDeviceTypesAnd(devices=None):
    """Runs the test on the native device types (cpu, cuda, meta) and ``devices``."""
    return _skip_unless_device(("cpu", "cuda", "meta", *(devices or [])), "doesn't run on this device")


def skipCPUIf(condition, reason):
    """Skips the CPU test when ``condition`` holds."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            if condition and self.device_type == "cpu":
                raise unittest.SkipTest(reason)
            return fn(self, *args, **kwargs)
        return wrapper
    return decorator


def _not_on_cpu(*args, **kwargs):
    """A skip for another device type, or for a CUDA library: the CPU test runs unchanged."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


# CUDA/cuDNN/MAGMA/ROCm/MPS/XLA/HPU/meta-device skips and expected failures concern other device types
skipCUDAIf = skipMPSIf = skipXLAIf = skipMetaIf = skipCUDAIfNoCudnn = skipCUDAIfRocm = skipCUDAIfNotRocm = _not_on_cpu
skipCUDAIfNoMagma = skipCUDAIfNoCusolver = skipCUDAIfNoMagmaAndNoCusolver = skipCUDAIfCudnnVersionLessThan = _not_on_cpu
skipCUDAIfRocmVersionLessThan = skipCUDAVersionIn = skipCUDAIfNoMagmaAndNoLinalgsolver = _not_on_cpu
skipMeta = skipXLA = skipMPS = skipHPU = skipXPU = skipLazy = skipPRIVATEUSE1 = _not_on_cpu
expectedFailureCUDA = expectedFailureMeta = expectedFailureXLA = expectedFailureMPS = _not_on_cpu
skipCPUIfNoLapack = skipCPUIfNoMkl = skipCUDAIfNoCusparseGeneric = _not_on_cpu
largeTensorTest_cuda = skipCUDAIfLt = _not_on_cpu


def expectedFailureCPU(fn):
    """Marks the CPU test as an expected failure."""
    return unittest.expectedFailure(fn)


def deviceCountAtLeast(num_required_devices):
    """Gives the test ``devices`` (all devices of the type) and skips it with fewer than
    ``num_required_devices`` (rlpipe's CPU is one device)."""
    def decorator(fn):
        if hasattr(fn, "num_required_devices"):
            raise RuntimeError(f"deviceCountAtLeast redefinition for {fn.__name__}")
        fn.num_required_devices = num_required_devices

        @functools.wraps(fn)
        def wrapper(self, devices, *args, **kwargs):
            if len(devices) < num_required_devices:
                raise unittest.SkipTest(f"fewer than {num_required_devices} devices detected")
            return fn(self, devices, *args, **kwargs)
        return wrapper
    return decorator


def _available_memory():
    pages, page_size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return pages * page_size


def _bytes(size):
    """Bytes from a byte count or, as torch accepts, a string of whole gigabytes ("12GB")."""
    if isinstance(size, str):
        if not size.lower().endswith("gb") or not size[:-2].isdigit():
            raise ValueError(f"largeTensorTest: size must be a byte count or whole gigabytes like '12GB', got {size!r}")
        return int(size[:-2]) * 2 ** 30
    return size


def largeTensorTest(size, device=None, inductor=False):
    """Skips the test when less than ``size`` (bytes, or "4GB") of host memory is available (a callable
    ``size`` gets the test's self and arguments). ``device`` and ``inductor`` are accepted as torch's."""
    del device, inductor

    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            needed = _bytes(size(self, *args, **kwargs) if callable(size) else size)
            if _available_memory() < needed:
                raise unittest.SkipTest(f"Insufficient cpu memory: needs {needed} bytes")
            return fn(self, *args, **kwargs)
        return wrapper
    return decorator
