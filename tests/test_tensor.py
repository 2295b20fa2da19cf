"""Tensor attributes, conversions, printing, creation, random sampling, dtypes and devices.

Expected values come from hand computation, NumPy, or PyTorch's documented behaviour
(with ``torch.`` spelled ``rlpipe.``); rlpipe is never checked against itself.
"""
import math

import numpy as np
import pytest

import rlpipe as r

CUDA = r.cuda.is_available()


@pytest.fixture
def default_dtype():
    """Lets a test change the default dtype; puts float32 back afterwards."""
    yield
    r.set_default_dtype(r.float32)


# ---------------------------------------------------------------------------------------------
# Attributes
# ---------------------------------------------------------------------------------------------

def test_basic_attributes_of_a_fresh_tensor():
    """A new tensor is a leaf on the CPU that does not require grad."""
    t = r.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4)
    assert isinstance(t.shape, tuple) and isinstance(t.shape, r.Size)
    assert t.dtype is r.float32
    assert t.device == r.device("cpu")
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24
    assert t.requires_grad is False
    assert t.grad is None and t.grad_fn is None
    assert t.is_leaf
    assert not t.is_cuda


def test_size_with_and_without_dim():
    """size() is the shape; size(d) one entry, negative d counted from the end."""
    t = r.zeros(2, 3, 4)
    assert t.size() == (2, 3, 4)
    assert isinstance(t.size(), r.Size)
    assert [t.size(0), t.size(1), t.size(2)] == [2, 3, 4]
    assert t.size(-1) == 4 and t.size(-3) == 2


@pytest.mark.parametrize("dim", [2, -3])
def test_size_rejects_out_of_range_dim(dim):
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\]"):
        r.zeros(2, 3).size(dim)


def test_size_repr_and_numel():
    assert repr(r.zeros(2, 3).shape) == "rlpipe.Size([2, 3])"
    assert r.Size([2, 3, 4]).numel() == 24


def test_size_concatenated_with_a_tuple_is_a_size():
    """torch.Size + tuple and tuple + torch.Size are torch.Size (torch 2.13)."""
    after, before = r.Size([2]) + (3,), (4,) + r.Size([2])
    assert type(after) is r.Size and after == (2, 3) and after.numel() == 6
    assert type(before) is r.Size and before == (4, 2)
    with pytest.raises(TypeError):
        r.Size([2]) + [3]


def test_expanded_nested_tensordict_keeps_a_size_batch():
    """An expanded TensorDict's nested ones get a Size batch (their squeeze used to fail on a tuple)."""
    from rlpipe.tensordict import TensorDict
    td = TensorDict({"o": TensorDict({"x": r.zeros(3, 1, 4)}, [3, 1, 4])}, []).expand(10)
    assert type(td["o"].batch_size) is r.Size and td["o"].squeeze(-2).batch_size == (10, 3, 4)


def test_scalar_tensor_attributes():
    t = r.tensor(3.5)
    assert t.shape == () and t.ndim == 0 and t.numel() == 1


def test_transpose_properties():
    """T reverses a matrix's dims; mT swaps the last two of a batch."""
    m = r.tensor([[1., 2., 3.], [4., 5., 6.]])
    assert m.T.tolist() == [[1., 4.], [2., 5.], [3., 6.]]
    assert m.mT.tolist() == [[1., 4.], [2., 5.], [3., 6.]]
    assert r.tensor([1., 2.]).T.tolist() == [1., 2.]
    batch = r.tensor(np.arange(24.).reshape(2, 3, 4))
    assert batch.mT.shape == (2, 4, 3)
    np.testing.assert_array_equal(batch.mT.numpy(), np.arange(24.).reshape(2, 3, 4).swapaxes(-1, -2))


def test_mT_needs_a_matrix():
    with pytest.raises(RuntimeError, match="tensor.mT is only supported on matrices or batches of matrices"):
        r.tensor([1., 2.]).mT


# ---------------------------------------------------------------------------------------------
# Conversion to Python
# ---------------------------------------------------------------------------------------------

def test_item_returns_python_scalars():
    assert r.tensor(2).item() == 2 and type(r.tensor(2).item()) is int
    assert r.tensor(2.5).item() == 2.5 and type(r.tensor(2.5).item()) is float
    assert r.tensor(True).item() is True
    assert r.tensor([[7.]]).item() == 7.0  # any single-element tensor


