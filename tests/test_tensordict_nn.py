"""TensorDictModule / TensorDictSequential (tensordict.nn 0.14 behaviour) and rlpipe.testing.

Expected values are computed by hand (``x @ W.T + b`` in NumPy from the module's own parameters),
expected key lists and reprs are written out from tensordict's documented behaviour, and the
tolerance tables are torch.testing's.
"""
import re

import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.tensordict import TensorDict
from rlpipe.tensordict.nn import TensorDictModule, TensorDictSequential, WrapModule
from rlpipe.testing import assert_allclose_td, assert_close


def keys(td, **kw):
    return list(td.keys(**kw))


def np_(t):
    return t.detach().numpy()


def linear_by_hand(x, lin):
    return np_(x) @ np_(lin.weight).T + np_(lin.bias)


@pytest.fixture(autouse=True)
def seeded():
    rlpipe.manual_seed(0)


# ---------------------------------------------------------------------------------------------
# TensorDictModule
# ---------------------------------------------------------------------------------------------
def test_module_writes_linear_output_in_place():
    lin = nn.Linear(3, 2)
    module = TensorDictModule(lin, in_keys=["obs"], out_keys=["action"])
    obs = rlpipe.randn(4, 3)
    td = TensorDict({"obs": obs}, batch_size=[4])
    out = module(td)
    assert out is td  # in place, the same tensordict comes back
    assert keys(td) == ["obs", "action"]
    assert td.get("obs") is obs
    action = td.get("action")
    assert action.shape == rlpipe.Size([4, 2]) and action.dtype is rlpipe.float32
    np.testing.assert_allclose(np_(action), linear_by_hand(obs, lin), rtol=1e-6, atol=1e-6)


def test_module_is_an_nn_module_over_its_child():
    lin = nn.Linear(3, 2)
    module = TensorDictModule(lin, "obs", "action")
    assert isinstance(module, nn.Module)
    assert module.in_keys == ["obs"] and module.out_keys == ["action"]  # a single key becomes a list
    assert module.module is lin
    assert [p is q for p, q in zip(module.parameters(), [lin.weight, lin.bias])] == [True, True]
    assert list(module.state_dict()) == ["module.weight", "module.bias"]
    assert list(dict(module.named_modules())) == ["", "module"]
    # tensordict forwards unknown public attributes to the wrapped module
    assert module.weight is lin.weight and module.out_features == 2
    assert not hasattr(module, "_private_thing")  # private names are not forwarded


def test_module_state_dict_round_trip_and_to_double():
    src = TensorDictModule(nn.Linear(3, 2), ["obs"], ["action"])
    dst = TensorDictModule(nn.Linear(3, 2), ["obs"], ["action"])
    dst.load_state_dict(src.state_dict())
    obs = rlpipe.randn(5, 3)
    a = src(TensorDict(obs=obs, batch_size=[5]))["action"]
    b = dst(TensorDict(obs=obs, batch_size=[5]))["action"]
    np.testing.assert_array_equal(np_(a), np_(b))

    weight = src.module.weight
    assert src.to(rlpipe.float64) is src
    assert src.module.weight is weight and weight.dtype is rlpipe.float64  # parameters keep their identity
    assert all(v.dtype is rlpipe.float64 for v in src.state_dict().values())
    out = src(TensorDict(obs=obs.double(), batch_size=[5]))["action"]
    assert out.dtype is rlpipe.float64
    np.testing.assert_allclose(np_(out), linear_by_hand(obs.double(), src.module), rtol=1e-12)
    assert src.double().float().module.bias.dtype is rlpipe.float32


def test_module_nested_keys_read_and_write():
    lin = nn.Linear(2, 3)
    module = TensorDictModule(lin, in_keys=[("agent", "obs")], out_keys=[("agent", "policy", "logits")])
    obs = rlpipe.randn(2, 2)
    td = TensorDict({"agent": {"obs": obs}}, batch_size=[2])
    module(td)
    assert keys(td, include_nested=True, leaves_only=True) == [("agent", "obs"), ("agent", "policy", "logits")]
    np.testing.assert_allclose(np_(td["agent", "policy", "logits"]), linear_by_hand(obs, lin), rtol=1e-6,
                               atol=1e-6)
    # keys are unravelled as tensordict's unravel_key does
    m = TensorDictModule(lambda x: x, in_keys=[("a", ("b", "c")), ("d",)], out_keys=("e", "f"))
    assert m.in_keys == [("a", "b", "c"), "d"] and m.out_keys == [("e", "f")]


