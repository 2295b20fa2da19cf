"""TensorDict's wider tensordict-0.14 API (issue 14): copies and in-place writes, construction helpers,
state dicts, locking as a context manager and lock graphs, batch-shape operations, filling a
preallocated TensorDict, print options, and the error types tensordict raises.

Expected values come from NumPy on the same data (brute force) or, where noted, from what
tensordict 0.14.3 returned for the same call (recorded here; the peer is never imported)."""
# ruff: noqa: SIM118 - keys() membership is part of what is tested
import gc
import os
import re
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

import rlpipe
from rlpipe.tensordict import (TensorDict, get_defaults_to_none, get_printoptions, pad, pad_sequence,
                               set_get_defaults_to_none, set_printoptions)

LOCK_ERROR = "Cannot modify locked TensorDict"


def arange_td(*batch, feature=2):
    """A TensorDict whose leaves hold distinct values: "a" [*batch, feature] and ("n", "b") [*batch]."""
    n = int(np.prod(batch)) if batch else 1
    a = np.arange(n * feature, dtype=np.float32).reshape(*batch, feature)
    b = np.arange(n, dtype=np.int64).reshape(batch) * 10
    return TensorDict({"a": rlpipe.tensor(a), "n": {"b": rlpipe.tensor(b)}}, batch_size=list(batch)), a, b


def leaves(td):
    return {k: v.numpy() for k, v in td.items(include_nested=True, leaves_only=True)}


# ---- construction and batch sizes -------------------------------------------------------------------
@pytest.mark.parametrize("bad", [[1.5], [True], "a", [rlpipe.tensor(1.5)], [None]])
def test_batch_size_that_is_not_a_sequence_of_ints_is_a_type_error(bad):
    with pytest.raises(TypeError, match="batch_size must be a sequence of ints"):
        TensorDict(batch_size=bad)


def test_batch_size_accepts_numpy_ints_and_0d_integer_tensors():
    assert TensorDict(batch_size=[np.int64(3), rlpipe.tensor(2)]).batch_size == rlpipe.Size([3, 2])
    assert TensorDict(batch_size=np.int32(4)).batch_size == rlpipe.Size([4])


def test_source_and_keyword_entries_together_is_a_value_error():
    with pytest.raises(ValueError, match="not both"):
        TensorDict({"b": 2}, a=1)
    assert set(TensorDict(a=1, b=2).keys()) == {"a", "b"}


def test_lock_argument_locks_the_new_tensordict():
    td = TensorDict({"a": rlpipe.zeros(2), "n": {"b": rlpipe.zeros(2)}}, [2], lock=True)
    assert td.is_locked and td["n"].is_locked


def test_from_dict_batch_size_rules():
    # tensordict 0.14.3: [] by default, the common prefix with auto_batch_size (nested TensorDicts get
    # their own), at most batch_dims dims with batch_dims
    d = {"a": rlpipe.zeros(3, 4), "b": {"c": rlpipe.zeros(3, 4, 2)}}
    plain = TensorDict.from_dict(d)
    assert plain.batch_size == rlpipe.Size([]) and plain["b"].batch_size == rlpipe.Size([])
    auto = TensorDict.from_dict(d, auto_batch_size=True)
    assert auto.batch_size == rlpipe.Size([3, 4]) and auto["b"].batch_size == rlpipe.Size([3, 4, 2])
    one = TensorDict.from_dict(d, batch_dims=1)
    assert one.batch_size == rlpipe.Size([3]) and one["b"].batch_size == rlpipe.Size([3])
    given = TensorDict.from_dict(d, batch_size=[3])
    assert given["b"].batch_size == rlpipe.Size([3])
    with pytest.raises(ValueError, match="both batch_size and batch_dims"):
        TensorDict.from_dict(d, batch_size=[3], batch_dims=1)
    td = TensorDict(batch_size=[3])
    assert TensorDict.from_dict(td) is td


def test_fromkeys_puts_the_value_under_every_key():
    td = TensorDict.fromkeys(["a", ("b", "c")], 1)
    assert td.batch_size == rlpipe.Size([]) and td["a"].item() == 1 and td["b", "c"].item() == 1
    assert TensorDict.fromkeys({"x"})["x"].item() == 0


def test_auto_batch_size_ignores_empty_nested_tensordicts():
    td = TensorDict({"a": rlpipe.zeros(3, 4), "e": TensorDict(batch_size=[])})
    td.auto_batch_size_()
    assert td.batch_size == rlpipe.Size([3, 4]) and td["e"].batch_size == rlpipe.Size([3, 4])


# ---- copies and in-place writes -----------------------------------------------------------------------
def test_to_tensordict_and_clone_copy_leaves_clone_false_shares_them():
    td, a, _ = arange_td(3)
    td.lock_()
    full = td.to_tensordict()
    assert not full.is_locked and full["a"] is not td["a"]
    np.testing.assert_array_equal(full["a"].numpy(), a)
    assert td.clone(recurse=False)["a"] is td["a"] and td.clone()["a"] is not td["a"]


def test_contiguous_keeps_contiguous_leaves_and_copies_strided_ones():
    base = rlpipe.arange(12.0).view(3, 4)
    td = TensorDict({"t": base.t(), "c": rlpipe.zeros(4, 2)}, [4])
    out = td.contiguous()
    assert out is not td and out["c"] is td["c"] and out["t"].is_contiguous()
    np.testing.assert_array_equal(out["t"].numpy(), base.numpy().T)
    assert not td.is_contiguous() and out.is_contiguous()
    assert td.contiguous(inplace=True) is td and td["t"].is_contiguous()


def test_copy_and_update_write_in_place_and_check_every_key_first():
    td, a, b = arange_td(3)
    a_leaf, b_leaf = td["a"], td["n", "b"]
    other = td.clone().zero_()
    assert td.copy_(other) is td and td["a"] is a_leaf and float(a_leaf.sum()) == 0.0
    td.update_({"a": rlpipe.ones(3, 2), "n": {"b": rlpipe.full((3,), 7)}})
    assert td["a"] is a_leaf and td["n", "b"] is b_leaf and b_leaf.tolist() == [7, 7, 7]
    with pytest.raises(KeyError, match="The key zz was not found in the dest tensordict"):
        td.update_({"a": rlpipe.zeros(3, 2), "zz": rlpipe.zeros(3)})
    assert float(a_leaf.sum()) == 6.0  # nothing written
    td.update_({"a": rlpipe.full((3, 2), 2.0), "n": {"b": rlpipe.zeros(3)}}, keys_to_update=[("n", "b")])
    assert float(a_leaf.sum()) == 6.0 and b_leaf.tolist() == [0, 0, 0]


