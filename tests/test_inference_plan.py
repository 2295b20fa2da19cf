"""Sequential's cached inference plan (``_inference_plan.py``): once a no-grad call has built it, every
change a Module allows must reach the next call, never a stale plan. Each test first runs the
network under no_grad (building the plan), changes something, and compares the next no-grad call
with the module-by-module result (which never uses a plan), computed from the network as it is now."""
import copy
import pickle

import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.func import functional_call, stack_module_state, vmap
from rlpipe.tensordict import TensorDict


def one_by_one(net, x):
    with rlpipe.no_grad():
        for module in net:
            x = module(x)
    return x.numpy()


def planned(net, x):
    """``net(x)`` under no_grad, checking that the call went through a plan."""
    with rlpipe.no_grad():
        out = net(x)
    assert net.__dict__.get("_inference_plan") is not None
    return out.numpy()


def mlp(seed=0, act=None):
    rlpipe.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 8), act or nn.Tanh(), nn.Linear(8, 2))


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def check_current(net, x=None):
    """The planned call equals the module-by-module one, and differs from ``before`` when given."""
    x = rlpipe.as_tensor(X) if x is None else x
    out = planned(net, x)
    np.testing.assert_array_equal(out, one_by_one(net, x))
    return out


def test_the_plan_is_reused_while_nothing_changes():
    net = mlp()
    first = check_current(net)
    plan = net.__dict__["_inference_plan"]
    np.testing.assert_array_equal(check_current(net), first)
    assert net.__dict__["_inference_plan"] is plan


def test_a_forward_hook_registered_after_the_plan_runs():
    net = mlp()
    before = check_current(net)
    calls = []
    handle = net[2].register_forward_hook(lambda m, args, out: calls.append(1) or out * 0 + 3)
    with rlpipe.no_grad():
        out = net(rlpipe.as_tensor(X)).numpy()
    assert calls == [1] and (out == 3).all()
    handle.remove()
    np.testing.assert_array_equal(check_current(net), before)  # and the plan comes back


def test_a_hook_written_into_the_table_directly_runs():
    net = mlp()
    check_current(net)
    calls = []
    net[0]._forward_pre_hooks[12345] = lambda m, args: calls.append(1) or (args[0] * 0,)
    with rlpipe.no_grad():
        out = net(rlpipe.as_tensor(X)).numpy()
    assert calls == [1]
    expected = np.tanh(net[0].bias.detach().numpy()) @ net[2].weight.detach().numpy().T + net[2].bias.detach().numpy()
    np.testing.assert_allclose(out, np.broadcast_to(expected, (4, 2)), rtol=1e-6)


def test_a_global_forward_hook_runs():
    net = mlp()
    check_current(net)
    seen = []
    handle = nn.modules.module.register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__))
    try:
        with rlpipe.no_grad():
            net(rlpipe.as_tensor(X))
    finally:
        handle.remove()
    assert seen.count("Linear") == 2 and "Tanh" in seen


def test_train_and_eval_switch_dropout():
    net = nn.Sequential(nn.Linear(3, 64), nn.Dropout(0.5)).eval()
    before = check_current(net)
    net.train()
    with rlpipe.no_grad():
        out = net(rlpipe.as_tensor(X)).numpy()
    dropped = out == 0
    assert dropped.mean() > 0.2  # dropout is back: about half the units are zeroed, the others doubled
    np.testing.assert_allclose(out[~dropped], 2 * before[~dropped], rtol=1e-6)
    net.eval()
    np.testing.assert_array_equal(check_current(net), before)


def test_grad_mode_and_requires_grad():
    net = mlp()
    check_current(net)
    x = rlpipe.as_tensor(X)
    out = net(x)  # grad enabled: the usual path, recording the graph
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()
    assert net[0].weight.grad is not None
    net.requires_grad_(False)
    assert not net(x).requires_grad
    check_current(net)


def test_an_activation_setting_changed_after_the_plan():
    net = mlp(act=nn.LeakyReLU(0.01))
    x = rlpipe.as_tensor(X * -5)
    before = check_current(net, x)
    net[1].negative_slope = 0.5
    after = check_current(net, x)
    assert not np.allclose(after, before)


def test_a_patched_forward_runs():
    net = mlp()
    check_current(net)
    net[1].forward = lambda input: input * 0
    with rlpipe.no_grad():
        out = net(rlpipe.as_tensor(X)).numpy()
    np.testing.assert_allclose(out, np.broadcast_to(net[2].bias.detach().numpy(), (4, 2)))


def test_a_parameter_replaced_by_assignment():
    net = mlp()
    before = check_current(net)
    net[2].weight = nn.Parameter(net[2].weight.detach() * 2)
    np.testing.assert_allclose(check_current(net) - net[2].bias.detach().numpy(),
                               2 * (before - net[2].bias.detach().numpy()), rtol=1e-5)


def test_a_parameter_replaced_in_the_table():
    net = mlp()
    before = check_current(net)
    net[2]._parameters["bias"] = nn.Parameter(net[2].bias.detach() + 1)
    np.testing.assert_allclose(check_current(net), before + 1, rtol=1e-6)


