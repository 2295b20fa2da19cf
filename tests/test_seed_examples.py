"""The runnable snippets of the Module documents in /work/shared/seeds, run on rlpipe.

Sources (``torch`` replaced by ``rlpipe``, imported as ``torch`` inside the snippets):

* ``modules-note.rst.txt`` -- PyTorch's "Modules" note (tests named ``test_note_*``);
* ``torch-nn-Module-reference.txt`` -- the ``torch.nn.Module`` API reference (``test_ref_*``);
* ``Module-internals-notes-zh.txt`` -- notes on Module's internals, in Chinese (``test_zh_*``).

Printed output is compared with the documents' text up to random numbers (every decimal number
becomes ``#``) and, where the document's text was flattened onto one line, up to whitespace.
Where a document shows an older torch's output, the test asserts what torch 2.x prints and says so.
"""
import io
import re
import subprocess
import sys
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import rlpipe
import rlpipe as torch
import rlpipe.nn.functional as F
import rlpipe.optim  # the note's torch.optim.SGD (see test_import_exposes_subpackages)
from rlpipe import nn
from rlpipe.nn.modules import module as module_mod

_NUMBER = re.compile(r"-?\d+\.\d*(?:e[+-]?\d+)?")


def shape_of(text):
    """The text with every decimal number replaced by '#' and all whitespace removed."""
    return re.sub(r"\s+", "", _NUMBER.sub("#", text))


def flat(text):
    """Whitespace collapsed to single spaces (the reference's text lost its line breaks)."""
    return " ".join(text.split())


def printed(capsys, fn):
    capsys.readouterr()
    fn()
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)
    yield
    for name in ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
                 "_global_backward_hooks"):
        table = getattr(module_mod, name)
        assert not table, f"{name} left registered"


# =============================================================================================
# modules-note.rst.txt
# =============================================================================================
class MyLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, input):
        return (input @ self.weight) + self.bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l0 = MyLinear(4, 3)
        self.l1 = MyLinear(3, 1)

    def forward(self, x):
        x = self.l0(x)
        x = F.relu(x)
        x = self.l1(x)
        return x


class BigNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = MyLinear(5, 4)
        self.net = Net()

    def forward(self, x):
        return self.net(self.l1(x))


class DynamicNet(nn.Module):
    def __init__(self, num_layers):
        super().__init__()
        self.linears = nn.ModuleList(
            [MyLinear(4, 4) for _ in range(num_layers)])
        self.activations = nn.ModuleDict({
            'relu': nn.ReLU(),
            'lrelu': nn.LeakyReLU()
        })
        self.final = MyLinear(4, 1)

    def forward(self, x, act):
        for linear in self.linears:
            x = linear(x)
        x = self.activations[act](x)
        x = self.final(x)
        return x


class RunningMean(nn.Module):
    def __init__(self, num_features, momentum=0.9):
        super().__init__()
        self.momentum = momentum
        self.register_buffer('mean', torch.zeros(num_features))

    def forward(self, x):
        self.mean = self.momentum * self.mean + (1.0 - self.momentum) * x
        return self.mean


def test_note_simple_custom_module_is_callable():
    m = MyLinear(4, 3)
    sample_input = torch.randn(4)
    out = m(sample_input)
    assert shape_of(repr(out)) == shape_of("tensor([-0.3037, -1.0413, -4.2057], grad_fn=<AddBackward0>)")
    expected = sample_input.numpy() @ m.weight.detach().numpy() + m.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6)
    assert list(m.parameters()) == [m.weight, m.bias]


def test_note_named_parameters_printout(capsys):
    m = MyLinear(4, 3)
    out = printed(capsys, lambda: [print(parameter) for parameter in m.named_parameters()])
    assert shape_of(out) == shape_of("""('weight', Parameter containing:
tensor([[ 1.0597,  1.1796,  0.8247],
        [-0.5080, -1.2635, -1.1045],
        [ 0.0593,  0.2469, -1.4299],
        [-0.4926, -0.5457,  0.4793]], requires_grad=True))
('bias', Parameter containing:
tensor([ 0.3634,  0.2015, -0.8525], requires_grad=True))
""")


def test_note_sequential_chains_modules():
    first, second = MyLinear(4, 3), MyLinear(3, 1)
    net = nn.Sequential(
        first,
        nn.ReLU(),
        second
    )
    sample_input = torch.randn(4)
    out = net(sample_input)
    assert shape_of(repr(out)) == shape_of("tensor([-0.6749], grad_fn=<AddBackward0>)")
    by_hand = second(torch.relu(first(sample_input)))
    assert out.tolist() == by_hand.tolist()


def test_note_named_children_printout(capsys):
    net = Net()
    out = printed(capsys, lambda: [print(child) for child in net.named_children()])
    assert out == "('l0', MyLinear())\n('l1', MyLinear())\n"


