"""torch.testing._internal.common_nn for rlpipe: ``NNTestCase`` (``TestCase`` with the forward/backward,
parameter and Jacobian helpers test/nn files use) and ``freeze_rng_state``. torch's large tables of
module and criterion tests are not here."""
from ... import _dtypes, nn
from ..._creation import empty as _empty
from ..._creation import zeros, zeros_like
from ...random import rand, rand_like, randn, randn_like
from .common_utils import TestCase, freeze_rng_state, gradcheck, gradgradcheck  # noqa: F401

__all__ = ["NNTestCase", "freeze_rng_state", "_test_bfloat16_ops", "_test_module_empty_input", "_create_basic_net"]


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


class NNTestCase(TestCase):
    """The base of torch's nn test classes: calls a module (``_forward``), backpropagates through it
    (``_backward``), lists and zeroes its parameters and gradients, and checks its input Jacobian against
    finite differences (``check_jacobian``)."""

    def _forward(self, module, input):
        """``module(*input)`` (or ``module(input)``) with the RNG state restored afterwards."""
        with freeze_rng_state():
            return module(*input) if isinstance(input, tuple) else module(input)

    def _backward(self, module, input, output, grad_output, create_graph=False):
        """Backpropagates ``grad_output`` from ``output``; returns the gradient of ``input`` (None when
        ``input`` needs none)."""
        del module
        output.backward(grad_output, retain_graph=True, create_graph=create_graph)
        if isinstance(input, tuple):
            return tuple(i.grad.data if i.grad is not None else None for i in input)
        return input.grad.data if input.grad is not None else None

    def _get_parameters(self, module):
        """(the parameters of ``module`` that require grad, their gradients, zeros where none yet)."""
        params = [p for p in module.parameters() if p.requires_grad]
        grads = [p.grad if p.grad is not None else zeros(p.shape, dtype=p.dtype, device=p.device) for p in params]
        return params, grads

    def _zero_grad_parameters(self, module):
        """Zeroes the gradient of every parameter of ``module`` that has one."""
        for p in module.parameters():
            if p.grad is not None:
                p.grad.zero_()

    def _zero_grad_input(self, input):
        """Zeroes the gradient of ``input`` (a tensor or nested tuples/lists of them)."""
        if isinstance(input, (list, tuple)):
            for i in input:
                self._zero_grad_input(i)
        elif input.grad is not None:
            input.grad.zero_()

    def check_jacobian(self, module, input, jacobian_input=True):
        """Asserts that the gradients of ``module``'s output with respect to ``input`` (when
        ``jacobian_input``) and to its parameters match central finite differences (float64 advised)."""
        params = [p for p in module.parameters() if p.requires_grad]
        inputs = list(_as_tuple(input)) if jacobian_input else []

        def call(*tensors):
            given = tensors[:len(inputs)] if jacobian_input else _as_tuple(input)
            return module(*given)

        self.assertTrue(gradcheck(lambda *t: call(*t), tuple(inputs) + tuple(params), check_batched_grad=False))


def _assertGradAndGradgradChecks(test_case, apply_fn, inputs, check_forward_ad=False):
    """Asserts that ``apply_fn`` passes ``gradcheck`` and ``gradgradcheck`` at ``inputs``."""
    del check_forward_ad  # rlpipe has no forward-mode AD
    test_case.assertTrue(gradcheck(apply_fn, inputs))
    test_case.assertTrue(gradgradcheck(apply_fn, inputs))



def _test_bfloat16_ops(test_case, op, device, inp_dims=(), prec=1e-2, scale_factor=None):
    """Asserts that module ``op`` gives the same output and input gradient in bfloat16 as in float32 (within
    ``prec``), on a random input of shape ``inp_dims`` (scaled by ``scale_factor`` when given)."""
    if scale_factor is None:
        input32 = randn(inp_dims, dtype=_dtypes.float32, device=device, requires_grad=True)
    else:
        input32 = (rand(inp_dims, dtype=_dtypes.bfloat16, device=device) * scale_factor).float().requires_grad_()
    out32 = op(input32)
    grad32 = randn_like(out32)
    out32.backward(grad32)
    op16 = op.bfloat16()
    input16 = input32.detach().bfloat16().requires_grad_()
    out16 = op16(input16)
    out16.backward(grad32.bfloat16())
    test_case.assertEqual(out32, out16, atol=prec, rtol=prec, exact_dtype=False)
    test_case.assertEqual(input32.grad.data, input16.grad.data, atol=prec, rtol=prec, exact_dtype=False)


def _test_module_empty_input(test_case, module, inp, check_size=True, inference=False):
    """Runs ``module`` on an empty input (and backward unless ``inference``): the output has the input's
    size when ``check_size``, and every gradient is zero."""
    if not inference:
        inp.requires_grad_(True)
    out = module(inp)
    if not inference:
        out.backward(rand_like(out))
    if check_size:
        test_case.assertEqual(out.size(), inp.size())
    if not inference:
        for p in module.parameters():
            if p.requires_grad:
                test_case.assertEqual(p.grad, zeros_like(p.grad))
        test_case.assertEqual(inp.grad, zeros_like(inp))


class _BasicLayer(nn.Module):
    """A module with one parameter and one buffer of its own and no forward."""

    def __init__(self):
        super().__init__()
        self.layer_dummy_param = nn.Parameter(_empty(3, 5))
        self.layer_dummy_buf = nn.Buffer(zeros(1, 3, 3, 7))


class _BasicNet(nn.Module):
    """A ``_BasicLayer`` child plus a parameter and a buffer of its own."""

    def __init__(self):
        super().__init__()
        self.l1 = _BasicLayer()
        self.dummy_param = nn.Parameter(_empty(3, 5))
        self.dummy_buf = nn.Buffer(zeros(7, 3, 3, 1))


def _create_basic_net():
    """(a layer, a net holding a layer, a Sequential holding that net twice): the small module trees
    torch's nn tests walk for parameters, buffers and submodules."""
    net = _BasicNet()
    return _BasicLayer(), net, nn.Sequential(net, net)
