"""TensorDict behaviour that the second half of tensordict 0.14's test_generic.py checks, each
expected value taken from tensordict 0.14.3 itself (run in the peers' virtualenv)."""
import os
import subprocess
import sys

import pytest

import rlpipe
from rlpipe.tensordict import TensorDict



_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_no_import_warning_under_the_peer_import_shim():
    # The shim re-registers rlpipe.tensordict's modules as tensordict.*: a relative import run
    # inside a function then raises ImportWarning ("__package__ != __spec__.parent"), an error
    # under tensordict's filterwarnings("error").
    code = (
        "import warnings, peer_shim\n"
        "warnings.simplefilter('error')\n"
        "import torch, tensordict._td, tensordict._math, tensordict.functional\n"
        "from tensordict import TensorDict\n"
        "td = TensorDict({'a': torch.ones(3, 4)}, [3, 4])\n"
        "assert td.pad([0, 1]).batch_size == (4, 4)\n"
        "assert td.to(torch.float64)['a'].dtype == torch.float64\n"
        "assert torch.stack([td, td]).batch_size == (2, 3, 4)\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(_ROOT, "tools"), _ROOT]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _named():
    nested = TensorDict({"b": rlpipe.zeros(2, 3, 4, 5)}, [2, 3, 4])
    return TensorDict({"a": rlpipe.zeros(2, 3, 4), "n": nested}, [2, 3], names=["x", "y"])


# (operation, names of the result): tensordict 0.14.3's values
_NAMED_OPS = [
    (lambda td: td["n"], ["x", "y", None]),
    (lambda td: td[0], ["y"]),
    (lambda td: td[:, 0], ["x"]),
    (lambda td: td[None], [None, "x", "y"]),
    (lambda td: td[:, None], ["x", None, "y"]),
    (lambda td: td[..., 0], ["x"]),
    (lambda td: td[rlpipe.tensor([0, 1])], ["x", "y"]),
    (lambda td: td[rlpipe.ones(2, 3, dtype=rlpipe.bool)], [None]),
    (lambda td: td.unsqueeze(0), [None, "x", "y"]),
    (lambda td: td.unsqueeze(-1), ["x", "y", None]),
    (lambda td: td.unsqueeze(1).squeeze(1), ["x", "y"]),
    (lambda td: td.permute(1, 0), ["y", "x"]),
    (lambda td: td.transpose(1, 0), ["y", "x"]),
    (lambda td: td.clone()["n"], ["x", "y", None]),
    (lambda td: td.to(rlpipe.float64), ["x", "y"]),
    (lambda td: td.apply(lambda t: t + 1), ["x", "y"]),
    (lambda td: td.apply(lambda t: t[0], batch_size=[3]), [None]),
    (lambda td: td.view(-1), [None]),
    (lambda td: td.view(2, 3), ["x", "y"]),
    (lambda td: td.flatten(0, 1), [None]),
    (lambda td: td.expand(5, 2, 3), [None, "x", "y"]),
    (lambda td: td.repeat(1, 2), ["x", "y"]),
    (lambda td: td.repeat_interleave(2, dim=1), ["x", "y"]),
    (lambda td: rlpipe.stack([td, td], 0), [None, "x", "y"]),
    (lambda td: rlpipe.cat([td, td], 1), ["x", "y"]),
    (lambda td: td.unbind(1)[0], ["x"]),
    (lambda td: td.split(1, 0)[1], ["x", "y"]),
    (lambda td: td.select("a"), ["x", "y"]),
    (lambda td: td.exclude("a"), ["x", "y"]),
    (lambda td: td + 1, ["x", "y"]),
    (lambda td: td == td.clone(), [None, None]),
    (lambda td: td.gather(1, rlpipe.zeros(2, 2, dtype=rlpipe.int64)), ["x", "y"]),
    (lambda td: td.roll(1, 0), ["x", "y"]),
    (lambda td: td.sum(0), ["y"]),
    (lambda td: td.sum(-1), ["x"]),
    (lambda td: td.sum((0, 1)), []),
    (lambda td: td.mean(1, keepdim=True), ["x", "y"]),
    (lambda td: td.mean(dim="feature"), ["x", "y"]),
    (lambda td: td.sum(), []),
    (lambda td: td.std(1), ["x"]),
    (lambda td: td.amax(0), ["y"]),
    (lambda td: td.quantile(0.5, dim=0), ["y"]),
    (lambda td: rlpipe.zeros_like(td), ["x", "y"]),
    (lambda td: td.all(0), ["y"]),
    (lambda td: td.any(-1), ["x"]),
    (lambda td: td.flatten(0, 1), [None]),
    (lambda td: td.unsqueeze(-1).flatten(1, 2), ["x", None]),
    (lambda td: td.unflatten(1, (3, 1)), ["x", None, "y"]),
    (lambda td: td[rlpipe.ones(2, dtype=rlpipe.bool)], ["x", "y"]),
    (lambda td: td[True], [None, "x", "y"]),
    (lambda td: td[rlpipe.tensor([0, 1]), rlpipe.tensor([1, 2])], ["x"]),
    (lambda td: td[0, ..., rlpipe.tensor(-1)], []),
    (lambda td: td.where(rlpipe.zeros(2, 3, dtype=rlpipe.bool), td.clone()), ["x", "y"]),
    (lambda td: td.copy(), ["x", "y"]),
    (lambda td: td.clone(recurse=False), ["x", "y"]),
    (lambda td: td.clone()["n"], ["x", "y", None]),
    (lambda td: td.copy()["n"], ["x", "y", None]),
]


@pytest.mark.parametrize("op,expected", _NAMED_OPS)
def test_named_dims_follow_the_batch_dims(op, expected):
    assert op(_named()).names == expected


def test_named_dims_set_validate_and_propagate():
    td = _named()
    assert td.names == ["x", "y"] and td["n"].names == ["x", "y", None]
    td.names[0] = "changed"  # a copy
    assert td.names == ["x", "y"]
    with pytest.raises(ValueError, match=r"Some dimension names are non-unique: \['x', 'x'\]"):
        TensorDict({}, [2, 3], names=["x", "x"])
    with pytest.raises(ValueError, match="the length of the dimension names must equate the tensordict batch_dims "
                                         r"attribute. Got \['x'\] for batch_dims 2"):
        td.names = ["x"]
    assert td.names == ["x", "y"]
    assert td.rename_("p", "q") is td and td["n"].names == ["p", "q", None]
    assert td.rename_(p="r").names == ["r", "q"]
    with pytest.raises(ValueError, match="Passed both a name map and a name list"):
        td.rename_("c", q="d")
    with pytest.raises(ValueError, match="Neither a name map nor a name list was passed"):
        td.rename_()
    with pytest.raises(ValueError, match="Some names to be renamed were not part of the tensordict names"):
        td.rename_(z="c")
    renamed = td.rename("u", "v")
    assert renamed.names == ["u", "v"] and renamed["n"].names == ["u", "v", None]
    assert td.names == ["r", "q"] and td["n"].names == ["r", "q", None]
    td.names = None
    assert td.names == [None, None] and td["n"].names == [None, None, None]
    assert TensorDict({}, [2, 3]).refine_names(..., "b").names == [None, "b"]
    with pytest.raises(RuntimeError, match=r"refine_names: cannot coerce TensorDict names \['a', 'b'\] with "
                                           r"\[None, 'b'\]"):
        TensorDict({}, [2, 3], names=["a", "b"]).refine_names(None, "b")
    locked = TensorDict({}, [2], names=["x"]).lock_()
    assert locked.rename_("t").names == ["t"]


def test_named_dims_and_nested_entries():
    parent = TensorDict({}, [2], names=["b"])
    child = TensorDict({"x": rlpipe.zeros(2, 3)}, [2, 3], names=[None, "o"])
    parent["c"] = child  # stored as a renamed shallow copy; the caller's TensorDict is left alone
    assert parent["c"].names == ["b", "o"] and child.names == [None, "o"] and parent["c"] is not child
    same = TensorDict({"x": rlpipe.zeros(2, 3)}, [2, 3], names=["b", "z"])
    parent["d"] = same
    assert parent["d"] is same
    with pytest.raises(RuntimeError, match=r"cannot coerce TensorDict names \['k', 'o'\] with \['b', 'o'\]"):
        parent["e"] = TensorDict({}, [2, 3], names=["k", "o"])
    assert "e" not in parent.keys()
    parent["f", "g"] = rlpipe.zeros(2)
    assert parent["f"].names == ["b"]
    built = TensorDict({"c": child}, [2], names=["b"])
    assert built["c"] is not child and built["c"].names == ["b", "o"] and child.names == [None, "o"]
    # an unnamed TensorDict takes the leading names of a named child
    unnamed_parent = TensorDict({}, [2])
    unnamed_parent["c"] = TensorDict({}, [2, 3], names=["k", "o"])
    assert unnamed_parent.names == ["k"] and unnamed_parent["c"].names == ["k", "o"]
    # naming after the fact renames the nested TensorDicts themselves (their own names are dropped)
    unnamed = TensorDict({"c": child}, [2])
    unnamed.rename_("batch")
    assert unnamed["c"] is child and child.names == ["batch", None]


def test_named_dims_batch_size_changes_and_stacks():
    td = TensorDict({"a": rlpipe.zeros(2, 3)}, [2, 3], names=["x", "y"])
    td.batch_size = [2]
    assert td.names == ["x"]
    td.batch_size = [2, 3]
    assert td.names == ["x", None]
    other = td.clone()
    other.names = ["x", "q"]
    assert rlpipe.stack([td, other], 1).names == [None, None, None]
    assert rlpipe.cat([td, other], 0).names == ["x", None]


# torch 2.13's shapes and first values (flattened) for the tensor functions tensordict's tests call
_X = lambda: rlpipe.arange(24).view(2, 3, 4)  # noqa: E731
_SHAPE_OPS = [
    (lambda x: rlpipe.fliplr(x), [2, 3, 4], [8, 9, 10, 11, 4, 5, 6, 7]),
    (lambda x: x.fliplr(), [2, 3, 4], [8, 9, 10, 11, 4, 5, 6, 7]),
    (lambda x: rlpipe.flipud(x), [2, 3, 4], [12, 13, 14, 15, 16, 17, 18, 19]),
    (lambda x: rlpipe.rot90(x), [3, 2, 4], [8, 9, 10, 11, 20, 21, 22, 23]),
    (lambda x: rlpipe.rot90(x, 2, (1, 2)), [2, 3, 4], [11, 10, 9, 8, 7, 6, 5, 4]),
    (lambda x: rlpipe.rot90(x, 3), [3, 2, 4], [12, 13, 14, 15, 0, 1, 2, 3]),
    (lambda x: rlpipe.rot90(x, -1, [2, 0]), [4, 3, 2], [3, 15, 7, 19, 11, 23, 2, 14]),
    (lambda x: x.rot90(1, (0, 2)), [4, 3, 2], [3, 15, 7, 19, 11, 23, 2, 14]),
    (lambda x: rlpipe.rot90(x, 0), [2, 3, 4], [0, 1, 2, 3, 4, 5, 6, 7]),
    (lambda x: rlpipe.tile(x, (2,)), [2, 3, 8], [0, 1, 2, 3, 0, 1, 2, 3]),
    (lambda x: rlpipe.tile(x, (2, 1, 1, 2)), [2, 2, 3, 8], [0, 1, 2, 3, 0, 1, 2, 3]),
    (lambda x: x.tile(2, 1), [2, 6, 4], [0, 1, 2, 3, 4, 5, 6, 7]),
    (lambda x: rlpipe.permute(x, dims=(2, 0, 1)), [4, 2, 3], [0, 4, 8, 12, 16, 20, 1, 5]),
    (lambda x: rlpipe.atleast_1d(x[0, 0, 3]), [1], [3]),
    (lambda x: rlpipe.atleast_2d(x[0, 0, 1:3]), [1, 2], [1, 2]),
    (lambda x: rlpipe.atleast_3d(x[0, 0, 3]), [1, 1, 1], [3]),
    (lambda x: rlpipe.atleast_3d(x[0, 0, 1:3]), [1, 2, 1], [1, 2]),
    (lambda x: rlpipe.atleast_3d(x[0]), [3, 4, 1], [0, 1, 2, 3, 4, 5, 6, 7]),
    (lambda x: rlpipe.atleast_3d(x), [2, 3, 4], [0, 1, 2, 3, 4, 5, 6, 7]),
]


@pytest.mark.parametrize("op,shape,head", _SHAPE_OPS)
def test_shape_functions_match_torch(op, shape, head):
    out = op(_X())
    assert list(out.shape) == shape and out.flatten()[:8].tolist() == head


def test_shape_function_errors_match_torch():
    x = _X()
    assert [list(t.shape) for t in rlpipe.atleast_1d(rlpipe.tensor(1), rlpipe.tensor([2]))] == [[1], [1]]
    assert [list(t.shape) for t in rlpipe.atleast_1d([rlpipe.tensor(1), rlpipe.tensor([2])])] == [[1], [1]]
    with pytest.raises(RuntimeError, match="Input must be >= 2-d."):
        rlpipe.fliplr(x[0, 0])
    with pytest.raises(RuntimeError, match="Input must be >= 1-d."):
        rlpipe.flipud(rlpipe.tensor(1))
    with pytest.raises(RuntimeError, match="expected total rotation dims == 2, but got dims = 1"):
        rlpipe.rot90(x, 1, (0,))
    with pytest.raises(RuntimeError, match="expected rotation dims to be different, but got dim0 = 1 and dim1 = 1"):
        rlpipe.rot90(x, 1, (1, 1))
    with pytest.raises(RuntimeError, match="expected total dims >= 2, but got total dims = 1"):
        rlpipe.rot90(x[0, 0])
    with pytest.raises(TypeError, match="permute"):
        rlpipe.permute(x, 0, 1, 2, dims=(0, 1, 2))


def test_torch_functions_on_tensordicts_run_the_methods():
    td = TensorDict({"b": rlpipe.arange(6).view(2, 3)}, [2, 3])
    assert rlpipe.fliplr(td)["b"].tolist() == [[2, 1, 0], [5, 4, 3]]
    assert rlpipe.flipud(td)["b"].tolist() == [[3, 4, 5], [0, 1, 2]]
    assert rlpipe.rot90(td)["b"].tolist() == [[2, 5], [1, 4], [0, 3]]
    assert rlpipe.tile(td, (2, 1)).batch_size == (4, 3)
    assert rlpipe.broadcast_to(td, (4, 2, 3))["b"].shape == (4, 2, 3)
    assert rlpipe.permute(td, dims=(1, 0))["b"].tolist() == [[0, 3], [1, 4], [2, 5]]
    td0 = TensorDict({"a": rlpipe.zeros(3)}, [])
    assert rlpipe.atleast_1d(td0).batch_size == (1,)
    assert rlpipe.atleast_2d(td).batch_size == (2, 3)
    # tensordict puts the new dims first, where torch.atleast_3d appends one to a 2-d tensor
    assert rlpipe.atleast_3d(td).batch_size == (1, 2, 3)


def test_gather_inplace_and_its_errors():
    td = TensorDict({"a": rlpipe.arange(12).view(3, 4), "n": {"b": rlpipe.arange(12).view(3, 4)}}, [3, 4])
    nested = td["n"]
    index = rlpipe.tensor([[0, 2], [1, 3], [2, 0]])
    out = td.gather(1, index, inplace=True)
    assert out is td and td["n"] is nested and td.batch_size == (3, 2)
    assert td["a"].tolist() == [[0, 2], [5, 7], [10, 8]] and td["n", "b"].tolist() == td["a"].tolist()
    td = TensorDict({"a": rlpipe.zeros(3, 4)}, [3, 4])
    with pytest.raises(NotImplementedError, match=r"gather\(inplace=True\) requires index.ndim == self.batch_dims "
                                                  r"so the result keeps the same number of batch dims; got "
                                                  r"index.ndim=1 and batch_dims=2"):
        td.gather(0, rlpipe.tensor([0, 1]), inplace=True)
    with pytest.raises(ValueError, match="`out` and `inplace=True` are mutually exclusive in gather."):
        td.gather(0, rlpipe.zeros(3, 4, dtype=rlpipe.int64), out=td.clone(), inplace=True)
    assert td.batch_size == (3, 4) and td.gather(0, rlpipe.tensor([0, 1])).batch_size == (2,)


def test_update_refuses_unrelated_batch_sizes():
    # tensordict 0.14.3: a batch size that starts the other is fine, two that differ in a shared dim are not
    for mine, theirs in [([3, 4], [3]), ([3], [3, 4]), ([3], []), ([], [3])]:
        td = TensorDict({"x": rlpipe.zeros(3, 4)}, mine)
        td.update(TensorDict({"y": rlpipe.ones(3, 4)}, theirs))
        assert td.batch_size == tuple(mine) and td["y"].shape == (3, 4)
    td = TensorDict(batch_size=[3])
    with pytest.raises(RuntimeError, match="update_batch_size must be set to True to be able to update tensordicts "
                                           "of different batch size"):
        td.update(TensorDict(batch_size=[4]))
    assert td.update(TensorDict(batch_size=[4]), update_batch_size=True).batch_size == (4,)


def test_subclass_validation_hook_sees_every_set_and_update():
    class Plus1(TensorDict):
        def _validate_value_generic(self, value, **kwargs):
            return super()._validate_value_generic(value, **kwargs) + 1

    td = Plus1({}, [2], device="cpu")
    td.set("x", rlpipe.zeros(2))
    td.update({"y": rlpipe.zeros(2)})
    td["z"] = rlpipe.zeros(2)
    assert td["x"].tolist() == td["y"].tolist() == td["z"].tolist() == [1.0, 1.0]
    plain = TensorDict({}, [2])
    value = rlpipe.zeros(2)
    assert plain.set("x", value)["x"] is value  # the base class stores the value itself


def test_from_module_nests_parameters_and_buffers():
    nn = rlpipe.nn
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)), nn.BatchNorm1d(2))
    td = TensorDict.from_module(m)
    # tensordict 0.14.3's keys: the ReLU, which holds nothing, is left out
    assert sorted(td.keys(True, True)) == [("0", "bias"), ("0", "weight"), ("2", "0", "bias"), ("2", "0", "weight"),
                                           ("3", "bias"), ("3", "num_batches_tracked"), ("3", "running_mean"),
                                           ("3", "running_var"), ("3", "weight")]
    assert td.batch_size == () and td.device is None and not td.is_locked
    assert td["0", "weight"] is m[0].weight and td["3", "running_mean"] is m[3].running_mean
    assert TensorDict.from_module(m, lock=True).is_locked
    from_sd = TensorDict.from_module(m, use_state_dict=True)
    assert sorted(from_sd.keys(True, True)) == sorted(td.keys(True, True))
    assert from_sd["0", "weight"] is not m[0].weight and (from_sd["0", "weight"] == m[0].weight).all()
    assert td.grad is None
    m(rlpipe.randn(5, 3)).sum().backward()
    assert sorted(td.grad.keys(True, True)) == [("0", "bias"), ("0", "weight"), ("2", "0", "bias"),
                                                ("2", "0", "weight"), ("3", "bias"), ("3", "weight")]
    m.zero_grad(set_to_none=True)
    assert td.grad is None
    assert TensorDict.from_module(nn.ReLU()).is_empty()
    as_module = TensorDict.from_module(m, as_module=True)  # a TensorDictParams over the module's own tensors
    assert type(as_module).__name__ == "TensorDictParams" and as_module["0", "weight"] is m[0].weight
    assert dict(as_module.named_parameters())["0.weight"] is m[0].weight


