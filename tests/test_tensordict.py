# ruff: noqa: SIM118 - `key in td.keys()` is the API under test (tensordict raises on `key in td`)
"""``rlpipe.TensorDict`` against the documented semantics of ``tensordict.TensorDict`` 0.14.

Batch operations are checked against a plain reference: the same op applied to every leaf by hand
with rlpipe tensor ops. Where tensordict's behaviour is specific (key order of nested views,
``in`` raising, repr layout, memmap file layout) the expectation follows tensordict's source."""
import math

import numpy as np
import pytest
import td_helpers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from td_helpers import leaves

import rlpipe
from rlpipe import TensorDict

# ----------------------------------------------------------------------------------------------
# helpers


def arr(x):
    """A NumPy view of a tensor (or the array itself)."""
    return td_helpers.arr(x, copy=False)


def assert_leaves_equal(td, ref):
    """``td``'s leaves equal ``ref`` ({tuple key: tensor or array}) in keys, shapes, dtypes, values."""
    got = leaves(td)
    assert set(got) == set(ref), (sorted(got), sorted(ref))
    for key, expected in ref.items():
        value = got[key]
        assert isinstance(value, rlpipe.Tensor), (key, type(value))
        assert tuple(value.shape) == tuple(expected.shape), (key, value.shape, expected.shape)
        if isinstance(expected, rlpipe.Tensor):
            assert value.dtype == expected.dtype, (key, value.dtype, expected.dtype)
        np.testing.assert_array_equal(arr(value), arr(expected), err_msg=str(key))


def map_leaves(td, fn):
    """The reference: ``fn`` applied to each leaf of ``td`` by hand."""
    return {key: fn(value) for key, value in leaves(td).items()}


def make_td(batch=(3, 4), seed=0):
    """obs: float32 [*B, 2]; idx: int64 [*B]; next.reward: float32 [*B, 1]; next.done: bool [*B, 1]."""
    rng = np.random.default_rng(seed)
    n = math.prod(batch)
    return TensorDict(
        {
            "obs": rlpipe.tensor(rng.standard_normal((*batch, 2)).astype(np.float32)),
            "idx": rlpipe.arange(n).reshape(*batch) + 100 * seed,
            "next": {
                "reward": rlpipe.tensor(rng.standard_normal((*batch, 1)).astype(np.float32)),
                "done": rlpipe.tensor(rng.random((*batch, 1)) < 0.5),
            },
        },
        batch_size=list(batch),
    )


def shares_memory(a, b):
    return np.shares_memory(arr(a), arr(b))


def S(*dims):
    return rlpipe.Size(dims)


def batch_index(index, batch_dims):
    """``index`` with its Ellipsis spelled out over the batch dims only, as TensorDict reads it."""
    items = index if isinstance(index, tuple) else (index,)
    if not any(i is Ellipsis for i in items):
        return index
    used = 0
    for i in items:
        if i is None or i is Ellipsis:
            continue
        if isinstance(i, (rlpipe.Tensor, np.ndarray)) and i.dtype in (rlpipe.bool, np.bool_):
            used += i.ndim
        else:
            used += 1
    out = []
    for i in items:
        out.extend([slice(None)] * (batch_dims - used) if i is Ellipsis else [i])
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# construction


def test_exported_in_both_places():
    import rlpipe.tensordict as rtd
    assert rtd.TensorDict is rlpipe.TensorDict


@pytest.mark.parametrize("batch_size", [[3], (3,), rlpipe.Size([3]), 3], ids=["list", "tuple", "Size", "int"])
def test_batch_size_forms(batch_size):
    td = TensorDict({"a": rlpipe.zeros(3, 2), "nested": {"b": rlpipe.ones(3)}}, batch_size=batch_size)
    assert isinstance(td.batch_size, rlpipe.Size)
    assert td.batch_size == S(3)
    assert td.shape == S(3)
    assert td.batch_dims == 1 and td.ndim == 1
    assert isinstance(td["nested"], TensorDict)
    assert td["nested"].batch_size == S(3)


def test_batch_size_defaults_to_empty_and_is_not_inferred():
    td = TensorDict({"a": rlpipe.zeros(3, 2)})
    assert td.batch_size == S()
    assert len(td) == 0
    assert TensorDict().batch_size == S()
    assert TensorDict({}, batch_size=[2, 5]).batch_size == S(2, 5)


def test_construct_from_kwargs_like_dict():
    td = TensorDict(a=rlpipe.zeros(3), b=rlpipe.ones(3, 1), batch_size=[3])
    assert list(td.keys()) == ["a", "b"]
    assert td.batch_size == S(3)


def test_numpy_arrays_and_python_numbers_become_tensors():
    td = TensorDict({"f64": np.arange(6, dtype=np.float64).reshape(3, 2),
                     "i32": np.arange(3, dtype=np.int32),
                     "nested": {"f32": np.ones((3, 4), dtype=np.float32)}}, batch_size=[3])
    assert isinstance(td["f64"], rlpipe.Tensor) and td["f64"].dtype == rlpipe.float64
    assert td["i32"].dtype == rlpipe.int32
    assert td["nested", "f32"].dtype == rlpipe.float32
    np.testing.assert_array_equal(arr(td["f64"]), np.arange(6.0).reshape(3, 2))

    scalars = TensorDict({"f": 1.5, "i": 3, "b": True, "nested": {"x": 2.0}}, batch_size=[])
    assert isinstance(scalars["f"], rlpipe.Tensor)
    assert scalars["f"].shape == S() and scalars["f"].dtype == rlpipe.float32
    assert scalars["i"].dtype == rlpipe.int64 and scalars["i"].item() == 3
    assert scalars["b"].dtype == rlpipe.bool and scalars["b"].item() is True
    assert scalars["nested", "x"].item() == 2.0


def test_python_number_with_nonempty_batch_size_is_a_mismatch():
    with pytest.raises(RuntimeError, match="x"):
        TensorDict({"x": 1.0}, batch_size=[3])


def _assert_mismatch_message(msg, key, shape, batch):
    assert key in msg, msg
    assert shape in msg, msg
    assert batch in msg, msg


def test_leading_dim_mismatch_names_key_shape_and_batch_size():
    with pytest.raises(RuntimeError) as info:
        TensorDict({"good": rlpipe.zeros(4), "obs": rlpipe.zeros(3, 2)}, batch_size=[4])
    _assert_mismatch_message(str(info.value), "obs", "3, 2", "[4]")


def test_nested_leading_dim_mismatch_names_the_key():
    with pytest.raises(RuntimeError) as info:
        TensorDict({"next": {"reward": rlpipe.zeros(2, 5)}}, batch_size=[3])
    _assert_mismatch_message(str(info.value), "reward", "2, 5", "3")


def test_too_few_dims_is_a_mismatch():
    with pytest.raises(RuntimeError) as info:
        TensorDict({"obs": rlpipe.zeros(3)}, batch_size=[3, 4])
    _assert_mismatch_message(str(info.value), "obs", "3", "3, 4")