def test_module_multiple_inputs_and_outputs():
    def split(x, y):
        return x + y, x * y, x - y

    module = TensorDictModule(split, in_keys=["x", ("n", "y")], out_keys=["sum", ("n", "prod"), "diff"])
    x, y = rlpipe.tensor([1.0, 2.0]), rlpipe.tensor([3.0, 5.0])
    td = module(TensorDict({"x": x, "n": {"y": y}}, batch_size=[2]))
    assert td["sum"].tolist() == [4.0, 7.0]
    assert td["n", "prod"].tolist() == [3.0, 10.0]
    assert td["diff"].tolist() == [-2.0, -3.0]
    # "_" discards an output
    td = TensorDictModule(split, ["x", ("n", "y")], ["_", "p", "_"])(TensorDict({"x": x, "n": {"y": y}}, [2]))
    assert sorted(map(str, td.keys(include_nested=True))) == ["('n', 'y')", "n", "p", "x"]
    # a dict returned by the module is read by out-key
    td = TensorDictModule(lambda x: {"b": x * 2, "a": x + 1}, ["x"], ["a", "b"])(TensorDict(x=x, batch_size=[2]))
    assert td["a"].tolist() == [2.0, 3.0] and td["b"].tolist() == [2.0, 4.0]


def test_module_dict_in_keys_map_to_keyword_arguments():
    def f(x, *, y):
        return x - y

    td = TensorDict({"1": rlpipe.tensor(5.0), "2": rlpipe.tensor(2.0)}, [])
    assert TensorDictModule(f, in_keys={"x": "1", "y": "2"}, out_keys=["z"])(td)["z"].item() == 3.0
    m = TensorDictModule(f, in_keys={"1": "x", "2": "y"}, out_keys=["z"], out_to_in_map=False)
    assert m.in_keys == ["1", "2"]
    assert m(td.copy())["z"].item() == 3.0


