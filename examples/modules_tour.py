"""A tour of rlpipe.nn.Module, following PyTorch's "Modules" note section by section.

    python examples/modules_tour.py [--device cpu|cuda] [--steps 10000] [--out-dir runs]

Every snippet of the note runs here with ``torch`` replaced by ``rlpipe``: a custom module, composing
modules, a training loop with an optimizer, module state (state_dict, buffers, save/load), train and
eval modes, initialization, and hooks. It prints what the note prints, section by section, and writes
the training loop's loss per step to {out-dir}/modules_tour_loss.csv (and a .png when matplotlib is
installed). Parts that rlpipe does not have (FX, torch.compile, the meta device, ...) are skipped with a
printed note.
"""
import argparse
import csv
import os
import warnings

import rlpipe
import rlpipe.nn.functional as F
import rlpipe.optim
from rlpipe import nn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu, or cuda where CuPy and a GPU are available")
    p.add_argument("--steps", type=int, default=10_000, help="steps of the training-loop section")
    p.add_argument("--lr", type=float, default=1e-4, help="SGD's learning rate in the training-loop section")
    p.add_argument("--seed", type=int, default=0, help="seed of rlpipe's random generator")
    p.add_argument("--out-dir", default="runs", help="where the loss CSV and the saved state_dicts go")
    return p.parse_args()


def header(title):
    print(f"\n=== {title} " + "=" * max(3, 72 - len(title)))


def skipped(what, why):
    print(f"[skipped] {what}: {why}")