def test_set_mismatch_raises_and_leaves_td_unchanged():
    td = make_td()
    before = list(td.keys())
    with pytest.raises(RuntimeError) as info:
        td.set("bad", rlpipe.zeros(4, 3))
    _assert_mismatch_message(str(info.value), "bad", "4, 3", "3, 4")
    assert list(td.keys()) == before


def test_source_must_be_a_mapping():
    with pytest.raises(ValueError, match="TensorDict"):
        TensorDict([rlpipe.zeros(3)], batch_size=[3])


def test_device_none_by_default_and_given_device():
    td = make_td()
    assert td.device is None
    on_cpu = TensorDict({"a": rlpipe.zeros(3), "n": {"b": rlpipe.zeros(3)}}, batch_size=[3], device="cpu")
    assert on_cpu.device == rlpipe.device("cpu")
    assert on_cpu["n"].device == rlpipe.device("cpu")
    assert on_cpu["a"].device == rlpipe.device("cpu")
    assert TensorDict({}, batch_size=[], device=rlpipe.device("cpu")).device == rlpipe.device("cpu")


def test_device_cannot_be_assigned():
    with pytest.raises(RuntimeError, match="device cannot be set"):
        make_td().device = "cpu"


def test_batch_dims_cannot_be_assigned():
    with pytest.raises(RuntimeError, match="batch dims"):
        make_td().batch_dims = 1


def test_nested_tensordict_value_keeps_its_extra_batch_dims():
    inner = TensorDict({"x": rlpipe.zeros(3, 4, 2)}, batch_size=[3, 4])
    td = TensorDict({"inner": inner}, batch_size=[3])
    assert td["inner"].batch_size == S(3, 4)
    assert td["inner", "x"] is inner["x"]


def test_shape_helpers():
    td = make_td()
    assert td.numel() == 12
    assert len(td) == 3
    assert len(make_td(batch=())) == 0
    rows = list(td)
    assert len(rows) == 3 and all(r.batch_size == S(4) for r in rows)
    assert_leaves_equal(rows[1], map_leaves(td, lambda x: x[1]))


# ----------------------------------------------------------------------------------------------
# keys


def test_get_by_str_and_tuple():
    td = make_td()
    reward = td["next"]["reward"]
    assert td["next", "reward"] is reward
    assert td[("next", "reward")] is reward
    assert td.get(("next", "reward")) is reward
    assert td.get("next").get("reward") is reward
    assert td[("obs",)] is td["obs"]


def test_get_default_and_missing_key_errors():
    td = make_td()
    sentinel = object()
    assert td.get("missing", sentinel) is sentinel
    assert td.get(("next", "missing"), None) is None
    assert td.get("missing") is None  # tensordict 0.14: get() without a default gives None
    with pytest.raises(KeyError, match="missing"):
        td["missing"]
    with pytest.raises(KeyError, match="nope"):
        td["next", "nope"]


def test_set_returns_self_and_creates_intermediate_tensordicts():
    td = make_td()
    value = rlpipe.ones(3, 4, 5)
    assert td.set(("x", "y", "z"), value) is td
    assert isinstance(td["x"], TensorDict) and td["x"].batch_size == S(3, 4)
    assert isinstance(td["x", "y"], TensorDict) and td["x", "y"].batch_size == S(3, 4)
    assert td["x", "y", "z"] is value
    td["w", "v"] = rlpipe.zeros(3, 4)
    assert td["w"]["v"].shape == S(3, 4)
    td["obs"] = rlpipe.full((3, 4, 7), 2.0)
    assert td["obs"].shape == S(3, 4, 7)


def test_set_through_a_leaf_is_an_error():
    td = make_td()
    with pytest.raises(KeyError, match="obs"):
        td.set(("obs", "inner"), rlpipe.zeros(3, 4))


def test_set_dict_value_becomes_tensordict():
    td = make_td()
    td.set("d", {"e": rlpipe.zeros(3, 4, 2)})
    assert isinstance(td["d"], TensorDict) and td["d"].batch_size == S(3, 4)


def test_set_inplace_keeps_the_tensor():
    td = make_td()
    obs = td["obs"]
    new = rlpipe.full((3, 4, 2), 7.0)
    assert td.set_("obs", new) is td
    assert td["obs"] is obs
    np.testing.assert_array_equal(arr(obs), np.full((3, 4, 2), 7.0))
    reward = td["next", "reward"]
    td.set_(("next", "reward"), rlpipe.ones(3, 4, 1))
    assert td["next", "reward"] is reward and float(reward.sum()) == 12.0


def test_set_inplace_missing_key():
    td = make_td()
    with pytest.raises(KeyError, match="missing"):
        td.set_("missing", rlpipe.zeros(3, 4))
    with pytest.raises(KeyError, match="missing"):
        td.set_(("next", "missing"), rlpipe.zeros(3, 4))
    assert "missing" not in td.keys()


def test_update_with_dict_merges_nested():
    td = make_td()
    done = td["next", "done"]
    new_reward = rlpipe.ones(3, 4, 1)
    assert td.update({"next": {"reward": new_reward}, "extra": rlpipe.zeros(3, 4)}) is td
    assert td["next", "reward"] is new_reward
    assert td["next", "done"] is done          # nested entries that were not given stay
    assert "extra" in td.keys()


def test_update_with_tensordict():
    td = make_td()
    other = TensorDict({"obs": rlpipe.zeros(3, 4, 2), "next": {"new": rlpipe.ones(3, 4)}}, batch_size=[3, 4])
    td.update(other)
    assert td["obs"] is other["obs"]
    assert set(td["next"].keys()) == {"reward", "done", "new"}


def test_update_with_tuple_keys():
    td = make_td()
    value = rlpipe.zeros(3, 4, 1)
    td.update({("next", "reward"): value})
    assert td["next", "reward"] is value


def test_setdefault():
    td = make_td()
    obs = td["obs"]
    assert td.setdefault("obs", rlpipe.zeros(3, 4, 2)) is obs
    value = rlpipe.ones(3, 4)
    assert td.setdefault("fresh", value) is value
    assert td["fresh"] is value
    nested = rlpipe.ones(3, 4)
    assert td.setdefault(("next", "fresh"), nested) is nested


def test_pop():
    td = make_td()
    obs = td["obs"]
    assert td.pop("obs") is obs
    assert "obs" not in td.keys()
    assert td.pop("obs", None) is None
    reward = td["next", "reward"]
    assert td.pop(("next", "reward")) is reward
    assert list(td["next"].keys()) == ["done"]
    with pytest.raises(KeyError, match="obs"):
        td.pop("obs")


def test_del():
    td = make_td()
    del td["obs"]
    assert list(td.keys()) == ["idx", "next"]
    del td["next", "done"]
    assert list(td["next"].keys()) == ["reward"]
    with pytest.raises(KeyError, match="missing"):
        del td["missing"]