def test_module_gradients_flow_to_parameters():
    lin = nn.Linear(3, 2)
    module = TensorDictModule(lin, ["obs"], ["action"])
    obs = rlpipe.randn(4, 3)
    td = module(TensorDict(obs=obs, batch_size=[4]))
    action = td.get("action")
    assert action.requires_grad and action.grad_fn is not None
    (action * action).sum().backward()
    # d/dW sum((xW^T+b)^2) = 2 (xW^T+b)^T x ; d/db = 2 sum_rows(xW^T+b)
    y = linear_by_hand(obs, lin)
    np.testing.assert_allclose(np_(lin.weight.grad), 2 * y.T @ np_(obs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np_(lin.bias.grad), 2 * y.sum(0), rtol=1e-5, atol=1e-5)


def test_module_gradients_flow_through_a_sequence_to_the_input():
    l1, l2 = nn.Linear(3, 4), nn.Linear(4, 1)
    seq = TensorDictSequential(TensorDictModule(l1, ["obs"], ["hidden"]),
                               TensorDictModule(nn.Tanh(), ["hidden"], ["hidden"]),
                               TensorDictModule(l2, ["hidden"], ["value"]))
    obs = rlpipe.randn(5, 3, requires_grad=True)
    seq(TensorDict(obs=obs, batch_size=[5]))["value"].sum().backward()
    h = np.tanh(linear_by_hand(obs, l1))
    np.testing.assert_allclose(np_(l2.weight.grad), h.sum(0, keepdims=True), rtol=1e-5, atol=1e-5)
    dh = (1 - h ** 2) * np_(l2.weight)  # (5, 4)
    np.testing.assert_allclose(np_(l1.weight.grad), dh.T @ np_(obs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np_(obs.grad), dh @ np_(l1.weight), rtol=1e-5, atol=1e-5)


def test_module_tensordict_out_and_inplace():
    x = rlpipe.tensor([1.0, 2.0])
    module = TensorDictModule(lambda x: x + 1, ["x"], ["y"])
    td = TensorDict(x=x, batch_size=[2])
    dest = TensorDict({}, batch_size=[2])
    assert module(td, tensordict_out=dest) is dest
    assert keys(dest) == ["y"] and keys(td) == ["x"]
    fresh = TensorDictModule(lambda x: x + 1, ["x"], ["y"], inplace=False)(td)
    assert fresh is not td and keys(fresh) == ["y"] and fresh.batch_size == rlpipe.Size([])
    empty = TensorDictModule(lambda x: x + 1, ["x"], ["y"], inplace="empty")(td)
    assert empty is not td and keys(empty) == ["y"] and empty.batch_size == rlpipe.Size([2])
    with pytest.raises(ValueError, match="inplace"):
        TensorDictModule(lambda x: x, ["x"], ["y"], inplace="yes")


def test_module_method_and_kwargs():
    class Net(nn.Module):
        def shift(self, x, *, by):
            return x + by

    m = TensorDictModule(Net(), ["a"], ["b"], method="shift", method_kwargs={"by": 2})
    assert m(TensorDict(a=rlpipe.tensor(1.0)))["b"].item() == 3.0
    # extra keyword arguments of the call go to the module
    m = TensorDictModule(lambda x, scale=1.0: x * scale, ["a"], ["b"])
    assert m(TensorDict(a=rlpipe.tensor(2.0)), scale=3.0)["b"].item() == 6.0


def test_module_called_with_tensors_dispatches():
    lin = nn.Linear(3, 2)
    module = TensorDictModule(lin, in_keys=["obs"], out_keys=["action"])
    obs = rlpipe.randn(4, 3)
    np.testing.assert_allclose(np_(module(obs)), linear_by_hand(obs, lin), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np_(module(obs=obs)), linear_by_hand(obs, lin), rtol=1e-6, atol=1e-6)
    two = TensorDictModule(lambda a, b: (a + b, a - b), in_keys=["a", ("n", "b")], out_keys=["s", "d"])
    s, d = two(rlpipe.tensor(3.0), n_b=rlpipe.tensor(1.0))
    assert (s.item(), d.item()) == (4.0, 2.0)
    with pytest.raises(RuntimeError, match="Duplicated"):
        two(rlpipe.tensor(3.0), a=rlpipe.tensor(1.0))


def test_module_repr_matches_tensordict():
    module = TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
    assert repr(module) == ("TensorDictModule(\n"
                            "    module=Linear(in_features=3, out_features=2, bias=True),\n"
                            "    device=cpu,\n"
                            "    in_keys=['obs'],\n"
                            "    out_keys=['action'])")
    nested = TensorDictModule(nn.Sequential(nn.Linear(1, 1), nn.ReLU()), [("a", "b")], ["c"])
    assert repr(nested) == ("TensorDictModule(\n"
                            "    module=Sequential(\n"
                            "      (0): Linear(in_features=1, out_features=1, bias=True)\n"
                            "      (1): ReLU()\n"
                            "    ),\n"
                            "    device=cpu,\n"
                            "    in_keys=[('a', 'b')],\n"
                            "    out_keys=['c'])")
    assert TensorDictModule(lambda x: x, ["a"], ["b"]).device == rlpipe.device("cpu")


def test_module_missing_key_raises_key_error_naming_it():
    module = TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
    td = TensorDict({"observation": rlpipe.randn(4, 3)}, batch_size=[4])
    with pytest.raises(KeyError, match="'obs'"):
        module(td)
    assert keys(td) == ["observation"]  # nothing written
    nested = TensorDictModule(lambda x: x, in_keys=[("agent", "obs")], out_keys=["y"])
    with pytest.raises(KeyError, match=re.escape("('agent', 'obs')")):
        nested(TensorDict({"agent": {"pos": rlpipe.zeros(2)}}, [2]))
    # strict=True raises before the module is called
    calls = []
    strict = TensorDictModule(lambda x: calls.append(x), in_keys=["obs"], out_keys=[], strict=True)
    with pytest.raises(KeyError, match="'obs'"):
        strict(td)
    assert calls == []
    # strict=False (the default, as tensordict) passes None to a module that accepts it
    optional = TensorDictModule(lambda x=None: rlpipe.zeros(4) if x is None else x, ["obs"], ["y"])
    assert optional(td)["y"].tolist() == [0.0] * 4


def test_module_wrong_number_of_outputs():
    too_many = TensorDictModule(lambda x: (x, x + 1), in_keys=["x"], out_keys=["y"])
    with pytest.raises(RuntimeError, match=r"returned 2 values but there is 1 out_keys \(\['y'\]\)"):
        too_many(TensorDict(x=rlpipe.zeros(2), batch_size=[2]))
    too_few = TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y", "z"])
    td = TensorDict(x=rlpipe.zeros(2), batch_size=[2])
    with pytest.raises(RuntimeError, match=r"returned 1 value but there are 2 out_keys"):
        too_few(td)
    assert keys(td) == ["x"]


def test_module_bad_arguments():
    with pytest.raises(ValueError, match="in_keys must be"):
        TensorDictModule(nn.Identity(), in_keys=[1], out_keys=["y"])
    with pytest.raises(ValueError, match="out_keys must be"):
        TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=None)
    with pytest.raises(ValueError, match="not callable"):
        TensorDictModule(nn.Linear, in_keys=["x"], out_keys=["y"])  # the class, not an instance
    with pytest.raises(ValueError, match="not callable"):
        TensorDictModule(3, in_keys=["x"], out_keys=["y"])
    with pytest.raises(ValueError, match="extra"):
        TensorDictModule(nn.Identity(), ["x"], ["y"])(TensorDict(x=rlpipe.zeros(1)), rlpipe.zeros(1))


def test_module_batch_mismatch_of_output_is_reported_by_tensordict():
    module = TensorDictModule(lambda x: x.sum(0), ["x"], ["s"])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        module(TensorDict(x=rlpipe.zeros(4, 3), batch_size=[4]))


def test_module_select_out_keys():
    mod = TensorDictModule(lambda x, y: (x + 2, y + 2), in_keys=["a", "b"], out_keys=["c", "d"])
    assert mod.select_out_keys("d") is mod
    assert mod.out_keys == ["d"] and mod.out_keys_source == ["c", "d"]
    td = mod(TensorDict({"a": rlpipe.zeros(()), "b": rlpipe.ones(())}, []))
    assert keys(td) == ["a", "b", "d"] and td["d"].item() == 3.0
    assert mod(rlpipe.zeros(()), rlpipe.ones(())).item() == 3.0
    mod.reset_out_keys()
    assert keys(mod(TensorDict({"a": rlpipe.zeros(()), "b": rlpipe.ones(())}, []))) == ["a", "b", "c", "d"]
    with pytest.raises(ValueError):
        mod.select_out_keys("z")


# ---------------------------------------------------------------------------------------------
# TensorDictSequential
# ---------------------------------------------------------------------------------------------
def test_sequential_in_and_out_keys():
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"]),
        TensorDictModule(lambda y, z: y * z, in_keys=["y", "z"], out_keys=[("n", "w")]),
        TensorDictModule(lambda w, x: w - x, in_keys=[("n", "w"), "x"], out_keys=["y"]),
    )
    assert seq.in_keys == ["x", "z"]  # read from outside, in order, y and (n, w) are produced inside
    assert seq.out_keys == [("n", "w"), "y"]  # y is written twice: it counts at its last position
    assert isinstance(seq, nn.Module) and len(seq) == 3