# --------------------------------------------------------------------------------------------------
# The modules the note defines
# --------------------------------------------------------------------------------------------------
class MyLinear(nn.Module):
    """An affine map x @ W + b, with both tensors registered as learnable Parameters."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(rlpipe.randn(in_features, out_features))
        self.bias = nn.Parameter(rlpipe.randn(out_features))

    def forward(self, input):
        return (input @ self.weight) + self.bias


class Net(nn.Module):
    """Two MyLinear layers with a ReLU between them: 4 -> 3 -> 1."""

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
    """A module whose child is itself a module with children (for named_modules)."""

    def __init__(self):
        super().__init__()
        self.l1 = MyLinear(5, 4)
        self.net = Net()

    def forward(self, x):
        return self.net(self.l1(x))


class DynamicNet(nn.Module):
    """Submodules held in a ModuleList and a ModuleDict; the activation is picked per call."""

    def __init__(self, num_layers):
        super().__init__()
        self.linears = nn.ModuleList([MyLinear(4, 4) for _ in range(num_layers)])
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
    """Keeps an exponential moving average of its inputs in a buffer: saved, moved, never trained."""

    def __init__(self, num_features, momentum=0.9):
        super().__init__()
        self.momentum = momentum
        self.register_buffer('mean', rlpipe.zeros(num_features))

    def forward(self, x):
        self.mean = self.momentum * self.mean + (1.0 - self.momentum) * x
        return self.mean


class RunningMeanWithScratch(RunningMean):
    """The same, plus a buffer that moves with the module but stays out of its state_dict."""

    def __init__(self, num_features, momentum=0.9):
        super().__init__(num_features, momentum)
        self.register_buffer('unserialized_thing', rlpipe.randn(5), persistent=False)


# --------------------------------------------------------------------------------------------------
# The sections
# --------------------------------------------------------------------------------------------------
def simple_custom_module():
    header("1. A simple custom module")
    m = MyLinear(4, 3)
    sample_input = rlpipe.randn(4)
    print(m(sample_input))  # calling the module runs its forward()
    print("-- m.named_parameters():")
    for parameter in m.named_parameters():
        print(parameter)
    print("-- parameters() yields the same tensors:", [tuple(p.shape) for p in m.parameters()])


def building_blocks(device):
    header("2. Modules as building blocks")
    print("-- nn.Sequential(MyLinear(4, 3), nn.ReLU(), MyLinear(3, 1)):")
    net = nn.Sequential(
        MyLinear(4, 3),
        nn.ReLU(),
        MyLinear(3, 1)
    )
    sample_input = rlpipe.randn(4)
    print(net(sample_input))

    print("-- Net().named_children():")
    net = Net()
    for child in net.named_children():
        print(child)

    print("-- BigNet().named_modules() (recursive):")
    big_net = BigNet()
    for module in big_net.named_modules():
        print(module)

    print("-- DynamicNet(3): ModuleList + ModuleDict, parameters collected recursively:")
    dynamic_net = DynamicNet(3)
    sample_input = rlpipe.randn(4)
    output = dynamic_net(sample_input, 'relu')
    print("output ('relu'): ", output)
    print("output ('lrelu'):", dynamic_net(sample_input, 'lrelu'))
    for parameter in dynamic_net.named_parameters():
        print(parameter)

    print(f"-- .to(device='{device}') and .to(dtype=rlpipe.float64) move/cast every parameter in place:")
    dynamic_net.to(device=device)
    dynamic_net.to(dtype=rlpipe.float64)
    # (the note feeds 5 features here; the first layer takes 4, so torch would fail too)
    print(dynamic_net(rlpipe.randn(4, device=device, dtype=rlpipe.float64), 'relu'))
    print("parameter dtypes/devices:", sorted({f"{p.dtype}@{p.device}" for p in dynamic_net.parameters()}))

    print("-- apply(fn) visits every submodule (children first), then the module itself:")
    dynamic_net.apply(lambda mod: print("  visited", type(mod).__name__))


def training(args, device):
    header("3. Neural network training with modules")
    # Teach Net to output zero everywhere: |output| is the loss, SGD with momentum and weight decay.
    net = Net().to(device)
    optimizer = rlpipe.optim.SGD(net.parameters(), lr=args.lr, weight_decay=1e-2, momentum=0.9)
    params = list(net.parameters())
    numbers = sum(p.numel() for p in params)
    print(f"optimizer: {type(optimizer).__name__} over {len(params)} tensors ({numbers} numbers)")
    print("l1.weight before training:")
    print(net.l1.weight)

    rows, report_every = [], max(args.steps // 10, 1)
    for step in range(1, args.steps + 1):
        input = rlpipe.randn(4, device=device)
        output = net(input)
        loss = rlpipe.abs(output)
        net.zero_grad()
        loss.backward()
        optimizer.step()
        rows.append((step, loss.item()))
        if step % report_every == 0:
            recent = rows[-report_every:]
            print(f"  step {step:6d}  mean |output| over the last {len(recent)} steps: "
                  f"{sum(r[1] for r in recent) / len(recent):.5f}")

    print(f"l1.weight after {args.steps} steps (nearer 0 after enough steps):")
    print(net.l1.weight)
    return net, rows


def module_state(net, out_dir, device):
    header("4. Module state: state_dict, save and load")
    path = os.path.join(out_dir, "modules_tour_net.pt")
    rlpipe.save(net.state_dict(), path)  # written atomically; no pickle
    print(f"saved net.state_dict() to {path}: keys {list(net.state_dict())}")
    new_net = Net().to(device)
    print(new_net.load_state_dict(rlpipe.load(path)))
    x = rlpipe.randn(4, device=device)
    print("same output after loading:", net(x).tolist() == new_net(x).tolist())

    print("-- buffers: RunningMean keeps its mean in a persistent buffer")
    m = RunningMean(4).to(device)
    for _ in range(10):
        input = rlpipe.randn(4, device=device)
        m(input)
    print(m.state_dict())
    print("parameters:", list(m.parameters()), " buffers:", [name for name, _ in m.named_buffers()])

    path = os.path.join(out_dir, "modules_tour_mean.pt")
    rlpipe.save(m.state_dict(), path)  # the file holds the 'mean' tensor
    m_loaded = RunningMean(4).to(device)
    m_loaded.load_state_dict(rlpipe.load(path))
    assert rlpipe.all(m.mean == m_loaded.mean)
    print(f"round trip through {path}: mean restored =", bool(rlpipe.all(m.mean == m_loaded.mean)))

    print("-- a non-persistent buffer is left out of the state_dict but still moves with .to()")
    m = RunningMeanWithScratch(4)
    print("state_dict keys:", list(m.state_dict()))
    print("named_buffers:  ", [name for name, _ in m.named_buffers()])
    m.to(device=device, dtype=rlpipe.float64)
    for name, buf in m.named_buffers():
        print(f"  {name}: dtype={buf.dtype}, device={buf.device}")


def train_and_eval(device):
    header("5. Training and evaluation modes")
    # train()/eval() flip the `training` flag on a module and all its submodules; Dropout and
    # BatchNorm behave differently depending on it.
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(p=0.5), nn.Linear(8, 2)).to(device)
    print(model)
    print("fresh module training flags:", [mod.training for mod in model.modules()])
    x = rlpipe.ones(1, 8, device=device)
    drop = model[3]
    print("Dropout in train mode (zeroes about half, scales the rest by 2):", drop(x))
    model.eval()
    print("after model.eval() flags:", [mod.training for mod in model.modules()])
    print("Dropout in eval mode (identity):", drop(x))

    bn = model[1]
    batch = rlpipe.randn(16, 4, device=device)
    model.train()
    before = bn.running_mean.clone()
    model(batch)
    print("BatchNorm1d running_mean moved in train mode:", not bool(rlpipe.all(before == bn.running_mean)))
    model.eval()
    before = bn.running_mean.clone()
    with rlpipe.no_grad():
        a, b = model(batch), model(batch)
    print("eval mode: running stats frozen:", bool(rlpipe.all(before == bn.running_mean)),
          " output deterministic:", a.tolist() == b.tolist())
    print("BatchNorm1d buffers:", [name for name, _ in bn.named_buffers()])


def initialization(device):
    header("6. Module initialization")
    # Built-in layers take device= and dtype= to create their parameters right where they belong.
    m = nn.Linear(5, 3, device=device, dtype=rlpipe.float64)
    print("nn.Linear(5, 3, device=..., dtype=float64):", m.weight.dtype, m.weight.device)

    # nn.init functions overwrite a tensor in place (under no_grad).
    nn.init.xavier_normal_(m.weight)
    nn.init.constant_(m.bias, 0.1)
    print("after xavier_normal_ / constant_(0.1):")
    print(m.weight)
    print(m.bias)

    # apply() with an init function re-initializes every matching submodule of a model.
    def init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.kaiming_uniform_(module.weight, nonlinearity="relu")
            nn.init.zeros_(module.bias)

    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    model.apply(init_weights)
    for name, p in model.named_parameters():
        if name.endswith("weight"):  # kaiming_uniform_ for relu: U(-b, b) with b = sqrt(6 / fan_in)
            print(f"  {name:9s} shape {tuple(p.shape)!s:8s} max |w| {p.abs().max().item():.4f}  "
                  f"bound {(6 / p.shape[1]) ** 0.5:.4f}")
        else:
            print(f"  {name:9s} shape {tuple(p.shape)!s:8s} all zero: {bool((p == 0).all())}")
    print("gain for relu:", nn.init.calculate_gain("relu"))

    skipped("nn.utils.skip_init and device='meta'",
            "rlpipe has no meta device (devices are cpu and cuda), so modules cannot be built without storage")


def hooks(device):
    header("7. Module hooks")
    lin = nn.Linear(3, 2).to(device)

    def forward_pre_hook(module, args):
        print(f"  pre-hook:  {type(module).__name__} gets input of shape {tuple(args[0].shape)}; adding 1")
        return args[0] + 1  # a returned value replaces the input

    def forward_hook(module, args, output):
        print(f"  fwd hook:  output of shape {tuple(output.shape)}; doubling it")
        return output * 2  # a returned value replaces the output

    def backward_hook(module, grad_input, grad_output):
        print(f"  bwd hook:  grad_output {[tuple(g.shape) for g in grad_output]}, "
              f"grad_input {[None if g is None else tuple(g.shape) for g in grad_input]}")

    handles = [lin.register_forward_pre_hook(forward_pre_hook), lin.register_forward_hook(forward_hook),
               lin.register_full_backward_hook(backward_hook)]
    x = rlpipe.ones(1, 3, device=device, requires_grad=True)
    with rlpipe.no_grad():
        plain = (x + 1) @ lin.weight.T + lin.bias
    out = lin(x)
    print("hooked output == 2 * lin(x + 1):", bool(rlpipe.allclose(out, 2 * plain)))
    out.sum().backward()
    print("x.grad:", x.grad)
    print("x.grad == 2 * lin.weight.sum(0) (the forward hook's doubling flows back):",
          bool(rlpipe.allclose(x.grad, 2 * lin.weight.sum(0, keepdim=True))))
    for h in handles:
        h.remove()
    print("hooks removed; lin(x) == plain affine map:", bool(rlpipe.allclose(lin(x), x @ lin.weight.T + lin.bias)))

    print("-- global hooks run for every module, e.g. to trace a forward/backward pass:")
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).to(device)
    g = [nn.modules.module.register_module_forward_hook(
             lambda m, args, out: print(f"  forward  {type(m).__name__:10s} -> {tuple(out.shape)}")),
         nn.modules.module.register_module_full_backward_hook(
             lambda m, gin, gout: print(f"  backward {type(m).__name__:10s} grad_output {tuple(gout[0].shape)}"))]
    try:
        net(rlpipe.randn(2, 3, device=device, requires_grad=True)).sum().backward()
    finally:
        for h in g:
            h.remove()


def advanced():
    header("8. Advanced features")
    model = nn.Linear(2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.compile()
    skipped("torch.compile", "rlpipe has no compiler; Module.compile() "
            + ("warns and " if caught else "") + "leaves forward unchanged")
    skipped("FX and TorchScript (symbolic tracing, export)", "rlpipe has no graph capture or tracing API")
    skipped("profiling", "rlpipe has no profiler (time calls with time.perf_counter instead)")
    skipped("pruning and parametrizations", "rlpipe.nn.utils has no prune or parametrize module")
    skipped("quantization", "rlpipe has no quantized dtypes or modules")


def save_loss(rows, out_dir):
    path = os.path.join(out_dir, "modules_tour_loss.csv")
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("step", "loss"), *rows])
    print(f"\nwrote {path}", end="")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print()
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r[0] for r in rows], [r[1] for r in rows], lw=0.3, alpha=0.5, label="|output| per step")
    window = max(len(rows) // 100, 1)
    smooth = [sum(r[1] for r in rows[max(0, i - window + 1):i + 1]) / min(window, i + 1) for i in range(len(rows))]
    ax.plot([r[0] for r in rows], smooth, label=f"moving average ({window} steps)")
    ax.set(xlabel="step", ylabel="loss = |output|", yscale="log", title="modules_tour: teaching Net to output 0")
    ax.legend()
    png = path[:-4] + ".png"
    fig.savefig(png, dpi=100, bbox_inches="tight")
    plt.close(fig)
    print(f" and {png}")


def main():
    args = parse_args()
    rlpipe.manual_seed(args.seed)
    device = rlpipe.device(args.device)
    try:
        rlpipe.zeros(1, device=device)  # fail early, saying what to install, if the device is unusable
    except RuntimeError as e:
        raise SystemExit(f"--device {args.device}: {e}") from None
    os.makedirs(args.out_dir, exist_ok=True)

    simple_custom_module()
    building_blocks(device)
    net, rows = training(args, device)
    module_state(net, args.out_dir, device)
    train_and_eval(device)
    initialization(device)
    hooks(device)
    advanced()
    save_loss(rows, args.out_dir)


if __name__ == "__main__":
    main()