def test_rename_key():
    td = make_td()
    obs = td["obs"]
    assert td.rename_key_("obs", "observation") is td
    assert td["observation"] is obs and "obs" not in td.keys()
    reward = td["next", "reward"]
    td.rename_key_(("next", "reward"), ("next", "r"))
    assert td["next", "r"] is reward and "reward" not in td["next"].keys()
    with pytest.raises(KeyError, match="missing"):
        td.rename_key_("missing", "other")
    with pytest.raises(KeyError, match="idx"):
        td.rename_key_("observation", "idx", safe=True)
    assert td["observation"] is obs         # the failed call changed nothing


def test_select_and_exclude():
    td = make_td()
    sel = td.select("obs", ("next", "reward"))
    assert sel is not td
    assert leaves(sel).keys() == {("obs",), ("next", "reward")}
    assert sel["obs"] is td["obs"] and sel["next", "reward"] is td["next", "reward"]
    assert sel.batch_size == td.batch_size and sel["next"].batch_size == td["next"].batch_size
    assert set(leaves(td)) == {("obs",), ("idx",), ("next", "reward"), ("next", "done")}  # unchanged

    exc = td.exclude("obs", ("next", "done"))
    assert set(leaves(exc)) == {("idx",), ("next", "reward")}
    assert exc["idx"] is td["idx"]
    assert "done" in td["next"].keys()     # original unchanged
    assert set(leaves(td.exclude("missing", ("next", "missing")))) == set(leaves(td))


def test_select_missing_key():
    td = make_td()
    with pytest.raises(KeyError, match="missing"):
        td.select("missing")
    with pytest.raises(KeyError, match="missing"):
        td.select(("next", "missing"))
    assert set(leaves(td.select("obs", "missing", strict=False))) == {("obs",)}


def test_keys_order_and_nesting():
    td = make_td()
    assert list(td.keys()) == ["obs", "idx", "next"]
    # tensordict yields a node's nested keys before the node itself
    assert list(td.keys(include_nested=True)) == ["obs", "idx", ("next", "reward"), ("next", "done"), "next"]
    assert list(td.keys(True, True)) == ["obs", "idx", ("next", "reward"), ("next", "done")]
    assert list(td.keys(leaves_only=True)) == ["obs", "idx"]
    assert len(td.keys()) == 3
    assert len(td.keys(include_nested=True, leaves_only=True)) == 4


def test_values_and_items_follow_keys():
    td = make_td()
    assert all(v is td.get(k) for k, v in td.items())
    assert [k for k, _ in td.items()] == list(td.keys())
    values = list(td.values())
    assert values[0] is td["obs"] and values[2] is td["next"]
    items = list(td.items(include_nested=True, leaves_only=True))
    assert [k for k, _ in items] == ["obs", "idx", ("next", "reward"), ("next", "done")]
    assert all(v is td[k] for k, v in items)
    assert len(list(td.values(include_nested=True, leaves_only=True))) == 4


def test_membership_through_keys():
    td = make_td()
    assert "obs" in td.keys()
    assert "next" in td.keys()
    assert "missing" not in td.keys()
    nested = td.keys(include_nested=True)
    assert ("next", "reward") in nested
    assert ("next", "missing") not in nested
    assert ("obs", "x") not in nested
    assert "next" in nested
    assert "next" not in td.keys(include_nested=True, leaves_only=True)


def test_one_element_tuple_membership():
    assert ("obs",) in make_td().keys()
    assert ("next",) in make_td().keys()


def test_nested_membership_needs_include_nested():
    with pytest.raises(TypeError, match="include_nested"):
        ("next", "reward") in make_td().keys()  # noqa: B015


def test_in_on_the_tensordict_itself_looks_at_the_keys():
    # tensordict 0.14: a string is a root key, a tuple a nested key; anything else is a RuntimeError
    td = make_td()
    assert "obs" in td and "missing" not in td and "reward" not in td
    assert ("next", "reward") in td and ("next", "missing") not in td and ("obs", "x") not in td
    with pytest.raises(RuntimeError, match="NestedKey"):
        1 in td  # noqa: B015


def test_is_empty_and_empty():
    assert TensorDict({}, batch_size=[3]).is_empty()
    assert TensorDict({"n": {}}, batch_size=[3]).is_empty()
    assert TensorDict({"n": {"m": {}}}, batch_size=[3]).is_empty()
    td = make_td()
    assert not td.is_empty()
    empty = td.empty()
    assert isinstance(empty, TensorDict) and list(empty.keys()) == []
    assert empty.batch_size == td.batch_size and empty.device == td.device
    assert list(td.keys()) == ["obs", "idx", "next"]
    deep = td.empty(recurse=True)
    assert list(deep.keys()) == ["next"] and deep["next"].is_empty() and deep.is_empty()


def test_copy_is_shallow():
    td = make_td()
    cp = td.copy()
    assert cp is not td
    assert cp["obs"] is td["obs"]
    assert cp["next", "reward"] is td["next", "reward"]
    cp["new"] = rlpipe.zeros(3, 4)
    assert "new" not in td.keys()
    cp["next", "new"] = rlpipe.zeros(3, 4)
    assert "new" not in td["next"].keys()   # nested TensorDicts are copied too, not their tensors


def test_clone_is_deep():
    td = make_td()
    cl = td.clone()
    assert_leaves_equal(cl, leaves(td))
    for key, value in leaves(cl).items():
        assert value is not td[key]
        assert not shares_memory(value, td[key])
    cl["obs"].zero_()
    assert float(td["obs"].abs().sum()) > 0
    assert cl.batch_size == td.batch_size and cl["next"].batch_size == td["next"].batch_size


def test_detach():
    w = rlpipe.ones(3, 2, requires_grad=True)
    y = w * 2
    td = TensorDict({"y": y, "n": {"w": w}}, batch_size=[3])
    det = td.detach()
    assert not det["y"].requires_grad and not det["n", "w"].requires_grad
    assert td["y"].requires_grad
    np.testing.assert_array_equal(arr(det["y"]), arr(y))
    assert shares_memory(det["n", "w"], w)


def test_apply():
    td = make_td()
    out = td.apply(lambda x: x * 2)
    assert out is not td and out.batch_size == td.batch_size
    assert_leaves_equal(out, map_leaves(td, lambda x: x * 2))
    assert out["next"].batch_size == td["next"].batch_size


def test_apply_with_others():
    td, other = make_td(seed=0), make_td(seed=1)
    out = td.apply(lambda x, y: x.float() + y.float(), other)
    ref = {k: v.float() + leaves(other)[k].float() for k, v in leaves(td).items()}
    assert_leaves_equal(out, ref)


def test_apply_with_batch_size():
    td = make_td()
    out = td.apply(lambda x: x.sum(1), batch_size=[3])
    assert out.batch_size == S(3) and out["next"].batch_size == S(3)
    assert_leaves_equal(out, map_leaves(td, lambda x: x.sum(1)))


def test_apply_dropping_entries_that_return_none():
    td = make_td()
    out = td.apply(lambda x: x if x.dtype == rlpipe.float32 else None)
    assert set(leaves(out)) == {("obs",), ("next", "reward")}


