"""Names that the peers' code imports and type-checks with (TensorDict kinds, tensorclasses, recurrent
modules): they exist, answer as tensordict/torchrl do for what rlpipe has, and say plainly what rlpipe
lacks."""
import pytest

import rlpipe
from rlpipe.modules import recurrent_mode, set_recurrent_mode
from rlpipe.tensordict import (LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection,
                               is_tensorclass, tensorclass)


def td(n=2, **entries):
    return TensorDict({"a": rlpipe.arange(n, dtype=rlpipe.float32), **entries}, [n])


def test_every_tensordict_is_a_tensordictbase_and_a_tensor_collection():
    assert isinstance(td(), TensorDictBase)
    assert is_tensor_collection(td()) and is_tensor_collection(TensorDict)
    assert not is_tensor_collection(rlpipe.ones(2)) and not is_tensor_collection({"a": 1})
    assert not is_tensorclass(td()) and not is_tensorclass(TensorDict)


def test_tensorclass_builds_instances():
    # tensorclasses exist since issue 30 (they raised NotImplementedError before): tests/test_tensorclass.py
    @tensorclass
    class Data:
        x: rlpipe.Tensor
    data = Data(x=rlpipe.zeros(1), batch_size=[1])
    assert is_tensorclass(data) and is_tensor_collection(data) and data.x.tolist() == [0.0]


def test_maybe_dense_stack_stacks_densely():
    out = LazyStackedTensorDict.maybe_dense_stack([td(), td()], 1)
    assert out.batch_size == rlpipe.Size([2, 2]) and type(out) is TensorDict
    assert out["a"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert TensorDict.maybe_dense_stack([td(), td()]).batch_size == rlpipe.Size([2, 2])
    mixed = TensorDict.maybe_dense_stack([td(), td(b=rlpipe.ones(2))])  # keys differ: lazy, as in tensordict
    assert type(mixed) is LazyStackedTensorDict and mixed.keys() == ["a"]


def test_lazy_stacks_are_built():
    out = LazyStackedTensorDict.lazy_stack([td(), td()])
    assert type(out) is LazyStackedTensorDict and out.batch_size == rlpipe.Size([2, 2])
    assert type(LazyStackedTensorDict(td(), td())) is LazyStackedTensorDict


def test_set_recurrent_mode_as_context_and_decorator():
    # outside any block torchrl's recurrent_mode() is None: each module follows its default_recurrent_mode
    assert recurrent_mode() is None
    with set_recurrent_mode(True):
        assert recurrent_mode() is True
        with set_recurrent_mode("sequential"):
            assert recurrent_mode() is False
        assert recurrent_mode() is True
    assert recurrent_mode() is None

    @set_recurrent_mode("recurrent")
    def inside():
        return recurrent_mode()
    assert inside() is True and recurrent_mode() is None
    with pytest.raises(ValueError, match="mode must be True, False, 'recurrent' or 'sequential', got 'fast'"):
        set_recurrent_mode("fast")
    with pytest.raises(ValueError, match="mode must be True, False, 'recurrent' or 'sequential', got 1"):
        set_recurrent_mode(1)


def test_torchrl_data_names_the_spec_classes():
    # torchrl 0.14 code imports its specs from torchrl.data and torchrl.data.tensor_specs
    import rlpipe.data
    from rlpipe.data import OneHot, tensor_specs
    from rlpipe.envs import specs
    assert OneHot is specs.OneHot and tensor_specs.Composite is specs.Composite
    assert tensor_specs.BoxList is specs.BoxList and tensor_specs.__all__ == specs.__all__
    for name in ("Binary", "Bounded", "BoundedContinuous", "Categorical", "Composite", "MultiCategorical",
                 "MultiOneHot", "OneHot", "TensorSpec", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete"):
        assert getattr(rlpipe.data, name) is getattr(specs, name) and name in rlpipe.data.__all__
    assert OneHot(3).rand().shape == rlpipe.Size([3])
    with pytest.raises(AttributeError, match="module 'rlpipe.data' has no attribute 'OneHotDiscreteTensorSpec'"):
        rlpipe.data.OneHotDiscreteTensorSpec  # noqa: B018 - gone from torchrl.data in 0.14
