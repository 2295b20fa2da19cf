"""The small-op fast paths (issue 16): indexing, views, in-place arithmetic, copy_, casts and
index_add_ where no graph is recorded. Each must give what the general path and torch give:
values against NumPy, views that write through and share the version counter, torch's errors
with the tensor left unchanged, and the general path wherever the fast one does not apply."""
import numpy as np
import pytest

import rlpipe as r

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not r.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")])]


def host(t):
    return t.detach().cpu().numpy()


def grid(device, rows=4, cols=5):
    """0, 1, 2 ... in a rows x cols tensor that is no view (its views' base is itself)."""
    return r.tensor(np.arange(float(rows * cols)).reshape(rows, cols), dtype=r.float32, device=device)


# ---- basic indexing --------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", [1, -1, (2, 3), (slice(None), 2), slice(1, 3), slice(None, None, 2),
                                   (None, 1), (1, None, slice(0, 5, 3)), (), (slice(-3, None), -2)])
def test_basic_index_matches_numpy_and_the_graph_path(device, index):
    x = grid(device)
    expected = np.arange(20.0).reshape(4, 5)[index]
    with r.no_grad():
        fast = x[index]
    graph = x.clone().requires_grad_()[index]  # the general path (records a node)
    np.testing.assert_array_equal(host(fast), expected)
    np.testing.assert_array_equal(host(graph), expected)
    assert fast.shape == graph.shape and fast._base is x and fast._version == x._version


@pytest.mark.parametrize("device", DEVICES)
def test_views_from_indexing_write_through_to_the_base(device):
    x = grid(device)
    x[1].add_(100)
    x[:, 2].mul_(-1)
    x[3][1:3].zero_()
    np.testing.assert_array_equal(host(x), [[0, 1, -2, 3, 4], [105, 106, -107, 108, 109],
                                            [10, 11, -12, 13, 14], [15, 0, 0, 18, 19]])
    assert x._version == 3
    inner = x[3][1:3]
    assert inner._base is x  # a view of a view hangs on the root


@pytest.mark.parametrize("device", DEVICES)
def test_an_element_of_a_vector_is_a_view(device):
    """x[i] of a 1-d tensor was a copy: in-place ops on it did not reach x (torch's reach it)."""
    x = r.arange(5.0, device=device)
    element = x[3]
    element.add_(10)
    x[1].fill_(7)
    np.testing.assert_array_equal(host(x), [0, 7, 2, 13, 4])
    assert element.shape == () and element._base is x and element._version == x._version == 2


def test_index_errors_are_torchs():
    x = r.zeros(2, 3)
    with pytest.raises(IndexError, match="^index 5 is out of bounds for dimension 0 with size 2$"):
        x[5]
    with pytest.raises(IndexError, match="^index 7 is out of bounds for dimension 1 with size 3$"):
        x[:, 7]
    with pytest.raises(IndexError, match="^index 5 is out of bounds for dimension 0 with size 2$"):
        x[r.tensor([5])]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(IndexError, match="valid indices"):
        x[1.5]


def test_indices_the_fast_path_leaves_to_the_general_one():
    x = grid("cpu")
    np.testing.assert_array_equal(host(x[np.int64(2)]), [10, 11, 12, 13, 14])  # NumPy integer
    np.testing.assert_array_equal(host(x[r.tensor(1)]), [5, 6, 7, 8, 9])      # 0-d tensor
    np.testing.assert_array_equal(host(x[..., 1]), [1, 6, 11, 16])             # Ellipsis
    np.testing.assert_array_equal(host(x[r.tensor([3, 0]), 1]), [16, 1])       # advanced
    np.testing.assert_array_equal(host(x[True]), host(x)[None])                # bool
    assert x[r.tensor([3, 0])]._base is None                                   # a copy, not a view


# ---- view, reshape, unsqueeze ----------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(-1,), (5, 4), ((2, 10),), ([20],), (r.Size([2, 2, 5]),), (2, -1, 5)])
def test_view_reshapes_without_copying(device, shape):
    x = grid(device)
    with r.no_grad():
        v = x.view(*shape)
    dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    np.testing.assert_array_equal(host(v), np.arange(20.0).reshape(tuple(dims)))
    v.add_(1)
    assert host(x)[0, 0] == 1 and v._base is x and x._version == v._version == 1