def test_strides_and_empty_strided_match_torch():
    x = rlpipe.arange(24).view(2, 3, 4)
    assert x.stride() == (12, 4, 1) and (x.stride(1), x.stride(-1)) == (4, 1)
    assert x.transpose(0, 2).stride() == (1, 4, 12)
    assert rlpipe.zeros(3, 1).expand(3, 4).stride() == (1, 0) and rlpipe.tensor(1.0).stride() == ()
    odd = rlpipe.empty_strided((1, 4, 5), (5, 5, 1))
    assert odd.shape == (1, 4, 5) and odd.stride() == (5, 5, 1) and odd.is_contiguous()
    assert rlpipe.empty_strided((2,), (1,), dtype=rlpipe.int64).dtype == rlpipe.int64
    cols = rlpipe.empty_strided((2, 3), (1, 2))
    assert cols.stride() == (1, 2) and not cols.is_contiguous()
    cols.copy_(rlpipe.arange(6).view(2, 3))
    assert cols.tolist() == [[0, 1, 2], [3, 4, 5]] and cols.contiguous().stride() == (3, 1)
    assert rlpipe.empty_strided((0, 3), (3, 1)).shape == (0, 3)
    with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match dimensionality of strides \(1\)"):
        rlpipe.empty_strided((2, 3), (1,))


