"""The tensor core's small gaps that real PyTorch code hits; expected values recorded from torch 2.13."""
import math

import rlpipe


def test_constants_are_torchs_python_floats():
    assert (rlpipe.pi, rlpipe.e) == (3.141592653589793, 2.718281828459045)
    assert rlpipe.inf == float("inf") and math.isnan(rlpipe.nan)
    assert all(type(c) is float for c in (rlpipe.pi, rlpipe.e, rlpipe.inf, rlpipe.nan))
