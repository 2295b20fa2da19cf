"""torchrl 0.14's ``torchrl.checkpoint`` API on rlpipe (``rlpipe.checkpoint``): components saved and
restored through their adapters, directory and archive containers, selection and strictness."""
import json
import random
import zipfile

import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.checkpoint import (Checkpoint, CheckpointAdapter, CheckpointError, CheckpointOptions, GlobalRNGState,
                               StateDictCheckpointAdapter)
from rlpipe.data import LazyTensorStorage, ReplayBuffer


def _trained():
    policy = nn.Linear(4, 2)
    optimizer = rlpipe.optim.Adam(policy.parameters(), lr=1e-2)
    policy(rlpipe.ones(3, 4)).sum().backward()
    optimizer.step()
    return policy, optimizer


def test_directory_round_trip_of_every_kind_of_component(tmp_path):
    policy, optimizer = _trained()
    progress, config = {"frames": 128}, {"lr": 1e-2}
    path = Checkpoint(policy=policy, optimizer=optimizer, trainer_state=progress, config=config,
                      rng=GlobalRNGState()).save(tmp_path / "step-128")
    assert path == tmp_path / "step-128" and (path / "manifest.json").is_file()
    expected = [random.random(), float(np.random.rand()), rlpipe.rand(3).tolist()]

    new_policy = nn.Linear(4, 2)
    new_optimizer = rlpipe.optim.Adam(new_policy.parameters(), lr=1e-2)
    new_progress = {"frames": 0}
    result = Checkpoint(policy=new_policy, optimizer=new_optimizer, trainer_state=new_progress, config={},
                        rng=GlobalRNGState()).load(path)
    assert result.loaded == {"policy", "optimizer", "trainer_state", "config", "rng"} and not result.missing
    assert rlpipe.equal(new_policy.weight, policy.weight) and rlpipe.equal(new_policy.bias, policy.bias)
    state, new_state = optimizer.state_dict()["state"][0], new_optimizer.state_dict()["state"][0]
    assert int(new_state["step"]) == int(state["step"]) == 1 and rlpipe.equal(new_state["exp_avg"], state["exp_avg"])
    assert new_progress == {"frames": 128}                       # updated in place
    assert [random.random(), float(np.random.rand()), rlpipe.rand(3).tolist()] == expected  # generators restored


def test_selected_components_and_the_tutorials_assertions(tmp_path):
    policy, optimizer = _trained()
    path = Checkpoint(policy=policy, optimizer=optimizer, trainer_state={"frames": 1}, rng=GlobalRNGState(),
                      config={"a": 1}).save(tmp_path / "ckpt")
    restored = nn.Linear(4, 2)
    result = Checkpoint(policy=restored).load(path, components={"policy"}, map_location="cpu")
    assert result.loaded == {"policy"} and result.unrequested == {"config", "optimizer", "rng", "trainer_state"}
    assert rlpipe.equal(restored.weight, policy.weight)


def test_archive_container(tmp_path):
    policy, _ = _trained()
    path = Checkpoint(policy=policy, meta={"run": "x"}).save(tmp_path / "c.torchrl", format="archive")
    assert zipfile.is_zipfile(path) and Checkpoint.manifest(path)["container"] == "archive"
    restored = nn.Linear(4, 2)
    meta = {}
    assert Checkpoint(policy=restored, meta=meta).load(path).loaded == {"policy", "meta"}
    assert rlpipe.equal(restored.weight, policy.weight) and meta == {"run": "x"}


@pytest.mark.parametrize("payload_format, file", [("directory", "state/state.pt"), ("archive", "state.tdz"),
                                                  ("consolidated", "state.tdc"), ("torch", "state.pt")])
def test_state_dict_payload_formats(tmp_path, payload_format, file):
    policy, _ = _trained()
    path = Checkpoint().register("policy", policy,
                                 adapter=StateDictCheckpointAdapter(payload_format=payload_format)).save(tmp_path / "p")
    record = Checkpoint.manifest(path)["components"]["policy"]
    assert record["files"] == [file] and record["adapter"] == "torchrl.state_dict"
    restored = nn.Linear(4, 2)
    Checkpoint(policy=restored).load(path)  # the default adapter finds any payload
    assert rlpipe.equal(restored.bias, policy.bias)


class _Cursor:
    def __init__(self, offset=0):
        self.offset = offset


class _CursorAdapter(CheckpointAdapter):
    adapter_id = "tutorial.cursor"

    def save(self, component, path, *, args, kwargs):
        path.mkdir(parents=True, exist_ok=True)
        (path / "cursor.json").write_text(json.dumps(component.offset + kwargs.get("shift", 0)))

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        component.offset = json.loads((path / "cursor.json").read_text())


def test_custom_adapter_and_options(tmp_path):
    path = Checkpoint().register("cursor", _Cursor(7), adapter=_CursorAdapter(),
                                 options=CheckpointOptions(save_kwargs={"shift": 1})).save(tmp_path / "c")
    restored = _Cursor()
    Checkpoint().register("cursor", restored, adapter=_CursorAdapter()).load(path)
    assert restored.offset == 8


def test_replay_buffer_through_dump_and_load(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(rlpipe.arange(4.0))
    path = Checkpoint(buffer=rb).save(tmp_path / "rb")
    assert Checkpoint.manifest(path)["components"]["buffer"]["adapter"] == "torchrl.dump_load"
    other = ReplayBuffer(storage=LazyTensorStorage(10))
    other.extend(rlpipe.zeros(1))
    Checkpoint(buffer=other).load(path)
    assert other[:].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_missing_components_by_strictness(tmp_path):
    path = Checkpoint(config={"a": 1}).save(tmp_path / "c")
    checkpoint = Checkpoint(config={}, policy=nn.Linear(1, 1))
    with pytest.raises(CheckpointError, match=r"Checkpoint restore issues: missing=\['policy'\]") as info:
        checkpoint.load(path)
    assert info.value.result.missing == {"policy"}
    result = checkpoint.load(path, strict="ignore")
    assert result.missing == {"policy"} and result.loaded == {"config"}


@pytest.mark.parametrize("call, error, message", [
    (lambda: Checkpoint(format="tar"), ValueError, "format must be one of"),
    (lambda: Checkpoint(strict="maybe"), ValueError, "strict must be one of"),
    (lambda: Checkpoint(a=1).register("a", 2), KeyError, "'a' is already registered"),
    (lambda: Checkpoint().register("a/b", 1), ValueError, "without path separators, got 'a/b'"),
    (lambda: Checkpoint().register("a", 1, adapter=object()), TypeError, "adapter must be a CheckpointAdapter"),
    (lambda: StateDictCheckpointAdapter("zip"), ValueError, "payload_format must be"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_bad_paths_and_components(tmp_path):
    with pytest.raises(TypeError, match="No checkpoint adapter could be inferred for object"):
        Checkpoint(thing=object()).save(tmp_path / "x")
    assert not (tmp_path / "x").exists()  # nothing half-written
    with pytest.raises(KeyError, match=r"Unregistered checkpoint components: \['nope'\]"):
        Checkpoint(a=1).save(tmp_path / "y", components={"nope"})
    (tmp_path / "plain").mkdir()
    with pytest.raises(CheckpointError, match="Invalid checkpoint manifest"):
        Checkpoint.manifest(tmp_path / "plain")
    assert not Checkpoint.is_checkpoint(tmp_path / "plain")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Checkpoint.manifest(tmp_path / "absent")