def test_named_apply():
    td = make_td()
    seen = []

    def fn(key, value):
        seen.append(key)
        return value + 1

    out = td.named_apply(fn)
    assert seen == ["obs", "idx", "reward", "done"]
    assert_leaves_equal(out, map_leaves(td, lambda x: x + 1))

    seen.clear()
    out = td.named_apply(fn, nested_keys=True)
    assert seen == ["obs", "idx", ("next", "reward"), ("next", "done")]
    assert out.batch_size == td.batch_size


def test_to_dict():
    td = make_td()
    d = td.to_dict()
    assert type(d) is dict and list(d) == ["obs", "idx", "next"]
    assert type(d["next"]) is dict and list(d["next"]) == ["reward", "done"]
    assert d["obs"] is td["obs"] and d["next"]["reward"] is td["next", "reward"]


@pytest.mark.parametrize("sep", [".", "/", "__"])
def test_flatten_and_unflatten_keys(sep):
    td = make_td()
    td["a", "b", "c"] = rlpipe.zeros(3, 4)
    flat = td.flatten_keys(sep) if sep != "." else td.flatten_keys()
    assert set(flat.keys()) == {"obs", "idx", f"next{sep}reward", f"next{sep}done", f"a{sep}b{sep}c"}
    assert all(not isinstance(v, TensorDict) for v in flat.values())
    assert flat[f"next{sep}reward"] is td["next", "reward"]
    assert flat.batch_size == td.batch_size
    back = flat.unflatten_keys(sep) if sep != "." else flat.unflatten_keys()
    assert_leaves_equal(back, leaves(td))
    assert back["a", "b"].batch_size == S(3, 4)


# ----------------------------------------------------------------------------------------------
# indexing


INDICES = {
    "int": 0,
    "neg-int": -1,
    "slice": slice(1, 3),
    "step-slice": slice(None, None, 2),
    "None": None,
    "ellipsis": Ellipsis,
    "int-slice": (0, slice(1, 3)),
    "colon-int": (slice(None), 2),
    "ellipsis-int": (Ellipsis, 1),
    "None-int": (None, 0),
    "int-tensor": rlpipe.tensor([0, 2]),
    "2d-int-tensor": rlpipe.tensor([[0, 1], [2, 2]]),
    "bool-tensor": rlpipe.tensor([True, False, True]),
    "2d-bool-tensor": rlpipe.tensor([[True, False, True, False]] * 2 + [[False, False, True, True]]),
    "numpy-int": np.array([2, 0]),
    "numpy-bool": np.array([True, False, True]),
    "two-tensors": (rlpipe.tensor([0, 2]), rlpipe.tensor([1, 3])),
    "slice-tensor": (slice(None), rlpipe.tensor([3, 0, 1])),
    "list": [0, 2],
}


@pytest.mark.parametrize("index", list(INDICES.values()), ids=list(INDICES))
def test_getitem_matches_per_leaf_indexing(index):
    td = make_td()
    out = td[index]
    assert isinstance(out, TensorDict)
    expected_batch = td["idx"][index].shape
    assert out.batch_size == expected_batch
    assert out["next"].batch_size == expected_batch
    leaf_index = batch_index(index, td.batch_dims)
    assert_leaves_equal(out, map_leaves(td, lambda x: x[leaf_index]))


def test_basic_index_is_a_view():
    td = make_td()
    sub = td[1:]
    sub["obs"].zero_()
    assert float(td["obs"][1:].abs().sum()) == 0.0
    assert shares_memory(td[0]["next", "reward"], td["next", "reward"])


def test_indexing_a_batchless_tensordict():
    with pytest.raises(RuntimeError, match="batch_dims==0"):
        make_td(batch=())[0]


def test_index_past_the_batch_dims():
    td = TensorDict({"a": rlpipe.zeros(3, 4)}, batch_size=[3])
    with pytest.raises(IndexError, match="too many indices"):
        td[:, 0]


@pytest.mark.parametrize("index", [0, slice(1, 3), rlpipe.tensor([2, 0]), (slice(None), 1),
                                   rlpipe.tensor([True, False, True]), np.array([1, 2])],
                         ids=["int", "slice", "int-tensor", "colon-int", "bool-tensor", "numpy"])
def test_setitem_with_index(index):
    td, other = make_td(seed=0), make_td(seed=1)
    ref = {k: v.clone() for k, v in leaves(td).items()}
    src = other[index]
    td[index] = src
    for key, value in ref.items():
        value[index] = leaves(src)[key]
    assert_leaves_equal(td, ref)


def test_setitem_with_index_keeps_tensor_identity():
    td = make_td()
    obs = td["obs"]
    td[0] = make_td(seed=3)[0]
    assert td["obs"] is obs


def test_setitem_broadcasts_smaller_batch():
    td = make_td()
    row = make_td(batch=(4,), seed=2)
    td[1:] = row          # [4] broadcast into the [2, 4] destination
    for key, value in leaves(td).items():
        np.testing.assert_array_equal(arr(value[1]), arr(leaves(row)[key]))
        np.testing.assert_array_equal(arr(value[2]), arr(leaves(row)[key]))


def test_setitem_index_with_dict_and_scalar():
    td = make_td()
    src = make_td(seed=4)[2]
    td[0] = src.to_dict()
    assert_leaves_equal(td[0], leaves(src))
    td[1] = 0
    for value in leaves(td[1]).values():
        assert not bool(value.any())


def test_nested_tensordict_with_more_batch_dims_follows_batch_ops():
    inner = TensorDict({"x": rlpipe.arange(3 * 4 * 5 * 2).reshape(3, 4, 5, 2)}, batch_size=[3, 4, 5])
    td = TensorDict({"a": rlpipe.zeros(3, 4), "inner": inner}, batch_size=[3, 4])
    x = inner["x"]
    assert td[1]["inner"].batch_size == S(4, 5)
    np.testing.assert_array_equal(arr(td[1]["inner", "x"]), arr(x[1]))
    flat = td.reshape(12)
    assert flat["inner"].batch_size == S(12, 5)
    np.testing.assert_array_equal(arr(flat["inner", "x"]), arr(x.reshape(12, 5, 2)))
    per = td.permute(1, 0)
    assert per["inner"].batch_size == S(4, 3, 5)
    np.testing.assert_array_equal(arr(per["inner", "x"]), arr(x.permute(1, 0, 2, 3)))
    st = rlpipe.stack([td, td], 1)
    assert st["inner"].batch_size == S(3, 2, 4, 5)
    un = td.unsqueeze(-1)
    assert un["inner"].batch_size == S(3, 4, 1, 5)
    np.testing.assert_array_equal(arr(un["inner", "x"]), arr(x.unsqueeze(2)))
    assert td.expand(2, 3, 4)["inner"].batch_size == S(2, 3, 4, 5)


def test_set_list_value_and_tensordict_value_mismatch():
    td = make_td()
    td.set("lst", [[1.0] * 4] * 3)
    assert isinstance(td["lst"], rlpipe.Tensor) and td["lst"].shape == S(3, 4)
    with pytest.raises(RuntimeError):
        td.set("sub", TensorDict({"z": rlpipe.zeros(2)}, batch_size=[2]))
    assert "sub" not in td.keys()


