"""Replay-buffer behaviour torchrl 0.14's own replay-buffer suites rely on (test_rb_core,
test_storages, test_samplers, test_prioritized). Expected values were read off torchrl 0.14.1
(the peer virtualenv) or worked out by hand; each test says which."""
import os
import warnings

import numpy as np
import pytest

import rlpipe
from rlpipe.data import (LazyMemmapStorage, LazyTensorStorage, ListStorage, RandomSampler, ReplayBuffer,
                         SamplerWithoutReplacement, TensorDictReplayBuffer)
from rlpipe.data.replay_buffers.storages import _MEMMAP_STORAGE_REGISTRY, TensorStorage
from rlpipe.tensordict import TensorDict


# ---- storages -------------------------------------------------------------------------------------
def test_extend_past_capacity_warns_and_keeps_the_last_rows():
    # torchrl 0.14.1: the rows kept are [3, 4, 2], cursor 2; its TensorStorage.set warns with this text
    rb = ReplayBuffer(storage=LazyTensorStorage(3))
    with pytest.warns(UserWarning, match="A cursor of length superior to the storage capacity was provided: 5 items") \
            as caught:
        rb.extend(rlpipe.arange(5))
    assert caught[0].filename == __file__  # the warning names the caller's line, not rlpipe's
    assert rb[:].tolist() == [3, 4, 2] and rb.writer._cursor == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rb.extend(rlpipe.arange(3))  # a batch that fits: no warning


def test_tensor_storage_exposes_its_whole_storage():
    storage = LazyTensorStorage(3)
    assert storage._storage is None
    storage.set(range(2), rlpipe.arange(2) + 5)
    assert storage._storage.shape == (3,) and storage._storage.tolist()[:2] == [5, 6]
    td_storage = LazyTensorStorage(4)
    td_storage.set(range(3), TensorDict({"a": rlpipe.arange(3)}, [3]))
    whole = td_storage._storage
    assert isinstance(whole, TensorDict) and whole.batch_size == (4,)
    assert whole[np.array([2, 0])]["a"].tolist() == [2, 0]


def test_init_allocates_from_one_item_without_writing():
    # torchrl 0.14.1: _init(td of batch [3]) on LazyTensorStorage(10) gives _storage [10, 3], len 0
    storage = LazyTensorStorage(10)
    storage._init(TensorDict({"a": rlpipe.zeros(3)}, [3]))
    assert storage._storage.shape == (10, 3) and len(storage) == 0
    with pytest.raises(RuntimeError, match="_init: this LazyTensorStorage is already initialized"):
        storage._init(TensorDict({"a": rlpipe.zeros(3)}, [3]))
    with pytest.raises(TypeError, match="_init: LazyTensorStorage stores TensorDicts or Tensors, got int"):
        LazyTensorStorage(2)._init(3)


def test_list_storage_set_takes_a_range_of_items():
    # torchrl 0.14.1: ListStorage(4).set(range(4), range(4)) holds 0..3
    storage = ListStorage(4)
    storage.set(range(4), range(4))
    assert len(storage) == 4 and storage.get(2) == 2 and storage.get([0, 1]) == [0, 1]
    with pytest.raises(TypeError, match="a ListStorage is extended with a list, a tuple, a range, or a"):
        storage.set(range(1), {"a": 1})


@pytest.mark.parametrize("cls", [LazyTensorStorage, LazyMemmapStorage])
def test_ndim_must_be_a_positive_int(cls):
    assert len(cls(4, ndim=1)) == 0 and cls(4, ndim=2).ndim == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=f"{cls.__name__}: ndim must be an int >= 1, got ndim={bad!r}"):
            cls(4, ndim=bad)
    with pytest.raises(ValueError, match="TensorStorage: ndim must be an int >= 1, got ndim=0"):
        TensorStorage(rlpipe.zeros(3), ndim=0)


