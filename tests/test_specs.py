"""Tensor specs (rlpipe.envs.specs): sampling, membership, projection, encoding, Composite, Gymnasium."""
import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs import specs as S
from rlpipe.envs.gym import from_gym_space
from rlpipe.envs.specs import (
    Binary,
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)

N = 500  # draws per coverage test


def leaf_specs():
    return [
        Bounded(-1.0, 2.0, shape=(3,)),
        Bounded(np.array([0.0, -5.0]), np.array([1.0, 5.0]), dtype=rlpipe.float64),
        Bounded(-3, 4, shape=(2,), dtype=rlpipe.int64),
        Bounded(0, 255, shape=(2, 2), dtype=rlpipe.uint8),
        Unbounded((2,)),
        Unbounded((), dtype=rlpipe.int32),
        Categorical(4),
        Categorical(3, shape=(2,), dtype=rlpipe.int32),
        OneHot(5),
        OneHot(3, shape=(2, 3), dtype=rlpipe.int64),
        MultiCategorical([2, 3, 4]),
        MultiCategorical([[2, 3], [4, 5]], dtype=rlpipe.int32),
        MultiOneHot([2, 3]),
        MultiOneHot([3, 1, 2], dtype=rlpipe.int64),
        Binary(4),
        Binary(shape=(2, 3), dtype=rlpipe.bool),
    ]


LEAVES = leaf_specs()
IDS = [f"{type(s).__name__}-{list(s.shape)}-{s.dtype.name}" for s in LEAVES]


# ---- every leaf spec ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_rand_is_in_shape_dtype(spec):
    x = spec.rand()
    assert x.shape == spec.shape and x.dtype is spec.dtype and x.device == spec.device
    assert spec.is_in(x)
    xs = spec.rand((N,))
    assert xs.shape == (N,) + tuple(spec.shape)
    assert spec.is_in(xs)
    assert spec.rand((2, 3)).shape == (2, 3) + tuple(spec.shape)
    assert spec.rand(4).shape == (4,) + tuple(spec.shape)


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_rand_reproducible(spec):
    rlpipe.manual_seed(3)
    a = spec.rand((5,))
    rlpipe.manual_seed(3)
    b = spec.rand((5,))
    assert np.array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_zero_is_in(spec):
    z = spec.zero()
    assert z.shape == spec.shape and z.dtype is spec.dtype and spec.is_in(z)
    assert spec.zero((2,)).shape == (2,) + tuple(spec.shape)
    assert spec.is_in(spec.zero((2,)))


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_is_in_rejects_wrong_shape_dtype(spec):
    x = spec.rand()
    assert not spec.is_in(x.numpy())  # not a tensor
    other = rlpipe.float32 if spec.dtype is not rlpipe.float32 else rlpipe.float64
    assert not spec.is_in(x.to(other))
    if spec.ndim:  # (a 0-d spec takes any leading batch dims)
        assert not spec.is_in(rlpipe.cat([x.reshape(-1), x.reshape(-1)[:1]]))  # one element too many
        assert not spec.is_in(x.reshape(-1)[:-1])
        assert not spec.is_in(x.unsqueeze(-1))


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_host_membership_test_agrees_with_is_in(spec):
    """On host arrays of the spec's shape (its caller checks the shape): valid draws, the wrong
    dtype and values moved out of the space, at sizes on both sides of the list/NumPy switch."""
    test = spec.host_membership_test()
    rlpipe.manual_seed(0)
    for batch in [(), (3,), (S._LIST_CHECK_SIZE,)]:
        good = spec.rand(batch).numpy()
        candidates = [good, good.astype(np.float32 if good.dtype != np.float32 else np.float64)]
        for value in (-1, 0, 1, 2, 3, 4, 5, 7):
            changed = good.copy()
            changed.reshape(-1)[-1] = np.array(value).astype(good.dtype)
            candidates.append(changed)
        for a in candidates:
            assert test(a) == bool(spec.is_in(rlpipe.from_numpy(a))), (a, spec)


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_project_into_space(spec):
    rlpipe.manual_seed(0)
    big = (rlpipe.randn(8, *spec.shape, dtype=rlpipe.float64) * 1000)
    p = spec.project(big)
    assert p.dtype is spec.dtype and p.shape == big.shape and spec.is_in(p)
    x = spec.rand((4,))
    assert spec.project(x) is x  # in the space already: unchanged


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_to_numpy_encode_round_trip(spec):
    x = spec.rand((3,))
    arr = spec.to_numpy(x)
    back = spec.expand(3, *spec.shape).encode(arr)  # a batch encodes with the batched spec, as torchrl's
    assert back.dtype is spec.dtype and spec.is_in(back)
    assert np.array_equal(back.numpy(), x.numpy())
    single = spec.rand()
    assert np.array_equal(spec.encode(spec.to_numpy(single)).numpy(), single.numpy())


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_clone_eq_expand_to(spec):
    c = spec.clone()
    assert c == spec and c is not spec and not (c != spec)  # noqa: SIM202 - tests __ne__
    e = spec.expand(2, *spec.shape)
    assert e.shape == (2,) + tuple(spec.shape) and e != spec and type(e) is type(spec)
    assert e.is_in(spec.rand((2,))) and not e.is_in(spec.rand((3,)))
    assert spec.to("cpu") is spec
    if spec.ndim:  # (a 0-d spec expands to any shape)
        with pytest.raises(ValueError, match="must end with"):
            spec.expand(2, *spec.shape, 7)
    assert repr(spec).startswith(type(spec).__name__ + "(")
    assert f"shape=rlpipe.Size({list(spec.shape)})" in repr(spec) and f"dtype={spec.dtype}" in repr(spec)