def test_set_at_get_at_and_update_at_write_one_index():
    td, a, b = arange_td(4, 3)
    td.set_at_("a", rlpipe.full((3, 2), -1.0), 1)
    a[1] = -1.0
    np.testing.assert_array_equal(td["a"].numpy(), a)
    np.testing.assert_array_equal(td.get_at(("n", "b"), (slice(None), 2)).numpy(), b[:, 2])
    assert td.get_at("missing", 0, default="x") == "x"
    update = TensorDict({"a": rlpipe.zeros(4, 2), "n": {"b": rlpipe.full((4,), 5)}}, [4])
    td.update_at_(update, (slice(None), 2))
    a[:, 2], b[:, 2] = 0.0, 5
    np.testing.assert_array_equal(td["a"].numpy(), a)
    np.testing.assert_array_equal(td["n", "b"].numpy(), b)
    with pytest.raises(KeyError, match="was not found"):
        td.update_at_({"a": rlpipe.zeros(3, 2), "zz": rlpipe.zeros(3)}, 0)
    np.testing.assert_array_equal(td["a"].numpy(), a)  # checked before writing
    with pytest.raises(KeyError, match="zz"):
        td.set_at_("zz", 1.0, 0)


def test_set_in_place_with_a_shape_that_does_not_fit_is_a_value_error():
    td = TensorDict({"a": rlpipe.zeros(())}, [])
    with pytest.raises(ValueError, match="Failed to update 'a'"):
        td.set_("a", rlpipe.randn(2))
    assert td["a"].shape == rlpipe.Size([])


def test_a_path_through_a_tensor_is_a_value_error_for_get_and_a_key_error_for_set():
    td = TensorDict({"a": rlpipe.zeros(())}, [])
    with pytest.raises(ValueError, match="Expected a TensorDictBase instance"):
        td["a", "b"]
    with pytest.raises(ValueError, match="Expected a TensorDictBase instance"):
        td.get(("a", "b"), None)
    with pytest.raises(KeyError, match="already present"):
        td.set(("a", "b"), rlpipe.zeros(()))
    assert ("a", "b") not in td.keys(True)


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(rlpipe.__file__)))


def test_get_defaults_to_none_switch():
    td = TensorDict({"a": 0, "b": {"c": 1}})
    before = get_defaults_to_none()
    try:
        assert before is True  # tensordict 0.14's default: get() of a missing key is None
        assert td.get("c") is None and td.get(("b", "d")) is None and td.get(("x", "y")) is None
        assert td.get("c", 3) == 3
        with pytest.raises(KeyError):  # indexing still raises
            td["c"]
        with pytest.raises(KeyError):
            td.select("c")
        set_get_defaults_to_none(False)
        with pytest.raises(KeyError, match='key "c" not found'):
            td.get("c")
        assert td.get("c", None) is None
        set_get_defaults_to_none(None)
        assert get_defaults_to_none() is False
    finally:
        set_get_defaults_to_none(before)


