"""@tensorclass and TensorClass: fields over a TensorDict, forwarded methods, nesting, conversions,
replay-buffer items. Expected values are worked out by hand from the inputs."""
import dataclasses
import inspect
import pickle

import numpy as np
import pytest

import rlpipe
from rlpipe import Tensor
from rlpipe.data import LazyTensorStorage, ReplayBuffer
from rlpipe.tensordict import TensorClass, TensorDict, is_tensor_collection, is_tensorclass, tensorclass
from rlpipe.tensordict.tensorclass import from_dataclass


@tensorclass
class Point:
    x: Tensor
    label: str = "p"


class Pair(TensorClass):
    a: Tensor
    b: Tensor = None


class Outer(TensorClass):
    point: Point
    weight: Tensor


def make_point(n=3):
    return Point(x=rlpipe.arange(float(2 * n)).reshape(n, 2), label="origin", batch_size=[n])


def test_fields_defaults_and_storage():
    p = make_point()
    assert p.x.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert p.label == "origin"
    assert p.batch_size == rlpipe.Size([3]) and p.shape == (3,) and p.device is None
    assert isinstance(p._tensordict, TensorDict)
    assert set(p._tensordict.keys()) == {"x", "label"}
    q = Point(rlpipe.zeros(2), batch_size=[2])  # positional field, default label
    assert q.label == "p"
    pair = Pair(a=rlpipe.ones(2), batch_size=[2])
    assert pair.b is None and "b" not in pair._tensordict.keys()


def test_is_tensorclass_and_collection():
    p = make_point()
    assert is_tensorclass(p) and is_tensorclass(Point) and is_tensorclass(Pair)
    assert not is_tensorclass(TensorDict({}, [])) and not is_tensorclass(rlpipe.zeros(1))
    assert is_tensor_collection(p) and not isinstance(p, TensorDict)
    assert [f.name for f in Point.fields()] == ["x", "label"]
    assert dataclasses.is_dataclass(p) and [f.name for f in dataclasses.fields(p)] == ["x", "label"]
    assert dataclasses.fields(Point)[1].default == "p"


def test_assignment_and_none():
    p = make_point()
    p.x = rlpipe.full((3, 2), 7.0)
    assert p.x.sum().item() == 42.0
    p.label = "moved"
    assert p.label == "moved"
    pair = Pair(a=rlpipe.ones(2), b=rlpipe.zeros(2), batch_size=[2])
    pair.b = None
    assert pair.b is None and list(pair._tensordict.keys()) == ["a"]
    # numbers become tensors (no nocast), as in tensordict
    single = Pair(a=rlpipe.ones(()))
    single.b = 3
    assert isinstance(single.b, Tensor) and single.b.item() == 3 and single.b.dtype == rlpipe.int64


def test_indexing_and_setitem():
    p = make_point()
    row = p[1]
    assert type(row) is Point and row.batch_size == () and row.x.tolist() == [2.0, 3.0] and row.label == "origin"
    sub = p[rlpipe.tensor([2, 0])]
    assert sub.x.tolist() == [[4.0, 5.0], [0.0, 1.0]]
    p[0] = Point(x=rlpipe.tensor([9.0, 8.0]), label="origin", batch_size=[])
    assert p.x[0].tolist() == [9.0, 8.0]
    with pytest.raises(ValueError, match="Invalid indexing arguments: x"):  # tensordict's: fields are attributes
        p["x"]
    assert len(p) == 3 and [r.x[0].item() for r in p] == [9.0, 2.0, 4.0]


def test_forwarded_methods():
    p = make_point()
    c = p.clone()
    c.x += 1
    assert p.x[0, 0].item() == 0.0 and c.x[0, 0].item() == 1.0 and type(c) is Point
    doubled = p.apply(lambda t: t * 2)
    assert type(doubled) is Point and doubled.x.tolist() == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
    parts = p.unbind(0)
    assert isinstance(parts, tuple) and len(parts) == 3 and all(type(r) is Point for r in parts)
    assert parts[2].x.tolist() == [4.0, 5.0]
    pair = Pair(a=rlpipe.arange(6.0), batch_size=[6])
    shaped = pair.reshape(2, 3)
    assert shaped.batch_size == (2, 3) and shaped.a.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert p.to("cpu").x.tolist() == p.x.tolist()
    other = Pair(a=rlpipe.full((6,), 5.0), batch_size=[6])
    assert pair.update(other) is pair and pair.a.tolist() == [5.0] * 6
    assert pair.get("a").tolist() == [5.0] * 6
    pair.set("b", rlpipe.ones(6))
    assert pair.b.sum().item() == 6.0