def test_masked_fill_with_a_mask_over_leading_batch_dims():
    td = make_td()
    mask = rlpipe.tensor([True, False, True])
    out = td.masked_fill(mask, 0)
    for key, value in leaves(td).items():
        np.testing.assert_array_equal(arr(leaves(out)[key]), _np_masked_fill(value, mask, 0), err_msg=str(key))


def test_where_with_missing_key_in_other():
    td = make_td()
    cond = rlpipe.ones(3, 4, dtype=rlpipe.bool)
    with pytest.raises(KeyError, match="obs"):
        td.where(cond, td.exclude("obs"))


# ----------------------------------------------------------------------------------------------
# shape operations


@pytest.mark.parametrize("shape", [(12,), (-1,), (2, 6), (4, 3), (2, -1, 3)])
@pytest.mark.parametrize("method", ["reshape", "view"])
def test_reshape_and_view(method, shape):
    td = make_td()
    out = getattr(td, method)(*shape)
    target = td["idx"].reshape(*shape).shape
    assert out.batch_size == target
    assert_leaves_equal(out, map_leaves(td, lambda x: x.reshape(*target, *x.shape[2:])))
    assert getattr(td, method)(tuple(shape)).batch_size == target


def test_reshape_incompatible():
    with pytest.raises(RuntimeError):
        make_td().reshape(5)


def test_flatten_unflatten():
    td = make_td(batch=(2, 3, 4))
    flat = td.flatten(0, 1)
    assert flat.batch_size == S(6, 4)
    assert_leaves_equal(flat, map_leaves(td, lambda x: x.flatten(0, 1)))
    flat2 = td.flatten(1, 2)
    assert flat2.batch_size == S(2, 12)
    assert_leaves_equal(flat2, map_leaves(td, lambda x: x.flatten(1, 2)))
    back = flat.unflatten(0, (2, 3))
    assert back.batch_size == S(2, 3, 4)
    assert_leaves_equal(back, leaves(td))
    assert td.flatten(0, -1).batch_size == S(24)   # end_dim counts batch dims only


def test_squeeze_unsqueeze():
    td = make_td(batch=(3, 1, 4))
    sq = td.squeeze()
    assert sq.batch_size == S(3, 4)
    assert_leaves_equal(sq, map_leaves(td, lambda x: x.squeeze(1)))
    assert td.squeeze(1).batch_size == S(3, 4)
    assert td.squeeze(-2).batch_size == S(3, 4)
    assert td.squeeze(0).batch_size == S(3, 1, 4)         # size 3: unchanged
    un = td.unsqueeze(0)
    assert un.batch_size == S(1, 3, 1, 4)
    assert_leaves_equal(un, map_leaves(td, lambda x: x.unsqueeze(0)))
    un = td.unsqueeze(-1)                                 # relative to the batch dims
    assert un.batch_size == S(3, 1, 4, 1)
    assert un["obs"].shape == S(3, 1, 4, 1, 2)
    assert_leaves_equal(un, map_leaves(td, lambda x: x.unsqueeze(3)))


@pytest.mark.parametrize("call, dim", [("squeeze", 2), ("squeeze", -3), ("unsqueeze", 3), ("unsqueeze", -4)])
def test_squeeze_unsqueeze_dim_out_of_range(call, dim):
    # tensordict: RuntimeError "squeezing is allowed for dims comprised between `-td.batch_dims` and ..."
    with pytest.raises(RuntimeError, match=f"{call[:-1]}ing is allowed"):  # squeezing, unsqueezing
        getattr(make_td(), call)(dim)


def test_permute_transpose():
    td = make_td(batch=(2, 3, 4))
    for out in (td.permute(2, 0, 1), td.permute([2, 0, 1]), td.permute((2, 0, 1))):
        assert out.batch_size == S(4, 2, 3)
        assert_leaves_equal(out, map_leaves(td, lambda x: x.permute(2, 0, 1, *range(3, x.ndim))))
    tr = td.transpose(0, 2)
    assert tr.batch_size == S(4, 3, 2)
    assert_leaves_equal(tr, map_leaves(td, lambda x: x.transpose(0, 2)))
    assert_leaves_equal(td.transpose(-1, -3), leaves(tr))   # negative dims count batch dims


def test_permute_errors():
    with pytest.raises(ValueError, match="permutation"):
        make_td().permute(0, 0)


def test_expand():
    td = make_td(batch=(3, 1))
    out = td.expand(2, 3, 5)
    assert out.batch_size == S(2, 3, 5)
    assert out["obs"].shape == S(2, 3, 5, 2)
    assert_leaves_equal(out, map_leaves(td, lambda x: x.expand(2, 3, 5, *x.shape[2:])))
    assert td.expand((2, 3, 5)).batch_size == S(2, 3, 5)
    assert td.expand(rlpipe.Size([3, 5])).batch_size == S(3, 5)


def test_expand_errors():
    td = make_td(batch=(3, 1))
    with pytest.raises(RuntimeError, match="(?i)expanded"):
        td.expand(4, 5)
    with pytest.raises(RuntimeError, match="must be greater or equal"):
        td.expand(5)


def test_split_chunk_unbind():
    td = make_td()
    parts = td.split(2, dim=0)
    assert [p.batch_size for p in parts] == [S(2, 4), S(1, 4)]
    assert_leaves_equal(parts[1], map_leaves(td, lambda x: x[2:]))
    parts = td.split([1, 3], dim=1)
    assert [p.batch_size for p in parts] == [S(3, 1), S(3, 3)]
    assert_leaves_equal(parts[1], map_leaves(td, lambda x: x[:, 1:]))
    assert [p.batch_size for p in td.split(3, -1)] == [S(3, 3), S(3, 1)]

    chunks = td.chunk(2, dim=1)
    assert [c.batch_size for c in chunks] == [S(3, 2), S(3, 2)]
    assert_leaves_equal(chunks[0], map_leaves(td, lambda x: x[:, :2]))
    assert [c.batch_size for c in td.chunk(2)] == [S(2, 4), S(1, 4)]

    rows = td.unbind(1)
    assert len(rows) == 4 and all(r.batch_size == S(3) for r in rows)
    assert_leaves_equal(rows[2], map_leaves(td, lambda x: x[:, 2]))
    assert_leaves_equal(td.unbind(-1)[3], map_leaves(td, lambda x: x[:, 3]))
    assert len(td.unbind(0)) == 3


def test_split_errors():
    td = make_td()
    with pytest.raises(RuntimeError, match=r"sum.*3") as info:
        td.split([1, 1], dim=0)
    assert "[1, 1]" in str(info.value)
    with pytest.raises(IndexError, match="(?i)out of range"):
        td.split(1, dim=2)


def test_gather():
    td = make_td()
    index = rlpipe.tensor([[3, 0], [1, 1], [2, 3]])
    out = td.gather(1, index)
    assert out.batch_size == S(3, 2)

    def ref(x):
        idx = index.reshape(3, 2, *([1] * (x.ndim - 2))).expand(3, 2, *x.shape[2:])
        return rlpipe.gather(x, 1, idx)

    ref_leaves = map_leaves(td, ref)
    assert_leaves_equal(out, ref_leaves)
    np.testing.assert_array_equal(arr(ref_leaves[("idx",)]), [[3, 0], [5, 5], [10, 11]])