def test_item_on_several_elements_raises():
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        r.tensor([1., 2.]).item()


def test_tolist_nested_and_scalar():
    assert r.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert r.tensor(3.).tolist() == 3.0
    assert r.tensor([True, False]).tolist() == [True, False]


def test_len_and_iteration_follow_the_first_dim():
    t = r.tensor([[1., 2.], [3., 4.], [5., 6.]])
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(isinstance(row, r.Tensor) for row in rows)
    assert [row.tolist() for row in rows] == [[1., 2.], [3., 4.], [5., 6.]]
    assert [v.item() for v in r.tensor([4, 5])] == [4, 5]


def test_len_of_0d_tensor_raises():
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(r.tensor(1.))


def test_iterating_a_0d_tensor_raises():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(r.tensor(1.))


def test_bool_float_int_conversions():
    assert bool(r.tensor([0.])) is False and bool(r.tensor(2)) is True
    assert float(r.tensor([2.5])) == 2.5
    assert int(r.tensor(3.9)) == 3 and int(r.tensor(-3.9)) == -3  # truncation, like Python's int()


def test_integer_tensor_used_as_an_index():
    assert [10, 20, 30][r.tensor(1)] == 20
    assert list(range(10))[r.tensor(2):r.tensor(5)] == [2, 3, 4]


def test_bool_of_several_elements_is_ambiguous():
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(r.tensor([1., 2.]))


def test_float_of_several_elements_raises():
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        float(r.tensor([1., 2.]))


@pytest.mark.parametrize("value", [r.tensor(1.), r.tensor([1, 0])], ids=["float", "two-elements"])
def test_only_single_integer_tensors_are_indices(value):
    with pytest.raises(TypeError, match="only integer tensors of a single element can be converted to an index"):
        [1, 2][value]


# ---------------------------------------------------------------------------------------------
# NumPy and DLPack interop
# ---------------------------------------------------------------------------------------------

def test_numpy_shares_memory_both_ways():
    t = r.tensor([1., 2., 3.])
    a = t.numpy()
    assert a.dtype == np.float32
    a[0] = 10.
    assert t.tolist() == [10., 2., 3.]
    t[1] = 20.
    assert a.tolist() == [10., 20., 3.]


def test_numpy_refuses_a_tensor_that_requires_grad():
    t = r.tensor([1., 2.], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad. "
                                           r"Use tensor.detach\(\).numpy\(\) instead."):
        t.numpy()
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        np.asarray(t)


def test_np_asarray_shares_memory_and_converts_dtype():
    t = r.tensor([1., 2.])
    a = np.asarray(t)
    a[0] = 5.
    assert t.tolist() == [5., 2.]
    converted = np.asarray(t, dtype=np.float64)
    assert converted.dtype == np.float64 and converted.tolist() == [5., 2.]


def test_dlpack_export_to_numpy_shares_memory():
    t = r.tensor([1, 2, 3], dtype=r.int32)
    a = np.from_dlpack(t)
    assert a.dtype == np.int32
    a[2] = 30
    assert t.tolist() == [1, 2, 30]


def test_from_dlpack_imports_a_numpy_array_sharing_memory():
    a = np.arange(4, dtype=np.float64)
    t = r.from_dlpack(a)
    assert t.dtype is r.float64 and t.device == "cpu"
    a[0] = 9.
    assert t.tolist() == [9., 1., 2., 3.]


def test_dlpack_round_trip_preserves_values_and_memory():
    a = np.array([[1.5, -2.], [3., 4.]], dtype=np.float32)
    back = np.from_dlpack(r.from_dlpack(a))
    np.testing.assert_array_equal(back, a)
    assert np.shares_memory(back, a)


def test_dlpack_refuses_a_tensor_that_requires_grad():
    with pytest.raises(RuntimeError, match=r"Can't export tensors that require gradient, use tensor.detach\(\)"):
        np.from_dlpack(r.tensor([1., 2.], requires_grad=True))


# ---------------------------------------------------------------------------------------------
# Printing, as torch prints
# ---------------------------------------------------------------------------------------------

def _grad_sum():
    return r.tensor([1., 2., 3.], requires_grad=True).sum()