def test_memmap_cleanup(tmp_path):
    # torchrl 0.14.1: cleanup() True then False, the directory gone; a storage never written: False
    scratch = tmp_path / "storage"
    storage = LazyMemmapStorage(10, scratch_dir=scratch, auto_cleanup=True)
    assert storage in _MEMMAP_STORAGE_REGISTRY
    storage.set(range(2), TensorDict({"a": rlpipe.zeros(2)}, [2]))
    assert os.listdir(scratch)
    assert storage.cleanup() is True and not scratch.exists()
    assert storage.cleanup() is False and storage._cleaned_up is True
    fresh = LazyMemmapStorage(10)
    assert fresh._auto_cleanup is True and fresh._scratch_dir_is_temp is True and fresh.cleanup() is False
    kept = LazyMemmapStorage(10, scratch_dir=tmp_path / "kept")
    assert kept._auto_cleanup is False and kept not in _MEMMAP_STORAGE_REGISTRY
    kept.set(range(1), TensorDict({"a": rlpipe.zeros(1)}, [1]))
    assert kept.cleanup() is True and not (tmp_path / "kept").exists()  # an explicit cleanup still removes it
    shared = LazyMemmapStorage(10, shared_init=True)  # shared: its temporary directory exists from the start
    assert shared.shared_init and os.path.isdir(shared.scratch_dir)


def test_memmap_auto_cleanup_when_collected(tmp_path):
    import gc
    scratch = tmp_path / "gone"
    storage = LazyMemmapStorage(10, scratch_dir=scratch, auto_cleanup=True)
    storage.set(range(1), TensorDict({"a": rlpipe.zeros(1)}, [1]))
    assert scratch.exists()
    del storage
    gc.collect()
    assert not scratch.exists()


# ---- samplers ---------------------------------------------------------------------------------------
def test_sampler_sample_returns_tensors():
    # torchrl 0.14.1: Sampler.sample returns an int64 Tensor index and a dict; _sample_list is a Tensor
    storage = ListStorage(4)
    storage.set(range(4), range(4))
    index, info = RandomSampler().sample(storage, 2)
    assert isinstance(index, rlpipe.Tensor) and index.dtype == rlpipe.int64 and info == {}
    sampler = SamplerWithoutReplacement()
    assert sampler._sample_list is None
    index, _ = sampler.sample(storage, 3)
    assert index.unique().numel() == 3
    assert isinstance(sampler._sample_list, rlpipe.Tensor) and sampler._sample_list.numel() == 1
    left = sampler._sample_list.tolist()
    assert sorted(left + index.tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"The batch size 5 is greater than the storage capacity"):
        SamplerWithoutReplacement(drop_last=True).sample(storage, 5)


def test_buffer_accepts_prefetch_and_samples_the_same():
    rlpipe.manual_seed(3)
    a = TensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=4)
    a.extend(TensorDict({"x": rlpipe.arange(8)}, [8]))
    first = a.sample()["x"].tolist()
    rlpipe.manual_seed(3)
    b = TensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=4, prefetch=3)
    b.extend(TensorDict({"x": rlpipe.arange(8)}, [8]))
    assert b.sample()["x"].tolist() == first
    with pytest.raises(ValueError, match="prefetch must be None or an int >= 0, got prefetch=1.5"):
        ReplayBuffer(prefetch=1.5)


# ---- prioritized sampler ---------------------------------------------------------------------------
# torchrl 0.14.1's PrioritizedSampler needs its C++ extension, which the peer virtualenv cannot load;
# these follow torchrl's source (samplers/prioritized.py) and hand-computed sums.
def _prioritized_buffer(n=5, **kwargs):
    from rlpipe.data import PrioritizedSampler
    return ReplayBuffer(storage=LazyTensorStorage(n), sampler=PrioritizedSampler(n, alpha=1.0, beta=1.0, **kwargs),
                        batch_size=2)


