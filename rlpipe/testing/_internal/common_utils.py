"""torch.testing._internal.common_utils for rlpipe: ``TestCase`` (a ``unittest.TestCase`` with torch's
tensor-aware ``assertEqual``, seeded in ``setUp``), ``parametrize``/``subtest``/
``instantiate_parametrized_tests`` naming generated tests as torch does, ``run_tests``, the skip
decorators, ``gradcheck``/``gradgradcheck`` with torch's test defaults, RNG and default-dtype context
managers, and the platform constants as torch defines them for a CPU-only Linux build."""
import contextlib
import functools
import os
import platform
import random
import re
import sys
import tempfile
import unittest
import warnings

import numpy as np

from ... import _dtypes
from ..._device import device as _device_type
from ..._tensor import Tensor
from ...autograd import gradcheck as _gradcheck
from ...autograd import gradgradcheck as _gradgradcheck
from .._creation import make_tensor  # noqa: F401  (torch re-exports it here)
from ._equality import assert_equal

__all__ = ["TestCase", "run_tests", "parametrize", "subtest", "instantiate_parametrized_tests",
           "skipIfTorchDynamo", "skipIfNoLapack", "slowTest", "gradcheck", "gradgradcheck", "freeze_rng_state",
           "set_default_dtype", "set_rng_seed", "make_tensor", "TemporaryFileName", "TemporaryDirectoryName",
           "suppress_warnings"]


def _env_flag(name):
    return os.environ.get(name, "0") not in ("0", "", "false", "False")


# ---- constants: torch's values for a CPU-only Linux build ---------------------------------------------
SEED = 1234
IS_WINDOWS = sys.platform == "win32"
IS_MACOS = sys.platform == "darwin"
IS_LINUX = sys.platform.startswith("linux")
IS_PPC = platform.machine() == "ppc64le"
IS_ARM64 = platform.machine() in ("arm64", "aarch64")
IS_X86 = platform.machine() in ("x86_64", "i386")
IS_FBCODE = IS_SANDCASTLE = IS_REMOTE_GPU = IS_JETSON = IS_S390X = False
TEST_NUMPY = True
TEST_WITH_ROCM = TEST_WITH_MIOPEN_SUGGEST_NHWC = False
TEST_WITH_ASAN = _env_flag("PYTORCH_TEST_WITH_ASAN")
TEST_WITH_TSAN = _env_flag("PYTORCH_TEST_WITH_TSAN")
TEST_WITH_UBSAN = _env_flag("PYTORCH_TEST_WITH_UBSAN")
TEST_WITH_DEV_DBG_ASAN = _env_flag("PYTORCH_TEST_WITH_DEV_DBG_ASAN")
TEST_WITH_SLOW = _env_flag("PYTORCH_TEST_WITH_SLOW")
TEST_SKIP_FAST = _env_flag("PYTORCH_TEST_SKIP_FAST")
TEST_WITH_SLOW_GRADCHECK = _env_flag("PYTORCH_TEST_WITH_SLOW_GRADCHECK")
# rlpipe has no torch.compile, dynamo, inductor, crossref mode, MPS, XPU, HPU or out-of-tree backends
TEST_WITH_TORCHDYNAMO = TEST_WITH_TORCHINDUCTOR = TEST_WITH_AOT_EAGER = TEST_WITH_CROSSREF = False
TEST_MPS = TEST_XPU = TEST_HPU = TEST_PRIVATEUSE1 = TEST_XLA = TEST_CUDA_GRAPH = False
TEST_PRIVATEUSE1_DEVICE_TYPE = "privateuseone"  # torch's name for an out-of-tree backend none is registered under
NO_MULTIPROCESSING_SPAWN = False