REPRS = [
    (lambda: r.tensor([1., 2., 3.]), "tensor([1., 2., 3.])"),
    (lambda: r.tensor([0.1, 0.2]), "tensor([0.1000, 0.2000])"),
    (lambda: r.tensor([[1, 2], [3, 4]]), "tensor([[1, 2],\n        [3, 4]])"),
    (lambda: r.tensor(3.), "tensor(3.)"),
    (lambda: r.tensor(5), "tensor(5)"),
    (lambda: r.tensor([1., 2.], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
    (_grad_sum, "tensor(6., grad_fn=<SumBackward0>)"),
    (lambda: r.tensor(2., requires_grad=True).exp(), "tensor(7.3891, grad_fn=<ExpBackward0>)"),
    (lambda: r.tensor([1., 2.], dtype=r.float64), "tensor([1., 2.], dtype=rlpipe.float64)"),
    (lambda: r.tensor([1., 2.], dtype=r.float16), "tensor([1., 2.], dtype=rlpipe.float16)"),
    (lambda: r.tensor([1, 2], dtype=r.int32), "tensor([1, 2], dtype=rlpipe.int32)"),
    (lambda: r.tensor([True, False]), "tensor([ True, False])"),  # torch pads to the widest element
    (lambda: r.zeros(0, 3), "tensor([], size=(0, 3))"),
    (lambda: r.zeros(3, 0), "tensor([], size=(3, 0))"),
    (lambda: r.tensor([]), "tensor([])"),
    (lambda: r.tensor([], dtype=r.int64), "tensor([], dtype=rlpipe.int64)"),
    (lambda: r.zeros(2), "tensor([0., 0.])"),
    (lambda: r.tensor([-1.5, 2.]), "tensor([-1.5000,  2.0000])"),
    (lambda: r.tensor([1., 10.]), "tensor([ 1., 10.])"),
    (lambda: r.tensor([1, 10]), "tensor([ 1, 10])"),
    (lambda: r.tensor([[1., -2.], [3., 4.]]), "tensor([[ 1., -2.],\n        [ 3.,  4.]])"),
    (lambda: r.tensor([1e-5, 1.]), "tensor([1.0000e-05, 1.0000e+00])"),
    # whole numbers spanning more than 1000x switch to scientific notation too
    (lambda: r.tensor([1., 1e5]), "tensor([1.0000e+00, 1.0000e+05])"),
    (lambda: r.tensor([1., 1000.]), "tensor([   1., 1000.])"),
    # non-finite values do not count towards the column width
    (lambda: r.tensor([math.nan, math.inf, 1.]), "tensor([nan, inf, 1.])"),
    (lambda: r.arange(20.), "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
                            "        14., 15., 16., 17., 18., 19.])"),
]


@pytest.mark.parametrize("make, expected", REPRS, ids=[e for _, e in REPRS])
def test_repr_matches_torch(make, expected):
    assert repr(make()) == expected
    assert str(make()) == expected


def test_repr_names_float32_when_the_default_is_float64(default_dtype):
    r.set_default_dtype(r.float64)
    assert repr(r.tensor([1.5])) == "tensor([1.5000])"
    assert repr(r.tensor([1.5], dtype=r.float32)) == "tensor([1.5000], dtype=rlpipe.float32)"


def test_dtype_and_device_reprs():
    assert repr(r.float32) == "rlpipe.float32"
    assert repr(r.device("cpu")) == "device(type='cpu')"
    assert repr(r.device("cuda:1")) == "device(type='cuda', index=1)"


# ---------------------------------------------------------------------------------------------
# Creation from data
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, dtype", [
    ([1.5, 2.], r.float32),
    ([1, 2.5], r.float32),
    (1.5, r.float32),
    ([1, 2], r.int64),
    (7, r.int64),
    ([True, False], r.bool),
    (True, r.bool),
    ([True, 2], r.int64),
    (np.array([1., 2.]), r.float64),
    (np.float64(1.), r.float64),
    (np.array([1, 2], dtype=np.int32), r.int32),
    (np.array([1, 2], dtype=np.uint8), r.uint8),
    ([], r.float32),
], ids=repr)
def test_tensor_infers_dtype_like_torch(data, dtype):
    assert r.tensor(data).dtype is dtype


def test_tensor_copies_its_data():
    a = np.array([1., 2.])
    t = r.tensor(a)
    a[0] = 100.
    assert t.tolist() == [1., 2.]