def test_view_and_reshape_errors_are_unchanged():
    x = r.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"^view size is not compatible with input tensor's size and stride"):
        x.t().view(6)
    with pytest.raises(RuntimeError, match=r"^shape '\[4, 3\]' is invalid for input of size 6$"):
        x.view(4, 3)
    with pytest.raises(RuntimeError, match=r"^shape '\[-2, 3\]' is invalid for input of size 6$"):
        x.view(-2, 3)  # NumPy would read any negative size as 'infer'
    with pytest.raises(RuntimeError, match=r"^shape '\[-3, 2\]' is invalid for input of size 6$"):
        x.reshape([-3, 2])
    assert x.view(np.int64(3), -1).shape == x.reshape([np.int64(-1), 2]).shape == (3, 2)
    with pytest.raises(RuntimeError, match="^only one dimension can be inferred$"):
        x.reshape(-1, -1)


@pytest.mark.parametrize("method", ["view", "reshape"])
@pytest.mark.parametrize("sizes", [(2.0, 3), (None,), (2.5,), ([3, 2.0],)])
def test_sizes_must_be_integers_as_torch_asks(method, sizes):
    # torch 2.13: x.view(2.0, 3) and x.view(None) are TypeErrors (NumPy and int() would take them)
    with pytest.raises(TypeError, match="must be tuple of ints, but found element of type"):
        getattr(r.zeros(6), method)(*sizes)


def test_integer_sizes_of_every_kind_and_view_as_a_dtype():
    x = r.zeros(6)
    assert x.view(np.int64(2), r.tensor(3)).shape == x.reshape((r.tensor(2), 3)).shape == (2, 3)
    assert x.view(r.float64).shape == (3,) and x.view(r.float64).dtype is r.float64
    with pytest.raises(TypeError, match="found element of type Tensor at pos 1"):
        x.reshape(2, r.tensor(3.0))  # a float 0-d tensor is not a size either (torch: TypeError)


def test_reshape_copies_where_the_layout_needs_it_and_only_then_is_a_view():
    x = grid("cpu")
    flat = x.t().reshape(-1)
    np.testing.assert_array_equal(host(flat), np.arange(20.0).reshape(4, 5).T.reshape(-1))
    assert flat._base is None
    flat.add_(1)
    assert host(x)[0, 1] == 1  # x untouched
    same = x.reshape(2, 10)
    assert same._base is x and np.shares_memory(same.numpy(), x.numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_unsqueeze_is_a_view(device, dim):
    x = grid(device)
    u = x.unsqueeze(dim)
    assert u.shape == np.expand_dims(np.zeros((4, 5)), dim).shape and u._base is x
    u.mul_(2)
    assert host(x)[1, 1] == 12
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)"):
        x.unsqueeze(3)


# ---- in-place arithmetic ---------------------------------------------------------------------

OPS = {"add_": np.add, "sub_": np.subtract, "mul_": np.multiply, "div_": np.true_divide,
       "__iadd__": np.add, "__isub__": np.subtract, "__imul__": np.multiply, "__itruediv__": np.true_divide}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("other", ["tensor", 3, 0.5])
def test_inplace_arithmetic_in_place(device, name, other):
    a = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 4.0, np.float32) if other == "tensor" else other
    x = r.tensor(a, device=device)
    operand = r.tensor(b, device=device) if other == "tensor" else other
    memory = x.data_ptr()
    out = getattr(x, name)(operand)
    assert out is x and x.data_ptr() == memory and x._version == 1 and x.dtype is r.float32
    np.testing.assert_allclose(host(x), OPS[name](a, b), rtol=1e-6)


def test_inplace_arithmetic_with_itself_and_through_a_view():
    x = r.arange(4.0)
    x.add_(x)
    np.testing.assert_array_equal(host(x), [0, 2, 4, 6])
    m = r.zeros(2, 3)
    m[1].sub_(r.ones(3))
    np.testing.assert_array_equal(host(m), [[0, 0, 0], [-1, -1, -1]])
    assert m._version == 1


