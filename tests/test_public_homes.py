"""The modules split into parts (specs, samplers, ``Module``) stay the public homes of their classes:
every class names its home as ``__module__``, is found there by its ``__qualname__``, and pickles
record that path, never a part's."""
import copy
import importlib
import pickle

import pytest

import rlpipe
from rlpipe import nn
from rlpipe.data.replay_buffers import samplers
from rlpipe.envs import specs
from rlpipe.nn.modules import module

HOMES = [specs, samplers, module]
PARTS = [b"_specs_base", b"_specs_leaves", b"_sampler_base", b"_prioritized_sampler", b"_slice_samplers",
         b"_module_state", b"_module_traversal", b"_module_backward_hooks"]


def home_classes(home):
    """The classes ``home`` exports (its ``__all__``, and ``module``'s private ones users meet)."""
    names = list(home.__all__) + (["_IncompatibleKeys", "BackwardHookFunction", "_BackwardHook"]
                                  if home is module else [])
    return [getattr(home, name) for name in names if isinstance(getattr(home, name), type)]


@pytest.mark.parametrize("home", HOMES, ids=lambda m: m.__name__)
def test_classes_name_their_public_home(home):
    classes = home_classes(home)
    assert len(classes) >= 3
    for cls in classes:
        if cls.__module__ == "rlpipe._utils":  # the ``unavailable`` stand-ins, made by a helper there
            continue
        assert cls.__module__ == home.__name__, cls
        assert getattr(importlib.import_module(cls.__module__), cls.__qualname__) is cls


def round_trip(obj, home):
    data = pickle.dumps(obj)
    assert home.__name__.encode() in data
    assert not [part for part in PARTS if part in data]
    return pickle.loads(data)


def test_specs_pickle_through_their_home():
    spec = specs.Composite(obs=specs.Bounded(-1.0, 2.0, shape=(3,)), action=specs.OneHot(4))
    again = round_trip(spec, specs)
    assert again == spec and type(again["obs"]) is specs.BoundedContinuous
    assert copy.deepcopy(spec) == spec


def test_samplers_pickle_through_their_home():
    sampler = samplers.SliceSampler(num_slices=2, traj_key="episode")
    again = round_trip(sampler, samplers)
    assert type(again) is samplers.SliceSampler and again.num_slices == 2
    prioritized = round_trip(samplers.PrioritizedSampler(8, alpha=0.7, beta=0.5), samplers)
    assert isinstance(prioritized, samplers.Sampler) and prioritized.state_dict()["alpha"] == 0.7


def test_module_state_and_keys_pickle_through_their_home():
    layer = nn.Linear(3, 2)
    keys = layer.load_state_dict(nn.Linear(3, 2).state_dict())
    assert repr(round_trip(keys, module)) == "<All keys matched successfully>"
    again = pickle.loads(pickle.dumps(layer))
    assert rlpipe.equal(again.weight, layer.weight) and list(again.state_dict()) == ["weight", "bias"]