def test_sequential_chains_values():
    l1, l2 = nn.Linear(3, 4), nn.Linear(4, 2)
    seq = TensorDictSequential(TensorDictModule(l1, ["obs"], ["hidden"]),
                               TensorDictModule(nn.ReLU(), ["hidden"], ["hidden"]),
                               TensorDictModule(l2, ["hidden"], ["action"]))
    obs = rlpipe.randn(6, 3)
    td = TensorDict(obs=obs, batch_size=[6])
    assert seq(td) is td
    expected = np.maximum(linear_by_hand(obs, l1), 0) @ np_(l2.weight).T + np_(l2.bias)
    np.testing.assert_allclose(np_(td["action"]), expected, rtol=1e-5, atol=1e-6)
    assert keys(td) == ["obs", "hidden", "action"]
    assert seq.in_keys == ["obs"] and seq.out_keys == ["hidden", "action"]
    np.testing.assert_allclose(np_(seq(obs)[1]), expected, rtol=1e-5, atol=1e-6)  # dispatch: (hidden, action)


def test_sequential_is_a_module_over_its_children():
    l1, l2 = nn.Linear(3, 4), nn.Linear(4, 2)
    m1, m2 = TensorDictModule(l1, ["obs"], ["h"]), TensorDictModule(l2, ["h"], ["a"])
    seq = TensorDictSequential(m1, m2)
    assert seq[0] is m1 and seq[1] is m2 and seq[-1] is m2
    sub = seq[1:]
    assert isinstance(sub, TensorDictSequential) and len(sub) == 1 and sub[0] is m2
    assert sub.in_keys == ["h"] and sub.out_keys == ["a"]
    assert list(seq.state_dict()) == ["module.0.module.weight", "module.0.module.bias",
                                      "module.1.module.weight", "module.1.module.bias"]
    assert len(list(seq.parameters())) == 4
    seq.to(rlpipe.float64)
    assert l1.weight.dtype is rlpipe.float64 and l2.bias.dtype is rlpipe.float64
    out = seq(TensorDict(obs=rlpipe.randn(2, 3, dtype=rlpipe.float64), batch_size=[2]))
    assert out["a"].dtype is rlpipe.float64


