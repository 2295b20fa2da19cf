"""Every op case of ``op_cases.py`` on the CUDA backend against the CPU backend: forward values and
dtypes, and the input gradients of a random weighted sum of the outputs, in float32 and float64.
(``test_ops.py`` checks the CPU backend against NumPy, so together they pin CUDA to the truth.)"""
import zlib

import numpy as np
import pytest

import rlpipe as r
from op_cases import CASES, as_tuple, assert_close, make_inputs

pytestmark = pytest.mark.cuda

if not r.cuda.is_available():
    pytest.skip("CUDA unavailable (CuPy or a GPU missing)", allow_module_level=True)


def _weights(case, outputs):
    """One fixed random array per output (seeded by the case name), the same for both devices."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + 1)
    return [rng.standard_normal(tuple(o.shape)) for o in outputs]


def _forward_backward(case, inputs):
    """The case's outputs and the gradients of sum(output * weight) for every input (zeros where
    an input gets none), or None for a forward-only case or one without differentiable outputs."""
    outputs = as_tuple(case.fn(*inputs))
    weighted = [(o, w) for o, w in zip(outputs, _weights(case, outputs)) if o.requires_grad]
    if not case.grad or not weighted:
        return outputs, None
    loss = sum((o * r.tensor(w, dtype=o.dtype, device=o.device)).sum() for o, w in weighted)
    grads = r.autograd.grad(loss, inputs, allow_unused=True)
    return outputs, [r.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_cuda_matches_cpu(case, precision):
    cpu_inputs = [r.tensor(a, requires_grad=True) for a in make_inputs(case, precision)]
    cuda_inputs = [x.detach().cuda().requires_grad_() for x in cpu_inputs]
    cpu_out, cpu_grads = _forward_backward(case, cpu_inputs)
    cuda_out, cuda_grads = _forward_backward(case, cuda_inputs)

    assert [o.device.type for o in cuda_out] == ["cuda"] * len(cuda_out)
    assert [o.dtype for o in cuda_out] == [o.dtype for o in cpu_out]
    assert_close(cuda_out, cpu_out, precision)
    assert (cuda_grads is None) == (cpu_grads is None)
    if cpu_grads is not None:
        assert [g.device.type for g in cuda_grads] == ["cuda"] * len(cuda_grads)
        assert_close(cuda_grads, cpu_grads, precision, what="input gradient")