# ---- Bounded / Unbounded --------------------------------------------------------------------------
def test_bounded_continuous_covers_box():
    spec = Bounded(np.array([-1.0, 10.0]), np.array([1.0, 10.5]))
    assert isinstance(spec, BoundedContinuous) and isinstance(spec, Bounded) and spec.domain == "continuous"
    assert spec.shape == (2,) and spec.dtype is rlpipe.float32
    x = spec.rand((N,)).numpy()
    assert (x[:, 0] < -0.9).any() and (x[:, 0] > 0.9).any() and (x[:, 1] > 10.45).any()
    assert spec.is_in(rlpipe.tensor([-1.0, 10.5])) and spec.is_in(rlpipe.tensor([1.0, 10.0]))
    assert not spec.is_in(rlpipe.tensor([-1.01, 10.2])) and not spec.is_in(rlpipe.tensor([0.0, 10.6]))
    assert not spec.is_in(rlpipe.tensor([float("nan"), 10.2]))
    p = spec.project(rlpipe.tensor([[5.0, -3.0], [-5.0, 10.2]]))
    assert p.tolist() == [[1.0, 10.0], [-1.0, pytest.approx(10.2)]]
    assert spec.project(rlpipe.tensor([float("nan"), 11.0])).tolist() == [0.0, 10.5]
    assert spec.zero().tolist() == [0.0, 10.0]  # zero clamped into the box
    assert spec.low.tolist() == [-1.0, 10.0] and spec.high.tolist() == [1.0, 10.5]
    assert "BoundedContinuous(" in repr(spec) and "ContinuousBox(" in repr(spec) and "domain=continuous" in repr(spec)


def test_bounded_discrete_covers_every_integer():
    spec = Bounded(-2, 3, shape=(), dtype=rlpipe.int64)
    assert isinstance(spec, BoundedDiscrete) and spec.domain == "discrete" and "BoundedDiscrete(" in repr(spec)
    x = spec.rand((N,)).numpy()
    assert set(x.tolist()) == {-2, -1, 0, 1, 2, 3}
    assert spec.project(rlpipe.tensor([2.6, -7.0, 9.0])).tolist() == [3, -2, 3]
    assert spec.project(rlpipe.tensor([2.6, -7.0, 9.0])).dtype is rlpipe.int64


def test_bounded_shapes_and_broadcasting():
    with pytest.raises(RuntimeError, match=r"Bounded: scalar low=0.0 and high=1.0 need an explicit shape"):
        Bounded(0.0, 1.0)  # as torchrl: scalar bounds give no shape
    assert Bounded(0.0, 1.0, shape=()).shape == ()
    assert Bounded(0.0, 1.0, shape=4).shape == (4,)
    spec = Bounded(np.zeros(3), 1.0, shape=(2, 3))
    assert spec.shape == (2, 3) and spec.low.shape == (2, 3) and spec.high.shape == (2, 3)
    assert Bounded(rlpipe.zeros(2), rlpipe.ones(2)).shape == (2,)
    assert Bounded(low=-1, high=1, shape=(1,)).dtype is rlpipe.float32  # default float dtype
    old = Bounded(minimum=-1.0, maximum=1.0, shape=(1,))
    assert old == Bounded(-1.0, 1.0, shape=(1,))


