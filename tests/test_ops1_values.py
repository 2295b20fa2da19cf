"""Values, dtypes and gradients of the math, search, index and split ops where torch picks a
convention NumPy cannot show (integer and bool inputs, NaN, ties, zeros in products, in-place and
out= forms). The expected values were recorded from torch 2.13 (CPU)."""
import math

import numpy as np
import pytest

import rlpipe as r

T = r.tensor
NAN = float("nan")


def values(t):
    """A tensor's values and dtype name, for comparing with torch's recording."""
    return t.tolist(), t.dtype.name


# ---- pointwise -------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, expected", [
    (lambda: r.atan2(T([1, 2, 3]), T([1, 2, 3])), ([0.7853981852531433] * 3, "float32")),
    (lambda: r.fmod(T([1, 2, 3]), 2), ([1, 0, 1], "int64")),
    (lambda: r.fmod(T([1.0, -2.0, 3.0]), T([0.0, 1.0, 1.0])), ([NAN, -0.0, 0.0], "float32")),
    (lambda: r.fmod(T([5]), 2.5), ([0.0], "float32")),
    (lambda: r.xlogy(T([0.0, 0.0, 1.0]), T([NAN, 0.0, 0.0])), ([NAN, 0.0, -math.inf], "float32")),
    (lambda: r.xlogy(T([1.0, -2.0, 3.0]), 2), ([0.6931471824645996, -1.3862943649291992, 2.079441547393799],
                                                "float32")),
    (lambda: r.float_power(T([1, 2, 3]), 2), ([1.0, 4.0, 9.0], "float64")),
    (lambda: r.float_power(2, T([2])), ([4.0], "float64")),
    (lambda: r.fmax(T([1.0, NAN, 2.0]), T([1.0, 1.0, NAN])), ([1.0, 1.0, 2.0], "float32")),
    (lambda: r.fmin(T([1, 5]), T([2.0, NAN])), ([1.0, 5.0], "float32")),
    (lambda: r.heaviside(T([1.0, -2.0, 0.0]), T(0.5)), ([1.0, 0.0, 0.5], "float32")),
    (lambda: r.heaviside(T([1, -2, 0]), T(7)), ([1, 0, 7], "int64")),
    (lambda: r.sinc(T([0.0, 0.5])), ([1.0, 0.6366197466850281], "float32")),
    (lambda: r.exp2(T([1, 2, 3])), ([2.0, 4.0, 8.0], "float32")),
    (lambda: r.exp2(T([True])), ([2.0], "float32")),
    (lambda: r.acosh(T([2])), ([1.316957950592041], "float32")),
    (lambda: r.erfinv(T([0, 1])), ([0.0, math.inf], "float32")),
    (lambda: r.deg2rad(T([180])), ([math.pi], "float32")),
    (lambda: T([180.0]).deg2rad_(), ([math.pi], "float32")),
    (lambda: T([math.pi]).rad2deg_(), ([180.0], "float32")),
    (lambda: r.logaddexp2(T([1.0, -math.inf]), T([1.0, -math.inf])), ([2.0, -math.inf], "float32")),
    (lambda: r.addcmul(T([1, 2, 3]), T([1, 2, 3]), T([1, 2, 3]), value=0.5), ([1, 2, 3], "int64")),
    (lambda: r.addcmul(T([1.0, -2.0, 3.0]), T([1, 2, 3]), T([1, 2, 3]), value=0.5), ([1.5, 0.0, 7.5], "float32")),
    (lambda: r.addcmul(T([1]), T([2]), T([3.0])), ([7.0], "float32")),
    (lambda: r.addcdiv(T([1.0]), T([2]), T([4.0]), value=2), ([2.0], "float32")),
    (lambda: r.subtract(T([1.0, -2.0]), 1, alpha=2), ([-1.0, -4.0], "float32")),
    (lambda: T([1, 2, 3]).clone().eq_(2), ([0, 1, 0], "int64")),
    (lambda: T([1.0, -2.0, 3.0]).clone().lt_(T([1, 2, 3])), ([0.0, 1.0, 0.0], "float32")),
    (lambda: T([1.0, -2.0, 3.0]).clone().greater_equal_(1), ([1.0, 0.0, 1.0], "float32")),
    (lambda: T([1.0, 2.0]).clone().not_equal_(T([1.0, 3.0])), ([0.0, 1.0], "float32")),
    (lambda: T([1.0, 2.0]).clone().multiply_(3), ([3.0, 6.0], "float32")),
    (lambda: T([1.0, 2.0]).clone().divide_(4), ([0.25, 0.5], "float32")),
    (lambda: T([1.0, 2.0]).clone().arctan2_(T([1.0, -2.0])), ([0.7853981852531433, 2.356194496154785], "float32")),
], ids=lambda x: "" if callable(x) else None)
def test_values_and_dtypes_as_torch(call, expected):
    actual, dtype = values(call())
    np.testing.assert_allclose(actual, expected[0], rtol=1e-6)
    assert dtype == expected[1]


