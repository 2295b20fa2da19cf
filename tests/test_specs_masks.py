"""Masks of the discrete specs (torchrl's ``mask=`` / ``update_mask``). Expected values were recorded
from torchrl 0.14.1 in the peer venv (same specs, same inputs); sampled sets are brute-force checks
over many draws."""
import numpy as np
import pytest

import rlpipe
from rlpipe.envs.specs import Categorical, MultiCategorical, MultiOneHot, OneHot

MASK = [True, False, True, False, True]


def specs():
    """One spec of each maskable class, all with MASK (a 2-row shape)."""
    mask = rlpipe.tensor(MASK)
    return {"one_hot": OneHot(5, shape=(2, 5), mask=mask), "categorical": Categorical(5, shape=(2,), mask=mask),
            "mult_one_hot": MultiOneHot([2, 3], shape=(2, 5), mask=mask),
            "mult_categorical": MultiCategorical([2, 3], shape=(2, 2), mask=mask)}


def mask_shape(spec):
    return None if spec.mask is None else tuple(spec.mask.shape)


@pytest.mark.parametrize("name", ["one_hot", "categorical", "mult_one_hot", "mult_categorical"])
def test_mask_follows_shape_changes_and_equality(name):
    spec = specs()[name]
    assert mask_shape(spec) == (2, 5)  # torchrl 0.14.1: (2, 5) for the four
    assert mask_shape(spec.unsqueeze(0)) == (1, 2, 5)
    assert spec.unsqueeze(0).squeeze(0) == spec and spec.clone() == spec
    other = spec.clone()
    other.update_mask(~other.mask)
    assert other != spec
    other.update_mask(None)
    assert other.mask is None and other != spec


@pytest.mark.parametrize("name", ["one_hot", "mult_one_hot"])
def test_expand_keeps_the_mask(name):
    assert mask_shape(specs()[name].expand(3, 2, 5)) == (3, 2, 5)  # torchrl 0.14.1


def test_masked_membership_matches_torchrl():
    mask = rlpipe.tensor(MASK)
    categorical = Categorical(5, mask=mask)
    assert not categorical.is_in(rlpipe.tensor(1)) and categorical.is_in(rlpipe.tensor(2))
    multi = MultiCategorical([2, 3], mask=mask)
    assert [multi.is_in(rlpipe.tensor(v)) for v in ([0, 0], [0, 1], [1, 0])] == [True, False, False]
    one_hot = OneHot(5, mask=mask)
    assert one_hot.is_in(rlpipe.tensor([0, 0, 1, 0, 0], dtype=rlpipe.bool))
    assert not one_hot.is_in(rlpipe.tensor([0, 1, 0, 0, 0], dtype=rlpipe.bool))
    multi_one_hot = MultiOneHot([2, 3], mask=mask)
    assert multi_one_hot.is_in(rlpipe.tensor([1, 0, 1, 0, 0], dtype=rlpipe.bool))
    assert not multi_one_hot.is_in(rlpipe.tensor([1, 0, 0, 1, 0], dtype=rlpipe.bool))
    assert Categorical(5, mask=mask) != Categorical(5) and Categorical(5, mask=mask) == Categorical(5, mask=mask)


def test_rand_draws_exactly_the_allowed_categories():
    rlpipe.manual_seed(0)
    mask = rlpipe.tensor(MASK)
    drawn = Categorical(5, mask=mask).rand((200,)).tolist()
    assert sorted(set(drawn)) == [0, 2, 4]
    drawn = MultiCategorical([2, 3], mask=mask).rand((200,)).tolist()
    assert sorted(set(map(tuple, drawn))) == [(0, 0), (0, 2)]
    drawn = MultiOneHot([2, 3], mask=mask).rand((200,)).to(rlpipe.int64).tolist()
    assert sorted(set(map(tuple, drawn))) == [(1, 0, 0, 0, 1), (1, 0, 1, 0, 0)]
    rows = Categorical(3, shape=(2,), mask=rlpipe.tensor([[True, False, False], [False, False, True]]))
    assert rows.rand((4,)).tolist() == [[0, 2]] * 4


def test_project_replaces_forbidden_categories():
    rows = Categorical(3, shape=(2,), mask=rlpipe.tensor([[True, False, False], [False, False, True]]))
    assert rows.project(rlpipe.tensor([1, 1])).tolist() == [0, 2]  # torchrl 0.14.1: [0, 2]
    rlpipe.manual_seed(1)
    categorical = Categorical(5, mask=rlpipe.tensor(MASK))
    assert sorted({categorical.project(rlpipe.tensor(1)).item() for _ in range(60)}) == [0, 2, 4]
    one_hot = OneHot(5, mask=rlpipe.tensor(MASK))
    projected = one_hot.project(rlpipe.tensor([0, 0, 0, 1, 0], dtype=rlpipe.bool))
    assert one_hot.is_in(projected) and int(np.argmax(projected.numpy())) in (0, 2, 4)
    allowed = rlpipe.tensor([0, 0, 1, 0, 0], dtype=rlpipe.bool)
    assert one_hot.project(allowed).tolist() == allowed.tolist()


def test_update_mask_broadcasts_and_reshapes():
    spec = Categorical(3, shape=(2,))
    spec.update_mask([True, False, True])  # broadcast to (2, 3)
    assert mask_shape(spec) == (2, 3)
    spec.update_mask(rlpipe.tensor([[True], [False], [True]]))  # n elements: read as (n,) as torchrl does
    assert spec.mask.tolist() == [[True, False, True]] * 2


def test_mask_errors():
    spec = OneHot(5, mask=rlpipe.tensor(MASK))
    with pytest.raises(ValueError, match=r"update_mask: a mask of shape \[2\] does not broadcast to the spec's \[5\]"):
        spec.update_mask(rlpipe.tensor([True, False]))
    assert spec.mask.tolist() == MASK  # the failed call kept the mask
    with pytest.raises(RuntimeError, match="the action mask allows no category"):
        Categorical(3, mask=rlpipe.tensor([False, False, False])).rand()


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_masks_on_a_cuda_spec():
    spec = Categorical(5, shape=(3,), device="cuda", mask=rlpipe.tensor(MASK))
    assert spec.mask.device.type == "cuda"
    sample = spec.rand((40,))
    assert sample.device.type == "cuda" and set(sample.cpu().reshape(-1).tolist()) <= {0, 2, 4}
    assert spec.is_in(sample) and not spec.is_in(rlpipe.tensor([1, 0, 0], device="cuda"))
    projected = spec.project(rlpipe.tensor([1, 3, 0], device="cuda"))
    assert projected.device.type == "cuda" and spec.is_in(projected) and projected.cpu().tolist()[2] == 0
    test = spec.host_membership_test()
    assert test(np.array([0, 2, 4])) and not test(np.array([0, 1, 4]))
    one_hot = OneHot(5, device="cuda", mask=rlpipe.tensor(MASK)).expand(4, 5)
    assert one_hot.is_in(one_hot.rand()) and one_hot.mask.device.type == "cuda"
