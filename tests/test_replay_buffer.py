"""rlpipe.data replay buffers, checked against independent references.

1. the sum-tree against brute force: ``np.searchsorted(np.cumsum(leaves), mass, side="right")``
   for draws, Python loops for updates with repeated indices, sums and minima over the leaves;
2. prioritized sampling frequencies against ``p**alpha / sum(p**alpha)`` (chi-square, fixed seed),
   importance weights computed by hand, new items at the max priority;
3. ring-buffer contents against a Python-list simulation, nested keys, dtype casts;
4. LazyMemmapStorage reopened by a new object, dumps/loads and state_dict round trips;
5. every bad input: error type and message, and the buffer unchanged afterwards;
6. MultiStep as a buffer transform against the non-streaming MultiStep on the concatenated data.
"""
import os

import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.data import (LazyMemmapStorage, LazyTensorStorage, ListStorage, PrioritizedReplayBuffer,
                         PrioritizedSampler, RandomSampler, ReplayBuffer, SamplerWithoutReplacement, SumMinTree,
                         TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer)
from rlpipe.envs.transformed_env import Transform
from rlpipe.postprocs import MultiStep
from td_helpers import arr, leaves


def transitions(n, start=0, item_batch=()):
    """n CartPole-like transitions whose values encode their frame number ``start + i``."""
    ids = np.arange(start, start + n)
    shape = (n,) + item_batch
    frame = np.broadcast_to(ids.reshape((n,) + (1,) * len(item_batch)), shape)

    def t(a):
        return rlpipe.tensor(np.ascontiguousarray(a))
    return TensorDict({
        "observation": t(np.repeat(frame[..., None], 4, -1).astype(np.float32)),
        "action": t(np.repeat(frame[..., None] % 2, 2, -1).astype(np.int64)),
        "next": {"observation": t(np.repeat(frame[..., None] + 1, 4, -1).astype(np.float32)),
                 "reward": t(frame[..., None].astype(np.float32) / 10),
                 "done": t((frame[..., None] % 7) == 6)},
    }, batch_size=list(shape))


def contents(rb):
    """{key: array} of everything stored, by storage position."""
    return {k: arr(v) for k, v in leaves(rb[:]).items()}


def plain(x):
    """Tensors, TensorDicts and arrays (nested in lists and dicts) as NumPy arrays, to compare."""
    if isinstance(x, TensorDict):
        return {k: arr(v) for k, v in leaves(x).items()}
    if isinstance(x, (rlpipe.Tensor, np.ndarray)):
        return arr(x)
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x


def snapshot(rb):
    """Everything a failed call must leave unchanged: contents, length, cursor, sampler state."""
    return plain(dict(rb.state_dict(), len=len(rb)))


def assert_same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


# ----------------------------------------------------------------------------------------------
# 1. sum-tree


class DeepTree(SumMinTree):
    TOP = 1  # every level but the root's children by the per-level (scattered) path


@pytest.mark.parametrize("tree_cls", [SumMinTree, DeepTree])
@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 1000, 1025, 5000])
def test_sum_tree_draws_and_updates_match_brute_force(tree_cls, capacity):
    rng = np.random.default_rng(capacity)
    tree = tree_cls(capacity)
    values = np.zeros(capacity)
    for step in range(6):
        k = int(rng.integers(1, 40))
        if step == 2:  # a contiguous run (a ring-buffer write)
            start = int(rng.integers(0, capacity))
            index = np.arange(start, min(start + k, capacity))
        else:  # scattered, with repeats: the last value wins
            index = rng.integers(0, capacity, k)
        new = rng.integers(1, 20, len(index)).astype(np.float64)  # integers: every sum is exact
        tree.update(index, new, unique=step == 2)
        for i, v in zip(index, new):
            values[i] = v
        assert tree.total == values.sum()
        written = values[values > 0]
        assert tree.min == written.min()
        np.testing.assert_array_equal(tree.leaves(), values)
        mass = np.concatenate([rng.random(200) * values.sum(), np.cumsum(values)[:-1][:50]])  # and exact edges
        mass = mass[mass < values.sum()]
        expected = np.searchsorted(np.cumsum(values), mass, side="right")
        np.testing.assert_array_equal(tree.find(mass), expected)
    rebuilt = tree_cls(capacity)
    rebuilt.load(values)
    np.testing.assert_array_equal(rebuilt._sum, tree._sum)
    np.testing.assert_array_equal(rebuilt._min, tree._min)


# ----------------------------------------------------------------------------------------------
# 2. prioritized sampling


def prioritized_buffer(n=8, capacity=16, alpha=0.6, beta=0.4, eps=1e-8, batch_size=None):
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=PrioritizedSampler(capacity, alpha, beta,
                                                                                                eps),
                                batch_size=batch_size)
    rb.extend(transitions(n))
    return rb


def test_prioritized_frequencies_follow_priorities():
    alpha = 0.6
    rb = prioritized_buffer(alpha=alpha)
    priority = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 0.1, 3.0, 1.5])
    rb.update_priority(np.arange(8), rlpipe.tensor(priority))
    rlpipe.manual_seed(0)
    counts = np.zeros(8)
    for _ in range(20):
        counts += np.bincount(arr(rb.sample(10_000)["index"]), minlength=8)
    p = (priority + 1e-8) ** alpha
    expected = counts.sum() * p / p.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 24.3, (chi2, counts, expected)  # the 0.999 quantile with 7 degrees of freedom


