"""rlpipe.testing.make_tensor and rlpipe.testing._internal (torch.testing._internal's helpers for running
PyTorch's own test files). Expected messages and test names were recorded from torch 2.13's
``torch.testing._internal`` (the peer venv) on the same inputs."""
import math
import unittest
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.testing import make_tensor
from rlpipe.testing._internal import common_cuda, common_dtype, common_utils
from rlpipe.testing._internal.common_device_type import (deviceCountAtLeast, dtypes, instantiate_device_type_tests,
                                                         onlyCPU, onlyCUDA, precisionOverride)
from rlpipe.testing._internal.common_nn import NNTestCase
from rlpipe.testing._internal.common_utils import (TestCase, instantiate_parametrized_tests, parametrize, slowTest,
                                                   subtest)

T = rlpipe.tensor


@pytest.fixture
def case():
    return TestCase()


def _message(case, *args, **kwargs):
    with pytest.raises(AssertionError) as info:
        case.assertEqual(*args, **kwargs)
    return str(info.value)


# ---- assertEqual ----------------------------------------------------------------------------------------------

def test_float32_default_tolerances(case):
    case.assertEqual(T([1.0, 2.0]), T([1.0, 2.00001]))  # 1e-5 <= 1e-5 + 1.3e-6 * 2
    message = _message(case, T([1.0, 2.0]), T([1.0, 2.1]))
    assert message.startswith("Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                              "Greatest absolute difference: 0.09999990463256836 at index (1,) (up to 1e-05 allowed)\n"
                              "Greatest relative difference: 0.0476190")
    assert message.endswith(" at index (1,) (up to 1.3e-06 allowed)")


def test_float64_default_tolerances(case):
    f64 = rlpipe.float64
    case.assertEqual(T([1.0, 2.0], dtype=f64), T([1.0, 2.0000002], dtype=f64))  # 2e-7 <= 1e-7 + 1e-7 * 2
    with pytest.raises(AssertionError, match=r"up to 1e-07 allowed"):
        case.assertEqual(T([1.0, 2.0], dtype=f64), T([1.0, 2.000001], dtype=f64))


def test_integers_compare_exactly_and_sequences_become_tensors(case):
    message = _message(case, T([1, 2]), [1, 3])
    assert message.startswith("Tensor-likes are not equal!\n\nMismatched elements: 1 / 2 (50.0%)\n"
                              "Greatest absolute difference: 1 at index (1,)\nGreatest relative difference: 0.333")


def test_exact_dtype(case):
    assert _message(case, T([1.0, 2.0]), T([1.0, 2.0], dtype=rlpipe.float64)) == \
        "The values for attribute 'dtype' do not match: rlpipe.float32 != rlpipe.float64."
    case.assertEqual(T([1.0, 2.0]), T([1.0, 2.0], dtype=rlpipe.float64), exact_dtype=False)
    case.assertEqual(T([1, 2]), T([1.0, 2.0]), exact_dtype=False)
    with pytest.raises(AssertionError, match="dtype"):
        case.assertEqual(T([1, 2]), T([1.0, 2.0]))


def test_shape_mismatch_and_string_msg(case):
    assert _message(case, rlpipe.ones(2), rlpipe.ones(3)) == \
        "The values for attribute 'shape' do not match: rlpipe.Size([2]) != rlpipe.Size([3])."
    assert _message(case, T([1.0, 2.0]), T([1.0, 2.5]), msg="extra").endswith("(up to 1.3e-06 allowed)\nextra")


def test_nested_sequences_name_the_failing_item(case):
    assert _message(case, [1, [2, 3]], [1, [2, 4]]) == (
        "Scalars are not equal!\n\nExpected 4 but got 3.\nAbsolute difference: 1\nRelative difference: 0.25"
        "\n\nThe failure occurred for item [1][1]")
    assert _message(case, {"a": rlpipe.ones(1)}, {"a": rlpipe.zeros(1)}).endswith(
        "\n\nThe failure occurred for item ['a']")
    assert _message(case, [1, 2], [1, 2, 3]) == "The length of the sequences mismatch: 2 != 3"


