"""SACLoss / DiscreteSACLoss run their critics under vmap (stacked parameters, one batched computation),
as torchrl 0.14 does: on every case recorded from torchrl (tests/fixtures/sac) the vmapped loss equals
the loop (``deactivate_vmap=True``), outputs and gradients; test_sac_loss.py checks both against torchrl."""
import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.objectives import SACLoss
from test_sac_loss import ALL_CASES, _actor, _case, _data, _q, _run


def _graph_names(tensor):
    """The names of every node in ``tensor``'s backward graph."""
    seen, todo, names = set(), [tensor.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.name())
        todo.extend(n for n, _ in getattr(node, "next_functions", ()))
    return names


def _outputs_and_grads(loss, td, eps):
    out = _run(loss, td, eps)
    params = list(loss.parameters())
    grads = {}
    for term in [k for k in out.keys() if k.startswith("loss_") and out[k].requires_grad]:
        found = rlpipe.autograd.grad(out[term].sum(), params, retain_graph=True, allow_unused=True)
        grads[term] = [None if g is None else g.numpy() for g in found]
    return out, grads, td["td_error"]


@pytest.mark.parametrize("name", ALL_CASES)
def test_vmapped_critics_equal_the_loop(name):
    loss, td, eps = _case(name)
    looped, td_loop, _ = _case(name)
    looped.deactivate_vmap = True
    looped._make_vmap()
    assert loss.qvalue_network.use_vmap and not looped.qvalue_network.use_vmap
    out, grads, priority = _outputs_and_grads(loss, td, eps)
    out_loop, grads_loop, priority_loop = _outputs_and_grads(looped, td_loop, eps)
    batched = {"EnsembleLinearBackward0", "EnsembleMLPBackward0"}  # a layer, or a whole MLP, for all members
    assert batched & _graph_names(out["loss_qvalue"])  # the critics ran as one batch
    assert not batched & _graph_names(out_loop["loss_qvalue"])
    for key in out.keys():
        np.testing.assert_allclose(out[key].detach().numpy(), out_loop[key].detach().numpy(), rtol=1e-6, atol=1e-7,
                                   err_msg=key)
    np.testing.assert_allclose(priority.numpy(), priority_loop.numpy(), rtol=1e-6, atol=1e-7)
    assert grads.keys() == grads_loop.keys()
    for term in grads:
        for got, expected in zip(grads[term], grads_loop[term]):
            assert (got is None) == (expected is None), term
            if got is not None:
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7, err_msg=term)


def test_deactivate_vmap_argument_and_vmap_randomness():
    loss = SACLoss(_actor(), _q(), num_qvalue_nets=2, deactivate_vmap=True)
    assert not loss.qvalue_network.use_vmap and not loss.target_qvalue_network.use_vmap
    assert loss.vmap_randomness == "error" and loss.qvalue_network.randomness == "error"
    loss.set_vmap_randomness("same")
    assert loss.vmap_randomness == "same" and loss.target_qvalue_network.randomness == "same"
    with pytest.raises(ValueError, match="should be one of 'error', 'same' or 'different', got 'other'"):
        loss.set_vmap_randomness("other")
    assert loss.vmap_randomness == "same"  # unchanged by the failed call


class _DropoutCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, observation, action):
        return self.net(rlpipe.cat([observation, action], -1))


def _dropout_q():
    from rlpipe.modules import ValueOperator
    return ValueOperator(_DropoutCritic(), in_keys=["observation", "action"])


def test_a_critic_with_dropout_runs_under_vmap_with_different_randomness():
    rlpipe.manual_seed(0)
    loss = SACLoss(_actor(), _dropout_q(), num_qvalue_nets=3)
    assert loss.vmap_randomness == "different" and loss.qvalue_network.randomness == "different"
    values = loss.qvalue_network.values(_data("v2", (6,)))
    assert values.shape == (3, 6, 1)
    loss.set_vmap_randomness("error")
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        loss.qvalue_network.values(_data("v2", (6,)))
    loss.qvalue_network.eval()  # no draws once dropout is off
    assert loss.qvalue_network.values(_data("v2", (6,))).shape == (3, 6, 1)


class _TiedCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(5, 5)
        self.net = nn.Sequential(nn.Linear(5, 5), nn.Tanh(), self.inner, nn.Tanh(), self.inner, nn.Linear(5, 1))

    def forward(self, observation, action):
        return self.net(rlpipe.cat([observation, action], -1))


def test_critics_with_tied_weights_under_vmap_equal_the_loop():
    from rlpipe.modules import ValueOperator
    rlpipe.manual_seed(3)
    loss = SACLoss(_actor(), ValueOperator(_TiedCritic(), in_keys=["observation", "action"]), num_qvalue_nets=2)
    td = _data("v2", (6,))
    ensemble = loss.qvalue_network
    results = []
    for use_vmap in (True, False):
        ensemble.use_vmap = use_vmap
        values = ensemble.values(td)
        grads = rlpipe.autograd.grad(values.pow(2).sum(), list(ensemble.parameters()))
        results.append((values.detach(), grads))
    np.testing.assert_allclose(results[0][0].numpy(), results[1][0].numpy(), rtol=1e-6, atol=1e-7)
    for got, expected in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-7)
