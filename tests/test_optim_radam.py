"""optim.RAdam against trajectories measured on torch 2.13 (float64, pasted here), and its interface."""
import numpy as np
import pytest

import rlpipe as r
from rlpipe import optim

TARGET, WEIGHT = [0.3, 0.1, -0.2], [1.0, 3.0, 0.5]

TORCH_TRAJECTORIES = [  # torch.optim.RAdam([p], lr=0.1, **options), 8 steps on the loss of _loss
    ({}, [
        [0.86, -0.7399999999999998, 0.43], [0.7294736842105263, 0.1168421052631583, 0.3584210526315789],
        [0.6080365119440667, 0.6463973587104296, 0.28526898426879],
        [0.49527333498951365, 0.9179143252505972, 0.21055401097314558],
        [0.39074158338639287, 0.9935226298068022, 0.1342907414694305],
        [0.3883397182787031, 0.9932643939010747, 0.13168611614610104],
        [0.385312007952349, 0.992419060728987, 0.12836612381708853],
        [0.3817129158012948, 0.990947029211977, 0.1244113860493845]]),
    (dict(weight_decay=0.1), [
        [0.85, -0.7199999999999998, 0.425], [0.7113157894736841, 0.1437894736842108, 0.34907894736842104],
        [0.5834463002524761, 0.6712316954748497, 0.27224363954165853],
        [0.46585473082428586, 0.9349654101325147, 0.19450356506097924],
        [0.357972832943821, 0.9999096898951835, 0.11587088290868545],
        [0.35560798256321924, 0.999612574093605, 0.11327498807383836],
        [0.3526368111588172, 0.9987251276262477, 0.10996668917422835],
        [0.34911054310413436, 0.9972103279508558, 0.10602525254495976]]),
    (dict(weight_decay=0.1, decoupled_weight_decay=True), [
        [0.85, -0.7199999999999998, 0.425], [0.7120263157894737, 0.13772631578947392, 0.3494342105263158],
        [0.5854207156729463, 0.6572952557778211, 0.2732854695086424],
        [0.4695028621141539, 0.914232229363396, 0.19653905683209838],
        [0.3635750029389707, 0.9751859327561322, 0.11918276763086996],
        [0.3575653204486862, 0.9651669152927741, 0.11538812610781703],
        [0.3510040840173461, 0.9546722100029397, 0.1109164982249461],
        [0.34394943083413454, 0.9436704374635009, 0.10585500424688782]]),
    (dict(maximize=True, betas=(0.8, 0.9), eps=1e-3), [
        [1.14, -3.2600000000000002, 0.57], [1.301111111111111, -4.934444444444445, 0.6494444444444444],
        [1.486448087431694, -7.152422586520949, 0.7393397085610199],
        [1.699546798564525, -10.082960149273626, 0.8407656998928823],
        [1.9444192628446886, -13.947350200963566, 0.9548792741190288],
        [1.9702480317742688, -13.972129685580482, 0.9807781855015434],
        [2.0039293685928348, -14.00486476437574, 1.0145176912940461],
        [2.0442452625489165, -14.044411582828447, 1.0548917835890397]]),
]


def _loss(p, k):
    target, weight = (r.tensor(v, dtype=p.dtype, device=p.device) for v in (TARGET, WEIGHT))
    return ((p - target) ** 2 * weight).sum() + 0.1 * k * p.sum()


def _trajectory(options, dtype=r.float64, device="cpu", steps=8):
    p = r.tensor([1.0, -2.0, 0.5], dtype=dtype, device=device, requires_grad=True)
    opt = optim.RAdam([p], lr=0.1, **options)
    out = []
    for k in range(steps):
        opt.zero_grad()
        _loss(p, k).backward()
        opt.step()
        out.append(p.detach().cpu().numpy().copy())
    return np.array(out), opt


@pytest.mark.parametrize("options, expected", TORCH_TRAJECTORIES, ids=lambda v: str(v)[:40])
def test_trajectory_matches_torch(options, expected):
    np.testing.assert_allclose(_trajectory(options)[0], expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("options, expected", TORCH_TRAJECTORIES[:2], ids=["plain", "weight_decay"])
def test_trajectory_float32(options, expected):
    np.testing.assert_allclose(_trajectory(options, r.float32)[0], expected, rtol=2e-5, atol=2e-6)


def test_defaults_and_state_like_torch():
    p = r.zeros(2, requires_grad=True)
    opt = optim.RAdam([p])
    assert opt.defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False,
                                foreach=None, decoupled_weight_decay=False)
    _, opt = _trajectory({}, steps=2)
    state = next(iter(opt.state.values()))
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "step"] and float(state["step"]) == 2.0


def test_state_dict_round_trip_continues_identically():
    full, _ = _trajectory({}, steps=8)
    p = r.tensor([1.0, -2.0, 0.5], dtype=r.float64, requires_grad=True)
    opt = optim.RAdam([p], lr=0.1)
    for k in range(4):
        opt.zero_grad()
        _loss(p, k).backward()
        opt.step()
    q = p.detach().clone().requires_grad_()
    resumed = optim.RAdam([q], lr=0.1)
    resumed.load_state_dict(opt.state_dict())
    for k in range(4, 8):
        resumed.zero_grad()
        _loss(q, k).backward()
        resumed.step()
    np.testing.assert_array_equal(q.detach().numpy(), full[-1])


@pytest.mark.parametrize("options, message", [
    (dict(lr=-1.0), "Invalid learning rate: -1.0"),
    (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
    (dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
    (dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
])
def test_invalid_hyperparameters(options, message):
    with pytest.raises(ValueError) as e:
        optim.RAdam([r.zeros(1, requires_grad=True)], **options)
    assert str(e.value) == message


@pytest.mark.cuda
def test_cuda_trajectory_matches_cpu():
    if not r.cuda.is_available():
        pytest.skip("CUDA unavailable")
    for options, expected in TORCH_TRAJECTORIES:
        np.testing.assert_allclose(_trajectory(options, device="cuda")[0], expected, rtol=1e-12, atol=1e-14)
