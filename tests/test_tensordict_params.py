"""TensorDictParams (tensordict 0.14.3's tensordict.nn.TensorDictParams): a Module registering a
TensorDict's leaves as its parameters and buffers. Expected names, classes and orders were
recorded from tensordict 0.14.3 running the same code (peer venv)."""
import pickle

import pytest

import rlpipe
from rlpipe import nn
from rlpipe.nn import Buffer, Parameter
from rlpipe.tensordict import LazyStackedTensorDict, TensorDict
from rlpipe.tensordict.nn import TensorDictParams


def _params():
    return TensorDictParams(TensorDict(a=rlpipe.ones(2), b={"c": rlpipe.zeros(3), "n": rlpipe.tensor([1, 2])}))


def test_floating_leaves_become_parameters_and_the_others_buffers():
    td = TensorDict(a=rlpipe.ones(2), b={"c": rlpipe.zeros(3), "n": rlpipe.tensor([1, 2])})
    p = TensorDictParams(td)
    assert [n for n, _ in p.named_parameters()] == ["a", "b.c"]
    assert [n for n, _ in p.named_buffers()] == ["b.n"]
    assert type(td["a"]) is Parameter and type(td["b", "n"]) is Buffer  # converted in the TensorDict given
    assert p["a"] is dict(p.named_parameters())["a"] and type(p["b"]) is TensorDict


def test_no_convert_keeps_parameters_and_makes_the_rest_buffers():
    kept = Parameter(rlpipe.ones(2))
    graph = rlpipe.ones(2).requires_grad_() * 2
    p = TensorDictParams(TensorDict(a=kept, f=rlpipe.ones(2), g=graph), no_convert=True)
    assert [n for n, _ in p.named_parameters()] == ["a"] and [n for n, _ in p.named_buffers()] == ["f", "g"]
    assert p["a"] is kept and p["g"] is graph  # a tensor recording gradients keeps its graph
    assert p.no_convert is True


def test_a_parent_module_sees_them_and_an_optimizer_trains_them():
    class Holder(nn.Module):
        def __init__(self, params):
            super().__init__()
            self.params = params
    holder = Holder(_params())
    assert [n for n, _ in holder.named_parameters()] == ["params.a", "params.b.c"]
    holder.params["other"] = rlpipe.randn(3)  # set later: converted and registered
    assert isinstance(holder.params["other"], Parameter)
    assert [n for n, _ in holder.named_parameters()][-1] == "params.other"
    opt = rlpipe.optim.SGD(holder.parameters(), lr=0.5)
    (holder.params["a"] * 2).sum().backward()
    opt.step()
    assert holder.params["a"].tolist() == [0.0, 0.0]  # 1 - 0.5 * 2


def test_state_dict_round_trip_in_key_order():
    p = _params()
    assert list(p.state_dict()) == ["a", "b.c", "b.n"]
    q = _params()
    q.load_state_dict({"a": rlpipe.full((2,), 3.0), "b.c": rlpipe.full((3,), 4.0), "b.n": rlpipe.tensor([7, 8])})
    assert q["a"].tolist() == [3.0, 3.0] and q["b", "n"].tolist() == [7, 8]
    assert isinstance(q["a"], Parameter)  # copied in place
    with pytest.raises(RuntimeError, match='Unexpected key.*"zzz"'):
        q.load_state_dict({**p.state_dict(), "zzz": rlpipe.ones(1)})
    with pytest.raises(RuntimeError, match='Missing key.*"b.n"'):
        q.load_state_dict({"a": rlpipe.ones(2), "b.c": rlpipe.ones(3)})
    with pytest.raises(RuntimeError, match="size mismatch for a"):
        q.load_state_dict({**p.state_dict(), "a": rlpipe.ones(5)})
    # as torch's Module.load_state_dict: the keys that fit are copied before the error is raised
    assert q["a"].tolist() == [1.0, 1.0] and q["b", "c"].tolist() == [0.0, 0.0, 0.0]