def test_bounded_errors():
    with pytest.raises(ValueError, match=r"low must be less than or equal to high.*low=.*high="):
        Bounded(np.array([0.0, 2.0]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match=r"shape of low rlpipe.Size\(\[3\]\).*rlpipe.Size\(\[2\]\)"):
        Bounded(np.zeros(3), np.ones(3), shape=(2,))
    with pytest.raises(ValueError, match="do not broadcast"):
        Bounded(np.zeros(3), np.ones(2))
    with pytest.raises(ValueError, match="NaN"):
        Bounded(float("nan"), 1.0, shape=())
    with pytest.raises(TypeError, match="low and high"):
        Bounded(0.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        Bounded(0.0, 1.0, bogus=1)
    with pytest.raises(ValueError, match="floating dtype"):
        BoundedContinuous(0, 1, shape=(1,), dtype=rlpipe.int64)
    with pytest.raises(ValueError, match="does not match"):
        Bounded(np.zeros((2, 3)), 1.0, shape=(3,))


def test_bounded_with_infinite_bounds():
    spec = Bounded(np.array([-np.inf, 0.0, -np.inf, -1.0]), np.array([np.inf, np.inf, 2.0, 1.0]))
    x = spec.rand((N,))
    assert spec.is_in(x) and np.isfinite(x.numpy()).all()
    a = x.numpy()
    assert (a[:, 0] < 0).any() and (a[:, 0] > 0).any() and (a[:, 1] >= 0).all() and (a[:, 2] <= 2).all()
    assert spec.project(rlpipe.tensor([1e30, -5.0, 7.0, 3.0])).tolist() == [pytest.approx(1e30), 0.0, 2.0, 1.0]


def test_unbounded():
    spec = Unbounded((3,))
    assert isinstance(spec, UnboundedContinuous) and isinstance(spec, Unbounded)
    assert spec.dtype is rlpipe.float32 and spec.domain == "continuous" and "UnboundedContinuous(" in repr(spec)
    assert Unbounded().shape == (1,) and Unbounded(4).shape == (4,)  # torchrl's default shape is [1]
    x = spec.rand((N,)).numpy()
    assert 0.8 < x.std() < 1.2 and abs(x.mean()) < 0.2
    assert spec.is_in(rlpipe.full((3,), 1e30))
    assert spec.project(rlpipe.tensor([1.0, 2.0, 3.0], dtype=rlpipe.float64)).dtype is rlpipe.float32
    d = Unbounded((2,), dtype=rlpipe.int64)
    assert isinstance(d, UnboundedDiscrete) and d.domain == "discrete" and "UnboundedDiscrete(" in repr(d)
    assert d.project(rlpipe.tensor([1.6, -2.4])).tolist() == [2, -2]
    assert UnboundedDiscrete((1,)).dtype is rlpipe.int64
    assert S.UnboundedContinuousTensorSpec(shape=(2,)) == UnboundedContinuous((2,))
    u8 = Unbounded((N,), dtype=rlpipe.uint8)
    assert (u8.rand().numpy() >= 0).all() and u8.is_in(u8.rand())
    f64 = Unbounded((2,), dtype=rlpipe.float64)
    assert f64.to_numpy(f64.rand()).dtype == np.float64


# ---- discrete ---------------------------------------------------------------------------------------
def test_categorical():
    spec = Categorical(5)
    assert spec.n == 5 and spec.space.n == 5 and spec.shape == () and spec.dtype is rlpipe.int64
    assert spec.domain == "discrete" and "CategoricalBox(n=5)" in repr(spec)
    assert set(spec.rand((N,)).tolist()) == set(range(5))
    assert spec.is_in(rlpipe.tensor(4)) and not spec.is_in(rlpipe.tensor(5)) and not spec.is_in(rlpipe.tensor(-1))
    assert not spec.is_in(rlpipe.tensor(2, dtype=rlpipe.int32))
    assert spec.project(rlpipe.tensor([7, -3, 2])).tolist() == [4, 0, 2]
    assert spec.project(rlpipe.tensor([1.4, 9.0])).tolist() == [1, 4]
    out = spec.to_numpy(rlpipe.tensor(3))
    assert out == 3 and type(out) is int
    batched = spec.to_numpy(rlpipe.tensor([3, 1]))
    assert isinstance(batched, np.ndarray) and batched.dtype == np.int64 and batched.tolist() == [3, 1]
    assert spec.encode(2).tolist() == 2 and spec.encode(np.int64(2)).dtype is rlpipe.int64
    assert spec.expand(2).encode(np.array([1, 2])).tolist() == [1, 2]
    with pytest.raises(RuntimeError, match=r"Shape mismatch: the value has shape rlpipe.Size\(\[2\]\) which is "
                       r"incompatible with the spec shape rlpipe.Size\(\[\]\)"):
        spec.encode(np.array([1, 2]))  # torchrl 0.14.1 refuses a batch of values too
    with pytest.raises(ValueError, match=r"values must be in \[0, 5\)"):
        spec.encode(5)
    assert S.DiscreteTensorSpec is Categorical


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (2.5, TypeError), ("3", TypeError),
                                      (True, TypeError)])
def test_discrete_bad_n(bad, exc):
    for cls in (Categorical, OneHot):
        with pytest.raises(exc, match=f"n must be a positive int, got {bad!r}" if exc is TypeError
                           else f"n must be a positive int, got {bad}"):
            cls(bad)


def test_onehot():
    spec = OneHot(4)
    assert spec.shape == (4,) and spec.n == 4 and spec.dtype is rlpipe.bool and spec.domain == "discrete"
    x = spec.rand((N,))
    assert spec.is_in(x)
    counts = x.numpy().sum(0)
    assert (counts > 0).all() and counts.sum() == N
    assert (x.numpy().sum(-1) == 1).all()
    assert not spec.is_in(rlpipe.tensor([True, True, False, False]))
    assert not spec.is_in(rlpipe.tensor([False, False, False, False]))
    assert spec.zero().tolist() == [True, False, False, False]
    assert spec.project(rlpipe.tensor([0.1, 0.7, 0.2, -1.0])).tolist() == [False, True, False, False]
    assert spec.to_numpy(spec.encode(2)) == 2 and type(spec.to_numpy(spec.encode(2))) is int
    assert spec.encode([3, 0]).tolist() == [[False, False, False, True], [True, False, False, False]]
    assert spec.to_numpy(spec.encode([3, 0])).tolist() == [3, 0]
    with pytest.raises(ValueError, match=r"indices must be in \[0, 4\)"):
        spec.encode(4)
    with pytest.raises(TypeError, match="integer indices"):
        spec.encode(1.5)
    with pytest.raises(ValueError, match=r"last dim of shape \[2, 3\] must be n=4"):
        OneHot(4, shape=(2, 3))
    i64 = OneHot(3, shape=(2, 3), dtype=rlpipe.int64)
    assert not i64.is_in(rlpipe.tensor([[2, -1, 0], [1, 0, 0]]))  # sums to 1 but is not 0/1
    assert i64.to_categorical_spec() == Categorical(3, shape=(2,))
    assert S.OneHotDiscreteTensorSpec is OneHot


