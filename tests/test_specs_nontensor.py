"""``NonTensor`` and ``Choice`` specs, and ``cardinality``. Expected values were recorded from
torchrl 0.14.1 in the peer venv (same calls); sampled sets are brute-force checks over many draws."""
import math

import pytest

import rlpipe
from rlpipe.envs.specs import (
    Binary,
    Bounded,
    Categorical,
    Choice,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Unbounded,
)
from rlpipe.tensordict import NonTensorData, NonTensorStack


def test_non_tensor_samples_shapes_and_membership():
    spec = NonTensor(shape=(2,), example_data="hi")
    sample = spec.rand((3,))
    assert isinstance(sample, NonTensorStack) and sample.shape == (3, 2)
    assert sample.tolist() == [["hi", "hi"]] * 3  # torchrl 0.14.1
    assert spec.expand(4, 2).shape == (4, 2) and spec.expand(4, 2).example_data == "hi"
    assert spec.unsqueeze(0).shape == (1, 2)
    assert spec.is_in("anything") and spec.is_in(NonTensorData("x", batch_size=[2]))
    assert not spec.is_in(rlpipe.zeros(2))
    assert NonTensor().shape == (1,)
    assert NonTensor(example_data="a") == NonTensor(example_data="a")
    assert NonTensor(example_data="a") != NonTensor(example_data="b")


def test_non_tensor_feature_dims_and_encode():
    spec = NonTensor(shape=(3, 4), example_data="x", feature_dims=1)
    sample = spec.zero()
    assert isinstance(sample, NonTensorStack) and sample.shape == (3, 4)  # torchrl 0.14.1
    whole = NonTensor(shape=(3, 4), example_data="x").rand()
    assert isinstance(whole, NonTensorData) and whole.shape == (3, 4) and whole.data == "x"
    encoded = NonTensor(shape=(2,)).encode("s")
    assert isinstance(encoded, NonTensorData) and encoded.shape == (2,) and encoded.data == "s"
    comp = Composite(device="cpu")
    comp["text"] = NonTensor(shape=(1,))
    assert comp["text"].device == rlpipe.device("cpu")
    out = comp.encode({"text": "a string"})
    assert out.get("text").data == "a string" and out.get("text").shape == (1,)


def test_non_tensor_errors():
    with pytest.raises(ValueError, match="NonTensor: give batched or feature_dims, not both"):
        NonTensor(batched=True, feature_dims=1)
    with pytest.raises(NotImplementedError, match="Cannot enumerate a NonTensor spec"):
        NonTensor().cardinality()
    with pytest.raises(NotImplementedError, match="Cannot project a NonTensor spec"):
        NonTensor().project("x")


def test_choice_of_non_tensor_values():
    rlpipe.manual_seed(0)
    spec = Choice([NonTensorData(x) for x in "abcd"])
    assert sorted({spec.rand().data for _ in range(100)}) == ["a", "b", "c", "d"]  # torchrl 0.14.1: all four
    stacks = Choice([NonTensorStack("a", "b"), NonTensorStack("c", "d")])
    assert stacks.shape == (2,) and stacks.cardinality() == 2
    assert stacks.is_in(NonTensorStack("c", "d")) and not stacks.is_in(NonTensorStack("d", "c"))


def test_choice_of_specs():
    rlpipe.manual_seed(0)
    spec = Choice([Bounded(0.0, 1.0, shape=(1,)), Bounded(10.0, 11.0, shape=(1,))])
    draws = [spec.rand().item() for _ in range(100)]
    assert all(0 <= v <= 1 or 10 <= v <= 11 for v in draws)
    assert any(v > 5 for v in draws) and any(v < 5 for v in draws)
    assert spec.is_in(rlpipe.tensor([10.5])) and not spec.is_in(rlpipe.tensor([5.0]))
    assert spec.zero().tolist() == [0.0] and spec.num_choices == 2
    assert spec.expand(3, 1).shape == (3, 1) and spec.clone() == spec
    assert Choice([Categorical(10), Categorical(20)]).cardinality() == 30  # torchrl 0.14.1
    assert spec.cardinality() == math.inf


def test_choice_errors():
    with pytest.raises(TypeError, match="'choices' must be a list, got str"):
        Choice("abc")
    with pytest.raises(TypeError, match="must be either a TensorSpec, NonTensorData, or NonTensorStack, got str"):
        Choice(["abc"])
    with pytest.raises(TypeError, match="must be the same type, got BoundedContinuous and Categorical"):
        Choice([Bounded(0.0, 1.0, (1,)), Categorical(10, (1,))])
    with pytest.raises(ValueError, match="must have the same shape"):
        Choice([Categorical(10, (1,)), Categorical(10, (2,))])
    with pytest.raises(ValueError, match="must have the same dtype"):
        Choice([Categorical(10, (2,)), Categorical(10, (2,), dtype=rlpipe.int32)])
    with pytest.raises(ValueError, match="'choices' must not be empty"):
        Choice([])


def test_cardinality_matches_torchrl():
    assert MultiCategorical(nvec=(4, 5, 6), shape=(5, 3)).cardinality() == 120  # torchrl 0.14.1: 120
    assert MultiOneHot(nvec=(4, 5, 6), shape=(5, 15)).cardinality() == 120
    assert Categorical(4, shape=(5,)).cardinality() == 4 and OneHot(4).cardinality() == 4
    assert Binary(n=4).cardinality() == 16  # the number of bit patterns (torchrl's gives 2)
    assert Bounded(0, 3, shape=(1,), dtype=rlpipe.int64).cardinality() == math.inf
    with pytest.raises(NotImplementedError, match="cardinality is not implemented for Unbounded"):
        Unbounded(shape=(1,)).cardinality()


def test_enumerate_lists_every_value():
    assert Categorical(5, shape=(3,)).enumerate().tolist() == [[i] * 3 for i in range(5)]  # torchrl 0.14.1
    one_hot = OneHot(5, shape=(2, 5)).enumerate()
    assert one_hot.shape == (5, 2, 5) and one_hot[1].tolist() == [[False, True, False, False, False]] * 2
    for spec, count in ((MultiCategorical([3, 4, 5], shape=(2, 3)), 60), (MultiOneHot([3, 4, 5], shape=(2, 12)), 60),
                        (Binary(4, shape=(5, 4)), 16)):
        values = spec.enumerate()
        assert len(values) == count == spec.cardinality() and spec.is_in(values)
        assert len({tuple(v) for v in values[:, 0].tolist()}) == count  # all different
    comp = Composite({"a": OneHot(5, shape=(3, 5)), ("b", "c"): Categorical(4, shape=(3,))}, shape=[3])
    values = comp.enumerate()
    assert values.shape == (20, 3) and values["b", "c"].shape == (20, 3) and comp.is_in(values)
    assert comp.cardinality() == 20
    masked = Categorical(4, mask=rlpipe.tensor([True, False, True, True]))
    assert masked.enumerate(use_mask=True).tolist() == [0, 2, 3] and masked.enumerate().tolist() == [0, 1, 2, 3]
    with pytest.raises(NotImplementedError, match="BoundedContinuous.enumerate: only discrete specs"):
        Bounded(0.0, 1.0, shape=(1,)).enumerate()
