"""How rlpipe names itself in reprs: ``rlpipe.Size``/``rlpipe.float32`` on its own, ``torch.Size``/
``torch.float32`` when an import shim makes rlpipe stand in for torch (expected strings printed by
torch 2.13 / tensordict 0.14.3)."""
import os
import subprocess
import sys
import textwrap
import types

import pytest

import rlpipe
from rlpipe import _dtypes
from rlpipe.tensordict import TensorDict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# tensordict 0.14.3's repr of the TensorDict built in _nested_td()
PEER_NESTED_REPR = """TensorDict(
    fields={
        a: Tensor(shape=torch.Size([2, 3]), device=cpu, dtype=torch.float64, is_shared=False),
        b: TensorDict(
            fields={
                c: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.uint8, is_shared=False)},
            batch_size=torch.Size([2]),
            device=None,
            is_shared=False)},
    batch_size=torch.Size([2]),
    device=None,
    is_shared=False)"""


def _nested_td():
    inner = TensorDict(c=rlpipe.ones(2, dtype=rlpipe.uint8), batch_size=[2])
    return TensorDict(a=rlpipe.zeros(2, 3, dtype=rlpipe.float64), b=inner, batch_size=[2])


@pytest.fixture
def as_torch(monkeypatch):
    """rlpipe installed as sys.modules['torch'], as the import shim does (undone after the test)."""
    monkeypatch.setitem(sys.modules, "torch", rlpipe)


def test_shown_module_is_rlpipe_without_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert _dtypes.shown_module() == "rlpipe"
    assert repr(rlpipe.Size([4, 3])) == "rlpipe.Size([4, 3])"
    assert repr(rlpipe.float32) == "rlpipe.float32"


def test_shown_module_is_rlpipe_beside_a_real_torch(monkeypatch):
    other = types.ModuleType("torch")
    other.Tensor = type("Tensor", (), {})  # another library's Tensor: rlpipe is not standing in
    monkeypatch.setitem(sys.modules, "torch", other)
    assert _dtypes.shown_module() == "rlpipe"
    assert repr(rlpipe.Size([2])) == "rlpipe.Size([2])"


def test_shown_module_is_torch_under_a_shim(as_torch):
    assert _dtypes.shown_module() == "torch"


@pytest.mark.parametrize("alias, target", [("torchrl", "rlpipe"), ("tensordict", "rlpipe.tensordict")])
def test_shown_module_is_torch_when_only_torchrl_or_tensordict_is_aliased(monkeypatch, alias, target):
    # a torchrl script that never imports torch itself (torchrl's first getting-started tutorial)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "torchrl", raising=False)
    monkeypatch.delitem(sys.modules, "tensordict", raising=False)
    assert _dtypes.shown_module() == "rlpipe"
    monkeypatch.setitem(sys.modules, alias, sys.modules[target])
    assert _dtypes.shown_module() == "torch" and repr(rlpipe.Size([2])) == "torch.Size([2])"
    other = types.ModuleType("torch")
    other.Tensor = type("Tensor", (), {})
    monkeypatch.setitem(sys.modules, "torch", other)  # a real torch beside: rlpipe names itself
    assert _dtypes.shown_module() == "rlpipe"


def test_reprs_under_a_shim_match_torch(as_torch):
    assert repr(rlpipe.Size([4, 3])) == "torch.Size([4, 3])"
    assert repr(rlpipe.zeros(4, 3).shape) == "torch.Size([4, 3])"
    assert repr(rlpipe.uint8) == "torch.uint8"
    assert repr(rlpipe.zeros(2, dtype=rlpipe.float64)) == "tensor([0., 0.], dtype=torch.float64)"
    assert rlpipe.zeros(2).type() == "torch.FloatTensor"
    assert rlpipe.zeros(2, dtype=rlpipe.int64).type() == "torch.LongTensor"
    assert repr(rlpipe.zeros(2, 3).max(0)) == ("torch.return_types.max(\nvalues=tensor([0., 0., 0.]),\n"
                                               "indices=tensor([0, 0, 0]))")
    assert repr(_nested_td()) == PEER_NESTED_REPR


def test_reprs_without_a_shim_say_rlpipe(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert repr(_nested_td()) == PEER_NESTED_REPR.replace("torch.", "rlpipe.")
    assert rlpipe.zeros(2).type() == "rlpipe.FloatTensor"
    assert repr(rlpipe.zeros(2, 3).max(0)).startswith("rlpipe.return_types.max(")


def test_shapes_in_messages_follow_the_shim(as_torch):
    """The TensorDict and spec messages print shapes through the same helper as Size.__repr__."""
    from rlpipe.envs.specs import Unbounded
    td = TensorDict(a=rlpipe.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=r"torch\.Size\(\[3\]\)"):
        td["b"] = rlpipe.zeros(4)
    assert "shape=torch.Size([2])" in repr(Unbounded(shape=(2,)))
    with pytest.raises(RuntimeError, match=r"Input type \(torch\.DoubleTensor\) and weight type "
                                           r"\(torch\.FloatTensor\) should be the same"):
        rlpipe.nn.functional.conv2d(rlpipe.zeros(1, 1, 3, 3, dtype=rlpipe.float64), rlpipe.zeros(1, 1, 2, 2))


def test_real_shim_in_a_fresh_process():
    """Through tools/peer_shim.py (the shim the peers' test files run under), from a fresh interpreter."""
    script = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error")  # as tensordict's test files run
        import peer_shim  # noqa: F401
        import torch
        import tensordict._td  # a submodule imported by its alias keeps rlpipe's __spec__ ...
        from tensordict import TensorDict
        inner = TensorDict(c=torch.ones(2, dtype=torch.uint8), batch_size=[2])
        td = TensorDict(a=torch.zeros(2, 3, dtype=torch.float64), b=inner, batch_size=[2])
        td.float()  # ... so a relative import inside a function raises no ImportWarning
        assert tensordict._td.__spec__.name == "rlpipe.tensordict._td"
        print(repr(td))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tools")]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.rstrip("\n") == PEER_NESTED_REPR
