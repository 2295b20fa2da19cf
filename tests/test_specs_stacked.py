"""Lazily stacked Composite specs (torchrl's ``StackedComposite``). Expected shapes, stack dims and
key sets were recorded from torchrl 0.14.1 in the peer venv (same specs, same calls)."""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs.specs import Bounded, Composite, StackedComposite, Unbounded, UnboundedDiscrete
from rlpipe.tensordict import LazyStackedTensorDict, TensorDict


def pair():
    first = Composite(a=Bounded(-1.0, 1.0, shape=(1, 3)), shape=(1, 3))
    second = Composite(a=Bounded(-1.0, 1.0, shape=(1, 3)), b=UnboundedDiscrete(shape=(1, 3)), shape=(1, 3))
    return first, second


def test_stacking_different_composites_keeps_them():
    first, second = pair()
    spec = rlpipe.stack([first, second], 1)
    assert isinstance(spec, StackedComposite)
    assert spec.shape == (1, 2, 3) and spec.stack_dim == 1  # torchrl 0.14.1
    assert spec[:, 0] is first and spec[:, 1] is second and spec[..., 1, :] is second
    assert isinstance(spec[:, :], StackedComposite)
    assert list(spec.keys()) == ["a"]  # the keys every stacked spec has
    assert spec["a"].shape == (1, 2, 3) and type(spec["a"]).__name__ == "BoundedContinuous"


def test_samples_are_lazy_stacks_of_each_spec():
    first, second = pair()
    spec = rlpipe.stack([first, second], 1)
    sample = spec.rand((4,))
    assert isinstance(sample, LazyStackedTensorDict)
    assert sample.shape == (4, 1, 2, 3) and sample["a"].shape == (4, 1, 2, 3)
    assert spec.is_in(spec.rand()) and bool((spec.zero()["a"] == 0).all())
    assert sorted(spec.to_numpy(spec.rand()).keys()) == ["a"]
    out_of_box = spec.rand()
    parts = out_of_box.unbind(1)
    parts[0]["a"] = parts[0]["a"] + 5
    shifted = rlpipe.tensordict.lazy_stack(list(parts), 1)
    assert not spec.is_in(shifted)
    assert spec.is_in(spec.project(shifted))


def test_shape_changes_move_the_stack_dim():
    first, second = pair()
    spec = rlpipe.stack([first, second], 1)
    assert spec.expand(4, 1, 2, 3).shape == (4, 1, 2, 3) and spec.expand(4, 1, 2, 3).stack_dim == 2
    assert spec.unsqueeze(0).shape == (1, 1, 2, 3) and spec.unsqueeze(0).stack_dim == 2
    assert spec.unsqueeze(-1).shape == (1, 2, 3, 1)
    assert spec.squeeze().shape == (2, 3) and spec.squeeze().stack_dim == 0  # torchrl 0.14.1
    assert spec.unsqueeze(0).squeeze(0) == spec
    clone = spec.clone()
    assert clone == spec and clone[:, 0] is not first and clone[:, 0] == first


def test_delete_reaches_every_stacked_spec_holding_the_key():
    first, second = pair()
    spec = rlpipe.stack([first, second], 0)
    del spec["a"]
    assert list(spec[0].keys()) == [] and list(spec[1].keys()) == ["b"]  # torchrl 0.14.1


def test_stacked_composite_errors():
    first, second = pair()
    spec = rlpipe.stack([first, second], 1)
    with pytest.raises(IndexError, match="cannot index along dimension 0 when the stack dimension is 1"):
        spec[0]
    with pytest.raises(IndexError, match="only permitted if the stack dimension is the last dimension"):
        spec[..., 0]
    with pytest.raises(KeyError, match="no key 'zz' in any of the stacked specs"):
        del spec["zz"]
    with pytest.raises(ValueError, match=r"the new shape \[4, 2, 2, 3\] must end with the spec's shape \[1, 2, 3\]"):
        spec.expand(4, 2, 2, 3)
    lacking = TensorDict({"a": rlpipe.zeros(1, 2, 3)}, [1, 2, 3])
    with pytest.raises(KeyError, match=r"the value lacks the keys \['b'\]"):
        spec.is_in(lacking)
    with pytest.raises(AssertionError, match="the value is not in the spec"):
        spec.to_numpy(lacking, safe=True)
    with pytest.raises(NotImplementedError, match="the 2 UnboundedContinuous specs differ"):
        rlpipe.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))], 0)
    assert np.array_equal(spec.rand()["a"].shape, (1, 2, 3))