def test_contiguous_canonical_copies_only_odd_strides():
    odd = rlpipe.empty_strided((1, 4, 5), (5, 5, 1))
    odd.copy_(rlpipe.arange(20).view(1, 4, 5))
    plain = rlpipe.randn(2, 3, 4)
    td = TensorDict({"odd": odd, "plain": plain, "n": TensorDict({"leaf": odd}, [])}, [])
    kept = td.contiguous()
    assert kept["odd"].data_ptr() == odd.data_ptr() and kept["odd"].stride() == (5, 5, 1)
    canon = td.contiguous(canonical=True)
    assert canon["odd"].stride() == (20, 5, 1) and canon["odd"].data_ptr() != odd.data_ptr()
    assert canon["odd"].tolist() == odd.tolist() and canon["n", "leaf"].stride() == (20, 5, 1)
    assert canon["plain"].data_ptr() == plain.data_ptr()
    assert td.contiguous(canonical=True, inplace=True) is td and td["odd"].stride() == (20, 5, 1)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_new_shape_functions_and_strides_on_cuda():
    x = rlpipe.arange(6, device="cuda").view(2, 3)
    assert x.stride() == (3, 1) and x.t().stride() == (1, 3)
    cols = rlpipe.empty_strided((2, 3), (1, 2), device="cuda")
    cols.copy_(x)
    assert cols.device == x.device and cols.stride() == (1, 2) and cols.cpu().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert rlpipe.fliplr(x).cpu().tolist() == [[2, 1, 0], [5, 4, 3]]
    assert rlpipe.rot90(x).cpu().tolist() == [[2, 5], [1, 4], [0, 3]]
    assert rlpipe.tile(x, (2,)).shape == (2, 6) and rlpipe.atleast_3d(x).shape == (2, 3, 1)
    td = TensorDict({"x": x}, [2, 3], device="cuda", names=["a", "b"])
    assert td.permute(1, 0).names == ["b", "a"] and td.contiguous(canonical=True)["x"].device == x.device