def test_positive_returns_the_tensor_itself():
    x = T([1.0, -2.0])
    assert r.positive(x) is x and x.positive() is x


def test_out_argument():
    out = r.empty(3)
    y = T([1.0, -2.0, 3.0])
    assert r.atan2(y, y, out=out) is out
    np.testing.assert_allclose(out.tolist(), np.arctan2([1.0, -2.0, 3.0], [1.0, -2.0, 3.0]), rtol=1e-6)
    mm_out = r.empty(2, 2)
    r.addmm(r.ones(2), r.eye(2), r.eye(2), out=mm_out)
    assert mm_out.tolist() == [[2.0, 1.0], [1.0, 2.0]]


def test_inplace_variants_record_their_gradient():
    x = T([0.5, 1.5], requires_grad=True)
    y = (x * 1).xlogy_(T([2.0, 3.0]))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [math.log(2), math.log(3)], rtol=1e-6)


# ---- products --------------------------------------------------------------------------------------

def test_addmm_with_beta_zero_ignores_nan_in_input():
    out = r.addmm(r.full((2, 2), NAN), r.eye(2), r.ones(2, 2), beta=0)
    assert out.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_addr_on_bools_is_or_of_and():
    out = r.addr(T([[False, True]]), T([True]), T([False, True]))
    assert out.tolist() == [[False, True]] and out.dtype is r.bool


def test_addr_promotes():
    assert r.addr(r.ones(2, 3), T([1, 2]), r.ones(3)).dtype is r.float32
    assert r.addr(r.ones(2, 3).double(), r.ones(2), r.ones(3)).dtype is r.float64


def test_kron_and_inner_mixed():
    assert values(r.kron(T([1, 2]), T([1.0, 2.0]))) == ([1.0, 2.0, 2.0, 4.0], "float32")
    assert r.inner(T(2.0), r.ones(4, 2)).shape == (4, 2)


def test_block_diag_of_nothing_and_of_mixed_dtypes():
    assert r.block_diag().shape == (1, 0)
    out = r.block_diag(T([[1, 2]]), T(5.0))
    assert values(out) == ([[1.0, 2.0, 0.0], [0.0, 0.0, 5.0]], "float32")


def test_cov_and_corrcoef_of_integer_and_constant_rows():
    assert values(r.cov(T([[0, 1, 2], [2, 1, 0]]))) == ([[1.0, -1.0], [-1.0, 1.0]], "float32")
    assert r.cov(T([1.0, 2.0, 4.0])).shape == ()
    c = r.corrcoef(T([[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]]))
    assert c[0, 0].item() == 1.0 and math.isnan(c[0, 1].item()) and math.isnan(c[1, 1].item())


@pytest.mark.parametrize("p, distance, grad", [  # torch 2.13: cdist([[0, 0], [1, 1]], [[0, 0]], p).sum().backward()
    (0, [0.0, 2.0], [[0.0, 0.0], [0.0, 0.0]]),
    (0.5, [0.0, 4.0], [[0.0, 0.0], [2.0, 2.0]]),
    (1, [0.0, 2.0], [[0.0, 0.0], [1.0, 1.0]]),
    (2, [0.0, 1.4142135381698608], [[0.0, 0.0], [0.7071067690849304, 0.7071067690849304]]),
    (3, [0.0, 1.2599210739135742], [[0.0, 0.0], [0.6299604773521423, 0.6299604773521423]]),
    (math.inf, [0.0, 1.0], [[0.0, 0.0], [1.0, 1.0]]),
])
def test_cdist_gradient_at_zero_distance(p, distance, grad):
    x = T([[0.0, 0.0], [1.0, 1.0]], requires_grad=True)
    d = r.cdist(x, T([[0.0, 0.0]]), p=p)
    d.sum().backward()
    np.testing.assert_allclose(d.detach().reshape(-1).tolist(), distance, rtol=1e-6)
    np.testing.assert_allclose(x.grad.tolist(), grad, rtol=1e-6)


def test_cdist_broadcasts_batches():
    assert r.cdist(r.ones(5, 1, 2, 3), r.ones(4, 4, 3)).shape == (5, 4, 2, 4)
    assert r.cdist(r.ones(0, 3), r.ones(4, 3)).shape == (0, 4)


# ---- searching and counting ------------------------------------------------------------------------

def test_searchsorted_forms():
    s = T([1.0, 3, 5, 7, 9])
    assert values(r.searchsorted(s, 5)) == (2, "int64")
    assert values(r.searchsorted(s, T([3.0, 6, 9]), side="right", out_int32=True)) == ([2, 3, 5], "int32")
    assert r.searchsorted(T([9.0, 1, 5]), T([3.0, 6, 9]), sorter=T([1, 2, 0])).tolist() == [1, 2, 2]
    assert r.searchsorted(T([[1.0, 3], [2, 4]]), T([[2.0], [3]])).tolist() == [[1], [1]]
    assert values(r.bucketize(3, T([1, 3, 5, 7, 9]))) == (1, "int64")