def test_tensor_with_explicit_dtype_and_nested_shape():
    t = r.tensor([[1, 2, 3], [4, 5, 6]], dtype=r.float64)
    assert t.dtype is r.float64 and t.shape == (2, 3)
    assert t.tolist() == [[1., 2., 3.], [4., 5., 6.]]


def test_tensor_with_requires_grad():
    t = r.tensor([1., 2.], requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad is None


def test_as_tensor_shares_memory_with_a_matching_array():
    a = np.arange(3.)
    t = r.as_tensor(a)
    assert t.dtype is r.float64
    a[1] = 9.
    assert t.tolist() == [0., 9., 2.]


def test_as_tensor_copies_when_the_dtype_changes():
    a = np.arange(3.)
    t = r.as_tensor(a, dtype=r.float32)
    a[1] = 9.
    assert t.dtype is r.float32 and t.tolist() == [0., 1., 2.]


def test_as_tensor_of_a_tensor_is_that_tensor():
    t = r.tensor([1., 2.])
    assert r.as_tensor(t) is t


def test_from_numpy_shares_memory_both_ways():
    a = np.zeros((2, 2), dtype=np.float16)
    t = r.from_numpy(a)
    assert t.dtype is r.float16 and t.shape == (2, 2)
    t[0, 0] = 1.
    a[1, 1] = 2.
    assert a.tolist() == [[1., 0.], [0., 2.]]
    assert t.tolist() == [[1., 0.], [0., 2.]]


@pytest.mark.parametrize("np_dtype", [np.uint16, np.complex64, np.str_])
def test_from_numpy_rejects_unsupported_dtypes(np_dtype):
    with pytest.raises(TypeError, match="can't convert np.ndarray of type"):
        r.from_numpy(np.zeros(2, dtype=np_dtype))


def test_from_numpy_needs_an_ndarray():
    with pytest.raises(TypeError, match="expected np.ndarray"):
        r.from_numpy([1, 2])


# ---------------------------------------------------------------------------------------------
# Filled tensors, ranges, *_like
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(2, 3), ((2, 3),), ([2, 3],)], ids=["varargs", "tuple", "list"])
def test_size_can_be_given_as_varargs_tuple_or_list(size):
    assert r.zeros(*size).shape == (2, 3)
    assert r.ones(*size).shape == (2, 3)
    assert r.empty(*size).shape == (2, 3)


def test_zeros_ones_values_and_dtypes():
    assert r.zeros(2, 2).tolist() == [[0., 0.], [0., 0.]]
    assert r.ones(3, dtype=r.int64).tolist() == [1, 1, 1]
    assert r.ones(2, dtype=r.bool).tolist() == [True, True]
    assert r.zeros(()).shape == () and r.zeros(()).item() == 0.
    assert r.empty(2, dtype=r.int8).dtype is r.int8


def test_filled_factories_accept_requires_grad():
    t = r.zeros(2, requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_negative_size_raises():
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension -1: \[-1\]"):
        r.zeros(-1)


def test_non_integer_size_raises():
    with pytest.raises(TypeError, match="size must be a sequence of ints"):
        r.zeros(2.5)


@pytest.mark.parametrize("fill, dtype", [(3, r.int64), (3., r.float32), (True, r.bool)])
def test_full_infers_dtype_from_the_fill_value(fill, dtype):
    t = r.full((2, 2), fill)
    assert t.dtype is dtype and t.tolist() == [[fill, fill], [fill, fill]]


def test_full_with_explicit_dtype():
    assert r.full((3,), 1.5, dtype=r.float64).tolist() == [1.5, 1.5, 1.5]


@pytest.mark.parametrize("args, expected, dtype", [
    ((5,), [0, 1, 2, 3, 4], r.int64),
    ((2, 6, 2), [2, 4], r.int64),
    ((5, 0, -2), [5, 3, 1], r.int64),
    ((3.,), [0., 1., 2.], r.float32),
    ((1, 2, 0.25), [1., 1.25, 1.5, 1.75], r.float32),
], ids=repr)
def test_arange_values_and_dtype(args, expected, dtype):
    t = r.arange(*args)
    assert t.dtype is dtype and t.tolist() == expected


def test_arange_float_step_length():
    """ceil((1 - 0) / 0.1) = 10 elements."""
    t = r.arange(0, 1, 0.1)
    assert t.shape == (10,)
    np.testing.assert_allclose(t.numpy(), np.arange(10) / 10, rtol=1e-6, atol=1e-7)


def test_arange_errors():
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        r.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="upper bound and larger bound inconsistent with step sign"):
        r.arange(5, 0, 1)