def test_importance_weights_by_hand():
    alpha, beta, eps = 0.7, 0.5, 1e-3
    rb = prioritized_buffer(n=5, alpha=alpha, beta=beta, eps=eps)
    priority = np.array([3.0, 0.2, 1.0, 6.0, 0.0])
    rb.update_priority([0, 1, 2, 3, 4], priority)
    sample, info = rb.sample(64, return_info=True)
    p = (priority + eps) ** alpha
    prob = p / p.sum()
    w = (5 * prob) ** -beta
    expected = (w / w.max())[arr(sample["index"])]
    np.testing.assert_allclose(arr(sample["priority_weight"]), expected, rtol=1e-6)
    assert sample["priority_weight"].dtype == rlpipe.float32 and sample["index"].dtype == rlpipe.int64
    np.testing.assert_array_equal(arr(info["priority_weight"]), arr(sample["priority_weight"]))


def test_new_items_get_the_max_priority():
    alpha, eps = 0.5, 1e-8
    rb = prioritized_buffer(n=2, alpha=alpha, eps=eps)
    tree = rb.sampler._tree
    np.testing.assert_allclose(tree.leaves()[:2], (1.0 + eps) ** alpha)  # 1.0 before any priority
    rb.update_priority([0, 1], [7.0, 2.0])
    rb.update_priority([1], [3.0])  # the max is over every priority given, not the current ones
    rb.update_priority([0], [0.5])
    rb.extend(transitions(2, start=2))
    np.testing.assert_allclose(tree.leaves()[:4], np.array([0.5, 3.0, 7.0, 7.0]) ** alpha, rtol=1e-7)


def test_priorities_from_the_priority_key_and_tensordict_update():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(10),
                                           batch_size=4)
    data = transitions(3, item_batch=(2,))
    data.set("td_error", rlpipe.tensor([[1.0, 4.0], [2.0, 0.5], [3.0, 3.0]]))
    index = rb.extend(data)
    np.testing.assert_array_equal(arr(index), [0, 1, 2])
    assert "index" not in data.keys()  # torchrl 0.14 leaves the given TensorDict unchanged
    np.testing.assert_array_equal(arr(rb[:3]["index"]), [[0, 0], [1, 1], [2, 2]])  # rb[index] carries it
    np.testing.assert_array_equal(rb.sampler._tree.leaves()[:3], [4.0, 2.0, 3.0])  # per-row max
    sample = rb.sample()
    assert sample.batch_size == rlpipe.Size([4, 2]) and sample["priority_weight"].shape == rlpipe.Size([4, 2])
    sample.set("td_error", rlpipe.ones(4, 2) * 9)
    rb.update_tensordict_priority(sample)
    touched = np.unique(arr(sample["index"])[:, 0])
    np.testing.assert_array_equal(rb.sampler._tree.leaves()[touched], 9.0)
    rb.extend(sample)  # a sample goes back in: "index" is rewritten with the new positions, as in torchrl;
    assert set(rb.storage[:].keys()) == set(data.keys()) | {"index"}  # "priority_weight" is never stored