def test_multi_categorical():
    spec = MultiCategorical([2, 3, 4])
    assert spec.shape == (3,) and spec.nvec.tolist() == [2, 3, 4] and spec.dtype is rlpipe.int64
    x = spec.rand((N,)).numpy()
    for i, n in enumerate([2, 3, 4]):
        assert set(x[:, i].tolist()) == set(range(n))
    assert spec.is_in(rlpipe.tensor([1, 2, 3])) and not spec.is_in(rlpipe.tensor([2, 0, 0]))
    assert spec.project(rlpipe.tensor([5, -1, 2])).tolist() == [1, 0, 2]
    assert spec.to_numpy(rlpipe.tensor([1, 2, 3])).tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"values must be in \[0, nvec\)"):
        spec.encode([0, 3, 0])
    assert MultiCategorical([3, 3], shape=(4, 2)).shape == (4, 2)
    assert MultiCategorical(3).shape == (1,)
    assert "BoxList(boxes=[CategoricalBox(n=2)" in repr(spec)
    with pytest.raises(ValueError, match=r"nvec must hold positive ints, got \[2, 0\]"):
        MultiCategorical([2, 0])
    with pytest.raises(TypeError, match="nvec must hold positive ints"):
        MultiCategorical([2.5, 1])
    with pytest.raises(ValueError, match="does not match the shape"):
        MultiCategorical([2, 3], shape=(3,))
    with pytest.raises(ValueError, match="must not be empty"):
        MultiCategorical([])
    assert S.MultiDiscreteTensorSpec is MultiCategorical


def test_multi_onehot():
    spec = MultiOneHot([2, 3])
    assert spec.shape == (5,) and spec.nvec == [2, 3] and spec.dtype is rlpipe.bool
    x = spec.rand((N,))
    assert spec.is_in(x)
    a = x.numpy()
    assert (a[:, :2].sum(-1) == 1).all() and (a[:, 2:].sum(-1) == 1).all() and (a.sum(0) > 0).all()
    assert not spec.is_in(rlpipe.tensor([True, False, True, True, False]))
    assert not spec.is_in(rlpipe.tensor([False, False, True, False, False]))
    assert spec.project(rlpipe.tensor([0.2, 0.1, 0.0, 0.0, 3.0])).tolist() == [True, False, False, False, True]
    assert spec.encode([1, 2]).tolist() == [False, True, False, False, True]
    assert spec.to_numpy(spec.expand(2, 5).encode([[1, 2], [0, 0]])).tolist() == [[1, 2], [0, 0]]
    with pytest.raises(RuntimeError, match=r"shape '\[5\]' is invalid for input of size 10"):
        spec.encode([[1, 2], [0, 0]])  # a batch needs the batched spec, as torchrl 0.14.1
    with pytest.raises(ValueError, match=r"indices must be in \[0, nvec\)"):
        spec.encode([2, 0])
    with pytest.raises(ValueError, match="last dim is len\\(nvec\\)=2"):
        spec.encode([1, 0, 0])
    with pytest.raises(ValueError, match=r"must be sum\(nvec\)=5"):
        MultiOneHot([2, 3], shape=(4,))
    with pytest.raises(ValueError, match="1-dimensional"):
        MultiOneHot([[2, 3]])
    assert spec.to_categorical_spec() == MultiCategorical([2, 3])
    assert S.MultiOneHotDiscreteTensorSpec is MultiOneHot


def test_binary():
    spec = Binary(3)
    assert spec.shape == (3,) and spec.n == 3 and spec.dtype is rlpipe.int8
    a = spec.rand((N,)).numpy()
    assert set(np.unique(a).tolist()) == {0, 1} and (a.mean(0) > 0.3).all()
    assert not spec.is_in(rlpipe.tensor([0, 2, 1], dtype=rlpipe.int8))
    assert spec.project(rlpipe.tensor([0.7, -3.0, 0.2])).tolist() == [1, 0, 0]
    assert spec.to_numpy(spec.encode([1, 0, 1])).dtype == np.int8
    assert Binary(shape=(2, 5)).n == 5
    with pytest.raises(TypeError, match="provide n or shape"):
        Binary()
    with pytest.raises(ValueError, match=r"last dim of shape \[2, 4\] must be n=3"):
        Binary(3, shape=(2, 4))
    with pytest.raises(ValueError, match="0 or 1"):
        spec.encode([0, 2, 1])
    assert S.BinaryDiscreteTensorSpec is Binary


def test_encode_reshapes_and_rejects_mismatch():
    spec = Bounded(-1.0, 1.0, shape=(2, 2))
    assert spec.encode(np.zeros(4)).shape == (2, 2)
    assert spec.expand(3, 2, 2).encode(np.zeros((3, 2, 2), dtype=np.float64)).dtype is rlpipe.float32
    for value in (np.zeros(3), np.zeros((3, 2, 2))):  # torchrl 0.14.1 refuses both (a batch too)
        with pytest.raises(RuntimeError, match="Shape mismatch: the value has shape"):
            spec.encode(value)
    assert spec.to_numpy(spec.rand()).dtype == np.float32