def test_linspace():
    assert r.linspace(0, 1, 5).tolist() == [0., 0.25, 0.5, 0.75, 1.]
    assert r.linspace(0, 1, 5).dtype is r.float32
    assert r.linspace(-1, 1, 3, dtype=r.float64).tolist() == [-1., 0., 1.]
    assert r.linspace(2, 3, 1).tolist() == [2.]
    assert r.linspace(0, 1, 0).shape == (0,)


def test_linspace_negative_steps_raises():
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        r.linspace(0, 1, -1)


def test_eye():
    assert r.eye(2).tolist() == [[1., 0.], [0., 1.]]
    assert r.eye(2, 3).tolist() == [[1., 0., 0.], [0., 1., 0.]]
    assert r.eye(2).dtype is r.float32
    assert r.eye(2, dtype=r.int64).tolist() == [[1, 0], [0, 1]]


def test_like_factories_keep_shape_and_dtype():
    src = r.tensor([[1, 2, 3], [4, 5, 6]], dtype=r.int16)
    for out, value in [(r.zeros_like(src), 0), (r.ones_like(src), 1), (r.full_like(src, 7), 7)]:
        assert out.shape == (2, 3) and out.dtype is r.int16
        assert out.tolist() == [[value] * 3] * 2
    empty = r.empty_like(src)
    assert empty.shape == (2, 3) and empty.dtype is r.int16


def test_like_factories_accept_a_dtype_override():
    out = r.ones_like(r.tensor([1., 2.]), dtype=r.float64)
    assert out.dtype is r.float64 and out.tolist() == [1., 1.]


# ---------------------------------------------------------------------------------------------
# Random sampling
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sample", [
    lambda: r.rand(5), lambda: r.randn(2, 3), lambda: r.randint(0, 100, (6,)), lambda: r.randperm(8),
    lambda: r.normal(2., 3., (4,)),
], ids=["rand", "randn", "randint", "randperm", "normal"])
def test_manual_seed_makes_sampling_reproducible(sample):
    r.manual_seed(1234)
    first = sample().tolist()
    r.manual_seed(1234)
    assert sample().tolist() == first
    r.manual_seed(4321)
    assert sample().tolist() != first


def test_rng_state_can_be_saved_and_restored():
    r.manual_seed(0)
    state = r.get_rng_state()
    first = r.rand(4).tolist()
    r.set_rng_state(state)
    assert r.rand(4).tolist() == first


def test_initial_seed_reports_the_manual_seed():
    r.manual_seed(42)
    assert r.initial_seed() == 42


def test_generators_with_the_same_seed_agree():
    a = r.Generator().manual_seed(7)
    b = r.Generator().manual_seed(7)
    assert r.rand(5, generator=a).tolist() == r.rand(5, generator=b).tolist()
    assert r.randint(0, 10, (5,), generator=a).tolist() == r.randint(0, 10, (5,), generator=b).tolist()


def test_generator_is_independent_of_the_global_stream():
    """Draws from a Generator neither depend on nor advance the default generator."""
    r.manual_seed(0)
    reference_global = r.rand(3).tolist()
    own = r.Generator().manual_seed(3)
    reference_own = r.rand(3, generator=own).tolist()

    r.manual_seed(0)
    own = r.Generator().manual_seed(3)
    r.rand(10)  # advance the global stream first
    assert r.rand(3, generator=own).tolist() == reference_own

    r.manual_seed(0)
    r.rand(3, generator=r.Generator().manual_seed(99))
    assert r.rand(3).tolist() == reference_global


def test_generator_manual_seed_returns_the_generator():
    g = r.Generator()
    assert g.manual_seed(5) is g
    assert g.initial_seed() == 5


@pytest.mark.parametrize("dtype", [r.float16, r.bfloat16, r.float32, r.float64], ids=repr)
def test_rand_stays_in_the_half_open_unit_interval(dtype):
    """torch.rand samples [0, 1) in every floating dtype; rounding must never produce 1."""
    r.manual_seed(0)
    x = r.rand(200_000, dtype=dtype)
    assert x.dtype is dtype
    values = x.float().numpy()
    assert values.min() >= 0.0
    assert values.max() < 1.0