def test_plain_prioritized_replay_buffer_and_return_info():
    rb = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(4), batch_size=3)
    rb.extend(rlpipe.arange(4).float())
    rb.update_priority([0, 1, 2, 3], [0.0, 0.0, 0.0, 5.0])
    rlpipe.manual_seed(1)
    data, info = rb.sample(return_info=True)
    np.testing.assert_array_equal(arr(data), [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(arr(info["index"]), [3, 3, 3])


# ----------------------------------------------------------------------------------------------
# 3. storages


def test_ring_buffer_wraps_like_a_list_simulation():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(5), batch_size=2)
    slots, cursor, start = [None] * 5, 0, 0
    for n in (3, 4, 1, 7, 2):
        index = rb.extend(transitions(n, start=start))
        expected_index = [(cursor + i) % 5 for i in range(n)]
        np.testing.assert_array_equal(arr(index), expected_index)
        for i in range(n):
            slots[(cursor + i) % 5] = start + i
        cursor, start = (cursor + n) % 5, start + n
        filled = [s for s in slots if s is not None]
        assert len(rb) == len(filled)
        got = contents(rb)
        np.testing.assert_array_equal(got[("observation",)][:, 0], filled)
        np.testing.assert_array_equal(got[("next", "observation")][:, 0], np.array(filled) + 1)
        np.testing.assert_array_equal(got[("next", "done")][:, 0], np.array(filled) % 7 == 6)
    sample = rb.sample()
    obs = arr(sample["observation"])[:, 0]
    np.testing.assert_array_equal(obs, np.array(slots)[arr(sample["index"])])  # rows match their index


def test_item_batch_dims_casts_and_tensor_data():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(6), batch_size=3)
    rb.extend(transitions(2, item_batch=(3,)))
    batch = transitions(2, start=2, item_batch=(3,))
    batch.set("action", batch["action"].to(rlpipe.int32))  # int32 into the int64 storage: same kind
    rb.extend(batch)
    stored = rb[:]
    assert stored["action"].dtype == rlpipe.int64 and stored.batch_size == rlpipe.Size([4, 3])
    np.testing.assert_array_equal(arr(stored["observation"])[:, :, 0], np.repeat(np.arange(4)[:, None], 3, 1))
    tensors = ReplayBuffer(storage=LazyTensorStorage(3), batch_size=2)
    tensors.extend(rlpipe.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert tensors.add(rlpipe.tensor([5.0, 6.0])) == 2
    np.testing.assert_array_equal(arr(tensors[:]), [[1, 2], [3, 4], [5, 6]])
    assert tensors.sample().shape == rlpipe.Size([2, 2])


def test_list_storage_holds_any_object():
    rb = ReplayBuffer(storage=ListStorage(3), batch_size=4)
    rb.extend(["a", 1, (2, 3)])
    assert rb.add({"x": 4}) == 0  # wrapped around
    assert rb[:] == [{"x": 4}, 1, (2, 3)]
    assert len(rb.sample()) == 4
    tensors = ReplayBuffer(storage=ListStorage(), batch_size=5)
    tensors.extend([rlpipe.tensor([i, i]) for i in range(3)])
    assert tensors.sample().shape == rlpipe.Size([5, 2])  # tensors come back stacked
    tds = TensorDictReplayBuffer(storage=ListStorage(10), batch_size=4)
    tds.extend(transitions(3))
    sample = tds.sample()
    np.testing.assert_array_equal(arr(sample["observation"])[:, 0], arr(sample["index"]))


def test_memmap_storage_reopens_in_a_new_object(tmp_path):
    scratch = tmp_path / "scratch"
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(5, scratch_dir=scratch), batch_size=2)
    rb.extend(transitions(7))  # wraps: positions hold frames 5, 6, 2, 3, 4
    before = contents(rb)
    del rb
    reopened = TensorDictReplayBuffer(storage=LazyMemmapStorage(5, scratch_dir=scratch), batch_size=2)
    assert len(reopened) == 5 and reopened.storage._cursor == 2
    assert_same(contents(reopened), before)
    reopened.extend(transitions(1, start=7))  # goes on at the cursor
    np.testing.assert_array_equal(contents(reopened)[("observation",)][:, 0], [5, 6, 7, 3, 4])
    assert reopened.sample().batch_size == rlpipe.Size([2])
    with pytest.raises(ValueError, match="max_size=5, this storage has max_size=6"):
        LazyMemmapStorage(6, scratch_dir=scratch)
    temp = LazyMemmapStorage(4)  # a temporary directory, removed with the storage
    TensorDictReplayBuffer(storage=temp).extend(transitions(2))
    directory = temp.scratch_dir
    assert os.path.exists(os.path.join(directory, "layout.json"))
    del temp
    assert not os.path.exists(directory)


def test_bfloat16_survives_memmap_reopen_and_checkpoints(tmp_path):
    data = TensorDict({"x": rlpipe.arange(4).float().to(rlpipe.bfloat16)}, [4])  # an ml_dtypes type: no pickle
    TensorDictReplayBuffer(storage=LazyMemmapStorage(4, scratch_dir=tmp_path / "s")).extend(data)
    reopened = TensorDictReplayBuffer(storage=LazyMemmapStorage(4, scratch_dir=tmp_path / "s"))
    assert reopened[:]["x"].dtype == rlpipe.bfloat16
    reopened.dumps(tmp_path / "c")
    loaded = TensorDictReplayBuffer(storage=LazyTensorStorage(4))
    loaded.loads(tmp_path / "c")
    np.testing.assert_array_equal(arr(loaded[:]["x"].float()), [0, 1, 2, 3])


# torchrl 0.14.1 behaviour, checked by running it beside rlpipe: expected values written by hand