def test_to_dtype_and_reshape():
    spec = Bounded(0.0, 1.0, shape=(1, 3), dtype=rlpipe.float64)
    f = spec.to(rlpipe.float32)
    assert f.dtype is rlpipe.float32 and f.low.dtype is rlpipe.float32 and isinstance(f, BoundedContinuous)
    assert spec.unsqueeze(0).shape == (1, 1, 3) and spec.squeeze().shape == (3,) and spec.squeeze(1) is spec
    assert spec.reshape(3, 1).low.shape == (3, 1) and spec.reshape(-1).shape == (3,)
    assert spec.expand(4, 2, 3).shape == (4, 2, 3)  # a size-1 dim may be expanded, as Tensor.expand
    with pytest.raises(ValueError, match="cannot reshape"):
        spec.reshape(4)


# ---- Composite ------------------------------------------------------------------------------------
def make_composite(shape=()):
    return Composite(
        observation=Bounded(-1.0, 1.0, shape=tuple(shape) + (3,)),
        nested=Composite(action=OneHot(4, shape=tuple(shape) + (4,)),
                         deeper={"count": Categorical(7, shape=shape)}, shape=shape),
        shape=shape)


def test_composite_keys_and_access():
    c = make_composite()
    assert list(c.keys()) == ["observation", "nested"]
    # torchrl 0.14.1's order: a nested Composite's keys before its own
    assert list(c.keys(True)) == ["observation", ("nested", "action"), ("nested", "deeper", "count"),
                                  ("nested", "deeper"), "nested"]
    assert list(c.keys(True, True)) == ["observation", ("nested", "action"), ("nested", "deeper", "count")]
    assert ("nested", "action") in c.keys(True) and ("nested", "action") not in c.keys()  # noqa: SIM118
    assert "nested" in c.keys(True) and "nested" not in c.keys(True, True)
    assert ("nested", "action") in c and "missing" not in c
    assert isinstance(c["nested"], Composite) and isinstance(c["nested", "deeper"], Composite)
    assert c["nested", "deeper", "count"] == Categorical(7) == c[("nested", ("deeper", "count"))]
    assert c.get("missing", None) is None
    with pytest.raises(KeyError, match="missing"):
        c["missing"]
    assert [k for k, _ in c.items(True, True)] == list(c.keys(True, True))
    assert len(c.values(True, True)) == 3 and len(c) == 2
    c["new", "leaf"] = Unbounded((1,))
    assert isinstance(c["new"], Composite) and c["new", "leaf"] == Unbounded((1,))
    assert c.set("x", Binary(2)) is c and "x" in c
    del c["new", "leaf"]
    assert ("new", "leaf") not in c
    assert c.pop("x") == Binary(2) and "x" not in c
    assert Composite({"a": Unbounded(())}) == Composite(a=Unbounded(()))
    assert S.CompositeSpec is Composite


def test_composite_rand_zero_is_in_project():
    c = make_composite()
    td = c.rand()
    assert isinstance(td, TensorDict) and td.batch_size == ()
    assert c.is_in(td)
    assert td["nested", "action"].shape == (4,) and td["nested", "deeper", "count"].shape == ()
    batched = c.rand((5, 2))
    assert batched.batch_size == (5, 2) and batched["observation"].shape == (5, 2, 3) and c.is_in(batched)
    zero = c.zero()
    assert c.is_in(zero) and zero["observation"].tolist() == [0.0, 0.0, 0.0]
    # an entry out of its space, then projected back
    td.set("observation", rlpipe.tensor([3.0, -3.0, 0.5]))
    td.set(("nested", "deeper", "count"), rlpipe.tensor(12))
    assert not c.is_in(td)
    out = c.project(td)
    assert out is td and c.is_in(td)
    assert td["observation"].tolist() == [1.0, -1.0, 0.5] and td["nested", "deeper", "count"].item() == 6
    # a missing entry is not in the spec; an extra entry is ignored
    td2 = c.rand()
    td2.set("extra", rlpipe.zeros(1))
    assert c.is_in(td2)
    del td2["observation"]
    assert not c.is_in(td2)
    assert not c.is_in(rlpipe.zeros(3))


def test_composite_batched_shape_expand_clone_eq():
    c = make_composite(shape=(2,))
    assert c.shape == (2,) and c.rand().batch_size == (2,) and c.is_in(c.rand())
    e = make_composite().expand(2)
    assert e == c and e.shape == (2,) and e["nested", "action"].shape == (2, 4)
    assert e.expand(3, 2)["observation"].shape == (3, 2, 3)
    cl = c.clone()
    assert cl == c and cl is not c and cl["observation"] is not c["observation"]
    cl["observation"] = Bounded(-2.0, 1.0, shape=(2, 3))
    assert cl != c
    on_cpu = c.to("cpu")  # the Composite's device becomes cpu (it was None): unequal, as in torchrl
    assert on_cpu.device == rlpipe.device("cpu") and on_cpu != c
    assert all(on_cpu[k] == c[k] for k in c.keys(True, True))
    with pytest.raises(ValueError, match=r"must start with the Composite's shape rlpipe.Size\(\[2\]\)"):
        c["bad"] = Unbounded((3,))
    with pytest.raises(TypeError, match="must be a TensorSpec"):
        c["bad"] = 3
    as_int = c.to(rlpipe.int32)
    assert as_int["observation"].dtype is rlpipe.int32 and isinstance(as_int["observation"], BoundedDiscrete)