def test_rand_and_randn_shapes_and_default_dtype():
    assert r.rand(2, 3).shape == (2, 3) and r.rand(2, 3).dtype is r.float32
    assert r.randn((4,)).shape == (4,) and r.randn(4).dtype is r.float32
    assert r.randn(2, dtype=r.float64).dtype is r.float64


def test_randn_moments():
    r.manual_seed(0)
    x = r.randn(100_000).double().numpy()
    assert abs(x.mean()) < 0.02
    assert abs(x.std() - 1.0) < 0.02


def test_rand_rejects_integer_dtypes():
    with pytest.raises(RuntimeError, match="floating point"):
        r.rand(2, dtype=r.int64)


def test_randint_range_and_dtype():
    r.manual_seed(0)
    x = r.randint(3, 7, (1000,))
    assert x.dtype is r.int64
    assert sorted(set(x.tolist())) == [3, 4, 5, 6]
    y = r.randint(5, (2, 3))
    assert y.shape == (2, 3) and y.min().item() >= 0 and y.max().item() < 5
    assert r.randint(0, 5, (2,), dtype=r.int32).dtype is r.int32


def test_randint_rejects_an_empty_range():
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=2"):
        r.randint(5, 2, (3,))



def test_randint_honours_requires_grad_as_torch():
    x = r.randint(1, 10, (2, 3), dtype=r.float32, requires_grad=True)  # a float leaf, as torch's
    assert x.requires_grad and x.is_leaf and x.dtype is r.float32
    with pytest.raises(RuntimeError, match="floating point and complex dtype can require gradients"):
        r.randint(1, 10, (2,), requires_grad=True)  # int64, as torch refuses

def test_randperm_is_a_permutation():
    r.manual_seed(0)
    p = r.randperm(50)
    assert p.dtype is r.int64
    assert sorted(p.tolist()) == list(range(50))
    assert r.randperm(4, dtype=r.int32).dtype is r.int32
    assert r.randperm(0).shape == (0,)


def test_randperm_rejects_negative_n():
    with pytest.raises(RuntimeError, match="n must be non-negative"):
        r.randperm(-1)


def test_normal_with_float_parameters():
    r.manual_seed(0)
    x = r.normal(2., 3., (100_000,))
    assert x.shape == (100_000,) and x.dtype is r.float32
    values = x.double().numpy()
    assert abs(values.mean() - 2.) < 0.05
    assert abs(values.std() - 3.) < 0.05


def test_normal_with_tensor_parameters_broadcasts():
    """A zero std gives exactly the mean."""
    x = r.normal(r.tensor([0., 100.]), r.tensor([1., 0.]))
    assert x.shape == (2,)
    assert x[1].item() == 100.


def test_normal_rejects_negative_std():
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        r.normal(0., -1., (2,))
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        r.normal(r.zeros(2), r.tensor([-1., 1.]))


def test_random_like_factories():
    src = r.zeros(2, 3, dtype=r.float64)
    assert r.rand_like(src).shape == (2, 3) and r.rand_like(src).dtype is r.float64
    assert r.randn_like(src).dtype is r.float64
    ints = r.randint_like(src, 5)
    assert ints.shape == (2, 3) and ints.min().item() >= 0 and ints.max().item() < 5


# ---------------------------------------------------------------------------------------------
# Default dtype
# ---------------------------------------------------------------------------------------------

def test_default_dtype_is_float32():
    assert r.get_default_dtype() is r.float32


def test_set_default_dtype_changes_float_factories(default_dtype):
    r.set_default_dtype(r.float64)
    assert r.get_default_dtype() is r.float64
    assert r.tensor([1.5]).dtype is r.float64
    assert r.zeros(2).dtype is r.float64
    assert r.arange(2.).dtype is r.float64
    assert r.rand(2).dtype is r.float64
    assert r.tensor([1, 2]).dtype is r.int64  # integers are unaffected


def test_set_default_dtype_rejects_non_floating(default_dtype):
    with pytest.raises(TypeError, match="floating point"):
        r.set_default_dtype(r.int32)
    assert r.get_default_dtype() is r.float32