def test_reading_by_position_and_key_carries_index_like_torchrl():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(5), batch_size=2)
    data = transitions(3)
    assert arr(rb.extend(data)).tolist() == [0, 1, 2]
    one = transitions(1, start=3)[0]
    assert rb.add(one) == 3
    assert "index" not in data.keys() and "index" not in one.keys()  # the given TensorDicts are unchanged
    assert arr(rb.extend(transitions(3, start=4))).tolist() == [4, 0, 1]  # wraps around
    everything = rb[:]
    assert arr(everything["observation"])[:, 0].tolist() == [5, 6, 2, 3, 4]
    assert arr(everything["index"]).tolist() == [0, 1, 2, 3, 4] and everything["index"].dtype == rlpipe.int64
    # stored by the writer, as torchrl's TensorDictRoundRobinWriter does
    assert arr(rb.storage[:]["index"]).tolist() == [0, 1, 2, 3, 4]
    last = rb[-1]
    assert last.batch_size == rlpipe.Size([]) and arr(last["index"]).tolist() == 4
    assert arr(rb[[4, 0]]["index"]).tolist() == [4, 0] and arr(rb[[4, 0]]["observation"])[:, 0].tolist() == [4, 5]
    assert arr(rb[1:3]["index"]).tolist() == [1, 2]
    assert arr(rb[rlpipe.tensor([True, False, True, False, False])]["index"]).tolist() == [0, 2]
    assert arr(rb[np.int64(2)]["index"]).tolist() == 2
    with pytest.raises(IndexError):
        rb[5]
    # a key reads that entry of everything stored
    assert arr(rb["action"])[:, 0].tolist() == [1, 0, 0, 1, 0]
    np.testing.assert_allclose(arr(rb["next", "reward"])[:, 0], [0.5, 0.6, 0.2, 0.3, 0.4], rtol=1e-6)
    assert arr(rb[("next", "done")])[:, 0].tolist() == [False, True, False, False, False]
    assert arr(rb["index"]).tolist() == [0, 1, 2, 3, 4]
    rb.empty()
    assert rb[:]["index"].shape == rlpipe.Size([0]) and rb["observation"].shape == rlpipe.Size([0, 4])
    # items of batch_size [T]: "index" over the item dims; a tuple indexes rb[:]
    seq = TensorDictReplayBuffer(storage=LazyTensorStorage(4))
    seq.extend(transitions(3, item_batch=(2,)))
    assert arr(seq[0]["index"]).tolist() == [0, 0] and seq[0].batch_size == rlpipe.Size([2])
    assert seq[0, 1].batch_size == rlpipe.Size([]) and arr(seq[0, 1]["index"]).tolist() == 0
    assert arr(seq[:, 1]["index"]).tolist() == [0, 1, 2] and arr(seq[(1,)]["index"]).tolist() == [1, 1]
    # a ListStorage stores each item with its "index", as torchrl's
    listed = TensorDictReplayBuffer(storage=ListStorage(4))
    listed.extend(transitions(2))
    assert arr(listed[1]["index"]).tolist() == 1 and arr(listed[:]["index"]).tolist() == [0, 1]
    assert arr(listed.storage[1]["index"]).tolist() == 1
    # a plain ReplayBuffer adds nothing
    plain_rb = ReplayBuffer(storage=LazyTensorStorage(3))
    plain_rb.extend(transitions(2))
    assert "index" not in plain_rb[:].keys()


def test_tensor_storage_extends_a_list_of_items():
    rb = ReplayBuffer(storage=LazyTensorStorage(3), batch_size=2)
    assert arr(rb.extend([rlpipe.tensor([1.0, 2.0]), rlpipe.tensor([3.0, 4.0])])).tolist() == [0, 1]
    assert arr(rb.extend([rlpipe.tensor([5.0, 6.0]), rlpipe.tensor([7.0, 8.0])])).tolist() == [2, 0]
    assert arr(rb[:]).tolist() == [[7, 8], [3, 4], [5, 6]]
    tds = ReplayBuffer(storage=LazyTensorStorage(4))
    assert arr(tds.extend([transitions(1)[0], transitions(1, start=5)[0]])).tolist() == [0, 1]
    assert arr(tds[:]["observation"])[:, 0].tolist() == [0, 5]
    for bad, error, message in [([1, 2], TypeError, "a list of TensorDicts or a list of Tensors.*got a list of int"),
                                ([], RuntimeError, "expected at least one element, got an empty list")]:
        check_fails(tds, lambda bad=bad: tds.extend(bad), error, message)
    with pytest.raises(TypeError, match="TensorDictReplayBuffer stores TensorDicts, got list"):
        TensorDictReplayBuffer(storage=LazyTensorStorage(4)).extend([transitions(1)[0]])


def test_storage_and_sampler_factories_and_the_prioritized_sampler_argument():
    rb = ReplayBuffer(storage=lambda: LazyTensorStorage(3), sampler=SamplerWithoutReplacement)
    assert isinstance(rb.storage, LazyTensorStorage) and rb.storage.max_size == 3
    assert isinstance(rb.sampler, SamplerWithoutReplacement)
    given = RandomSampler()
    assert PrioritizedReplayBuffer(alpha=0.6, beta=0.4, sampler=given).sampler is given  # torchrl uses it
    with pytest.raises(TypeError, match="unexpected keyword argument 'sampler'"):
        TensorDictPrioritizedReplayBuffer(alpha=0.6, beta=0.4, sampler=given)


# ----------------------------------------------------------------------------------------------
# 4. checkpoints


SAMPLERS = {"random": RandomSampler, "without": lambda: SamplerWithoutReplacement(drop_last=True),
            "prioritized": lambda: PrioritizedSampler(8, 0.8, 0.6)}
STORAGES = {"tensor": lambda d: LazyTensorStorage(8), "memmap": lambda d: LazyMemmapStorage(8, scratch_dir=d),
            "list": lambda d: ListStorage(8)}


@pytest.mark.parametrize("storage", list(STORAGES))
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_dumps_loads_round_trip(tmp_path, storage, sampler):
    def make(name):
        return TensorDictReplayBuffer(storage=STORAGES[storage](tmp_path / name), sampler=SAMPLERS[sampler](),
                                      batch_size=3)
    rb = make("a")
    rb.extend(transitions(6))
    rb.extend(transitions(5, start=6))  # wrapped: cursor 3
    rb.sample()
    rb.update_priority([1, 4], [5.0, 0.25])
    rb.dumps(tmp_path / "ckpt")
    rb.dumps(tmp_path / "ckpt")  # replaces the previous checkpoint
    assert "state.json" in os.listdir(tmp_path / "ckpt")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]  # no temporary left behind
    loaded = make("b")
    loaded.loads(tmp_path / "ckpt")
    assert len(loaded) == len(rb) == 8
    assert_same(snapshot(loaded), snapshot(rb))
    rlpipe.manual_seed(3)
    a = rb.sample()
    rlpipe.manual_seed(3)
    b = loaded.sample()
    assert_same({k: arr(v) for k, v in leaves(a).items()}, {k: arr(v) for k, v in leaves(b).items()})
    np.testing.assert_array_equal(arr(rb.extend(transitions(1, 20))), arr(loaded.extend(transitions(1, 20))))


