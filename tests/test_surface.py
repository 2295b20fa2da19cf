"""The PyTorch surface that training scripts reach for: torch.backends' flags, finfo/iinfo, legacy
constructors, the default device. Expected values were measured on torch 2.13 and pasted here."""
import pytest

import rlpipe as r


# ---- rlpipe.backends.cudnn / mps ----------------------------------------------------------------

def test_cudnn_flags_are_settable_module_attributes_with_torchs_defaults():
    cudnn = r.backends.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == (True, False, False, True)
    assert cudnn.is_available() is False and cudnn.version() is None
    try:
        r.backends.cudnn.deterministic = True
        r.backends.cudnn.benchmark = True
        import rlpipe.backends.cudnn as again
        assert again.deterministic is True and again.benchmark is True
    finally:
        cudnn.deterministic, cudnn.benchmark = False, False


def test_cudnn_flags_context_restores_the_flags():
    cudnn = r.backends.cudnn
    with cudnn.flags(enabled=True, deterministic=True):
        assert cudnn.deterministic is True and cudnn.enabled is True and cudnn.benchmark is False
    assert cudnn.deterministic is False
    with pytest.raises(ZeroDivisionError):
        with cudnn.flags(deterministic=True):
            1 / 0
    assert cudnn.deterministic is False and cudnn.enabled is True


def test_mps_is_not_available():
    assert r.backends.mps.is_available() is False and r.backends.mps.is_built() is False


# ---- finfo / iinfo (values from torch 2.13) ---------------------------------------------------

