"""step_mdp on nested and lazily stacked TensorDicts, as torchrl 0.14.1's (expectations from its
test/envs/test_step_mdp.py and worked by hand)."""
import pytest

import rlpipe as torch
from rlpipe.envs.utils import step_mdp
from rlpipe.tensordict import LazyStackedTensorDict, TensorDict


def _nested():
    td = TensorDict({"data": TensorDict(batch_size=(4, 3)), "next": {"data": TensorDict(batch_size=(4, 3))}}, [4])
    td["data", "state"] = torch.zeros(4, 3, 1)
    td["data", "action"] = torch.zeros(4, 3, 1)
    td["next", "data", "state"] = torch.ones(4, 3, 1)
    td["next", "data", "reward"] = torch.ones(4, 3, 1)
    return td


def test_nested_entries_keep_their_batch_size():
    out = step_mdp(_nested(), reward_keys=("data", "reward"), action_keys=("data", "action"))
    assert out.batch_size == (4,)
    assert out["data"].batch_size == (4, 3)
    assert sorted(out.keys(True, True)) == [("data", "state")]
    assert out["data", "state"].sum().item() == 12.0


def test_excluded_nested_leaves_drop_an_emptied_sub_tensordict():
    td = _nested()
    del td["data", "state"]
    del td["next", "data", "state"]
    out = step_mdp(td, reward_keys=("data", "reward"), action_keys=("data", "action"))
    assert "data" not in out.keys()


def test_action_kept_without_keep_other():
    td = TensorDict({"action": torch.ones(2, 1), "other": torch.zeros(2, 1), "next": {"obs": torch.zeros(2, 1)}}, [2])
    out = step_mdp(td, keep_other=False, exclude_action=False)
    assert sorted(out.keys()) == ["action", "obs"]
    assert out["action"] is td["action"]


def test_lazy_stack_steps_each_tensordict():
    tds = [TensorDict({"a": torch.zeros(2), "next": {"a": torch.ones(2)}}, []) for _ in range(2)]
    tds[0]["next", "only0"] = torch.full((3,), 2.0)
    tds[1]["keep1"] = torch.ones(1)
    out = step_mdp(LazyStackedTensorDict.lazy_stack(tds, 0))
    assert isinstance(out, LazyStackedTensorDict)
    assert (out[0]["only0"] == 2).all()
    assert (out[1]["keep1"] == 1).all()
    assert (out["a"] == 1).all()


def test_into_next_tensordict():
    td = TensorDict({"next": {"obs": torch.ones(2, 1)}}, [2])
    dest = TensorDict(batch_size=[2])
    assert step_mdp(td, next_tensordict=dest) is dest
    assert (dest["obs"] == 1).all()


def test_not_a_tensordict():
    with pytest.raises(TypeError, match="step_mdp expects a TensorDict, got dict"):
        step_mdp({"next": {}})


def test_make_composite_from_td():
    from rlpipe.envs.specs import Composite, Unbounded
    from rlpipe.envs.utils import make_composite_from_td
    td = TensorDict({"obs": torch.randn(3, 4), "count": torch.zeros(3, dtype=torch.int32),
                     "next": {"reward": torch.randn(3, 1)}}, [3])
    spec = make_composite_from_td(td)
    assert isinstance(spec, Composite) and spec.shape == (3,) and isinstance(spec["next"], Composite)
    assert spec["obs"] == Unbounded((3, 4)) and spec["next", "reward"] == Unbounded((3, 1))
    assert spec["count"].dtype is torch.int32 and spec["count"].shape == (3,)
    assert (spec.zero() == td.zero_()).all()
    scalar = TensorDict({"x": torch.tensor(1.0)}, [])
    assert make_composite_from_td(scalar)["x"].shape == (1,)
    assert make_composite_from_td(scalar, unsqueeze_null_shapes=False)["x"].shape == ()
    with pytest.raises(ValueError, match="expected dynamic_shape=False, got True"):
        make_composite_from_td(td, dynamic_shape=True)


def _flags(*rows):
    return torch.tensor([[r] for r in rows])


def test_terminated_or_truncated_root_flags_prevail_as_torchrl():
    # results recorded from torchrl 0.14.1's _terminated_or_truncated
    from rlpipe.envs.utils import terminated_or_truncated
    data = TensorDict({"done": _flags(False, True), "truncated": _flags(False, False),
                       "nested": TensorDict({"done": _flags(True, False), "truncated": _flags(False, False)}, [2])},
                      [2])
    assert terminated_or_truncated(data)
    assert data["_reset"].tolist() == [[False], [True]] and data["nested", "_reset"].tolist() == [[True], [False]]
    data = TensorDict({"done": _flags(False, False), "nested": TensorDict({"done": _flags(True, False)}, [2])}, [2])
    assert not terminated_or_truncated(data)  # the root's flags prevail over the nested ones
    assert sorted(map(str, data.keys(True))) == ["('nested', 'done')", "done", "nested"]
    data = TensorDict({"nested": TensorDict({"done": _flags(True, False)}, [2])}, [2])
    assert terminated_or_truncated(data) and data["nested", "_reset"].tolist() == [[True], [False]]


def test_terminated_or_truncated_with_a_spec_write_full_false_and_no_key():
    from rlpipe.envs.specs import Categorical, Composite
    from rlpipe.envs.utils import terminated_or_truncated
    data = TensorDict({"done": _flags(False, False)}, [2])
    assert not terminated_or_truncated(data) and list(data.keys()) == ["done"]
    assert not terminated_or_truncated(data, write_full_false=True) and data["_reset"].tolist() == [[False], [False]]
    flag = Categorical(2, shape=(2, 1), dtype="bool")
    spec = Composite(done=flag, terminated=flag.clone(), shape=(2,))
    data = TensorDict({"terminated": _flags(False, True)}, [2])  # "done" missing: read as False
    assert terminated_or_truncated(data, spec) and data["_reset"].tolist() == [[False], [True]]
    data = TensorDict({"terminated": _flags(False, True)}, [2])
    assert terminated_or_truncated(data, key=None) and list(data.keys()) == ["terminated"]


def test_expand_right_adds_trailing_dims():
    from rlpipe.tensordict.utils import expand_right
    out = expand_right(torch.tensor([1, 2, 3]), (3, 2, 2))
    assert out.shape == (3, 2, 2) and out[:, 1, 0].tolist() == [1, 2, 3] and out[2].tolist() == [[3, 3], [3, 3]]
    with pytest.raises(RuntimeError):
        expand_right(torch.tensor([1, 2, 3]), (2, 2))