def test_copies_keep_the_names_of_every_level():
    inner = TensorDict({"v": rlpipe.zeros(2, 3, 4)}, [2, 3, 4], names=[None, None, "deep"])
    td = TensorDict({"i": inner}, [2], names=["b"])
    assert td["i"].names == ["b", None, "deep"]
    for out in (td.clone(), td.copy(), td.detach(), td.to(rlpipe.float64), td.apply(lambda t: t + 1)):
        assert out.names == ["b"] and out["i"].names == ["b", None, "deep"]


def test_names_survive_pickling_in_a_fresh_process():
    # a fresh interpreter has named nothing yet: unpickling must still bring the names back
    code = ("import pickle, sys\n"
            "td = pickle.loads(sys.stdin.buffer.read())\n"
            "print(td.names, td['n'].names, td[0].names)\n")
    td = TensorDict({"n": TensorDict({}, [2, 3])}, [2], names=["b"])
    import pickle
    env = dict(os.environ, PYTHONPATH=_ROOT)
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(td), env=env, capture_output=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == "['b'] ['b', None] []"


def test_load_state_dict_strict_key_check():
    src = TensorDict({"x": rlpipe.ones(3, 4), "n": TensorDict({"y": rlpipe.ones(3, 4, 2)}, [3, 4, 2]),
                      "e": TensorDict({}, [3])}, [3])
    sd = src.state_dict()
    # tensordict 0.14.3: extra keys holding tensors are refused (the message lists every differing key) ...
    with pytest.raises(RuntimeError, match="Cannot load state-dict because the key sets don't match: got state_dict "
                                           "extra keys"):
        TensorDict({}, [3]).load_state_dict(sd)
    with pytest.raises(RuntimeError, match=r"tensordict extra keys\n\{'z'\}"):
        TensorDict({"x": rlpipe.zeros(3, 4), "n": {"y": rlpipe.zeros(3, 4, 2)}, "z": rlpipe.zeros(3)},
                   [3]).load_state_dict(sd)
    # ... while a nested TensorDict without leaves may be missing, and strict=False loads anything
    dest = TensorDict({"x": rlpipe.zeros(3, 4), "n": TensorDict({"y": rlpipe.zeros(3, 4, 2)}, [3, 4, 2])}, [3])
    assert dest.load_state_dict(sd)["x"].sum().item() == 12.0
    loose = TensorDict({}, [3]).load_state_dict(sd, strict=False)
    assert loose["n", "y"].shape == (3, 4, 2) and loose["x"].sum().item() == 12.0