def test_sequential_repr():
    seq = TensorDictSequential(TensorDictModule(nn.Linear(3, 4), ["obs"], ["h"]))
    assert repr(seq) == ("TensorDictSequential(\n"
                         "    module=ModuleList(\n"
                         "      (0): TensorDictModule(\n"
                         "          module=Linear(in_features=3, out_features=4, bias=True),\n"
                         "          device=cpu,\n"
                         "          in_keys=['obs'],\n"
                         "          out_keys=['h'])\n"
                         "    ),\n"
                         "    device=cpu,\n"
                         "    in_keys=['obs'],\n"
                         "    out_keys=['h'])")


def test_sequential_selected_out_keys():
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"]),
        TensorDictModule(lambda y: y * 10, in_keys=["y"], out_keys=["z"]),
        selected_out_keys=["z"],
    )
    assert seq.out_keys == ["z"] and seq.out_keys_source == ["y", "z"]
    td = TensorDict({"x": rlpipe.tensor([1.0, 2.0]), "other": rlpipe.zeros(2)}, batch_size=[2])
    out = seq(td)
    assert out is td
    assert keys(td) == ["x", "other", "z"]  # the intermediate "y" is not kept; unrelated entries are
    assert td["z"].tolist() == [20.0, 30.0]
    assert seq(x=rlpipe.tensor(0.0)).item() == 10.0
    seq.reset_out_keys()
    assert seq.out_keys == ["y", "z"]
    assert keys(seq(TensorDict(x=rlpipe.tensor(1.0)))) == ["x", "y", "z"]
    with pytest.raises(ValueError, match="selected_out_keys"):
        TensorDictSequential(TensorDictModule(lambda x: x, ["x"], ["y"]), selected_out_keys=["nope"])


def test_sequential_selected_out_keys_propagates_overwritten_inputs():
    seq = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["x"], ["x"]),
                               TensorDictModule(lambda x: x * 2, ["x"], ["h"]),
                               TensorDictModule(lambda h: h + 1, ["h"], ["out"]),
                               selected_out_keys=["out"])
    td = TensorDict(x=rlpipe.tensor(1.0))
    seq(td)
    assert keys(td) == ["x", "out"]
    assert td["x"].item() == 2.0 and td["out"].item() == 5.0