# ---------------------------------------------------------------------------------------------
# Dtypes and casting
# ---------------------------------------------------------------------------------------------

DTYPES = [  # (dtype, itemsize, floating, NumPy dtype or None)
    (r.float16, 2, True, np.float16), (r.bfloat16, 2, True, None), (r.float32, 4, True, np.float32),
    (r.float64, 8, True, np.float64), (r.int8, 1, False, np.int8), (r.int16, 2, False, np.int16),
    (r.int32, 4, False, np.int32), (r.int64, 8, False, np.int64), (r.uint8, 1, False, np.uint8),
    (r.bool, 1, False, np.bool_),
]


@pytest.mark.parametrize("dtype, itemsize, floating, np_dtype", DTYPES, ids=[repr(d[0]) for d in DTYPES])
def test_dtype_properties(dtype, itemsize, floating, np_dtype):
    assert dtype.itemsize == itemsize
    assert dtype.is_floating_point is floating
    t = r.zeros(3, dtype=dtype)
    assert t.dtype is dtype
    assert t.element_size() == itemsize
    assert t.is_floating_point() is floating
    if np_dtype is not None:
        assert t.numpy().dtype == np_dtype


def test_dtype_aliases():
    assert r.float is r.float32 and r.double is r.float64 and r.half is r.float16
    assert r.long is r.int64 and r.int is r.int32 and r.short is r.int16


SOURCE = [-1.7, 0., 2.5]
CASTS = [  # (method, dtype, expected values of SOURCE (a float32 tensor) after the cast)
    ("float", r.float32, np.float32(SOURCE).tolist()),
    ("double", r.float64, np.float32(SOURCE).astype(np.float64).tolist()),
    ("half", r.float16, np.float32(SOURCE).astype(np.float16).tolist()),
    ("bfloat16", r.bfloat16, [-1.703125, 0., 2.5]),  # 1.7 rounds to 1.1011010b in 8 significant bits
    ("long", r.int64, [-1, 0, 2]),  # truncation towards zero
    ("int", r.int32, [-1, 0, 2]),
    ("bool", r.bool, [True, False, True]),
]


@pytest.mark.parametrize("method, dtype, expected", CASTS, ids=[c[0] for c in CASTS])
def test_dtype_conversion_methods(method, dtype, expected):
    out = getattr(r.tensor(SOURCE), method)()
    assert out.dtype is dtype
    assert out.tolist() == expected


@pytest.mark.parametrize("method, dtype, expected", CASTS, ids=[c[0] for c in CASTS])
def test_to_dtype_matches_the_methods(method, dtype, expected):
    out = r.tensor(SOURCE).to(dtype)
    assert out.dtype is dtype and out.tolist() == expected


def test_to_accepts_keyword_device_dtype_and_tensor_forms():
    t = r.tensor([1., 2.])
    assert t.to(dtype=r.float64).dtype is r.float64
    assert t.to("cpu", r.float64).dtype is r.float64
    assert t.to(r.zeros(1, dtype=r.int32)).dtype is r.int32
    assert t.to(np.float64).dtype is r.float64


def test_to_without_a_change_returns_self():
    t = r.tensor([1., 2.])
    assert t.to(r.float32) is t
    assert t.float() is t
    assert t.to("cpu") is t
    assert t.to(r.device("cpu")) is t
    assert t.cpu() is t
    # torch 2.13 ignores a None dtype or device: to(None) is the tensor, to(None, float64) casts
    assert t.to(None) is t and t.to(None, r.float64).dtype is r.float64 and t.to("cpu", None) is t


def test_cast_is_a_copy():
    t = r.tensor([1., 2.])
    d = t.double()
    d[0] = 50.
    assert t.tolist() == [1., 2.]


@pytest.mark.parametrize("a, b, expected", [
    (r.float16, r.bfloat16, r.float32),
    (r.int32, r.float16, r.float16),
    (r.int64, r.float32, r.float32),
    (r.float32, r.float64, r.float64),
    (r.int32, r.int64, r.int64),
    (r.uint8, r.int8, r.int16),
    (r.uint8, r.int16, r.int16),
    (r.bool, r.int8, r.int8),
    (r.bool, r.uint8, r.uint8),
    (r.bool, r.bool, r.bool),
], ids=repr)
def test_promote_types(a, b, expected):
    assert r.promote_types(a, b) is expected
    assert r.promote_types(b, a) is expected