def test_numbers_against_numbers_and_one_element_tensors(case):
    case.assertEqual(1.0, 1.00001)  # a Python float is compared as float32
    case.assertEqual(1e-6, 0.0)
    case.assertEqual(T(1.0, dtype=rlpipe.float64), 1.0000001)
    case.assertEqual(T(1.0), 1.000001)
    case.assertEqual(True, T(True))
    case.assertEqual(rlpipe.Size([2, 3]), (2, 3))
    with pytest.raises(AssertionError, match="Scalars are not close!"):
        case.assertEqual(T(1.0), 1.1)
    with pytest.raises(ValueError, match="Only single element tensor-likes can be compared against a number. "
                                         "Got 2 elements instead."):
        case.assertEqual(2, T([1, 2]))


def test_nan_none_strings_and_objects(case):
    case.assertEqual(T([math.nan]), T([math.nan]))
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        case.assertEqual(T([math.nan]), T([math.nan]), equal_nan=False)
    assert _message(case, None, 0) == "None mismatch: None is not 0"
    case.assertEqual("ab", "ab")
    assert _message(case, "ab", "ac") == "'ab' != 'ac'"
    case.assertEqual(np.array([1.0, 2.0]), T([1.0, 2.0], dtype=rlpipe.float64))


def test_tolerances_come_in_pairs(case):
    case.assertEqual(T([1.0, 2.0]), T([1.0, 2.1]), atol=0.2, rtol=0)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified or omitted, but got no rtol"):
        case.assertEqual(T([1.0]), T([1.1]), atol=0.2)


def test_assert_not_equal_and_almost_equal(case):
    case.assertNotEqual(T([1.0]), T([1.1]))
    with pytest.raises(AssertionError):
        case.assertNotEqual(T([1.0]), T([1.0]))
    case.assertAlmostEqual(T([1.0]), T([1.004]), places=2)
    with pytest.raises(AssertionError):
        case.assertAlmostEqual(T([1.0]), T([1.02]), places=2)


def test_warning_assertions(case):
    def warn():
        warnings.warn("this is deprecated", FutureWarning, stacklevel=2)

    with case.assertWarnsOnceRegex(FutureWarning, "this is"):
        warn()
        warn()
    with pytest.raises(AssertionError):
        with case.assertWarnsOnceRegex(UserWarning, "this is"):
            warn()
    with pytest.raises(AssertionError, match="no warning caught"):
        with case.assertWarnsOnceRegex(UserWarning, "x"):
            pass
    case.assertNotWarn(lambda: None)
    with pytest.raises(AssertionError, match="quiet please"):
        case.assertNotWarn(warn, "quiet please")


# ---- parametrize and device-type classes (names recorded from torch 2.13) --------------------------------------

def _test_names(cls):
    return sorted(n for n in dir(cls) if n.startswith("test") and callable(getattr(cls, n)))


def test_parametrize_names_tests_as_torch():
    seen = []

    class TestFoo(TestCase):
        @parametrize("x", [1, 2.5, "a"])
        @parametrize("y", [True, None])
        def test_a(self, x, y):
            seen.append((x, y))

        @parametrize("x,y", [(1, 2), subtest((3, 4), name="named")])
        def test_b(self, x, y):
            seen.append((x, y))

        @parametrize("n", [1, 2], name_fn=lambda n: f"n{n}x")
        def test_c(self, n):
            seen.append(n)

        def test_plain(self):
            seen.append("plain")

    instantiate_parametrized_tests(TestFoo)
    assert _test_names(TestFoo) == ["test_a_x_1_y1", "test_a_x_1_y_True", "test_a_x_2_5_y1", "test_a_x_2_5_y_True",
                                    "test_a_x_a_y1", "test_a_x_a_y_True", "test_b_named", "test_b_x_1_y_2",
                                    "test_c_n1x", "test_c_n2x", "test_plain"]
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(TestFoo).run(result)
    assert result.wasSuccessful() and result.testsRun == 11
    assert sorted(map(str, seen)) == sorted(map(str, [(1, True), (1, None), (2.5, True), (2.5, None), ("a", True),
                                                      ("a", None), (1, 2), (3, 4), 1, 2, "plain"]))