def _importable(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True


TEST_SCIPY = _importable("scipy")
TEST_DILL = _importable("dill")
TEST_LIBROSA = _importable("librosa")
TEST_HYPOTHESIS = _importable("hypothesis")


def _cuda_available():
    from rlpipe import cuda
    return cuda.is_available()


TEST_CUDA = _cuda_available()


# NumPy's dtype for each rlpipe dtype NumPy has (bfloat16 has none), and back
torch_to_numpy_dtype_dict = {d: np.dtype(d.name).type for d in (
    _dtypes.bool, _dtypes.uint8, _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64, _dtypes.float16,
    _dtypes.float32, _dtypes.float64)}
numpy_to_torch_dtype_dict = {v: k for k, v in torch_to_numpy_dtype_dict.items()}


# ---- RNG, dtype, files, warnings ------------------------------------------------------------------------

def set_rng_seed(seed=None):
    """Seeds rlpipe's, Python's and NumPy's generators with ``seed`` (``SEED``, 1234, when None)."""
    from rlpipe.random import manual_seed
    seed = SEED if seed is None else seed
    manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


@contextlib.contextmanager
def freeze_rng_state():
    """Restores the state of rlpipe's default generators (the CPU's and every GPU's in use) when the
    block ends."""
    from rlpipe import random as rlpipe_random
    generators = [rlpipe_random.default_generator, *rlpipe_random._cuda_generators.values()]
    states = [g.get_state() for g in generators]
    try:
        yield
    finally:
        for g, state in zip(generators, states):
            g.set_state(state)


@contextlib.contextmanager
def set_default_dtype(dtype):
    """Makes ``dtype`` the default floating dtype inside the block (or the decorated function)."""
    saved = _dtypes.get_default_dtype()
    _dtypes.set_default_dtype(dtype)
    try:
        yield
    finally:
        _dtypes.set_default_dtype(saved)


@contextlib.contextmanager
def TemporaryFileName(*args, **kwargs):
    """Yields the name of a new temporary file, deleted when the block ends (arguments go to
    ``tempfile.NamedTemporaryFile``)."""
    with tempfile.NamedTemporaryFile(*args, **kwargs) as f:
        yield f.name


@contextlib.contextmanager
def TemporaryDirectoryName(suffix=None):
    """Yields the name of a new temporary directory, removed with its files when the block ends."""
    with tempfile.TemporaryDirectory(suffix=suffix) as d:
        yield d


def suppress_warnings(fn):
    """Runs ``fn`` with every warning ignored."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    return wrapper


# ---- gradient checks with torch's test-suite defaults ------------------------------------------------------

def _with_test_defaults(kwargs):
    """torch's tests check batched gradients in fast mode unless told otherwise (slow mode under
    PYTORCH_TEST_WITH_SLOW_GRADCHECK)."""
    defaults = {"check_batched_grad": True, "fast_mode": not TEST_WITH_SLOW_GRADCHECK}
    return {**kwargs, **{k: v for k, v in defaults.items() if kwargs.get(k) is None}}


def gradcheck(fn, inputs, **kwargs):
    """``rlpipe.autograd.gradcheck`` with the test suite's defaults (``check_batched_grad=True``,
    ``fast_mode=True``) for the options not given."""
    return _gradcheck(fn, inputs, **_with_test_defaults(kwargs))


def gradgradcheck(fn, inputs, grad_outputs=None, **kwargs):
    """``rlpipe.autograd.gradgradcheck`` with the test suite's defaults (see ``gradcheck``)."""
    return _gradgradcheck(fn, inputs, grad_outputs, **_with_test_defaults(kwargs))


# ---- skip decorators -------------------------------------------------------------------------------------