def test_sequential_accepts_plain_callables_and_nesting():
    def add_bias(td):
        td.set("b", td.get("y") + 100)
        return td

    inner = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["x"], ["y"]))
    seq = TensorDictSequential(inner, add_bias, TensorDictModule(lambda b, x: b - x, ["b", "x"], ["c"]))
    assert isinstance(seq[1], WrapModule) and seq[0] is inner
    assert seq.in_keys == ["x", "b"]  # a plain callable's keys are not tracked
    assert seq.out_keys == ["y", "c"]
    td = seq(TensorDict(x=rlpipe.tensor(1.0)))
    assert (td["y"].item(), td["b"].item(), td["c"].item()) == (2.0, 102.0, 101.0)
    # a list, or a dict of named modules
    listed = TensorDictSequential([TensorDictModule(lambda x: x + 1, ["x"], ["y"])])
    assert len(listed) == 1 and listed.in_keys == ["x"]
    named = TensorDictSequential({"first": TensorDictModule(lambda x: x + 1, ["x"], ["y"]),
                                  "second": TensorDictModule(lambda y: y * 3, ["y"], ["z"])})
    assert named["second"].out_keys == ["z"]
    assert named(TensorDict(x=rlpipe.tensor(1.0)))["z"].item() == 6.0


def test_sequential_errors_name_the_key_and_the_module():
    seq = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["x"], ["y"]),
                               TensorDictModule(nn.Linear(2, 2), ["missing"], ["z"]))
    with pytest.raises(KeyError, match="'missing'") as info:
        seq(TensorDict(x=rlpipe.zeros(2), batch_size=[2]))
    assert "Failed while executing module '1'." in getattr(info.value, "__notes__", [])
    with pytest.raises(RuntimeError, match="keyword arguments"):
        seq(TensorDict(x=rlpipe.zeros(2), batch_size=[2]), foo=1)


def test_sequential_partial_tolerant_and_tensordict_out():
    seq = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["x"], ["y"]),
                               TensorDictModule(lambda q: q * 2, ["q"], ["r"]), partial_tolerant=True)
    td = seq(TensorDict(x=rlpipe.tensor(1.0)))
    assert keys(td) == ["x", "y"]
    full = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["x"], ["y"]),
                                TensorDictModule(lambda y: y * 2, ["y"], ["z"]))
    src, dest = TensorDict(x=rlpipe.tensor(1.0)), TensorDict({}, [])
    assert full(src, tensordict_out=dest) is dest
    assert keys(src) == ["x"] and keys(dest) == ["y", "z"] and dest["z"].item() == 4.0
    fresh = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["x"], ["y"]), inplace=False)
    src = TensorDict(x=rlpipe.tensor(1.0))
    out = fresh(src)
    assert out is not src and keys(out) == ["y"] and keys(src) == ["x", "y"]


def test_select_subsequence():
    idn = lambda x: x
    seq = TensorDictSequential(TensorDictModule(idn, ["a"], ["b"]), TensorDictModule(idn, ["b"], ["c"]),
                               TensorDictModule(idn, ["c"], ["d"]), TensorDictModule(idn, ["a"], ["e"]))
    assert [m.out_keys for m in seq.select_subsequence(in_keys=["c"])] == [["d"]]
    assert [m.out_keys for m in seq.select_subsequence(out_keys=["c"])] == [["b"], ["c"]]
    assert [m.out_keys for m in seq.select_subsequence(out_keys=["e"])] == [["e"]]
    with pytest.raises(ValueError, match="No modules left"):
        seq.select_subsequence(in_keys=["zzz"])


# ---------------------------------------------------------------------------------------------
# rlpipe.testing
# ---------------------------------------------------------------------------------------------
def make_td():
    return TensorDict({"obs": rlpipe.tensor([[1.0, 2.0], [3.0, 4.0]]), "done": rlpipe.tensor([True, False]),
                       "next": {"reward": rlpipe.tensor([[0.5], [1.5]], dtype=rlpipe.float64),
                                "step": rlpipe.tensor([1, 2])}}, batch_size=[2])