def test_parametrize_rejects_mismatched_values():
    class TestBad(TestCase):
        @parametrize("x,y", [(1, 2, 3)])
        def test_a(self, x, y):
            pass

    with pytest.raises(RuntimeError, match='Expected # values == # arg names, but got: 3 values and 2 names'):
        instantiate_parametrized_tests(TestBad)


def test_instantiate_device_type_tests_generates_the_cpu_class():
    calls = []

    class TestDev(TestCase):
        @dtypes(rlpipe.float32, rlpipe.int64)
        def test_d(self, device, dtype):
            calls.append(("d", device, dtype))

        @dtypes((rlpipe.float32, rlpipe.int64))
        def test_e(self, device, dtypes):
            calls.append(("e", device, dtypes))

        @parametrize("k", [3])
        @dtypes(rlpipe.float64)
        def test_f(self, device, dtype, k):
            calls.append(("f", device, dtype, k))

        @parametrize("dtype", [rlpipe.float16])
        def test_g(self, device, dtype):
            calls.append(("g", device, dtype))

        def test_h(self, device):
            calls.append(("h", device, self.helper()))

        def helper(self):
            return 1

    scope = {"TestDev": TestDev}
    instantiate_device_type_tests(TestDev, scope)
    assert list(scope) == ["TestDevCPU"]
    cls = scope["TestDevCPU"]
    assert _test_names(cls) == ["test_d_cpu_float32", "test_d_cpu_int64", "test_e_cpu_float32_int64",
                                "test_f_k_3_cpu_float64", "test_g_float16_cpu_float16", "test_h_cpu"]
    assert cls.device_type == "cpu"
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(cls).run(result)
    assert result.wasSuccessful() and result.testsRun == 6
    f32, f64, i64 = rlpipe.float32, rlpipe.float64, rlpipe.int64
    expected = [("d", "cpu", f32), ("d", "cpu", i64), ("e", "cpu", (f32, i64)), ("f", "cpu", f64, 3),
                ("g", "cpu", rlpipe.float16), ("h", "cpu", 1)]
    assert sorted(calls, key=str) == sorted(expected, key=str)


def test_device_skips_and_precision_override():
    class TestDev(TestCase):
        @onlyCUDA
        def test_cuda(self, device):
            raise AssertionError("must not run")

        @onlyCPU
        def test_cpu(self, device):
            self.assertEqual(device, "cpu")

        @deviceCountAtLeast(2)
        def test_two(self, devices):
            raise AssertionError("must not run")

        @precisionOverride({rlpipe.float32: 0.5})
        @dtypes(rlpipe.float32, rlpipe.float64)
        def test_loose(self, device, dtype):
            self.assertEqual(T([1.0], dtype=dtype), T([1.4], dtype=dtype))

        @slowTest
        def test_slow(self, device):
            raise AssertionError("must not run without PYTORCH_TEST_WITH_SLOW")

    scope = {}
    instantiate_device_type_tests(TestDev, scope)
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(scope["TestDevCPU"]).run(result)
    skipped = {test.id().rsplit(".", 1)[-1]: reason for test, reason in result.skipped}
    assert skipped == {"test_cuda_cpu": "Only runs on cuda", "test_two_cpu": "fewer than 2 devices detected",
                       "test_slow_cpu": "test is slow; run with PYTORCH_TEST_WITH_SLOW to enable test"}
    assert [t.id().rsplit(".", 1)[-1] for t, _ in result.failures] == ["test_loose_cpu_float64"]
    assert result.testsRun == 6 and not result.errors


def test_instantiate_only_for_another_device_generates_nothing():
    class TestDev(TestCase):
        def test_a(self, device):
            pass

    scope = {"TestDev": TestDev}
    instantiate_device_type_tests(TestDev, scope, only_for="cuda")
    assert scope == {}


def test_dtypes_rejects_non_dtypes():
    with pytest.raises(TypeError, match=r"@dtypes: expected dtypes, got 'float32' \(str\)"):
        dtypes("float32")


# ---- make_tensor --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, low, high", [(rlpipe.uint8, 0, 9), (rlpipe.int8, -9, 9), (rlpipe.int64, -9, 9),
                                              (rlpipe.bool, False, True)])
