"""Writer generations (``track_generations=True``) as torchrl 0.14: per-slot stamps that advance
with every write, kept on the storage. Expected values recorded from torchrl 0.14.1."""
import pytest

import rlpipe
from rlpipe.data import (LazyTensorStorage, ListStorage, ReplayBuffer, RoundRobinWriter, TensorDictMaxValueWriter,
                         TensorDictReplayBuffer, TensorDictRoundRobinWriter)
from rlpipe.data._checkpoint import save_state
from rlpipe.tensordict import TensorDict


def _tracking(storage):
    return ReplayBuffer(storage=storage, writer=RoundRobinWriter(track_generations=True))


def test_extend_wrapping_twice_then_empty():
    rb = _tracking(LazyTensorStorage(4))
    assert rb.writer.tracks_generations is True
    assert rb.extend(rlpipe.arange(10)).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert rb.writer.generations_of(rlpipe.arange(4)).tolist() == [2, 2, 1, 1]
    rb.empty()
    assert rb.writer.generations_of(rlpipe.arange(4)).tolist() == [3, 3, 2, 2]


def test_list_storage_unwritten_and_out_of_range_slots_are_minus_one():
    rb = _tracking(ListStorage(5))
    rb.extend([rlpipe.tensor(i) for i in range(7)])
    assert rb.writer.generations_of(rlpipe.arange(6)).tolist() == [1, 1, 0, 0, 0, -1]
    assert rb.writer.generations_of(rlpipe.tensor([-5, -1, 100])).tolist() == [-1, -1, -1]


def test_multidim_storage_and_sample_info():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12, ndim=2),
                                writer=TensorDictRoundRobinWriter(track_generations=True))
    index = rb.extend(TensorDict({"a": rlpipe.zeros(6, 3)}, [6, 3]))
    assert tuple(index.shape) == (18, 2)
    assert rb.writer.generations_of(rlpipe.arange(4)).tolist() == [1, 0, -1, -1]
    assert rb.writer.generations_of(index).shape == (18,)  # coordinate rows: their dim-0 part
    sample, info = rb.sample(5, return_info=True)
    assert sorted(sample.keys()) == ["a", "index", "index_generation"]
    assert info["index_generation"].tolist() == rb.writer.generations_of(info["index"]).tolist()


def test_shared_storage_stamps_advance_through_any_writer():
    storage = LazyTensorStorage(4)
    tracking, plain = _tracking(storage), ReplayBuffer(storage=storage)
    index = tracking.extend(rlpipe.arange(4))
    before = tracking.writer.generations_of(index).tolist()
    plain.extend(rlpipe.arange(10, 12))
    assert before == [0, 0, 0, 0]
    assert tracking.writer.generations_of(index).tolist() == [1, 1, 0, 0]
    assert plain.writer.generations_of(index).tolist() == [-1] * 4  # not tracking: no stamps
    sample, info = plain.sample(2, return_info=True)
    assert "index_generation" not in info


def test_non_tracking_writers_report_minus_one():
    writer = TensorDictMaxValueWriter(rank_key="key")
    assert writer.tracks_generations is False
    assert writer.generations_of(rlpipe.arange(3)).tolist() == [-1, -1, -1]


def test_write_at_state_dict_and_dumps_roundtrip(tmp_path):
    rb = _tracking(LazyTensorStorage(4))
    rb.extend(rlpipe.arange(4))
    rb.writer.write_at(rlpipe.tensor([0, 1]), rlpipe.tensor([10, 11]))
    assert rb.storage[:4].tolist() == [10, 11, 2, 3]
    assert rb.writer.generations_of(rlpipe.arange(4)).tolist() == [1, 1, 0, 0]
    rb2 = _tracking(LazyTensorStorage(4))
    rb2.load_state_dict(rb.state_dict())
    assert rb2.writer.generations_of(rlpipe.arange(4)).tolist() == [1, 1, 0, 0]
    rb.dumps(tmp_path / "rb")
    rb3 = _tracking(LazyTensorStorage(4))
    rb3.loads(tmp_path / "rb")
    assert rb3.writer.generations_of(rlpipe.arange(4)).tolist() == [1, 1, 0, 0]
    writer = RoundRobinWriter(track_generations=True)  # no storage yet: the writer keeps them
    writer._cursor, writer._generation = 2, rlpipe.tensor([3, 2, 2, 1])
    writer.dumps(tmp_path / "w")
    loaded = RoundRobinWriter(track_generations=True)
    loaded.loads(tmp_path / "w")
    assert loaded._cursor == 2
    assert loaded.generations_of(rlpipe.arange(4)).tolist() == [3, 2, 2, 1]


def test_bad_inputs(tmp_path):
    with pytest.raises(TypeError, match="track_generations must be a bool, got int"):
        RoundRobinWriter(track_generations=1)
    rb = _tracking(LazyTensorStorage(4))
    rb.extend(rlpipe.arange(4))
    with pytest.raises(TypeError, match="index must hold integers, got dtype float32"):
        rb.writer.generations_of(rlpipe.tensor([0.5]))
    with pytest.raises(ValueError, match="'_writer' must be a dict .*, got list"):
        rb.load_state_dict(dict(rb.state_dict(), _writer=[1]))
    assert rb.writer.generations_of(rlpipe.arange(2)).tolist() == [0, 0]  # still usable
    ndim2 = TensorDictReplayBuffer(storage=LazyTensorStorage(12, ndim=2),
                                   writer=TensorDictRoundRobinWriter(track_generations=True))
    ndim2.extend(TensorDict({"a": rlpipe.zeros(4, 3)}, [4, 3]))
    with pytest.raises(ValueError, match="write_at: .* ndim=1, this one has ndim=2"):
        ndim2.writer.write_at(rlpipe.tensor([0]), TensorDict({"a": rlpipe.zeros(1, 3)}, [1, 3]))
    save_state(tmp_path, {"other": 1})
    with pytest.raises(ValueError, match="loads: .* holds no RoundRobinWriter state .*_cursor.*, got \\[.other.\\]"):
        RoundRobinWriter().loads(tmp_path)


def test_max_value_writer_dumps_and_loads(tmp_path):
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="key"))
    rb.extend(TensorDict({"key": rlpipe.tensor([0.5, 0.1, 0.9, 0.7])}, [4]))
    rb.writer.dumps(tmp_path / "w")
    rb.writer.dumps(tmp_path / "w")  # twice: replaced
    other = TensorDictMaxValueWriter(rank_key="key")
    other.loads(tmp_path / "w")
    assert sorted(other._current_top_values) == sorted(rb.writer._current_top_values)
    assert sorted(r for r, _ in other._current_top_values) == pytest.approx([0.5, 0.7, 0.9])
    (tmp_path / "bad").mkdir()
    save_state(tmp_path / "bad", {"_cursor": 0})
    with pytest.raises(ValueError, match="holds no TensorDictMaxValueWriter state .*_current_top_values"):
        other.loads(tmp_path / "bad")
