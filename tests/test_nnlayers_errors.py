"""The newer nn layers and functional ops reject bad input as torch 2.13 does: the same exception type and
message (recorded by ``fixtures/make_nnlayers_golden.py``; its ``torch.`` names, ``torch.Size``, read ``rlpipe.``)."""
import warnings

import pytest

import nnlayers_cases as cases
import rlpipe as r
from test_nnlayers_golden import GOLDEN


@pytest.mark.parametrize("name", sorted(cases.ERRORS))
def test_error_matches_torch(name):
    expected_type = str(GOLDEN[f"err/{name}/type"])
    expected = str(GOLDEN[f"err/{name}/message"]).replace("torch.", "rlpipe.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as info:
            cases.ERRORS[name](r)
    assert type(info.value).__name__ == expected_type, info.value
    assert str(info.value).split("\n")[0] == expected