def test_note_named_modules_printout(capsys):
    big_net = BigNet()
    out = printed(capsys, lambda: [print(module) for module in big_net.named_modules()])
    assert out == """('', BigNet(
  (l1): MyLinear()
  (net): Net(
    (l0): MyLinear()
    (l1): MyLinear()
  )
))
('l1', MyLinear())
('net', Net(
  (l0): MyLinear()
  (l1): MyLinear()
))
('net.l0', MyLinear())
('net.l1', MyLinear())
"""
    x = torch.randn(5)
    assert big_net(x).shape == (1,)


def test_note_dynamic_net_and_its_named_parameters(capsys):
    dynamic_net = DynamicNet(3)
    sample_input = torch.randn(4)
    output = dynamic_net(sample_input, 'relu')
    assert output.shape == (1,) and output.grad_fn is not None
    assert dynamic_net(sample_input, 'lrelu').shape == (1,)
    out = printed(capsys, lambda: [print(parameter) for parameter in dynamic_net.named_parameters()])
    assert shape_of(out) == shape_of("""('linears.0.weight', Parameter containing:
tensor([[-1.2051,  0.7601,  1.1065,  0.1963],
        [ 3.0592,  0.4354,  1.6598,  0.9828],
        [-0.4446,  0.4628,  0.8774,  1.6848],
        [-0.1222,  1.5458,  1.1729,  1.4647]], requires_grad=True))
('linears.0.bias', Parameter containing:
tensor([ 1.5310,  1.0609, -2.0940,  1.1266], requires_grad=True))
('linears.1.weight', Parameter containing:
tensor([[ 2.1113, -0.0623, -1.0806,  0.3508],
        [-0.0550,  1.5317,  1.1064, -0.5562],
        [-0.4028, -0.6942,  1.5793, -1.0140],
        [-0.0329,  0.1160, -1.7183, -1.0434]], requires_grad=True))
('linears.1.bias', Parameter containing:
tensor([ 0.0361, -0.9768, -0.3889,  1.1613], requires_grad=True))
('linears.2.weight', Parameter containing:
tensor([[-2.6340, -0.3887, -0.9979,  0.0767],
        [-0.3526,  0.8756, -1.5847, -0.6016],
        [-0.3269, -0.1608,  0.2897, -2.0829],
        [ 2.6338,  0.9239,  0.6943, -1.5034]], requires_grad=True))
('linears.2.bias', Parameter containing:
tensor([ 1.0268,  0.4489, -0.9403,  0.1571], requires_grad=True))
('final.weight', Parameter containing:
tensor([[ 0.2509],
        [-0.5052],
        [ 0.3088],
        [-1.4951]], requires_grad=True))
('final.bias', Parameter containing:
tensor([0.3381], requires_grad=True))
""")


def test_note_to_changes_precision_of_all_parameters():
    dynamic_net = DynamicNet(3)
    params_before = list(dynamic_net.parameters())
    # Move all parameters to a CUDA device (only where one exists)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dynamic_net.to(device=device)
    # Change precision of all parameters
    dynamic_net.to(dtype=torch.float64)
    assert {p.dtype for p in dynamic_net.parameters()} == {torch.float64}
    assert list(dynamic_net.parameters()) == params_before  # the same Parameter objects
    # The note feeds torch.randn(5) to a network whose first layer takes 4 features: torch itself
    # fails there with a shape error, so the working call uses 4 features.
    out = dynamic_net(torch.randn(4, device=device, dtype=torch.float64), 'relu')
    if device == "cuda":
        assert shape_of(repr(out)) == shape_of(
            "tensor([6.5166], device='cuda:0', dtype=rlpipe.float64, grad_fn=<AddBackward0>)")
    else:
        assert shape_of(repr(out)) == shape_of("tensor([6.5166], dtype=rlpipe.float64, grad_fn=<AddBackward0>)")
    with pytest.raises(RuntimeError):
        dynamic_net(torch.randn(5, device=device, dtype=torch.float64), 'relu')


def test_note_training_loop_drives_output_to_zero(capsys):
    # Create the network (from previous section) and optimizer
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-4, weight_decay=1e-2, momentum=0.9)
    probe = torch.randn(256, 4)
    with torch.no_grad():
        before = net(probe).abs().mean().item()
    l1_norm_before = float((net.l1.weight ** 2).sum().sqrt())

    # Run a sample training loop that "teaches" the network
    # to output the constant zero function
    for _ in range(10000):
        input = torch.randn(4)
        output = net(input)
        loss = torch.abs(output)
        net.zero_grad()
        loss.backward()
        optimizer.step()

    with torch.no_grad():
        after = net(probe).abs().mean().item()
    assert after < 0.05 and after < before / 10, (before, after)
    # "l1's weight ... values are now much closer to 0": its norm at least halves (a weight on a hidden
    # unit that ReLU keeps almost always at zero, or two weights that cancel, may stay larger)
    l1_norm_after = float((net.l1.weight ** 2).sum().sqrt())
    assert l1_norm_after < 0.5 * l1_norm_before, (l1_norm_before, l1_norm_after)
    out = printed(capsys, lambda: print(net.l1.weight))
    assert shape_of(out) == shape_of("""Parameter containing:
tensor([[-0.0013],
        [ 0.0030],
        [-0.0008]], requires_grad=True)
""")


