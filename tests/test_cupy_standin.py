"""The CuPy stand-in (tests/cupy_standin) is as strict as CuPy where CuPy differs from NumPy."""
import types

import numpy as np
import pytest

import cupy_standin as cp
from cupy_standin import _cupyx as cpx
from cupy_standin._names import NAMES


def test_refuses_implicit_host_conversion():
    a = cp.arange(3)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Please use `.get\\(\\)`"):
        a.__array__()
    assert not isinstance(a, np.ndarray)
    np.testing.assert_array_equal(a.get(), [0, 1, 2])
    np.testing.assert_array_equal(cp.asnumpy(a), [0, 1, 2])


def test_set_copies_host_data_in():
    a = cp.zeros(3, dtype=np.float32)
    a.set(np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(a.get(), [1, 2, 3])
    with pytest.raises(TypeError):
        a.set(np.array([1, 2, 3], np.float64))


def test_flags_have_no_writeable():
    flags = cp.ones((2, 3)).flags
    assert flags.c_contiguous and not flags.f_contiguous and flags["C_CONTIGUOUS"]
    with pytest.raises(AttributeError):
        flags.writeable


def test_reductions_and_scalar_indexing_give_0d_arrays():
    a = cp.arange(6, dtype=np.float32).reshape(2, 3)
    for result in (a.sum(), cp.sum(a), a.max(), cp.mean(a), a[0, 1], cp.argmax(a)):
        assert isinstance(result, cp.ndarray) and result.ndim == 0
    assert float(a.sum()) == 15.0


@pytest.mark.parametrize("operation", [
    lambda a, h: a + h, lambda a, h: h + a, lambda a, h: cp.add(a, h), lambda a, h: cp.concatenate([a, h]),
    lambda a, h: cp.where(a > 0, h, a), lambda a, h: a.__iadd__(h)])
@pytest.mark.parametrize("host", [np.ones(3), np.array(1.0)], ids=["1d", "0d"])
def test_host_arrays_raise(operation, host):
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        operation(cp.ones(3), host)


def test_python_and_numpy_scalars_are_accepted():
    a = cp.ones(3, dtype=np.float32)
    assert (a + 1).dtype == np.float32 and (a * 2.5).dtype == np.float32
    assert (a + np.float64(1)).dtype == np.float64  # a NumPy scalar is strongly typed (NEP 50)
    np.testing.assert_array_equal(cp.maximum(a, np.float32(2)).get(), [2, 2, 2])


def test_explicit_transfers_and_indices_accept_host_data():
    a = cp.asarray(np.arange(5))
    np.testing.assert_array_equal(a[np.array([4, 0])].get(), [4, 0])
    a[np.array([1, 2])] = np.array([7, 8])
    np.testing.assert_array_equal(a.get(), [0, 7, 8, 3, 4])


def test_arrays_remember_their_device_and_cross_device_ops_raise():
    assert cp.cuda.runtime.getDeviceCount() == 2
    with cp.cuda.Device(1) as device:
        assert device.id == 1 and cp.cuda.runtime.getDevice() == 1
        b = cp.ones(3)
    assert b.device.id == 1 and cp.cuda.runtime.getDevice() == 0
    a = cp.ones(3)
    with pytest.raises(ValueError, match=r"resides \(1\) is different from the current device \(0\)"):
        a + b
    with pytest.raises(ValueError):
        b.sum()
    with cp.cuda.Device(1):
        assert (b + 1).device.id == 1
        assert a.copy().device.id == 1  # copy() lands on the current device, as CuPy's does
    assert b[1:].device.id == 1  # a view stays where its memory is


def test_no_such_device():
    with pytest.raises(RuntimeError):
        cp.cuda.Device(2)
    with pytest.raises(RuntimeError):
        cp.cuda.runtime.setDevice(-1)


def _public(module):
    return {n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}


@pytest.mark.parametrize("module, key", [
    (cp, "cupy"), (cp.cuda, "cupy.cuda"), (cp.cuda.runtime, "cupy.cuda.runtime"), (cp.random, "cupy.random"),
    (cp.linalg, "cupy.linalg"), (cp.fft, "cupy.fft"), (cp.lib.stride_tricks, "cupy.lib.stride_tricks"),
    (cpx, "cupyx"), (cpx.scipy.special, "cupyx.scipy.special")])
def test_only_names_real_cupy_has(module, key):
    assert _public(module) <= set(NAMES[key])


def test_array_methods_are_cupys():
    methods = {n for n in dir(cp.ndarray) if not n.startswith("_")}
    assert methods <= set(NAMES["cupy.ndarray"])
    assert not hasattr(cp.ndarray, "__index__")  # CuPy arrays are not indices


def test_math_matches_numpy():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    a, b = cp.asarray(x), cp.asarray(y)
    np.testing.assert_array_equal((a @ b).get(), x @ y)
    np.testing.assert_array_equal(cp.exp(a).get(), np.exp(x))
    np.testing.assert_array_equal(cp.cumsum(a, axis=1).get(), np.cumsum(x, axis=1))
    np.testing.assert_array_equal(a.T.get(), x.T)
    np.testing.assert_array_equal(cp.linalg.qr(a)[0].get(), np.linalg.qr(x)[0])
    np.testing.assert_array_equal(cpx.scipy.special.erf(a).get(), __import__("scipy.special").special.erf(x))


def test_scatter_add_refuses_int64_as_cupy_does():
    target = cp.zeros(3, dtype=np.float32)
    cpx.scatter_add(target, cp.asarray(np.array([0, 0, 2])), cp.ones(3, dtype=np.float32))
    np.testing.assert_array_equal(target.get(), [2, 0, 1])
    with pytest.raises(TypeError, match="scatter_add only supports int32"):
        cpx.scatter_add(cp.zeros(3, dtype=np.int64), cp.asarray(np.array([0])), 1)


def test_random_dtype_rules_and_state_restore():
    bits = cp.random.Philox4x3210(0)
    gen = cp.random.Generator(bits)
    with pytest.raises(TypeError, match="Unsupported dtype float16 for standard_normal"):
        gen.standard_normal(3, dtype=np.float16)
    assert gen.random(3, dtype=np.float32).dtype == np.float32
    nbytes = bits._state_size() * bits._type_size()
    memory = cp.cuda.UnownedMemory(bits.state(), nbytes, bits, 0)
    buffer = cp.ndarray((nbytes,), np.int8, cp.cuda.MemoryPointer(memory, 0))
    saved = buffer.get()
    first = gen.random(4).get()
    buffer.set(saved)
    np.testing.assert_array_equal(gen.random(4).get(), first)


def test_device_pointer_and_cuda_array_interface():
    a = cp.arange(4, dtype=np.float32)
    assert a.data.ptr == a.__cuda_array_interface__["data"][0] and a.data.device_id == 0
    assert a.__cuda_array_interface__["shape"] == (4,)


# CuPy's _scatter_op (cupy/_core/_routines_indexing.pyx, gh-2079): a basic index (ints, slices,
# None, ...) fills the view with ndarray.fill, which takes scalars only; an advanced index (an
# integer or boolean array or list, a bool) copies a host value to the device first.
@pytest.mark.parametrize("key", [slice(0, 4), slice(None), Ellipsis, (slice(None), None)],
                         ids=["slice", "all", "ellipsis", "newaxis"])
def test_basic_assignment_refuses_a_host_array(key):
    store = cp.zeros(4, cp.int64)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray cannot be used for fill"):
        store[key] = np.arange(4)
    with pytest.raises(TypeError, match="Unsupported type <class 'list'>"):
        store[key] = [0, 1, 2, 3]
    np.testing.assert_array_equal(store.get(), [0, 0, 0, 0])  # nothing written


def test_basic_assignment_with_an_int_index_refuses_a_host_row():
    store = cp.zeros((2, 3), cp.float32)
    for key in (0, np.int64(1), (1, slice(None))):
        with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
            store[key] = np.ones(3, np.float32)
    np.testing.assert_array_equal(store.get(), np.zeros((2, 3)))


@pytest.mark.parametrize("value", [7, 7.0, True, np.int32(7), np.float64(7.0), np.array(7), np.array(7.9)],
                         ids=["int", "float", "bool", "np-int32", "np-float64", "0d-int", "0d-float"])
def test_basic_assignment_accepts_scalars_and_0d_host_arrays(value):
    store = cp.zeros(4, cp.int64)
    store[1:3] = value
    expected = int(np.asarray(value).astype(np.int64))
    np.testing.assert_array_equal(store.get(), [0, expected, expected, 0])


def test_basic_assignment_accepts_device_arrays():
    store = cp.zeros((2, 3), cp.float32)
    store[0:2] = cp.arange(6, dtype=cp.float32).reshape(2, 3)
    store[1] = cp.full(3, 9, dtype=cp.float32)
    store[0, :] = cp.asarray(np.float32(5))
    np.testing.assert_array_equal(store.get(), [[5, 5, 5], [9, 9, 9]])


@pytest.mark.parametrize("key", [np.array([1, 3]), [1, 3], cp.asarray(np.array([1, 3])),
                                 np.array([False, True, False, True]), cp.asarray(np.array([0, 1, 0, 1], bool))],
                         ids=["host-int-array", "list", "device-int-array", "host-mask", "device-mask"])
@pytest.mark.parametrize("value", [np.array([5, 6]), [5, 6], cp.asarray(np.array([5, 6]))],
                         ids=["host-array", "list", "device-array"])
def test_advanced_assignment_copies_host_values_in(key, value):
    store = cp.zeros(4, cp.int64)
    store[key] = value
    np.testing.assert_array_equal(store.get(), [0, 5, 0, 6])


def test_a_0d_index_array_and_a_bool_index_scatter():
    store = cp.zeros((2, 2), cp.int64)
    store[np.array(1)] = np.array([3, 4])  # CuPy reads a 0-d index array as an array index
    np.testing.assert_array_equal(store.get(), [[0, 0], [3, 4]])
    store[True] = np.array([[1, 2], [5, 6]])  # and a bool as a 0-d mask
    np.testing.assert_array_equal(store.get(), [[1, 2], [5, 6]])


def test_fill_takes_scalars_only():
    store = cp.zeros(3, cp.float32)
    store.fill(np.array(2.5))
    np.testing.assert_array_equal(store.get(), [2.5, 2.5, 2.5])
    store.fill(cp.asarray(np.float32(1.5)))
    np.testing.assert_array_equal(store.get(), [1.5, 1.5, 1.5])
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray cannot be used for fill"):
        store.fill(np.ones(3))
    with pytest.raises(ValueError, match="non-scalar cupy.ndarray cannot be used for fill"):
        store.fill(cp.ones(3))


def test_diagonal_is_a_view_one_can_write_through_as_in_cupy():
    # CuPy's diagonal (function and method) is a writable view; NumPy's is read-only
    a = cp.zeros((3, 4))
    cp.diagonal(a, 1)[...] = cp.asarray([1.0, 2.0, 3.0])
    a.diagonal()[...] = 9.0
    assert a.get().tolist() == [[9.0, 1.0, 0.0, 0.0], [0.0, 9.0, 2.0, 0.0], [0.0, 0.0, 9.0, 3.0]]
