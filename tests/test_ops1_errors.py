"""torch's errors (type and message, as torch 2.13 words them) for bad input to the math, search,
index and split ops of pointwise.py, products.py, searching.py, index_ops.py and splits.py; and the
object a failed in-place call was given stays as it was."""
import re

import pytest

import rlpipe as r

T = r.tensor
F = r.tensor([1.0, -2.0, 3.0])
N = r.tensor([1, 2, 3])
M23, M34 = r.ones(2, 3), r.ones(3, 4)
B = r.ones(5, 2, 3)

CASES = [  # id, call, error type, the start of torch's message
    # pointwise
    ("atan2_number", lambda: r.atan2(F, 2), TypeError,
     "atan2(): argument 'other' (position 2) must be Tensor, not int"),
    ("hypot_int", lambda: r.hypot(N, N), NotImplementedError, "\"hypot_cpu\" not implemented for 'Long'"),
    ("fmod_int_zero", lambda: r.fmod(N, 0), RuntimeError, "ZeroDivisionError"),
    ("xlogy_numbers", lambda: r.xlogy(2, 3), TypeError, "xlogy(): expected a Tensor argument, got int and int"),
    ("float_power_numbers", lambda: r.float_power(2, 3.0), TypeError, "float_power(): expected a Tensor argument"),
    ("float_power_inplace_float", lambda: F.clone().float_power_(2), RuntimeError,
     "the base given to float_power_ has dtype Float but the operation's result requires dtype Double"),
    ("logaddexp2_int", lambda: r.logaddexp2(N, N), NotImplementedError,
     "\"logaddexp2_cpu\" not implemented for 'Long'"),
    ("logaddexp2_number", lambda: r.logaddexp2(F, 2.0), TypeError,
     "logaddexp2(): argument 'other' (position 2) must be Tensor, not float"),
    ("fmax_number", lambda: r.fmax(F, 2), TypeError, "fmax(): argument 'other' (position 2) must be Tensor, not int"),
    ("heaviside_number", lambda: r.heaviside(F, 0.5), TypeError,
     "heaviside(): argument 'values' (position 2) must be Tensor, not float"),
    ("heaviside_dtypes", lambda: r.heaviside(N, T(0.5)), RuntimeError,
     "heaviside is not yet implemented for tensors with different dtypes."),
    ("heaviside_backward", lambda: r.heaviside(F.clone().requires_grad_(), T(0.5)).sum().backward(), RuntimeError,
     "derivative for aten::heaviside is not implemented"),
    ("positive_bool", lambda: r.positive(T([True])), RuntimeError,
     "The `+` operator, on a bool tensor is not supported."),
    ("addcdiv_ints", lambda: r.addcdiv(N, N, N), RuntimeError, "Integer division with addcdiv is no longer supported"),
    ("addcmul_bool", lambda: r.addcmul(T([True]), T([True]), T([True])), NotImplementedError,
     "\"addcmul_cpu_out\" not implemented for 'Bool'"),
    ("addcmul_number", lambda: r.addcmul(F, 2.0, F), TypeError,
     "addcmul(): argument 'tensor1' (position 2) must be Tensor, not float"),
    # products
    ("addmm_vector", lambda: r.addmm(r.ones(4), M23, r.ones(3)), RuntimeError, "mat2 must be a matrix, got 1-D tensor"),
    ("addmm_shapes", lambda: r.addmm(r.ones(4), M23, M23), RuntimeError,
     "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"),
    ("addmm_dtype", lambda: r.addmm(r.ones(4), M23, M34.double()), RuntimeError,
     "self and mat2 must have the same dtype, but got Float and Double"),
    ("addmm_input_shape", lambda: r.addmm(r.ones(3), M23, M34), RuntimeError,
     "The expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 1."),
    ("addmv_dtype", lambda: r.addmv(r.ones(2), M23, r.ones(3).double()), RuntimeError,
     "addmv input tensors must have the same dtype, but got Float, Float, and Double"),
    ("addmv_size", lambda: r.addmv(r.ones(2), M23, r.ones(2)), RuntimeError,
     "size mismatch, got input (2), mat (2x3), vec (2)"),
    ("addr_matrix", lambda: r.addr(M23, r.ones(2, 1), r.ones(3)), RuntimeError,
     "addr: Expected 1-D argument vec1, but got 2-D"),
    ("baddbmm_2d", lambda: r.baddbmm(B, r.ones(2, 3), r.ones(5, 3, 4)), RuntimeError, "batch1 must be a 3D tensor"),
    ("baddbmm_batches", lambda: r.baddbmm(r.ones(5, 2, 4), B, r.ones(4, 3, 4)), RuntimeError,
     "Expected size for first two dimensions of batch2 tensor to be: [5, 3] but got: [4, 3]."),
    ("addbmm_batches", lambda: r.addbmm(r.ones(2, 4), B, r.ones(4, 3, 4)), RuntimeError,
     "batch1 and batch2 must have same number of batches, got 5 and 4"),
    ("addbmm_sizes", lambda: r.addbmm(r.ones(2, 4), B, r.ones(5, 2, 4)), RuntimeError,
     "Incompatible matrix sizes for bmm (2x3 and 2x4)"),
    ("kron_number", lambda: r.kron(F, 2), TypeError, "kron(): argument 'other' (position 2) must be Tensor, not int"),
    ("inner_sizes", lambda: r.inner(M23, r.ones(4, 2)), RuntimeError,
     "inner() the last dimension must match on both input tensors but got shapes [2, 3] and [4, 2]"),
    ("inner_dtypes", lambda: r.inner(F, F.double()), RuntimeError, "both inputs should have same dtype"),
    ("vdot_sizes", lambda: r.vdot(F, r.ones(2)), RuntimeError,
     "inconsistent tensor size, expected tensor [3] and src [2] to have the same number of elements"),
    ("vdot_dtypes", lambda: r.vdot(F, F.double()), RuntimeError,
     "dot : expected both vectors to have same dtype, but found Float and Double"),
    ("vdot_matrices", lambda: r.vdot(r.ones(3, 1), r.ones(3, 1)), RuntimeError,
     "1D tensors expected, but got 2D and 2D tensors"),
    ("block_diag_3d", lambda: r.block_diag(r.ones(2, 3, 1)), RuntimeError,
     "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions"),
    ("block_diag_number", lambda: r.block_diag(F, 2), TypeError, "block_diag(): argument 'tensors' must be a sequence"),
    ("cov_3d", lambda: r.cov(r.ones(2, 3, 4)), RuntimeError,
     "cov(): expected input to have two or fewer dimensions but got an input with 3 dimensions"),
    ("cov_float_fweights", lambda: r.cov(M23, fweights=F), RuntimeError,
     "cov(): expected fweights to have integral dtype but got fweights with Float dtype"),
    ("cov_negative_fweights", lambda: r.cov(M23, fweights=T([1, -2, 3])), RuntimeError,
     "cov(): fweights cannot be negative"),
    ("cov_int_aweights", lambda: r.cov(M23, aweights=N), RuntimeError,
     "cov(): expected aweights to have floating point dtype but got aweights with Long dtype"),
    ("cov_negative_aweights", lambda: r.cov(M23, aweights=F), RuntimeError, "cov(): aweights cannot be negative"),
    ("cov_weights_numel", lambda: r.cov(M23, aweights=T([1.0, 2.0])), RuntimeError,
     "cov(): expected aweights to have the same numel as there are observations in the input but got 2 != 3"),
    ("cov_weights_2d", lambda: r.cov(M23, fweights=T([[1, 2, 3]])), RuntimeError,
     "cov(): expected fweights to have one or fewer dimensions but got fweights with 2 dimensions"),
    ("cdist_mode", lambda: r.cdist(M23, M23, compute_mode="x"), ValueError, "x is not a valid value for compute_mode"),
    ("cdist_1d", lambda: r.cdist(F, F), RuntimeError, "cdist only supports at least 2D tensors, X1 got: 1D"),
    ("cdist_columns", lambda: r.cdist(M23, r.ones(4, 2)), RuntimeError,
     "X1 and X2 must have the same number of columns. X1: 3 X2: 2"),
    ("cdist_negative_p", lambda: r.cdist(M23, M23, p=-1), RuntimeError, "cdist only supports non-negative p values"),
    ("cdist_int", lambda: r.cdist(M23.long(), M23.long()), RuntimeError,
     "cdist only supports floating-point dtypes, X1 got: Long"),
    ("cdist_dtypes", lambda: r.cdist(M23, M23.double()), RuntimeError, "expected scalar type Float but found Double"),
    ("cdist_batches", lambda: r.cdist(r.ones(2, 2, 3), r.ones(3, 2, 3)), RuntimeError,
     "cdist: the batch dimensions [2] and [3] cannot be broadcast"),
    # searching and counting
    ("searchsorted_side", lambda: r.searchsorted(F, F, side="middle"), RuntimeError,
     "torch.searchsorted(): side can only be 'left' or 'right' but got middle"),
    ("searchsorted_opposites", lambda: r.searchsorted(F, F, side="left", right=True), RuntimeError,
     "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"),
    ("searchsorted_rows", lambda: r.searchsorted(r.ones(2, 2), r.ones(2)), RuntimeError,
     "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions"),
    ("searchsorted_sorter", lambda: r.searchsorted(F, F, sorter=T([0, 1])), RuntimeError,
     "torch.searchsorted(): boundary and sorter must have the same size"),
    ("bucketize_2d", lambda: r.bucketize(N, T([[1, 3]])), RuntimeError,
     "boundaries tensor must be 1 dimension, but got dim(2)"),
    ("bincount_float", lambda: r.bincount(F), NotImplementedError, "\"bincount_cpu\" not implemented for 'Float'"),
    ("bincount_negative", lambda: r.bincount(T([1, -1])), RuntimeError,
     "bincount only supports 1-d non-negative integral inputs."),
    ("bincount_2d", lambda: r.bincount(T([[1, 3]])), RuntimeError, "bincount only supports 1-d non-negative integral"),
    ("bincount_minlength", lambda: r.bincount(N, minlength=-1), RuntimeError, "minlength should be >= 0"),
    ("bincount_weights", lambda: r.bincount(N, weights=T([1.0, 2.0])), RuntimeError,
     "weights should be 1-d and have the same length as input"),
    ("histc_int", lambda: r.histc(N), NotImplementedError, "\"histogram_cpu\" not implemented for 'Long'"),
    ("histc_bins", lambda: r.histc(F, bins=0), RuntimeError,
     "torch.histogram(): bins must be > 0, but got 0 for dimension 0"),
    ("histc_range", lambda: r.histc(F, bins=4, min=3, max=1), RuntimeError, "torch.histc: max must be larger than min"),
    ("histc_nan", lambda: r.histc(T([1.0, float("nan")])), RuntimeError,
     "torch.histc: range of [-nan, -nan] is not finite"),
    ("histc_inf", lambda: r.histc(T([1.0, 2.0, float("inf")])), RuntimeError,
     "torch.histc: range of [1, inf] is not finite"),
    ("median_bool", lambda: r.median(T([True, False])), NotImplementedError,
     "\"median_cpu\" not implemented for 'Bool'"),
    ("median_empty_dim", lambda: r.median(r.ones(0, 2), 0), IndexError,
     "median(): Expected reduction dim 0 to have non-zero size."),
    ("kthvalue_k", lambda: r.kthvalue(M23, 4), RuntimeError,
     "kthvalue(): selected number k out of range for dimension 1"),
    ("kthvalue_zero", lambda: r.kthvalue(M23, 0), RuntimeError,
     "kthvalue(): selected number k out of range for dimension 1"),
    ("aminmax_empty", lambda: r.aminmax(r.ones(0)), RuntimeError,
     "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."),
    # indexed writes and reads
    ("scatter_reduce_mode", lambda: r.zeros(3).scatter_reduce(0, T([0]), F, "foo"), RuntimeError,
     "reduce argument must be either sum, prod, mean, amax or amin, got foo"),
    ("scatter_reduce_float_index", lambda: r.zeros(3).scatter_reduce(0, T([0.0]), F, "sum"), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
    ("scatter_reduce_dtypes", lambda: r.zeros(3).scatter_reduce(0, T([0]), N, "sum"), RuntimeError,
     "scatter(): Expected self.dtype to be equal to src.dtype"),
    ("scatter_reduce_ndim", lambda: M23.scatter_reduce(0, T([0, 1]), M23, "sum"), RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
    ("scatter_reduce_src_size", lambda: M23.scatter_reduce(0, T([[0, 1, 0]]), r.ones(1, 1), "sum"), RuntimeError,
     "Expected index [1, 3] to be no larger than self [2, 3] apart from dimension 0 and to be no larger size than src "
     "[1, 1]"),
    ("scatter_reduce_bounds", lambda: M23.scatter_reduce(0, T([[2]]), M23, "sum"), RuntimeError,
     "index 2 is out of bounds for dimension 0 with size 2"),
    ("take_float_index", lambda: r.take(M23, T([1.0])), RuntimeError,
     "take(): Expected a long tensor for index, but got Float"),
    ("take_bounds", lambda: r.take(M23, T([-7])), IndexError,
     "out of range: tried to access index -7 on a tensor of 6 elements."),
    ("index_copy_dtype", lambda: M23.index_copy(1, T([2, 0]), r.ones(2, 2).long()), RuntimeError,
     "index_copy_(): self and source expected to have the same dtype, but got (self) Float and (source) Long"),
    ("index_copy_bounds", lambda: M23.index_copy(1, T([2, 3]), r.ones(2, 2)), IndexError,
     "index_copy_(): index 3 is out of bounds for dimension 1 with size 3"),
    ("index_copy_count", lambda: M23.index_copy(1, T([2]), r.ones(2, 2)), IndexError,
     "index_copy_(): Number of indices (1) should be equal to source.size(dim) (2)"),
    ("index_copy_slices", lambda: M23.index_copy(0, T([0]), r.ones(1, 2)), RuntimeError,
     "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: 3 at dimension 1 "
     "and source slice shape: 2 at dimension 1."),
    ("index_fill_value", lambda: M23.index_fill(1, T([0]), T([1.0])), RuntimeError,
     "index_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)."),
    ("index_fill_index_2d", lambda: M23.index_fill(1, T([[0]]), 1), RuntimeError, "Index has to be a vector/scalar"),
    ("index_fill_bounds", lambda: M23.index_fill(1, T([3]), 1), IndexError,
     "index 3 is out of bounds for dimension 1 with size 3"),
    ("index_put_tensor_indices", lambda: M23.index_put(T([0, 1]), T(9.0)), TypeError,
     "index_put(): argument 'indices' (position 1) must be tuple of Tensors, not Tensor"),
    ("index_put_dtype", lambda: M23.index_put((T([0]),), T(9)), RuntimeError,
     "Index put requires the source and destination dtypes match, got Float for the destination and Long for the "
     "source."),
    # splits and joins
    ("hsplit_0d", lambda: r.hsplit(T(1.0), 1), RuntimeError,
     "torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 dimensions!"),
    ("hsplit_indivisible", lambda: r.hsplit(r.ones(2, 6), 4), RuntimeError,
     "torch.hsplit attempted to split along dimension 1, but the size of the dimension 6 is not divisible by the "
     "split_size 4!"),
    ("vsplit_1d", lambda: r.vsplit(F, 3), RuntimeError,
     "torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with 1 dimensions!"),
    ("dsplit_2d", lambda: r.dsplit(M23, 3), RuntimeError,
     "torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with 2 dimensions!"),
    ("column_stack_empty", lambda: r.column_stack([]), RuntimeError, "column_stack expects a non-empty TensorList"),
    ("column_stack_tensor", lambda: r.column_stack(F), TypeError, "column_stack(): argument 'tensors' must be a tuple"),
    ("cartesian_prod_2d", lambda: r.cartesian_prod(T([[1, 2]])), RuntimeError,
     "Expect a 1D vector, but got shape [1, 2]"),
    ("cartesian_prod_dtypes", lambda: r.cartesian_prod(N, F), RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    ("combinations_negative", lambda: r.combinations(N, r=-1), RuntimeError,
     "Expect a non-negative number, but got -1"),
    ("broadcast_shapes", lambda: r.broadcast_shapes((2,), (3,)), RuntimeError,
     "Attempting to broadcast a dimension of length 3 at -1! Mismatching argument at index 1 had (3,); but expected "
     "shape should be broadcastable to [2]"),
    ("broadcast_shapes_negative", lambda: r.broadcast_shapes((-1,), (3,)), ValueError,
     "Attempting to broadcast a dimension with negative length!"),
]


@pytest.mark.parametrize("call, error, message", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_bad_input_raises_torchs_error(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


@pytest.mark.parametrize("call", [
    lambda t: t.float_power_(2),  # float32 self: the result needs float64
    lambda t: t.addcdiv_(t.long(), t.long()),
    lambda t: t.index_copy_(0, T([5]), r.ones(1)),
    lambda t: t.scatter_reduce_(0, T([0]), T([1.0]), "median"),
    lambda t: t.heaviside_(T(1)),
], ids=["float_power_", "addcdiv_", "index_copy_", "scatter_reduce_", "heaviside_"])
def test_a_failed_inplace_call_leaves_the_tensor_as_it_was(call):
    t = T([1.0, 2.0, 3.0])
    with pytest.raises((RuntimeError, IndexError)):
        call(t)
    assert t.tolist() == [1.0, 2.0, 3.0]
    assert t.add_(1).tolist() == [2.0, 3.0, 4.0]  # still usable


def test_cov_warns_where_degrees_of_freedom_run_out():
    with pytest.warns(UserWarning, match=re.escape("cov(): degrees of freedom is <= 0")):
        out = r.cov(r.ones(2, 1))
    assert out.isnan().all()