def test_state_dict_round_trip_and_mismatches():
    rb = prioritized_buffer(n=6, capacity=8)
    rb.update_priority([2], [4.0])
    state = rb.state_dict()
    rb.extend(transitions(3, start=6))  # the state dict is a copy, not a view
    other = prioritized_buffer(n=1, capacity=8)
    other.load_state_dict(state)
    assert len(other) == 6
    np.testing.assert_array_equal(contents(other)[("observation",)][:, 0], np.arange(6))
    np.testing.assert_array_equal(other.sampler._tree.leaves(), state["_sampler"]["priorities"])
    for wrong, message in [(prioritized_buffer(n=1, capacity=9), "max_size=8, this storage has max_size=9"),
                           (TensorDictReplayBuffer(storage=LazyTensorStorage(8)),
                            "PrioritizedSampler's, this sampler is a RandomSampler")]:
        before = snapshot(wrong)
        with pytest.raises(ValueError, match=message):
            wrong.load_state_dict(state)
        assert_same(snapshot(wrong), before)


def test_failed_dumps_keeps_the_previous_checkpoint(tmp_path):
    rb = ReplayBuffer(storage=ListStorage(4), batch_size=2)
    rb.extend([1, 2])
    rb.dumps(tmp_path / "ckpt")
    rb.add(object())
    with pytest.raises(TypeError, match=r"cannot save a object at state\['_storage'\]\['items'\]\[2\]"):
        rb.dumps(tmp_path / "ckpt")
    assert os.listdir(tmp_path) == ["ckpt"]
    fresh = ReplayBuffer(storage=ListStorage(4))
    fresh.loads(tmp_path / "ckpt")
    assert fresh[:] == [1, 2]
    with pytest.raises(RuntimeError, match="not an rlpipe replay-buffer checkpoint|cannot read"):
        fresh.loads(tmp_path)
    memmap = TensorDictReplayBuffer(storage=LazyMemmapStorage(4, scratch_dir=tmp_path / "ckpt2" / "storage"))
    memmap.extend(transitions(2))
    with pytest.raises(ValueError, match="scratch_dir"):
        memmap.dumps(tmp_path / "ckpt2")


# ----------------------------------------------------------------------------------------------
# 5. bad input


def check_fails(rb, call, error, message):
    before = snapshot(rb) if len(rb) else None
    with pytest.raises(error, match=message):
        call()
    if before is not None:
        assert_same(snapshot(rb), before)


def test_bad_samples():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4))
    with pytest.raises(RuntimeError, match="Cannot sample from an empty storage"):
        rb.sample(2)
    rb.extend(transitions(2))
    check_fails(rb, rb.sample, RuntimeError, "batch_size not specified")
    check_fails(rb, lambda: rb.sample(0), ValueError, "batch_size must be a positive int, got batch_size=0")
    with pytest.raises(ValueError, match="batch_size=-1"):
        TensorDictReplayBuffer(batch_size=-1)
    rb.empty()
    assert len(rb) == 0
    with pytest.raises(RuntimeError, match="empty storage"):
        rb.sample(2)
    with pytest.raises(ValueError, match="Samplers with drop_last=True must work with a predictable batch-size"):
        ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(drop_last=True))
    drop = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(drop_last=True), batch_size=1)
    drop.extend(rlpipe.zeros(2))
    check_fails(drop, lambda: drop.sample(3), ValueError, r"batch_size=3 is larger than the 2 items stored")


def test_bad_batches_leave_the_buffer_unchanged():
    rb = prioritized_buffer(n=5, capacity=6, batch_size=2)
    rb.update_priority([1], [3.0])
    good = transitions(2, start=5)
    missing = good.exclude(("next", "reward"))
    check_fails(rb, lambda: rb.extend(missing), KeyError, r"missing \[\('next', 'reward'\)\], unexpected \[\]")
    extra = good.clone().set("extra", rlpipe.zeros(2))
    check_fails(rb, lambda: rb.extend(extra), KeyError, r"missing \[\], unexpected \['extra'\]")
    shaped = good.clone().set("observation", rlpipe.zeros(2, 5))
    check_fails(rb, lambda: rb.extend(shaped), ValueError,
                r"entry 'observation' has per-item shape \[5\] \(shape \[2, 5\]\); the storage expects \[4\]")
    kinds = good.clone().set("action", rlpipe.zeros(2, 2))
    check_fails(rb, lambda: rb.extend(kinds), TypeError, "entry 'action' has dtype float32; the storage holds int64")
    check_fails(rb, lambda: rb.extend(transitions(2, item_batch=(3,))), ValueError,
                r"items have batch_size \[3\] \(batch_size \[2, 3\]\); the storage holds items of batch_size \[\]")
    check_fails(rb, lambda: rb.extend(rlpipe.zeros(2, 4)), TypeError, "stores TensorDicts, got Tensor")
    before = snapshot(rb)  # an empty batch writes nothing (as torchrl 0.14's TensorDictRoundRobinWriter)
    assert rb.extend(transitions(0)).tolist() == []
    assert_same(snapshot(rb), before)
    nan = good.clone().set("td_error", rlpipe.tensor([1.0, float("nan")]))
    check_fails(rb, lambda: rb.extend(nan.exclude("td_error").set("td_error", nan["td_error"])), KeyError,
                "unexpected \\['td_error'\\]")
    check_fails(rb, lambda: rb.update_priority([0, 1], [1.0, -2.0]), ValueError,
                "priorities must be finite and >= 0.*got priority=-2.0 for index 1")
    check_fails(rb, lambda: rb.update_priority([2], [float("nan")]), ValueError, "got priority=nan for index 2")
    check_fails(rb, lambda: rb.update_priority([5], [1.0]), ValueError, "index 5 is outside the 5 items stored")
    check_fails(rb, lambda: rb.update_priority([0, 1, 2], [1.0, 2.0]), ValueError,
                "got 2 priorities .* for 3 indices")
    check_fails(rb, lambda: rb.update_priority([0.5], [1.0]), TypeError, "index must hold integers")
    rb.extend(good)  # still works, and wraps
    assert len(rb) == 6


