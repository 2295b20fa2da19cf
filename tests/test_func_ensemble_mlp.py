"""vmap over functional_call of a plain MLP (EnsembleMLP, one node for the whole Sequential): values
and every gradient equal the members run one by one (each its own slow path), finite differences
in float64, and anything the fused node does not cover falls back to the per-layer rules."""
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.autograd import gradcheck
from rlpipe.func import functional_call, vmap

MEMBERS = 4
NETS = {
    "relu": lambda: nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 1)),
    "relu_inplace": lambda: nn.Sequential(nn.Linear(3, 5), nn.ReLU(inplace=True), nn.Linear(5, 1)),
    "tanh_no_bias": lambda: nn.Sequential(nn.Linear(3, 5, bias=False), nn.Tanh(), nn.Linear(5, 2)),
    "linear_linear": lambda: nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2), nn.Tanh()),
    "one_layer": lambda: nn.Sequential(nn.Linear(3, 4), nn.ReLU()),
    "hidden_no_bias": lambda: nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 4, bias=False), nn.ReLU(),
                                            nn.Linear(4, 2)),
    "one_output": lambda: nn.Sequential(nn.Linear(3, 1)),  # (a batched input's gradient: an outer product)
}
INPUTS = [((7, 3), None), ((2, 7, 3), None), ((3,), None),
          ((MEMBERS, 7, 3), 0), ((MEMBERS, 3), 0), ((7, MEMBERS, 3), 1)]


def stacked_params(base):
    """float64 leaves ``[MEMBERS, ...]`` for each of ``base``'s parameters."""
    return {name: rlpipe.randn(MEMBERS, *p.shape, dtype=rlpipe.float64, requires_grad=True)
            for name, p in base.named_parameters()}


def ensemble(base, x_dim, **options):
    return vmap(lambda p, x: functional_call(base, p, (x,)), (0, x_dim), **options)


def loop(base, params, x, x_dim):
    """Each member on its own: functional_call with plain tensors (the per-layer path)."""
    return rlpipe.stack([functional_call(base, {n: p[e] for n, p in params.items()},
                                         (x if x_dim is None else x.select(x_dim, e),)) for e in range(MEMBERS)])


def grads_of(out, tensors):
    return rlpipe.autograd.grad(out.sin().sum(), tensors, allow_unused=True)


@pytest.mark.parametrize("net", NETS)
@pytest.mark.parametrize("x_shape, x_dim", INPUTS)
def test_fused_mlp_equals_the_loop_values_and_gradients(net, x_shape, x_dim):
    rlpipe.manual_seed(0)
    base = NETS[net]().double()
    params, x = stacked_params(base), rlpipe.randn(*x_shape, dtype=rlpipe.float64, requires_grad=True)
    out, truth = ensemble(base, x_dim)(params, x), loop(base, params, x, x_dim)
    assert out.grad_fn.name() == "EnsembleMLPBackward0"
    assert out.shape == truth.shape and rlpipe.allclose(out, truth, atol=1e-12)
    wanted = [x, *params.values()]
    for got, expected in zip(grads_of(out, wanted), grads_of(truth, wanted)):
        assert got.shape == expected.shape and rlpipe.allclose(got, expected, atol=1e-12)
    assert not any("forward" in m.__dict__ for m in base.modules())  # the module's own forward is back


@pytest.mark.parametrize("x_dim", [None, 0])
def test_a_wide_relu_layer_equals_the_loop_with_nan_and_infinite_inputs(x_dim):
    # E * rows * width = 4 * 5 * 2000: ReLU runs over whole rows of zeros and a shorter rest; x's NaN and infinities
    # reach it as NaN, +-inf and zeros, the gradient passing at NaN only where torch's formula lets it
    rlpipe.manual_seed(10)
    base = nn.Sequential(nn.Linear(3, 2000), nn.ReLU(), nn.Linear(2000, 1)).double()
    params = stacked_params(base)
    x = rlpipe.randn(*((MEMBERS,) if x_dim == 0 else ()), 5, 3, dtype=rlpipe.float64)
    x[..., 1, 0], x[..., 2, 1], x[..., 3, 2] = float("nan"), float("inf"), -float("inf")
    out, truth = ensemble(base, x_dim)(params, x), loop(base, params, x, x_dim)
    assert out.grad_fn.name() == "EnsembleMLPBackward0"
    assert rlpipe.allclose(out, truth, atol=1e-9, equal_nan=True)
    assert out.isnan().sum().item() == truth.isnan().sum().item() > 0
    wanted = list(params.values())
    for got, expected in zip(grads_of(out.nan_to_num(), wanted), grads_of(truth.nan_to_num(), wanted)):
        assert rlpipe.allclose(got, expected, atol=1e-9, equal_nan=True)