def test_inplace_arithmetic_cases_left_to_the_general_path():
    x = r.ones(2, 3)
    x.add_(r.tensor([1.0, 2.0, 3.0]))                       # broadcasting
    x.add_(r.ones(2, 3, dtype=r.float64))                   # another dtype
    x.sub_(r.ones(2, 3), alpha=2)                           # alpha
    np.testing.assert_array_equal(host(x), [[1, 2, 3], [1, 2, 3]])
    assert x.dtype is r.float32 and x._version == 3
    n = r.tensor([1, 2])
    n.mul_(3)
    assert n.tolist() == [3, 6] and n.dtype is r.int64
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        n.add_(0.5)
    assert n.tolist() == [3, 6]


def test_inplace_arithmetic_refuses_what_torch_refuses():
    e = r.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        e.add_(1.0)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        e.mul_(r.ones(2, 3))
    assert e._version == 0
    leaf = r.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        leaf.add_(1.0)
    with r.no_grad():  # what optimizers do
        leaf.add_(1.0)
    assert leaf.tolist() == [2.0, 2.0, 2.0] and leaf._version == 1 and leaf.requires_grad and leaf.grad_fn is None


def test_inplace_arithmetic_with_grad_still_records():
    w = r.tensor([1.0, 2.0], requires_grad=True)
    y = w * 1
    y.mul_(w)
    y.add_(1.0)
    y.sum().backward()
    assert w.grad.tolist() == [2.0, 4.0] and y.grad_fn is not None


# ---- copy_ and casts -------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_copy_of_a_like_tensor(device):
    x = r.zeros(2, 3, device=device)
    src = r.arange(6.0, device=device).reshape(2, 3)
    assert x.copy_(src) is x and x._version == 1
    src.add_(1)
    np.testing.assert_array_equal(host(x), np.arange(6.0).reshape(2, 3))  # copied, not aliased
    x.copy_(r.tensor([1, 2, 3], device=device))  # broadcast and cast: the general path
    np.testing.assert_array_equal(host(x), [[1, 2, 3], [1, 2, 3]])
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        r.zeros(3).expand(2, 3).copy_(src)


@pytest.mark.parametrize("device", DEVICES)
def test_casts_copy(device):
    x = r.tensor([[1.7, -2.2], [3.0, 0.5]], device=device)
    as_long = x[0].long()
    assert as_long.dtype is r.int64 and as_long.tolist() == [1, -2] and as_long._base is None
    as_long.add_(5)
    assert x[0].tolist() == pytest.approx([1.7, -2.2])
    assert x.float() is x
    y = r.tensor([1.5], requires_grad=True)
    assert y.double().grad_fn is not None and y.long().grad_fn is None


# ---- zeros_like / ones_like / empty_like ---------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_like_factories_with_the_input_dtype_and_device(device):
    src = r.arange(6, dtype=r.int16, device=device).reshape(2, 3).t()  # a transposed view
    for make, value in [(r.zeros_like, 0), (r.ones_like, 1), (r.empty_like, None)]:
        out = make(src)
        assert out.shape == (3, 2) and out.dtype is r.int16 and out.device == src.device
        assert out._base is None and out._version == 0 and not out.requires_grad
        if value is not None:
            np.testing.assert_array_equal(host(out), np.full((3, 2), value))
    grad = r.zeros_like(r.ones(2, device=device), requires_grad=True)
    assert grad.requires_grad and grad.is_leaf and host(grad).tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="floating point and complex dtype can require gradients"):
        r.zeros_like(src, requires_grad=True)
    assert np.signbit(host(r.full((2,), -0.0, device=device))).all()  # -0.0 is not the zeros fast path


# ---- index_add_ ------------------------------------------------------------------------------

def reference_index_add(target, dim, index, source, alpha=1):
    """index_add by its definition, one slice at a time."""
    out = np.array(target, dtype=np.float64)
    moved, src = np.moveaxis(out, dim, 0), np.moveaxis(np.asarray(source, np.float64), dim, 0)
    for k, i in enumerate(index):
        moved[i] += alpha * src[k]
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_c51_projection_rows(device):
    rng = np.random.default_rng(0)
    batch, atoms = 6, 11
    lower = rng.integers(0, atoms, (batch, atoms))
    mass = rng.random((batch, atoms)).astype(np.float32)
    target = r.zeros(batch, atoms, device=device)
    low, m = r.tensor(lower, device=device), r.tensor(mass, device=device)
    with r.no_grad():
        for i in range(batch):
            assert target[i].index_add_(0, low[i], m[i])._base is target
    expected = np.stack([reference_index_add(np.zeros(atoms), 0, lower[i], mass[i]) for i in range(batch)])
    np.testing.assert_allclose(host(target), expected, rtol=1e-6)
    assert target._version == batch