def test_bincount_dtypes():
    idx = T([1, 1, 3])
    assert values(r.bincount(idx)) == ([0, 2, 0, 1], "int64")
    assert values(r.bincount(idx, minlength=6)) == ([0, 2, 0, 1, 0, 0], "int64")
    assert values(r.bincount(idx, weights=T([0.5, 0.5, 2.0]))) == ([0.0, 1.0, 0.0, 2.0], "float32")
    assert values(r.bincount(idx, weights=T([1, 2, 3]))) == ([0.0, 3.0, 0.0, 3.0], "float64")
    assert values(r.bincount(T([], dtype=r.int64))) == ([], "int64")


@pytest.mark.parametrize("data, kwargs, expected", [
    ([1.0, 2, 1], dict(bins=4, min=0, max=3), [0.0, 2.0, 1.0, 0.0]),
    ([1.0, 2, 1], dict(bins=4), [2.0, 0.0, 0.0, 1.0]),
    ([1.0, 1, 1], dict(bins=4), [0.0, 0.0, 3.0, 0.0]),
    ([[1.0, 2], [3, 4]], dict(bins=4, min=1, max=4), [1.0, 1.0, 1.0, 1.0]),
    ([0.1, 0.2, 0.3, 0.7, 5.0, -1.0], dict(bins=10, min=0, max=1), [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]),
])
def test_histc(data, kwargs, expected):
    assert values(r.histc(T(data), **kwargs)) == (expected, "float32")


def test_median_and_nanmedian_with_nan_and_ties():
    x = T([[3.0, 1, 2, 1], [4, NAN, 0, 4]])
    assert math.isnan(r.median(x).item()) and r.median(x[0]).item() == 1.0
    m = r.median(x, 1)
    assert m.values.tolist()[0] == 1.0 and math.isnan(m.values.tolist()[1]) and m.indices.tolist() == [3, 1]
    assert r.nanmedian(x).item() == 2.0
    n = r.nanmedian(x, 1)
    assert n.values.tolist() == [1.0, 4.0] and n.indices.tolist() == [3, 0]
    all_nan = r.nanmedian(T([NAN, NAN]), 0)
    assert math.isnan(all_nan.values.item()) and all_nan.indices.item() == 0
    assert math.isnan(r.median(T([])).item())
    assert values(r.median(T([1, 2, 3, 4]))) == (2, "int64")
    assert type(m).__name__ == "median" and type(n).__name__ == "nanmedian"


def test_median_gradient_is_shared_by_ties():
    x = T([1.0, 2, 2, 4], requires_grad=True)
    r.median(x).backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5, 0.0]


def test_kthvalue_mode_and_aminmax():
    k = r.kthvalue(T([[3.0, 1, 2, 1]]), 2)
    assert k.values.tolist() == [1.0] and k.indices.tolist() == [3]
    mode = r.mode(T([[1, 2, 2, 3, 3], [5, 5, 1, 1, 0]]))
    assert mode.values.tolist() == [2, 1] and mode.indices.tolist() == [2, 3]
    assert tuple(r.mode(T([2, 1, 2, 1, 0, 1, 2]))) == (1, 5)
    nan_mode = r.mode(T([3.0, 1, 3, 1, NAN, NAN, NAN]))
    assert (nan_mode.values.item(), nan_mode.indices.item()) == (1.0, 3)
    mm = r.aminmax(T([[1, 5], [3, 2]]), dim=1, keepdim=True)
    assert mm.min.tolist() == [[1], [2]] and mm.max.tolist() == [[5], [3]]
    full = T([[1.0, 5.0]]).aminmax()
    assert (full.min.item(), full.max.item()) == (1.0, 5.0)


def test_mode_gradient_reaches_the_chosen_element():
    x = T([2.0, 1.0, 2.0], requires_grad=True)
    r.mode(x).values.backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]