def _skip_when(condition, reason):
    """A decorator that makes a test (function or class) raise SkipTest(reason) when ``condition()`` holds
    at run time."""
    def decorator(fn):
        if isinstance(fn, type):
            return unittest.skipIf(condition(), reason)(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if condition():
                raise unittest.SkipTest(reason)
            return fn(*args, **kwargs)
        return wrapper
    return decorator


def _unchanged(*args, **kwargs):
    """A decorator (with or without arguments) that returns the test unchanged: for conditions that never
    hold here (running under dynamo, on ROCm, with ASAN off...)."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def skipIfTorchDynamo(msg="test doesn't currently work with dynamo"):
    """Skips the test when run under TorchDynamo; rlpipe never is, so the test runs."""
    if not isinstance(msg, str):
        raise TypeError(f"skipIfTorchDynamo: msg must be a str (use it as @skipIfTorchDynamo(...)), "
                        f"got {type(msg).__name__}")
    return _skip_when(lambda: TEST_WITH_TORCHDYNAMO, msg)


def skipIfNoLapack(fn):
    """Skips the test without LAPACK; rlpipe's linear algebra has it (NumPy's), so the test runs."""
    return fn


def skipIfNoSciPy(fn):
    """Skips the test when SciPy cannot be imported."""
    return _skip_when(lambda: not TEST_SCIPY, "test require SciPy, but SciPy not found")(fn)


def skipIfRocm(func=None, *, msg="test doesn't currently work on the ROCm stack"):
    """Skips the test on ROCm builds; rlpipe is none, so the test runs."""
    return _unchanged(func) if func is not None else _unchanged


def skipIfMPS(fn):
    """Skips the test on MPS; rlpipe has no MPS device, so the test runs (on the CPU)."""
    return fn


def skipIfCrossRef(fn):
    """Skips the test in crossref mode, which rlpipe does not have: the test runs."""
    return fn


def slowTest(fn):
    """Runs the test only with ``PYTORCH_TEST_WITH_SLOW=1`` in the environment, as torch."""
    wrapper = _skip_when(lambda: not TEST_WITH_SLOW, "test is slow; run with PYTORCH_TEST_WITH_SLOW to enable test")(fn)
    wrapper.__dict__["slow_test"] = True
    return wrapper


def slowTestIf(condition):
    """``slowTest`` when ``condition`` holds, else the test unchanged."""
    return slowTest if condition else _unchanged


def skipIfCompiledWithoutNumpy(fn):
    """Skips the test without NumPy; rlpipe is built on it, so the test runs."""
    return fn


# these mark or skip tests only under dynamo, ROCm, TorchInductor, ASAN or on Windows/macOS/ARM, never
# true for rlpipe on Linux: the tests run unchanged
markDynamoStrictTest = xfailIfTorchDynamo = skipIfTorchInductor = xfailIfTorchInductor = _unchanged
skipRocmIfTorchInductor = skipIfRocmArch = skipIfXpu = skipIfHpu = skipIfWindows = _unchanged
skipIfNNModuleInlined = skipIfLegacyJitExecutor = skipCUDAMemoryLeakCheckIf = _unchanged
skipCUDANonDefaultStreamIf = serialTest = gcIfJetson = _unchanged


def skipIfNoDill(fn):
    """Skips the test when dill cannot be imported."""
    return _skip_when(lambda: not TEST_DILL, "test requires dill")(fn)


def skipIfSlowGradcheckEnv(fn):
    """Skips the test in a slow-gradcheck run (``PYTORCH_TEST_WITH_SLOW_GRADCHECK=1``)."""
    return _skip_when(lambda: TEST_WITH_SLOW_GRADCHECK,
                      "Tests that don't use gradcheck don't need to run on slow_gradcheck CI")(fn)


# ---- parametrization ----------------------------------------------------------------------------------------

class subtest:
    """One explicit case of ``@parametrize``: its argument values, an optional test name and decorators
    applied to that case only."""
    __slots__ = ["arg_values", "name", "decorators"]

    def __init__(self, arg_values, name=None, decorators=None):
        self.arg_values = arg_values
        self.name = name
        self.decorators = list(decorators or [])


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _value_name(index, name, value):
    """torch's default name of one argument value inside a test name."""
    if isinstance(value, _dtypes.dtype):
        return _dtype_name(value)
    if isinstance(value, _device_type):
        return str(value)
    if isinstance(value, (int, float, str)):
        return f"{name}_{str(value).replace('.', '_')}"
    return f"{name}{index}"