def test_make_tensor_integer_ranges(dtype, low, high):
    t = make_tensor(2000, dtype=dtype, device="cpu")
    values = t.numpy()
    assert t.dtype is dtype and t.shape == (2000,)
    assert values.min() == low and values.max() == high  # the default range [low, high + 1), every value drawn


def test_make_tensor_floats_and_clamping():
    t = make_tensor((50, 40), dtype=rlpipe.float64, device="cpu")
    assert t.shape == (50, 40) and -9 <= t.min().item() and t.max().item() < 9 and t.std().item() > 4
    t = make_tensor(3, 4, dtype=rlpipe.float32, device="cpu", low=2, high=2.5, requires_grad=True)
    assert t.requires_grad and 2 <= t.min().item() and t.max().item() < 2.5
    wide = make_tensor(2000, dtype=rlpipe.uint8, device="cpu", low=-100, high=1000)  # clamped to [0, 256)
    assert wide.numpy().min() == 0 and wide.numpy().max() == 255
    half = make_tensor(1000, dtype=rlpipe.float16, device="cpu", low=-1e6, high=1e6)  # clamped to float16's range
    assert np.isfinite(half.numpy()).all() and abs(half.numpy()).max() > 1e4


def test_make_tensor_noncontiguous_and_exclude_zero():
    t = make_tensor((3, 4), dtype=rlpipe.float32, device="cpu", noncontiguous=True)
    assert t.shape == (3, 4) and not t.is_contiguous()
    assert make_tensor((1,), dtype=rlpipe.float32, device="cpu", noncontiguous=True).is_contiguous()
    ones = make_tensor(10, dtype=rlpipe.int64, device="cpu", low=0, high=1, exclude_zero=True)
    assert ones.tolist() == [1] * 10
    assert make_tensor(10, dtype=rlpipe.bool, device="cpu", low=0, high=1, exclude_zero=True).all()
    tiny = make_tensor(200, dtype=rlpipe.float32, device="cpu", low=0, high=1e-45, exclude_zero=True).numpy()
    assert (tiny != 0).all() and (tiny == np.finfo(np.float32).tiny).any()  # zeros became float32's tiny


