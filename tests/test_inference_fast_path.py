"""Sequential's inference fast path (``run_without_graph``): under no_grad it must give exactly what
running the modules one by one gives, and step aside whenever that could differ (hooks, patched or
overridden forwards, grad mode, dtype or device mismatches, unsupported modules)."""
import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.nn.modules.module import run_without_graph

ACTIVATIONS = [nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.GELU(), nn.GELU("tanh"), nn.LeakyReLU(0.2), nn.ELU(0.7),
               nn.SiLU(), nn.Softplus(2.0, 5.0)]


def one_by_one(net, x):
    for module in net:
        x = module(x)
    return x


@pytest.mark.parametrize("act", ACTIVATIONS, ids=lambda m: repr(m))
@pytest.mark.parametrize("dtype", [rlpipe.float32, rlpipe.float64])
@pytest.mark.parametrize("shape", [(3,), (5, 3), (2, 4, 3)])
def test_fast_path_equals_module_by_module(act, dtype, shape):
    rlpipe.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), act, nn.Linear(8, 2, bias=False)).to(dtype)
    x = rlpipe.randn(*shape, dtype=dtype)
    with rlpipe.no_grad():
        fast = run_without_graph(net, x)
        assert fast is not None
        slow = one_by_one(net, x)
        out = net(x)
    assert fast.dtype == slow.dtype == out.dtype == dtype
    assert tuple(fast.shape) == tuple(slow.shape) == shape[:-1] + (2,)
    np.testing.assert_array_equal(fast.numpy(), slow.numpy())
    np.testing.assert_array_equal(out.numpy(), slow.numpy())
    assert not out.requires_grad and out.grad_fn is None


def test_grad_mode_builds_the_graph_as_usual():
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    x = rlpipe.randn(2, 3)
    assert run_without_graph(net, x) is None
    out = net(x)
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()
    assert net[0].weight.grad is not None


def test_hooks_are_honoured():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    calls = []
    handle = net[1].register_forward_hook(lambda m, i, o: calls.append(1) or o * 0 + 7)
    x = rlpipe.randn(3)
    with rlpipe.no_grad():
        assert run_without_graph(net, x) is None
        out = net(x)
    assert calls == [1] and (out.numpy() == 7).all()
    handle.remove()
    pre = net[0].register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    with rlpipe.no_grad():
        np.testing.assert_allclose(net(x).numpy(), np.maximum(net[0].bias.detach().numpy(), 0))
    pre.remove()
    global_handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: calls.append(2))
    try:
        with rlpipe.no_grad():
            assert run_without_graph(net, x) is None
            net(x)
        assert 2 in calls
    finally:
        global_handle.remove()


def test_overridden_or_patched_forward_is_honoured():
    class Doubled(nn.Linear):
        def forward(self, input):
            return super().forward(input) * 2

    net = nn.Sequential(Doubled(3, 2))
    x = rlpipe.randn(3)
    with rlpipe.no_grad():
        assert run_without_graph(net, x) is None
        np.testing.assert_allclose(net(x).numpy(), 2 * nn.functional.linear(x, net[0].weight, net[0].bias).numpy())
    plain = nn.Sequential(nn.Linear(3, 2))
    plain[0].forward = lambda input: input.sum(-1, keepdim=True)
    with rlpipe.no_grad():
        assert run_without_graph(plain, x) is None
        np.testing.assert_allclose(plain(x).numpy(), [x.numpy().sum()], rtol=1e-6)


def test_unsupported_modules_and_settings_fall_back():
    x = rlpipe.randn(2, 3)
    with rlpipe.no_grad():
        assert run_without_graph(nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)), x) is None
        assert run_without_graph(nn.Sequential(nn.ReLU(inplace=True)), x) is None
        assert run_without_graph(nn.Sequential(nn.Linear(3, 3)), rlpipe.ones(2, 3, dtype=rlpipe.int64)) is None
        # a dtype mismatch falls back, and the usual path raises torch's error
        net = nn.Sequential(nn.Linear(3, 3).double())
        assert run_without_graph(net, x) is None
        with pytest.raises(RuntimeError, match="dtype"):
            net(x)


def test_shape_errors_are_the_usual_ones():
    net = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    with rlpipe.no_grad():
        assert run_without_graph(net, rlpipe.randn(4)) is None
        with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
            net(rlpipe.randn(4))


def test_replaced_parameters_are_used():
    net = nn.Sequential(nn.Linear(2, 1))
    with rlpipe.no_grad():
        net[0].weight.copy_(rlpipe.tensor([[1.0, 2.0]]))
        net[0].bias.fill_(0.5)
        assert net(rlpipe.tensor([3.0, 4.0])).tolist() == [11.5]
        net[0].weight = nn.Parameter(rlpipe.tensor([[-1.0, 0.0]]))
        assert net(rlpipe.tensor([3.0, 4.0])).tolist() == [-2.5]