def test_methods_that_make_new_tensordicts_return_plain_ones():
    p = _params()
    assert type(p.apply(lambda x: x + 1)) is TensorDict and type(p.detach()) is TensorDict
    assert type(p.data) is TensorDict and type(p == p) is TensorDict and (p == p).all()
    assert type(rlpipe.stack([p, p])) is TensorDict and rlpipe.stack([p, p]).batch_size == (2,)
    assert p.batch_size == () and sorted(p.keys()) == ["a", "b"]


def test_apply_inplace_writes_the_leaves():
    p = _params()
    a = p["a"]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        p.apply(lambda x: x * 0 + 5, inplace=True)  # as torch: parameters are written under no_grad
    with rlpipe.no_grad():
        assert p.apply(lambda x: x * 0 + 5, inplace=True) is p
    assert p["a"] is a and a.tolist() == [5.0, 5.0] and p["b", "n"].tolist() == [5, 5]
    assert [n for n, _ in p.named_parameters()] == ["a", "b.c"]


def test_clone_copies_into_new_parameters_keeping_ties():
    shared = Parameter(rlpipe.ones(2))
    p = TensorDictParams(TensorDict(x=shared, y=shared, n=rlpipe.tensor([1])))
    c = p.clone()
    assert type(c) is TensorDictParams and c["x"] is not shared and isinstance(c["x"], Parameter)
    assert c["x"] is c["y"] and isinstance(c["n"], Buffer)
    c["x"].data.fill_(9.0)
    assert shared.tolist() == [1.0, 1.0]


def test_to_and_a_parent_modules_double():
    p = _params()
    moved = p.to(rlpipe.float64)
    assert type(moved) is TensorDictParams and moved["a"].dtype == rlpipe.float64 and p["a"].dtype == rlpipe.float32
    holder = nn.Module()
    holder.p = p
    a = p["a"]
    holder.double()
    assert p["a"] is a and a.dtype == rlpipe.float64 and p["b", "n"].dtype == rlpipe.int64
    assert p._param_td["a"] is dict(p.named_parameters())["a"]


def test_lock_refuses_writes_and_leaves_the_object_usable():
    p = _params().lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict"):
        p["z"] = rlpipe.ones(1)
    assert "z" not in p.keys() and p.is_locked
    p.unlock_()
    p.set("z", rlpipe.ones(1))
    assert [n for n, _ in p.named_parameters()] == ["a", "b.c", "z"]
    assert isinstance(p.pop("z"), Parameter) and [n for n, _ in p.named_parameters()] == ["a", "b.c"]


def test_locked_content_is_written_through_its_lock():
    td = TensorDict(a=rlpipe.ones(2))
    p = TensorDictParams(td, lock=True)
    assert td.is_locked and not p.is_locked
    p["b"] = rlpipe.zeros(1)
    assert td.is_locked and "b" in td.keys() and [n for n, _ in p.named_parameters()] == ["a", "b"]


def test_functional_call_through_to_module():
    net = nn.Linear(2, 1)
    p = TensorDict.from_module(net, as_module=True)
    zeros = p.data.apply(rlpipe.zeros_like)
    with zeros.to_module(net):
        assert net(rlpipe.ones(1, 2)).tolist() == [[0.0]]
    assert net.weight is p["weight"]


def test_bad_inputs_are_refused():
    with pytest.raises(TypeError, match=r"parameters cannot be passed along with extra keyword arguments.*\['b'\]"):
        TensorDictParams(TensorDict(a=rlpipe.ones(1)), b=rlpipe.ones(1))
    with pytest.raises(TypeError, match="TensorDictParams expects a TensorDict or a dict, got list"):
        TensorDictParams([rlpipe.ones(1)])
    lazy = LazyStackedTensorDict(TensorDict(x=rlpipe.ones(1)), TensorDict(x=rlpipe.ones(2)))
    with pytest.raises(RuntimeError, match="Using a LazyStackedTensorDict within a TensorDictParams"):
        TensorDictParams(TensorDict(stack=lazy, batch_size=[2]))


def test_keyword_form_and_pickling():
    p = TensorDictParams(a=rlpipe.ones(2))
    assert [n for n, _ in p.named_parameters()] == ["a"]
    back = pickle.loads(pickle.dumps(p))
    assert type(back) is TensorDictParams and back["a"].tolist() == [1.0, 1.0]
    assert back["a"] is dict(back.named_parameters())["a"]
