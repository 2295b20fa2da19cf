"""The newer nn functional ops and layers on the CUDA backend against torch 2.13's recorded CPU results
(the same cases as ``test_nnlayers_golden.py``): outputs, dtypes and input gradients."""
import numpy as np
import pytest

import nnlayers_cases as cases
import rlpipe as r
import rlpipe.nn as nn
from test_nnlayers_golden import GOLDEN, check_functional_case

pytestmark = pytest.mark.cuda

if not r.cuda.is_available():
    pytest.skip("CUDA unavailable (CuPy or a GPU missing)", allow_module_level=True)


@pytest.mark.parametrize("name", sorted(cases.FUNCTIONAL))
def test_functional_on_cuda_matches_torch(name):
    check_functional_case(name, "cuda")


@pytest.mark.parametrize("name", ["Conv1d_same_circular", "ConvTranspose2d", "GroupNorm", "InstanceNorm2d_tracked",
                                  "RMSNorm", "ReflectionPad2d", "AdaptiveMaxPool2d", "Upsample_bilinear", "Fold"])
def test_module_on_cuda_matches_torch(name):
    make = cases.MODULES[name][0]
    module = make(nn).double()
    state = {key[len(f"mod/{name}/state/"):]: r.tensor(GOLDEN[key]) for key in GOLDEN.files
             if key.startswith(f"mod/{name}/state/")}
    module.load_state_dict(state)
    module.cuda()
    out = module(r.tensor(GOLDEN[f"mod/{name}/in0"], device="cuda"))
    assert out.device.type == "cuda"
    np.testing.assert_allclose(out.detach().cpu().numpy(), GOLDEN[f"mod/{name}/out"], rtol=1e-9, atol=1e-11)