@pytest.mark.parametrize("device", DEVICES)
def test_index_add_along_a_later_dim_with_alpha_and_int32_indices(device):
    target = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    source = np.ones((3, 3), np.float32)
    x = r.tensor(target, device=device)
    x.index_add_(1, r.tensor([3, 0, 3], dtype=r.int32, device=device), r.tensor(source, device=device), alpha=2)
    np.testing.assert_array_equal(host(x), reference_index_add(target, 1, [3, 0, 3], source, 2))
    n = r.zeros(3, dtype=r.int64, device=device)
    n.index_add_(0, r.tensor([0, 0], device=device), r.ones(2, dtype=r.int64, device=device), alpha=1.5)
    assert n.tolist() == [2, 0, 0]  # alpha cast to the integer dtype, as torch does


@pytest.mark.parametrize("bad, error, message", [
    ([-1], RuntimeError, "^index -1 is out of bounds for dimension 0 with size 2$"),
    ([0, 2], RuntimeError, "^index 2 is out of bounds for dimension 0 with size 2$"),
    ([0.0], RuntimeError, "^index_add_\\(\\): Expected dtype int32/int64 for index but got: Float$"),
    ([[0]], IndexError, "^index_add_\\(\\): Index is supposed to be a vector, but got dim: 2"),
    ([0, 1, 1], RuntimeError, "Number of indices \\(3\\) should be equal to source.size\\(dim\\): \\(2\\)"),
])
def test_index_add_errors_leave_the_target_unchanged(bad, error, message):
    x = r.ones(2, 3)
    source = r.ones(2 if len(bad) != 1 or bad == [[0]] else 1, 3)
    with pytest.raises(error, match=message):
        x.index_add_(0, r.tensor(bad), source)
    assert x.tolist() == [[1.0] * 3] * 2 and x._version == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("grad", [False, True], ids=["fast", "recording"])
@pytest.mark.parametrize("dim, bad, message", [
    (0, [0, 2], "^index 2 is out of bounds for dimension 0 with size 2$"),
    (1, [-1, 0], "^index -1 is out of bounds for dimension 1 with size 3$"),
    (1, [3, -4], "^index 3 is out of bounds for dimension 1 with size 3$"),  # the first one is named
    (0, [-3, 5], "^index -3 is out of bounds for dimension 0 with size 2$"),
])
def test_index_add_out_of_range_writes_nothing_on_either_path(device, grad, dim, bad, message):
    """The backend checks the positions as it adds (NumPy's add.at checks them all before it
    writes; negatives are refused first): in place without a graph, in place with one, and out of
    place, torch's error and the target unchanged."""
    y = r.ones(2, 3, device=device, requires_grad=grad) * 1
    source, index = r.ones(2, 2 if dim else 3, device=device), r.tensor(bad, device=device)
    for call in (y.index_add_, lambda *args: r.index_add(y, *args)):
        with pytest.raises(RuntimeError, match=message):
            call(dim, index, source)
        assert host(y).tolist() == [[1.0] * 3] * 2 and y._version == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, bad", [((3,), [0, 5]), ((3,), [-1]), ((), [1])])
def test_index_add_out_of_range_on_a_vector_is_torchs_index_error(device, shape, bad):
    """torch's 1-d kernel (a 0-d input counts as one) raises IndexError without the position."""
    x = r.zeros(shape, device=device)
    source = r.ones(len(bad), device=device) if shape else r.tensor(1.0, device=device)
    for call in (x.index_add_, lambda *args: r.index_add(x, *args)):
        with pytest.raises(IndexError, match="^index out of range in self$"):
            call(0, r.tensor(bad, device=device), source)
        assert x._version == 0 and not host(x).any()