def test_stack_and_cat_through_rlpipe():
    p = make_point()
    stacked = rlpipe.stack([p, p], 0)
    assert type(stacked) is Point and stacked.batch_size == (2, 3)
    assert stacked.x[1, 2].tolist() == [4.0, 5.0]
    joined = rlpipe.cat([p, p[:1]], 0)
    assert type(joined) is Point and joined.batch_size == (4,) and joined.x[3].tolist() == [0.0, 1.0]


def test_nested_tensorclass():
    outer = Outer(point=make_point(), weight=rlpipe.tensor([1.0, 2.0, 3.0]), batch_size=[3])
    assert type(outer.point) is Point and outer.point.label == "origin"
    assert isinstance(outer._tensordict.get("point"), TensorDict)
    row = outer[2]
    assert type(row.point) is Point and row.point.x.tolist() == [4.0, 5.0] and row.weight.item() == 3.0
    assert outer.get(("point", "x")).shape == (3, 2)
    outer.set(("point", "x"), rlpipe.zeros(3, 2))
    assert outer.point.x.sum().item() == 0.0
    # a dict for a tensorclass-typed field becomes that class
    built = Outer(point={"x": rlpipe.ones(3, 1)}, weight=rlpipe.ones(3), batch_size=[3])
    assert type(built.point) is Point and built.point.x.shape == (3, 1)


def test_conversions():
    p = make_point(2)
    d = p.to_dict()
    assert list(d) == ["x", "label"] and d["label"] == "origin" and d["x"].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    td = p.to_tensordict()
    assert type(td) is TensorDict and td["x"].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    back = Point.from_tensordict(td)
    assert type(back) is Point and back.label == "origin"
    q = Pair.from_dict({"a": rlpipe.tensor([[1.0], [2.0]]), "b": None}, batch_size=[2])
    assert q.a.tolist() == [[1.0], [2.0]] and q.b is None and q.batch_size == (2,)
    as_dict = Pair(a=rlpipe.ones(2), batch_size=[2]).to_dict()
    assert list(as_dict) == ["a", "b"] and as_dict["b"] is None and as_dict["a"].tolist() == [1.0, 1.0]
    assert list(Pair(a=rlpipe.ones(2), batch_size=[2]).to_dict(retain_none=False)) == ["a"]


def test_equality_and_repr():
    p = make_point(2)
    eq = p == p.clone()
    assert type(eq) is Point and eq.x.all().item()
    assert (p != p.apply(lambda t: t + 1)).x.all().item()
    text = repr(Pair(a=rlpipe.zeros(2), batch_size=[2]))
    assert text == ("Pair(\n"
                    "    a=Tensor(shape=rlpipe.Size([2]), device=cpu, dtype=rlpipe.float32, is_shared=False),\n"
                    "    b=None,\n"
                    "    batch_size=rlpipe.Size([2]),\n"
                    "    device=None,\n"
                    "    is_shared=False)")


def test_memmap_and_state_dict(tmp_path):
    pair = Pair(a=rlpipe.arange(4.0), b=rlpipe.ones(4), batch_size=[4])
    pair.memmap_(str(tmp_path / "mm"))
    loaded = Pair.load_memmap(str(tmp_path / "mm"))
    assert type(loaded) is Pair and loaded.a.tolist() == [0.0, 1.0, 2.0, 3.0] and loaded.b.tolist() == [1.0] * 4
    state = Pair(a=rlpipe.full((4,), 2.0), b=rlpipe.zeros(4), batch_size=[4]).state_dict()
    target = Pair(a=rlpipe.zeros(4), b=rlpipe.zeros(4), batch_size=[4])
    assert target.load_state_dict(state) is target and target.a.tolist() == [2.0] * 4


def test_pickle_round_trip():
    p = make_point()
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is Point and q.label == "origin" and q.x.tolist() == p.x.tolist()


def test_options_autocast_nocast_frozen():
    @tensorclass(autocast=True)
    class Cast:
        t: Tensor
        n: int

    c = Cast(t=[1, 2], n="3", batch_size=[2])
    assert isinstance(c.t, Tensor) and c.t.tolist() == [1, 2] and c.n == 3

    class Keep(TensorClass["nocast"]):
        n: int

    assert Keep(n=4).n == 4 and not isinstance(Keep(n=4).n, Tensor)

    class Chain(TensorClass, autocast=True):
        t: Tensor
        link: "Chain" = None  # the class naming itself, resolved when it is built

    chain = Chain(t=1.0, link={"t": 2.0})
    assert type(chain.link) is Chain and chain.link.t.item() == 2.0 and chain.link.link is None

    @tensorclass(frozen=True)
    class Ice:
        t: Tensor

    ice = Ice(t=rlpipe.ones(1), batch_size=[1])
    assert {ice: 1}[ice] == 1 and Pair.__hash__ is None
    with pytest.raises(RuntimeError):
        ice.t = rlpipe.zeros(1)
    assert ice.t.item() == 1.0


