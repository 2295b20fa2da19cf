"""``rlpipe.utils.data`` (torch.utils.data): what PyTorch tutorials and supervised RL code (behaviour
cloning, model pretraining) import. Expected values and messages were recorded from torch 2.13.0."""
import collections

import numpy as np
import pytest

import rlpipe
from rlpipe.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                               SequentialSampler, Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                               default_collate, default_convert, random_split)

Pair = collections.namedtuple("Pair", "a b")


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(7))


def _dataset():
    return TensorDataset(rlpipe.arange(10.0), rlpipe.arange(10))


def test_default_collate_by_type():
    ints, floats, bools, strings, np_scalars, arrays = default_collate(
        [(1, 2.5, True, "a", np.float32(1.5), np.array([1, 2]))] * 2)
    assert ints.dtype == rlpipe.int64 and ints.tolist() == [1, 1]
    assert floats.dtype == rlpipe.float64 and floats.tolist() == [2.5, 2.5]
    assert bools.dtype == rlpipe.bool and bools.tolist() == [True, True]
    assert strings == ("a", "a")  # torch 2.13 keeps the zipped tuple of strings
    assert np_scalars.dtype == rlpipe.float32 and np_scalars.tolist() == [1.5, 1.5]
    assert arrays.dtype == rlpipe.int64 and arrays.tolist() == [[1, 2], [1, 2]]
    nested = default_collate([{"x": rlpipe.ones(2), "y": [1, 2]}] * 2)
    assert nested["x"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert [t.tolist() for t in nested["y"]] == [[1, 1], [2, 2]]
    pair = default_collate([Pair(1, rlpipe.zeros(1))] * 2)
    assert isinstance(pair, Pair) and pair.a.tolist() == [1, 1] and pair.b.shape == (2, 1)


def test_default_collate_bad_batches():
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                                        "or lists; found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        default_collate([rlpipe.zeros(2), rlpipe.zeros(3)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [1]])


def test_default_convert_turns_arrays_into_tensors_and_tuples_into_lists():
    out = default_convert((np.array([1.0, 2.0]), "s", 3))
    assert isinstance(out, list) and out[0].tolist() == [1.0, 2.0] and out[1:] == ["s", 3]


def test_tensor_dataset_and_loader_in_order():
    ds = _dataset()
    assert len(ds) == 10 and [t.item() for t in ds[3]] == [3.0, 3]
    loader = DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    assert [x.tolist() for x, _ in loader] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [[t.item() for t in sample] for sample in DataLoader(ds, batch_size=None)][:2] == [[0.0, 0], [1.0, 1]]


def test_shuffled_loader_is_a_permutation_and_repeats_with_a_seeded_generator():
    def epoch(seed):
        loader = DataLoader(_dataset(), batch_size=4, shuffle=True, generator=rlpipe.Generator().manual_seed(seed))
        return [y.tolist() for _, y in loader]
    batches = epoch(0)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(sum(batches, [])) == list(range(10))
    assert epoch(0) == batches


def test_iterable_dataset_loader():
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match="has no len"):
        len(DataLoader(Stream(), batch_size=3))


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0), "batch_size should be a positive integer value, but got batch_size=0"),
    (dict(shuffle=True, sampler=[1, 2]), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_size=2, batch_sampler=[[1, 2]]),
     "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"),
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
])
def test_loader_bad_options(kwargs, message):
    with pytest.raises(ValueError) as info:
        DataLoader(_dataset(), **kwargs)
    assert message in str(info.value)


def test_loader_refuses_shuffle_for_a_stream():
    with pytest.raises(ValueError, match="expected unspecified shuffle option, but got shuffle=True"):
        DataLoader(Stream(), shuffle=True)


def test_samplers():
    assert list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False)) == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert len(BatchSampler(range(10), 3, True)) == 3
    assert sorted(RandomSampler(range(5))) == [0, 1, 2, 3, 4]
    assert len(list(RandomSampler(range(5), num_samples=3))) == 3
    counts = collections.Counter(RandomSampler(range(3), num_samples=7))  # two full passes and one more index
    assert sorted(counts.values()) == [2, 2, 3]
    assert sorted(SubsetRandomSampler([7, 8, 9])) == [7, 8, 9]
    assert set(WeightedRandomSampler([0.0, 1.0, 0.0], 5)) == {1}
    with pytest.raises(ValueError, match="drop_last should be a boolean value, but got drop_last=1"):
        BatchSampler(range(3), 2, 1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        WeightedRandomSampler([1.0], 0)


def test_concat_subset_and_random_split():
    ds = _dataset()
    both = ds + ds
    assert isinstance(both, ConcatDataset) and len(both) == 20 and both[12][1].item() == 2 and both[-1][1].item() == 9
    assert Subset(ds, [5, 1])[1][1].item() == 1
    # torch 2.13: fractions [0.33, 0.33, 0.34] of 10 give 4, 3, 3; [0.5, 0.5] of 11 give 6, 5
    assert [len(s) for s in random_split(range(10), [0.33, 0.33, 0.34])] == [4, 3, 3]
    parts = random_split(range(11), [0.5, 0.5], generator=rlpipe.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [6, 5] and sorted(list(parts[0]) + list(parts[1])) == list(range(11))
    with pytest.raises(ValueError, match="sum of input lengths 6 does not equal the length of the input dataset 10"):
        random_split(range(10), [3, 3])


def test_dataset_base_and_size_mismatch():
    with pytest.raises(NotImplementedError, match="Subclasses of Dataset should implement __getitem__."):
        Dataset()[0]
    with pytest.raises(ValueError, match=r"size mismatch between tensors: first dimensions \[3, 4\]"):
        TensorDataset(rlpipe.zeros(3), rlpipe.zeros(4))


def test_a_training_loop_over_a_loader_fits_a_line():
    rlpipe.manual_seed(0)
    x = rlpipe.linspace(-1, 1, 64).unsqueeze(1)
    loader = DataLoader(TensorDataset(x, 3 * x + 1), batch_size=16, shuffle=True)
    model = rlpipe.nn.Linear(1, 1)
    opt = rlpipe.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(40):
        for xb, yb in loader:
            opt.zero_grad()
            rlpipe.nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
    assert model.weight.item() == pytest.approx(3.0, abs=1e-3) and model.bias.item() == pytest.approx(1.0, abs=1e-3)


def test_bare_import_exposes_utils_data():
    assert rlpipe.utils.data.DataLoader is DataLoader