class parametrize:
    """``@parametrize("x,y", [(1, 2), (3, 4)], name_fn=None)``: one generated test per values item, named
    ``test_name_x_1_y_2`` (or ``name_fn(*values)``, or a ``subtest``'s name). Stacked decorators multiply,
    the top one's part first in the name. ``instantiate_parametrized_tests`` or
    ``instantiate_device_type_tests`` generates the tests."""

    def __init__(self, arg_str, arg_values, name_fn=None):
        self.arg_names = [s.strip() for s in arg_str.split(",") if s.strip()]
        self.arg_values = arg_values
        self.name_fn = name_fn

    def __call__(self, fn):
        fn.parametrize_fn = _compose(getattr(fn, "parametrize_fn", _no_parameters), self._cases)
        return fn

    def _cases(self, test):
        """(test, name suffix, keyword arguments, decorators) for each values item."""
        seen = False
        for index, values in enumerate(self.arg_values):
            seen = True
            name, decorators = None, []
            if isinstance(values, subtest):
                name, decorators, values = values.name, values.decorators, values.arg_values
            values = list(values) if len(self.arg_names) > 1 else [values]
            if len(values) != len(self.arg_names):
                raise RuntimeError(f"Expected # values == # arg names, but got: {len(values)} values and "
                                   f"{len(self.arg_names)} names for test \"{test.__name__}\"")
            if name is None:
                name = self.name_fn(*values) if self.name_fn else "_".join(
                    _value_name(index, a, v) for a, v in zip(self.arg_names, values))
            yield test, name, dict(zip(self.arg_names, values)), decorators
        if not seen:
            raise ValueError(f"{test}: an empty arg_values was passed to @parametrize (a generator used twice?)")


def _no_parameters(test):
    yield test, "", {}, []


def _compose(inner, outer):
    """Parametrizations of ``inner`` (applied first) times ``outer``: the outer part first in the name."""
    def cases(test):
        for _, inner_name, inner_kwargs, inner_decorators in inner(test):
            for _, outer_name, outer_kwargs, outer_decorators in outer(test):
                repeated = set(inner_kwargs) & set(outer_kwargs)
                if repeated:
                    raise RuntimeError(f"Parametrization over the same parameter by multiple parametrization "
                                       f"decorators is not supported. For test \"{test.__name__}\", the following "
                                       f"parameters are handled multiple times: {repeated}")
                name = "_".join(n for n in (outer_name, inner_name) if n)
                yield test, name, {**inner_kwargs, **outer_kwargs}, inner_decorators + outer_decorators
    return cases


def _bind(test, kwargs, decorators, name):
    """The generated test method: ``test`` called with ``kwargs``, the case's decorators applied."""
    for decorator in decorators:
        test = decorator(test)

    @functools.wraps(test)
    def generated(self):
        return test(self, **kwargs)
    generated.__name__ = generated.__qualname__ = name
    return generated


def instantiate_parametrized_tests(generic_cls):
    """Replaces every ``@parametrize``d test of ``generic_cls`` by its generated tests (usable as a class
    decorator); returns the class."""
    for attr in tuple(dir(generic_cls)):
        test = getattr(generic_cls, attr)
        if not hasattr(test, "parametrize_fn"):
            continue
        delattr(generic_cls, attr)
        for fn, suffix, kwargs, decorators in test.parametrize_fn(test):
            name = f"{fn.__name__}_{suffix}"
            if hasattr(generic_cls, name):
                raise AssertionError(f"Redefinition of test {name}")
            setattr(generic_cls, name, _bind(fn, kwargs, decorators, name))
    return generic_cls


# ---- TestCase -----------------------------------------------------------------------------------------------