def test_bad_priorities_on_extend_and_constructor_arguments():
    rb = TensorDictPrioritizedReplayBuffer(alpha=0.5, beta=0.5, storage=LazyTensorStorage(4))
    first = transitions(2).set("td_error", rlpipe.tensor([1.0, 2.0]))
    rb.extend(first)
    bad = transitions(2, start=2).set("td_error", rlpipe.tensor([1.0, float("nan")]))
    check_fails(rb, lambda: rb.extend(bad), ValueError, r"extend \('td_error'\): .*got priority=nan for index 3")
    for make, error, message in [
            (lambda: PrioritizedSampler(10, -0.5, 0.4), ValueError, "alpha must be a finite number >= 0.0"),
            (lambda: PrioritizedSampler(0, 0.5, 0.4), ValueError, "max_capacity must be a positive int"),
            (lambda: LazyTensorStorage(0), ValueError, "max_size must be a positive int, got max_size=0"),
            (lambda: ReplayBuffer(storage="list"), TypeError, "storage must be an rlpipe.data storage"),
            (lambda: ReplayBuffer(sampler="random", storage=ListStorage(2)), TypeError, "sampler must be"),
            (lambda: ReplayBuffer(storage=lambda: 3), TypeError, "storage must be an rlpipe.data storage"),
            (lambda: ReplayBuffer(transform=3), TypeError, "transform must be callable"),
            (lambda: ReplayBuffer(generator=np.random.default_rng()), TypeError, "rlpipe.Generator")]:
        with pytest.raises(error, match=message):
            make()
    # a storage larger than the sampler's max_capacity grows its trees (torchrl's tree pads to a power of 2)
    small = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sampler=PrioritizedSampler(4, 0.5, 0.5))
    small.extend(transitions(6))
    assert len(small) == 6 and small.sampler._tree.capacity >= 6
    np.testing.assert_allclose(small.sampler._tree.leaves()[:6], (1 + 1e-8) ** 0.5)


# ----------------------------------------------------------------------------------------------
# samplers without replacement, transforms, seeds


def test_sampler_without_replacement_covers_every_item_once():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=4)
    rb.extend(rlpipe.arange(10))
    epoch = [arr(batch) for batch in rb]  # iteration stops when the permutation is used up
    assert [len(b) for b in epoch] == [4, 4, 2]  # torchrl's code gives a short last batch
    np.testing.assert_array_equal(np.sort(np.concatenate(epoch)), np.arange(10))
    ordered = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3,
                           sampler=SamplerWithoutReplacement(drop_last=True, shuffle=False))
    ordered.extend(rlpipe.arange(10))
    assert [arr(b).tolist() for b in ordered] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert ordered.sampler.ran_out


def test_sampler_without_replacement_passes_like_torchrl():
    for drop_last, expected, then, rest in [
            (False, [([0, 1, 2], False), ([3, 4, 5], False), ([6], True), ([0, 1, 2], False)], [3, 4, 5], [6]),
            (True, [([0, 1, 2], False), ([3, 4, 5], True), ([0, 1, 2], False), ([3, 4, 5], True)], [0, 1, 2],
             [3, 4, 5, 6])]:
        rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3,
                          sampler=SamplerWithoutReplacement(drop_last=drop_last, shuffle=False))
        rb.extend(rlpipe.arange(7))
        assert [(arr(rb.sample()).tolist(), rb.sampler.ran_out) for _ in range(4)] == expected
        assert arr(rb.sample()).tolist() == then
        assert arr(rb.sample(5)).tolist() == rest and rb.sampler.ran_out  # what is left of the pass
        rb.sampler.ran_out = False  # settable, as torchrl's
        assert not rb.sampler.ran_out
        rb.extend(rlpipe.tensor([7, 8]))
        assert arr(rb.sample()).tolist() == [0, 1, 2]  # a new length starts a new pass
    mixed = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False))
    mixed.extend(rlpipe.arange(7))
    assert [arr(mixed.sample(b)).tolist() for b in (2, 4, 3, 1)] == [[0, 1], [2, 3, 4, 5], [6], [0]]