def test_note_save_and_load_state_dict(tmp_path):
    net = Net()
    # Save the module
    torch.save(net.state_dict(), tmp_path / 'net.pt')
    # Load the module later on
    new_net = Net()
    result = new_net.load_state_dict(torch.load(tmp_path / 'net.pt'))
    assert repr(result) == "<All keys matched successfully>"
    for (name, p), (new_name, q) in zip(net.named_parameters(), new_net.named_parameters()):
        assert name == new_name and p.tolist() == q.tolist() and q is new_net.get_parameter(name)
    x = torch.randn(4)
    assert net(x).tolist() == new_net(x).tolist()


def test_note_running_mean_buffer_round_trip(tmp_path, capsys):
    m = RunningMean(4)
    inputs = []
    for _ in range(10):
        input = torch.randn(4)
        inputs.append(input.numpy().copy())
        m(input)

    expected = np.zeros(4, dtype=np.float32)
    for x in inputs:
        expected = np.float32(0.9) * expected + np.float32(1.0 - 0.9) * x
    np.testing.assert_allclose(m.mean.numpy(), expected, rtol=1e-5, atol=1e-7)
    assert list(m.buffers()) == [m.mean] and list(m.parameters()) == []

    out = printed(capsys, lambda: print(m.state_dict()))
    # the note shows Python < 3.12's OrderedDict repr (with one ')' too many, a typo);
    # Python >= 3.12 prints OrderedDict({...})
    if sys.version_info < (3, 12):
        doc = "OrderedDict([('mean', tensor([ 0.1041, -0.1113, -0.0647,  0.1515]))])"
    else:
        doc = "OrderedDict({'mean': tensor([ 0.1041, -0.1113, -0.0647,  0.1515])})"
    assert shape_of(out) == shape_of(doc)

    # Serialized form will contain the 'mean' tensor
    torch.save(m.state_dict(), tmp_path / 'mean.pt')

    m_loaded = RunningMean(4)
    m_loaded.load_state_dict(torch.load(tmp_path / 'mean.pt'))
    assert (torch.all(m.mean == m_loaded.mean))
    assert m_loaded.mean.tolist() == m.mean.tolist()


class RunningMeanWithScratch(RunningMean):
    def __init__(self, num_features, momentum=0.9):
        super().__init__(num_features, momentum)
        self.register_buffer('unserialized_thing', torch.randn(5), persistent=False)


def test_note_non_persistent_buffer_and_to():
    m = RunningMeanWithScratch(4)
    assert list(m.state_dict()) == ['mean']
    assert [name for name, _ in m.named_buffers()] == ['mean', 'unserialized_thing']
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    assert list(torch.load(buf)) == ['mean']
    # Moves all module parameters and buffers to the specified device / dtype
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert m.to(device=device, dtype=torch.float64) is m
    assert m.mean.dtype == torch.float64 and m.unserialized_thing.dtype == torch.float64
    assert m.mean.device.type == device and m.unserialized_thing.device.type == device


def test_note_hooks_on_a_module_not_written_by_us():
    # forward pre-hooks, forward hooks and full backward hooks on rlpipe's own Linear; every hook may
    # return an updated value used for the rest of the computation
    lin = nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        lin.bias.zero_()
    log = []

    def pre(module, args):
        log.append(("pre", args[0].tolist()))
        return args[0] * 2

    def fwd(module, args, output):
        log.append(("forward", args[0].tolist(), output.tolist()))
        return output + 1

    def bwd(module, grad_input, grad_output):
        log.append(("backward", [g.tolist() for g in grad_input], [g.tolist() for g in grad_output]))

    handles = [lin.register_forward_pre_hook(pre), lin.register_forward_hook(fwd),
               lin.register_full_backward_hook(bwd)]
    x = torch.tensor([[1.0, 1.0]], requires_grad=True)
    y = lin(x)
    assert y.tolist() == [[7.0, 15.0]]  # (2x) W^T + 1
    y.sum().backward()
    for h in handles:
        h.remove()
    # grad_output = 1; grad_input (w.r.t. the doubled input the forward saw) = 1 @ W = [4, 6]
    assert log == [("pre", [[1.0, 1.0]]), ("forward", [[2.0, 2.0]], [[6.0, 14.0]]),
                   ("backward", [[[4.0, 6.0]]], [[[1.0, 1.0]]])]
    assert x.grad.tolist() == [[8.0, 12.0]]
    assert lin(torch.tensor([[1.0, 1.0]])).tolist() == [[3.0, 7.0]]  # hooks removed