def test_prioritized_sampler_torchrl_attributes():
    rb = _prioritized_buffer()
    assert rb.sampler._max_priority == (None, None) and rb.sampler.default_priority == 1.0
    index = rb.extend(rlpipe.arange(3))
    rb.update_priority(index, rlpipe.tensor([2.0, 5.0, 1.0]))
    assert rb.sampler._max_priority == (5.0, 1)
    assert rb.sampler._sum_tree[1] == pytest.approx(5.0)  # (5 + 1e-8) ** 1
    assert rb.sampler._sum_tree.query(0, 3) == pytest.approx(8.0)
    assert rb.sampler._sum_tree.query(0, 100) == pytest.approx(8.0) and rb.sampler._sum_tree.query(2, 1) == 0.0
    assert rb.sampler._sum_tree[[0, 2]].tolist() == pytest.approx([2.0, 1.0])
    with pytest.raises(IndexError, match=r"SumMinTree: index 7 is outside \[0, 5\)"):
        rb.sampler._sum_tree[7]


def test_prioritized_sampler_alpha_beta_settable_and_tensors():
    from rlpipe.data import PrioritizedSampler
    sampler = PrioritizedSampler(5, alpha=rlpipe.tensor(0.5), beta=0.4)
    assert sampler.alpha == 0.5
    sampler.alpha = 0.3
    sampler.beta = rlpipe.tensor(0.25)
    assert sampler.alpha == 0.3 and sampler.beta == 0.25
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0.0, got alpha=-1"):
        sampler.alpha = -1
    assert sampler.alpha == 0.3


def test_prioritized_sampler_covers_items_it_was_not_told_of():
    # torchrl 0.14: a new sampler over a filled storage gives every stored item the default priority
    from rlpipe.data import PrioritizedSampler
    rb = _prioritized_buffer()
    rb.extend(rlpipe.arange(3))
    other = ReplayBuffer(storage=rb.storage, sampler=PrioritizedSampler(5, alpha=1.0, beta=1.0), batch_size=2)
    assert other.sample().shape == (2,)
    assert [other.sampler._sum_tree[i] for i in range(5)] == pytest.approx([1.0, 1.0, 1.0, 0.0, 0.0])


def test_prioritized_sampler_load_takes_alpha_and_max_from_the_state():
    from rlpipe.data import PrioritizedSampler
    source = PrioritizedSampler(4, alpha=0.8, beta=0.6)
    source.extend(np.arange(2))
    source.update_priority(np.arange(2), np.array([3.0, 1.0]))
    target = PrioritizedSampler(4, alpha=0.5, beta=0.5)
    target.load_state_dict(source.state_dict())
    assert (target.alpha, target.beta) == (0.8, 0.6) and target._max_priority == (3.0, 0)
    assert target._sum_tree[0] == pytest.approx(3.0 ** 0.8)
    bad = dict(source.state_dict(), max_at=9)
    with pytest.raises(ValueError, match=r"max_at must be None or a position in \[0, 4\), got 9"):
        target.load_state_dict(bad)


def test_extend_without_update_priority_uses_the_default():
    from rlpipe.data import PrioritizedSampler
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), sampler=PrioritizedSampler(4, 1.0, 1.0),
                                priority_key="p")
    rb.extend(TensorDict({"a": rlpipe.arange(2), "p": rlpipe.tensor([3.0, 4.0])}, [2]), update_priority=False)
    assert [rb.sampler._sum_tree[i] for i in range(2)] == pytest.approx([1.0, 1.0])
    rb.extend(TensorDict({"a": rlpipe.arange(2), "p": rlpipe.tensor([3.0, 4.0])}, [2]))
    assert [rb.sampler._sum_tree[i] for i in range(4)] == pytest.approx([1.0, 1.0, 3.0, 4.0])


# ---- replacement=, slice sampler keys ----------------------------------------------------------------
def test_replacement_keyword_dispatch():
    # torchrl 0.14.1: dispatch to the without-replacement variant; TypeError text as below
    from rlpipe.data import PrioritizedSampler, PrioritizedSliceSampler, SliceSampler, SliceSamplerWithoutReplacement
    assert type(RandomSampler(replacement=False, drop_last=True)) is SamplerWithoutReplacement
    assert type(RandomSampler(replacement=True)) is RandomSampler
    made = SliceSampler(replacement=False, slice_len=5, shuffle=False)
    assert type(made) is SliceSamplerWithoutReplacement and made.slice_len == 5 and made.shuffle is False
    assert type(SamplerWithoutReplacement(replacement=False)) is SamplerWithoutReplacement
    assert type(PrioritizedSliceSampler(slice_len=5, max_capacity=10, alpha=0.5, beta=0.5)) is PrioritizedSliceSampler
    with pytest.raises(TypeError, match="PrioritizedSampler has no without-replacement variant; cannot be "
                                        "instantiated with replacement=False."):
        PrioritizedSampler(5, 0.5, 0.5, replacement=False)