@pytest.mark.parametrize("x_dim", [None, 0])
def test_fused_mlp_gradcheck(x_dim):
    rlpipe.manual_seed(1)
    base = NETS["relu"]().double()
    names, params = zip(*stacked_params(base).items())
    x = rlpipe.randn(*((MEMBERS,) if x_dim == 0 else ()), 6, 3, dtype=rlpipe.float64, requires_grad=True)
    assert gradcheck(lambda x, *p: ensemble(base, x_dim)(dict(zip(names, p)), x), (x, *params))


def test_fused_mlp_without_grad_records_nothing_and_equals_the_loop():
    rlpipe.manual_seed(2)
    base = NETS["relu"]()
    params, x = {n: p.float().detach() for n, p in stacked_params(base).items()}, rlpipe.randn(9, 3)
    with rlpipe.no_grad():
        out = ensemble(base, None)(params, x)
    assert out.grad_fn is None and not out.requires_grad
    assert rlpipe.allclose(out, loop(base, params, x, None), atol=1e-6)


@pytest.mark.parametrize("out_dims", [0, 1, -1])
@pytest.mark.parametrize("randomness", ["error", "different", "same"])
def test_fused_mlp_out_dims_and_randomness_modes(out_dims, randomness):
    rlpipe.manual_seed(3)
    base = NETS["tanh_no_bias"]().double()
    params, x = stacked_params(base), rlpipe.randn(7, 3, dtype=rlpipe.float64)
    out = vmap(lambda p, x: functional_call(base, p, (x,)), (0, None), out_dims=out_dims,
               randomness=randomness)(params, x)
    node = out.grad_fn if out_dims == 0 else out.grad_fn.next_functions[0][0]  # (past the movedim)
    assert node.name() == "EnsembleMLPBackward0"
    assert rlpipe.allclose(out, loop(base, params, x, None).movedim(0, out_dims), atol=1e-12)


def test_chunked_vmap_fuses_each_chunk():
    rlpipe.manual_seed(4)
    base = NETS["relu"]().double()
    params, x = stacked_params(base), rlpipe.randn(7, 3, dtype=rlpipe.float64)
    out = vmap(lambda p, x: functional_call(base, p, (x,)), (0, None), chunk_size=3)(params, x)
    assert rlpipe.allclose(out, loop(base, params, x, None), atol=1e-12)


FALLBACKS = {  # modules the fused node does not cover: the per-layer rules run them
    "sigmoid": lambda: nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 2)),
    "two_activations": lambda: nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Tanh(), nn.Linear(5, 2)),
    "activation_first": lambda: nn.Sequential(nn.Tanh(), nn.Linear(3, 2)),
    "identity": lambda: nn.Sequential(nn.Linear(3, 5), nn.Identity(), nn.Linear(5, 2)),
}


@pytest.mark.parametrize("net", FALLBACKS)
def test_other_modules_fall_back_to_the_per_layer_rules(net):
    rlpipe.manual_seed(5)
    base = FALLBACKS[net]().double()
    params, x = stacked_params(base), rlpipe.randn(7, 3, dtype=rlpipe.float64, requires_grad=True)
    out, truth = ensemble(base, None)(params, x), loop(base, params, x, None)
    assert out.grad_fn.name() != "EnsembleMLPBackward0"
    assert rlpipe.allclose(out, truth, atol=1e-12)
    wanted = [x, *params.values()]
    for got, expected in zip(grads_of(out, wanted), grads_of(truth, wanted)):
        assert rlpipe.allclose(got, expected, atol=1e-12)


def test_a_hook_on_a_layer_falls_back_and_runs():
    base = NETS["relu"]().double()
    seen = []
    base[1].register_forward_hook(lambda module, args, out: seen.append(out.shape))
    out = ensemble(base, None)(stacked_params(base), rlpipe.randn(7, 3, dtype=rlpipe.float64))
    assert out.grad_fn.name() != "EnsembleMLPBackward0" and seen == [(7, 5)]