def test_note_global_hooks_run_for_every_module():
    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    fwd_log, bwd_log = [], []
    h1 = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda m, args: fwd_log.append(("pre", type(m).__name__)))
    h2 = torch.nn.modules.module.register_module_forward_hook(
        lambda m, args, out: fwd_log.append(("post", type(m).__name__)))
    h3 = torch.nn.modules.module.register_module_full_backward_hook(
        lambda m, gin, gout: bwd_log.append(type(m).__name__))
    try:
        net(torch.randn(4, 3, requires_grad=True)).sum().backward()
    finally:
        h1.remove()
        h2.remove()
        h3.remove()
    assert fwd_log == [("pre", "Sequential"), ("pre", "Linear"), ("post", "Linear"), ("pre", "ReLU"),
                       ("post", "ReLU"), ("post", "Sequential")]
    assert bwd_log == ["ReLU", "Linear", "Sequential"]


# =============================================================================================
# torch-nn-Module-reference.txt
# =============================================================================================
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 20, 5)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        return F.relu(self.conv2(x))


def test_ref_submodules_as_attributes_are_registered_and_converted():
    model = Model()
    assert [name for name, _ in model.named_children()] == ['conv1', 'conv2']
    assert [name for name, _ in model.named_parameters()] == ['conv1.weight', 'conv1.bias', 'conv2.weight',
                                                              'conv2.bias']
    out = model(torch.randn(1, 1, 12, 12))
    assert out.shape == (1, 20, 4, 4) and float(out.min()) >= 0.0
    assert model.to(torch.float64) is model
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert model(torch.randn(1, 1, 12, 12, dtype=torch.float64)).dtype == torch.float64


def test_ref_init_of_parent_class_must_come_first():
    class Broken(nn.Module):
        def __init__(self):
            self.conv1 = nn.Conv2d(1, 20, 5)
            super().__init__()

    with pytest.raises(AttributeError, match=re.escape("cannot assign module before Module.__init__() call")):
        Broken()


def test_ref_training_attribute():
    model = Model()
    assert model.training is True and isinstance(model.training, bool)
    assert model.eval() is model and model.training is False and model.conv1.training is False
    model.train()
    assert model.training and model.conv2.training


def test_ref_add_module_and_register_module():
    m = nn.Module()
    conv = nn.Conv2d(1, 2, 3)
    m.add_module('conv', conv)
    lin = nn.Linear(2, 2)
    m.register_module('lin', lin)
    assert m.conv is conv and m.lin is lin
    assert list(m.children()) == [conv, lin]


def test_ref_apply_init_weights(capsys):
    @torch.no_grad()
    def init_weights(m):
        print(m)
        if type(m) == nn.Linear:
            m.weight.fill_(1.0)
            print(m.weight)

    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    out = printed(capsys, lambda: print(net.apply(init_weights)))
    # The reference shows an old torch's tensor printout ("tensor([[ 1., 1.], [ 1., 1.]])", no
    # requires_grad); torch 2.x prints a Parameter as below.
    linear = "Linear(in_features=2, out_features=2, bias=True)"
    weight = "Parameter containing:\ntensor([[1., 1.],\n        [1., 1.]], requires_grad=True)"
    sequential = f"Sequential(\n  (0): {linear}\n  (1): {linear}\n)"
    assert out == f"{linear}\n{weight}\n{linear}\n{weight}\n{sequential}\n{sequential}\n"
    assert torch.is_grad_enabled()
    assert net[0].weight.requires_grad and net[0].weight.grad_fn is None
    # the reference's text, up to whitespace and the requires_grad suffix
    doc = ("Linear(in_features=2, out_features=2, bias=True) Parameter containing: tensor([[ 1., 1.], [ 1., 1.]]) "
           "Linear(in_features=2, out_features=2, bias=True) Parameter containing: tensor([[ 1., 1.], [ 1., 1.]]) "
           "Sequential( (0): Linear(in_features=2, out_features=2, bias=True) (1): Linear(in_features=2, "
           "out_features=2, bias=True) ) Sequential( (0): Linear(in_features=2, out_features=2, bias=True) (1): "
           "Linear(in_features=2, out_features=2, bias=True) )")
    assert shape_of(out.replace(", requires_grad=True", "")) == shape_of(doc)


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('running_mean', torch.zeros(20))
        self.register_buffer('kernel', torch.zeros(20, 1, 5, 5))


def test_ref_buffers_printout(capsys):
    model = WithBuffers()
    out = printed(capsys, lambda: [print(type(buf), buf.size()) for buf in model.buffers()])
    # torch 2.x: "<class 'torch.Tensor'> torch.Size([20])" (the reference's "(20L,)" is Python 2)
    assert out == ("<class 'rlpipe.Tensor'> rlpipe.Size([20])\n"
                   "<class 'rlpipe.Tensor'> rlpipe.Size([20, 1, 5, 5])\n")


def test_ref_parameters_printout(capsys):
    model = nn.Conv2d(1, 20, 5)
    out = printed(capsys, lambda: [print(type(param), param.size()) for param in model.parameters()])
    # torch 2.x prints Parameter's class and weight before bias (the reference shows torch 0.3's output)
    assert out == ("<class 'rlpipe.nn.parameter.Parameter'> rlpipe.Size([20, 1, 5, 5])\n"
                   "<class 'rlpipe.nn.parameter.Parameter'> rlpipe.Size([20])\n")


