"""``memoize_encode`` (torchrl 0.14.1's cached encode): the cached steps give what the eager encode
gives, one plan per input type and shape, checks still run, and the cache is dropped on demand."""
import pickle

import numpy as np
import pytest

import rlpipe
from rlpipe.envs.specs import Binary, Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot

pytestmark = pytest.mark.filterwarnings("ignore:memoized encoding is an experimental feature")

CASES = [
    (lambda: Bounded(-1.0, 1.0, shape=(3,)), [np.zeros(3), [0.5, 0.25, 0.0], rlpipe.zeros(3), np.ones((1, 3))],
     [[0.0] * 3, [0.5, 0.25, 0.0], [0.0] * 3, [1.0] * 3]),  # reshaped to the spec's shape, as torchrl 0.14.1
    (lambda: Categorical(4), [2, np.int64(3), rlpipe.tensor(1)], [2, 3, 1]),
    (lambda: OneHot(3), [2, np.array(0)], [[False, False, True], [True, False, False]]),
    (lambda: MultiOneHot([2, 3]), [np.array([1, 2])], [[False, True, False, False, True]]),
    (lambda: MultiCategorical([2, 3]), [np.array([1, 2])], [[1, 2]]),
    (lambda: Binary(3), [np.array([1, 0, 1])], [[1, 0, 1]]),
]


@pytest.mark.parametrize("make, values, expected", CASES)
def test_memoized_encode_matches_hand_values(make, values, expected):
    spec = make()
    spec.memoize_encode()
    for _ in range(2):  # the first call plans, the second replays the cached steps
        assert [spec.encode(v).tolist() for v in values] == expected
    assert len(spec._encode_memo_dict) == len(values)  # one plan per input type and shape
    spec.erase_memoize_cache()
    assert spec._encode_memo_dict == {}
    spec.memoize_encode(False)
    assert "_encode_memo_dict" not in spec.__dict__
    assert [spec.encode(v).tolist() for v in values] == expected


def test_memoized_encode_still_checks_values_and_warns():
    spec = Categorical(4)
    with pytest.warns(UserWarning, match="memoized encoding is an experimental feature"):
        spec.memoize_encode()
    assert spec.encode(np.array(2)).item() == 2
    with pytest.raises(ValueError, match=r"Categorical.encode: values must be in \[0, 4\), got 7"):
        spec.encode(np.array(7))  # replays the cached steps, the range check included
    assert spec.encode(np.array(3)).item() == 3


def test_reshape_step_is_planned_once_and_pickles_without_cache():
    spec = Bounded(-1.0, 1.0, shape=(2, 2))
    spec.memoize_encode()
    assert spec.encode(np.zeros(4)).shape == (2, 2)
    assert spec.encode(np.ones(4)).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(RuntimeError, match=r"Shape mismatch: the value has shape rlpipe.Size\(\[3\]\) which is "
                       r"incompatible with the spec shape rlpipe.Size\(\[2, 2\]\)"):
        spec.encode(np.zeros(3))
    clone = pickle.loads(pickle.dumps(spec))
    assert clone._encode_memo_dict == {} and clone == spec


def test_composite_memoizes_its_leaves():
    spec = Composite(obs=Bounded(-1.0, 1.0, shape=(2,)), nested=Composite(act=Categorical(3)))
    spec.memoize_encode()
    out = spec.encode({"obs": np.zeros(2), ("nested", "act"): 2})
    assert out["obs"].tolist() == [0.0, 0.0] and out["nested", "act"].item() == 2
    assert len(spec["obs"]._encode_memo_dict) == 1 and len(spec["nested", "act"]._encode_memo_dict) == 1
    spec.erase_memoize_cache()
    assert spec["nested", "act"]._encode_memo_dict == {}


def test_check_spec_encode_switch_makes_values_outside_the_spec_assertion_errors(monkeypatch):
    # torchrl 0.14.1: with torchrl.data.tensor_specs._CHECK_SPEC_ENCODE set, encode and to_numpy assert
    # membership; without it, torchrl encodes as-is (rlpipe still refuses what cannot be encoded)
    import rlpipe.data.tensor_specs as tensor_specs
    import rlpipe.envs.specs as specs
    assert tensor_specs is specs and not specs._CHECK_SPEC_ENCODE
    bounded, one_hot = Bounded(0.0, 1.0, shape=(2,)), OneHot(3)
    assert bounded.encode(np.array([3.0, 0.5])).tolist() == [3.0, 0.5]
    assert bounded.to_numpy(rlpipe.tensor([3.0, 0.5])).tolist() == [3.0, 0.5]
    with pytest.raises(ValueError, match=r"OneHot.encode: indices must be in \[0, 3\), got 4"):
        one_hot.encode(4)
    monkeypatch.setattr(tensor_specs, "_CHECK_SPEC_ENCODE", True)
    with pytest.raises(AssertionError, match="Encoding failed because value is not in space"):
        bounded.encode(np.array([3.0, 0.5]))
    with pytest.raises(AssertionError, match="Encoding failed because value is not in space"):
        bounded.to_numpy(rlpipe.tensor([3.0, 0.5]))
    with pytest.raises(AssertionError, match=r"OneHot.encode: indices must be in \[0, 3\), got 4"):
        one_hot.encode(4)
    assert bounded.encode(np.array([1.0, 0.5])).tolist() == [1.0, 0.5]
    assert bounded.to_numpy(rlpipe.tensor([3.0, 0.5]), safe=False).tolist() == [3.0, 0.5]  # safe wins


def test_check_spec_encode_reads_torchrl_environment_variable():
    import os
    import subprocess
    import sys
    code = "import rlpipe.envs.specs as s; print(s._CHECK_SPEC_ENCODE)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CHECK_SPEC_ENCODE": "1"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