def test_pickled_modules_still_run():
    """Unpickled arrays carry dtype objects equal to, but not the same as, NumPy's own: every dtype
    check must compare by equality (a policy sent to a worker process travels this way)."""
    import pickle
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    x = rlpipe.randn(5, 3)
    copy = pickle.loads(pickle.dumps(net))
    x2 = pickle.loads(pickle.dumps(x))
    with rlpipe.no_grad():
        expected = net(x).numpy()
        np.testing.assert_array_equal(copy(x2).numpy(), expected)
        np.testing.assert_array_equal(one_by_one(copy, x2).numpy(), expected)
    np.testing.assert_array_equal(copy(x2).detach().numpy(), expected)
    np.testing.assert_array_equal((x2 @ copy[0].weight.T).detach().numpy(), (x @ net[0].weight.T).detach().numpy())


def test_a_bias_replaced_by_a_plain_tensor_is_used():
    net = nn.Sequential(nn.Linear(2, 1))
    with rlpipe.no_grad():
        net[0].weight.copy_(rlpipe.tensor([[1.0, 2.0]]))
    del net[0].bias
    net[0].bias = rlpipe.tensor([100.0])  # a plain attribute now, as a reparametrization would leave it
    with rlpipe.no_grad():
        assert run_without_graph(net, rlpipe.tensor([3.0, 4.0])) is None
        assert net(rlpipe.tensor([3.0, 4.0])).tolist() == [111.0]


def test_a_bug_in_the_fast_path_propagates():
    """Only the array library's ValueError/TypeError (a bad shape) hand over to the usual path; any other
    error inside the fast path is a bug and must not be hidden by a silent fallback."""
    class BuggyOp(rlpipe.autograd.Function):
        raw = True

        @staticmethod
        def forward(ctx, x):
            return x[(0,) * (x.ndim + 1)]  # IndexError: one index too many

    class Identity(nn.Module):
        def forward(self, input):
            return input

        def _inference_op(self, dtype, device):
            return BuggyOp, ()

    net = nn.Sequential(nn.Linear(3, 2), Identity())
    with rlpipe.no_grad():
        with pytest.raises(IndexError):
            run_without_graph(net, rlpipe.randn(3))
        with pytest.raises(IndexError):
            net(rlpipe.randn(3))


CONVS = [dict(), dict(stride=2), dict(padding=1), dict(padding="same", dilation=2), dict(padding="valid"),
         dict(stride=(2, 1), padding=(1, 2)), dict(groups=2), dict(bias=False)]


@pytest.mark.parametrize("kwargs", CONVS, ids=repr)
@pytest.mark.parametrize("batch", [1, 3])
def test_conv_and_flatten_steps_equal_module_by_module(kwargs, batch):
    rlpipe.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, **kwargs)
    x = rlpipe.randn(batch, 4, 8, 8)
    net = nn.Sequential(conv, nn.ReLU(), nn.Flatten(), nn.Linear(conv(x[:1]).numel(), 5))
    with rlpipe.no_grad():
        fast = run_without_graph(net, x)
        assert fast is not None
        np.testing.assert_array_equal(fast.numpy(), one_by_one(net, x).numpy())
        np.testing.assert_array_equal(net(x).numpy(), one_by_one(net, x).numpy())


@pytest.mark.parametrize("dims", [(0, -1), (1, 2), (-3, -2), (2, 2)])
def test_flatten_step_dims(dims):
    net = nn.Sequential(nn.Flatten(*dims), nn.Tanh())
    x = rlpipe.randn(2, 3, 4, 5)
    with rlpipe.no_grad():
        fast = run_without_graph(net, x)
        assert fast is not None
        np.testing.assert_array_equal(fast.numpy(), one_by_one(net, x).numpy())
        assert tuple(fast.shape) == tuple(x.flatten(*dims).shape)


def test_conv_and_flatten_steps_hand_bad_inputs_to_the_usual_path():
    net = nn.Sequential(nn.Conv2d(4, 2, 3), nn.Flatten())
    with rlpipe.no_grad():
        for bad in (rlpipe.randn(1, 3, 8, 8), rlpipe.randn(1, 4, 2, 2), rlpipe.randn(4, 8, 8)):
            assert run_without_graph(net, bad) is None
        with pytest.raises(RuntimeError, match="expected input\\[1, 3, 8, 8\\] to have 4 channels, but got 3"):
            net(rlpipe.randn(1, 3, 8, 8))
        with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
            net(rlpipe.randn(1, 4, 2, 2))
        # unbatched: the usual path convolves it, and Flatten(1) then merges what is left
        unbatched = rlpipe.randn(4, 8, 8)
        assert tuple(net(unbatched).shape) == (2, 36)
        assert run_without_graph(nn.Sequential(nn.Flatten(2, 1)), rlpipe.randn(2, 3, 4)) is None
        with pytest.raises(RuntimeError, match="flatten"):
            nn.Sequential(nn.Flatten(2, 1))(rlpipe.randn(2, 3, 4))
        assert run_without_graph(nn.Sequential(nn.Flatten(0, 3)), rlpipe.randn(2, 3)) is None
    reflect = nn.Sequential(nn.Conv2d(4, 2, 3, padding=1, padding_mode="reflect"))
    with rlpipe.no_grad():
        assert run_without_graph(reflect, rlpipe.randn(1, 4, 8, 8)) is None