def test_unbatched_parameters_and_nested_vmap_take_the_usual_path():
    rlpipe.manual_seed(6)
    base = NETS["relu"]().double()
    params, x = stacked_params(base), rlpipe.randn(5, 7, 3, dtype=rlpipe.float64)
    # the parameters mapped by the outer vmap, the input by the inner one: not an ensemble at the inner level
    inner = vmap(lambda p, x: vmap(lambda x: functional_call(base, p, (x,)))(x), (0, None))(params, x)
    truth = rlpipe.stack([rlpipe.stack([functional_call(base, {n: p[e] for n, p in params.items()}, (x[i],))
                                        for i in range(5)]) for e in range(MEMBERS)])
    assert rlpipe.allclose(inner, truth, atol=1e-12)
    shared = {n: p[0] for n, p in params.items()}  # a batched input with shared parameters
    out = vmap(lambda x: functional_call(base, shared, (x,)))(x)
    assert out.grad_fn.name() != "EnsembleMLPBackward0"
    assert rlpipe.allclose(out, functional_call(base, shared, (x,)), atol=1e-12)


def test_a_wrong_input_raises_the_usual_error_and_leaves_the_module_usable():
    base = NETS["relu"]().double()
    params = stacked_params(base)
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        ensemble(base, None)(params, rlpipe.randn(7, 4, dtype=rlpipe.float64))
    assert not any("forward" in m.__dict__ for m in base.modules())
    assert ensemble(base, None)(params, rlpipe.randn(7, 3, dtype=rlpipe.float64)).shape == (MEMBERS, 7, 1)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_fused_mlp_on_cuda_equals_the_cpu():
    rlpipe.manual_seed(7)
    base = NETS["relu"]()
    params, x = {n: p.float().detach().requires_grad_() for n, p in stacked_params(base).items()}, rlpipe.randn(7, 3)
    out = ensemble(base, None)(params, x)
    gpu_params = {n: p.detach().to("cuda").requires_grad_() for n, p in params.items()}
    gpu_out = ensemble(base.to("cuda"), None)(gpu_params, x.to("cuda"))
    assert gpu_out.grad_fn.name() == "EnsembleMLPBackward0" and gpu_out.device == rlpipe.device("cuda:0")
    assert rlpipe.allclose(gpu_out.cpu(), out, atol=1e-5)
    for got, expected in zip(grads_of(gpu_out, list(gpu_params.values())), grads_of(out, list(params.values()))):
        assert rlpipe.allclose(got.cpu(), expected, atol=1e-5)


@pytest.mark.parametrize("out_features", [2, (2, 3)])
def test_torchrl_mlp_fuses_between_its_input_and_output_adapters(out_features):
    from rlpipe.modules import MLP
    rlpipe.manual_seed(8)
    base = MLP(in_features=5, out_features=out_features, num_cells=[6, 4]).double()
    params = stacked_params(base)
    obs, act = rlpipe.randn(7, 3, dtype=rlpipe.float64), rlpipe.randn(7, 2, dtype=rlpipe.float64)
    out = vmap(lambda p, o, a: functional_call(base, p, (o, a)), (0, None, None))(params, obs, act)
    truth = rlpipe.stack([functional_call(base, {n: p[e] for n, p in params.items()}, (obs, act))
                          for e in range(MEMBERS)])
    node = out.grad_fn if isinstance(out_features, int) else out.grad_fn.next_functions[0][0]  # (past the view)
    assert node.name() == "EnsembleMLPBackward0"
    assert out.shape == truth.shape and rlpipe.allclose(out, truth, atol=1e-12)
    for got, expected in zip(grads_of(out, list(params.values())), grads_of(truth, list(params.values()))):
        assert rlpipe.allclose(got, expected, atol=1e-12)


def test_a_subclass_with_its_own_forward_falls_back():
    from rlpipe.modules import MLP

    class Doubled(MLP):
        def forward(self, *inputs):
            return super().forward(*inputs) * 2

    base = Doubled(in_features=3, out_features=2, num_cells=[4]).double()
    params, x = stacked_params(base), rlpipe.randn(7, 3, dtype=rlpipe.float64)
    out = ensemble(base, None)(params, x)
    assert "EnsembleMLP" not in out.grad_fn.next_functions[0][0].name()
    assert rlpipe.allclose(out, loop(base, params, x, None), atol=1e-12)


def test_named_submodules_walks_as_named_modules():
    from rlpipe.func._submodules import named_submodules
    shared = nn.Linear(2, 2)
    tree = nn.Sequential(shared, nn.Sequential(nn.ReLU(), shared), nn.ModuleList([nn.Tanh(), None]))
    for remove_duplicate in (True, False):
        got = [(name, id(m)) for name, m in named_submodules(tree, remove_duplicate)]
        assert got == [(name, id(m)) for name, m in tree.named_modules(remove_duplicate=remove_duplicate)]


