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
    leaves = rlpipe.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))], 0)  # torchrl's Stacked: shape [2, -1]
    with pytest.raises(NotImplementedError, match=r"Stacked.rand: the stacked specs have different shapes \[\[2\], "
                                                  r"\[3\]\], whose samples torchrl makes nested tensors"):
        leaves.rand()
    assert np.array_equal(spec.rand()["a"].shape, (1, 2, 3))


# ---- leaves that differ (torchrl's Stacked) and consolidate_spec; values recorded from torchrl 0.14.1 -------
def _agents():
    from rlpipe.envs.specs import Bounded
    a = Composite(camera=Bounded(0, 200, shape=(7, 3)), vector=Unbounded(3), lidar=Bounded(0, 5, shape=(8,)))
    b = Composite(camera=Bounded(0, 200, shape=(7, 3)), vector=Unbounded(2), t=Unbounded((1, 2)))
    return rlpipe.stack([a, b], 0)


def test_leaves_that_differ_stack_lazily_with_minus_one_dims():
    from rlpipe.envs.specs import Stacked
    spec = _agents()
    vector = spec["vector"]
    assert type(vector) is Stacked and vector.shape == (2, -1) and vector[1].shape == (2,)
    assert vector.clone() == vector and vector.expand(4, 2, -1).shape == (4, 2, -1)
    assert vector.expand(4, 2, -1)._specs[0].shape == (4, 3)
    assert vector.is_in([rlpipe.zeros(3), rlpipe.zeros(2)]) and not vector.is_in([rlpipe.zeros(2), rlpipe.zeros(2)])
    assert sorted(spec.keys()) == ["camera", "vector"]  # the keys every stacked spec has
    outer = Composite(lazy=spec, state=Unbounded(4))
    assert sorted(map(str, outer.keys(True, True))) == ["('lazy', 'camera')", "('lazy', 'vector')", "state"]
    assert ("lazy", "vector") in outer.keys(True, True) and outer["lazy", "vector"].shape == (2, -1)


def test_consolidate_spec_fills_the_exclusive_keys():
    from rlpipe.data.utils import check_no_exclusive_keys, consolidate_spec, contains_lazy_spec
    spec = _agents()
    assert not check_no_exclusive_keys(spec) and contains_lazy_spec(spec) and not contains_lazy_spec(spec[0])
    out = consolidate_spec(spec)
    assert check_no_exclusive_keys(out) and sorted(out.keys()) == ["camera", "lidar", "t", "vector"]
    assert out[1]["lidar"].shape == (0,) and out[0]["t"].shape == (0, 0) and out["lidar"].shape == (2, -1)
    assert sorted(spec.keys()) == ["camera", "vector"]  # the input is not changed
    outer = consolidate_spec(Composite(lazy=spec, state=Unbounded(4)))
    assert sorted(map(str, outer.keys(True, True))) == [
        "('lazy', 'camera')", "('lazy', 'lidar')", "('lazy', 't')", "('lazy', 'vector')", "state"]
    with pytest.raises(ValueError, match="Found same key in lazy specs corresponding to entries with different "
                                         "classes"):
        # the exclusive key z is a leaf in one stacked spec, a Composite in another
        consolidate_spec(rlpipe.stack([Composite(z=Unbounded(2)), Composite(z=Composite()), Composite()], 0))


def test_lazily_stacked_entries_of_different_shapes_in_tensordicts():
    from rlpipe.envs.utils import step_mdp
    from rlpipe.tensordict import LazyStackedTensorDict
    lazy = LazyStackedTensorDict.lazy_stack([TensorDict({"v": rlpipe.zeros(3)}, []),
                                             TensorDict({"v": rlpipe.ones(2)}, [])], 0)
    td = TensorDict({"lazy": lazy}, [])
    td["lazy", "done"] = rlpipe.tensor([[True], [False]])  # set through the lazy stack
    assert td["lazy"][0]["done"].tolist() == [True] and td["lazy"][1]["done"].tolist() == [False]
    assert td.any() and not td.all()  # reduced one stacked TensorDict at a time
    step = TensorDict({"lazy": lazy.clone(), "next": TensorDict({"lazy": lazy.clone()}, [])}, [])
    step["next", "lazy", "reward"] = rlpipe.ones(2, 1)
    root = step_mdp(step, reward_keys=[("lazy", "reward")], done_keys=[("lazy", "done")])
    assert isinstance(root["lazy"], LazyStackedTensorDict) and sorted(root["lazy"].keys()) == ["done", "v"]
    assert root["lazy"][1]["v"].tolist() == [1.0, 1.0]