def test_gather_errors():
    with pytest.raises(RuntimeError, match="Cannot gather tensordict"):
        make_td().gather(2, rlpipe.zeros(3, 4, dtype=rlpipe.int64))


def _expand_right(mask, x):
    while mask.ndim < x.ndim:
        mask = mask.unsqueeze(-1)
    return mask.expand(*x.shape)


def _np_masked_fill(x, mask, value):
    """NumPy reference for ``masked_fill``: the value is cast to the leaf's dtype (torch's rule)."""
    out = arr(x).copy()
    m = arr(mask)
    m = m.reshape(m.shape + (1,) * (out.ndim - m.ndim))
    out[np.broadcast_to(m, out.shape)] = value
    return out


def test_masked_fill():
    td = make_td()
    mask = rlpipe.tensor(np.random.default_rng(5).random((3, 4)) < 0.5)
    before = {k: v.clone() for k, v in leaves(td).items()}
    out = td.masked_fill(mask, 1)
    assert out is not td
    got = leaves(out)
    for key, value in before.items():
        assert got[key].dtype == value.dtype, key          # the leaf keeps its dtype (bool stays bool)
        np.testing.assert_array_equal(arr(got[key]), _np_masked_fill(value, mask, 1), err_msg=str(key))
    assert_leaves_equal(td, before)                        # out of place
    obs = td["obs"]
    assert td.masked_fill_(mask, 0) is td
    assert td["obs"] is obs
    for key, value in before.items():
        assert leaves(td)[key].dtype == value.dtype
        np.testing.assert_array_equal(arr(leaves(td)[key]), _np_masked_fill(value, mask, 0), err_msg=str(key))


def test_where():
    td, other = make_td(seed=0), make_td(seed=1)
    cond = rlpipe.tensor(np.random.default_rng(6).random((3, 4)) < 0.5)
    out = td.where(cond, other)
    ref = {k: rlpipe.where(_expand_right(cond, v), v, leaves(other)[k]) for k, v in leaves(td).items()}
    assert_leaves_equal(out, ref)
    out = td.where(cond, 0.0)
    assert_leaves_equal(out, map_leaves(td, lambda v: rlpipe.where(_expand_right(cond, v), v, 0.0)))


def test_zero_and_fill():
    td = make_td()
    obs = td["obs"]
    assert td.fill_("obs", 1.5) is td
    assert td["obs"] is obs and bool((obs == 1.5).all())
    td.fill_(("next", "reward"), 2.0)
    assert bool((td["next", "reward"] == 2.0).all())
    td.fill_("next", 1)                                     # a sub-tensordict: every leaf
    assert bool((td["next", "reward"] == 1).all()) and bool(td["next", "done"].all())
    with pytest.raises(KeyError, match="missing"):
        td.fill_("missing", 0)
    assert td.zero_() is td
    assert td["obs"] is obs
    for value in leaves(td).values():
        assert not bool(value.any())


@pytest.mark.parametrize("dim, pos", [(0, 0), (1, 1), (2, 2), (-1, 2), (-3, 0)])
def test_stack(dim, pos):
    tds = [make_td(seed=s) for s in range(3)]
    out = rlpipe.stack(tds, dim)
    expected_batch = list(tds[0].batch_size)
    expected_batch.insert(pos, 3)
    assert isinstance(out, TensorDict)
    assert out.batch_size == S(*expected_batch)
    assert out["next"].batch_size == S(*expected_batch)
    ref = {k: rlpipe.stack([leaves(t)[k] for t in tds], pos) for k in leaves(tds[0])}
    assert_leaves_equal(out, ref)
    assert_leaves_equal(rlpipe.stack(tds, dim=dim), ref)


@pytest.mark.parametrize("dim, pos", [(0, 0), (1, 1), (-1, 1), (-2, 0)])
def test_cat(dim, pos):
    tds = [make_td(seed=s) for s in range(3)]
    out = rlpipe.cat(tds, dim)
    assert isinstance(out, TensorDict)
    expected_batch = list(tds[0].batch_size)
    expected_batch[pos] *= 3
    assert out.batch_size == S(*expected_batch)
    ref = {k: rlpipe.cat([leaves(t)[k] for t in tds], pos) for k in leaves(tds[0])}
    assert_leaves_equal(out, ref)


@pytest.mark.skipif(not hasattr(TensorDict, "stack"), reason="TensorDict.stack not provided")
def test_classmethod_stack_and_cat():
    tds = [make_td(seed=s) for s in range(2)]
    assert_leaves_equal(TensorDict.stack(tds, 1), leaves(rlpipe.stack(tds, 1)))
    assert_leaves_equal(TensorDict.cat(tds, 1), leaves(rlpipe.cat(tds, 1)))


def test_stack_and_cat_errors():
    a = make_td()
    b = make_td(batch=(3, 5))
    with pytest.raises(RuntimeError):
        rlpipe.stack([a, b], 0)
    with pytest.raises(RuntimeError):
        rlpipe.cat([a, b], 0)
    c = a.exclude("obs")
    with pytest.raises((KeyError, RuntimeError), match="obs|keys"):
        rlpipe.stack([a, c], 0)


def test_batch_size_setter():
    td = TensorDict({"a": rlpipe.zeros(3, 4, 5, 6), "b": rlpipe.zeros(3, 4, 5),
                     "n": {"c": rlpipe.zeros(3, 4, 5)}}, batch_size=[3, 4])
    td.batch_size = [3]
    assert td.batch_size == S(3) and len(td) == 3
    assert td["n"].batch_size == S(3, 4)             # a nested td keeps its longer batch size
    td.batch_size = rlpipe.Size([3, 4])
    assert td.batch_size == S(3, 4)
    td.set("c", rlpipe.zeros(3, 4))
    with pytest.raises(RuntimeError, match="has shape .* incompatible with the batch-size"):
        td.batch_size = [3, 5]
    assert td.batch_size == S(3, 4)                  # the failed assignment changed nothing
    with pytest.raises(RuntimeError, match="incompatible with the batch-size"):
        td.batch_size = [3, 4, 5]                    # "c" has no third dim


def test_batch_size_setter_grows_nested_tensordicts():
    # tensordict's _batch_size_setter: a nested td with fewer batch dims than the new size gets it too
    td = TensorDict({"a": rlpipe.zeros(3, 4, 5, 6), "n": {"c": rlpipe.zeros(3, 4, 5)}}, batch_size=[3, 4])
    td.batch_size = (3, 4, 5)
    assert td.batch_size == S(3, 4, 5)
    assert td["n"].batch_size == S(3, 4, 5)
    assert td[0, 1].batch_size == S(5) and td[0, 1]["n"].batch_size == S(5)