FINFO = {  # dtype: bits, eps, max, tiny, resolution
    "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e+38, 1.1754943508222875e-38, 1e-06),
    "float64": (64, 2.220446049250313e-16, 1.7976931348623157e+308, 2.2250738585072014e-308, 1e-15),
    "float16": (16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
    "bfloat16": (16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01),
}


@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo_matches_torch(name):
    f = r.finfo(getattr(r, name))
    bits, eps, big, tiny, resolution = FINFO[name]
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == \
        (bits, eps, big, -big, tiny, tiny, resolution, name)
    assert type(f.eps) is float and type(f.bits) is int


def test_finfo_of_the_default_dtype_and_repr():
    assert r.finfo() == r.finfo(r.float32)
    assert repr(r.finfo()) == ("finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
                               "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")
    r.set_default_dtype(r.float64)
    try:
        assert r.finfo().dtype == "float64"
    finally:
        r.set_default_dtype(r.float32)


IINFO = {"int64": (64, -9223372036854775808, 9223372036854775807), "int32": (32, -2147483648, 2147483647),
         "int16": (16, -32768, 32767), "int8": (8, -128, 127), "uint8": (8, 0, 255)}


@pytest.mark.parametrize("name", sorted(IINFO))
def test_iinfo_matches_torch(name):
    i = r.iinfo(getattr(r, name))
    assert (i.bits, i.min, i.max, i.dtype) == IINFO[name] + (name,)
    assert type(i.max) is int


def test_iinfo_repr():
    assert repr(r.iinfo(r.int64)) == "iinfo(min=-9.22337e+18, max=9.22337e+18, dtype=int64)"


@pytest.mark.parametrize("call, message", [
    (lambda: r.finfo(r.int64), "rlpipe.finfo() requires a floating point input type. Use rlpipe.iinfo"),
    (lambda: r.finfo(r.bool), "rlpipe.finfo() requires a floating point input type"),
    (lambda: r.iinfo(r.float32), "rlpipe.iinfo() requires an integer input type. Use rlpipe.finfo"),
    (lambda: r.iinfo(r.bool), "rlpipe.bool is not supported by rlpipe.iinfo"),
    (lambda: r.finfo("float32"), "finfo(): argument 'type' (position 1) must be rlpipe.dtype, not str"),
    (lambda: r.iinfo(), "missing 1 required positional argument"),
])
def test_info_of_the_wrong_kind_raises_type_error(call, message):
    with pytest.raises(TypeError) as e:
        call()
    assert message in str(e.value)


# ---- sort / topk / index_add / lerp / nan_to_num / tril / repeat_interleave: torch's answers and errors ----

NAN = float("nan")


def test_sort_is_stable_both_ways_and_puts_nan_where_torch_does():
    x = r.tensor([1.0, 3.0, 1.0, 3.0, NAN, 2.0])
    down = x.sort(descending=True, stable=True)
    assert type(down).__name__ == "sort" and down.indices.tolist() == [4, 1, 3, 5, 0, 2]
    assert str(down.values.tolist()) == "[nan, 3.0, 3.0, 2.0, 1.0, 1.0]"
    assert r.sort(x).indices.tolist() == [0, 2, 5, 1, 3, 4]
    assert r.argsort(r.tensor([3, 1, 1]), stable=True).tolist() == [1, 2, 0]
    flags = r.tensor([True, False, True]).sort(descending=True)
    assert flags.values.tolist() == [True, True, False] and flags.indices.tolist() == [0, 2, 1]


def test_topk_returns_a_named_tuple_and_checks_k():
    top = r.tensor([1.0, 3.0, 3.0, 2.0]).topk(2)
    assert type(top).__name__ == "topk" and top.values.tolist() == [3.0, 3.0] and top.indices.tolist() == [1, 2]
    assert r.tensor([3, 1, 2]).topk(2, largest=False).indices.tolist() == [1, 2]
    assert r.tensor(3.0).topk(1).indices.item() == 0
    for k in (5, -1):
        with pytest.raises(RuntimeError, match="selected index k out of range"):
            r.ones(2, 4).topk(k)
    with pytest.raises(IndexError, match="Dimension out of range"):
        r.ones(2, 4).sort(dim=2)


def test_index_add_on_rows_of_a_tensor_writes_through_to_it():
    """CleanRL's C51 projection: target[i].index_add_(0, l[i], d[i]) under no_grad."""
    target = r.zeros(2, 3)
    with r.no_grad():
        for i in range(2):
            target[i].index_add_(0, r.tensor([0, 2, 0]), r.tensor([1.0, 2.0, 3.0]) * (i + 1))
    assert target.tolist() == [[4.0, 0.0, 2.0], [8.0, 0.0, 4.0]]


def test_index_add_integer_alpha_and_index_dtypes():
    x = r.zeros(3, dtype=r.int64).index_add(0, r.tensor([0]), r.ones(1, dtype=r.int64), alpha=1.5)
    assert x.tolist() == [1, 0, 0]  # torch 2.13: the integer alpha wins
    y = r.zeros(2).index_add(0, r.tensor([1, 1], dtype=r.int32), r.ones(2), alpha=2)
    assert y.tolist() == [0.0, 4.0]


@pytest.mark.parametrize("call, error, message", [
    (lambda x: x.index_add(0, r.tensor([0.0]), r.ones(1, 3)), RuntimeError,
     "index_add_(): Expected dtype int32/int64 for index but got: Float"),
    (lambda x: x.index_add(0, r.tensor([2]), r.ones(1, 3)), RuntimeError,
     "index 2 is out of bounds for dimension 0 with size 2"),
    (lambda x: x.index_add(0, r.tensor([-1]), r.ones(1, 3)), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 2"),
    (lambda x: x.index_add(0, r.tensor([0]), r.ones(2, 3)), RuntimeError,
     "index_add_(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 0"),
    (lambda x: x.index_add(0, r.tensor([0]), r.ones(1, 2)), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
     "[2, 3] source.shape = [1, 2]"),
    (lambda x: x.index_add(0, r.tensor([[0]]), r.ones(1, 3)), IndexError,
     "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]"),
    (lambda x: x.index_add(0, r.tensor([0]), r.ones(1, 3, dtype=r.float64)), RuntimeError,
     "index_add_(): self (Float) and source (Double) must have the same scalar type"),
    (lambda x: x.index_add_(2, r.tensor([0]), r.ones(1, 3)), IndexError, "Dimension out of range"),
    (lambda x: x.lerp(x.double(), 0.5), RuntimeError, "expected dtype float for `end` but got dtype double"),
    (lambda x: x.lerp(x, r.ones(3, dtype=r.float64)), RuntimeError,
     "expected dtype float for `weight` but got dtype double"),
    (lambda x: r.lerp(r.tensor([1, 2]), r.tensor([3, 4]), 0.5), NotImplementedError,
     "\"lerp_kernel_scalar\" not implemented for 'Long'"),
    (lambda x: r.zeros(3).lerp_(r.ones(2, 3), 0.5), RuntimeError,
     "output with shape [3] doesn't match the broadcast shape [2, 3]"),
    (lambda x: r.tril(r.ones(3)), RuntimeError, "tril: input tensor must have at least 2 dimensions"),
    (lambda x: r.ones(3).triu_(), RuntimeError,
     "triu: input tensor must have at least 2 dimensions"),
    (lambda x: r.tensor([1, 2]).repeat_interleave(-1), RuntimeError, "Repeats must be non-negative"),
    (lambda x: r.tensor([1, 2]).repeat_interleave(r.tensor([1, -1])), RuntimeError, "repeats can not be negative"),
    (lambda x: r.tensor([1, 2, 3]).repeat_interleave(r.tensor([1, 2])), RuntimeError,
     "repeats must have the same size as input along dim, but got repeats.size(0) = 2 and input.size(0) = 3"),
    (lambda x: r.tensor([1, 2, 3]).repeat_interleave(r.tensor([1, 2, 1]), output_size=3), RuntimeError,
     "allocated size does not match required size"),
    (lambda x: r.repeat_interleave(r.tensor([[1, 2]])), RuntimeError, "repeat_interleave only accept 1D vector"),
    (lambda x: r.tensor([1, 2]).repeat_interleave(r.tensor([1.0, 2.0])), NotImplementedError,
     "\"repeat_interleave_cpu\" not implemented for 'Float'"),
    (lambda x: r.tensor([5, 6]).repeat_interleave(r.tensor([[1, 2]])), RuntimeError,
     "repeats must be 0-dim or 1-dim tensor"),
])
def test_bad_arguments_raise_torchs_errors_and_leave_the_input_unchanged(call, error, message):
    x = r.arange(6.0).reshape(2, 3)
    with pytest.raises(error) as e:
        call(x)
    assert message in str(e.value)
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_lerp_reaches_end_exactly_at_weight_one_and_casts_a_0d_weight():
    start, end = r.tensor([1e8, -3.0]), r.tensor([1.0, 7e-8])
    assert r.lerp(start, end, 1.0).tolist() == end.tolist()
    assert r.lerp(start, end, r.tensor(1.0, dtype=r.float64)).dtype is r.float32
    assert r.lerp(r.zeros(2), r.ones(2), 1).tolist() == [1.0, 1.0]


def test_nan_to_num_defaults_are_the_dtypes_limits():
    x = r.tensor([NAN, float("inf"), -float("inf"), 1.0])
    assert r.nan_to_num(x).tolist() == [0.0, r.finfo(r.float32).max, r.finfo(r.float32).min, 1.0]
    half = r.nan_to_num(x.half(), nan=2.0)
    assert half.dtype is r.float16 and half.tolist() == [2.0, 65504.0, -65504.0, 1.0]
    ints = r.tensor([1, 2])
    out = r.nan_to_num(ints)
    assert out.tolist() == [1, 2] and out is not ints
    assert x.nan_to_num_(nan=-1.0) is x and x.tolist()[0] == -1.0


def test_tril_triu_keep_integer_and_bool_dtypes():
    assert r.tril(r.ones(3, 3, dtype=r.int64), -1).tolist() == [[0, 0, 0], [1, 0, 0], [1, 1, 0]]
    assert r.triu(r.ones(2, 2, dtype=r.bool)).tolist() == [[True, True], [False, True]]


def test_repeat_interleave_forms():
    assert r.repeat_interleave(r.tensor([1, 2, 3])).tolist() == [0, 1, 1, 2, 2, 2]
    assert r.tensor(5).repeat_interleave(3).tolist() == [5, 5, 5]
    assert r.tensor([[1, 2], [3, 4]]).repeat_interleave(2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    assert r.tensor([1, 2, 3]).repeat_interleave(r.tensor([2])).tolist() == [1, 1, 2, 2, 3, 3]


# ---- legacy constructors ------------------------------------------------------------------------

@pytest.mark.parametrize("cls, dtype", [("FloatTensor", "float32"), ("DoubleTensor", "float64"),
                                        ("LongTensor", "int64"), ("IntTensor", "int32"), ("BoolTensor", "bool"),
                                        ("ByteTensor", "uint8"), ("HalfTensor", "float16")])
def test_legacy_constructors_build_tensors_of_their_dtype(cls, dtype):
    make = getattr(r, cls)
    data = make([1, 0, 1])
    assert type(data) is r.Tensor and data.dtype is getattr(r, dtype) and data.tolist() == \
        [v if dtype != "bool" else bool(v) for v in (1, 0, 1)]
    assert isinstance(data, make) and not isinstance(r.zeros(2, dtype=r.int8), make)
    assert make(2, 3).shape == (2, 3) and make(r.Size([4])).shape == (4,) and make().shape == (0,)
    assert make(size=(2,)).shape == (2,)
    assert repr(make) == f"<class 'rlpipe.{cls}'>" and make.dtype is getattr(r, dtype)


def test_legacy_constructors_follow_torchs_conversions():
    import numpy as np
    assert r.LongTensor([1.7, 2.2]).tolist() == [1, 2]
    assert r.FloatTensor(np.array([1.0, 2.0])).dtype is r.float32
    assert r.FloatTensor(r.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert r.Tensor(r.Size([2, 3])).shape == (2, 3)  # a Size is a shape, as in torch
    assert r.Tensor((2, 3)).tolist() == [2.0, 3.0]  # a tuple is data


@pytest.mark.parametrize("call, error, message", [
    (lambda: r.FloatTensor(r.tensor([1.0], dtype=r.float64)), TypeError,
     "expected rlpipe.float32 (got rlpipe.float64)"),
    (lambda: r.FloatTensor(2.5), TypeError, "new(): data must be a sequence (got float)"),
    (lambda: r.FloatTensor("a"), TypeError, "new(): invalid data type 'str'"),
    (lambda: r.FloatTensor(-1), RuntimeError, "Trying to create tensor with negative dimension -1"),
])
def test_legacy_constructor_errors(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert message in str(e.value)


def test_tensor_new_builds_in_the_tensors_dtype_as_torch():
    """Values measured on torch 2.13: sizes, a Size, ``size=``, nothing, data (converted as the legacy
    constructors do), and a tensor of the same dtype, which comes back as an alias gradients flow through."""
    x = r.zeros(2, dtype=r.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype is r.float64
    assert x.new(r.Size([2, 2])).shape == (2, 2) and x.new(size=(2, 3)).shape == (2, 3)
    assert x.new().shape == (0,) and x.new(2, device="cpu").shape == (2,)
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new([1, 2]).dtype is r.float64
    assert r.zeros(2, dtype=r.int64).new([1.7, 2]).tolist() == [1, 2]
    assert not r.ones(2, requires_grad=True).new(2).requires_grad
    other = r.ones(3, dtype=r.float64, requires_grad=True)
    alias = x.new(other)
    alias.mul(2).sum().backward()
    assert other.grad.tolist() == [2.0, 2.0, 2.0]
    with r.no_grad():
        alias[0] = 5
    assert other[0].item() == 5


@pytest.mark.parametrize("call, message", [
    (lambda: r.zeros(2, dtype=r.float64).new(r.ones(2)), "expected rlpipe.float64 (got rlpipe.float32)"),
    (lambda: r.zeros(2).new(2.5), "new(): data must be a sequence (got float)"),
    (lambda: r.zeros(2).new("a"), "new(): invalid data type 'str'"),
    (lambda: r.zeros(2).new(2, size=(3,)), "new(): got sizes (2,) and size=(3,); give one of them"),
])
def test_tensor_new_refuses_what_torch_refuses(call, message):
    with pytest.raises(TypeError) as e:
        call()
    assert message in str(e.value)


# ---- the default device ---------------------------------------------------------------------------

def test_default_device_is_the_cpu_and_can_be_set_back():
    assert r.get_default_device() == r.device("cpu")
    r.set_default_device("cpu")
    try:
        assert r.zeros(2).device == r.device("cpu")
    finally:
        r.set_default_device(None)
    assert r.get_default_device() is r.device("cpu")
    with pytest.raises(RuntimeError, match="device type 'tpu' is not supported"):
        r.set_default_device("tpu")
    assert r.get_default_device() is r.device("cpu")


@pytest.mark.cuda
def test_default_device_reaches_creation_functions_and_module_parameters():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable")
    import numpy as np
    makers = [lambda: r.zeros(2), lambda: r.ones(2), lambda: r.full((2,), 3.0), lambda: r.tensor([1.0]),
              lambda: r.as_tensor(np.ones(2)), lambda: r.arange(3), lambda: r.linspace(0, 1, 3),
              lambda: r.empty(2), lambda: r.rand(2), lambda: r.randn(2), lambda: r.randint(0, 3, (2,)),
              lambda: r.eye(2), lambda: r.FloatTensor([1.0]), lambda: r.nn.Linear(2, 3).weight]
    r.set_default_device("cuda")
    try:
        assert [m().device.type for m in makers] == ["cuda"] * len(makers)
        assert r.from_numpy(np.ones(2)).device.type == "cpu"  # shares NumPy memory: stays on the host
        assert r.zeros(2, device="cpu").device.type == "cpu"
    finally:
        r.set_default_device(None)
    with r.device("cuda"):
        assert r.zeros(2).device.type == "cuda"
        with r.device("cpu"):
            assert r.zeros(2).device.type == "cpu"
        assert r.nn.Linear(2, 2).bias.device.type == "cuda"
    assert r.zeros(2).device.type == "cpu" and r.get_default_device() is r.device("cpu")
