"""tensordict's EnsembleModule (critics with stacked parameters run under vmap) against tensordict
0.14.3 on the same weights (tests/fixtures/ensemble, recorded by make_ensemble_cases.py), and a
ClipPPOLoss with such a critic failing as torchrl 0.14.1's does."""
import os

import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.modules import IndependentNormal, ProbabilisticActor
from rlpipe.objectives import ClipPPOLoss
from rlpipe.tensordict import TensorDict, TensorDictModule
from rlpipe.tensordict.nn import EnsembleModule, NormalParamExtractor

REF = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ensemble", "ensemble_cases.npz"))
OBS, CRITICS, BATCH = 3, 3, 5


def critic():
    return TensorDictModule(nn.Sequential(nn.Linear(OBS, 8), nn.Tanh(), nn.Linear(8, 1)), ["observation"],
                            ["state_value"])


@pytest.mark.parametrize("name, expand_input", [("expand_input", True), ("stacked_input", False)])
def test_outputs_and_gradients_match_tensordict(name, expand_input):
    ensemble = EnsembleModule(critic(), num_copies=CRITICS, expand_input=expand_input)
    params = ensemble.params_td.flatten_keys(".")
    assert sorted(params.keys()) == sorted(k.split("/")[-1] for k in REF.files if k.startswith(f"{name}/param/"))
    with rlpipe.no_grad():
        for key, p in params.items():
            p.copy_(rlpipe.tensor(REF[f"{name}/param/{key}"]))
    obs = rlpipe.tensor(REF[f"{name}/in/observation"], requires_grad=True)
    out = ensemble(TensorDict({"observation": obs}, batch_size=obs.shape[:-1]))
    assert out.batch_size == (CRITICS, BATCH) and out["observation"].shape == (CRITICS, BATCH, OBS)
    value = out["state_value"]
    np.testing.assert_allclose(value.detach().numpy(), REF[f"{name}/out/state_value"], rtol=1e-5, atol=1e-6)
    keys = list(params.keys())
    grads = rlpipe.autograd.grad(value.pow(2).sum(), [params[k] for k in keys] + [obs])
    for key, g in zip(keys, grads):
        np.testing.assert_allclose(g.numpy(), REF[f"{name}/grad/param/{key}"], rtol=1e-4, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(grads[-1].numpy(), REF[f"{name}/grad/observation"], rtol=1e-4, atol=1e-5)


def test_copies_are_trainable_parameters_initialised_apart():
    base = critic()
    ensemble = EnsembleModule(base, num_copies=CRITICS)
    stacked = [p for n, p in ensemble.named_parameters() if n.startswith("ensemble_parameters.")]
    assert [tuple(p.shape) for p in stacked] == [(3, 8, 3), (3, 8), (3, 1, 8), (3, 1)]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in stacked)
    weight = ensemble.params_td["module", "0", "weight"]
    assert not rlpipe.allclose(weight[0], weight[1]) and not rlpipe.allclose(weight[0], base.module[0].weight)
    obs = rlpipe.randn(BATCH, OBS)
    out = ensemble(TensorDict({"observation": obs}, [BATCH]))["state_value"]
    for i in range(CRITICS):  # member i is the base module with copy i's parameters
        with rlpipe.no_grad(), ensemble.params_td[i].to_module(base):
            expected = base(TensorDict({"observation": obs}, [BATCH]))["state_value"]
        assert rlpipe.allclose(out[i].detach(), expected, atol=1e-6)
    optimizer = rlpipe.optim.SGD(ensemble.parameters(), lr=0.1)
    out.sum().backward()
    before = weight.detach().clone()
    optimizer.step()
    assert not rlpipe.allclose(ensemble.params_td["module", "0", "weight"], before)
    with pytest.raises(ValueError, match="num_copies must be a positive integer, got 0"):
        EnsembleModule(critic(), num_copies=0)


def test_clip_ppo_loss_with_an_ensemble_critic_fails_as_in_torchrl():
    actor = ProbabilisticActor(TensorDictModule(nn.Sequential(nn.Linear(OBS, 2), NormalParamExtractor()),
                                                ["observation"], ["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=IndependentNormal, return_log_prob=True)
    loss = ClipPPOLoss(actor, EnsembleModule(critic(), num_copies=CRITICS))
    td = TensorDict({"observation": rlpipe.randn(BATCH, OBS), "action": rlpipe.randn(BATCH, 1),
                     "action_log_prob": rlpipe.randn(BATCH), "advantage": rlpipe.randn(BATCH, 1),
                     "value_target": rlpipe.randn(BATCH, 1)}, batch_size=[BATCH])
    expected = str(REF["ppo_error"]).replace("torch.Size", "rlpipe.Size")
    with pytest.raises(RuntimeError) as info:
        loss(td)
    assert str(info.value) == expected