# ---------------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------------

def test_cpu_device_fields():
    d = r.device("cpu")
    assert d.type == "cpu" and d.index is None and str(d) == "cpu"


def test_cuda_device_fields_need_no_gpu():
    d = r.device("cuda:1")
    assert d.type == "cuda" and d.index == 1 and str(d) == "cuda:1"
    assert r.device("cuda", 1) == d
    assert r.device("cuda").index is None


def test_device_equality_with_strings():
    assert r.device("cpu") == "cpu"
    assert r.device("cuda:1") == "cuda:1"
    assert r.device("cuda:1") != "cuda:0"
    assert r.device("cpu") != "cuda"
    assert r.device("cpu") == r.device("cpu")
    assert hash(r.device("cuda:1")) == hash(r.device("cuda:1"))
    assert r.tensor([1.]).device == "cpu"


@pytest.mark.parametrize("spec", ["tpu", "cuda:x"])
def test_invalid_device_strings_raise(spec):
    with pytest.raises(RuntimeError, match="device"):
        r.device(spec)


def test_cuda_is_not_available_here():
    if CUDA:
        pytest.skip("a GPU is available")
    assert r.cuda.is_available() is False
    assert r.cuda.device_count() == 0


@pytest.mark.parametrize("make", [
    lambda: r.zeros(1, device="cuda"),
    lambda: r.tensor([1.], device="cuda:0"),
    lambda: r.tensor([1.]).cuda(),
    lambda: r.tensor([1.]).to("cuda"),
], ids=["zeros", "tensor", ".cuda()", ".to('cuda')"])
def test_cuda_without_cupy_says_how_to_install_it(make):
    if CUDA:
        pytest.skip("a GPU is available")
    with pytest.raises(RuntimeError, match=r"CuPy.*pip install 'rlpipe\[cuda12\]' or 'rlpipe\[cuda13\]'"):
        make()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_share_memory_is_shared_with_forked_children_and_leaves_no_shm_name():
    import os
    shm = "/dev/shm"
    before = set(os.listdir(shm)) if os.path.isdir(shm) else set()
    t = r.arange(4.0)
    assert t.share_memory_() is t and t.is_shared() and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    pid = os.fork()
    if pid == 0:  # the child writes; the parent must see it (torch's shared memory does the same)
        t[1] = 10.0
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0 and t.tolist() == [0.0, 10.0, 2.0, 3.0]
    assert not r.arange(2.0).is_shared()
    after = set(os.listdir(shm)) if os.path.isdir(shm) else set()
    assert after - before == set()  # anonymous memory: nothing named is left behind


def test_a_range_indexes_as_a_sequence_of_positions():
    # torch 2.13: x = arange(12.).reshape(3, 4); x[range(2), 1] -> [1., 5.]; x[1, range(1, 3)] -> [5., 6.];
    # x[range(0), :] has shape [0, 4]; x[(range(2), range(2))] -> [0., 5.]
    x = r.arange(12.0).reshape(3, 4)
    assert x[range(2), 1].tolist() == [1.0, 5.0]
    assert x[range(2)].shape == (2, 4)
    assert x[1, range(1, 3)].tolist() == [5.0, 6.0]
    assert x[range(0), :].shape == (0, 4)
    assert x[(range(2), range(2))].tolist() == [0.0, 5.0]
    x[range(1, 3), 0] = -1.0
    assert x[:, 0].tolist() == [0.0, -1.0, -1.0]


def test_ndimension_is_dim():
    # torch 2.13: torch.zeros(2, 3).ndimension() == 2, torch.tensor(1.).ndimension() == 0
    assert r.zeros(2, 3).ndimension() == 2
    assert r.tensor(1.0).ndimension() == 0


@pytest.mark.parametrize("dtype", [r.bfloat16, r.float16])
def test_half_sums_and_means_accumulate_in_float32_as_torch(dtype):
    ones = r.ones(1000, dtype=dtype)  # torch 2.13: sum 1000, mean 1 (a 16-bit running sum stalls at 256 / 2048)
    assert ones.sum().item() == 1000.0 and ones.mean().item() == 1.0
    assert ones.sum().dtype is dtype and ones.mean().dtype is dtype
    assert r.ones(4000, 2, dtype=dtype).sum(0).tolist() == [4000.0, 4000.0]
