"""Dim names and batch-dim indexing of Composite specs (torchrl 0.14.1's ``names``,
``refine_names`` and ``spec[index]``). Expected names and shapes were recorded from torchrl 0.14.1."""
import pytest

from rlpipe.envs.specs import Bounded, Composite


def named():
    return Composite({"obs": Bounded(-1.0, 1.0, shape=(10, 5, 3, 4))}, shape=(10, 5), names=["batch", "time"])


def test_names_follow_indexing_and_shape_changes():
    spec = named()
    assert spec.names == ["batch", "time"] and spec._has_names()
    assert spec[0].names == ["time"] and spec[0].shape == (5,) and spec[0]["obs"].shape == (5, 3, 4)
    assert spec[0:5].names == ["batch", "time"] and spec[0:5].shape == (5, 5)
    assert spec.expand(2, 10, 5).names == [None, "batch", "time"]
    assert spec.unsqueeze(1).names == ["batch", None, "time"] and spec.unsqueeze(1).shape == (10, 1, 5)
    assert [part.names for part in spec.unbind(0)] == [["time"]] * 10
    assert spec.clone().names == ["batch", "time"] and spec.clone() == spec
    ones = Composite({"obs": Bounded(-1.0, 1.0, shape=(1, 1, 3))}, shape=(1, 1), names=["a", "b"])
    assert ones.squeeze().names == [] and ones.squeeze().shape == ()
    assert Composite({"x": Bounded(-1.0, 1.0, shape=(10, 1, 5))}, shape=(10, 1, 5),
                     names=["b", "d", "t"]).squeeze(1).names == ["b", "t"]


def test_names_reach_nested_composites_and_can_be_erased():
    spec = Composite({"outer": Composite({"inner": Bounded(-1.0, 1.0, shape=(10, 3, 2))}, shape=(10, 3))},
                     shape=(10,), names=["batch"])
    assert spec["outer"].names == ["batch", None]  # torchrl 0.14.1
    spec._erase_names()
    assert spec.names == [None] and spec["outer"].names == [None, None]
    unnamed = Composite({"obs": Bounded(-1.0, 1.0, shape=(10, 5, 3))}, shape=(10, 5, 3))
    assert unnamed.names == [None, None, None] and not unnamed._has_names()
    assert unnamed.refine_names(None, None, "feature").names == [None, None, "feature"]
    assert named().refine_names("batch", ...).names == ["batch", "time"]
    assert named() == Composite({"obs": Bounded(-1.0, 1.0, shape=(10, 5, 3, 4))}, shape=(10, 5))  # names aside


def test_name_errors():
    spec = named()
    with pytest.raises(ValueError, match=r"Expected 2 names, but got 3 names"):
        spec.names = ["batch", "time", "extra"]
    assert spec.names == ["batch", "time"]
    with pytest.raises(RuntimeError, match=r"cannot coerce Composite names \['batch', 'time'\] with"):
        spec.refine_names("batch", "other")
    with pytest.raises(IndexError, match="Composite: the index .* does not fit the spec's indexable dims"):
        spec[10, 0, 0]


def test_lock_forbids_changes_until_unlocked():
    import pickle
    inner = Composite()
    spec = Composite(a=Composite(b=inner))
    assert not spec.locked
    spec.lock_()
    assert spec.locked and spec["a"].locked and inner.is_locked
    with pytest.raises(RuntimeError, match="Cannot modify a locked Composite"):
        spec["c"] = Bounded(0.0, 1.0, shape=(1,))
    with pytest.raises(RuntimeError, match="Cannot modify a locked Composite"):
        spec["a", "x"] = Bounded(0.0, 1.0, shape=(1,))
    with pytest.raises(RuntimeError, match="Cannot modify a locked Composite"):
        del spec["a"]
    assert list(spec.keys()) == ["a"]  # the refused calls changed nothing
    assert not pickle.loads(pickle.dumps(spec)).locked
    spec.unlock_()
    spec["c"] = Bounded(0.0, 1.0, shape=(1,))
    spec.lock_()
    Composite(b=inner).lock_()  # a second graph holding the same nested Composite
    with pytest.raises(RuntimeError, match="Cannot unlock a Composite that is part of a locked graph"):
        spec.unlock_()
    assert spec.locked and spec["a"].locked
    spec.unlock_(recurse=False)  # the root alone is held by this lock only
    assert not spec.locked and inner.locked
    shallow = Composite(a=Composite()).lock_(recurse=False)
    shallow["a", "y"] = Bounded(0.0, 1.0, shape=(1,))  # the nested Composite is not locked
    assert shallow.locked and not shallow["a"].locked
