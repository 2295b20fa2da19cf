"""rlpipe.save/load of lazy stacks, non-tensor data and tensorclasses: stored as plain data (never
pickled), loaded back as the same kinds of objects."""
import pytest

import rlpipe
from rlpipe.tensordict import LazyStackedTensorDict, NonTensorStack, TensorClass, TensorDict, lazy_stack


def test_lazy_stack_with_text_round_trips(tmp_path):
    stack = lazy_stack([TensorDict({"a": rlpipe.ones(2), "s": "x"}, []),
                        TensorDict({"a": rlpipe.zeros(3), "s": "y"}, [])])
    rlpipe.save(stack, tmp_path / "s.pt")
    back = rlpipe.load(tmp_path / "s.pt")
    assert type(back) is LazyStackedTensorDict and back.stack_dim == 0
    assert [x.tolist() for x in back.get("a", as_list=True)] == [[1.0, 1.0], [0.0, 0.0, 0.0]]
    assert back[1].get_non_tensor("s") == "y"


def test_non_tensor_stack_and_tensorclass_round_trip(tmp_path):
    class Step(TensorClass):
        obs: rlpipe.Tensor
        note: str

    td = rlpipe.stack([TensorDict({"s": "left"}, []), TensorDict({"s": "right"}, [])])
    rlpipe.save({"td": td, "step": Step(obs=rlpipe.arange(2.0), note="n", batch_size=[2])}, tmp_path / "x.pt")
    back = rlpipe.load(tmp_path / "x.pt")
    assert isinstance(back["td"].get("s"), NonTensorStack) and back["td"].get("s").tolist() == ["left", "right"]
    assert type(back["step"]) is Step and back["step"].obs.tolist() == [0.0, 1.0] and back["step"].note == "n"


def test_an_object_save_cannot_store_is_refused_by_path(tmp_path):
    with pytest.raises(TypeError, match=r"cannot store object of type 'object' at \['entries'\]\['s'\]\['data'\]"):
        rlpipe.save(TensorDict({"s": object()}, []), tmp_path / "y.pt")