def test_ref_children_and_named_children(capsys):
    class FiveConvs(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(1, 6):
                setattr(self, f'conv{i}', nn.Conv2d(i, i + 1, 3))

    model = FiveConvs()
    assert [type(c) for c in model.children()] == [nn.Conv2d] * 5

    def show():
        for name, module in model.named_children():
            if name in ['conv4', 'conv5']:
                print(module)

    out = printed(capsys, show)
    assert out == ("Conv2d(4, 5, kernel_size=(3, 3), stride=(1, 1))\n"
                   "Conv2d(5, 6, kernel_size=(3, 3), stride=(1, 1))\n")


def test_ref_named_buffers_example(capsys):
    bn = nn.BatchNorm1d(20)

    def show():
        for name, buf in bn.named_buffers():
            if name in ['running_var']:
                print(buf.size())

    assert printed(capsys, show) == "rlpipe.Size([20])\n"


def test_ref_named_parameters_example(capsys):
    model = nn.Conv2d(1, 20, 5)

    def show():
        for name, param in model.named_parameters():
            if name in ['bias']:
                print(param.size())

    assert printed(capsys, show) == "rlpipe.Size([20])\n"


def test_ref_get_submodule_example():
    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.net_b = nn.Module()
            self.net_b.net_c = nn.Module()
            self.net_b.net_c.conv = nn.Conv2d(16, 33, 3, stride=2)
            self.net_b.linear = nn.Linear(100, 200)

    a = A()
    expected = """A(
  (net_b): Module(
    (net_c): Module(
      (conv): Conv2d(16, 33, kernel_size=(3, 3), stride=(2, 2))
    )
    (linear): Linear(in_features=100, out_features=200, bias=True)
  )
)"""
    assert repr(a) == expected
    assert flat(repr(a)) == ("A( (net_b): Module( (net_c): Module( (conv): Conv2d(16, 33, kernel_size=(3, 3), "
                             "stride=(2, 2)) ) (linear): Linear(in_features=100, out_features=200, bias=True) ) )")
    assert a.get_submodule("net_b.linear") is a.net_b.linear
    assert a.get_submodule("net_b.net_c.conv") is a.net_b.net_c.conv
    assert a.get_parameter("net_b.net_c.conv.weight") is a.net_b.net_c.conv.weight
    with pytest.raises(AttributeError):
        a.get_submodule("net_b.net_c.linear")
    with pytest.raises(AttributeError):
        a.get_parameter("net_b.linear.running_mean")
    with pytest.raises(AttributeError):
        a.get_buffer("net_b.linear.weight")


def test_ref_modules_example(capsys):
    l = nn.Linear(2, 2)
    net = nn.Sequential(l, l)
    out = printed(capsys, lambda: [print(idx, '->', m) for idx, m in enumerate(net.modules())])
    assert out == """0 -> Sequential(
  (0): Linear(in_features=2, out_features=2, bias=True)
  (1): Linear(in_features=2, out_features=2, bias=True)
)
1 -> Linear(in_features=2, out_features=2, bias=True)
"""


def test_ref_named_modules_example(capsys):
    l = nn.Linear(2, 2)
    net = nn.Sequential(l, l)
    out = printed(capsys, lambda: [print(idx, '->', m) for idx, m in enumerate(net.named_modules())])
    assert out == """0 -> ('', Sequential(
  (0): Linear(in_features=2, out_features=2, bias=True)
  (1): Linear(in_features=2, out_features=2, bias=True)
))
1 -> ('0', Linear(in_features=2, out_features=2, bias=True))
"""
    # remove_duplicate=False yields the shared module under each name
    assert [name for name, _ in net.named_modules(remove_duplicate=False)] == ['', '0', '1']
    assert [name for name, _ in net.named_modules(prefix='top')] == ['top', 'top.0']


def test_ref_register_buffer_example():
    class BN(nn.Module):
        def __init__(self, num_features):
            super().__init__()
            self.register_buffer('running_mean', torch.zeros(num_features))

    m = BN(3)
    assert m.running_mean.tolist() == [0.0, 0.0, 0.0]
    assert list(m.state_dict()) == ['running_mean'] and list(m.parameters()) == []
    m.register_buffer('nothing', None)
    assert list(m.state_dict()) == ['running_mean']  # a None buffer is not in the state_dict


def test_ref_register_parameter_none_is_left_out_and_loading_it_fails():
    m = nn.Module()
    m.register_parameter('weight', nn.Parameter(torch.zeros(2)))
    m.register_parameter('bias', None)
    assert list(m.state_dict()) == ['weight'] and m.bias is None
    # "If a parameter or buffer is registered as None and its corresponding key exists in
    # state_dict, load_state_dict() will raise a RuntimeError."
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "bias"'):
        m.load_state_dict({'weight': torch.ones(2), 'bias': torch.ones(1)})


def test_ref_state_dict_keys_example():
    class BiasFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(2))
            self.weight = nn.Parameter(torch.zeros(2, 2))

    # the reference's ['bias', 'weight'] is registration order; nn.Linear registers weight first
    assert list(BiasFirst().state_dict().keys()) == ['bias', 'weight']
    assert list(nn.Linear(2, 2).state_dict().keys()) == ['weight', 'bias']