def test_tensor_only_and_overridden_setattr():
    class Strict(TensorClass["tensor_only"]):
        t: Tensor
        td: TensorDict

    strict = Strict(t=2, td={"inner": {"v": 1.5}})
    assert isinstance(strict.t, Tensor) and strict.t.item() == 2
    assert isinstance(strict.td, TensorDict) and strict.td["inner", "v"].item() == 1.5
    seen = []

    class Logged(TensorClass):
        a: Tensor

        def __setattr__(self, name, value):
            seen.append(name)
            super().__setattr__(name, value)

    Logged(a=rlpipe.ones(1), batch_size=[1])
    assert seen == ["a"]  # the constructor sets fields through __setattr__


def test_shadow_fields_named_like_the_batch_keywords():
    @tensorclass(shadow=True)
    class Odd:
        batch_size: str
        device: str

    odd = Odd(batch_size="big", device="gpu")
    assert odd.batch_size == "big" and odd.device == "gpu" and odd._tensordict.batch_size == ()
    assert repr(odd).endswith("device=NonTensorData(data='gpu', batch_size=rlpipe.Size([]), device=None),\n"
                              "    shape=rlpipe.Size([]),\n    is_shared=False)")


def test_subclass_inherits_fields():
    class Triple(Pair):
        c: Tensor = None

    t = Triple(rlpipe.ones(1), batch_size=[1])
    assert Triple._fields == ("a", "b", "c") and t.a.item() == 1.0 and t.c is None

    class Labelled(Point):  # a subclass of a decorated class
        weight: Tensor = None

    row = Labelled(rlpipe.zeros(2), "l", rlpipe.ones(()))
    assert is_tensorclass(Labelled) and row.label == "l" and row.weight.item() == 1.0


def test_decorating_keeps_the_class():
    class Plain:
        v: Tensor

        def doubled(self):
            return self.v * 2

    assert tensorclass(Plain) is Plain and not issubclass(Plain, TensorClass)
    assert Plain(v=rlpipe.tensor([1.0, 2.0]), batch_size=[2]).doubled().tolist() == [2.0, 4.0]

    @dataclasses.dataclass
    class Record:
        n: int
        t: Tensor = None

    Made = from_dataclass(Record, autocast=True)
    assert Made is not Record and dataclasses.is_dataclass(Record) and Record(n=1).n == 1
    made = from_dataclass(Record(n=3, t=rlpipe.ones(2)))
    assert is_tensorclass(made) and made.t.tolist() == [1.0, 1.0] and isinstance(made.n, Tensor)
    assert Made(n="4").n == 4


def test_signature_and_right_operators():
    assert list(inspect.signature(Pair).parameters) == ["a", "b", "batch_size", "device", "names"]
    pair = Pair(a=rlpipe.tensor([True, False]), batch_size=[2])
    assert (True ^ pair).a.tolist() == [False, True] and (2.0 - Pair(a=rlpipe.ones(1), batch_size=[1])).a.item() == 1.0


def test_post_init_runs_on_construction_and_from_tensordict():
    class Positive(TensorClass):
        v: Tensor

        def __post_init__(self):
            if (self.v <= 0).any():
                raise ValueError(f"v must be positive, got {self.v.tolist()}")

    assert Positive(v=rlpipe.ones(2), batch_size=[2]).v.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"v must be positive, got \[-1.0\]"):
        Positive(v=-rlpipe.ones(1), batch_size=[1])
    with pytest.raises(ValueError, match="v must be positive"):
        Positive._from_tensordict(TensorDict({"v": rlpipe.zeros(1)}, [1]))
    assert Positive.from_tensordict(TensorDict({"v": rlpipe.zeros(1)}, [1])).v.tolist() == [0.0]  # no check