def test_make_tensor_bad_arguments():
    with pytest.raises(ValueError, match="`low` must be less than `high`, but got 5 >= 1"):
        make_tensor(3, dtype=rlpipe.float32, device="cpu", low=5, high=1)
    with pytest.raises(ValueError, match="`low` and `high` cannot be NaN"):
        make_tensor(3, dtype=rlpipe.float32, device="cpu", low=math.nan)
    with pytest.raises(ValueError, match=r"is \[-5, -1\), but rlpipe.uint8 only supports \[0, 256\)"):
        make_tensor(3, dtype=rlpipe.uint8, device="cpu", low=-5, high=-1)
    with pytest.raises(ValueError, match="`requires_grad=True` is not supported for boolean and integral dtypes"):
        make_tensor(3, dtype=rlpipe.int64, device="cpu", requires_grad=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        make_tensor(3, dtype=rlpipe.float32, device="cpu", noncontiguous=True, memory_format="channels_last")
    with pytest.warns(FutureWarning, match="low==high"):
        make_tensor(3, dtype=rlpipe.float32, device="cpu", low=1.0, high=1.0)


# ---- dtypes lists, constants, context managers, gradcheck, NNTestCase ------------------------------------------

def test_dtype_lists():
    f32, f64 = rlpipe.float32, rlpipe.float64
    assert common_dtype.floating_types() == (f32, f64)
    assert common_dtype.all_types_and(rlpipe.float16, rlpipe.bool) == (
        f32, f64, rlpipe.uint8, rlpipe.int8, rlpipe.int16, rlpipe.int32, rlpipe.int64, rlpipe.float16, rlpipe.bool)
    assert common_dtype.floating_and_complex_types_and(rlpipe.bfloat16) == (f32, f64, rlpipe.bfloat16)
    assert common_dtype.complex_types() == ()
    assert common_dtype.get_all_fp_dtypes(include_bfloat16=False) == [f32, f64, rlpipe.float16]
    with pytest.raises(TypeError, match="expected every dtype to be an rlpipe dtype, got 'float' \\(str\\)"):
        common_dtype.floating_types_and("float")


def test_constants_for_a_cpu_linux_build():
    assert not (common_utils.TEST_WITH_ROCM or common_utils.TEST_WITH_TORCHDYNAMO or common_utils.IS_WINDOWS
                or common_utils.IS_MACOS)
    assert common_utils.IS_LINUX and common_utils.TEST_NUMPY and common_utils.SEED == 1234
    assert common_cuda.TEST_CUDA == rlpipe.cuda.is_available() and not common_cuda.TEST_CUDNN


def test_set_default_dtype_and_freeze_rng_state():
    with common_utils.set_default_dtype(rlpipe.float64):
        assert rlpipe.ones(1).dtype is rlpipe.float64
    assert rlpipe.ones(1).dtype is rlpipe.float32
    with common_utils.freeze_rng_state():
        first = rlpipe.randn(3)
    assert rlpipe.randn(3).tolist() == first.tolist()
    case = TestCase()
    case.setUp()
    seeded = rlpipe.randn(2).tolist()
    rlpipe.manual_seed(1234)
    assert rlpipe.randn(2).tolist() == seeded


def test_gradcheck_with_test_defaults():
    x = rlpipe.randn(3, dtype=rlpipe.float64, requires_grad=True)
    assert common_utils.gradcheck(lambda t: (t * t).sin(), (x,))
    assert common_utils.gradgradcheck(lambda t: (t * t).sin(), (x,))


def test_nn_test_case_forward_backward():
    case = NNTestCase()
    module = rlpipe.nn.Linear(3, 2).double()
    x = rlpipe.randn(4, 3, dtype=rlpipe.float64, requires_grad=True)
    out = case._forward(module, x)
    grad_in = case._backward(module, x, out, rlpipe.ones(4, 2, dtype=rlpipe.float64))
    case.assertEqual(grad_in, module.weight.sum(0).expand(4, 3))
    params, grads = case._get_parameters(module)
    case.assertEqual(grads[1], T([4.0, 4.0], dtype=rlpipe.float64))
    case._zero_grad_parameters(module)
    case.assertEqual(module.bias.grad, T([0.0, 0.0], dtype=rlpipe.float64))
    case.check_jacobian(module, x)


def test_compare_with_numpy_and_dtype_maps(case):
    x = T([[1.0, -2.0], [3.0, 4.0]])
    case.compare_with_numpy(lambda t: t.abs().sum(0), lambda a: np.abs(a).sum(0), x)
    case.compare_with_numpy(lambda t: t * 2, lambda a: a * 2, [1, 2], dtype=rlpipe.int64)
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        case.compare_with_numpy(lambda t: t + 1, lambda a: a, x)
    with pytest.raises(ValueError, match="device and dtype apply to a non-tensor input only"):
        case.compare_with_numpy(lambda t: t, lambda a: a, x, dtype=rlpipe.float32)
    assert common_utils.torch_to_numpy_dtype_dict[rlpipe.float32] is np.float32
    assert common_utils.numpy_to_torch_dtype_dict[np.int16] is rlpipe.int16
    assert len(case._rand_shape(3, 2, 4)) == 3


def test_common_nn_module_helpers(case):
    from rlpipe.testing._internal.common_nn import _test_bfloat16_ops, _test_module_empty_input
    _test_bfloat16_ops(case, rlpipe.nn.ReLU(), "cpu", inp_dims=(2, 3))
    _test_module_empty_input(case, rlpipe.nn.ReLU(), rlpipe.randn(0, 3))

    class Twice(rlpipe.nn.Module):
        """Doubles its input in float32; in bfloat16 it adds 1 as well (a wrong low-precision path)."""
        low = False

        def bfloat16(self):
            self.low = True
            return self

        def forward(self, x):
            return x * 2 + 1 if self.low else x * 2

    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        _test_bfloat16_ops(case, Twice(), "cpu", inp_dims=(4,))


_TORCH_STYLE_FILE = '''
import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, onlyCUDA
from torch.testing._internal.common_utils import TestCase, parametrize, run_tests


@torch.testing._internal.common_utils.markDynamoStrictTest
class TestAdd(TestCase):
    @parametrize("n", [1, 3])
    @dtypes(torch.float32, torch.int64)
    def test_add(self, device, dtype, n):
        x = make_tensor(n, dtype=dtype, device=device)
        self.assertEqual(x + x, 2 * x)

    @onlyCUDA
    def test_cuda_only(self, device):
        raise AssertionError("a CPU run must skip this")


instantiate_device_type_tests(TestAdd, globals())

if __name__ == "__main__":
    run_tests()
'''


def test_a_pytorch_style_test_file_runs_through_the_peer_shim(tmp_path):
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[1]
    script = tmp_path / "test_torch_style.py"
    script.write_text("import peer_shim  # noqa\n" + _TORCH_STYLE_FILE)
    env = {"PYTHONPATH": f"{root / 'tools'}:{root}", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, str(script), "-v"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    results = {line.split(" ")[0]: line.rpartition(" ... ")[2] for line in run.stderr.splitlines() if " ... " in line}
    assert results == {"test_add_n_1_cpu_float32": "ok", "test_add_n_1_cpu_int64": "ok",
                       "test_add_n_3_cpu_float32": "ok", "test_add_n_3_cpu_int64": "ok",
                       "test_cuda_only_cpu": "skipped 'Only runs on cuda'"}
    assert "Ran 5 tests" in run.stderr and "OK (skipped=1)" in run.stderr


def test_decorators_reject_bad_arguments():
    from rlpipe.testing._internal.common_device_type import largeTensorTest, toleranceOverride
    with pytest.raises(TypeError, match="skipIfTorchDynamo: msg must be a str .* got function"):
        common_utils.skipIfTorchDynamo(lambda self: None)
    with pytest.raises(TypeError, match="precisionOverride: expected a dict from dtypes to precisions, got"):
        precisionOverride([rlpipe.float32])
    with pytest.raises(TypeError, match=r"toleranceOverride: expected a dict from dtypes to tol\(atol, rtol\)"):
        toleranceOverride({rlpipe.float32: 1e-3})
    with pytest.raises(TypeError, match="expected a tuple of dtypes to add, got list"):
        common_dtype.floating_types() + [rlpipe.float16]

    def test_x(self, device, dtype):
        pass
    dtypes(rlpipe.float32)(test_x)
    with pytest.raises(RuntimeError, match="@dtypes for device type 'all' given twice on test_x"):
        dtypes(rlpipe.float64)(test_x)
    with pytest.raises(RuntimeError, match="deviceCountAtLeast redefinition for test_y"):
        def test_y(self, devices):
            pass
        deviceCountAtLeast(2)(deviceCountAtLeast(2)(test_y))

    class TestEmpty(TestCase):
        @parametrize("x", iter([]))
        def test_a(self, x):
            pass

    with pytest.raises(ValueError, match="an empty arg_values was passed to @parametrize"):
        instantiate_parametrized_tests(TestEmpty)

    class TestHuge(TestCase):
        @largeTensorTest("100000000GB")
        def test_a(self):
            raise AssertionError("must not run")

        @largeTensorTest("4TB")
        def test_b(self):
            pass

    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(TestHuge).run(result)
    assert [reason for _, reason in result.skipped] == ["Insufficient cpu memory: needs 107374182400000000 bytes"]
    assert "largeTensorTest: size must be a byte count or whole gigabytes like '12GB', got '4TB'" in result.errors[0][1]


def test_skip_if_torch_dynamo_runs_the_test():
    ran = []

    class TestRuns(TestCase):
        @common_utils.skipIfTorchDynamo("not under dynamo")
        def test_a(self):
            ran.append(True)

    unittest.defaultTestLoader.loadTestsFromTestCase(TestRuns).run(unittest.TestResult())
    assert ran == [True]


def test_create_basic_net_shares_the_net_in_its_sequential():
    from rlpipe.testing._internal.common_nn import _create_basic_net
    layer, net, seq = _create_basic_net()
    assert [name for name, _ in layer.named_parameters()] == ["layer_dummy_param"]
    assert [name for name, _ in net.named_buffers()] == ["dummy_buf", "l1.layer_dummy_buf"]
    assert seq[0] is seq[1] is net and len(list(seq.parameters())) == 2
    assert [name for name, _ in seq.named_modules()] == ["", "0", "0.l1"]