def test_assert_allclose_td_passes():
    a, b = make_td(), make_td()
    assert assert_allclose_td(a, b) is True
    b.set("obs", b["obs"] + 5e-6)  # within float32's atol=1e-5
    assert_allclose_td(a, b)
    b.set(("next", "reward"), b["next", "reward"] * (1 + 5e-8))  # within float64's rtol=1e-7
    assert_allclose_td(a, b)
    c = make_td()
    c.set("obs", c["obs"] + 0.05)
    assert_allclose_td(a, c, rtol=0, atol=0.1)  # explicit tolerances
    nan = TensorDict(x=rlpipe.tensor([float("nan"), 1.0]), batch_size=[2])
    assert_allclose_td(nan, nan.clone())  # equal_nan=True by default
    with pytest.raises(AssertionError):
        assert_allclose_td(nan, nan.clone(), equal_nan=False)


def test_assert_allclose_td_key_mismatch():
    a, b = make_td(), make_td()
    b.set(("next", "extra"), rlpipe.zeros(2))
    del a["done"]
    with pytest.raises(AssertionError, match="keys mismatch") as info:
        assert_allclose_td(a, b)
    text = str(info.value)
    assert "only in actual" not in text
    assert "only in expected: 'done', ('next', 'extra')" in text
    assert isinstance(info.value, KeyError)  # tensordict raises KeyError here: both catch it
    with pytest.raises(AssertionError, match=re.escape("keys {('next', 'extra')} appear in one but not the other "
                                                       "(only in actual: ('next', 'extra')).")):
        assert_allclose_td(b, make_td())


def test_assert_allclose_td_batch_size_mismatch():
    a = TensorDict(x=rlpipe.zeros(2, 3), batch_size=[2])
    b = TensorDict(x=rlpipe.zeros(2, 3), batch_size=[2, 3])
    with pytest.raises(AssertionError, match=re.escape("batch_size mismatch: actual rlpipe.Size([2]) != expected "
                                                       "rlpipe.Size([2, 3])")):
        assert_allclose_td(a, b)


def test_assert_allclose_td_value_mismatch_names_key_and_difference():
    a, b = make_td(), make_td()
    b.set("obs", b["obs"] + rlpipe.tensor([[0.0, 0.0], [0.0, 0.25]]))
    with pytest.raises(AssertionError) as info:
        assert_allclose_td(a, b, msg="after one step")
    text = str(info.value)
    assert text.startswith("key 'obs' does not match, got mse = 0.1250")
    assert "Tensor-likes are not close!" in text
    assert "Mismatched elements: 1 / 4 (25.0%)" in text
    assert "Greatest absolute difference: 0.25 at index (1, 1) (up to 1e-05 allowed)" in text
    assert "Greatest relative difference: 0.0588235" in text and "(up to 1.3e-06 allowed)" in text
    assert text.endswith("\tafter one step")

    c = make_td()
    c.set(("next", "step"), rlpipe.tensor([1, 3]))
    with pytest.raises(AssertionError, match=re.escape("key ('next', 'step') does not match")) as info:
        assert_allclose_td(make_td(), c)
    assert "Tensor-likes are not equal!" in str(info.value)  # integers: exact
    assert "Greatest absolute difference: 1 at index (1,)" in str(info.value)

    d = make_td()
    d.set("obs", d["obs"].double())
    with pytest.raises(AssertionError, match="'dtype' do not match: rlpipe.float32 != rlpipe.float64"):
        assert_allclose_td(make_td(), d)
    with pytest.raises(TypeError):
        assert_allclose_td(make_td(), {"obs": 1})


@pytest.mark.parametrize("dtype,rtol,atol,expected,inside,outside", [
    # values exactly representable in the dtype; the allowed gap is atol + rtol * |expected|
    (rlpipe.float16, 1e-3, 1e-5, 1024.0, 1025.0, 1026.0),      # gap 1.024
    (rlpipe.bfloat16, 1.6e-2, 1e-5, 256.0, 260.0, 262.0),      # gap 4.096
    (rlpipe.float32, 1.3e-6, 1e-5, 2.0 ** 20, 2.0 ** 20 + 1, 2.0 ** 20 + 2),  # gap 1.363
    (rlpipe.float64, 1e-7, 1e-7, 2.0 ** 30, 2.0 ** 30 + 100, 2.0 ** 30 + 108),  # gap 107.37
])
def test_assert_close_default_tolerances(dtype, rtol, atol, expected, inside, outside):
    e = rlpipe.tensor([expected], dtype=dtype)
    assert_close(rlpipe.tensor([inside], dtype=dtype), e)
    with pytest.raises(AssertionError, match=re.escape(f"(up to {rtol} allowed)")) as info:
        assert_close(rlpipe.tensor([outside], dtype=dtype), e)
    assert f"Greatest absolute difference: {outside - expected} at index (0,) (up to {atol} allowed)" in str(info.value)
    # the atol part, around zero
    z = rlpipe.zeros(1, dtype=dtype)
    assert_close(rlpipe.full((1,), atol * 0.5, dtype=dtype), z)
    with pytest.raises(AssertionError):
        assert_close(rlpipe.full((1,), 1e-3, dtype=dtype), z)