def _episodes_storage(done=None):
    data = {"episode": rlpipe.tensor([0, 0, 0, 1, 1, 1]), "obs": rlpipe.arange(6)}
    data[("next", "done")] = rlpipe.zeros(6, 1, dtype=rlpipe.bool) if done is None else done
    storage = LazyTensorStorage(6)
    storage.set(range(6), TensorDict(data, [6]))
    return storage


def test_slice_sampler_trajectory_key_resolution_and_info_keys():
    # torchrl 0.14.1: values below printed by its SliceSampler
    from rlpipe.data import SliceSampler
    storage = _episodes_storage()
    sampler = SliceSampler(num_slices=2, end_key="done", traj_key="episode", truncated_key="truncated")
    _, info = sampler.sample(storage, 4)
    assert sorted(info) == ["done", "terminated", "truncated"]
    auto = SliceSampler(num_slices=2)
    assert (auto._traj_key_auto, auto.traj_key, auto._fetch_traj) == (True, None, True)
    index, _ = auto.sample(storage, 4)
    assert (auto._traj_key_auto, auto.traj_key, auto._fetch_traj) == (False, "episode", True)
    for first, second in index.reshape(2, 2).tolist():  # each slice stays inside one episode
        assert first // 3 == second // 3 and second == first + 1
    by_end = SliceSampler(num_slices=2, end_key=("next", "done"))
    assert (by_end._traj_key_auto, by_end.traj_key, by_end._fetch_traj) == (False, None, False)


def test_slice_sampler_refuses_a_multi_dimensional_end_signal():
    from rlpipe.data import SliceSampler
    storage = LazyTensorStorage(6)
    storage.set(range(6), TensorDict({"obs": rlpipe.arange(6),
                                      ("next", "done"): rlpipe.zeros(6, 2, 1, dtype=rlpipe.bool)}, [6]))
    with pytest.raises(RuntimeError, match=r"end-of-trajectory signal to be 1-dimensional .* shape \[6, 2\]"):
        SliceSampler(num_slices=2).sample(storage, 4)


# ---- the buffer's generator -------------------------------------------------------------------------
def test_buffer_generator_state_round_trips(tmp_path):
    # torchrl 0.14: rb._rng is the generator; state_dict()["_rng"] holds its state and loading it
    # replays the same draws (test_rb_core.TestRNG)
    rb = ReplayBuffer(storage=LazyTensorStorage(100), generator=rlpipe.Generator())
    assert ReplayBuffer(storage=LazyTensorStorage(4))._rng is None
    rb.extend(rlpipe.arange(100))
    rb._rng.set_state(rlpipe.random.get_rng_state())
    state = rb.state_dict()
    assert state["_rng"] is not None and ReplayBuffer().state_dict()["_rng"] is None
    first = rb.sample(32).tolist()
    rb.load_state_dict(state)
    assert rb.sample(32).tolist() == first
    rb.load_state_dict(state)
    rb.dumps(tmp_path / "ckpt")
    again = rb.sample(32).tolist()
    assert again == first
    rb.loads(tmp_path / "ckpt")
    assert rb.sample(32).tolist() == first
    with pytest.raises(ValueError, match="load_state_dict: bad '_rng' generator state"):
        rb.load_state_dict(dict(state, _rng={"bit_generator": "nope"}))
    assert rb.sample(32).tolist() != first  # the failed load changed nothing: the stream went on


def test_iterating_without_batch_size_says_so():
    rb = ReplayBuffer(storage=ListStorage(4))
    rb.extend([1, 2])
    with pytest.raises(RuntimeError, match="Cannot iterate over the replay buffer. Batch_size was not specified"):
        next(iter(rb))