def test_an_nd_index_tensor_repeats_the_indexed_dims_name():
    # tensordict 0.14.3: td[:, [[0, 1], [1, 2]]].names == ['a', 'b', 'b', 'c'], and a later 1-D index
    # tensor broadcast into the first one's dims drops its own name
    td = TensorDict({"x": rlpipe.zeros(3, 4, 5)}, [3, 4, 5], names=["a", "b", "c"])
    index = rlpipe.tensor([[0, 1], [1, 2]])
    assert td[:, index].names == ["a", "b", "b", "c"] and td[:, index].batch_size == (3, 2, 2, 5)
    assert td[0, index].names == ["b", "b", "c"]
    assert td[..., index, :].names == ["a", "b", "b", "c"]
    assert td[:, index.numpy()].names == ["a", "b", "b", "c"]
    assert td[:, index, rlpipe.tensor([0, 1])].names == ["a", "b", "b"]


def test_has_non_tensor_is_a_false_property():
    td = TensorDict({"x": rlpipe.zeros(3)}, [3])
    assert td._has_non_tensor is False  # a property in tensordict: `if not td._has_non_tensor` must hold
    assert td._fast_apply(lambda x: None, filter_empty=True, num_threads=2, checked=False) is None


def test_a_subclass_keeps_its_own_set_beside_a_validation_hook():
    calls = []

    class Checked(TensorDict):
        def _validate_value_generic(self, value, **kwargs):
            return value

        def set(self, key, value, *args, **kwargs):
            calls.append(key)
            return super().set(key, value, *args, **kwargs)

    Checked({}, []).set("a", rlpipe.zeros(()))
    assert calls == ["a"]