class TestCase(unittest.TestCase):
    """torch's test base class: ``assertEqual`` compares tensors, arrays, numbers and nested sequences with
    torch's default tolerances for the dtypes (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7, 1e-7;
    integers and bools exactly; a Python float against a number or one-element tensor as float32), at least
    the ``precision``/``rel_tol`` a ``precisionOverride`` sets; every test starts from seed 1234."""
    precision = 0.0
    rel_tol = 0.0
    longMessage = True

    def setUp(self):
        """Seeds rlpipe, ``random`` and NumPy with ``SEED``, as torch's TestCase does."""
        super().setUp()
        set_rng_seed(SEED)

    def assertEqual(self, x, y, msg=None, *, atol=None, rtol=None, equal_nan=True, exact_dtype=True,
                    exact_device=False, exact_layout=False, exact_stride=False, exact_is_coalesced=False):
        """Asserts ``x`` and ``y`` are equal: tensors (and NumPy arrays, and a sequence against a tensor)
        in shape, dtype (unless ``exact_dtype=False``), device (with ``exact_device=True``) and values
        within ``atol + rtol * |y|``; a number against a number or a one-element tensor; sequences and
        mappings item by item; other objects with ``==``. ``rtol`` and ``atol`` go together. A string
        ``msg`` is added to the generated message. ``exact_layout``/``exact_stride``/``exact_is_coalesced``
        are accepted (rlpipe tensors are dense and row-major)."""
        if isinstance(msg, str) and not msg:
            msg = None
        assert_equal(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan, exact_dtype=exact_dtype,
                     exact_device=exact_device, overrides=(self.rel_tol, self.precision), msg=msg)

    def _rand_shape(self, dim, min_size, max_size):
        """A shape of ``dim`` sizes drawn from ``random.randint(min_size, max_size)``."""
        return tuple(random.randint(min_size, max_size) for _ in range(dim))

    def compare_with_numpy(self, torch_fn, np_fn, tensor_like, device=None, dtype=None, **kwargs):
        """Asserts ``torch_fn(t)`` equals ``np_fn(a)``, ``t`` and ``a`` being ``tensor_like`` as a tensor and
        as a NumPy array (bfloat16 compared through float32); ``kwargs`` go to ``assertEqual``."""
        from rlpipe._creation import from_numpy, tensor
        if isinstance(tensor_like, Tensor):
            if device is not None or dtype is not None:
                raise ValueError("compare_with_numpy: device and dtype apply to a non-tensor input only, "
                                 f"got device={device}, dtype={dtype} with a tensor")
            t = tensor_like
            host = t.detach().cpu()
            a = (host.float() if host.dtype is _dtypes.bfloat16 else host).numpy()
        else:
            a = np.array(tensor_like, dtype=torch_to_numpy_dtype_dict.get(dtype, np.float32) if dtype else None)
            t = tensor(tensor_like, device=device, dtype=dtype)
        expected = np_fn(a)
        actual = torch_fn(t).cpu()
        if isinstance(expected, np.ndarray):
            expected = from_numpy(np.ascontiguousarray(expected))
            if actual.dtype is _dtypes.bfloat16 and expected.dtype is _dtypes.float32:
                actual = actual.float()
        self.assertEqual(expected, actual, **kwargs)

    def assertNotEqual(self, x, y, msg=None, *, atol=None, rtol=None, **kwargs):
        """Asserts that ``assertEqual(x, y, ...)`` fails."""
        try:
            self.assertEqual(x, y, msg, atol=atol, rtol=rtol, **kwargs)
        except AssertionError:
            return
        raise AssertionError(msg or f"{x!r} and {y!r} are equal")

    def assertEqualIgnoreType(self, *args, **kwargs):
        """``assertEqual`` with ``exact_dtype=False``."""
        return self.assertEqual(*args, exact_dtype=False, **kwargs)

    def assertAlmostEqual(self, x, y, *, places=None, msg=None, delta=None):
        """``assertEqual`` with ``atol=10**-places`` (or ``delta``) and ``rtol=0``."""
        prec = 10 ** (-places) if places else delta
        self.assertEqual(x, y, msg=msg, atol=prec, rtol=None if prec is None else 0)

    @contextlib.contextmanager
    def assertWarnsOnceRegex(self, category, regex=""):
        """Asserts the block warns at least once with a warning of exactly ``category`` and one whose
        message matches ``regex`` (every warning is recorded, even ones already shown once)."""
        pattern = re.compile(regex)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        if not caught:
            self.fail("no warning caught")
        self.assertTrue(any(type(w.message) is category for w in caught),
                        f"no {category.__name__} among {[type(w.message).__name__ for w in caught]}")
        self.assertTrue(any(pattern.match(str(w.message)) for w in caught),
                        f"{pattern}, {[w.message for w in caught if type(w.message) is category]}")

    def assertNotWarn(self, callable, msg=""):
        """Asserts that ``callable()`` emits no warning at all."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            callable()
        self.assertTrue(len(caught) == 0, msg or f"unexpected warnings: {[str(w.message) for w in caught]}")


def run_tests(argv=None):
    """Runs the calling module's tests with unittest (``python test_x.py``)."""
    unittest.main(argv=argv or sys.argv)
