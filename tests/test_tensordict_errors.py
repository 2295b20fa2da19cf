"""TensorDict error types and messages: tensordict 0.14.3's type and wording, with the detail
tensordict's later messages add (the key, the keys of each TensorDict). Each failed call leaves the
TensorDict as it was."""
import re

import pytest

import rlpipe
from rlpipe.tensordict import TensorDict


@pytest.fixture(autouse=True)
def _rlpipe_names(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)


def test_batch_mismatch_names_the_key():
    # tensordict 0.14.3: "batch dimension mismatch, got self.batch_size=torch.Size([3]) and
    # value.shape=torch.Size([2])." (later versions add " for key 'b'")
    with pytest.raises(RuntimeError, match=re.escape("batch dimension mismatch, got self.batch_size=rlpipe.Size([3]) "
                                                     "and value.shape=rlpipe.Size([2]) for key 'b'.")):
        TensorDict(a=rlpipe.zeros(3), b=rlpipe.zeros(2), batch_size=[3])
    td = TensorDict(a=rlpipe.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=re.escape("value.shape=rlpipe.Size([4]) for key 'c'.")):
        td["c"] = rlpipe.zeros(4)
    with pytest.raises(RuntimeError, match=re.escape("value.shape=rlpipe.Size([4]) for key ('x', 'y').")):
        td["x", "y"] = rlpipe.zeros(4)
    assert list(td.keys()) == ["a"]  # no nested TensorDict "x" left behind
    td["n"] = TensorDict(b=rlpipe.zeros(3, 2), batch_size=[3, 2])
    with pytest.raises(RuntimeError, match=re.escape("got self.batch_size=rlpipe.Size([3, 2]) and "
                                                     "value.shape=rlpipe.Size([3, 5]) for key ('n', 'm', 'c').")):
        td["n", "m", "c"] = rlpipe.zeros(3, 5)  # fits td's batch [3], not n's [3, 2] that m would take
    assert set(td.keys(True, True)) == {"a", ("n", "b")}


def test_batch_mismatch_of_a_number_says_why_it_became_a_tensor():
    td = TensorDict(a=rlpipe.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=re.escape(
            "value.shape=rlpipe.Size([]) for key 'n'. The int became a tensor of shape []: set_non_tensor stores "
            "it as it is (NonTensorData).")):
        td["n"] = 1
    assert list(td.keys()) == ["a"]


def test_missing_nested_entry_under_a_tensor():
    td = TensorDict({"a": rlpipe.zeros(())}, [])
    # tensordict 0.14.3: ValueError "Expected a TensorDictBase instance but got <class 'torch.Tensor'> instead ..."
    with pytest.raises(ValueError, match=re.escape(
            "Expected a TensorDictBase instance but got Tensor instead for key ('b',): 'a' is a Tensor, not a "
            "tensordict, so it has no entry 'b'")):
        td["a", "b"]
    td = TensorDict({"n": {"a": rlpipe.zeros(())}}, [])
    with pytest.raises(ValueError, match=re.escape("('n', 'a') is a Tensor, not a tensordict, so it has no entry "
                                                   "('b', 'c')")):
        td["n", "a", "b", "c"]


def test_cat_and_stack_name_the_tensordicts_whose_keys_differ():
    td0 = TensorDict(a=rlpipe.zeros(2), batch_size=[2])
    td1 = TensorDict(a=rlpipe.zeros(2), b=rlpipe.zeros(2), batch_size=[2])
    with pytest.raises(KeyError, match=re.escape("cat: the TensorDicts have different keys: tensordict 2 has keys "
                                                 "['a', 'b'] but tensordict 0 has keys ['a']")):
        rlpipe.cat([td0, td0, td1])
    with pytest.raises(KeyError, match=re.escape("stack: the TensorDicts have different keys: tensordict 1 has keys "
                                                 "['a'] but tensordict 0 has keys ['a', 'b']")):
        rlpipe.stack([td1, td0])


def test_pop_of_a_missing_key():
    td = TensorDict(a=rlpipe.zeros(2), batch_size=[2])
    # tensordict 0.14.3's sentence first, then the type and the keys
    with pytest.raises(KeyError) as info:
        td.pop("zz")
    assert info.value.args == ("You are trying to pop key `zz` which is not in dict without providing default value: "
                               "key \"zz\" not found in TensorDict with keys ['a']",)
    assert td.pop("zz", None) is None and list(td.keys()) == ["a"]


@pytest.mark.parametrize("where", ["td", "sub_td"])
def test_a_tensordict_cannot_be_set_inside_itself(where):
    td = TensorDict({"a": rlpipe.zeros(3, 2)}, [3, 2])
    target = td if where == "td" else td._get_sub_tensordict(0)
    with pytest.raises(ValueError, match=re.escape("Cannot set a tensordict inside itself (key 'self')")):
        target["self"] = target
    with pytest.raises(ValueError, match=re.escape("Cannot set a tensordict inside itself (key ('nested', 'self'))")):
        target.set(("nested", "self"), target)
    assert set(td.keys()) == {"a"}


def test_a_tensordict_cannot_be_set_inside_one_it_holds():
    td = TensorDict({"n": {"m": {"x": rlpipe.zeros(2)}}}, [2])
    inner = td["n"]
    with pytest.raises(ValueError, match="Cannot set a tensordict inside itself"):
        td.set(("n", "m", "loop"), inner)  # n would hold m, which would hold n
    assert set(td.keys(True, True)) == {("n", "m", "x")}
    td.set(("n", "copy"), inner.clone())  # a copy is fine
    td.set("other", TensorDict({"n": td["n", "m"].clone()}, [2]))
    assert ("n", "copy", "m", "x") in td.keys(True, True)


def test_view_with_a_minus_one_that_cannot_be_filled():
    td = TensorDict(a=rlpipe.zeros(6), batch_size=[6])
    # tensordict 0.14.3 raises AssertionError("invalid shape") here (and "only one dimension can be inferred")
    with pytest.raises(AssertionError, match=re.escape("invalid shape [4, -1] for a batch of 6")):
        td.view(4, -1)
    with pytest.raises(AssertionError, match="^only one dimension can be inferred$"):
        td.reshape(-1, -1)
    with pytest.raises(RuntimeError, match=re.escape("shape '[4, 2]' is invalid for input of size 6")):
        td.view(4, 2)  # torch's error, as tensordict 0.14.3
    assert td.view(2, -1).batch_size == rlpipe.Size([2, 3]) and td.batch_size == rlpipe.Size([6])
