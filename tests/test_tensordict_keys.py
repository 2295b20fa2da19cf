"""Nested keys: ``unravel_key`` and ``unravel_key_list`` against tensordict 0.14's documented examples,
``unravel_key_to_tuple``, and the one ``KeysView`` that TensorDict and Composite share."""
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.envs.specs import Composite, Unbounded
from rlpipe.tensordict import unravel_key, unravel_key_list, unravel_key_to_tuple
from rlpipe.tensordict.keys import KeysView


@pytest.mark.parametrize(("key", "expected"), [
    ("a", "a"),                              # tensordict's docstring examples
    (("a",), "a"),
    (("a", ("b",)), ("a", "b")),
    ((("a", ("b",))), ("a", "b")),
    (("a", ("b", ("c",))), ("a", "b", "c")),
    ((("a",), "b"), ("a", "b")),
])
def test_unravel_key_matches_tensordict(key, expected):
    assert unravel_key(key) == expected


def test_unravel_key_equal_keys_compare_equal():
    assert unravel_key(("a",)) == unravel_key("a")
    assert unravel_key(("a", ("b",))) == unravel_key((("a",), "b"))


def test_unravel_key_list_matches_tensordict():
    assert unravel_key_list(["a", ("b",), ("c", ("d",))]) == ["a", "b", ("c", "d")]


@pytest.mark.parametrize("key", [1, None, ("a", 1), (), ("a", ())])
def test_unravel_key_rejects_what_tensordict_does_not_unravel(key):
    # tensordict gives () or raises RuntimeError here; rlpipe raises TypeError (the project's rule)
    with pytest.raises(TypeError):
        unravel_key(key)


@pytest.mark.parametrize(("key", "expected"), [
    ("a", ("a",)),
    (("a",), ("a",)),
    (("a", ("b", ("c",))), ("a", "b", "c")),
    ((), ()),
])
def test_unravel_key_to_tuple(key, expected):
    assert unravel_key_to_tuple(key) == expected


@pytest.mark.parametrize("key", [1, ("a", 1), ("a", None)])
def test_unravel_key_to_tuple_rejects_non_keys(key):
    with pytest.raises(TypeError, match="strings or tuples of strings"):
        unravel_key_to_tuple(key)


def test_public_paths():
    assert rlpipe.tensordict.unravel_key is rlpipe.tensordict.nn.unravel_key
    assert rlpipe.tensordict.unravel_key_list is rlpipe.tensordict.nn.unravel_key_list


def test_one_keys_view_for_tensordict_and_composite():
    td = TensorDict({"a": rlpipe.zeros(2), "n": {"b": rlpipe.zeros(2)}}, batch_size=[2])
    spec = Composite(a=Unbounded(shape=(2,)), n=Composite(b=Unbounded(shape=(2,)), shape=(2,)), shape=(2,))
    for container in (td, spec):
        keys = container.keys(include_nested=True)
        assert isinstance(keys, KeysView)
        assert sorted(map(str, keys)) == sorted(map(str, ["a", ("n", "b"), "n"]))  # (each in its own order)
        assert len(keys) == 3 and ("n", "b") in keys and "n" in keys
        assert "n" not in container.keys(include_nested=True, leaves_only=True)
    # their own membership rules: tensordict raises on a nested key without include_nested, a spec answers False
    with pytest.raises(TypeError, match="include_nested=True"):
        ("n", "b") in td.keys()  # noqa: B015, SIM118
    assert ("n", "b") not in spec.keys()  # noqa: SIM118
    assert 1 not in spec.keys()  # noqa: SIM118


def test_tensordict_keys_repr_is_tensordicts():
    td = TensorDict({"a": rlpipe.zeros(2)}, batch_size=[2])
    assert repr(td.keys()) == "_TensorDictKeysView(['a'],\n    include_nested=False,\n    leaves_only=False)"
