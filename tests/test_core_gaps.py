"""The tensor core's small gaps that real PyTorch code hits; expected values recorded from torch 2.13."""
import math
from collections import deque

import numpy as np
import pytest

import rlpipe


def test_constants_are_torchs_python_floats():
    assert (rlpipe.pi, rlpipe.e) == (3.141592653589793, 2.718281828459045)
    assert rlpipe.inf == float("inf") and math.isnan(rlpipe.nan)
    assert all(type(c) is float for c in (rlpipe.pi, rlpipe.e, rlpipe.inf, rlpipe.nan))


# torch.tensor on sequences: (data, dtype, shape, values) recorded from torch 2.13
_SEQUENCES = [
    (lambda: deque([1, 2, 3]), "int64", [3], [1, 2, 3]),
    (lambda: deque([1.0, 2]), "float32", [2], [1.0, 2.0]),
    (lambda: deque(), "float32", [0], []),
    (lambda: range(4), "int64", [4], [0, 1, 2, 3]),
    (lambda: (1, 2.5), "float32", [2], [1.0, 2.5]),
    (lambda: [deque([1, 2]), (3, 4)], "int64", [2, 2], [[1, 2], [3, 4]]),
    (lambda: [range(2), range(2)], "int64", [2, 2], [[0, 1], [0, 1]]),
    (lambda: [rlpipe.tensor([0.5]), rlpipe.tensor([0.75])], "float32", [2], [0.5, 0.75]),
    (lambda: [rlpipe.tensor(0.5), rlpipe.tensor(0.75)], "float32", [2], [0.5, 0.75]),
    (lambda: [rlpipe.tensor([[0.5]]), rlpipe.tensor([[0.75]])], "float32", [2], [0.5, 0.75]),
    (lambda: [1, rlpipe.tensor(2.5), rlpipe.tensor([3])], "float32", [3], [1.0, 2.5, 3.0]),
    (lambda: [1, rlpipe.tensor(2), rlpipe.tensor([3])], "int64", [3], [1, 2, 3]),
    (lambda: [1, rlpipe.tensor(2.0, dtype=rlpipe.float64)], "float64", [2], [1.0, 2.0]),
    (lambda: [rlpipe.tensor([1.0], dtype=rlpipe.float64), 2], "float64", [2], [1.0, 2.0]),
    (lambda: [rlpipe.tensor([1]), 2.5], "float32", [2], [1.0, 2.5]),
    (lambda: [[rlpipe.tensor([1]), 2], [3, 4]], "int64", [2, 2], [[1, 2], [3, 4]]),
    (lambda: (rlpipe.tensor([1]), rlpipe.tensor([2])), "int64", [2], [1, 2]),
    (lambda: np.float32(1.5), "float32", [], 1.5),
    (lambda: np.float64(1.5), "float64", [], 1.5),
    (lambda: [np.float64(1.5), 2], "float64", [2], [1.5, 2.0]),
    (lambda: [np.int32(1), 2], "int64", [2], [1, 2]),
    (lambda: np.bool_(True), "bool", [], True),
    (lambda: [True, False], "bool", [2], [True, False]),
    (lambda: [True, 2], "int64", [2], [1, 2]),
]


@pytest.mark.parametrize("make", [rlpipe.tensor, rlpipe.as_tensor], ids=["tensor", "as_tensor"])
@pytest.mark.parametrize("data, dtype, shape, values", _SEQUENCES)
def test_tensor_from_any_sequence_as_torch(make, data, dtype, shape, values):
    t = make(data())
    assert (t.dtype, list(t.shape), t.tolist()) == (getattr(rlpipe, dtype), shape, values)


@pytest.mark.parametrize("data", [
    lambda: [rlpipe.tensor([1.0, 2.0]), rlpipe.tensor([3.0, 4.0])],
    lambda: [rlpipe.tensor([1.0, 2.0]), 3],
    lambda: [rlpipe.tensor([1.0, 2.0])],
])
@pytest.mark.parametrize("make", [rlpipe.tensor, rlpipe.as_tensor], ids=["tensor", "as_tensor"])
def test_multi_element_tensor_inside_a_list_raises_as_torch(make, data):
    with pytest.raises(ValueError, match="^only one element tensors can be converted to Python scalars$"):
        make(data())


@pytest.mark.parametrize("data", [1 + 2j, [1, 2j]])
def test_complex_data_is_refused_clearly(data):
    with pytest.raises(TypeError, match="no complex dtypes"):
        rlpipe.tensor(data)
