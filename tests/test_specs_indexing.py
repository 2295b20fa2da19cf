"""Indexing and unbinding leaf specs (torchrl's ``spec[index]`` / ``spec.unbind(dim)``): the spec
of ``value[index]``. Expected shapes and bounds were recorded from torchrl 0.14.1 in the peer venv."""
import pytest

import rlpipe
from rlpipe.envs.specs import Binary, Bounded, Categorical, MultiCategorical, OneHot, Unbounded


def test_bounded_indexing_selects_the_bounds():
    spec = Bounded(rlpipe.arange(6.0).reshape(2, 3), 10.0, shape=(2, 3))
    assert spec[1].low.tolist() == [3.0, 4.0, 5.0]  # torchrl 0.14.1
    picked = spec[:, [0, 2]]
    assert picked.shape == (2, 2) and picked.low.tolist() == [[0.0, 2.0], [3.0, 5.0]]
    assert [part.shape for part in spec.unbind(1)] == [(2,)] * 3
    assert rlpipe.stack(Bounded(-1.0, 1.0, shape=(4, 2)).unbind(0), 0) == Bounded(-1.0, 1.0, shape=(4, 2))


def test_shapes_of_indexed_specs():
    assert Unbounded(shape=(5, 3))[1:3].shape == (2, 3)  # torchrl 0.14.1
    assert Unbounded(shape=(5, 3))[None].shape == (1, 5, 3)
    assert Unbounded(shape=(5, 3))[..., 0].shape == (5,)
    assert Binary(4, shape=(5, 4))[2].shape == (4,)
    assert Categorical(3, shape=(4,))[2].shape == () and len(Categorical(3, shape=(4,)).unbind(0)) == 4
    assert Categorical(3, shape=(4,))[rlpipe.tensor([0, 3])].shape == (2,)


def test_indexing_keeps_nvec_and_masks():
    multi = MultiCategorical([[2, 3], [4, 5]], shape=(2, 2))
    assert multi[1].shape == (2,) and multi[1].nvec.tolist() == [4, 5]  # torchrl 0.14.1
    one_hot = OneHot(4, shape=(3, 4), mask=rlpipe.tensor([True, False, True, True]))
    assert one_hot[1].shape == (4,) and one_hot[1].mask.tolist() == [True, False, True, True]
    assert one_hot[[0, 2]].mask.shape == (2, 4)
    categorical = Categorical(3, shape=(4,), mask=rlpipe.tensor([True, False, True]))
    assert categorical[2].mask.tolist() == [True, False, True]  # (torchrl 0.14.1 drops it here)


def test_indexing_errors():
    one_hot = OneHot(4, shape=(3, 4))
    with pytest.raises(IndexError, match=r"OneHot: the index \(0, 1\) does not fit the spec's indexable dims \[3\]"):
        one_hot[0, 1]
    with pytest.raises(ValueError, match=r"OneHot.unbind: dim 1 of shape \[3, 4\] must remain whole"):
        one_hot.unbind(-1)
    with pytest.raises(IndexError, match="unbind: dim 2 out of range for a spec of shape"):
        Unbounded(shape=(5, 3)).unbind(2)
    with pytest.raises(IndexError, match="Unbounded.*does not fit"):
        Unbounded(shape=(5, 3))[7]


def test_float_categorical_specs_hold_whole_numbers():
    multi = rlpipe.envs.specs.MultiCategorical([3, 4], dtype=rlpipe.float32)  # torchrl 0.14.1 accepts it
    sample = multi.rand((50,))
    assert sample.dtype is rlpipe.float32 and multi.is_in(sample)
    assert bool((sample == sample.floor()).all()) and sample[:, 0].max().item() <= 2
    assert not multi.is_in(rlpipe.tensor([1.5, 1.0]))
    single = Categorical(4, dtype=rlpipe.float32)
    assert single.is_in(rlpipe.tensor(2.0)) and not single.is_in(rlpipe.tensor(2.5))
    assert single.host_membership_test()(single.rand((3,)).numpy())
    with pytest.raises(ValueError, match="MultiCategorical requires an integer or float dtype, got rlpipe.bool"):
        rlpipe.envs.specs.MultiCategorical([3, 4], dtype=rlpipe.bool)