def test_a_parameter_whose_data_is_assigned():
    net = mlp()
    before = check_current(net)
    net[2].bias.data = net[2].bias.detach() + 1  # a new array behind the same Parameter
    np.testing.assert_allclose(check_current(net), before + 1, rtol=1e-6)


def test_a_child_replaced_by_assignment_or_in_the_table():
    net = mlp()
    before = check_current(net)
    net[1] = nn.ReLU()
    relu = check_current(net)
    assert not np.array_equal(relu, before)
    net._modules["1"] = nn.Sigmoid()
    assert not np.array_equal(check_current(net), relu)


def test_load_state_dict_reaches_the_next_call():
    net, other = mlp(0), mlp(1)
    check_current(net)
    net.load_state_dict(other.state_dict())
    np.testing.assert_array_equal(check_current(net), check_current(other))


def test_optimizer_steps_in_place_reach_the_next_call():
    net = mlp()
    optimizers = [rlpipe.optim.SGD(net.parameters(), lr=0.1), rlpipe.optim.Adam(net.parameters(), lr=0.1)]
    x = rlpipe.as_tensor(X)
    for optimizer in optimizers:
        before = check_current(net)
        optimizer.zero_grad()
        net(x).pow(2).sum().backward()
        optimizer.step()
        assert not np.allclose(check_current(net), before)


def test_in_place_writes_reach_the_next_call():
    net = mlp()
    before = check_current(net)
    with rlpipe.no_grad():
        net[2].bias.add_(1)
    np.testing.assert_allclose(check_current(net), before + 1, rtol=1e-6)


def test_dtype_and_device_conversions():
    net = mlp()
    check_current(net)
    net.double()
    out = check_current(net, rlpipe.as_tensor(X.astype(np.float64)))
    assert out.dtype == np.float64
    with rlpipe.no_grad(), pytest.raises(RuntimeError, match="dtype"):
        net(rlpipe.as_tensor(X))  # float32 into float64 weights: torch's error, not a plan's result
    net.float()
    check_current(net)


def test_functional_call_swaps_in_and_back():
    net = mlp()
    before = check_current(net)
    other = mlp(1)
    x = rlpipe.as_tensor(X)
    with rlpipe.no_grad():
        swapped = functional_call(net, dict(other.named_parameters()), (x,)).numpy()
    np.testing.assert_array_equal(swapped, one_by_one(other, x))
    np.testing.assert_array_equal(check_current(net), before)


def test_to_module_swaps_in_and_back():
    net = mlp()
    before = check_current(net)
    params = TensorDict.from_module(net)
    zeroed = params.apply(lambda t: t.detach() * 0)
    with rlpipe.no_grad():
        with zeroed.to_module(net):
            inside = net(rlpipe.as_tensor(X)).numpy()
        assert (inside == 0).all()
    np.testing.assert_array_equal(check_current(net), before)


def test_vmap_over_stacked_parameters():
    nets = [mlp(0), mlp(1), mlp(2)]
    base = copy.deepcopy(nets[0])
    before = check_current(base)
    params, buffers = stack_module_state(nets)
    x = rlpipe.as_tensor(X)

    def run(p, b):
        return functional_call(base, (p, b), (x,))

    with rlpipe.no_grad():
        out = vmap(run)(params, buffers).numpy()
    for i, net in enumerate(nets):
        np.testing.assert_allclose(out[i], one_by_one(net, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(check_current(base), before)


def test_copies_have_their_own_plans():
    net = mlp()
    before = check_current(net)
    twin = copy.deepcopy(net)
    with rlpipe.no_grad():
        twin[2].bias.add_(1)
    np.testing.assert_allclose(check_current(twin), before + 1, rtol=1e-6)
    np.testing.assert_array_equal(check_current(net), before)
    loaded = pickle.loads(pickle.dumps(net))
    assert loaded.__dict__.get("_inference_plan") is None
    np.testing.assert_array_equal(check_current(loaded), before)


def test_shared_memory_rebinding_reaches_the_next_call():
    net = mlp()
    before = check_current(net)
    net.share_memory()  # the parameters' arrays move into shared memory: new arrays
    with rlpipe.no_grad():
        net[2].bias.add_(1)
    np.testing.assert_allclose(check_current(net), before + 1, rtol=1e-6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")])])
def test_a_plan_on_each_device_sees_in_place_updates(device):
    net = mlp().to(device)
    x = rlpipe.as_tensor(X).to(device)
    with rlpipe.no_grad():
        before = net(x)
        assert net.__dict__.get("_inference_plan") is not None and before.device == net[0].weight.device
        net[2].bias.add_(1)
        after = net(x)
    np.testing.assert_allclose(after.cpu().numpy(), before.cpu().numpy() + 1, rtol=1e-6)
    net.cpu()  # the arrays move: the plan must not run the device ones
    np.testing.assert_array_equal(check_current(net), one_by_one(net, rlpipe.as_tensor(X)))