def test_stacked_composite_set_unbinds_the_value_along_the_stack_dim():
    spec = _agents()
    assert spec.unbind(0) == tuple(spec._specs)
    spec["speed"] = rlpipe.stack([Unbounded(1), Unbounded(2)], 0)  # a Stacked value: one part per stacked spec
    assert spec[0]["speed"].shape == (1,) and spec[1]["speed"].shape == (2,) and spec["speed"].shape == (2, -1)
    spec.set("flag", Unbounded((2, 3)))
    assert spec[1]["flag"].shape == (3,)
    with pytest.raises(RuntimeError, match="key should be a Sequence<NestedKey>: StackedComposite sets entries at str "
                                           "or tuple of str keys, got 0"):
        spec[0] = Composite()
    with pytest.raises(ValueError, match=r"StackedComposite.set: 'x' has 3 entries along the stack dim 0, expected 2"):
        spec.set("x", Unbounded((3, 1)))
    with pytest.raises(ValueError, match="only the stack dim 0 unbinds, got dim 1"):
        rlpipe.stack([Composite(a=Unbounded(2), shape=(2,)), Composite(b=Unbounded(2), shape=(2,))], 0).unbind(1)
    from rlpipe.tensordict.utils import _unravel_key_to_tuple
    assert _unravel_key_to_tuple(("a", ("b", "c"))) == ("a", "b", "c")


def different_pair():
    return Composite(x=Unbounded(shape=(3,)), y=Unbounded(shape=(2,))), Composite(x=Unbounded(shape=(4,)))


def test_stacked_composite_is_a_composite_with_torchrls_dict_methods():
    spec = rlpipe.stack(different_pair(), 0)
    assert isinstance(spec, Composite) and spec.shape == (2,) and list(spec.keys()) == ["x"]  # torchrl 0.14.1
    assert [type(v).__name__ for v in spec] == ["Stacked"]  # torchrl iterates over the values
    assert not spec.is_empty() and spec.ndim == 1 and spec.device is None
    with pytest.raises(NotImplementedError, match="`cardinality` is not implemented for StackedComposite specs."):
        spec.cardinality()
    parent = Composite(inner=spec, shape=(2,))
    assert parent["inner"] is spec
    del parent["inner", "x"]  # through the parent Composite, into each stacked spec (torchrl 0.14.1)
    assert list(spec.keys()) == [] and list(spec[0].keys()) == ["y"] and list(spec[1].keys()) == []
    empty = spec.empty()
    assert isinstance(empty, StackedComposite) and empty.is_empty() and empty.shape == (2,)
    assert list(spec[0].keys()) == ["y"]  # (empty() copied: the stack is unchanged)


def test_stacked_composite_update_merges_each_stacked_spec():
    left = rlpipe.stack([Composite(z=Composite(u=Unbounded(shape=(1,)))),
                         Composite(z=Composite(v=Unbounded(shape=(2,))))], 0)
    right = rlpipe.stack([Composite(z=Composite(w=Unbounded(shape=(5,)))),
                          Composite(z=Composite(w=Unbounded(shape=(6,))))], 0)
    assert left.update(right) is left
    # torchrl 0.14.1: each stacked spec's "z" keeps its keys and gains "w" of its own shape
    assert list(left[0]["z"].keys()) == ["u", "w"] and list(left[1]["z"].keys()) == ["v", "w"]
    assert left[1]["z", "w"].shape == (6,)
    left.update({"new": rlpipe.stack([Unbounded(shape=(i,)) for i in (1, 2)], 0)})
    assert left[0]["new"].shape == (1,) and left[1]["new"].shape == (2,)
    picked = left.select("new")
    assert isinstance(picked, StackedComposite) and list(picked[1].keys()) == ["new"]


def test_a_composite_holding_a_stacked_composite_samples_it_lazily():
    parent = Composite(agents=rlpipe.stack(different_pair(), 0), shape=(2,))
    sample = parent.rand()
    assert sample.batch_size == (2,) and isinstance(sample["agents"], LazyStackedTensorDict)
    assert sample["agents"][0]["y"].shape == (2,) and sample["agents"][1]["x"].shape == (4,)
    assert parent.is_in(sample) and parent.zero()["agents"][1]["x"].tolist() == [0.0] * 4


def test_consolidate_spec_reaches_the_entries_of_a_lazy_stack():
    from rlpipe.data.utils import consolidate_spec
    spec = rlpipe.stack([Composite(o=Composite(p=Unbounded(shape=(2,)))), Composite(q=Unbounded(shape=(1,)))], 0)
    full = consolidate_spec(spec)
    # torchrl 0.14.1 gives these very keys, in this order, and the empty shapes
    assert list(full[0].keys(True)) == [("o", "p"), "o", "q"] and list(full[1].keys(True)) == ["q", ("o", "p"), "o"]
    assert full[1]["o", "p"].shape == (0,) and full[0]["q"].shape == (0,)
    assert list(full.keys(True)) == [("o", "p"), "o", "q"]