def test_composite_none_entries_encode_to_numpy_repr():
    c = Composite(a=Categorical(3), b=None, n={"x": Bounded(0, 5, shape=(2,), dtype=rlpipe.int64)})
    assert c["b"] is None and c.is_in(c.rand()) and "b" not in c.rand().keys()  # noqa: SIM118 - TensorDict has no __contains__
    td = c.encode({"a": 2, ("n", "x"): np.array([1, 5])})
    assert c.is_in(td) and td["n", "x"].tolist() == [1, 5]
    host = c.to_numpy(td)
    assert host["a"] == 2 and host["n"]["x"].tolist() == [1, 5]
    r = repr(c)
    assert r.startswith("Composite(\n    a: Categorical(") and "shape=rlpipe.Size([])" in r
    assert Composite().is_empty() and Composite(a=None).rand().is_empty()


# ---- Gymnasium --------------------------------------------------------------------------------------
gym_spaces = pytest.importorskip("gymnasium.spaces")


def _check_gym_round_trip(space, spec, draws=50):
    """Space samples encode into the spec; spec samples convert back into the space."""
    space.seed(0)
    for _ in range(draws):
        sample = space.sample()
        enc = spec.encode(sample)
        assert spec.is_in(enc), (sample, enc)
        act = spec.to_numpy(spec.rand())
        assert space.contains(act if not isinstance(act, int) else np.int64(act)), act


def test_from_gym_box():
    space = gym_spaces.Box(-1.0, 2.0, (3,), dtype=np.float32)
    spec = from_gym_space(space)
    assert spec == Bounded(-1.0, 2.0, shape=(3,))
    _check_gym_round_trip(space, spec)
    f64 = from_gym_space(gym_spaces.Box(np.array([0.0, -1.0]), np.array([1.0, 1.0]), dtype=np.float64))
    assert f64.dtype is rlpipe.float64 and isinstance(f64, BoundedContinuous)
    img = gym_spaces.Box(0, 255, (4, 4, 3), dtype=np.uint8)
    img_spec = from_gym_space(img)
    assert isinstance(img_spec, BoundedDiscrete) and img_spec.dtype is rlpipe.uint8 and img_spec.shape == (4, 4, 3)
    _check_gym_round_trip(img, img_spec)


def test_from_gym_box_infinite():
    space = gym_spaces.Box(np.full(4, -np.inf), np.full(4, np.inf), dtype=np.float64)
    spec = from_gym_space(space, device="cpu")
    assert isinstance(spec, UnboundedContinuous) and spec.shape == (4,) and spec.dtype is rlpipe.float64
    _check_gym_round_trip(space, spec)
    partial = gym_spaces.Box(np.array([-np.inf, 0.0], np.float32), np.array([np.inf, 1.0], np.float32))
    pspec = from_gym_space(partial)
    assert isinstance(pspec, BoundedContinuous) and pspec.is_in(pspec.rand((N,)))
    _check_gym_round_trip(partial, pspec)


def test_from_gym_box_scalar_shape_is_one():
    # as torchrl: a 0-d Box becomes a [1] spec; encode reshapes the env's 0-d arrays
    space = gym_spaces.Box(-1.0, 1.0, (), dtype=np.float32)
    spec = from_gym_space(space)
    assert spec.shape == (1,) and spec.low.tolist() == [-1.0]
    space.seed(0)
    for _ in range(20):
        assert spec.is_in(spec.encode(space.sample()))
        assert space.contains(spec.to_numpy(spec.rand()).reshape(()))


def test_from_gym_discrete():
    space = gym_spaces.Discrete(6)
    one_hot = from_gym_space(space)
    assert one_hot == OneHot(6, dtype=rlpipe.int64)
    assert set(one_hot.to_numpy(one_hot.rand((N,))).tolist()) == set(range(6))
    _check_gym_round_trip(space, one_hot)
    cat = from_gym_space(space, categorical_action_encoding=True)
    assert cat == Categorical(6)
    _check_gym_round_trip(space, cat)


def test_from_gym_multi_discrete():
    space = gym_spaces.MultiDiscrete([2, 3, 2])
    moh = from_gym_space(space)
    assert moh == MultiOneHot([2, 3, 2], dtype=rlpipe.int64)
    _check_gym_round_trip(space, moh)
    mc = from_gym_space(space, categorical_action_encoding=True)
    assert mc == MultiCategorical([2, 3, 2])
    _check_gym_round_trip(space, mc)
    grid = gym_spaces.MultiDiscrete(np.full((2, 2), 3))
    grid_spec = from_gym_space(grid)
    assert grid_spec == OneHot(3, shape=(2, 2, 3), dtype=rlpipe.int64)
    assert grid.contains(grid_spec.to_numpy(grid_spec.rand()))
    ragged = gym_spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]))
    with pytest.raises(NotImplementedError, match="categorical_action_encoding=True"):
        from_gym_space(ragged)
    rspec = from_gym_space(ragged, categorical_action_encoding=True)
    assert rspec.shape == (2, 2)
    _check_gym_round_trip(ragged, rspec)


def test_from_gym_multi_binary():
    space = gym_spaces.MultiBinary(5)
    spec = from_gym_space(space)
    assert spec == Binary(5) and spec.dtype is rlpipe.int8
    _check_gym_round_trip(space, spec)
    grid = gym_spaces.MultiBinary([2, 3])
    gspec = from_gym_space(grid)
    assert gspec.shape == (2, 3) and gspec.n == 3
    _check_gym_round_trip(grid, gspec)