def test_assert_close_float32_boundary():
    expected = rlpipe.tensor([1.0, 100.0])
    assert_close(rlpipe.tensor([1.0 + 1.0e-5, 100.0]), expected)  # 1e-5 <= 1e-5 + 1.3e-6
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50\.0%\)"):
        assert_close(rlpipe.tensor([1.0 + 4e-5, 100.0]), expected)
    assert_close(rlpipe.tensor([1.0 + 4e-5, 100.0]), expected, rtol=0, atol=1e-4)


def test_assert_close_exact_for_integers_and_bools():
    assert_close(rlpipe.tensor([1, 2, 3]), rlpipe.tensor([1, 2, 3]))
    with pytest.raises(AssertionError, match="Tensor-likes are not equal!"):
        assert_close(rlpipe.tensor([1, 2, 3]), rlpipe.tensor([1, 2, 4]))
    with pytest.raises(AssertionError, match="not equal"):
        assert_close(rlpipe.tensor([True, False]), rlpipe.tensor([True, True]))
    assert_close(rlpipe.tensor([1, 2, 3]), rlpipe.tensor([1, 2, 4]), rtol=0, atol=1)


def test_assert_close_checks_shape_dtype_nan_and_arguments():
    with pytest.raises(AssertionError, match=re.escape("'shape' do not match: rlpipe.Size([2]) != rlpipe.Size([3])")):
        assert_close(rlpipe.zeros(2), rlpipe.zeros(3))
    with pytest.raises(AssertionError, match="'dtype' do not match"):
        assert_close(rlpipe.zeros(2), rlpipe.zeros(2, dtype=rlpipe.float64))
    assert_close(rlpipe.zeros(2), rlpipe.zeros(2, dtype=rlpipe.float64), check_dtype=False)
    nan = rlpipe.tensor([float("nan")])
    with pytest.raises(AssertionError):
        assert_close(nan, nan.clone())  # equal_nan=False by default, as torch
    assert_close(nan, nan.clone(), equal_nan=True)
    inf = rlpipe.tensor([float("inf")])
    assert_close(inf, inf.clone())
    with pytest.raises(AssertionError):
        assert_close(inf, -inf)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        assert_close(rlpipe.zeros(1), rlpipe.zeros(1), rtol=1e-3)
    with pytest.raises(AssertionError, match="^custom$"):
        assert_close(rlpipe.zeros(1), rlpipe.ones(1), msg="custom")
    x = rlpipe.ones(2, requires_grad=True)
    assert_close(x * 1, rlpipe.ones(2))  # tensors that require grad are fine


def test_assert_close_scalars_sequences_and_tensordicts():
    assert_close(1.0, 1.0 + 1e-9)
    with pytest.raises(AssertionError, match="Scalars are not close!"):
        assert_close(1.0, 1.1)
    assert_close([rlpipe.zeros(2), 1], [rlpipe.zeros(2), 1])
    with pytest.raises(AssertionError, match=re.escape("item [1]")):
        assert_close([rlpipe.zeros(2), rlpipe.zeros(1)], [rlpipe.zeros(2), rlpipe.ones(1)])
    assert_close({"a": rlpipe.zeros(1)}, {"a": rlpipe.zeros(1)})
    assert_close(make_td(), make_td())
    with pytest.raises(TypeError):
        assert_close(rlpipe.zeros(1), "zero")