@pytest.mark.parametrize("trained", [("4.weight",), ("0.bias",), ("2.weight", "4.bias")])
def test_gradients_of_some_parameters_only_leave_the_incoming_gradient_alone(trained):
    rlpipe.manual_seed(9)
    base = NETS["relu"]().double()
    params = {n: p.detach().requires_grad_(n in trained) for n, p in stacked_params(base).items()}
    x = rlpipe.randn(7, 3, dtype=rlpipe.float64)
    out, truth = ensemble(base, None)(params, x), loop(base, params, x, None)
    incoming = rlpipe.randn(*out.shape, dtype=rlpipe.float64)
    kept = incoming.clone()
    wanted = [params[n] for n in trained]
    got = rlpipe.autograd.grad(out, wanted, incoming)
    assert rlpipe.equal(incoming, kept)  # the backward wrote nothing into the gradient it was handed
    for g, expected in zip(got, rlpipe.autograd.grad(truth, wanted, incoming)):
        assert rlpipe.allclose(g, expected, atol=1e-12)


def test_a_type_registered_after_being_seen_as_a_leaf_becomes_a_node():
    from rlpipe.utils import _pytree

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    pair = Pair(1, 2)
    assert _pytree.tree_flatten([pair])[0] == [pair]  # a leaf (and remembered as one)
    _pytree.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda children, _: Pair(*children))
    leaves, spec = _pytree.tree_flatten([pair])
    assert leaves == [1, 2] and _pytree.tree_unflatten([3, 4], spec)[0].b == 4


def test_a_plain_mlp_given_all_its_parameters_runs_with_nothing_swapped_in(monkeypatch):
    import rlpipe.func._functional_call as fc

    def refuse(*args, **kwargs):
        raise AssertionError("reparametrized")
    rlpipe.manual_seed(9)
    base = NETS["relu"]().double()
    params, x = stacked_params(base), rlpipe.randn(7, 3, dtype=rlpipe.float64, requires_grad=True)
    truth = loop(base, params, x, None)
    monkeypatch.setattr(fc, "reparametrized", refuse)
    out = ensemble(base, None)(params, x)
    assert out.grad_fn.name() == "EnsembleMLPBackward0" and rlpipe.allclose(out, truth, atol=1e-12)
    with pytest.raises(AssertionError, match="reparametrized"):  # only some parameters given: swapped in
        ensemble(base, None)({n: p for n, p in params.items() if n != "0.bias"}, x)


def some_parameters(base, params):
    """All but the first layer's bias, which the module's own (unbatched) one stands in for."""
    return {n: p for n, p in params.items() if n != "0.bias"}


def a_root_hook(base, params):
    base.register_forward_hook(lambda module, args, out: out * 2)
    return params


@pytest.mark.parametrize("case", [some_parameters, a_root_hook])
def test_the_direct_path_falls_back_where_the_module_or_values_are_not_exactly_an_mlp(case):
    rlpipe.manual_seed(10)
    base = NETS["relu"]().double()
    params = case(base, stacked_params(base))
    x = rlpipe.randn(7, 3, dtype=rlpipe.float64, requires_grad=True)
    out = ensemble(base, None)(params, x)
    truth = rlpipe.stack([functional_call(base, {n: p[e] for n, p in params.items()}, (x,)) for e in range(MEMBERS)])
    assert rlpipe.allclose(out, truth, atol=1e-12)
    wanted = [x, *params.values()]
    for got, expected in zip(grads_of(out, wanted), grads_of(truth, wanted)):
        assert rlpipe.allclose(got, expected, atol=1e-12)


def test_tied_weights_and_strict_keep_their_errors_on_an_ensemble():
    base = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3))
    base[2].weight = base[0].weight
    params = stacked_params(base.double())
    params["2.weight"] = rlpipe.randn(MEMBERS, 3, 3, dtype=rlpipe.float64)
    with pytest.raises(ValueError, match=r"multiple values for keys \['0.weight', '2.weight'\]"):
        ensemble(base, None)(params, rlpipe.randn(7, 3, dtype=rlpipe.float64))
    plain = NETS["relu"]().double()
    extra = {**stacked_params(plain), "scale": rlpipe.ones(MEMBERS, dtype=rlpipe.float64)}
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'scale'"):
        vmap(lambda p, x: functional_call(plain, p, (x,), strict=True), (0, None))(
            extra, rlpipe.randn(7, 3, dtype=rlpipe.float64))
    out = ensemble(plain, None)(stacked_params(plain), rlpipe.randn(7, 3, dtype=rlpipe.float64))
    assert out.shape == (MEMBERS, 7, 1)
