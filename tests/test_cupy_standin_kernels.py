"""The CuPy stand-in's ElementwiseKernel against NumPy: kernels shaped like rlpipe's (an activation,
float16 storage, an in-place multi-output optimizer step, a raw input read at neighbours), CuPy's
float16 rounding, CUDA's flush-to-zero, and CuPy's type rules and errors."""
import os
import platform

import numpy as np
import pytest

from cupy_standin._array import _wrap
from cupy_standin._device import Device
from cupy_standin.kernels import CompileException, ElementwiseKernel


def dev(values, dtype=None, device=0):
    return _wrap(np.array(values, dtype=dtype), device)


def host(array):
    return array._array


PREAMBLE = r"""
template <typename U> struct acc { typedef float type; };
template <> struct acc<double> { typedef double type; };
template <typename U> __device__ U stable_sigmoid(const U v) {
    const U e = exp(-fabs(v));
    return v >= U(0) ? U(1) / (U(1) + e) : e / (U(1) + e);
}
"""
ACC = "typedef acc<T>::type acc_t;\n"

SOFTPLUS = ElementwiseKernel(
    "T x, float64 beta", "T y",
    ACC + "const acc_t bv = (acc_t)x * (acc_t)beta;\n"
          "y = (T)(((bv > acc_t(0) ? bv : acc_t(0)) + log1p(exp(-fabs(bv)))) / (acc_t)beta);",
    "softplus", preamble=PREAMBLE)

GELU = ElementwiseKernel(
    "T x", "T y",
    ACC + "const acc_t v = (acc_t)x;\ny = (T)(acc_t(0.5) * v * (acc_t(1) + erf(v * acc_t(0.7071067811865476))));",
    "gelu", preamble=PREAMBLE)

MOMENTUM_STEP = ElementwiseKernel(
    "T grad, float64 lr, float64 momentum, bool nesterov", "T param, T buf",
    ACC + "const acc_t g = (acc_t)grad;\n"
          "const acc_t b = (acc_t)momentum * (acc_t)buf + g;\n"
          "buf = (T)b;\n"
          "param = (T)((acc_t)param - (acc_t)lr * (nesterov ? g + (acc_t)momentum * b : b));",
    "momentum_step", preamble=PREAMBLE)

DIFF = ElementwiseKernel("raw T x", "T y", "y = x[i] - x[i > 0 ? i - 1 : 0];", "diff")

SCALE = ElementwiseKernel("T x, T scale", "T y", "y = x * scale;", "scale")


def softplus_reference(x, beta):
    bv = x * beta
    return (np.maximum(bv, 0) + np.log1p(np.exp(-np.abs(bv)))) / beta


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_matches_numpy(dtype):
    x = np.linspace(-30, 30, 101).astype(dtype)
    y = SOFTPLUS(dev(x), 1.5)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(host(y), softplus_reference(x, dtype(1.5)), rtol=4 * np.finfo(dtype).eps)


def test_activation_in_float16_computes_in_float_and_rounds_on_store():
    from math import erf
    x = np.linspace(-4, 4, 33).astype(np.float16)
    y = GELU(dev(x))
    assert y.dtype == np.float16
    in_float = np.array([0.5 * v * (1 + erf(v * 0.7071067811865476)) for v in x.astype(np.float32)], np.float32)
    np.testing.assert_allclose(host(y).astype(np.float32), in_float, rtol=1e-3, atol=1e-3)


def test_float16_arithmetic_is_float_then_rounded_to_nearest_even():
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float16)
    y = SCALE(dev(x), 0.7)  # the scalar becomes float16(0.7), the product is a float, stored as float16
    expected = (x.astype(np.float32) * np.float32(np.float16(0.7))).astype(np.float16)
    assert host(y).tobytes() == expected.tobytes()


@pytest.mark.parametrize("source_dtype", [np.float32, np.float64])
def test_float16_store_rounds_as_numpy(source_dtype):
    bits = np.random.default_rng(1).integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    values = values[np.isfinite(values)].astype(source_dtype)
    if source_dtype == np.float64:  # values between float16 steps that float32 cannot hold
        values = values * (1 + 2.0 ** -30)
    ties = [2049, 2051, 65519, 65520, -65520, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -14 - 2.0 ** -25]
    values = np.concatenate([values, ties, [np.inf, -np.inf, 0.0, -0.0]]).astype(source_dtype)
    store = ElementwiseKernel("%s x" % np.dtype(source_dtype).name, "float16 y", "y = (float16)x;", "store_half")
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16)
    assert host(store(dev(values))).view(np.uint16).tolist() == expected.view(np.uint16).tolist()


def test_in_place_multi_output_step():
    rng = np.random.default_rng(2)
    grad, param, buf = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    param_d, buf_d = dev(param), dev(buf)
    result = MOMENTUM_STEP(dev(grad), 0.1, 0.9, True, param_d, buf_d)
    assert result[0] is param_d and result[1] is buf_d
    b = np.float32(0.9) * buf + grad
    np.testing.assert_allclose(host(buf_d), b, rtol=1e-6)
    np.testing.assert_allclose(host(param_d), param - np.float32(0.1) * (grad + np.float32(0.9) * b), rtol=1e-6)


def test_outputs_allocated_when_not_given():
    grad = dev(np.ones(5, np.float64))
    param, buf = MOMENTUM_STEP(grad, 0.5, 0.0, False)
    assert param.shape == buf.shape == (5,) and param.dtype == buf.dtype == np.float64
    assert param.device.id == 0