def test_unique_consecutive_and_argwhere():
    out, inverse, counts = r.unique_consecutive(T([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True, return_counts=True)
    assert out.tolist() == [1, 2, 3, 1, 2] and counts.tolist() == [2, 2, 1, 2, 1]
    assert inverse.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    rows, counts = T([[1, 1], [1, 1], [2, 3]]).unique_consecutive(dim=0, return_counts=True)
    assert rows.tolist() == [[1, 1], [2, 3]] and counts.tolist() == [2, 1]
    assert r.unique_consecutive(T([[1, 1], [1, 1], [2, 3]]), return_inverse=True)[1].tolist() == [[0, 0], [0, 0],
                                                                                                [1, 2]]
    assert r.argwhere(T([[1, 0], [0, 3]])).tolist() == [[0, 0], [1, 1]]
    assert r.argwhere(T(1)).shape == (1, 0) and r.argwhere(T(0)).shape == (0, 0)


# ---- indexed writes and reads ----------------------------------------------------------------------

# torch 2.13: x=[2, 0, 3], src=[1, 0, 2, 0, 5], index=[0, 0, 1, 1, 2], grad=[1, 2, 3]
_SCATTER_GRADS = {
    ("prod", True): ([0.0, 0.0, 15.0], [0.0, 0.0, 15.0], [0.0, 2.0, 0.0, 0.0, 9.0]),
    ("prod", False): ([0.0, 0.0, 5.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 4.0, 3.0]),
    ("amax", True): ([2.0, 2.0, 5.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0, 3.0]),
    ("amax", False): ([1.0, 2.0, 5.0], [0.0, 0.0, 0.0], [1.0, 0.0, 2.0, 0.0, 3.0]),
    ("amin", True): ([0.0, 0.0, 3.0], [0.0, 1.0, 3.0], [0.0, 1.0, 0.0, 1.0, 0.0]),
    ("amin", False): ([0.0, 0.0, 5.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0, 3.0]),
    ("mean", True): ([1.0, 2 / 3, 4.0], [1 / 3, 2 / 3, 1.5], [1 / 3, 1 / 3, 2 / 3, 2 / 3, 1.5]),
    ("mean", False): ([0.5, 1.0, 5.0], [0.0, 0.0, 0.0], [0.5, 0.5, 1.0, 1.0, 3.0]),
    ("sum", True): ([3.0, 2.0, 8.0], [1.0, 2.0, 3.0], [1.0, 1.0, 2.0, 2.0, 3.0]),
    ("sum", False): ([1.0, 2.0, 5.0], [0.0, 0.0, 0.0], [1.0, 1.0, 2.0, 2.0, 3.0]),
}


@pytest.mark.parametrize("reduce, include_self", list(_SCATTER_GRADS))
def test_scatter_reduce_values_and_gradients_as_torch(reduce, include_self):
    x = T([2.0, 0.0, 3.0], requires_grad=True)
    src = T([1.0, 0.0, 2.0, 0.0, 5.0], requires_grad=True)
    out = x.scatter_reduce(0, T([0, 0, 1, 1, 2]), src, reduce, include_self=include_self)
    out.backward(T([1.0, 2.0, 3.0]))
    expected_out, expected_x, expected_src = _SCATTER_GRADS[reduce, include_self]
    np.testing.assert_allclose(out.tolist(), expected_out, rtol=1e-6)
    np.testing.assert_allclose(x.grad.tolist(), expected_x, rtol=1e-6)
    np.testing.assert_allclose(src.grad.tolist(), expected_src, rtol=1e-6)


def test_scatter_reduce_integer_mean_and_inplace():
    idx, s = T([[0, 1, 0], [1, 1, 1]]), T([[1, 2, 3], [4, 5, 6]])
    assert r.zeros(2, 3, dtype=r.int64).scatter_reduce(0, idx, s, "mean").tolist() == [[0, 0, 1], [2, 2, 3]]
    assert r.zeros(2, 3, dtype=r.int64).scatter_reduce(0, idx, s * 3, "mean", include_self=False).tolist() == [
        [3, 0, 9], [12, 10, 18]]
    y = r.zeros(3)
    assert y.scatter_reduce_(0, T([0, 0]), T([1.0, 2.0]), "sum") is y and y.tolist() == [3.0, 0.0, 0.0]
    assert r.zeros(2).scatter_reduce(0, T([0, 0]), T([1.0, 2.0]), "max").tolist() == [2.0, 0.0]


def test_index_put_forms():
    x = r.arange(6.0).reshape(2, 3)
    assert x.index_put((T([0, 0]), T([2, 2])), T([1.0, 2.0]), accumulate=True).tolist() == [[0, 1, 5], [3, 4, 5]]
    mask = T([[True, False, True], [False, False, True]])
    assert x.index_put((mask,), T(9.0), accumulate=True).tolist() == [[9, 1, 11], [3, 4, 14]]
    assert x.index_put([T([0])], T([1.0, 2, 3])).tolist() == [[1, 2, 3], [3, 4, 5]]
    y = x.clone()
    assert y.index_put_((T([1]),), T(0.0)) is y and y.tolist() == [[0, 1, 2], [0, 0, 0]]
    assert r.index_put(x, (T([0]), T([1])), T(7.0)).tolist() == [[0, 7, 2], [3, 4, 5]]


def test_index_put_accumulate_gradient():
    x = r.zeros(3, requires_grad=True)
    v = T([1.0, 2.0], requires_grad=True)
    out = x.index_put((T([1, 1]),), v, accumulate=True)
    out.backward(T([1.0, 2.0, 3.0]))
    assert out.tolist() == [0.0, 3.0, 0.0] and x.grad.tolist() == [1.0, 2.0, 3.0] and v.grad.tolist() == [2.0, 2.0]


def test_index_fill_and_copy_forms():
    x = r.arange(6.0).reshape(2, 3)
    assert x.long().index_fill(1, T([0]), 1.5).tolist() == [[1, 1, 2], [1, 4, 5]]
    assert r.index_copy(x, 0, T([1, 1]), T([[10.0, 11, 12], [13, 14, 15]])).tolist()[0] == [0.0, 1.0, 2.0]
    v = T(2.0, requires_grad=True)
    r.index_fill(r.zeros(2, 3), 1, T([0, 2]), v).sum().backward()
    assert v.grad.item() == 4.0
    y = x.clone()
    assert y.index_fill_(0, T([0]), -1) is y and y.tolist()[0] == [-1.0, -1.0, -1.0]
    assert r.take(T(5.0), T([0, 0])).tolist() == [5.0, 5.0]


# ---- splits and joins ------------------------------------------------------------------------------

def test_splits_return_tuples_of_views():
    x = r.arange(12.0).reshape(2, 6)
    parts = r.hsplit(x, [1, 4])
    assert type(parts) is tuple and [p.shape for p in parts] == [(2, 1), (2, 3), (2, 2)]
    assert [p.shape for p in r.hsplit(r.arange(6.0), 2)] == [(3,), (3,)]


def test_broadcast_shapes_and_joins():
    assert r.broadcast_shapes((2, 1), (3,)) == (2, 3) and r.broadcast_shapes(2, (3, 1)) == (3, 2)
    assert r.broadcast_shapes() == () and type(r.broadcast_shapes((1,))) is r.Size
    assert values(r.column_stack([T(1), T(2)])) == ([[1, 2]], "int64")
    assert r.column_stack([r.zeros(2, 2, 2), r.zeros(2, 1, 2)]).shape == (2, 3, 2)
    assert r.cartesian_prod(T([1, 2])).tolist() == [1, 2]
    assert r.combinations(T([1, 2, 3]), with_replacement=True).tolist() == [[1, 1], [1, 2], [1, 3], [2, 2], [2, 3],
                                                                          [3, 3]]
    assert r.combinations(T([1, 2, 3]), r=4).shape == (0, 4) and r.combinations(T([1, 2, 3]), r=0).shape == (0,)
    assert r.combinations(T([1, 2, 3]), r=3).tolist() == [[1, 2, 3]]


# ---- the further ops -------------------------------------------------------------------------------

@pytest.mark.parametrize("call, expected", [
    (lambda: r.sgn(T([-2.0, 0.0, 3.0])), ([-1.0, 0.0, 1.0], "float32")),
    (lambda: r.rsub(T([1.0, 2.0]), 5), ([4.0, 3.0], "float32")),
    (lambda: r.ldexp(T([1, 2]), T([2, 3])), ([4.0, 16.0], "float32")),
    (lambda: r.gcd(T([4, 6, 0]), T([6, 9, 5])), ([2, 3, 5], "int64")),
    (lambda: r.lcm(T([4, 6, 0]), T([6, 9, 5])), ([12, 18, 0], "int64")),
    (lambda: r.nextafter(T([1.0]), T([2.0])), ([1.0000001192092896], "float32")),
    (lambda: r.logcumsumexp(T([-math.inf, 1.0, math.inf]), 0), ([-math.inf, 1.0, math.inf], "float32")),
    (lambda: r.logcumsumexp(T(2.0), 0), (2.0, "float32")),
    (lambda: r.dist(T([1.0, 2.0]), T([4.0, 6.0])), (5.0, "float32")),
    (lambda: r.dist(T([1.0, 2.0]), T([4.0, 6.0]), 0), (2.0, "float32")),
    (lambda: r.dist(T([1.0, 2.0]), T([4.0, 6.0]), math.inf), (4.0, "float32")),
    (lambda: r.trapezoid(T([1, 2, 3])), (4.0, "float32")),
    (lambda: r.trapz(T([1.0, 2, 3]), T([0.0, 1, 3])), (6.5, "float32")),
    (lambda: r.trapezoid(T([])), (0.0, "float32")),
    (lambda: r.cumulative_trapezoid(T([[1.0, 2, 3]]), T([0.0, 1, 3])), ([[1.5, 6.5]], "float32")),
    (lambda: r.isin(T([[1, 2], [3, 4]]), T([2, 3]), invert=True), ([[True, False], [False, True]], "bool")),
    (lambda: r.isin(2, T([1, 2])), (True, "bool")),
    (lambda: T([[1.0, 2], [3, 4]]).put(T([-1]), T([9.0])), ([[1.0, 2.0], [3.0, 9.0]], "float32")),
    (lambda: T([1.0, 2, 3, 4]).masked_scatter(T([[True], [False]]), T([9.0, 8, 7, 6, 5, 4, 3, 2])),
     ([[9.0, 8.0, 7.0, 6.0], [1.0, 2.0, 3.0, 4.0]], "float32")),
    (lambda: T([[1.0, 2], [3, 4]]).index_reduce(0, T([0, 0]), T([[2.0, 2], [3, 3]]), "mean", include_self=False),
     ([[2.5, 2.5], [3.0, 4.0]], "float32")),
    (lambda: r.tril_indices(3, 4, 1), ([[0, 0, 1, 1, 1, 2, 2, 2, 2], [0, 1, 0, 1, 2, 0, 1, 2, 3]], "int64")),
    (lambda: r.triu_indices(3, 3, dtype=r.int32), ([[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]], "int32")),
    (lambda: r.triu_indices(0, 3), ([[], []], "int64")),
    (lambda: r.dstack([T(1), T(2)]), ([[[1, 2]]], "int64")),
    (lambda: r.row_stack([T([1, 2]), T([3, 4])]), ([[1, 2], [3, 4]], "int64")),
    (lambda: r.diagflat(T([1, 2]), -1), ([[0, 0, 0], [1, 0, 0], [0, 2, 0]], "int64")),
], ids=lambda x: "" if callable(x) else None)
def test_further_values_as_torch(call, expected):
    actual, dtype = values(call())
    np.testing.assert_allclose(actual, expected[0], rtol=1e-6)
    assert dtype == expected[1]


@pytest.mark.parametrize("call, expected", [
    (lambda: T([1.0, 0.0, 2.0]).logical_and_(T([1.0, 1.0, 0.0])), ([1.0, 0.0, 0.0], "float32")),
    (lambda: T([1, 0, 2]).logical_not_(), ([0, 1, 0], "int64")),
    (lambda: T([1, 2, 3]).bitwise_xor_(1).bitwise_not_(), ([-1, -4, -3], "int64")),
    (lambda: T([[1.0, 2.0], [3.0, 4.0]]).cumsum_(0), ([[1.0, 2.0], [4.0, 6.0]], "float32")),
    (lambda: T([-1.5]).absolute_(), ([1.5], "float32")),
    (lambda: r.fix_(T([-1.5, 2.5])), ([-1.0, 2.0], "float32")),
    (lambda: r.zeros(3, 4).fill_diagonal_(5), ([[5.0, 0, 0, 0], [0, 5, 0, 0], [0, 0, 5, 0]], "float32")),
    (lambda: r.zeros(7, 3).fill_diagonal_(1, wrap=True),
     ([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], "float32")),
    (lambda: r.zeros(2, 2, 2).fill_diagonal_(1), ([[[1.0, 0], [0, 0]], [[0, 0], [0, 1]]], "float32")),
], ids=lambda x: "" if callable(x) else None)
def test_inplace_aliases_as_torch(call, expected):
    actual, dtype = values(call())
    np.testing.assert_allclose(actual, expected[0], rtol=1e-6)
    assert dtype == expected[1]


def test_dtype_queries_as_torch():
    cases = [((T([1]), 1.0), r.float32), ((T([1]), T(1.0)), r.float32), ((T([1.0]), T([1.0]).double()), r.float64),
             ((T([True]), 5), r.int64), ((2, 3.5), r.float32), ((1, 2), r.int64),
             ((T([1], dtype=r.uint8), T([1], dtype=r.int8)), r.int16), ((T(1.0), T([1])), r.float32)]
    for (a, b), expected in cases:
        assert r.result_type(a, b) is expected
    kinds = [r.bool, r.uint8, r.int8, r.int64, r.float16, r.float32, r.float64]
    allowed = [[int(r.can_cast(a, b)) for b in kinds] for a in kinds]
    assert allowed == [[1] * 7] + [[0, 1, 1, 1, 1, 1, 1]] * 3 + [[0, 0, 0, 0, 1, 1, 1]] * 3


def test_nanquantile_and_pdist_as_torch():
    x = T([[1.0, NAN, 3, 4], [NAN] * 4])
    out = r.nanquantile(x, T([0.25, 0.5]), dim=1)
    assert out[:, 0].tolist() == [2.0, 3.0] and out[:, 1].isnan().all()
    assert r.nanquantile(T([1.0, NAN, 3, 4, 6]), 0.5, interpolation="nearest").item() == 4.0
    x = T([[1.0, NAN, 3, 4], [2, 5, 1, 0]], requires_grad=True)
    y = r.nanquantile(x, 0.4, dim=1, keepdim=True)
    y.sum().backward()
    np.testing.assert_allclose(y.tolist(), [[2.6], [1.2]], rtol=1e-6)
    np.testing.assert_allclose(x.grad.tolist(), [[0.2, 0.0, 0.8, 0.0], [0.2, 0.0, 0.8, 0.0]], rtol=1e-6)
    assert r.pdist(T([[0.0, 0], [3, 4], [6, 8]])).tolist() == [5.0, 10.0, 5.0]
    assert r.pdist(T([[0.0, 0], [3, 4]]), p=1).tolist() == [7.0] and r.pdist(T([[0.0, 0]])).shape == (0,)


def test_histogram_as_torch():
    hist, edges = r.histogram(T([1.0, 2, 1]), bins=4, range=(0.0, 3.0), weight=T([1.0, 2.0, 4.0]))
    assert hist.tolist() == [0.0, 5.0, 2.0, 0.0] and edges.tolist() == [0.0, 0.75, 1.5, 2.25, 3.0]
    assert r.histogram(T([1.0, 2, 1, 2.5, 7]), bins=T([0.0, 1, 2.5, 3])).hist.tolist() == [0.0, 3.0, 1.0]
    one_point = r.histogram(T([1.0, 1, 1]), bins=2)
    assert one_point.hist.tolist() == [0.0, 3.0] and one_point.bin_edges.tolist() == [0.5, 1.0, 1.5]
    np.testing.assert_allclose(r.histogram(T([1.0, 2, 1]), bins=4, density=True).hist.tolist(),
                               [2.6666667, 0.0, 0.0, 1.3333334], rtol=1e-6)


def test_scatter_with_reduce_as_torch():
    assert T([1.0, 2, 3]).scatter(0, T([0, 0]), T([2.0, 3.0]), reduce="multiply").tolist() == [6.0, 2.0, 3.0]
    assert T([1.0, 2, 3]).scatter(0, T([0, 0]), 5.0, reduce="multiply").tolist() == [25.0, 2.0, 3.0]
    t = T([1.0, 2, 3])
    assert t.scatter_(0, T([0, 0]), 5.0, reduce="add") is t and t.tolist() == [11.0, 2.0, 3.0]


def test_vander_of_ints_bools_and_no_columns():
    assert values(r.vander(T([1, 2, 3]))) == ([[1, 1, 1], [4, 2, 1], [9, 3, 1]], "int64")
    assert values(r.vander(T([True, False]))) == ([[1, 1], [0, 1]], "int64")
    assert r.vander(T([1, 2]), N=0).shape == (2, 0)
    assert r.tensordot(r.ones(3, 4, 5), r.ones(4, 5, 6), dims=0).shape == (3, 4, 5, 4, 5, 6)
    assert r.tensordot(r.ones(3, 4, 5), r.ones(4, 5, 6), dims=T([[1], [0]])).shape == (3, 5, 5, 6)


@pytest.mark.parametrize("call, expected", [
    (lambda: r.bitwise_left_shift(T([1, 2, -3]), T([1, 2, 1])), ([2, 8, -6], "int64")),
    (lambda: r.bitwise_right_shift(T([8, -8]), 2), ([2, -2], "int64")),
    (lambda: r.bitwise_left_shift(T([1], dtype=r.int8), 9), ([0], "int8")),
    (lambda: r.bitwise_right_shift(T([8]), -1), ([0], "int64")),
    (lambda: r.bitwise_right_shift(T([-8]), 70), ([-1], "int64")),
    (lambda: 1 << T([1, 2]), ([2, 4], "int64")),
    (lambda: T([16]) >> 2, ([4], "int64")),
    (lambda: r.angle(T([-1.0, 0, 2, NAN, math.inf, -math.inf])), ([math.pi, 0, 0, NAN, 0, math.pi], "float32")),
    (lambda: r.angle(T([-1, 0])), ([math.pi, 0.0], "float32")),
], ids=lambda x: "" if callable(x) else None)
def test_shifts_and_angle_as_torch(call, expected):
    actual, dtype = values(call())
    np.testing.assert_allclose(actual, expected[0], rtol=1e-6)
    assert dtype == expected[1]


def test_inplace_shift():
    x = T([1, 2])
    x <<= 2
    assert x.tolist() == [4, 8] and x.bitwise_right_shift_(1) is x and x.tolist() == [2, 4]


def test_gradient_forms_as_torch():
    assert r.gradient(T([1.0, 4, 9, 16]))[0].tolist() == [3.0, 4.0, 6.0, 7.0]
    np.testing.assert_allclose(r.gradient(T([1.0, 4, 9, 16]), spacing=(T([0.0, 1, 3, 4]),), edge_order=2)[0].tolist(),
                               [3.1666667, 2.8333333, 5.5, 8.5], rtol=1e-6)
    assert values(r.gradient(T([1, 4, 9]))[0]) == ([3.0, 4.0, 5.0], "float32")
    assert r.gradient(T(1.0)) == () and len(r.gradient(r.ones(2, 3))) == 2


def test_special_namespace_as_torch():
    S = r.special
    np.testing.assert_allclose(S.entr(T([0.0, 0.5, -1.0, 2.0])).tolist(), [0.0, 0.3465736, -math.inf, -1.3862944],
                               rtol=1e-6)
    x = T([0.0, 0.5, 2.0], requires_grad=True)
    S.entr(x).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [math.inf, -0.30685282, -1.6931472], rtol=1e-6)
    assert S.xlog1py(T([0.0, 2.0]), T([-1.0, 1.0])).tolist() == pytest.approx([0.0, 2 * math.log(2)])
    assert math.isnan(S.xlog1py(T([0.0]), T([NAN])).item())
    assert S.ndtri(T([0.0, 1.0])).tolist() == [-math.inf, math.inf]
    assert S.multigammaln(T([0.5]), 3).item() == math.inf
    np.testing.assert_allclose(r.polygamma(1, T([-1.5])).tolist(), [9.3792], rtol=1e-4)
    x = T([1.0, 2.0], requires_grad=True)
    S.polygamma(1, x).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [-2.4041138, -0.4041138], rtol=1e-6)
    assert S.expit is r.sigmoid and S.gammaln is r.lgamma and S.psi is r.digamma
    assert S.multigammaln(T([2.5]), 2).item() == pytest.approx(0.8570, abs=1e-4)