def test_ref_state_dict_arguments():
    module = nn.Linear(2, 2)
    sd = module.state_dict()
    assert type(sd) is OrderedDict
    assert all(not v.requires_grad for v in sd.values())  # detached by default
    kept = module.state_dict(keep_vars=True)
    assert kept['weight'] is module.weight
    dest = OrderedDict()
    assert module.state_dict(destination=dest, prefix='lin.') is dest
    assert list(dest) == ['lin.weight', 'lin.bias']
    with pytest.warns(FutureWarning):
        module.state_dict(OrderedDict(), 'p.', False)


def test_ref_load_state_dict_strict_and_return_value():
    src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.weight.tolist() == src.weight.tolist()
    partial = {'weight': torch.zeros(2, 2), 'extra': torch.zeros(1)}
    with pytest.raises(RuntimeError):
        dst.load_state_dict(partial)
    missing_keys, unexpected_keys = dst.load_state_dict(partial, strict=False)
    assert missing_keys == ['bias'] and unexpected_keys == ['extra']
    assert dst.weight.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_ref_load_state_dict_post_hook_may_clear_keys():
    lin = nn.Linear(2, 2)
    seen = []

    def hook(module, incompatible_keys):
        seen.append((module, list(incompatible_keys.missing_keys), list(incompatible_keys.unexpected_keys)))
        incompatible_keys.missing_keys.clear()
        incompatible_keys.unexpected_keys.clear()

    handle = lin.register_load_state_dict_post_hook(hook)
    result = lin.load_state_dict({'weight': torch.zeros(2, 2), 'junk': torch.zeros(1)})
    assert seen == [(lin, ['bias'], ['junk'])]
    assert repr(result) == "<All keys matched successfully>"
    handle.remove()
    lin.register_load_state_dict_post_hook(lambda module, keys: keys.missing_keys.append('invented'))
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "invented"'):
        lin.load_state_dict(lin.state_dict())


def test_ref_forward_pre_hook_single_value_is_wrapped_and_kwargs_are_not_passed():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    got = []

    def hook(module, input):
        got.append(input)
        return input[0] + 1  # a single value: wrapped into a tuple

    m.register_forward_pre_hook(hook)
    out = m(torch.tensor([1.0]), factor=3.0)
    assert out.tolist() == [6.0]
    assert isinstance(got[0], tuple) and len(got[0]) == 1  # only the positional argument


def test_ref_forward_hook_modifies_output_and_input_changes_come_too_late():
    lin = nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.zero_()

    def hook(module, input, output):
        input[0].mul_(100)  # in-place on the input: forward already ran
        return output * 2

    lin.register_forward_hook(hook)
    x = torch.tensor([[1.0, 2.0]])
    assert lin(x).tolist() == [[6.0]]


def test_ref_full_backward_hook_details():
    class Mix(nn.Module):
        def forward(self, x, n, y):
            self.received = x
            return x * n + y

    m = Mix()
    calls = []
    m.register_full_backward_hook(lambda mod, gin, gout: calls.append(
        ([None if g is None else g.tolist() for g in gin], [g.tolist() for g in gout])))
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([0.5, 0.5], requires_grad=True)
    m(x, 3, y=y).sum().backward()
    # grad_input covers the positional arguments only; a non-Tensor argument gets None
    assert calls == [([[3.0, 3.0], None], [[1.0, 1.0]])]
    # "its forward function will receive a view of each Tensor passed to the Module"
    assert m.received is not x
    assert x.grad.tolist() == [3.0, 3.0] and y.grad.tolist() == [1.0, 1.0]


def test_ref_full_backward_hook_forbids_inplace_modification():
    class InPlace(nn.Module):
        def forward(self, x):
            x.add_(1)
            return x

    m = InPlace()
    m.register_full_backward_hook(lambda mod, gin, gout: None)
    # "Modifying inputs or outputs inplace is not allowed when using backward hooks and will raise an error."
    with pytest.raises(RuntimeError):
        m(torch.tensor([1.0], requires_grad=True) * 2)