def test_raw_input_reads_neighbours():
    x = np.array([1.0, 4.0, 9.0, 16.0], np.float32)
    np.testing.assert_array_equal(host(DIFF(dev(x), dev(np.zeros(4, np.float32)))), [0, 3, 5, 7])
    rotate = ElementwiseKernel("raw T x", "raw T y", "y[i] = x[(i + 1) % _ind.size()];", "rotate")
    np.testing.assert_array_equal(host(rotate(dev(x), dev(np.zeros(4, np.float32)), size=4)), [4, 9, 16, 1])


def test_raw_input_of_a_strided_array_is_read_in_c_order():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    copy = ElementwiseKernel("raw T x", "T y", "y = x[i];", "flat_copy")
    np.testing.assert_array_equal(host(copy(_wrap(x, 0), dev(np.zeros(12)))), x.ravel())


def test_broadcasting_and_strided_arrays():
    x = np.arange(3, dtype=np.float64).reshape(3, 1)
    s = np.arange(8, dtype=np.float64)[::2]
    out = np.zeros((4, 3)).T  # a non-contiguous output, written in place
    add = ElementwiseKernel("T a, T b", "T c", "c = a + b;", "add")
    add(_wrap(x, 0), _wrap(s, 0), _wrap(out, 0))
    np.testing.assert_array_equal(out, x + s)
    assert host(add(_wrap(x, 0), _wrap(s, 0))).shape == (3, 4)
    with pytest.raises(ValueError, match="could not be broadcast"):
        add(dev(np.zeros(3)), dev(np.zeros(4)))


def test_zero_size_and_zero_dim():
    assert SCALE(dev(np.zeros((0, 3), np.float32)), 2.0).shape == (0, 3)
    assert host(SCALE(dev(np.float32(3)), 2.0)).tolist() == 6.0


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64", "i686"), reason="flush-to-zero emulated on x86")
def test_float32_denormals_flush_to_zero_and_float64_ones_do_not():
    tiny = ElementwiseKernel("T x, T factor", "T y", "y = x * factor;", "tiny")
    assert host(tiny(dev([1e-20], np.float32), np.float32(1e-20))).tolist() == [0.0]  # result below 1.2e-38
    assert host(tiny(dev([1e-40], np.float32), np.float32(1e10))).tolist() == [0.0]  # denormal input
    assert host(tiny(dev([1e-300], np.float64), 1e-10)).tolist() == [1e-310]
    assert np.float32(1e-20) * np.float32(1e-20) != 0  # the host's mode is restored after the kernel


def test_type_rules():
    with pytest.raises(TypeError, match="Type is mismatched"):
        SCALE(dev([1.0], np.float32), dev([1.0], np.float64))
    with pytest.raises(TypeError, match="Type is mismatched"):
        SCALE(dev([1.0], np.float32), 1.0, dev([0.0], np.float64))
    with pytest.raises(TypeError, match="Type is mismatched"):
        SOFTPLUS(dev([1.0], np.float32), dev([1.0], np.float32))  # an array for a float64 parameter
    y = SOFTPLUS(dev([1.0], np.float32), dev([1.0]))  # a float64 array for it is fine
    assert y.dtype == np.float32
    assert SCALE(dev([1.0], np.float16), 3).dtype == np.float16  # scalars take T


def test_strict_arguments():
    with pytest.raises(TypeError, match="Unsupported type"):
        SCALE(np.ones(3, np.float32), 2.0)
    with pytest.raises(TypeError, match="Unsupported type"):
        SCALE(dev([1.0]), [2.0])
    with pytest.raises(TypeError, match="Wrong number of arguments"):
        SCALE(dev([1.0]))
    with pytest.raises(TypeError, match="Wrong arguments"):
        SCALE(dev([1.0]), 1.0, out=None)
    with pytest.raises(ValueError, match="Out shape is mismatched"):
        SCALE(dev([1.0, 2.0]), 1.0, dev([0.0]))
    with pytest.raises(ValueError, match="Loop size is undecided"):
        DIFF(dev([1.0]))
    with pytest.raises(ValueError, match="Specified 'size'"):
        SCALE(dev([1.0]), 1.0, size=1)
    with pytest.raises(ValueError, match="parameter name"):
        ElementwiseKernel("T i", "T y", "y = i;")
    with pytest.raises(ValueError, match="Invalid kernel name"):
        ElementwiseKernel("T x", "T y", "y = x;", "not a name")


def test_arrays_on_another_device_raise():
    x = dev([1.0], device=1)
    with pytest.raises(ValueError, match="different from the current device"):
        SCALE(x, 2.0)
    with Device(1):
        y = SCALE(x, 2.0)
    assert y.device.id == 1 and host(y).tolist() == [2.0]


def test_compiled_once_per_signature(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_STANDIN_CACHE_DIR", str(tmp_path))
    source = ("T x", "T y", "y = x + x;", "twice")
    ElementwiseKernel(*source)(dev([1.0]))
    ElementwiseKernel(*source)(dev([2.0]))  # a new object: the cached shared object is reused
    assert len(os.listdir(tmp_path)) == 1
    ElementwiseKernel(*source)(dev([2.0], np.float32))
    assert len(os.listdir(tmp_path)) == 2


def test_compile_errors_carry_the_compiler_log():
    broken = ElementwiseKernel("T x", "T y", "y = undefined_function(x);", "broken")
    with pytest.raises(CompileException, match="undefined_function"):
        broken(dev([1.0]))