def test_add_of_a_batched_tensordict_warns(monkeypatch):
    # torchrl 0.14.1 warns "Using `add()` with a TensorDict that has batch_size=..." under RL_WARNINGS
    rb = ReplayBuffer(storage=ListStorage(10), batch_size=3)
    with pytest.warns(UserWarning, match=r"Using `add\(\)` with a TensorDict that has batch_size=\[1\]"):
        rb.add(TensorDict({"a": rlpipe.zeros(1)}, [1]))
    assert len(rb) == 1
    monkeypatch.setenv("RL_WARNINGS", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rb.add(TensorDict({"a": rlpipe.zeros(1)}, [1]))
        rb.add(TensorDict({"a": rlpipe.zeros(1)}, []))


def test_prioritized_buffer_sampler_device():
    from rlpipe.data import PrioritizedReplayBuffer, PrioritizedSampler, TensorDictPrioritizedReplayBuffer
    rb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(8), sampler_device="cpu",
                                           batch_size=4)
    rb.extend(TensorDict({"obs": rlpipe.arange(8), "td_error": rlpipe.linspace(0.1, 1.0, 8)}, [8]))
    sample = rb.sample()
    assert rb._sampler.device == rlpipe.device("cpu") and sample["index"].device == rlpipe.device("cpu")
    with pytest.raises(TypeError, match="sampler_device cannot be passed when sampler is provided."):
        PrioritizedReplayBuffer(alpha=0.7, beta=0.5, sampler=PrioritizedSampler(4, 0.7, 0.5), sampler_device="cpu")
    with pytest.raises(NotImplementedError, match="PrioritizedSampler: device='cuda:0': rlpipe keeps its priority"):
        PrioritizedSampler(4, 0.7, 0.5, device="cuda:0")


# ---- StalenessAwareSampler (torchrl 0.14.1's samplers/staleness.py) ----------------------------------
def _versioned_buffer(versions, **kwargs):
    from rlpipe.data.replay_buffers.samplers import StalenessAwareSampler
    sampler = StalenessAwareSampler(**kwargs)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(len(versions)), sampler=sampler, batch_size=4)
    rb.extend(TensorDict({"obs": rlpipe.arange(len(versions)),
                          "policy_version": rlpipe.tensor([float(v) for v in versions])}, [len(versions)]))
    return rb, sampler


def test_staleness_sampler_weights_and_gate():
    rlpipe.manual_seed(0)
    rb, sampler = _versioned_buffer([0.0] * 50 + [9.0] * 50)
    sampler.consumer_version = 10  # staleness 10 (weight 1/11) and 1 (weight 1/2)
    index, info = sampler.sample(rb.storage, 20_000)  # more draws than items: with replacement
    fresh = (index >= 50).float().mean().item()
    assert fresh == pytest.approx((1 / 2) / (1 / 2 + 1 / 11), abs=0.01)
    assert set(info["staleness"].tolist()) == {1.0, 10.0} and info["staleness"].dtype == rlpipe.float32
    sampler.max_staleness = 3
    index, _ = sampler.sample(rb.storage, 8)
    assert (index >= 50).all() and index.unique().numel() == 8  # enough eligible items: no repeats
    sampler.consumer_version = 100
    with pytest.raises(RuntimeError, match="All 100 entries in the buffer exceed max_staleness=3"):
        rb.sample()


def test_staleness_sampler_custom_weight_state_and_errors():
    rb, sampler = _versioned_buffer([0.0, 0.0, 5.0, 5.0], staleness_weight_fn=lambda s: (s == 0).float())
    sampler.consumer_version = 5
    for _ in range(5):
        assert set(rb.sample(2)["obs"].tolist()) == {2, 3}  # weight 0 for the stale two
    sampler.increment_consumer_version()
    assert sampler.state_dict() == {"type": "StalenessAwareSampler", "consumer_version": 6, "max_staleness": -1}
    from rlpipe.data.replay_buffers.samplers import StalenessAwareSampler
    other = StalenessAwareSampler()
    other.load_state_dict({"consumer_version": 42, "max_staleness": 7})  # torchrl's keys
    assert (other.consumer_version, other.max_staleness) == (42, 7)
    bare = TensorDictReplayBuffer(storage=LazyTensorStorage(4), sampler=StalenessAwareSampler(), batch_size=2)
    bare.extend(TensorDict({"obs": rlpipe.arange(4)}, [4]))
    with pytest.raises(KeyError, match="Could not find key 'policy_version'"):
        bare.sample()
    with pytest.raises(TypeError, match="staleness_weight_fn must be callable, got int"):
        StalenessAwareSampler(staleness_weight_fn=3)