def test_in_place_shape_ops_refuse_a_locked_tensordict():
    td = TensorDict({"x": rlpipe.arange(6.0).view(2, 3)}, [2, 3]).lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.reshape(6, inplace=True)
    with pytest.raises(RuntimeError, match="locked"):
        td.gather(1, rlpipe.zeros(2, 1, dtype=rlpipe.int64), inplace=True)
    assert td.batch_size == (2, 3) and td["x"].shape == (2, 3)


def test_a_failed_set_leaves_the_names_as_they_were():
    td = TensorDict({"a": rlpipe.zeros(3)}, [3])
    named = TensorDict({"x": rlpipe.zeros(3)}, [3], names=["t"])
    with pytest.raises(KeyError, match="already present in the TensorDict as a tensor"):
        td.set(("a", "b"), named)  # no store: the parent must not take the child's names
    assert td.names == [None]
    td.set("c", named)
    assert td.names == ["t"]  # a real store adopts them, as tensordict 0.14.3


def test_pad_names_as_tensordict_whichever_way_inplace_is_passed():
    # tensordict 0.14.3: td.pad([0, 1]) and functional pad give unnamed dims; in place the dims keep theirs
    from rlpipe.tensordict.functional import pad

    def named():
        return TensorDict({"a": rlpipe.ones(3, 2)}, [3, 2], names=["t", "e"])
    assert named().pad([0, 1]).names == [None, None] and pad(named(), [0, 1]).names == [None, None]
    for inplace in (lambda td: td.pad([0, 1], inplace=True), lambda td: td.pad([0, 1], 0.0, True),
                    lambda td: pad(td, [0, 1], inplace=True)):
        td = named()
        assert inplace(td) is td and td.names == ["t", "e"] and td.batch_size == (4, 2)