def test_batch_size_setter_error_names_the_leaf():
    td = TensorDict({"a": rlpipe.zeros(3, 4, 5, 6)}, batch_size=[3])
    with pytest.raises(RuntimeError, match=r"(?i)the tensor '?a'? has shape .*3, 4, 5, 6.* incompatible with the "
                                           r"batch-size .*3, 5"):
        td.batch_size = [3, 5]


# ----------------------------------------------------------------------------------------------
# dtype and device conversion


def test_to_dtype():
    td = make_td()
    out = td.to(rlpipe.float64)
    assert out is not td
    assert all(v.dtype == rlpipe.float64 for v in leaves(out).values())
    assert_leaves_equal(out, map_leaves(td, lambda x: x.to(rlpipe.float64)))
    assert td["idx"].dtype == rlpipe.int64
    assert out.batch_size == td.batch_size


def test_to_cpu_and_cpu():
    td = make_td()
    for out in (td.to("cpu"), td.to(rlpipe.device("cpu")), td.cpu()):
        assert out.device == rlpipe.device("cpu")
        assert out["next"].device == rlpipe.device("cpu")
        assert_leaves_equal(out, leaves(td))
    assert td.device is None


def test_numpy():
    td = make_td()
    d = td.numpy()
    assert type(d) is dict and type(d["next"]) is dict
    assert isinstance(d["obs"], np.ndarray) and isinstance(d["next"]["reward"], np.ndarray)
    np.testing.assert_array_equal(d["obs"], arr(td["obs"]))
    assert d["idx"].dtype == np.int64 and d["next"]["done"].dtype == np.bool_


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_to_cuda_and_back():
    td = make_td()
    gpu = td.to("cuda")
    assert gpu.device == rlpipe.device("cuda:0")
    assert all(v.device == rlpipe.device("cuda:0") for v in leaves(gpu).values())
    assert_leaves_equal(gpu.cpu(), leaves(td))
    assert_leaves_equal(gpu[1:], map_leaves(td, lambda x: x[1:]))


# ----------------------------------------------------------------------------------------------
# memmap and checkpoints


def _backed_by_memmap(t):
    a = t.numpy()
    while isinstance(a, np.ndarray):
        if isinstance(a, np.memmap):
            return True
        a = a.base
    return False


def test_memmap_inplace_and_load(tmp_path):
    td = make_td()
    ref = {k: v.clone() for k, v in leaves(td).items()}
    assert td.memmap_(tmp_path) is td
    assert (tmp_path / "meta.json").exists()
    assert (tmp_path / "obs.memmap").exists()
    assert (tmp_path / "next" / "reward.memmap").exists()
    assert all(_backed_by_memmap(v) for v in leaves(td).values())
    assert_leaves_equal(td, ref)

    loaded = TensorDict.load_memmap(tmp_path)
    assert isinstance(loaded, TensorDict)
    assert loaded.batch_size == td.batch_size and loaded["next"].batch_size == td["next"].batch_size
    assert_leaves_equal(loaded, ref)
    assert all(_backed_by_memmap(v) for v in leaves(loaded).values())


def test_load_memmap_of_a_nested_directory(tmp_path):
    # documented: TensorDict.load_memmap("./saved_td/nested") loads the nested tensordict alone
    td = make_td()
    td.memmap_(tmp_path)
    nested = TensorDict.load_memmap(tmp_path / "next")
    assert isinstance(nested, TensorDict) and nested.batch_size == S(3, 4)
    assert_leaves_equal(nested, leaves(td["next"]))


def test_is_memmap(tmp_path):
    td = make_td()
    assert not td.is_memmap()
    td.memmap_(tmp_path)
    assert td.is_memmap()
    assert TensorDict.load_memmap(tmp_path).is_memmap()


def test_memmap_writes_reach_the_files(tmp_path):
    td = make_td()
    td.memmap_(tmp_path)
    td.set_("obs", rlpipe.full((3, 4, 2), 9.0))
    td["next", "reward"][0] = 5.0
    loaded = TensorDict.load_memmap(tmp_path)
    np.testing.assert_array_equal(arr(loaded["obs"]), np.full((3, 4, 2), 9.0, dtype=np.float32))
    np.testing.assert_array_equal(arr(loaded["next", "reward"][0]), np.full((4, 1), 5.0, dtype=np.float32))


def test_memmap_locks_the_tensordict(tmp_path):
    td = make_td()
    td.memmap_(tmp_path)
    with pytest.raises(RuntimeError, match="locked"):
        td.set("new", rlpipe.zeros(3, 4))
    with pytest.raises(RuntimeError, match="locked"):
        del td["obs"]
    assert set(td.keys()) == {"obs", "idx", "next"}
    assert td.is_locked


def test_memmap_out_of_place(tmp_path):
    td = make_td()
    out = td.memmap(tmp_path)
    assert out is not td and out.is_memmap() and not td.is_memmap()
    assert_leaves_equal(out, leaves(td))
    assert_leaves_equal(TensorDict.load_memmap(tmp_path), leaves(td))


def test_load_memmap_missing_directory(tmp_path):
    with pytest.raises((FileNotFoundError, RuntimeError), match="nowhere"):
        TensorDict.load_memmap(tmp_path / "nowhere")


def test_save_load_roundtrip(tmp_path):
    td = make_td()
    path = tmp_path / "td.rlp"
    rlpipe.save(td, path)
    out = rlpipe.load(path)
    assert isinstance(out, TensorDict)
    assert out.batch_size == td.batch_size and out.device == td.device
    assert isinstance(out["next"], TensorDict) and out["next"].batch_size == td["next"].batch_size
    assert list(out.keys(True)) == list(td.keys(True))
    assert_leaves_equal(out, leaves(td))


def test_save_load_inside_a_dict(tmp_path):
    td = TensorDict({"a": rlpipe.zeros(2)}, batch_size=[2], device="cpu")
    path = tmp_path / "ckpt.rlp"
    rlpipe.save({"data": td, "step": 3}, path)
    out = rlpipe.load(path)
    assert out["step"] == 3 and isinstance(out["data"], TensorDict)
    assert out["data"].device == rlpipe.device("cpu")
    assert_leaves_equal(out["data"], leaves(td))


# ----------------------------------------------------------------------------------------------
# repr


def test_repr_structure():
    td = TensorDict({"act": rlpipe.zeros(3, dtype=rlpipe.int64),
                     "next": {"reward": rlpipe.zeros(3, 1, dtype=rlpipe.float64)}}, batch_size=[3])
    raw = repr(td).splitlines()
    assert raw == [
        "TensorDict(",
        "    fields={",
        "        act: Tensor(shape=rlpipe.Size([3]), device=cpu, dtype=rlpipe.int64, is_shared=False),",
        "        next: TensorDict(",
        "            fields={",
        ("                reward: Tensor(shape=rlpipe.Size([3, 1]), device=cpu, dtype=rlpipe.float64, "
         "is_shared=False)},"),
        "            batch_size=rlpipe.Size([3]),",
        "            device=None,",
        "            is_shared=False)},",
        "    batch_size=rlpipe.Size([3]),",
        "    device=None,",
        "    is_shared=False)",
    ]
    assert str(td) == repr(td)