def test_index_add_shape_dtype_and_memory_errors():
    x = r.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"source tensor shape must match self tensor shape, excluding the specified "
                                           r"dimension. Got self.shape = \[2, 3\] source.shape = \[1, 4\]"):
        x.index_add_(0, r.tensor([0]), r.ones(1, 4))
    with pytest.raises(RuntimeError, match=r"self \(Float\) and source \(Double\) must have the same scalar type"):
        x.index_add_(0, r.tensor([0]), r.ones(1, 3, dtype=r.float64))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        r.zeros(3).expand(2, 3).index_add_(0, r.tensor([0]), r.ones(1, 3))
    assert x.tolist() == [[1.0] * 3] * 2


def test_index_add_with_grad_takes_the_recording_path():
    base = r.zeros(3, requires_grad=True)
    source = r.tensor([1.0, 2.0], requires_grad=True)
    y = base * 1
    y.index_add_(0, r.tensor([2, 2]), source)
    (y * r.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert y.tolist() == [0.0, 0.0, 3.0]
    assert source.grad.tolist() == [100.0, 100.0] and base.grad.tolist() == [1.0, 10.0, 100.0]


def sequential_index_add(target, positions, source, alpha=1):
    """torch's 1-d CPU kernel written out: one add per position, in index order, each rounded to
    the target's dtype (NumPy scalars of that dtype), after ``source * alpha`` in that dtype."""
    out = np.array(target)
    with np.errstate(over="ignore", invalid="ignore"):  # float16 sums past 65504 are inf
        scaled = [s * out.dtype.type(alpha) for s in np.asarray(source, out.dtype)]
        for value, position in zip(scaled, positions):
            out[position] = out[position] + value
    return out


def test_index_add_on_a_vector_rounds_after_each_add_in_index_order():
    """1 + 2**-24 is a tie that float32 rounds back to 1, so adding 2**-24 twice leaves 1; one
    rounding of the exact sum (what a float64 bincount would give) is 1 + 2**-23. Added after
    2**-23, each of the two is a tie again, and both go to the even neighbour, 1 + 2**-22."""
    tiny = 2.0 ** -24
    x = r.ones(2)
    with r.no_grad():
        x.index_add_(0, r.tensor([0, 0, 1, 1, 1]), r.tensor([tiny, tiny, 2 * tiny, tiny, tiny]))
    assert x.tolist() == [1.0, 1.0 + 2.0 ** -22]
    assert x._version == 1


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
@pytest.mark.parametrize("alpha", [1, -2])
@pytest.mark.parametrize("on", ["vector", "row"])
def test_index_add_with_repeated_positions_matches_sequential_adds_bit_for_bit(dtype, alpha, on):
    """Random vectors and rows of a matrix (c51.py's target[i]) with many repeated positions, each
    float scale mixed so the adds round: every bit as the sequential definition (torch 2.13's CPU
    kernel gives the same bits on these 480 cases, and on 1,500 more from another generator)."""
    rng = np.random.default_rng(7)
    for case in range(40):
        n, k = int(rng.integers(1, 9)), int(rng.integers(0, 40))
        positions = rng.integers(0, n, k)
        if dtype.startswith("int"):
            target, source = rng.integers(-50, 50, (3, n)), rng.integers(-50, 50, k)
        else:
            target = rng.standard_normal((3, n)) * rng.choice([1e-3, 1.0, 1e3])
            source = rng.standard_normal(k) * rng.choice([1e-4, 1.0, 1e4], k)
        t = r.tensor(target).to(getattr(r, dtype))
        base = t.numpy().copy()
        with r.no_grad():
            vector = t[case % 3] if on == "row" else t[case % 3].clone()
            vector.index_add_(0, r.tensor(positions), r.tensor(source).to(t.dtype), alpha=alpha)
        expected = sequential_index_add(base[case % 3], positions, r.tensor(source).to(t.dtype).numpy(), alpha)
        assert vector.numpy().tobytes() == expected.tobytes(), (case, vector.numpy(), expected)
        if on == "row":  # written through to the matrix, the other rows untouched
            base[case % 3] = expected
            assert t.numpy().tobytes() == base.tobytes()


@pytest.mark.parametrize("dtype, big", [("float16", 2048.0), ("bfloat16", 256.0)])
@pytest.mark.parametrize("grad", [False, True], ids=["no-graph", "recorded"])
def test_index_add_of_half_types_sums_as_torchs_cpu_kernel(dtype, big, grad):
    """big + 1 is a tie that float16 (bfloat16) rounds back to big, so adding 1 twice in turn leaves
    big, while one rounding of big + 2 is exact. torch 2.13's CPU kernel takes the sums in float32 and
    rounds once for 2+-dim tensors along the first or last dim with int64 positions and alpha 1
    (there it adds through scatter_add), and rounds after each add everywhere else (checked on
    torch: 400 random cases each way)."""
    dt = getattr(r, dtype)
    pos = r.tensor([0, 0])

    def added(target, dim, positions=pos, alpha=1, shape=(2, 2)):
        target = target.clone().requires_grad_(grad)
        source = (r.ones(shape, dtype=dt) / alpha).requires_grad_(grad)
        with r.set_grad_enabled(grad):
            out = target.index_add(dim, positions, source, alpha=alpha) if grad else \
                target.detach().index_add_(dim, positions, source.detach(), alpha=alpha)
        return out.detach().float()

    matrix = r.tensor([[big, 0.0], [0.0, 0.0]], dtype=dt)
    assert added(matrix, 0)[0].tolist() == [big + 2, 2.0]  # first dim: one rounding
    assert added(matrix.T.contiguous(), 1)[:, 0].tolist() == [big + 2, 2.0]  # last dim too
    assert added(matrix, 0, positions=pos.int())[0].tolist() == [big, 2.0]  # int32 positions: each add
    assert added(matrix, 0, alpha=2)[0].tolist() == [big, 2.0]  # alpha 2: each add
    assert added(r.tensor([big], dtype=dt), 0, shape=(2,)).tolist() == [big]  # a vector: each add
    cube = r.zeros(2, 2, 2, dtype=dt)
    cube[:, 0, :] = big
    assert (added(cube, 1, shape=(2, 2, 2))[:, 0, :] == big).all()  # a middle dim: each add


@pytest.mark.parametrize("shape", [(3,), (2, 3)], ids=["vector", "matrix"])
def test_index_add_without_a_graph_overflows_to_inf_and_nan_without_warnings(shape, recwarn):
    """float32 sums past its range give inf, and inf + -inf nan, as in torch: no NumPy warning
    (tensordict's own tests turn warnings into errors); alpha's product overflows quietly too."""
    x = r.full(shape, 3e38)
    with r.no_grad():
        x.index_add_(0, r.tensor([0, 0]), r.full((2,) + shape[1:], 3e38))
        x.index_add_(0, r.tensor([0]), r.full((1,) + shape[1:], float("-inf")))
        x.index_add_(0, r.tensor([1]), r.full((1,) + shape[1:], 3e38), alpha=2)
    first, second = x.numpy()[0], x.numpy()[1]
    assert np.isnan(first).all() and np.isposinf(second).all()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("count", [200, 300], ids=["sign-bytes", "argmin"])
@pytest.mark.parametrize("where", [0, -1])
def test_index_add_refuses_a_negative_position_among_many(count, where):
    """The CPU kernel tests the positions' signs by their bytes up to 256 of them, by argmin beyond:
    a negative anywhere is torch's error on either side of that line, nothing written."""
    positions = np.arange(count) % 5
    positions[where] = -1
    x, matrix = r.zeros(5), r.zeros(5, 2)
    with pytest.raises(IndexError, match="^index out of range in self$"):
        x.index_add_(0, r.tensor(positions), r.ones(count))
    with pytest.raises(RuntimeError, match="^index -1 is out of bounds for dimension 0 with size 5$"):
        matrix.index_add_(0, r.tensor(positions), r.ones(count, 2))
    assert not x.numpy().any() and not matrix.numpy().any() and x._version == matrix._version == 0
    positions[where] = 4
    x.index_add_(0, r.tensor(positions), r.ones(count))
    assert x.tolist() == np.bincount(positions, minlength=5).tolist()


@pytest.mark.parametrize("dim, error, message", [
    (0.0, TypeError, "dim must be an int, got float"),
    (True, TypeError, "dim must be an int, got bool"),
    (1, IndexError, r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"),
])
def test_index_add_on_a_vector_checks_dim_like_every_call(dim, error, message):
    """The vector fast path takes only an int dim of 0 or -1; others get the general checks."""
    x = r.zeros(3)
    with pytest.raises(error, match=message):
        x.index_add_(dim, r.tensor([0]), r.ones(1))
    assert x._version == 0 and not x.numpy().any()