def test_bad_inputs():
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Pair(a=rlpipe.ones(2), z=rlpipe.ones(2), batch_size=[2])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        Pair(batch_size=[2])
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4 were given"):
        Pair(rlpipe.ones(2), rlpipe.ones(2), rlpipe.ones(2), batch_size=[2])
    pair = Pair(a=rlpipe.ones(2), batch_size=[2])
    with pytest.raises(AttributeError, match="Cannot set the attribute 'z', expected attributes are"):
        pair.z = rlpipe.ones(2)
    with pytest.raises(RuntimeError, match="batch"):
        pair.a = rlpipe.ones(3)
    assert pair.a.tolist() == [1.0, 1.0]  # the failed set left the instance as it was
    with pytest.raises(RuntimeError, match="batch"):
        Pair(a=rlpipe.ones(3), batch_size=[2])
    with pytest.raises(KeyError, match=r"\['z'\] are not fields of Pair"):
        Pair.from_tensordict(TensorDict({"a": rlpipe.ones(2), "z": rlpipe.ones(2)}, [2]))
    assert pair.get("z") is None and pair.get("z", 5) == 5  # TensorDict.get's default (tensordict 0.14)
    assert pair.get("batch_size") == (2,) and pair._non_tensordict == {"b": None}
    with pytest.raises(AttributeError, match="Attribute name apply can't be used"):
        class Clash(TensorClass):
            apply: Tensor
    with pytest.raises(ValueError, match="unknown options"):
        TensorClass["fast"]
    with pytest.raises(ValueError, match=r"same members\) assignment: Pair has fields \['a', 'b'\], the Point"):
        pair[0] = make_point(1)[0]
    assert pair.a.tolist() == [1.0, 1.0]


def test_replay_buffer_returns_the_tensorclass():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(Pair(a=rlpipe.arange(4.0), b=rlpipe.arange(4.0) * 10, batch_size=[4]))
    sample = rb.sample(5)
    assert type(sample) is Pair and sample.batch_size == (5,)
    # each sampled row keeps a and b together: b == 10 * a
    assert np.allclose(sample.b.numpy(), 10 * sample.a.numpy())
    assert type(rb[2]) is Pair and rb[2].a.item() == 2.0


def test_get_options_reach_a_lazy_stack_underneath():
    # tensordict 0.14 (test_get_lazystack): a tensorclass over a lazy stack reads ragged fields as
    # a list or zero-padded
    from rlpipe.tensordict import lazy_stack

    class Ragged(TensorClass):
        X: Tensor

    obj = Ragged.from_tensordict(lazy_stack([TensorDict(X=rlpipe.ones(3)), TensorDict(X=rlpipe.ones(2) * 2)]))
    assert [x.tolist() for x in obj.get("X", as_list=True)] == [[1.0, 1.0, 1.0], [2.0, 2.0]]
    assert obj.get("X", as_padded_tensor=True).tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 0.0]]
    assert obj.get("absent", default=None) is None


def test_state_dict_round_trip_in_tensordicts_format():
    # tensordict 0.14: dotted tensor keys, per-level _metadata with the non-tensor fields; loading
    # takes the flat, nested and older layouts and refuses a key the class does not have
    class Node(TensorClass):
        x: Tensor
        z: str
        y: "Node" = None

    tc = Node(x=rlpipe.arange(3.0), z="top", y=Node(x=rlpipe.ones(3), z="inner", batch_size=[]), batch_size=[])
    flat = tc.state_dict()
    assert list(flat) == ["x", "y.x"] and flat._metadata["y"]["_non_tensor"] == {"z": "inner"}
    nested = tc.state_dict(flatten=False)
    assert set(nested) == {"x", "y"} and nested["y"]["x"].tolist() == [1.0, 1.0, 1.0]
    other = Node(x=rlpipe.zeros(3), z="?", y=Node(x=rlpipe.zeros(3), z="?", batch_size=[]), batch_size=[])
    other.load_state_dict(flat)
    assert other.x.tolist() == [0.0, 1.0, 2.0] and other.y.x.tolist() == [1.0] * 3 and other.y.z == "inner"
    other.load_state_dict({"_tensordict": {"x": rlpipe.full((3,), 5.0), "__batch_size": ()}, "_non_tensordict": {}})
    assert other.x.tolist() == [5.0] * 3
    flat["a"] = rlpipe.zeros(1)
    with pytest.raises(KeyError, match="Key 'a' wasn't expected in the state-dict"):
        other.load_state_dict(flat)
    assert other.x.tolist() == [5.0] * 3  # nothing written