def test_from_gym_dict_and_tuple_nested():
    space = gym_spaces.Dict({
        "position": gym_spaces.Box(-1.0, 1.0, (2,)),
        "inner": gym_spaces.Dict({"flag": gym_spaces.Discrete(2), "bits": gym_spaces.MultiBinary(3)}),
        "pair": gym_spaces.Tuple((gym_spaces.Discrete(3), gym_spaces.Box(-np.inf, np.inf, (1,)))),
    })
    spec = from_gym_space(space, categorical_action_encoding=True)
    assert isinstance(spec, Composite)
    assert set(spec.keys(True, True)) == {"position", ("inner", "flag"), ("inner", "bits"), ("pair", "0"),
                                          ("pair", "1")}
    assert spec["inner", "flag"] == Categorical(2) and spec["pair", "0"] == Categorical(3)
    assert isinstance(spec["pair", "1"], UnboundedContinuous)
    td = spec.rand()
    assert spec.is_in(td)
    space.seed(0)
    sample = space.sample()
    enc = spec.encode({"position": sample["position"], ("inner", "flag"): sample["inner"]["flag"],
                       ("inner", "bits"): sample["inner"]["bits"], ("pair", "0"): sample["pair"][0],
                       ("pair", "1"): sample["pair"][1]})
    assert spec.is_in(enc)
    host = spec.to_numpy(td)
    assert space["inner"]["flag"].contains(np.int64(host["inner"]["flag"]))
    assert space["position"].contains(host["position"])
    one_hot = from_gym_space(space)
    assert one_hot["inner", "flag"] == OneHot(2, dtype=rlpipe.int64)
    tup = from_gym_space(gym_spaces.Tuple((gym_spaces.Discrete(2), gym_spaces.Discrete(3))))
    assert list(tup) == ["0", "1"]


def test_from_gym_unsupported():
    with pytest.raises(NotImplementedError, match="Text"):
        from_gym_space(gym_spaces.Text(5))


def test_pickle_and_deepcopy():
    import copy
    import pickle
    for spec in LEAVES + [make_composite(shape=(2,))]:
        for dup in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec)):
            assert dup == spec and type(dup) is type(spec)
            assert dup.is_in(spec.rand())


def test_one():
    assert Bounded(0, 5, shape=(2,), dtype=rlpipe.int64).one().tolist() == [1, 1]
    assert Unbounded((1,)).one().tolist() == [1.0]
    assert make_composite().one()["observation"].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_host_membership_test_of_a_spec_on_cuda():
    """The collector checks host action arrays against a spec that may live on a GPU."""
    spec = S.Bounded(low=-1.0, high=1.0, shape=(2,), device="cuda")
    test = spec.host_membership_test()
    assert test(np.array([0.5, -1.0], np.float32)) and not test(np.array([0.5, 1.5], np.float32))


# ---- rlpipe.stack of specs (torchrl's torch.stack of specs) ----------------------------------------------------
def test_stack_equal_specs_adds_a_dim():
    from rlpipe.envs.specs import Bounded, Composite
    leaf = Bounded(-1.0, 1.0, shape=(3,))
    stacked = rlpipe.stack([leaf, leaf.clone()], 0)
    assert type(stacked) is type(leaf) and stacked.shape == (2, 3)
    assert rlpipe.stack([leaf, leaf], -1).shape == (3, 2)
    comp = rlpipe.stack([Composite(x=leaf), Composite(x=leaf.clone())], 0)
    assert comp.shape == (2,) and comp["x"].shape == (2, 3)


def test_stack_specs_errors():
    from rlpipe.envs.specs import Bounded, Unbounded
    leaf = Bounded(-1.0, 1.0, shape=(3,))
    with pytest.raises(RuntimeError, match="more than one type of specs in the list .BoundedContinuous and "
                                           "UnboundedContinuous."):
        rlpipe.stack([leaf, Unbounded((3,))], 0)
    with pytest.raises(RuntimeError, match="more than one dtype"):
        rlpipe.stack([leaf, Bounded(-1.0, 1.0, shape=(3,), dtype=rlpipe.float64)], 0)
    different = rlpipe.stack([leaf, Bounded(-2.0, 1.0, shape=(3,))], 0)  # torchrl's lazy Stacked
    assert type(different).__name__ == "Stacked" and different.shape == (2, 3) and different[1].low[0].item() == -2.0
    with pytest.raises(RuntimeError, match="expected a non-empty list of specs"):
        from rlpipe.envs._specs_base import stack_specs
        stack_specs([], 0)
    with pytest.raises(IndexError, match="dim 3 out of range for specs of shape \\[3\\]"):
        rlpipe.stack([leaf, leaf], 3)


# ---- Composite attributes and one-hot conversions, as torchrl 0.14's ------------------------------------------
def test_composite_attribute_keys_cannot_be_set():

    spec = Composite(shape=())
    for key in ("shape", "device", "dtype", "space"):
        with pytest.raises(AttributeError, match=f"Composite\\['{key}'\\] cannot be set"):
            spec[key] = Unbounded(())
    assert list(spec.keys()) == []