def test_ref_register_backward_hook_deprecated_form():
    lin = nn.Linear(2, 2)
    calls = []
    handle = lin.register_backward_hook(lambda mod, gin, gout: calls.append(len(gout)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lin(torch.randn(3, 2, requires_grad=True)).sum().backward()
    assert calls == [1]
    handle.remove()
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        lin.register_full_backward_hook(lambda mod, gin, gout: None)


def test_ref_calling_forward_directly_ignores_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    lin.register_forward_pre_hook(lambda m, i: calls.append('pre'))
    lin.register_forward_hook(lambda m, i, o: calls.append('post'))
    x = torch.randn(1, 2)
    assert lin.forward(x).tolist() == lin(x).tolist()
    assert calls == ['pre', 'post']


def test_ref_forward_must_be_overridden():
    with pytest.raises(NotImplementedError):
        nn.Module()(torch.zeros(1))


def test_ref_casts_return_self_and_touch_floating_point_only():
    bn = nn.BatchNorm1d(3)  # num_batches_tracked is an integer buffer
    assert bn.double() is bn
    assert bn.weight.dtype == torch.float64 and bn.running_mean.dtype == torch.float64
    assert bn.num_batches_tracked.dtype == torch.int64
    assert bn.half() is bn and bn.weight.dtype == torch.float16
    assert bn.bfloat16() is bn and bn.running_var.dtype == torch.bfloat16
    assert bn.float() is bn and bn.weight.dtype == torch.float32
    assert bn.num_batches_tracked.dtype == torch.int64
    assert bn.cpu() is bn
    # type(dst_type) casts all parameters and buffers
    assert bn.type(torch.float64) is bn
    assert bn.num_batches_tracked.dtype == torch.float64


def test_ref_to_examples():
    linear = nn.Linear(2, 2)
    before = linear.weight.detach().numpy().copy()
    assert repr(linear.to(torch.double)) == "Linear(in_features=2, out_features=2, bias=True)"
    assert shape_of(repr(linear.weight)) == shape_of("""Parameter containing:
tensor([[ 0.1913, -0.3420],
        [-0.5113, -0.2325]], dtype=rlpipe.float64, requires_grad=True)""")
    np.testing.assert_allclose(linear.weight.detach().numpy(), before, rtol=1e-7)
    # the reference moves to torch.device("cuda:1"); here the device is the CPU (or cuda:0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    assert linear.to(device, dtype=torch.half, non_blocking=True) is linear
    assert linear.weight.dtype == torch.float16
    np.testing.assert_allclose(linear.weight.detach().cpu().float().numpy(), before, atol=1e-3)
    cpu = torch.device("cpu")
    assert repr(linear.to(cpu)) == "Linear(in_features=2, out_features=2, bias=True)"
    assert shape_of(repr(linear.weight)) == shape_of("""Parameter containing:
tensor([[ 0.1914, -0.3420],
        [-0.5112, -0.2324]], dtype=rlpipe.float16, requires_grad=True)""")
    with pytest.raises(TypeError):
        linear.to(torch.int32)


def test_ref_to_empty():
    lin = nn.Linear(3, 2)
    weight = lin.weight
    assert lin.to_empty(device='cpu') is lin
    assert lin.weight is weight and lin.weight.shape == (2, 3) and lin.bias.shape == (2,)


def test_ref_requires_grad_and_zero_grad():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    assert net[0].requires_grad_(False) is net[0]  # freeze the first layer
    net(torch.randn(4, 2)).sum().backward()
    assert net[0].weight.grad is None and net[1].weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net[1].weight.grad.tolist() == [[0.0, 0.0]]
    net.zero_grad(set_to_none=True)
    assert net[1].weight.grad is None


def test_ref_extra_state_is_pickled_with_the_state_dict():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(1, 1)
            self.steps = 0

        def get_extra_state(self):
            return {'steps': self.steps}

        def set_extra_state(self, state):
            self.steps = state['steps']

    c = Counter()
    c.steps = 12
    buf = io.BytesIO()
    torch.save(c.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=False)
    # a module's own entries (parameters, buffers, extra state) come before its children's
    assert list(sd) == ['_extra_state', 'lin.weight', 'lin.bias']
    fresh = Counter()
    assert repr(fresh.load_state_dict(sd)) == "<All keys matched successfully>"
    assert fresh.steps == 12


# =============================================================================================
# Module-internals-notes-zh.txt
# =============================================================================================
def test_zh_layer_classes_inherit_from_module():
    # nn.Linear inherits Module directly, nn.Conv2d indirectly (through _ConvNd)
    assert nn.Linear.__bases__ == (nn.Module,)
    assert issubclass(nn.Conv2d, nn.Module) and nn.Module not in nn.Conv2d.__bases__
    assert nn.Conv2d.__bases__ == (nn.modules.conv._ConvNd,)
    assert nn.modules.conv._ConvNd.__bases__ == (nn.Module,)


def test_zh_module_attribute_table():
    m = nn.Linear(2, 2)
    assert isinstance(m.training, bool) and m.training
    for name in ('_parameters', '_buffers', '_backward_hooks', '_forward_hooks', '_forward_pre_hooks',
                 '_state_dict_hooks', '_load_state_dict_pre_hooks', '_modules'):
        assert type(m.__dict__[name]) is OrderedDict, name
    assert type(m.__dict__['_non_persistent_buffers_set']) is set
    assert m.__dict__['_is_full_backward_hook'] is None
    assert list(m._parameters) == ['weight', 'bias'] and list(m._modules) == []


def test_zh_apply_recurses_children_first():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ['Linear', 'ReLU', 'Linear', 'Sequential', 'Sequential']


def test_zh_private_apply_order_children_then_parameters_then_buffers():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(torch.zeros(1))
            self.register_buffer('b', torch.zeros(3))
            self.inner = nn.Linear(2, 2)

    m = Outer()
    shapes = []

    def fn(t):
        shapes.append(tuple(t.shape))
        return t

    assert m._apply(fn) is m
    assert shapes == [(2, 2), (2,), (1,), (3,)]


def test_zh_float_casts_floating_point_tensors_only():
    bn = nn.BatchNorm1d(2).double()
    bn._apply(lambda t: t.float() if t.is_floating_point() else t)
    assert bn.weight.dtype == torch.float32 and bn.running_mean.dtype == torch.float32
    assert bn.num_batches_tracked.dtype == torch.int64
    assert isinstance(bn.weight, nn.Parameter)


def test_zh_call_impl_order_and_wrapping():
    log = []

    class M(nn.Module):
        def forward(self, x):
            log.append('forward')
            return x * 2

    m = M()
    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(lambda mod, inp: log.append('global pre')),
        m.register_forward_pre_hook(lambda mod, inp: (log.append('pre'), inp[0] + 1)[1]),
        torch.nn.modules.module.register_module_forward_hook(lambda mod, inp, out: log.append('global post')),
        m.register_forward_hook(lambda mod, inp, out: (log.append('post'), out * 10)[1]),
    ]
    try:
        result = m(torch.tensor([1.0]))
    finally:
        for h in handles:
            h.remove()
    assert log == ['global pre', 'pre', 'forward', 'global post', 'post']
    assert result.tolist() == [40.0]  # (1 + 1) * 2 * 10


@pytest.mark.parametrize("container", ["tuple", "dict"])
def test_zh_non_full_backward_hook_sits_on_the_first_output_tensor(container):
    class TwoOutputs(nn.Module):
        def forward(self, x):
            a, b = x * 2, x * 3
            return (a, b) if container == "tuple" else {'a': a, 'b': b}

    m = TwoOutputs()
    calls = []
    m.register_backward_hook(lambda mod, gin, gout: calls.append(
        ([g.tolist() for g in gin if g is not None], [g.tolist() for g in gout])))
    x = torch.tensor([1.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = m(x)
        first = out[0] if container == "tuple" else out['a']
        first.sum().backward()
    # registered on the grad_fn of a = x * 2 only: grad_output 1, grad_input 2
    assert calls == [([[2.0]], [[1.0]])]


def test_zh_setattr_getattr_delattr():
    m = nn.Module()
    m.value = 3  # a plain attribute goes through object.__setattr__ (no recursion)
    m.w = nn.Parameter(torch.zeros(1))
    assert m.value == 3 and 'value' in m.__dict__ and 'w' in m._parameters
    assert m.w is m._parameters['w']
    del m.w
    del m.value
    assert not hasattr(m, 'w') and not hasattr(m, 'value')


def test_zh_save_to_state_dict_covers_only_the_module_itself():
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    own = OrderedDict()
    net[1]._save_to_state_dict(own, 'x.', False)
    assert list(own) == ['x.weight', 'x.bias', 'x.running_mean', 'x.running_var', 'x.num_batches_tracked']
    outer = OrderedDict()
    net._save_to_state_dict(outer, '', False)
    assert list(outer) == []  # Sequential has no tensors of its own
    assert list(net.state_dict()) == ['0.weight', '0.bias', '1.weight', '1.bias', '1.running_mean',
                                      '1.running_var', '1.num_batches_tracked']


def test_zh_load_from_state_dict_loads_only_the_module_itself():
    net = nn.Sequential(nn.Linear(2, 2))
    net.scale = nn.Parameter(torch.zeros(1))
    missing, unexpected, errors = [], [], []
    state = {'scale': torch.ones(1), '0.weight': torch.zeros(2, 2), 'bogus': torch.zeros(1)}
    net._load_from_state_dict(state, '', {}, True, missing, unexpected, errors)
    assert net.scale.tolist() == [1.0]
    assert net[0].weight.abs().sum().item() > 0  # the child's entry is left for the child
    assert missing == [] and unexpected == ['bogus'] and errors == []


def test_zh_named_members_skip_duplicates():
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, nn.ReLU(), shared)
    assert [name for name, _ in net.named_parameters()] == ['0.weight', '0.bias']
    assert len(list(net.parameters())) == 2
    assert [name for name, _ in net.named_children()] == ['0', '1']


def test_zh_train_eval_requires_grad_and_zero_grad():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert net.eval() is net and not net[1].training
    assert net.train() is net and net[1].training
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(True)
    weight = net[0].weight
    weight.grad = torch.ones(2, 2, requires_grad=True) * 2  # a gradient that has a grad_fn
    net.zero_grad(set_to_none=False)
    assert weight.grad.grad_fn is None and weight.grad.requires_grad is False
    assert weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


# =============================================================================================
# the import behind the note's ``torch.optim.SGD`` after a plain ``import torch``
# =============================================================================================
def test_import_exposes_subpackages():
    code = "import rlpipe as torch; torch.nn.Module; torch.optim.SGD; torch.nn.functional.relu"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