@pytest.mark.parametrize("text,expected", [("0", "KeyError"), ("1", "None"), ("false", "KeyError")])
def test_get_defaults_to_none_env(text, expected):
    # TD_GET_DEFAULTS_TO_NONE sets the starting value, as in tensordict
    code = ("from rlpipe.tensordict import TensorDict\n"
            "try:\n    print(TensorDict().get('x'))\nexcept KeyError:\n    print('KeyError')")
    env = dict(os.environ, TD_GET_DEFAULTS_TO_NONE=text, PYTHONPATH=_ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_get_defaults_to_none_env_rejects_garbage():
    env = dict(os.environ, TD_GET_DEFAULTS_TO_NONE="maybe", PYTHONPATH=_ROOT)
    out = subprocess.run([sys.executable, "-c", "import rlpipe.tensordict"], env=env, capture_output=True,
                         text=True)
    assert out.returncode != 0 and "TD_GET_DEFAULTS_TO_NONE must be a boolean" in out.stderr


def test_split_keys_separates_and_replace():
    td, _, _ = arange_td(3)
    td["x"] = rlpipe.zeros(3)
    first, rest = td.split_keys(["a", ("n", "b")])
    assert set(first.keys(True, True)) == {"a", ("n", "b")} and set(rest.keys()) == {"x"}
    renamed, rest = td.split_keys({"a": "A"})
    assert set(renamed.keys()) == {"A"} and "a" not in rest and ("n", "b") in rest
    with pytest.raises(KeyError):
        td.split_keys(["missing"])
    _, rest = td.split_keys(["missing"], strict=False)
    assert set(rest.keys(True, True)) == {"a", ("n", "b"), "x"}
    moved = td.separates("x")
    assert set(moved.keys(True, True)) == {"x"} and "x" not in td
    replaced = td.replace(a=rlpipe.ones(3, 2))
    assert replaced is not td and float(replaced["a"].sum()) == 6.0 and float(td["a"].sum()) != 6.0


def test_state_dict_is_flat_with_metadata_and_loads_back():
    td, a, b = arange_td(3)
    sd = td.state_dict()
    # tensordict 0.14.3: OrderedDict([('a', ...), ('n.b', ...)]) and _metadata per level
    assert isinstance(sd, OrderedDict) and list(sd) == ["a", "n.b"]
    assert sd._metadata == {"": {"batch_size": rlpipe.Size([3]), "device": None},
                            "n": {"batch_size": rlpipe.Size([3]), "device": None}}
    nested = td.state_dict(flatten=False)
    assert list(nested) == ["a", "n"] and list(nested["n"]) == ["b"]
    target = td.clone().zero_()
    a_leaf = target["a"]
    assert target.load_state_dict(sd) is target and target["a"] is a_leaf
    np.testing.assert_array_equal(target["a"].numpy(), a)
    np.testing.assert_array_equal(target["n", "b"].numpy(), b)
    target.zero_().load_state_dict(sd, assign=True)
    assert target["a"] is not a_leaf and float(a_leaf.sum()) == 0.0
    del sd["a"]
    with pytest.raises(RuntimeError, match="key sets don't match"):
        td.clone().load_state_dict(sd)
    td.clone().load_state_dict(sd, strict=False)


def test_tolist_lists_over_the_batch_dims():
    td = TensorDict({"a": rlpipe.arange(4).view(2, 2), "b": {"c": rlpipe.ones(2)}}, [2])
    rows = td.tolist()
    assert len(rows) == 2 and rows[1]["a"].tolist() == [2, 3] and rows[0]["b"]["c"].item() == 1.0
    assert td.tolist(convert_tensors=True) == [{"a": [0, 1], "b": {"c": 1.0}}, {"a": [2, 3], "b": {"c": 1.0}}]
    assert TensorDict({"a": rlpipe.arange(2)}, []).tolist(convert_tensors=True) == {"a": [0, 1]}


def test_small_helpers():
    td, _, _ = arange_td(3)
    assert td.entry_class("n") is TensorDict and td.entry_class("a") is rlpipe.Tensor
    assert td.depth == 1 and TensorDict().depth == 0
    assert td.sorted_keys == ["a", "n"]
    assert td.get_item_shape("n") == rlpipe.Size([3]) and td.get_item_shape("a") == rlpipe.Size([3, 2])
    assert td.param_count() == 9 and td.bytes() == 6 * 4 + 3 * 8
    assert td.names == [None]
    assert td.refine_names("x").names == ["x"] and td["n"].names == ["x"]
    with pytest.raises(RuntimeError, match=r"refine_names: cannot coerce TensorDict names \['x'\] with \['y'\]"):
        td.refine_names("y")
    td.names = None
    assert td.names == [None]
    assert td.dtype is None and td.float().dtype == rlpipe.float32
    created = td.create_nested(("m", "k"))
    assert created is td and td["m", "k"].batch_size == td.batch_size
    key, value = td.popitem()
    assert key == "m" and isinstance(value, TensorDict)
    td.cat_tensors("a", "a", out_key="aa", dim=-1, keep_entries=True)
    assert td["aa"].shape == rlpipe.Size([3, 4])
    assert td.clear() is td and td.is_empty()


def test_in_looks_at_root_keys_or_nested_tuples():
    td, _, _ = arange_td(3)
    assert "a" in td and "b" not in td and ("n", "b") in td and ("n", "zz") not in td
    with pytest.raises(RuntimeError, match="NestedKey"):
        3 in td  # noqa: B015


def test_equality_with_something_else_is_false_and_mismatched_keys_raise():
    td, _, _ = arange_td(3)
    assert (td == "z") is False and (td != "z") is True
    assert (td == td.to_dict()).all()
    with pytest.raises(KeyError, match="mismatch"):
        td == td.exclude("a")  # noqa: B015


def test_depth_counts_the_levels_above_the_deepest_leaf():
    td = TensorDict({"a": {"b": {"c": {"d": 0}, "e": 0}, "f": 0}, "g": 0})
    assert td.depth == 3
    del td["a", "b", "c", "d"]  # an empty TensorDict holds no leaf
    assert td.depth == 2


def test_expand_as_a_tensordict_takes_each_leaf_shape():
    td0 = TensorDict({"a": rlpipe.ones(3, 1, 4), "b": {"c": rlpipe.ones(3, 2, 1, 4)}}, batch_size=[3])
    td1 = TensorDict({"a": rlpipe.zeros(2, 3, 5, 4), "b": {"c": rlpipe.zeros(2, 3, 2, 6, 4)}}, batch_size=[2, 3])
    out = td0.expand_as(td1)
    assert out.batch_size == rlpipe.Size([2, 3]) and out["b", "c"].shape == rlpipe.Size([2, 3, 2, 6, 4])
    assert td0.expand_as(rlpipe.zeros(2, 3)).batch_size == rlpipe.Size([2, 3])


def test_a_batch_size_empty_tensordict_takes_the_indices_a_0d_tensor_takes():
    td = TensorDict({"a": rlpipe.tensor(1.0)}, [])
    assert td[True].batch_size == rlpipe.Size([1]) and td[False].batch_size == rlpipe.Size([0])
    assert td[None, True].batch_size == rlpipe.Size([1, 1])
    with pytest.raises(RuntimeError, match="batch_dims==0"):
        td[0]


def test_keys_view_membership_errors_use_tensordict_wording():
    td = TensorDict({"a": {"b": rlpipe.zeros(())}}, [])
    with pytest.raises(TypeError, match="only supported when setting `include_nested=True`"):
        ("a", "b") in td.keys()  # noqa: B015
    with pytest.raises(TypeError, match="TensorDict keys are always strings"):
        42 in td.keys()  # noqa: B015
    assert ("a", "b") in td.keys(True) and ("a", "c") not in td.keys(True)


def test_load_state_dict_ignores_empty_nested_entries_and_reads_the_legacy_format():
    data = TensorDict({"a": {"b": {"c": {}}}, "d": 1}, [])
    data.load_state_dict(TensorDict({"d": 0}, []).state_dict(), strict=True)
    assert data["d"].item() == 0
    legacy = OrderedDict([("a", rlpipe.tensor(1)), ("__batch_size", rlpipe.Size([])), ("__device", None)])
    td = TensorDict({"a": 0}, [])
    td.load_state_dict(legacy)
    assert td["a"].item() == 1


# ---- locking ---------------------------------------------------------------------------------------
def test_lock_and_unlock_as_context_managers_restore_the_state():
    td, _, _ = arange_td(2)
    with td.lock_() as same:
        assert same is td and td.is_locked and td["n"].is_locked
        with pytest.raises(RuntimeError, match=LOCK_ERROR):
            td["x"] = rlpipe.zeros(2)
        with td.unlock_():
            td["x"] = rlpipe.zeros(2)
        assert td.is_locked
    assert not td.is_locked and not td["n"].is_locked and "x" in td
    td.lock_()
    with td.lock_():  # already locked: the block leaves it locked
        pass
    assert td.is_locked
    td.is_locked = False
    assert not td.is_locked


def test_a_lock_block_is_undone_even_when_the_block_raises():
    td, _, _ = arange_td(2)
    with pytest.raises(ZeroDivisionError), td.lock_():
        1 / 0  # noqa: B018
    assert not td.is_locked


def test_a_nested_tensordict_cannot_be_unlocked_while_its_root_is_locked():
    td = TensorDict({("a", "b", "c"): 1.0}, []).lock_()
    a, b = td["a"], td["a", "b"]
    for sub in (a, b):
        with pytest.raises(RuntimeError, match="Cannot unlock a tensordict that is part of a locked graph"):
            sub.unlock_()
        assert sub.is_locked
    with pytest.raises(RuntimeError, match=LOCK_ERROR):
        b["new"] = rlpipe.zeros(())
    del td
    gc.collect()
    a.unlock_()  # the root is gone
    assert not b.is_locked


def test_a_tensordict_shared_by_two_locked_roots_stays_locked_until_both_are_unlocked():
    td = TensorDict({("a", "b"): 1.0}, []).lock_()
    a = td["a"]
    other = TensorDict({"a": a}, []).lock_()
    for root in (other, td):
        with pytest.raises(RuntimeError, match="part of a locked graph"):
            root.unlock_()
        assert root.is_locked and a.is_locked  # a failed unlock leaves everything locked
    both = TensorDict({"td": td, "other": other}, []).lock_()
    both.unlock_()
    assert not td.is_locked and not other.is_locked and not a.is_locked


def test_locked_flatten_keys_is_cached_until_unlock():
    td, _, _ = arange_td(2)
    assert td._cache is None
    td.lock_()
    flat = td.flatten_keys()
    assert flat is td.flatten_keys() and td.flatten_keys("-") is not flat
    assert {("flatten_keys", "."), ("flatten_keys", "-")} <= set(td._cache)
    assert td.unflatten_keys() is td.unflatten_keys()
    td.unlock_()
    assert td._cache is None and td.flatten_keys() is not flat
    with pytest.raises(RuntimeError, match=LOCK_ERROR):
        td.lock_().flatten_keys(inplace=True)


def test_shape_ops_of_a_locked_tensordict_are_locked_copies_are_not():
    td, _, _ = arange_td(2, 3)
    td.lock_()
    for out in (td.reshape(-1), td.view(6), td.unsqueeze(0), td.permute(1, 0), td.expand(4, 2, 3), td.flip(0),
                td.float(), td.detach()):
        assert out.is_locked and out["n"].is_locked
    for out in (td.clone(), td.to_tensordict(), td.empty(), td.copy(), td.apply(lambda x: x)):
        assert not out.is_locked


# ---- `with` blocks over reshaped views -------------------------------------------------------------------
def test_with_block_writes_new_entries_back_through_the_inverse_op():
    td, _, _ = arange_td(2, 3)
    with td.permute(1, 0) as tdt:
        tdt["p"] = rlpipe.ones(3, 2)
    with td.unsqueeze(0) as tdu:
        tdu["u"] = rlpipe.full((1, 2, 3), 2.0)
    with td.flatten_keys() as flat:
        flat["n.new"] = rlpipe.full((2, 3), 3.0)
    with td.flatten(0, 1) as flat:
        flat["f"] = rlpipe.arange(6.0)
    assert td["p"].shape == rlpipe.Size([2, 3]) and float(td["u"].sum()) == 12.0
    assert float(td["n", "new"].sum()) == 18.0
    np.testing.assert_array_equal(td["f"].numpy(), np.arange(6.0).reshape(2, 3))
    with td.transpose(0, 1) as tdt:
        tdt.apply_(lambda x: x * 0 + 1)
    assert (td == 1).all()


def test_with_block_that_raises_does_not_write_back():
    td, _, _ = arange_td(2, 3)
    with pytest.raises(ValueError), td.permute(1, 0) as tdt:
        tdt["p"] = rlpipe.ones(3, 2)
        raise ValueError("stop")
    assert "p" not in td


def test_squeeze_without_a_dim_cannot_be_a_with_block():
    td, _, _ = arange_td(2, 1)
    with pytest.raises(RuntimeError, match="implicit"), td.squeeze():
        pass


# ---- batch-shape operations (checked against NumPy on the same data) --------------------------------------
def test_repeat_tile_and_repeat_interleave_match_numpy():
    td, a, b = arange_td(2, 3)
    out = td.repeat(2, 1)
    np.testing.assert_array_equal(out["a"].numpy(), np.tile(a, (2, 1, 1)))
    np.testing.assert_array_equal(out["n", "b"].numpy(), np.tile(b, (2, 1)))
    np.testing.assert_array_equal(td.tile((2,))["a"].numpy(), np.tile(a, (1, 2, 1)))
    assert td.tile((3, 1, 1)).batch_size == rlpipe.Size([3, 2, 3])
    np.testing.assert_array_equal(td.repeat_interleave(2, dim=1)["a"].numpy(), np.repeat(a, 2, axis=1))
    np.testing.assert_array_equal(td.repeat_interleave(rlpipe.tensor([1, 0, 2]), dim=1)["n", "b"].numpy(),
                                  np.repeat(b, [1, 0, 2], axis=1))
    np.testing.assert_array_equal(td.repeat_interleave(2)["n", "b"].numpy(), np.repeat(b.reshape(-1), 2))
    with pytest.raises(ValueError, match="number of repeat elements"):
        td.repeat(2)


def test_roll_flip_movedim_narrow_rot90_match_numpy():
    td, a, b = arange_td(2, 3)
    np.testing.assert_array_equal(td.roll(1, 1)["a"].numpy(), np.roll(a, 1, axis=1))
    np.testing.assert_array_equal(td.roll((1, 2), (0, 1))["n", "b"].numpy(), np.roll(b, (1, 2), axis=(0, 1)))
    # dims=None rolls the flattened batch (rlpipe: the feature elements stay with their row)
    np.testing.assert_array_equal(td.roll(1)["a"].numpy(),
                                  np.roll(a.reshape(6, 2), 1, axis=0).reshape(2, 3, 2))
    np.testing.assert_array_equal(td.flip((0, 1))["a"].numpy(), a[::-1, ::-1])
    np.testing.assert_array_equal(td.fliplr()["n", "b"].numpy(), b[:, ::-1])
    np.testing.assert_array_equal(td.movedim(0, 1)["a"].numpy(), np.moveaxis(a, 0, 1))
    np.testing.assert_array_equal(td.narrow(1, 1, 2)["a"].numpy(), a[:, 1:3])
    for k in range(-1, 4):
        np.testing.assert_array_equal(td.rot90(k)["n", "b"].numpy(), np.rot90(b, k, axes=(0, 1)))
    assert td.swapaxes(0, 1).batch_size == td.swapdims(0, 1).batch_size == rlpipe.Size([3, 2])
    with pytest.raises(IndexError, match="Dimension out of range"):
        td.movedim(0, 5)
    with pytest.raises(IndexError, match="exceeds dimension size"):
        td.narrow(1, 2, 2)
    with pytest.raises(ValueError, match="dim0 and dim1 must be within the range"):
        td.transpose(-5, -6)


def test_split_sizes_lists_and_errors():
    td, a, _ = arange_td(5)
    assert [p.batch_size[0] for p in td.split(2)] == [2, 2, 1]
    pieces = td.split([1, 4])
    np.testing.assert_array_equal(pieces[1]["a"].numpy(), a[1:])
    with pytest.raises(ValueError, match="split_size must be positive, got 0"):
        td.split(0)
    with pytest.raises(RuntimeError, match="sum exactly to 5"):
        td.split([1, 1])
    assert [p.batch_size[0] for p in TensorDict(batch_size=[0]).split(2)] == [0]


@pytest.mark.parametrize("sections,bounds", [
    (2, [(0, 2), (2, 3)]), (rlpipe.tensor(3), [(0, 1), (1, 2), (2, 3)]), ([1, 3], [(0, 1), (1, 3), (3, 3)]),
    ([-1], [(0, 2), (2, 3)]), ([6], [(0, 3), (3, 3)]), ([2, 1], [(0, 2), (2, 1), (1, 3)]),
    (rlpipe.tensor([1, 2]), [(0, 1), (1, 2), (2, 3)])])
def test_tensor_split_follows_torch_slicing(sections, bounds):
    # pieces as torch.tensor_split gives them for a [3] tensor (torch 2.13): Python slices between indices
    td, a, _ = arange_td(3)
    pieces = td.tensor_split(sections)
    assert len(pieces) == len(bounds)
    for piece, (start, stop) in zip(pieces, bounds):
        np.testing.assert_array_equal(piece["a"].numpy(), a[start:stop])
        assert piece.batch_size == rlpipe.Size([len(a[start:stop])])


def test_new_constructors_keep_feature_shapes_and_dtypes():
    td, _, _ = arange_td(3)
    for out, fill in ((td.new_zeros(2, 5), 0), (td.new_ones([2, 5]), 1), (td.new_full((2, 5), 7), 7)):
        assert out.batch_size == rlpipe.Size([2, 5]) and out["a"].shape == rlpipe.Size([2, 5, 2])
        assert out["n", "b"].dtype == rlpipe.int64 and (out == fill).all()
    assert td.new_empty(0).batch_size == rlpipe.Size([0])
    assert td.new_zeros(2, dtype=rlpipe.float64)["n", "b"].dtype == rlpipe.float64
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        made = td.new_tensor(rlpipe.tensor([1.5, 2.5]))
    assert made.batch_size == rlpipe.Size([2]) and made["n", "b"].tolist() == [1, 2]


def test_pad_and_pad_sequence_match_tensordict():
    td = TensorDict({"a": rlpipe.ones(3, 4), "b": {"c": rlpipe.ones(3)}}, [3])
    # tensordict 0.14.3: pad(td, [1, 1], value=2)["b", "c"] == [2, 1, 1, 1, 2]
    assert pad(td, [1, 1], value=2)["b", "c"].tolist() == [2, 1, 1, 1, 2]
    grid = TensorDict({"a": rlpipe.ones(2, 3, 4)}, [2, 3])
    # tensordict 0.14.3: pairs from the first batch dim on
    assert pad(grid, [0, 1, 1, 0])["a"][..., 0].tolist() == [[0, 1, 1, 1], [0, 1, 1, 1], [0, 0, 0, 0]]
    with pytest.raises(RuntimeError, match="pairs"):
        pad(td, [0])
    seq = pad_sequence([TensorDict({"a": rlpipe.ones(2, 4)}, [2]), TensorDict({"a": rlpipe.ones(3, 4)}, [3])],
                       return_mask=True)
    assert seq.batch_size == rlpipe.Size([2, 3]) and seq["a"].shape == rlpipe.Size([2, 3, 4])
    assert seq["masks", "a"].tolist() == [[True, True, False], [True, True, True]]
    assert float(seq["a"].sum()) == 20.0


# ---- indexing and filling ------------------------------------------------------------------------------
def test_filling_an_empty_tensordict_row_by_row_creates_the_keys():
    buf = TensorDict(batch_size=[5, 3])
    buf[0] = TensorDict({"x": rlpipe.ones(3, 2), "n": {"y": rlpipe.full((3,), 4.0)}}, [3])
    buf[2] = {"x": rlpipe.full((3, 2), 2.0), "n": {"y": rlpipe.zeros(3)}}
    expected = np.zeros((5, 3, 2), np.float32)
    expected[0], expected[2] = 1.0, 2.0
    np.testing.assert_array_equal(buf["x"].numpy(), expected)
    assert buf["n"].batch_size == rlpipe.Size([5, 3]) and buf["n", "y"][0].tolist() == [4.0, 4.0, 4.0]


def test_filling_a_locked_tensordict_cannot_add_keys_and_changes_nothing():
    buf = TensorDict({"x": rlpipe.zeros(4)}, [4]).lock_()
    with pytest.raises(RuntimeError, match=LOCK_ERROR):
        buf[0] = TensorDict({"x": rlpipe.ones(()), "new": rlpipe.ones(())}, [])
    assert buf["x"].tolist() == [0, 0, 0, 0] and "new" not in buf
    buf[1] = TensorDict({"x": rlpipe.ones(())}, [])
    assert buf["x"].tolist() == [0, 1, 0, 0]


def test_setitem_batch_mismatch_names_the_problem_and_writes_nothing():
    td, a, _ = arange_td(3)
    with pytest.raises(RuntimeError, match="differs from the source batch size"):
        td[:2] = td.clone()
    bad = TensorDict({"a": rlpipe.zeros(5), "n": {"b": rlpipe.zeros(())}}, [])
    with pytest.raises(RuntimeError, match="the entry 'a' has shape"):
        td[0] = bad
    np.testing.assert_array_equal(td["a"].numpy(), a)


def test_setitem_broadcasts_a_value_whose_batch_size_is_a_suffix():
    td, a, b = arange_td(2, 3)
    td[:1] = td[0].clone().zero_()
    a[:1], b[:1] = 0, 0
    np.testing.assert_array_equal(td["a"].numpy(), a)
    np.testing.assert_array_equal(td["n", "b"].numpy(), b)


def test_nested_tensordict_with_fewer_batch_dims_takes_the_parent_batch_size():
    td = TensorDict({"a": rlpipe.zeros(3)}, [3])
    value = TensorDict({"z": rlpipe.ones(3, 2)}, [])
    td["n"] = value
    assert td["n"].batch_size == rlpipe.Size([3]) and value.batch_size == rlpipe.Size([])
    with pytest.raises(RuntimeError, match="incompatible with the batch-size"):
        td["m"] = TensorDict({"z": rlpipe.ones(2)}, [])


def test_range_indices():
    td, a, _ = arange_td(4, 3)
    np.testing.assert_array_equal(td[range(2)]["a"].numpy(), a[:2])
    np.testing.assert_array_equal(td[:, range(1, 3)]["a"].numpy(), a[:, 1:3])
    td[range(1)] = td[range(1)].clone().zero_()
    assert float(td["a"][0].sum()) == 0.0


def test_too_many_indices_is_torch_index_error():
    td, _, _ = arange_td(3)
    with pytest.raises(IndexError, match=re.escape("too many indices for tensor of dimension 1")):
        td[:, 0]


# ---- apply ------------------------------------------------------------------------------------------
def test_apply_filter_empty_out_and_default():
    td, a, _ = arange_td(3)
    assert td.apply(lambda x: None) is None
    kept = td.apply(lambda x: None, filter_empty=False)
    assert set(kept.keys(True)) == {"n"} and kept["n"].is_empty()
    out = td.clone().zero_()
    assert td.apply(lambda x: x + 1, out=out) is out
    np.testing.assert_array_equal(out["a"].numpy(), a + 1)
    extra = td.clone()
    extra["m", "q"] = rlpipe.ones(3)
    merged = extra.apply(lambda x, y: x if y is None else y * 0, td, default=None)
    assert float(merged["m", "q"].sum()) == 3.0 and float(merged["a"].sum()) == 0.0
    seen = []
    td.named_apply(lambda key, x: seen.append(key), nested_keys=True)
    assert seen == ["a", ("n", "b")]


# ---- printing --------------------------------------------------------------------------------------------
def test_print_options_change_the_repr_and_restore_it():
    td = TensorDict({"b": rlpipe.zeros(3, 4), "a": {"c": rlpipe.zeros(3)}}, [3])
    full = repr(td)
    with set_printoptions(verbose=False):
        # tensordict 0.14.3's text for the same TensorDict (torch. -> rlpipe.)
        assert repr(td) == ("TensorDict(\n    fields={\n        a: TensorDict(\n            fields={\n"
                            "                c: Tensor(shape=rlpipe.Size([3]))},\n"
                            "            batch_size=rlpipe.Size([3])),\n"
                            "        b: Tensor(shape=rlpipe.Size([3, 4]))},\n    batch_size=rlpipe.Size([3]))")
    assert repr(td) == full and get_printoptions()["show_dtype"] is True
    with pytest.raises(TypeError, match="Unknown printoptions"):
        set_printoptions(colour=True)

    @set_printoptions(show_batch_size=False, show_device=False, show_is_shared=False)
    def shown():
        return repr(TensorDict())
    assert shown() == "TensorDict(\n    fields={\n    })"


# ---- on a GPU ------------------------------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_new_methods_keep_leaves_on_the_gpu():
    td, a, b = arange_td(3, 2)
    gpu = td.to("cuda")
    assert gpu.to("cuda") is gpu and gpu.device == rlpipe.device("cuda:0")
    buf = TensorDict(batch_size=[3, 2], device="cuda")
    buf[1] = gpu[1]
    assert buf["a"].device == rlpipe.device("cuda:0") and buf["n", "b"].device == rlpipe.device("cuda:0")
    np.testing.assert_array_equal(buf["a"].cpu().numpy()[1], a[1])
    for out in (gpu.repeat(2, 1), gpu.roll(1, 0), gpu.new_zeros(4), pad(gpu, [1, 0]), gpu.contiguous(),
                gpu.to_tensordict(), gpu.tensor_split(2)[0]):
        assert all(t.device == rlpipe.device("cuda:0") for t in out.values(True, True))
    np.testing.assert_array_equal(gpu.roll(1, 0)["n", "b"].cpu().numpy(), np.roll(b, 1, axis=0))
    gpu.update_at_({"a": rlpipe.zeros(2, 2, device="cuda")}, 0)
    assert float(gpu["a"][0].sum().cpu()) == 0.0
    back = gpu.to("cpu", inplace=True)
    assert back is gpu and gpu["a"].device == rlpipe.device("cpu")


def test_merge_tensordicts_first_value_wins_unless_every_one_has_the_key():
    from rlpipe.tensordict import merge_tensordicts
    td0 = TensorDict({"a": {"b0": 0}, "c": {"d": {"e": 0}}, "common": 0})
    td1 = TensorDict({"a": {"b1": 1}, "f": {"g": {"h": 1}}, "common": 1})
    td2 = TensorDict({"a": {"b2": 2}, "f": {"g": {"h": 2}}, "common": 2})
    for callback in (lambda *v: rlpipe.stack(list(v)), {"common": lambda *v: rlpipe.stack(list(v))}):
        td = merge_tensordicts(td0, td1, td2, callback_exist=callback)
        assert [td["a", k].item() for k in ("b0", "b1", "b2")] == [0, 1, 2]
        assert td["common"].tolist() == [0, 1, 2] and td["f", "g", "h"].item() == 1 and td["c", "d", "e"].item() == 0
    assert merge_tensordicts(td0, td1)["common"].item() == 0
    with pytest.raises(RuntimeError, match="at least 2"):
        merge_tensordicts(td0)


@pytest.mark.parametrize("op,args", [("repeat", (2, 1)), ("repeat_interleave", (2, 0)), ("roll", (1, 1)),
                                     ("reshape", ((6,),)), ("flatten", (0, 1)), ("pad", ([1, 0, 0, 2],)),
                                     ("gather", (1, rlpipe.tensor([[0, 2], [1, 0]])))])
def test_inplace_shape_ops_keep_the_tensordict_and_its_nested_ones(op, args):
    td, _, _ = arange_td(2, 3)
    nested = td["n"]
    expected = getattr(td, op)(*args)
    out = getattr(td, op)(*args, inplace=True)
    assert out is td and td["n"] is nested and td.batch_size == expected.batch_size
    assert nested.batch_size == expected["n"].batch_size
    for key, value in leaves(expected).items():
        np.testing.assert_array_equal(td[key].numpy(), value)


def test_pad_crops_with_negative_amounts_and_refuses_a_negative_size():
    td, a, _ = arange_td(4, 3)
    np.testing.assert_array_equal(pad(td, [-1, 0, 1, -2])["a"].numpy()[:, 1:], a[1:, :1])
    assert pad(td, [-1, 0, 1, -2]).batch_size == rlpipe.Size([3, 2])
    old = td["a"]
    with pytest.raises(RuntimeError, match="negative output size"):
        td.pad([-10, 0], inplace=True)
    assert td["a"] is old and td.batch_size == rlpipe.Size([4, 3])


def test_pad_sequence_along_a_feature_dim():
    tds = [TensorDict({"a": rlpipe.ones(6, 3, 8), ("b", "c"): rlpipe.ones(6, 3)}, [6]),
           TensorDict({"a": rlpipe.full((6, 5, 8), 2.0), ("b", "c"): rlpipe.full((6, 7), 2.0)}, [6])]
    out = pad_sequence(tds, pad_dim=1, return_mask=("m", "k"))
    assert out.batch_size == rlpipe.Size([2, 6]) and out["a"].shape == rlpipe.Size([2, 6, 5, 8])
    assert out["b", "c"].shape == rlpipe.Size([2, 6, 7]) and float(out["a"][0, :, 3:].abs().sum()) == 0.0
    assert out["m", "k", "a"].shape == rlpipe.Size([2, 6, 5])
    assert out["m", "k", "b", "c"][0, 0].tolist() == [True] * 3 + [False] * 4


@pytest.mark.parametrize("dims", [(1, 1, 0), (3, 2, 1, 0), (2, -1, 0), (2, 3, 0), (2, -4, 0), (2, 1)])
def test_permute_with_a_bad_order_is_a_value_error(dims):
    td = TensorDict({"a": rlpipe.zeros(4, 5, 6, 7)}, [4, 5, 6])
    with pytest.raises(ValueError, match="permutation order"):
        td.permute(*dims)


def test_movedim_errors_and_identity():
    td = TensorDict({"a": rlpipe.zeros(4, 5, 6, 7)}, [4, 5, 6])
    assert td.movedim(1, 1) is td and td.moveaxis(0, 2).batch_size == rlpipe.Size([5, 6, 4])
    with pytest.raises(RuntimeError, match="repeated dim in source"):
        td.movedim((0, 0), (1, 2))
    with pytest.raises(RuntimeError, match="repeated dim in destination"):
        td.movedim((0, 1), (2, 2))
    with pytest.raises(ValueError, match="same number of elements"):
        td.movedim((0,), (1, 2))


def test_memmap_state_follows_views_and_ends_with_unlock(tmp_path):
    # tensordict 0.14.3: indexed parts and views of a memmap_'d TensorDict are memory-mapped and
    # locked; clones, exclude and apply results are not; unlocking ends the memory-mapped state
    td = TensorDict({"a": rlpipe.zeros(3, 4)}, [3, 4]).memmap_(str(tmp_path))
    for view in (td[0], td.unbind(0)[0], td.split(1)[0], td.view(-1), td.permute(1, 0)):
        assert view.is_memmap() and view.is_locked
    for copy in (td.clone(), td.exclude("a"), td.apply(lambda x: x), td[rlpipe.tensor([0, 2])], td[[0, 1]],
                 td[rlpipe.tensor([True, False, True])]):
        assert not copy.is_memmap() and not copy.is_locked  # a gather copies (tensordict 0.14.3 too)
    td.unlock_()
    assert not td.is_memmap() and not td[0].is_locked


def test_separates_removes_emptied_nested_tensordicts_unless_asked_not_to():
    td = TensorDict(a=0, b=TensorDict(c=0, d=0), unique=TensorDict(val=0))
    out = td.separates("a", ("b", ("d",)), ("unique", "val"))
    assert "unique" not in td and "unique" in out and ("b", "d") in out and ("b", "c") in td
    td = TensorDict(a=0, unique=TensorDict(val=0))
    td.separates(("unique", "val"), filter_empty=False)
    assert "unique" in td
    with pytest.raises(KeyError):
        TensorDict(a=0).separates("a", "e")


def test_split_argument_errors():
    td = TensorDict({}, [3, 2])
    with pytest.raises(TypeError, match="must be int or list of ints"):
        td.split("1", 0)
    with pytest.raises(TypeError, match="must be int or list of ints"):
        td.split(["1", 2], 0)
    with pytest.raises(RuntimeError, match="Insufficient number of elements in split_size"):
        td.split([], 0)
    with pytest.raises(IndexError, match="Incompatible dim"):
        td.split(1, -3)
    with pytest.raises(IndexError, match="Incompatible dim"):
        TensorDict({"a": rlpipe.zeros(2, 1)}, []).split(1, 0)
    with pytest.raises(ValueError, match="split_size must be positive, got -1."):
        td.split(-1, -1)


def test_sorted_keys_order_is_the_dot_joined_order():
    td = TensorDict({"a-b": 0, "a": {"b": 1, "a": 2}, "ab": 3})
    # sorted by "a-b", "a.a", "a.b", "ab": '-' (45) sorts before '.' (46)
    assert td.keys(True, True, sort=True) == ["a-b", ("a", "a"), ("a", "b"), "ab"]
    assert [v.item() for v in td.values(True, True, sort=True)] == [0, 2, 1, 3]


def test_operations_keep_a_tensordict_subclass():
    class SubTD(TensorDict):
        pass
    t = SubTD(a=rlpipe.randn(3))
    stack = rlpipe.stack([t, t])
    unsqueezed = stack.unsqueeze(0)
    results = [t.to(rlpipe.float64), t.to("cpu"), t.copy(), t.clone(), t.empty(), t.select(), t.exclude("a"),
               t.split_keys({"a"})[0], t.flatten_keys(), t.unflatten_keys(), stack, stack[0], stack.unbind(0)[0],
               stack.split(1)[0], stack.gather(0, rlpipe.ones((1,), dtype=rlpipe.int64)), unsqueezed,
               unsqueezed.transpose(1, 0), unsqueezed.permute(1, 0), unsqueezed.squeeze(), unsqueezed.reshape(-1),
               unsqueezed.view(-1), t.apply(lambda x: x), stack.repeat(2)]
    assert [type(r).__name__ for r in results] == ["SubTD"] * len(results)


def test_tolist_options_match_tensordict():
    # tensordict 0.14.3 gives these for position [1][2]
    td = TensorDict(a=rlpipe.arange(24).view(2, 3, 4),
                    b=TensorDict(c=rlpipe.arange(12).reshape(2, 3, 2), batch_size=(2, 3, 2)), batch_size=(2, 3))
    plain = td.tolist()[1][2]
    assert plain["a"].tolist() == [20, 21, 22, 23] and plain["b"]["c"].tolist() == [10, 11]
    first = td.tolist(tolist_first=True)[1][2]
    assert [d["c"].item() for d in first["b"]] == [10, 11]
    assert td.tolist(convert_tensors=True)[1][2] == {"a": [20, 21, 22, 23], "b": {"c": [10, 11]}}
    kept = td.tolist(convert_nodes=False)[1][2]
    assert isinstance(kept, TensorDict) and kept.batch_size == rlpipe.Size([])
    with pytest.raises(TypeError, match="convert_tensors"):
        td.tolist(convert_tensors=True, convert_nodes=False)


def test_update_and_update_in_place_take_keyword_entries():
    td = TensorDict({"a": rlpipe.zeros(3)}, batch_size=[3])
    td.update({"a": rlpipe.full((3,), 2.0), "b": rlpipe.full((3,), 3.0)}, a=rlpipe.full((3,), 7.0))
    assert td["a"].tolist() == [7.0] * 3 and td["b"].tolist() == [3.0] * 3
    assert td.update() is td and td.update_() is td
    a = td["a"]
    td.update_(a=rlpipe.ones(3))
    assert td["a"] is a and a.tolist() == [1.0] * 3
    with pytest.raises(KeyError, match="was not found"):
        td.update_(c=rlpipe.ones(3))
    with pytest.raises(KeyError, match="was not found"):
        TensorDict(a=0).update_({"b": rlpipe.ones(())}, keys_to_update="b")


def test_update_with_another_batch_size():
    # tensordict 0.14.3: a TensorDict whose leaves do not fit needs update_batch_size=True
    td = TensorDict({"x": rlpipe.zeros(2)}, [2])
    with pytest.raises(RuntimeError, match="update_batch_size"):
        td.update(TensorDict({"x": rlpipe.ones(3)}, [3]))
    fitting = TensorDict({"x": rlpipe.zeros(3, 4)}, [3, 4])
    fitting.update(TensorDict({"y": rlpipe.zeros(3, 4, 5)}, [3]))
    assert fitting.batch_size == rlpipe.Size([3, 4])
    t, t1 = rlpipe.arange(24).view(2, 3, 4), rlpipe.arange(16).view(2, 2, 4)
    td0 = TensorDict(a=t, b=TensorDict(c=t, batch_size=(2, 3)), batch_size=(2,))
    nested = td0["b"]
    td0.update(TensorDict(a=t, b=TensorDict(c=t1, batch_size=(2, 2)), batch_size=(2,)), update_batch_size=True)
    assert td0["b"] is nested and nested.batch_size == rlpipe.Size([2, 2]) and td0["b", "c"] is t1
    empty = TensorDict(batch_size=(3,))
    assert empty.update(TensorDict(batch_size=(4,)), update_batch_size=True).batch_size == rlpipe.Size([4])
    with pytest.raises(RuntimeError, match="inplace"):
        TensorDict(batch_size=(3,)).update(TensorDict(batch_size=(4,)), update_batch_size=True, inplace=True)
    with pytest.raises(RuntimeError, match="keys_to_update"):
        TensorDict(batch_size=(3,)).update(TensorDict(batch_size=(4,)), update_batch_size=True, keys_to_update=["a"])
    with pytest.raises(RuntimeError, match=LOCK_ERROR):
        TensorDict(batch_size=(3,), lock=True).update(TensorDict(batch_size=(4,)), update_batch_size=True)


@pytest.mark.parametrize("index", [1, range(1, 3), [0, 2], "mask", (slice(None), 1)])
def test_sub_tensordict_writes_through_to_its_source(index):
    td, a, b = arange_td(3, 2)
    if index == "mask":
        index = rlpipe.tensor([True, False, True])
    sub = td._get_sub_tensordict(index)
    np_index = np.asarray(index.numpy()) if isinstance(index, rlpipe.Tensor) else \
        list(index) if isinstance(index, range) else index
    assert sub.batch_size == td[index].batch_size and sub.get_parent_tensordict() is td
    np.testing.assert_array_equal(sub["a"].numpy(), a[np_index])
    sub.update(td[index].clone().zero_())  # existing keys are written in place
    a[np_index], b[np_index] = 0, 0
    np.testing.assert_array_equal(td["a"].numpy(), a)
    np.testing.assert_array_equal(td["n", "b"].numpy(), b)
    sub.set("new", rlpipe.ones(sub.batch_size))  # a new key: zeros outside the index
    expected = np.zeros((3, 2), np.float32)
    expected[np_index] = 1
    np.testing.assert_array_equal(td["new"].numpy(), expected)
    with pytest.raises(RuntimeError, match="prohibited for existing tensors"):
        sub.set("a", rlpipe.ones(*sub.batch_size, 2))
    with pytest.raises(RuntimeError, match="lazy representation"):
        sub.batch_size = []
    assert type(sub == 0) is TensorDict
    copy = sub.to_tensordict()
    copy["a"].fill_(7.0)  # a copy: the source is untouched
    np.testing.assert_array_equal(td["a"].numpy(), a)


def test_sub_tensordict_item_assignment_and_nesting():
    td, a, _ = arange_td(3, 2)
    sub = td.get_sub_tensordict(2)
    sub["a"] = rlpipe.full((2, 2), -1.0)
    assert float(td["a"][2].sum()) == -4.0
    inner = td._get_sub_tensordict(1)._get_sub_tensordict(0)
    inner.set_("a", rlpipe.full((2,), 5.0))
    assert td["a"][1, 0].tolist() == [5.0, 5.0]
    with pytest.raises(RuntimeError, match=LOCK_ERROR):
        td.lock_()._get_sub_tensordict(0).set("other", rlpipe.zeros(2))


def test_pickling_leaves_out_weak_references_and_locks_again():
    import pickle
    td = TensorDict({"a": rlpipe.arange(6.0).view(3, 2), "n": {"b": rlpipe.zeros(3)}}, [3])
    view = td.unsqueeze(0)  # remembers how a `with` block would undo it
    again = pickle.loads(pickle.dumps(view))
    assert again.batch_size == rlpipe.Size([1, 3]) and again["a"].tolist() == [[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]]
    locked = pickle.loads(pickle.dumps(td.lock_()))
    assert locked.is_locked and locked["n"].is_locked
    locked.unlock_()
    assert not locked["n"].is_locked


def test_save_returns_the_memory_mapped_copy(tmp_path):
    td, a, _ = arange_td(3)
    saved = td.save(str(tmp_path / "td"))
    assert saved is not td and saved.is_memmap() and not td.is_memmap()
    np.testing.assert_array_equal(TensorDict.load(str(tmp_path / "td"))["a"].numpy(), a)


def test_named_dims_are_kept():
    assert TensorDict(batch_size=[2], names=[None]).names == [None]
    assert TensorDict(batch_size=[2], names=["time"]).names == ["time"]
