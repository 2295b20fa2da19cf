"""``rlpipe.index_select`` on specs, as torchrl 0.14's (``torch.index_select(spec, dim, index)``): the spec of the
selected samples, bounds and masks selected with them. Expected values worked by hand."""
import pytest

import rlpipe
from rlpipe.envs.specs import Binary, Bounded, Categorical, Composite, MultiOneHot, OneHot, Unbounded


def test_bounded_selects_its_bounds():
    low = rlpipe.arange(20.0).reshape(5, 4)
    spec = Bounded(low, low + 1, shape=(5, 4))
    out = rlpipe.index_select(spec, 0, rlpipe.tensor([0, 4]))
    assert out.shape == (2, 4) and out.low[:, 0].tolist() == [0.0, 16.0] and out.high[1, 3].item() == 20.0
    cols = rlpipe.index_select(spec, -1, rlpipe.tensor([3]))
    assert cols.shape == (5, 1) and cols.low.flatten().tolist() == [3.0, 7.0, 11.0, 15.0, 19.0]
    assert out.rand().shape == (2, 4)


def test_masks_and_composites_follow_the_selection():
    mask = rlpipe.tensor([[True, False, False], [False, True, False], [False, False, True]])
    one_hot = rlpipe.index_select(OneHot(3, shape=(3, 3), mask=mask), 0, rlpipe.tensor([2, 0]))
    assert one_hot.mask.tolist() == [[False, False, True], [True, False, False]]
    assert one_hot.rand().tolist() == [[False, False, True], [True, False, False]]  # only the allowed one
    categorical = rlpipe.index_select(Categorical(3, shape=(3,), mask=mask), 0, rlpipe.tensor([1]))
    assert categorical.rand().tolist() == [1]
    spec = Composite(obs=Unbounded((5, 2)), act=Binary(4, shape=(5, 4)), shape=(5,))
    out = rlpipe.index_select(spec, 0, rlpipe.tensor([1, 2, 3]))
    assert out.shape == (3,) and out["obs"].shape == (3, 2) and out["act"].shape == (3, 4)
    assert rlpipe.index_select(Unbounded((5, 4)), 0, rlpipe.tensor([], dtype=rlpipe.int64)).shape == (0, 4)


@pytest.mark.parametrize("spec, dim, index, error, message", [
    (OneHot(3, shape=(5, 3)), -1, [0, 1], ValueError,
     "Cannot index_select along the last dimension of OneHot spec, as it represents the domain."),
    (MultiOneHot([2, 3], shape=(5, 5)), 1, [0], ValueError,
     "Cannot index_select along the last dimension of MultiOneHot spec"),
    (Binary(4, shape=(5, 4)), -1, [0], ValueError, "Cannot index_select along the last dimension of Binary spec"),
    (Unbounded((5, 4)), 0, [10], IndexError, "index [10] is out of bounds for dimension 0 with size 5"),
    (Unbounded((5, 4)), 0, [-1], IndexError, "index [-1] is out of bounds for dimension 0 with size 5"),
    (Unbounded((5, 4)), 2, [0], IndexError, "index_select: dim 2 out of range for a spec of shape [5, 4]"),
])
def test_bad_selections(spec, dim, index, error, message):
    with pytest.raises(error) as info:
        rlpipe.index_select(spec, dim, rlpipe.tensor(index))
    assert message in str(info.value)
    assert spec.rand().shape == spec.shape  # the spec is unchanged


def test_tensors_still_select():
    x = rlpipe.arange(6).reshape(2, 3)
    assert rlpipe.index_select(x, 1, rlpipe.tensor([0, 2])).tolist() == [[0, 2], [3, 5]]
    assert x.index_select(0, rlpipe.tensor([1])).tolist() == [[3, 4, 5]]
