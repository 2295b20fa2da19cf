"""``rlpipe.func``: functional_call, vmap (batching rules checked against Python loops over the
batch), grad/grad_and_value, and TensorDict.to_module/from_module(s). Expected numbers come from
torch 2.13 / tensordict 0.14.3 on the same inputs, or from finite differences."""
import pytest

import rlpipe
import rlpipe.nn.functional as F
from rlpipe import nn
from rlpipe.distributions import Categorical, Normal
from rlpipe.func import functional_call, grad, grad_and_value, stack_module_state, vmap
from rlpipe.tensordict import TensorDict


def close(a, b, atol=1e-5):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert rlpipe.allclose(a, b, atol=atol), (a, b)


def loop(f, *args, in_dims=0):
    """The truth for vmap: f on each sample, stacked."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    outs = [f(*[a if d is None else a.select(d, i) for a, d in zip(args, dims)]) for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(rlpipe.stack(parts) for parts in zip(*outs))
    return rlpipe.stack(outs)


def same_as_loop(f, *args, in_dims=0):
    out, truth = vmap(f, in_dims)(*args), loop(f, *args, in_dims=in_dims)
    for a, b in zip(out, truth) if isinstance(out, tuple) else [(out, truth)]:
        close(a, b)


# ---- functional_call -----------------------------------------------------------------------------

W = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
X = [[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]]


def test_functional_call_uses_the_given_tensors_and_gradients_reach_them():
    lin = nn.Linear(3, 2)
    own = lin.weight
    weight, bias = rlpipe.tensor(W, requires_grad=True), rlpipe.tensor([0.1, -0.2], requires_grad=True)
    y = functional_call(lin, {"weight": weight, "bias": bias}, (rlpipe.tensor(X),))
    close(y, rlpipe.tensor([[4.6, -0.45], [-0.9, -1.575]]))  # torch 2.13
    (y ** 2).sum().backward()
    close(weight.grad, rlpipe.tensor([[11.0, 17.5, 27.6], [2.25, -3.375, -2.7]]))
    close(bias.grad, rlpipe.tensor([7.4, -4.05]))
    assert lin.weight is own and own.grad is None and isinstance(lin.weight, nn.Parameter)


def test_functional_call_single_arg_kwargs_and_partial_dicts():
    lin = nn.Linear(3, 2)
    x = rlpipe.tensor(X)
    zero_bias = functional_call(lin, {"bias": rlpipe.zeros(2)}, x)  # one argument need not be a tuple
    close(zero_bias, x @ lin.weight.detach().T)

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", rlpipe.ones(1))

        def forward(self, x, *, shift=0.0):
            return x * self.scale + shift
    m = Scaled()
    close(functional_call(m, ({"scale": rlpipe.tensor([3.0])},), (x,), {"shift": 1.0}), x * 3 + 1)
    assert m.scale.tolist() == [1.0]
    assert rlpipe.nn.utils.stateless.functional_call is functional_call


def test_functional_call_restores_the_module_when_the_call_raises():
    class Failing(nn.Linear):
        def forward(self, x):
            raise ValueError("boom")
    m = Failing(3, 2)
    weight, bias = m.weight, m.bias
    with pytest.raises(ValueError, match="boom"):
        functional_call(m, {"weight": rlpipe.zeros(2, 3), "bias": rlpipe.zeros(2), "extra": rlpipe.ones(1)},
                        (rlpipe.ones(3),))
    assert m.weight is weight and m.bias is bias and "extra" not in m.__dict__
    assert nn.Linear.forward(m, rlpipe.ones(1, 3)).shape == (1, 2)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(2, 2, bias=False)
        self.l2 = nn.Linear(2, 2, bias=False)
        self.l2.weight = self.l1.weight

    def forward(self, x):
        return self.l2(self.l1(x))


def test_functional_call_tied_weights():
    m = Tied()
    with rlpipe.no_grad():
        m.l1.weight.copy_(rlpipe.eye(2))
    w, x = rlpipe.tensor([[2.0, 1.0], [0.0, 1.0]]), rlpipe.tensor([[1.0, 1.0]])
    assert functional_call(m, {"l1.weight": w}, (x,)).tolist() == [[7.0, 1.0]]  # torch 2.13
    assert functional_call(m, {"l1.weight": w}, (x,), tie_weights=False).tolist() == [[3.0, 1.0]]
    with pytest.raises(ValueError, match=r"\['l1.weight', 'l2.weight'\], which are tied"):
        functional_call(m, {"l1.weight": w, "l2.weight": w * 2}, (x,))
    assert m.l2.weight is m.l1.weight


def test_functional_call_strict_and_ambiguous_dicts():
    lin, x = nn.Linear(3, 2), rlpipe.tensor(X)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bias'"):
        functional_call(lin, {"weight": rlpipe.zeros(2, 3)}, (x,), strict=True)
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'other'"):
        functional_call(lin, {"weight": rlpipe.zeros(2, 3), "bias": rlpipe.zeros(2), "other": x}, (x,), strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(lin, ({"weight": lin.weight}, {"weight": lin.weight}), (x,))
    with pytest.raises(ValueError, match="dictionaries, got int"):
        functional_call(lin, 3, (x,))
    assert lin(x).shape == (2, 2)


def test_functional_call_takes_a_tensordict():
    net = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    params = TensorDict.from_module(net).apply(lambda t: t.detach() * 2)
    x = rlpipe.ones(4, 2)
    truth = rlpipe.tanh(x @ (2 * net[0].weight.detach()).T + 2 * net[0].bias.detach()) @ \
        (2 * net[2].weight.detach()).T + 2 * net[2].bias.detach()
    close(functional_call(net, params, (x,)), truth)


# ---- TensorDict.from_module / from_modules / to_module -----------------------------------------------

def make_net():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    net.register_buffer("b", rlpipe.zeros(2))
    return net


def test_from_module_and_from_modules():
    net = make_net()
    td = TensorDict.from_module(net)
    assert [k if isinstance(k, str) else tuple(k) for k in td.keys(True, True)] == \
        ["b", ("0", "weight"), ("0", "bias"), ("2", "weight"), ("2", "bias")]  # tensordict 0.14.3's order
    assert td["0", "weight"] is net[0].weight and not td.is_locked
    nets = [make_net() for _ in range(3)]
    stacked = TensorDict.from_modules(*nets)
    assert stacked.batch_size == (3,) and stacked.is_locked
    assert isinstance(stacked["0", "weight"], nn.Parameter) and stacked["0", "weight"].requires_grad
    assert isinstance(stacked["b"], nn.Buffer)
    close(stacked["2", "weight"][1], nets[1][2].weight.detach())
    with pytest.raises(ValueError, match="key sets must match"):
        TensorDict.from_modules(make_net(), nn.Linear(2, 3))


def test_to_module_swaps_and_returns_the_old_tensors():
    net = make_net()
    params = TensorDict.from_module(net)
    zeros = params.apply(lambda t: rlpipe.zeros_like(t.detach()))
    swap = zeros.to_module(net)
    # tensordict 0.14.3: the module keeps a Parameter, with the old requires_grad
    assert isinstance(net[0].weight, nn.Parameter) and net[0].weight.requires_grad
    assert net[0].weight.abs().sum().item() == 0
    assert swap["0", "weight"] is params["0", "weight"] and swap["b"] is params["b"]
    assert swap.to_module(net, return_swap=False) is None
    assert net[0].weight is params["0", "weight"]


def test_to_module_as_a_context_manager_restores_also_after_an_error():
    net = make_net()
    params = TensorDict.from_module(net)
    zeros = params.apply(lambda t: rlpipe.zeros_like(t.detach()))
    with zeros.to_module(net) as swap:
        assert net(rlpipe.ones(1, 2)).tolist() == [[0.0]]
        assert swap["0", "weight"] is params["0", "weight"]
    assert net[0].weight is params["0", "weight"] and net[2].bias is params["2", "bias"]
    with pytest.raises(ValueError, match="boom"):
        with zeros.to_module(net):
            raise ValueError("boom")
    # (tensordict 0.14.3 leaves the zeros in the module here; rlpipe puts the parameters back)
    assert net[0].weight is params["0", "weight"]


def test_to_module_inplace_grad_leaves_and_errors():
    net = make_net()
    params = TensorDict.from_module(net)
    own = net[0].weight
    before = own.detach().clone()
    swap = params.apply(lambda t: rlpipe.zeros_like(t.detach())).to_module(net, inplace=True)
    assert net[0].weight is own and own.abs().sum().item() == 0 and rlpipe.equal(swap["0", "weight"], before)
    leaf = rlpipe.zeros(3, 2, requires_grad=True)
    TensorDict({"0": {"weight": leaf}}, []).to_module(net)
    assert net[0].weight is leaf  # a tensor that records gradients is registered as it is
    with pytest.raises(RuntimeError, match="memo cannot be passed"):
        params.to_module(net, memo={})
    with pytest.raises(RuntimeError, match="inplace argument cannot be passed when use_state_dict=True"):
        params.to_module(net, use_state_dict=True, inplace=False)
    with pytest.raises(KeyError, match="no submodule named 'missing'"):
        TensorDict({"missing": {"w": rlpipe.zeros(1)}}, []).to_module(net)
    assert net[0].weight is leaf


# ---- vmap: batching rules against loops --------------------------------------------------------------

rlpipe.manual_seed(0)
A, B3, C = rlpipe.randn(4, 5), rlpipe.randn(4, 3, 5), rlpipe.randn(5)
IDX = rlpipe.tensor([[0, 1], [2, 3], [4, 0], [1, 1]])


@pytest.mark.parametrize("f", [
    lambda a: abs(a) ** 2 - 2 ** a + rlpipe.exp(a) / (1 + a.abs()),
    lambda a: rlpipe.sigmoid(F.relu(rlpipe.tanh(a))) + F.softplus(a) + a.clamp(-0.5, 0.5),
    lambda a: a + C - C * a,  # an unbatched operand
    lambda a: a.view(5, 1) * C,  # broadcasting a batched (5, 1) with an unbatched (5,)
    lambda a: rlpipe.where(a > 0, a, rlpipe.zeros(5)),
    lambda a: a @ C, lambda a: C @ a.view(5, 1), lambda a: a.view(1, 5) @ rlpipe.ones(5, 2),
    lambda a: F.linear(a, rlpipe.ones(3, 5), rlpipe.arange(3.0)),
    lambda a: a.sum(), lambda a: a.view(5, 1).mean(-2), lambda a: a.view(5, 1).sum(dim=0, keepdim=True),
    lambda a: a.max(0).values, lambda a: a.max(), lambda a: a.std(), lambda a: a.norm(), lambda a: a.logsumexp(-1),
    lambda a: a.argmax(), lambda a: F.softmax(a, -1), lambda a: rlpipe.log_softmax(a, dim=0),
    lambda a: a.reshape(-1, 1).permute(1, 0), lambda a: a.view(5, 1).transpose(0, 1).squeeze(),
    lambda a: a.unsqueeze(-1).expand(5, 3), lambda a: a.view(1, 5).flatten(), lambda a: a.unsqueeze(0).T,
    lambda a: rlpipe.cat([a, rlpipe.ones(2)]), lambda a: rlpipe.stack([a, C], -1),
    lambda a: rlpipe.cat([rlpipe.ones(2), a]), lambda a: rlpipe.stack([C, a]),  # a plain tensor first
    lambda a: a.unbind(0)[2], lambda a: a.chunk(5)[1], lambda a: a[1:3], lambda a: a[..., -1],
    lambda a: a[rlpipe.tensor([0, 2, 2])], lambda a: a.cumsum(0), lambda a: rlpipe.zeros_like(a) + a,
    lambda a: a.view(5, 1).movedim(0, 1), lambda a: a.flip(0), lambda a: a.narrow(0, 1, 2),
    lambda a: a.view(5, 1).select(1, 0), lambda a: a.split(2)[2], lambda a: a.view(1, 5, 1).flatten(0, 1),
    lambda a: a.view(5, 1).transpose(dim0=0, dim1=1), lambda a: a.unflatten(0, (5, 1)), lambda a: a.cumprod(-1),
    lambda a: a.view(5, 1).expand_as(rlpipe.ones(5, 2)), lambda a: (a > 0).any(), lambda a: a.var(0, keepdim=True),
])
def test_vmap_equals_a_loop(f):
    same_as_loop(f, A)


def test_vmap_binary_and_indexing_rules_with_two_batched_inputs():
    same_as_loop(lambda a, b: b @ a, A, B3)
    same_as_loop(lambda a, b: (a * b).sum(-1), A, B3)
    same_as_loop(lambda a, i: a[i], A, IDX)
    same_as_loop(lambda a, i: a.gather(0, i), A, IDX)
    same_as_loop(lambda b, w: F.linear(b, w, w[:, 0]), B3, rlpipe.randn(4, 2, 5))  # one weight per sample
    same_as_loop(lambda a, b: F.mse_loss(a, b), A, B3[:, 0])
    same_as_loop(lambda a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=0.5), A, B3[:, 1])
    same_as_loop(lambda a, b: F.mse_loss(a, b, reduction="none"), A, C, in_dims=(0, None))


def test_vmap_recurrent_cells_and_distributions():
    x, h = rlpipe.randn(4, 5), rlpipe.randn(4, 6)
    gru, lstm = nn.GRUCell(5, 6), nn.LSTMCell(5, 6)
    same_as_loop(lambda a, b: gru(a, b), x, h)
    same_as_loop(lambda a, b: lstm(a, (b, b)), x, h)
    same_as_loop(lambda a, b: Normal(a, b.exp()).log_prob(a * 0.5) + Normal(a, b.exp()).entropy(), x[:, :5], A)
    same_as_loop(lambda a: Categorical(logits=a).log_prob(rlpipe.tensor(1)) + Categorical(logits=a).entropy(), A)


def test_vmap_in_dims_out_dims_and_trees():
    same_as_loop(lambda b: b.sum(0), B3, in_dims=1)
    same_as_loop(lambda b: b * 2, B3, in_dims=-1)
    same_as_loop(lambda a, c: a - c, A, C, in_dims=(0, None))
    out = vmap(lambda t: {"s": t["x"] + t["y"][0], "c": 3.0}, in_dims=({"x": 1, "y": None},),
               out_dims={"s": 1, "c": None})({"x": A.T, "y": [C]})
    close(out["s"], (A + C).T)
    assert out["c"] == 3.0
    first, second = vmap(lambda a: (a * 2, a.sum()), out_dims=(1, 0))(A)
    close(first, (A * 2).T)
    close(second, A.sum(1))
    close(vmap(lambda a: rlpipe.ones(2))(A), rlpipe.ones(4, 2))  # an output independent of the batch
    close(vmap(lambda a: a * 2, chunk_size=3)(A), A * 2)


def test_nested_vmap_equals_a_double_loop():
    m = rlpipe.randn(3, 4, 5)
    out = vmap(vmap(lambda v, c: (v * c).sum() + v.max(), in_dims=(0, None)), in_dims=(0, None))(m, C)
    close(out, rlpipe.stack([rlpipe.stack([(m[i, j] * C).sum() + m[i, j].max() for j in range(4)])
                             for i in range(3)]))
    out = vmap(lambda row: vmap(lambda v: v @ row)(m[0]))(A)  # the inner one maps an unbatched tensor
    close(out, A @ m[0].T)
    r = rlpipe.randn(3, 4)
    out = vmap(lambda a: vmap(lambda b: a + b)(r), in_dims=1)(A)  # the inner one closes over an outer
    close(out, A.T.unsqueeze(1) + r.unsqueeze(0))


def test_vmap_gradients_equal_the_loops():
    a1, a2 = A.clone().requires_grad_(), A.clone().requires_grad_()
    f = lambda a: (rlpipe.tanh(a @ rlpipe.ones(5, 3)) ** 2).sum()  # noqa: E731
    vmap(f)(a1).sum().backward()
    loop(f, a2).sum().backward()
    close(a1.grad, a2.grad)


def test_vmap_ops_without_a_rule_raise_naming_the_op():
    with pytest.raises(TypeError, match="no batching rule for 'sort'"):
        vmap(lambda a: rlpipe.sort(a))(A)
    with pytest.raises(RuntimeError, match="no batching rule for 'Tensor.median'"):
        vmap(lambda a: a.median())(A)
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: a if a.sum() > 0 else -a)(A)


def test_vmap_argument_errors():
    with pytest.raises(ValueError, match="same size in the mapped dimension, got sizes \\[4, 3\\]"):
        vmap(lambda a, b: a)(A, B3[:3])
    with pytest.raises(ValueError, match="input is of type int"):
        vmap(lambda a, b: a)(A, 1)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure"):
        vmap(lambda a: a, in_dims=(0, 0))(A)
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        vmap(lambda a: a, in_dims=2)(A)
    with pytest.raises(ValueError, match="At least one input must be mapped"):
        vmap(lambda a: a, in_dims=None)(A)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(lambda a: a, randomness="bad")


def test_vmap_randomness_modes():
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda t: t + rlpipe.randn(3))(rlpipe.zeros(4, 3))
    same = vmap(lambda t: t + rlpipe.randn(3), randomness="same")(rlpipe.zeros(4, 3))
    assert same.shape == (4, 3) and bool((same == same[0]).all())
    different = vmap(lambda t: t + rlpipe.randn_like(t), randomness="different")(rlpipe.zeros(4, 3))
    assert different.shape == (4, 3) and len({tuple(row) for row in different.tolist()}) == 4
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda t: t + rlpipe.randint(0, 5, (3,)))(rlpipe.zeros(4, 3))
    ints = vmap(lambda t: t + rlpipe.randint(0, 1000, (3,)), randomness="different")(rlpipe.zeros(4, 3,
                                                                                                   dtype=rlpipe.long))
    assert ints.dtype == rlpipe.int64 and len({tuple(row) for row in ints.tolist()}) == 4
    assert rlpipe.randn(2).shape == (2,)  # the hook is gone after the call
    rlpipe.manual_seed(3)
    sample = vmap(lambda m: Normal(m, 1.0).rsample(), randomness="different")(rlpipe.zeros(5, 2))
    assert sample.shape == (5, 2) and len({tuple(row) for row in sample.tolist()}) == 5


def critic():
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))


def test_ensemble_of_ten_critics_equals_a_loop_forward_and_backward():
    critics = [critic() for _ in range(10)]
    params = TensorDict.stack([TensorDict.from_module(m) for m in critics])
    obs = rlpipe.randn(32, 4)
    base = critic()
    values = vmap(lambda p, x: functional_call(base, p, (x,)), (0, None))(params, obs)
    close(values, rlpipe.stack([m(obs) for m in critics]))
    values.pow(2).mean().backward()  # the stacked parameters were computed from the critics' own
    grads = [m[2].weight.grad.clone() for m in critics]
    for m in critics:
        m.zero_grad()
    rlpipe.stack([m(obs) for m in critics]).pow(2).mean().backward()
    for m, g in zip(critics, grads):
        close(m[2].weight.grad, g)
    stacked = TensorDict.from_modules(*critics)
    with rlpipe.no_grad():
        close(vmap(lambda p, x: functional_call(base, p, (x,)), (0, None))(stacked, obs), values.detach())


def test_ensemble_through_stack_module_state():
    critics = [critic() for _ in range(4)]
    for m in critics:
        m.register_buffer("scale", rlpipe.rand(1) + 1)
    params, buffers = stack_module_state(critics)
    assert list(params) == [n for n, _ in critics[0].named_parameters()] and list(buffers) == ["scale"]
    assert params["0.weight"].shape == (4, 16, 4) and params["0.weight"].is_leaf and params["0.weight"].requires_grad
    assert not buffers["scale"].requires_grad
    obs = rlpipe.randn(6, 4)
    out = vmap(lambda p, b, x: functional_call(critics[0], (p, b), (x,)), (0, 0, None))(params, buffers, obs)
    close(out, rlpipe.stack([m(obs) for m in critics]).detach())
    out.sum().backward()
    assert params["4.bias"].grad.shape == (4, 1) and critics[0][4].bias.grad is None
    with pytest.raises(RuntimeError, match="same class"):
        stack_module_state([critic(), nn.Linear(4, 1)])
    with pytest.raises(RuntimeError, match="at least one model"):
        stack_module_state([])


def test_ensemble_through_to_module():
    critics = [critic() for _ in range(3)]
    params, base, obs = TensorDict.from_modules(*critics), critic(), rlpipe.randn(5, 4)

    def run(p, x):
        with p.to_module(base):
            return base(x)
    close(vmap(run, (0, None))(params, obs), rlpipe.stack([m(obs) for m in critics]).detach())
    assert base[0].weight.shape == (16, 4) and isinstance(base[0].weight, nn.Parameter)


# ---- grad / grad_and_value ------------------------------------------------------------------------

V = [0.3, -1.2, 2.0]


def finite_difference(f, x, eps=1e-3):
    x = x.double()
    rows = []
    for i in range(x.numel()):
        step = rlpipe.zeros_like(x)
        step[i] = eps
        rows.append((f(x + step) - f(x - step)) / (2 * eps))
    return rlpipe.stack(rows).float()


def test_grad_matches_torch_and_finite_differences():
    f = lambda v: (v.sin() * v ** 2).sum()  # noqa: E731
    v = rlpipe.tensor(V)
    g = grad(f)(v)
    close(g, rlpipe.tensor([0.26329243, 2.75868893, 1.97260225]))  # torch 2.13
    close(g, finite_difference(f, v), atol=1e-4)
    assert not v.requires_grad and v.grad is None


def test_grad_and_value_argnums_and_aux():
    v, c = rlpipe.tensor(V), rlpipe.tensor([1.0, 2.0, -1.0])
    (ga, gc), value = grad_and_value(lambda a, b: (a * b).pow(2).sum(), argnums=(0, 1))(v, c)
    close(ga, rlpipe.tensor([0.6, -9.6, 4.0]))  # torch 2.13
    close(gc, rlpipe.tensor([0.18, 5.76, -8.0]))
    assert abs(value.item() - 9.85) < 1e-5
    g, aux = grad(lambda a: ((a ** 3).sum(), a.mean()), has_aux=True)(v)
    close(g, rlpipe.tensor([0.27, 4.32, 12.0]))
    assert abs(aux.item() - 0.366667) < 1e-5
    tree = grad(lambda p: (p["w"] * p["b"][0]).sum())({"w": v, "b": [c]})
    close(tree["w"], c)
    close(tree["b"][0], v)


def test_grad_errors():
    v = rlpipe.tensor(V)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        grad(lambda a: a * 2)(v)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        grad(lambda a: a.sum(), has_aux=True)(v)
    with pytest.raises(RuntimeError, match="only 1 positional inputs"):
        grad(lambda a: a.sum(), argnums=1)(v)
    with pytest.raises(RuntimeError, match="floating point"):
        grad(lambda a: a.sum())(rlpipe.tensor([1, 2]))


def test_grad_of_a_functional_call_over_parameters():
    lin = nn.Linear(3, 2)
    x = rlpipe.tensor(X)
    params = {"weight": rlpipe.tensor(W), "bias": rlpipe.tensor([0.1, -0.2])}
    g = grad(lambda p: (functional_call(lin, p, (x,)) ** 2).sum())(params)
    close(g["weight"], rlpipe.tensor([[11.0, 17.5, 27.6], [2.25, -3.375, -2.7]]))  # torch 2.13
    close(g["bias"], rlpipe.tensor([7.4, -4.05]))


def test_vmap_of_grad_gives_per_sample_gradients():
    rlpipe.manual_seed(1)
    w, xs, grid = rlpipe.randn(3), rlpipe.randn(5, 3), rlpipe.randn(4, 5, 3)
    f = lambda w, x: rlpipe.tanh(w * x).sum() ** 2  # noqa: E731
    close(vmap(grad(f), in_dims=(None, 0))(w, xs), rlpipe.stack([grad(f)(w, x) for x in xs]))
    close(vmap(grad(f, argnums=1), in_dims=(None, 0))(w, xs), rlpipe.stack([grad(f, argnums=1)(w, x) for x in xs]))
    g, value = vmap(grad_and_value(f))(xs, xs)
    close(g, rlpipe.stack([grad(f)(x, x) for x in xs]))
    close(value, rlpipe.stack([f(x, x) for x in xs]))
    nested = vmap(vmap(grad(f), in_dims=(None, 0)), in_dims=(None, 0))(w, grid)
    close(nested, rlpipe.stack([rlpipe.stack([grad(f)(w, x) for x in row]) for row in grid]))


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_vmap_ensemble_and_grad_on_cuda():
    critics = [critic().to("cuda") for _ in range(3)]
    params, base = TensorDict.from_modules(*critics), critic().to("cuda")
    obs = rlpipe.randn(6, 4, device="cuda")
    values = vmap(lambda p, x: functional_call(base, p, (x,)), (0, None), randomness="different")(params, obs)
    assert values.device == rlpipe.device("cuda:0")
    close(values.cpu(), rlpipe.stack([m(obs) for m in critics]).detach().cpu())
    noise = vmap(lambda x: x + rlpipe.randn_like(x), randomness="different")(obs)
    assert noise.device == rlpipe.device("cuda:0") and noise.shape == (6, 4)
    f = lambda w, x: (w * x).sum() ** 2  # noqa: E731
    w = rlpipe.ones(4, device="cuda")
    close(vmap(grad(f), in_dims=(None, 0))(w, obs).cpu(), rlpipe.stack([grad(f)(w, x).cpu() for x in obs]))


def test_a_failing_vmapped_call_leaves_nothing_behind():
    net = critic()
    params = TensorDict.from_modules(critic(), critic())
    own = net[0].weight

    def failing(p, x):
        functional_call(net, p, (x,))
        return rlpipe.sort(functional_call(net, p, (x,)))
    with pytest.raises(TypeError, match="no batching rule for 'sort'"):
        vmap(failing, (0, None))(params, rlpipe.randn(3, 4))
    assert net[0].weight is own
    assert rlpipe.randn(2).shape == (2,)  # no randomness mode left behind
    close(vmap(lambda a: a * 2)(A), A * 2)  # nor a vmap level