def test_repr_lists_fields_sorted_by_key():
    # tensordict's _td_fields joins sorted(strs): fields print in key order, not insertion order
    td = TensorDict({"obs": rlpipe.zeros(3, 4), "act": rlpipe.zeros(3)}, batch_size=[3])
    lines = [line.strip() for line in repr(td).splitlines()]
    assert lines[2].startswith("act: Tensor(") and lines[3].startswith("obs: Tensor(")


def test_repr_with_device_and_empty():
    td = TensorDict({}, batch_size=[2], device="cpu")
    text = repr(td)
    assert text.splitlines()[0] == "TensorDict("
    assert "fields={\n    }" in text or "fields={}" in text.replace("\n", "").replace(" ", "")
    assert "batch_size=rlpipe.Size([2])" in text
    assert "device=cpu" in text


# ----------------------------------------------------------------------------------------------
# comparisons


def test_eq_returns_tensordict_of_bools():
    td = make_td()
    eq = td == td.clone()
    assert isinstance(eq, TensorDict) and eq.batch_size == td.batch_size
    assert all(v.dtype == rlpipe.bool for v in leaves(eq).values())
    assert eq["obs"].shape == td["obs"].shape
    assert eq.all() is True
    assert (td != td.clone()).any() is False
    other = td.clone()
    other["obs"][0, 0, 0] = 123.0
    eq = td == other
    assert eq.all() is False and eq.any() is True
    assert bool(eq["obs"][0, 0, 0]) is False and bool(eq["obs"][1].all())


def test_eq_with_scalar_and_dim_reductions():
    td = make_td().zero_()
    eq = td == 0
    assert isinstance(eq, TensorDict) and eq.all() is True
    assert (td != 0).any() is False


def test_all_any_with_dim():
    td = make_td().zero_()
    per_row = (td == 0).all(dim=1)
    assert isinstance(per_row, TensorDict) and per_row.batch_size == S(3)
    assert per_row["obs"].shape == S(3, 2)
    per_col = (td == 0).any(dim=0)
    assert isinstance(per_col, TensorDict) and per_col.batch_size == S(4)
    assert per_col["next", "reward"].shape == S(4, 1)
    with pytest.raises(RuntimeError, match="dim must be greater than or equal to -tensordict.batch_dims"):
        td.all(dim=2)


def test_eq_with_mismatched_keys():
    td = make_td()
    with pytest.raises(KeyError):
        td == td.exclude("obs")  # noqa: B015


# ----------------------------------------------------------------------------------------------
# property-based


KEY = st.sampled_from(["a", "b", "c", "obs", "rew", "x_1"])
FEATURE = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
BATCH = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def structures(draw, depth=0):
    """{key: feature-shape tuple or nested structure}, depth <= 2, 1-3 entries per level."""
    keys = draw(st.lists(KEY, min_size=1, max_size=3, unique=True))
    out = {}
    for key in keys:
        if depth < 2 and draw(st.booleans()):
            out[key] = draw(structures(depth=depth + 1))
        else:
            out[key] = draw(FEATURE)
    return out


def build(structure, batch, rng):
    out = {}
    for key, spec in structure.items():
        if isinstance(spec, dict):
            out[key] = build(spec, batch, rng)
        else:
            out[key] = rlpipe.tensor(rng.standard_normal((*batch, *spec)).astype(np.float32))
    return out


@st.composite
def tensordicts(draw, min_dims=0):
    batch = draw(st.lists(st.integers(1, 4), min_size=min_dims, max_size=3).map(tuple))
    structure = draw(structures())
    seed = draw(st.integers(0, 2**16))
    return TensorDict(build(structure, batch, np.random.default_rng(seed)), batch_size=list(batch))


@st.composite
def batch_indices(draw, batch):
    n = draw(st.integers(1, len(batch)))
    index = []
    for size in batch[:n]:
        if draw(st.booleans()):
            index.append(draw(st.integers(-size, size - 1)))
        else:
            start = draw(st.none() | st.integers(-size, size))
            stop = draw(st.none() | st.integers(-size, size))
            step = draw(st.none() | st.integers(1, 3))
            index.append(slice(start, stop, step))
    return tuple(index) if n > 1 or draw(st.booleans()) else index[0]


PROPS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(data=st.data())
def test_prop_indexing_matches_per_leaf(data):
    td = data.draw(tensordicts(min_dims=1))
    index = data.draw(batch_indices(tuple(td.batch_size)))
    out = td[index]
    expected_batch = rlpipe.zeros(*td.batch_size)[index].shape
    assert out.batch_size == expected_batch
    assert_leaves_equal(out, map_leaves(td, lambda x: x[index]))


@PROPS
@given(data=st.data())
def test_prop_stack_unbind_roundtrip(data):
    first = data.draw(tensordicts())
    k = data.draw(st.integers(1, 3))
    tds = [first] + [first.apply(lambda x, i=i: x + float(i + 1)) for i in range(k - 1)]
    nb = first.batch_dims
    dim = data.draw(st.integers(-(nb + 1), nb))
    stacked = rlpipe.stack(tds, dim)
    pos = dim if dim >= 0 else dim + nb + 1
    expected = list(first.batch_size)
    expected.insert(pos, k)
    assert stacked.batch_size == S(*expected)
    parts = stacked.unbind(dim)
    assert len(parts) == k
    for part, original in zip(parts, tds):
        assert part.batch_size == original.batch_size
        assert_leaves_equal(part, leaves(original))


def _factorize(n, draw):
    dims = []
    while n > 1:
        divisors = [d for d in range(2, n + 1) if n % d == 0]
        d = draw(st.sampled_from(divisors))
        dims.append(d)
        n //= d
    ones = draw(st.integers(0, 1))
    dims += [1] * ones
    return draw(st.permutations(dims)) if dims else []


@PROPS
@given(data=st.data())
def test_prop_reshape_roundtrip(data):
    td = data.draw(tensordicts())
    shape = list(_factorize(td.numel(), data.draw))
    if shape and data.draw(st.booleans()):
        shape[data.draw(st.integers(0, len(shape) - 1))] = -1
    out = td.reshape(*shape) if shape else td.reshape(())
    target = rlpipe.zeros(*td.batch_size).reshape(*shape).shape if shape else S()
    assert out.batch_size == target
    nb = td.batch_dims
    assert_leaves_equal(out, map_leaves(td, lambda x: x.reshape((*target, *x.shape[nb:]))))
    back = out.reshape(*td.batch_size) if nb else out.reshape(())
    assert back.batch_size == td.batch_size
    assert_leaves_equal(back, leaves(td))


@PROPS
@given(td=tensordicts(), sep=st.sampled_from([".", "/", "::"]))
def test_prop_flatten_unflatten_keys_roundtrip(td, sep):
    flat = td.flatten_keys(sep)
    expected = {sep.join(k) for k in leaves(td)}
    assert set(flat.keys()) == expected
    assert set(flat.keys(include_nested=True)) == expected       # no nesting left
    back = flat.unflatten_keys(sep)
    assert_leaves_equal(back, leaves(td))
    assert back.batch_size == td.batch_size