def test_memmap_folder_records_the_class_by_name_only(tmp_path):
    # tensordict 0.14 gives the tensorclass back from TensorDict.load_memmap; rlpipe records the
    # class by module and name in tensorclass.json (JSON, never pickled) and finds it among the
    # classes this process defined
    import json

    class Saved(TensorClass):
        a: Tensor
        meta: str

    Saved(a=rlpipe.arange(3.0), meta="hello", batch_size=[3]).memmap_(tmp_path / "s")
    loaded = TensorDict.load_memmap(tmp_path / "s")
    assert type(loaded) is Saved and loaded.a.tolist() == [0.0, 1.0, 2.0] and loaded.meta == "hello"
    assert json.loads((tmp_path / "s" / "tensorclass.json").read_text())["class"].endswith("Saved")
    (tmp_path / "s" / "tensorclass.json").write_text(json.dumps({"class": "nowhere:Unknown"}))
    assert type(TensorDict.load_memmap(tmp_path / "s")) is TensorDict  # an unknown class: the TensorDict


def test_a_tensordict_holds_a_tensorclass_entry():
    # tensordict 0.14 (TestNesting): the entry stays its class through stack, index, apply, split, to
    class Pose(TensorClass):
        xy: Tensor
        frame: str

    pose = Pose(xy=rlpipe.tensor([1.0, 2.0]), frame="world", batch_size=[])
    td = rlpipe.stack([TensorDict({"pose": pose, "t": rlpipe.zeros(1)}, []) for _ in range(3)], 0)
    stacked = td.get("pose")
    assert type(stacked) is Pose and stacked.batch_size == (3,) and stacked.xy.shape == (3, 2)
    assert type(td[1].get("pose")) is Pose and td[1].get("pose").frame == "world"
    moved = td.apply(lambda x: x + 1)
    assert type(moved.get("pose")) is Pose and moved.get("pose").xy.tolist() == [[2.0, 3.0]] * 3
    first, rest = td.split([2, 1], 0)
    assert type(first.get("pose")) is Pose and first.get("pose").batch_size == (2,)
    assert type(td.to("cpu").get("pose")) is Pose


def test_lazy_stack_of_tensorclasses_is_their_class():
    # tensordict 0.14: lazy_stack / maybe_dense_stack of one tensorclass give that class over a
    # lazy stack, nested tensorclass fields included
    from rlpipe.tensordict import LazyStackedTensorDict, lazy_stack

    class Obs(TensorClass):
        x: Tensor
        inner: "Obs" = None

    a = Obs(x=rlpipe.ones(3), inner=Obs(x=rlpipe.ones(3), batch_size=[]), batch_size=[])
    b = Obs(x=rlpipe.zeros(2), inner=Obs(x=rlpipe.zeros(2), batch_size=[]), batch_size=[])
    stacked = lazy_stack([a, b], 0)
    assert type(stacked) is Obs and isinstance(stacked._tensordict, LazyStackedTensorDict)
    assert type(stacked.inner) is Obs and stacked[1].inner.x.tolist() == [0.0, 0.0]
    assert [x.shape[0] for x in stacked.get("x", as_list=True)] == [3, 2]
    dense = LazyStackedTensorDict.maybe_dense_stack([a, a], 0)
    assert type(dense) is Obs and dense.x.shape == (2, 3)


def test_joining_two_tensorclasses_is_refused_as_torch_does():
    class A(TensorClass):
        x: Tensor

    class B(TensorClass):
        x: Tensor

    a, b = A(x=rlpipe.zeros(2), batch_size=[2]), B(x=rlpipe.zeros(2), batch_size=[2])
    with pytest.raises(TypeError, match=r"no implementation found for 'stack' on types that implement "
                                        r"__torch_function__: \['A', 'B'\]"):
        rlpipe.stack([a, b], 0)
    assert type(rlpipe.stack([a, a], 0)) is A


def test_vmap_maps_over_a_tensorclass_and_hands_non_tensor_fields_over():
    from typing import Any

    from rlpipe.func import vmap

    @tensorclass
    class Mapped:
        """Two tensor fields and one object."""
        x: rlpipe.Tensor
        y: rlpipe.Tensor
        note: Any

    data = Mapped(x=rlpipe.arange(12.0).reshape(3, 4), y=rlpipe.ones(3, 4), note="a string!", batch_size=[3, 4])
    seen = []

    def row_sum(item):
        seen.append((type(item), tuple(item.batch_size), item.note))
        return item.x.sum() + item.y.sum()
    assert vmap(row_sum)(data).tolist() == [10.0, 26.0, 42.0]  # each row: sum(x) + 4
    assert seen == [(Mapped, (4,), "a string!")]
    same = vmap(lambda item: item)(data)
    assert type(same) is Mapped and same.batch_size == (3, 4) and same.note == "a string!" and (same == data).all()
    td = TensorDict({"x": rlpipe.ones(2, 3), "tag": "t"}, [2])
    assert vmap(lambda t: t["x"].sum() if t["tag"] == "t" else -1)(td).tolist() == [3.0, 3.0]