def test_frexp_and_unravel_index():
    mantissa, exponent = r.frexp(T([8.0, 0.3]))
    np.testing.assert_allclose(mantissa.tolist(), [0.5, 0.6], rtol=1e-6)
    assert exponent.tolist() == [4, -1] and exponent.dtype is r.int32
    rows, cols = r.unravel_index(T([4, 1]), (2, 3))
    assert rows.tolist() == [1, 0] and cols.tolist() == [1, 1]
    assert [t.item() for t in r.unravel_index(T(4), (2, 3))] == [1, 1]


def test_gradients_of_the_further_writes_as_torch():
    x, s = T([1.0, 2, 3, 4], requires_grad=True), T([2.0, 3.0], requires_grad=True)
    x.index_reduce(0, T([0, 0]), s, "prod").sum().backward()
    assert x.grad.tolist() == [6.0, 1.0, 1.0, 1.0] and s.grad.tolist() == [3.0, 2.0]
    x, s = T([1.0, 2, 3, 4], requires_grad=True), T([9.0, 8, 7], requires_grad=True)
    x.masked_scatter(T([True, False, True, False]), s).backward(T([1.0, 2, 3, 4]))
    assert x.grad.tolist() == [0.0, 2.0, 0.0, 4.0] and s.grad.tolist() == [1.0, 3.0, 0.0]
    x = T([0.0, 1.0, -1000.0], requires_grad=True)
    y = r.logcumsumexp(x, 0)
    y.backward(T([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(y.tolist(), [0.0, 1.31326162815094, 1.31326162815094], rtol=1e-6)
    np.testing.assert_allclose(x.grad.tolist(), [2.3447072505950928, 3.6552932262420654, 0.0], rtol=1e-6)


def test_inplace_forms_of_the_further_ops():
    t = T([[1.0, 2], [3, 4]])
    assert t.put_(T([0, 0]), T([9.0, 8]), accumulate=True) is t and t.tolist() == [[18.0, 2.0], [3.0, 4.0]]
    g = T([4, 6])
    assert g.gcd_(T([6, 9])) is g and g.tolist() == [2, 3]
    assert r.xlogy_(T([1.0, 2.0]), 2.0).tolist() == pytest.approx([math.log(2), 2 * math.log(2)])


def test_addcmul_addcdiv_inplace_fast_and_general_paths():
    rng = np.random.default_rng(0)
    p, a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    b = np.abs(b) + 0.5
    fast = T(p)  # same shapes, no graph: written in place directly
    view = fast[0]
    version = fast._version
    fast.addcmul_(T(a), T(b), value=0.3).addcdiv_(T(a), T(b), value=-0.7)
    assert fast._version == version + 2 and view.tolist() == fast[0].tolist()
    np.testing.assert_allclose(fast.tolist(), p + 0.3 * a * b - 0.7 * a / b, rtol=1e-5, atol=1e-6)
    general = T(p).addcmul_(T(a), T(b[:1]), value=0.3).addcdiv_(T(a), T(b[:1]), value=-0.7)  # broadcast
    np.testing.assert_allclose(general.tolist(), p + 0.3 * a * b[:1] - 0.7 * a / b[:1], rtol=1e-5, atol=1e-6)
    x = T(p, requires_grad=True)
    (x * 1).addcdiv_(T(a), T(b), value=2).sum().backward()  # recorded: the general path
    assert x.grad.tolist() == np.ones((3, 4)).tolist()


@pytest.mark.cuda
@pytest.mark.skipif(not r.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_addcmul_addcdiv_inplace_fast_path_on_cuda_matches_cpu():
    rng = np.random.default_rng(1)
    p, a, b = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    results = []
    for device in ("cpu", "cuda"):
        x = T(p, device=device)
        x.addcmul_(T(a, device=device), T(b, device=device), value=0.5)
        x.addcdiv_(T(a, device=device), T(np.abs(b) + 1, device=device), value=2)
        results.append(x.cpu().tolist())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