# ---- SliceSampler span ---------------------------------------------------------------------------------
def _slice_shapes(span, draws=300):
    """The (first step, length) pairs of the slices drawn from ten trajectories of ten steps."""
    from rlpipe.data import SliceSampler
    storage = LazyTensorStorage(100)
    storage.set(range(100), TensorDict({"eps": rlpipe.arange(100) // 10, "obs": rlpipe.arange(100) % 10}, [100]))
    sampler = SliceSampler(num_slices=10, traj_key="eps", span=span)
    seen = set()
    for _ in range(draws):
        index, info = sampler.sample(storage, 50)
        obs, ends = storage[index]["obs"].tolist(), info[("next", "truncated")].reshape(-1).tolist()
        begin = 0
        for i, end in enumerate(ends):
            if end:
                seen.add((obs[begin], i - begin + 1))
                begin = i + 1
    return seen


@pytest.mark.parametrize("span,expected", [
    # torchrl 0.14.1 draws exactly these (first step, length) pairs, each about equally often
    ((2, 2), {(0, 3), (0, 4), (0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (6, 4), (7, 3)}),
    ((True, False), {(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)}),
    ((False, 3), {(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (6, 4)}),
    (False, {(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)}),
])
def test_slice_sampler_span(span, expected):
    rlpipe.manual_seed(0)
    assert _slice_shapes(span) == expected


def test_slice_sampler_span_errors_and_prioritized_left_span():
    from rlpipe.data import PrioritizedSliceSampler, SliceSampler
    with pytest.raises(ValueError, match="span must be a bool, a non-negative int, or a pair"):
        SliceSampler(num_slices=2, span=(1, 2, 3))
    storage = LazyTensorStorage(20)
    storage.set(range(20), TensorDict({"episode": rlpipe.arange(20) // 10}, [20]))
    with pytest.raises(ValueError, match="The right and left span must be strictly lower than the sequence length"):
        SliceSampler(slice_len=5, span=5).sample(storage, 10)
    with pytest.warns(UserWarning, match="Left spanning is disabled for PrioritizedSliceSampler"):
        sampler = PrioritizedSliceSampler(max_capacity=10, alpha=0.5, beta=0.5, slice_len=5, span=3)
    assert sampler.span == (0, 3)


def _short_trajectories(lengths, slice_len, num_slices, with_init=True, **kwargs):
    from rlpipe.data import SliceSampler
    parts = []
    for tid, n in enumerate(lengths):
        entries = {"traj": rlpipe.full((n,), tid, dtype=rlpipe.int64), "obs": rlpipe.arange(n).float()}
        if with_init:
            init = rlpipe.zeros(n, 1, dtype=rlpipe.bool)
            init[0] = True
            entries["is_init"] = init
        parts.append(TensorDict(entries, [n]))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(sum(lengths)), batch_size=num_slices * slice_len,
                                sampler=SliceSampler(slice_len=slice_len, traj_key="traj", strict_length=False,
                                                     **kwargs))
    rb.extend(rlpipe.cat(parts))
    return rb


def test_slice_sampler_pad_output_mask_and_truncated():
    # torchrl 0.14.1: slices padded to slice_len with their last real step, ("collector", "mask") [B*T]
    # True on real steps, truncated on the last real step, is_init on every slice start
    rlpipe.manual_seed(0)
    rb = _short_trajectories([2, 5, 3, 4], slice_len=6, num_slices=4, pad_output=True)
    for _ in range(5):
        sample = rb.sample()
        mask = sample["collector", "mask"].reshape(4, 6)
        assert sample["collector", "mask"].dtype == rlpipe.bool and sample.batch_size == (24,)
        lengths = mask.sum(-1).tolist()
        obs = sample["obs"].reshape(4, 6).tolist()
        trunc = sample["next", "truncated"].reshape(4, 6).tolist()
        for row, n in enumerate(lengths):
            assert mask[row, :n].all() and not mask[row, n:].any()
            assert obs[row][n:] == [obs[row][n - 1]] * (6 - n)  # the last real step, repeated
            assert trunc[row] == [False] * (n - 1) + [True] + [False] * (6 - n)
        assert sample["is_init"].reshape(4, 6)[:, 0].all()
    long_only = _short_trajectories([8, 8], slice_len=4, num_slices=2, pad_output=True)
    assert ("collector", "mask") not in long_only.sample().keys(True)  # nothing to pad


def test_slice_sampler_marks_slice_starts_only_where_is_init_is_stored():
    rlpipe.manual_seed(0)
    rb = _short_trajectories([3, 8, 2, 7, 5], slice_len=6, num_slices=4)
    sample = rb.sample()
    init = sample["is_init"].reshape(-1).tolist()
    trunc = sample["next", "truncated"].reshape(-1).tolist()
    starts = [0] + [i + 1 for i, t in enumerate(trunc[:-1]) if t]
    assert all(init[i] for i in starts)
    assert "is_init" not in _short_trajectories([3, 6, 2], 5, 3, with_init=False, pad_output=True).sample().keys()


@pytest.mark.parametrize("within", [True, False])
def test_prioritized_max_priority_tracking(within):
    # torchrl 0.14's rule (test_samplers.test_prb_update_max_priority), worked through by hand on a
    # 3-item buffer: within the buffer, the max follows the items stored and, among equal
    # priorities, sits at the lowest position; otherwise it is the largest ever given
    from rlpipe.data import PrioritizedSampler
    rb = ReplayBuffer(storage=LazyTensorStorage(3),
                      sampler=PrioritizedSampler(3, alpha=1.0, beta=1.0, max_priority_within_buffer=within))
    expected_within = [(6.0, 0), (6.0, 0), (6.0, 0), (5.0, 1), (4.0, 2)]
    for step, value in enumerate(range(5)):
        index = rb.add(rlpipe.tensor(value))
        rb.update_priority(index, 6 - value)
        assert rb.sampler._max_priority == (expected_within[step] if within else (6.0, 0))
    assert rb.sampler._max_capacity == 3
    index = rb.extend(rlpipe.arange(3))
    rb.update_priority(index, 12 if within else 5)
    assert rb.sampler._max_priority == ((12.0, 0) if within else (6.0, 0))


# ---- in-place writes that add entries; read_all_in_order / write_all ---------------------------------------
def test_in_place_write_adds_new_entries_zero_filled():
    # torchrl 0.14.1: a [0, 7, 8, 3], d [0., 1., 2., 0.] float32, len 4, cursor 4
    rb = ReplayBuffer(storage=LazyTensorStorage(6))
    rb.extend(TensorDict({"a": rlpipe.arange(4)}, [4]))
    rb[1:3] = TensorDict({"a": rlpipe.tensor([7, 8]), "d": rlpipe.tensor([1.0, 2.0])}, [2])
    assert rb[:]["a"].tolist() == [0, 7, 8, 3] and rb[:]["d"].tolist() == [0.0, 1.0, 2.0, 0.0]
    assert rb[:]["d"].dtype == rlpipe.float32 and len(rb) == 4 and rb.writer._cursor == 4
    with pytest.raises(KeyError, match=r"missing \['a'\], unexpected \[\]"):  # a missing entry: still refused
        rb[0:1] = TensorDict({"d": rlpipe.tensor([5.0])}, [1])
    with pytest.raises(KeyError, match=r"unexpected \['e'\]"):  # extend never adds entries (rlpipe's rule)
        rb.extend(TensorDict({"a": rlpipe.arange(1), "d": rlpipe.zeros(1), "e": rlpipe.zeros(1)}, [1]))
    memmap = ReplayBuffer(storage=LazyMemmapStorage(4))
    memmap.extend(TensorDict({"a": rlpipe.arange(2)}, [2]))
    with pytest.raises(KeyError, match=r"unexpected \['d'\]"):
        memmap[0:1] = TensorDict({"a": rlpipe.tensor([1]), "d": rlpipe.tensor([1.0])}, [1])


def test_read_all_in_order_and_write_all():
    # torchrl 0.14.1: keys ['index', 'obs'], [0, 1, 2], then [10, 11, 12, 3, 4, 5]
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(TensorDict({"obs": rlpipe.arange(6)}, [6]))
    part = rb.read_all_in_order(end=3)
    assert sorted(part.keys()) == ["index", "obs"] and part["obs"].tolist() == [0, 1, 2]
    part["obs"] = part["obs"] + 10
    rb.write_all(part, end=3)
    assert rb.read_all_in_order()["obs"].tolist() == [10, 11, 12, 3, 4, 5]
    everything = rb.read_all_in_order()
    everything["target"] = everything["obs"] * 2
    rb.write_all(everything)
    assert rb[:]["target"].tolist() == [20, 22, 24, 6, 8, 10]


def test_save_and_load_hooks(tmp_path):
    # torchrl 0.14.1 sets shift=5, is_full=False for 5 items in a storage of 10 (test_storage_save_hook)
    class Scale:
        shift = None
        is_full = None

        def __init__(self, factor):
            self.factor = factor

        def __call__(self, data, path=None):
            return data * self.factor

    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    saving = Scale(10)
    rb.register_save_hook(saving)
    rb.extend(rlpipe.arange(5))
    rb.dumps(tmp_path / "a")
    assert (saving.shift, saving.is_full) == (5, False)
    other = ReplayBuffer(storage=LazyTensorStorage(10))
    other.load(tmp_path / "a")  # torchrl's alias of loads
    assert other[:].tolist() == [0, 10, 20, 30, 40]  # what the save hook wrote
    rb.extend(rlpipe.arange(7))  # 12 written: full, the last at position 1
    rb.save(tmp_path / "b")
    assert (saving.shift, saving.is_full) == (2, True)
    back = ReplayBuffer(storage=LazyTensorStorage(10))
    back.register_load_hook(lambda data: data // 10)
    back.loads(tmp_path / "b")
    assert back[:].tolist() == [5, 6, 2, 3, 4, 0, 1, 2, 3, 4]
    with pytest.raises(TypeError, match="a storage hook must be callable, got int"):
        rb.register_save_hook(3)


@pytest.mark.cuda
def test_cuda_storage_in_place_write_adds_entries_and_samples_by_staleness():
    from rlpipe import backends
    if not backends.cuda_available():
        pytest.skip("cuda backend unavailable (CuPy or a GPU missing)")
    rb = ReplayBuffer(storage=LazyTensorStorage(6, device="cuda"), batch_size=4)
    rb.extend(TensorDict({"a": rlpipe.arange(4, device="cuda")}, [4], device="cuda"))
    rb[1:3] = TensorDict({"a": rlpipe.tensor([7, 8], device="cuda"),
                          "d": rlpipe.tensor([1.0, 2.0], device="cuda")}, [2], device="cuda")
    stored = rb[:]
    assert stored["d"].device.type == "cuda" and stored["d"].tolist() == [0.0, 1.0, 2.0, 0.0]
    from rlpipe.data.replay_buffers.samplers import StalenessAwareSampler
    fresh = TensorDictReplayBuffer(storage=LazyTensorStorage(4, device="cuda"), batch_size=2,
                                   sampler=StalenessAwareSampler(max_staleness=1))
    fresh.extend(TensorDict({"policy_version": rlpipe.tensor([0.0, 0.0, 5.0, 5.0], device="cuda")}, [4],
                            device="cuda"))
    fresh.sampler.consumer_version = 5
    sample = fresh.sample()
    assert sample["index"].tolist() in ([2, 3], [3, 2]) and sample["staleness"].tolist() == [0.0, 0.0]