def test_seeds_and_generators_make_sampling_reproducible():
    rb = prioritized_buffer(n=8, batch_size=16)
    rlpipe.manual_seed(5)
    a = arr(rb.sample()["index"])
    rlpipe.manual_seed(5)
    np.testing.assert_array_equal(arr(rb.sample()["index"]), a)
    g1, g2 = rlpipe.Generator().manual_seed(9), rlpipe.Generator().manual_seed(9)
    r1 = ReplayBuffer(storage=LazyTensorStorage(50), batch_size=20, generator=g1)
    r2 = ReplayBuffer(storage=LazyTensorStorage(50), batch_size=20, generator=g2)
    r1.extend(rlpipe.arange(50))
    r2.extend(rlpipe.arange(50))
    np.testing.assert_array_equal(arr(r1.sample()), arr(r2.sample()))


def test_sample_and_write_transforms():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=3,
                                transform=lambda td: td.set("seen", rlpipe.ones(td.batch_size[0])))
    rb.append_transform(lambda td: td.set("doubled", td["observation"] * 2), invert=True)  # on write
    rb.extend(transitions(4))
    assert "doubled" in rb.storage._data.keys() and "seen" not in rb.storage._data.keys()
    sample = rb.sample()
    np.testing.assert_array_equal(arr(sample["seen"]), [1, 1, 1])
    np.testing.assert_array_equal(arr(sample["doubled"]), 2 * arr(sample["observation"]))


class _AddOnInvTimesTenOnForward(Transform):
    """An env transform: ``inv`` adds 1 to "a", ``forward`` multiplies it by 10."""

    def __init__(self):
        super().__init__(in_keys=["a"], in_keys_inv=["a"])

    def _apply_transform(self, value):
        return value * 10

    def _inv_apply_transform(self, value):
        return value + 1


@pytest.mark.parametrize("invert", [False, True])
def test_an_env_transform_runs_inv_on_write_and_forward_on_sample_as_torchrl(invert):
    rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=4)
    rb.append_transform(_AddOnInvTimesTenOnForward(), invert=invert)
    data = TensorDict({"a": rlpipe.arange(4)}, [4])
    rb.extend(data)
    stored, read = ([0, 10, 20, 30], [1, 11, 21, 31]) if invert else ([1, 2, 3, 4], [10, 20, 30, 40])
    assert rb.storage[:]["a"].tolist() == stored and data["a"].tolist() == [0, 1, 2, 3]
    assert set(rb.sample()["a"].tolist()) <= set(read) and rb[:]["a"].tolist() == read


def test_in_place_writes_go_through_the_write_transforms():
    """``rb[index] = value`` runs the write-time (inverted) transforms, as torchrl's ``transform.inv``:
    with +1 on write and +1 on read, a 0 written reads back as 2; a write the storage refuses leaves
    the stored items and the length as they were."""
    rb = ReplayBuffer(storage=LazyTensorStorage(12))
    rb.append_transform(lambda x: x + 1, invert=True)
    rb.append_transform(lambda x: x + 1)
    rb.extend(TensorDict({"a": rlpipe.arange(10)}, [10]))
    rb[3:5] = TensorDict({"a": rlpipe.zeros(2, dtype=rlpipe.int64)}, [2])
    rb[rlpipe.tensor([7])] = TensorDict({"a": rlpipe.tensor([100])}, [1])
    assert rb.storage[:]["a"].tolist() == [1, 2, 3, 1, 1, 6, 7, 101, 9, 10]
    assert rb[3:5]["a"].tolist() == [2, 2] and len(rb) == 10
    with pytest.raises(ValueError, match="2 positions for 3 items"):
        rb[0:2] = TensorDict({"a": rlpipe.zeros(3, dtype=rlpipe.int64)}, [3])
    assert rb.storage[:]["a"].tolist() == [1, 2, 3, 1, 1, 6, 7, 101, 9, 10] and len(rb) == 10


# ----------------------------------------------------------------------------------------------
# 6. MultiStep as the buffer's transform


def trajectory(lead, T, seed):
    """A [*lead, T] batch with random dones and an id per frame ("frame", "env")."""
    rng = np.random.default_rng(seed)
    shape = lead + (T,)
    done = rng.random(shape + (1,)) < 0.15
    frame = np.broadcast_to(np.arange(T), shape)
    env = np.broadcast_to(np.arange(int(np.prod(lead))).reshape(lead + (1,)) if lead else np.zeros(()), shape)
    return TensorDict({
        "observation": rlpipe.tensor(rng.standard_normal(shape + (3,)).astype(np.float32)),
        "frame": rlpipe.tensor(frame.astype(np.int64).copy()), "env": rlpipe.tensor(env.astype(np.int64).copy()),
        "next": {"observation": rlpipe.tensor(rng.standard_normal(shape + (3,)).astype(np.float32)),
                 "reward": rlpipe.tensor(rng.standard_normal(shape + (1,)).astype(np.float32)),
                 "done": rlpipe.tensor(done), "terminated": rlpipe.tensor(done & (rng.random(done.shape) < .5))},
    }, batch_size=list(shape))