def test_composite_shape_setter_reshapes_nested_composites():

    spec = Composite(nested=Composite(leaf=Unbounded((3, 2)), shape=(3,)), shape=(3,))
    spec.shape = ()
    assert spec.shape == () and spec["nested"].shape == (3,)  # still starts with ()
    spec["nested"].shape = ()
    spec.shape = (3,)
    assert spec["nested"].shape == (3,) and spec["nested", "leaf"].shape == (3, 2)
    with pytest.raises(ValueError, match=r"the spec at 'leaf' of shape .*\[3, 2\].* does not start with the new shape"):
        spec["nested"].shape = (4,)
    assert spec["nested"].shape == (3,)


def test_composite_type_check_of_one_entry_clear_device_and_to_none():

    spec = Composite(obs=Unbounded((2,)), nested=Composite(a=Unbounded(())), device="cpu")
    spec.type_check(rlpipe.zeros(2), "obs")
    with pytest.raises(ValueError, match="Expected dtype rlpipe.float32 for 'obs', got rlpipe.int64"):
        spec.type_check(rlpipe.zeros(2, dtype=rlpipe.int64), "obs")
    assert spec.to(None) is spec
    assert spec.clear_device_() is spec and spec.device is None and spec["nested"].device is None
    assert spec["obs"].device is not None  # leaves keep theirs


def test_categorical_to_one_hot_and_back():
    spec = Categorical(4, shape=(3,))
    assert spec.to_one_hot_spec() == OneHot(4, shape=(3, 4))
    assert spec.to_one_hot_spec().to_categorical_spec() == spec
    one_hot = spec.to_one_hot(rlpipe.tensor([0, 3, 1]))
    assert one_hot.dtype is rlpipe.bool
    assert one_hot.long().tolist() == [[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0]]


def test_multi_categorical_to_one_hot_and_back():
    spec = MultiCategorical([2, 3])
    assert spec.to_one_hot_spec() == MultiOneHot([2, 3])
    assert spec.to_one_hot_spec().to_categorical_spec() == spec
    assert spec.to_one_hot(rlpipe.tensor([1, 2])).long().tolist() == [0, 1, 0, 0, 1]
    with pytest.raises(ValueError, match="the same nvec along the leading dims"):
        MultiCategorical([[2, 3], [2, 4]]).to_one_hot_spec()


def test_one_hot_to_categorical_of_bool_values():
    assert OneHot(4).to_categorical(rlpipe.tensor([[False, False, True, False]])).tolist() == [2]
    values = rlpipe.tensor([[True, False, False, False, True]])
    assert MultiOneHot([2, 3]).to_categorical(values).tolist() == [[0, 2]]


def test_a_composite_of_fewer_leading_dims_takes_the_parents():
    parent = Composite(shape=(2, 3))
    parent["a"] = Composite(b=Composite(c=Unbounded((2, 3))))
    assert parent["a"].shape == (2, 3) and parent["a", "b"].shape == (2, 3)
    with pytest.raises(ValueError, match="must start with the Composite's shape"):
        parent["x"] = Composite(y=Unbounded((4,)), shape=(4,))


@pytest.mark.parametrize("make, message", [
    (lambda: BoundedContinuous(0, 1, shape=(1,), dtype=rlpipe.int64),
     "BoundedContinuous requires a floating dtype, got rlpipe.int64"),
    (lambda: BoundedDiscrete(0, 1, shape=(1,), dtype=rlpipe.float32),
     "BoundedDiscrete requires an integer dtype, got rlpipe.float32"),
    (lambda: UnboundedContinuous(shape=(1,), dtype=rlpipe.int64),
     "UnboundedContinuous requires a floating dtype, got rlpipe.int64"),
    (lambda: UnboundedDiscrete(shape=(1,), dtype=rlpipe.float32),
     "UnboundedDiscrete requires an integer dtype, got rlpipe.float32"),
])
def test_continuous_and_discrete_specs_refuse_the_other_dtype_kind(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_multi_categorical_of_one_squeezes_its_samples_as_torchrl():
    # torchrl 0.14.1 (remove_singleton=True): MultiCategorical([5]) has shape [1] but samples [] ([3] for rand([3]))
    spec = MultiCategorical([5])
    assert spec.shape == (1,) and spec.rand().shape == () and spec.rand([3]).shape == (3,)
    assert spec.is_in(spec.rand()) and spec.is_in(rlpipe.tensor([3, 4, 0])) and not spec.is_in(rlpipe.tensor(7))
    assert spec._project(rlpipe.tensor([9.0, -1.0, 2.4])).tolist() == [4, 0, 2]
    assert spec._project(rlpipe.tensor(9.0)).shape == ()
    kept = MultiCategorical([5], remove_singleton=False)
    assert kept.rand().shape == (1,) and kept.rand([3]).shape == (3, 1)
    assert MultiCategorical([5, 2]).rand().shape == (2,)


def test_bounded_unbind_refuses_minus_one_as_torchrl():
    # torchrl 0.14.1: Bounded(...).unbind(-1) is a ValueError; other dims (the last one named positively too) unbind
    spec = Bounded(0.0, 1.0, shape=(2, 3))
    with pytest.raises(ValueError, match="Final dimension of BoundedContinuous must remain unchanged"):
        spec.unbind(-1)
    assert [s.shape for s in spec.unbind(0)] == [(3,), (3,)] and len(spec.unbind(1)) == 3
    assert len(Bounded(0, 1, shape=(10,), dtype=rlpipe.bool).unbind(0)) == 10