def by_frame(td):
    """{key: array} with the rows sorted by (env, frame)."""
    flat = td.reshape(-1)
    order = np.lexsort((arr(flat["frame"]), arr(flat["env"])))
    return {k: arr(v)[order] for k, v in leaves(flat).items() if k != ("index",)}


@pytest.mark.parametrize("lead", [(), (3,)], ids=["[T]", "[B,T]"])
@pytest.mark.parametrize("n", [1, 3, 5])
def test_multistep_transform_stores_exact_n_step_transitions(lead, n):
    T, chunks = 40, [7, 1, 12, 3, 17]
    data = trajectory(lead, T, seed=n)
    expected = by_frame(MultiStep(0.9, n)(data.clone()))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(200), batch_size=4, transform=MultiStep(0.9, n))
    time = len(lead)
    at, written = 0, 0
    for size in chunks:
        index = rb.extend(data[(slice(None),) * time + (slice(at, at + size),)].clone())
        at += size
        written += index.shape[0]
        assert len(rb) == written == max(at - (n - 1), 0) * int(np.prod(lead))  # n - 1 frames late
    rb.flush()
    assert len(rb) == T * int(np.prod(lead))
    assert_same(by_frame(rb[:]), expected)
    assert rb.sample()["gamma"].shape == rlpipe.Size([4])


def test_multistep_stream_survives_a_rejected_batch():
    data = trajectory((), 30, seed=7)
    reference = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
    reference.append_transform(MultiStep(0.9, 4))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), transform=[MultiStep(0.9, 4)])
    for buffer in (reference, rb):
        buffer.extend(data[:10].clone())
    bad = data[10:20].clone()
    bad.set("frame", bad["frame"].float())  # the stream takes it; the storage (int64 "frame") does not
    check_fails(rb, lambda: rb.extend(bad), TypeError, "entry 'frame' has dtype float64; the storage holds int64")
    for buffer in (reference, rb):
        buffer.extend(data[10:30].clone())
        buffer.flush()
    assert_same(by_frame(rb[:]), by_frame(reference[:]))
    assert_same(by_frame(rb[:]), by_frame(MultiStep(0.9, 4)(data.clone())))
    assert rb.add(data[0].clone()).shape == rlpipe.Size([0])  # held back: nothing written yet


def test_multistep_transform_with_a_collector():
    pytest.importorskip("gymnasium")
    from rlpipe.collectors import RandomPolicy, SyncDataCollector
    from rlpipe.envs import GymEnv, StepCounter, TransformedEnv
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    env.set_seed(0)
    collector = SyncDataCollector(env, policy=RandomPolicy(env.action_spec), frames_per_batch=16, total_frames=160)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000), transform=MultiStep(0.99, 4), batch_size=32)
    batches = []
    for batch in collector:
        batches.append(batch.clone())
        rb.extend(batch)
    rb.flush()
    expected = MultiStep(0.99, 4)(TensorDict.cat(batches))
    got = rb[:]
    assert len(rb) == 160
    for key, value in leaves(expected).items():
        np.testing.assert_array_equal(arr(got.get(key)), arr(value), err_msg=str(key))


@pytest.mark.cuda
def test_cuda_storage_writes_the_index_entry_as_a_device_array():
    """The writers' "index" entry is copied to the GPU before the storage writes it with a slice
    (CuPy refuses a host array there: "non-scalar numpy.ndarray cannot be used for fill")."""
    from rlpipe import backends
    from rlpipe.data import TensorDictMaxValueWriter
    if not backends.cuda_available():
        pytest.skip("cuda backend unavailable (CuPy or a GPU missing)")

    def batch(values):
        return TensorDict({"x": rlpipe.tensor(values, device="cuda")}, [len(values)], device="cuda")
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4, device="cuda"), batch_size=2)
    rb.extend(batch([1., 2., 3., 4.]))
    rb.extend(batch([5., 6.]))  # wraps around: two slices
    rb.add(TensorDict({"x": rlpipe.tensor(7., device="cuda")}, [], device="cuda"))
    stored = rb.storage[:]
    assert stored["index"].device.type == "cuda"
    assert stored["x"].tolist() == [5., 6., 7., 4.] and stored["index"].tolist() == [0, 1, 2, 3]
    sample = rb.sample()
    np.testing.assert_array_equal(sample["x"].cpu().numpy(), stored["x"].cpu().numpy()[sample["index"].cpu().numpy()])

    top = TensorDictReplayBuffer(storage=LazyTensorStorage(2, device="cuda"),
                                 writer=TensorDictMaxValueWriter(rank_key="x"), batch_size=2)
    top.extend(batch([3., 1., 2.]))
    assert sorted(top.storage[:]["x"].tolist()) == [2., 3.]
    assert top.storage[:]["index"].device.type == "cuda" and sorted(top.storage[:]["index"].tolist()) == [0, 1]

    prioritized = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(4, device="cuda"),
                                                    batch_size=2)
    td = batch([1., 2., 3.])
    td.set("td_error", rlpipe.tensor([1., 2., 3.], device="cuda"))
    prioritized.extend(td)
    sample = prioritized.sample()
    sample.set("td_error", rlpipe.ones(2, device="cuda"))
    prioritized.update_tensordict_priority(sample)
    assert prioritized.storage[:]["index"].tolist() == [0, 1, 2]
