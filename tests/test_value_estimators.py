"""rlpipe.objectives.value: the functional estimates and the estimator modules against independent truth.

1. brute-force references written as plain Python loops over every batch element, feature and time
   step, on random batches with terminations and truncations, several shapes, dtypes and time dims;
2. values computed by torchrl 0.14.1 (``torchrl.objectives.value.functional``) on the inputs of
   ``_torchrl_inputs`` below, pasted as constants;
3. gradients by finite differences (``gradcheck`` in float64);
4. bad input: torchrl's error types and messages;
5. the estimator modules (keys, value network calls, ``set_keys``, ``average_gae``, ``steps_to_next_obs``);
6. cuda (the stand-in or a GPU): the fused kernel against the CPU.
"""
import itertools

import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict, nn
from rlpipe.autograd import gradcheck
from rlpipe.objectives.value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, ValueEstimators
from rlpipe.objectives.value import functional as F
from rlpipe.tensordict import TensorDictModule


# ---- brute force ----------------------------------------------------------------------------------

def _columns(shape, time_axis):
    """Every index of ``shape`` with the time axis replaced by a slice: one trajectory each."""
    others = [range(n) if a != time_axis else [slice(None)] for a, n in enumerate(shape)]
    return [tuple(i) for i in itertools.product(*others)]


def brute_gae(gamma, lmbda, v, nv, r, done, term, time_axis):
    adv = np.zeros(v.shape, np.float64)
    for col in _columns(v.shape, time_axis):
        vs, nvs, rs, ds, ts = (np.asarray(a[col], np.float64) for a in (v, nv, r, done, term))
        following = 0.0
        for t in reversed(range(len(rs))):
            delta = rs[t] + gamma * (1 - ts[t]) * nvs[t] - vs[t]
            following = delta + gamma * lmbda * (1 - ds[t]) * following
            adv[col][t] = following
    return adv, adv + v


def brute_td_lambda(gamma, lmbda, nv, r, done, term, time_axis):
    """torchrl's definition: G[t] = r + gamma * ((1 - lmbda) * V'[t] + lmbda * G[t + 1]), G[t + 1]
    replaced by V'[t] where done and after the last step; V' is 0 where terminated."""
    ret = np.zeros(nv.shape, np.float64)
    for col in _columns(nv.shape, time_axis):
        nvs, rs, ds, ts = (np.asarray(a[col], np.float64) for a in (nv, r, done, term))
        following = None
        for t in reversed(range(len(rs))):
            nxt = (1 - ts[t]) * nvs[t]
            if ds[t] or following is None:
                following = nxt
            following = rs[t] + gamma * ((1 - lmbda) * nxt + lmbda * following)
            ret[col][t] = following
    return ret


def random_batch(rng, shape, dtype=np.float32, p_done=0.15):
    v, nv, r = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    done = rng.random(shape) < p_done
    term = done & (rng.random(shape) < 0.5)  # half of the ends are truncations
    return v, nv, r, done, term


T = rlpipe.tensor
CASES = [((1, 1), -2), ((5, 1), -2), ((3, 17, 1), -2), ((2, 3, 11, 2), -2), ((4, 9), -1), ((9,), -1),
         ((9,), 0), ((12, 3), 0), ((3, 8, 2), 1), ((2, 3, 10), 2)]


@pytest.mark.parametrize("shape,time_dim", CASES, ids=str)
@pytest.mark.parametrize("vec", [False, True])
def test_gae_matches_brute_force(shape, time_dim, vec):
    rng = np.random.default_rng(len(shape) * 31 + time_dim + 7)
    v, nv, r, done, term = random_batch(rng, shape)
    fn = F.vec_generalized_advantage_estimate if vec else F.generalized_advantage_estimate
    adv, target = fn(0.97, 0.9, T(v), T(nv), T(r), T(done), T(term), time_dim=time_dim)
    axis = time_dim % len(shape)
    ref_adv, ref_target = brute_gae(0.97, 0.9, v, nv, r, done, term, axis)
    assert adv.shape == rlpipe.Size(shape) and adv.dtype == rlpipe.float32
    np.testing.assert_allclose(adv.numpy(), ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target.numpy(), ref_target, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,time_dim", CASES, ids=str)
def test_td_lambda_td1_td0_match_brute_force(shape, time_dim):
    rng = np.random.default_rng(len(shape) * 17 + time_dim + 3)
    v, nv, r, done, term = random_batch(rng, shape, np.float64)
    axis = time_dim % len(shape)
    ref = brute_td_lambda(0.95, 0.7, nv, r, done, term, axis)
    for fn in (F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate):
        np.testing.assert_allclose(fn(0.95, 0.7, T(nv), T(r), T(done), T(term), time_dim=time_dim).numpy(), ref,
                                   rtol=1e-12, atol=1e-12)
    for fn in (F.td_lambda_advantage_estimate, F.vec_td_lambda_advantage_estimate):
        np.testing.assert_allclose(fn(0.95, 0.7, T(v), T(nv), T(r), T(done), T(term), time_dim=time_dim).numpy(),
                                   ref - v, rtol=1e-12, atol=1e-12)
    ref1 = brute_td_lambda(0.95, 1.0, nv, r, done, term, axis)
    for fn in (F.td1_return_estimate, F.vec_td1_return_estimate):
        np.testing.assert_allclose(fn(0.95, T(nv), T(r), T(done), T(term), time_dim=time_dim).numpy(), ref1,
                                   rtol=1e-12, atol=1e-12)
    for fn in (F.td1_advantage_estimate, F.vec_td1_advantage_estimate):
        np.testing.assert_allclose(fn(0.95, T(v), T(nv), T(r), T(done), T(term), time_dim=time_dim).numpy(),
                                   ref1 - v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(F.td0_return_estimate(0.95, T(nv), T(r), T(term)).numpy(), r + 0.95 * (1 - term) * nv)
    np.testing.assert_allclose(F.td0_advantage_estimate(0.95, T(v), T(nv), T(r), T(done), T(term)).numpy(),
                               r + 0.95 * (1 - term) * nv - v)


def test_truncation_bootstraps_and_termination_does_not():
    """Hand-worked: 3 steps, reward 1, next values 10; a truncation at step 1 keeps gamma * 10, a
    termination drops it."""
    r, nv, v = T([[1.0], [1.0], [1.0]]), T([[10.0], [10.0], [10.0]]), T([[0.0], [0.0], [0.0]])
    done = T([[False], [True], [False]])
    truncated = F.td1_return_estimate(0.5, nv, r, done, T([[False], [False], [False]]))
    terminated = F.td1_return_estimate(0.5, nv, r, done, done)
    # step 2: 1 + .5 * 10 = 6; step 1 (end): 1 + .5 * 10 = 6 or 1; step 0: 1 + .5 * step 1
    np.testing.assert_allclose(truncated.numpy().ravel(), [4.0, 6.0, 6.0])
    np.testing.assert_allclose(terminated.numpy().ravel(), [1.5, 1.0, 6.0])
    # GAE with done alone (treated as terminated): deltas 6, 1, 6; step 0 adds .5 * 1 * step 1's advantage
    adv, _ = F.generalized_advantage_estimate(0.5, 1.0, v, nv, r, done)
    np.testing.assert_allclose(adv.numpy().ravel(), [6.5, 1.0, 6.0])


# ---- torchrl's values -----------------------------------------------------------------------------

def _torchrl_inputs():
    k = np.arange(12).reshape(2, 6, 1)
    r = np.round(np.sin(k * 1.3), 3).astype(np.float32)
    v = np.round(np.cos(k * 0.7), 3).astype(np.float32)
    nv = np.round(np.cos(k * 0.7 + 0.7), 3).astype(np.float32)
    done = np.zeros((2, 6, 1), bool)
    done[0, 2] = done[1, 4] = done[1, 1] = True
    term = np.zeros((2, 6, 1), bool)
    term[0, 2] = term[1, 1] = True  # [1, 4] is a truncation
    return v, nv, r, done, term


# torchrl 0.14.1, /tmp/torchenv: functional.<name>(0.9, [0.8,] ...) on _torchrl_inputs()
TORCHRL = {
    "gae": [0.121306, 0.601120, 0.346000, -1.226784, -0.272200, 0.710000, 1.752340, 0.132000, -1.585810,
            -1.224736, -0.196300, 0.366900],
    "td_lambda": [1.121306, 1.366120, 0.516000, -1.731784, -1.214200, -0.226000, 1.262340, 0.319000, -0.809810,
                  -0.224736, 0.557700, 0.519900],
    "td1": [1.285560, 1.428400, 0.516000, -1.665760, -1.086400, -0.226000, 1.286100, 0.319000, -1.062063,
            -0.260070, 0.557700, 0.519900],
    "td0": [0.688500, 1.117000, 0.516000, -1.535800, -1.725400, -0.226000, 1.167300, 0.319000, 0.072000,
            -0.083400, 0.557700, 0.519900],
    "gae_done_only": [0.121306, 0.601120, 0.346000, -1.226784, -0.272200, 0.710000, 1.752340, 0.132000,
                      -1.657194, -1.323880, -0.334000, 0.366900],
    # gamma a [2, 6, 1] tensor of 0.9 with 0.5 at step 3
    "td_lambda_gamma_tensor": [1.121306, 1.366120, 0.516000, -1.267880, -1.214200, -0.226000, 1.262340, 0.319000,
                               -0.981734, -0.463520, 0.557700, 0.519900],
}


def test_values_match_torchrl():
    v, nv, r, done, term = (T(a) for a in _torchrl_inputs())

    def check(out, name):
        np.testing.assert_allclose(out.numpy().ravel(), TORCHRL[name], atol=2e-6)
    check(F.generalized_advantage_estimate(0.9, 0.8, v, nv, r, done, term)[0], "gae")
    check(F.vec_generalized_advantage_estimate(0.9, 0.8, v, nv, r, done, term)[0], "gae")
    check(F.td_lambda_return_estimate(0.9, 0.8, nv, r, done, term), "td_lambda")
    check(F.vec_td_lambda_return_estimate(0.9, 0.8, nv, r, done, term), "td_lambda")
    check(F.td1_return_estimate(0.9, nv, r, done, term), "td1")
    check(F.td0_return_estimate(0.9, nv, r, term), "td0")
    check(F.generalized_advantage_estimate(0.9, 0.8, v, nv, r, done)[0], "gae_done_only")
    gamma = rlpipe.full((2, 6, 1), 0.9)
    gamma[:, 3] = 0.5
    check(F.td_lambda_return_estimate(gamma, 0.8, nv, r, done, term), "td_lambda_gamma_tensor")
    check(F.generalized_advantage_estimate(rlpipe.tensor(0.9), rlpipe.tensor([0.8]), v, nv, r, done, term)[0], "gae")
    # time first (time_dim=0) on [T, B] inputs: torchrl gives the same numbers transposed
    adv, _ = F.generalized_advantage_estimate(0.9, 0.8, *(x[..., 0].T for x in (v, nv, r, done, term)), time_dim=0)
    assert adv.shape == rlpipe.Size([6, 2])
    np.testing.assert_allclose(adv.numpy().T.ravel(), TORCHRL["gae"], atol=2e-6)


# ---- gradients ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["gae", "td_lambda", "td1"])
def test_gradients_by_finite_differences(fn):
    rng = np.random.default_rng(5)
    v, nv, r, done, term = random_batch(rng, (2, 6, 2), np.float64, p_done=0.3)
    args = [rlpipe.tensor(a, requires_grad=True) for a in (v, nv, r)]

    def call(v_, nv_, r_):
        if fn == "gae":
            return F.generalized_advantage_estimate(0.9, 0.8, v_, nv_, r_, T(done), T(term))
        if fn == "td1":
            return F.td1_advantage_estimate(0.9, v_, nv_, r_, T(done), T(term))
        return F.td_lambda_advantage_estimate(0.9, 0.8, v_, nv_, r_, T(done), T(term), time_dim=1) * 2.0
    assert gradcheck(call, args)


# ---- errors ---------------------------------------------------------------------------------------

def test_errors_follow_torchrl():
    v, nv, r, done, term = (T(a) for a in _torchrl_inputs())
    with pytest.raises(RuntimeError, match="must share a unique shape"):
        F.generalized_advantage_estimate(0.9, 0.8, v, nv, r[:, :5], done, term)
    with pytest.raises(RuntimeError, match="must share a unique shape"):
        F.td0_return_estimate(0.9, nv, r, term[:, :5])
    with pytest.raises(RuntimeError, match=r"not compatible: got \(2, 6, 1\) and time_dim=0"):
        F.generalized_advantage_estimate(0.9, 0.8, v, nv, r, done, term, time_dim=3)
    with pytest.raises(RuntimeError, match="rolling_gamma=False is expected only with time-sensitive"):
        F.td_lambda_return_estimate(0.9, 0.8, nv, r, done, term, rolling_gamma=False)
    with pytest.raises(NotImplementedError, match="rolling_gamma=False"):
        F.td_lambda_return_estimate(rlpipe.full((2, 6, 1), 0.9), 0.8, nv, r, done, term, rolling_gamma=False)
    with pytest.raises(ValueError, match="time dimension"):  # torchrl: ValueError (unpacking [T])
        F.generalized_advantage_estimate(0.9, 0.8, v[0, :, 0], nv[0, :, 0], r[0, :, 0], done[0, :, 0], term[0, :, 0])
    with pytest.raises(TypeError, match="gamma must be a number or a tensor, got str"):
        F.generalized_advantage_estimate("0.9", 0.8, v, nv, r, done, term)
    with pytest.raises(RuntimeError, match="gamma of shape"):
        F.td_lambda_return_estimate(rlpipe.ones(3, 3), 0.8, nv, r, done, term)
    with pytest.raises(TypeError, match="must be tensors"):
        F.generalized_advantage_estimate(0.9, 0.8, v.numpy(), nv, r, done, term)
    with pytest.warns(UserWarning, match="deprecated"):
        out = F.td0_return_estimate(0.9, nv, r, done=term)
    np.testing.assert_allclose(out.numpy().ravel(), TORCHRL["td0"], atol=2e-6)


def test_empty_time_dimension():
    z = rlpipe.zeros(3, 0, 1)
    adv, target = F.generalized_advantage_estimate(0.9, 0.8, z, z, z, z.bool(), z.bool())
    assert adv.shape == rlpipe.Size([3, 0, 1]) and target.shape == rlpipe.Size([3, 0, 1])
    assert F.td_lambda_return_estimate(0.9, 0.8, z, z, z.bool()).shape == rlpipe.Size([3, 0, 1])


# ---- the modules ----------------------------------------------------------------------------------

def _transitions(rng, batch=(2, 5), device="cpu"):
    shape = batch + (1,)
    done = rng.random(shape) < 0.3
    term = done & (rng.random(shape) < 0.5)
    return TensorDict({
        "obs": rlpipe.tensor(rng.standard_normal(batch + (3,)).astype(np.float32)),
        "next": {"obs": rlpipe.tensor(rng.standard_normal(batch + (3,)).astype(np.float32)),
                 "reward": rlpipe.tensor(rng.standard_normal(shape).astype(np.float32)),
                 "done": rlpipe.tensor(done), "terminated": rlpipe.tensor(term)},
    }, batch_size=list(batch)).to(device)


def _value_net(seed=0):
    rlpipe.manual_seed(seed)
    return TensorDictModule(nn.Linear(3, 1), in_keys=["obs"], out_keys=["state_value"])


def test_gae_module_runs_the_value_network_and_writes_its_keys():
    rng = np.random.default_rng(11)
    td = _transitions(rng)
    net = _value_net()
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=net)
    out = gae(td)
    assert out is td
    with rlpipe.no_grad():
        v, nv = net.module(td["obs"]), net.module(td["next", "obs"])
    np.testing.assert_allclose(td["state_value"].numpy(), v.numpy(), rtol=1e-6)
    np.testing.assert_allclose(td["next", "state_value"].numpy(), nv.numpy(), rtol=1e-6)
    ref_adv, ref_target = brute_gae(0.9, 0.8, v.numpy(), nv.numpy(), td["next", "reward"].numpy(),
                                    td["next", "done"].numpy(), td["next", "terminated"].numpy(), 1)
    np.testing.assert_allclose(td["advantage"].numpy(), ref_adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(td["value_target"].numpy(), ref_target, rtol=1e-5, atol=1e-6)
    assert not td["advantage"].requires_grad and not td["value_target"].requires_grad
    assert gae.in_keys == ["obs", ("next", "reward"), ("next", "done"), ("next", "terminated"), ("next", "obs")]
    assert gae.out_keys == ["advantage", "value_target"]
    np.testing.assert_allclose(gae.value_estimate(_transitions(np.random.default_rng(11))).numpy(), ref_target,
                               rtol=1e-5, atol=1e-6)


def test_gae_options_average_differentiable_and_done_alone():
    rng = np.random.default_rng(12)
    td = _transitions(rng, (3, 7))
    del td["next", "terminated"]  # done alone: treated as terminated
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), average_gae=True, differentiable=True)
    gae(td)
    adv = td["advantage"]
    assert adv.requires_grad  # the current values carry the network's gradient
    assert abs(float(adv.mean())) < 1e-5 and abs(float(adv.std()) - 1) < 1e-4
    ref, _ = brute_gae(0.9, 0.8, td["state_value"].detach().numpy(), td["next", "state_value"].numpy(),
                       td["next", "reward"].numpy(), td["next", "done"].numpy(), td["next", "done"].numpy(), 1)
    np.testing.assert_allclose(adv.detach().numpy(), (ref - ref.mean()) / ref.std(ddof=1), rtol=1e-4, atol=1e-5)


def test_estimators_without_network_read_the_values_and_steps_to_next_obs():
    rng = np.random.default_rng(13)
    td = _transitions(rng)
    v, nv = rng.standard_normal((2, 2, 5, 1)).astype(np.float32)
    td["state_value"], td["next", "state_value"] = T(v), T(nv)
    steps = rng.integers(1, 4, (2, 5, 1))
    td["steps_to_next_obs"] = T(steps)
    r, d, te = (td["next", k].numpy() for k in ("reward", "done", "terminated"))
    TD0Estimator(gamma=0.9, value_network=None)(td)
    np.testing.assert_allclose(td["value_target"].numpy(), r + 0.9 ** steps * (1 - te) * nv, rtol=1e-6)
    np.testing.assert_allclose(td["advantage"].numpy(), r + 0.9 ** steps * (1 - te) * nv - v, rtol=1e-5, atol=1e-6)
    del td["steps_to_next_obs"]
    TDLambdaEstimator(gamma=0.9, lmbda=0.7, value_network=None)(td)
    np.testing.assert_allclose(td["value_target"].numpy(), brute_td_lambda(0.9, 0.7, nv, r, d, te, 1), rtol=1e-5)
    TD1Estimator(gamma=0.9, value_network=None)(td)
    np.testing.assert_allclose(td["value_target"].numpy(), brute_td_lambda(0.9, 1.0, nv, r, d, te, 1), rtol=1e-5)
    # time first: time_dim=0 on a [T, B] tensordict gives the transposed result
    tdt = TensorDict({"state_value": T(v.transpose(1, 0, 2)), "next": {
        "state_value": T(nv.transpose(1, 0, 2)), "reward": T(r.transpose(1, 0, 2)), "done": T(d.transpose(1, 0, 2)),
        "terminated": T(te.transpose(1, 0, 2))}}, batch_size=[5, 2])
    GAE(gamma=0.9, lmbda=0.8, value_network=None, time_dim=0)(tdt)
    np.testing.assert_allclose(tdt["advantage"].numpy().transpose(1, 0, 2),
                               brute_gae(0.9, 0.8, v, nv, r, d, te, 1)[0], rtol=1e-5, atol=1e-6)


def test_set_keys_and_dispatch():
    rng = np.random.default_rng(14)
    net = TensorDictModule(nn.Linear(3, 1), in_keys=["obs"], out_keys=["v"])
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=net)
    gae.set_keys(value="v", advantage=("out", "adv"), reward="r")
    assert gae.tensor_keys.value == "v" and gae.advantage_key == ("out", "adv") and gae.value_target_key == \
        "value_target"
    td = _transitions(rng)
    td["next", "r"] = td["next"].pop("reward")
    gae(td)
    assert td.get(("out", "adv")).shape == rlpipe.Size([2, 5, 1]) and td["next", "v"].shape == rlpipe.Size([2, 5, 1])
    plain = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    td = _transitions(rng)
    adv, target = plain(obs=td["obs"], next_obs=td["next", "obs"], next_reward=td["next", "reward"],
                        next_done=td["next", "done"], next_terminated=td["next", "terminated"])
    np.testing.assert_allclose(adv.numpy(), plain(td)["advantage"].numpy())
    assert [e.name for e in ValueEstimators] == ["TD0", "TD1", "TDLambda", "GAE", "VTrace"]


def test_module_errors():
    net = _value_net()
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=net)
    with pytest.raises(KeyError, match="not_a_key is not an accepted tensordict key"):
        gae.set_keys(not_a_key="x")
    with pytest.raises(KeyError, match="value key 'x' not found in value network out_keys"):
        gae.set_keys(value="x")
    with pytest.raises(ValueError, match="cannot be None"):
        gae.set_keys(advantage=None)
    with pytest.raises(ValueError, match="NestedKey"):
        gae.set_keys(advantage=3)
    assert gae.tensor_keys.advantage == "advantage"  # the failed calls changed nothing
    with pytest.raises(RuntimeError, match="Setting 'advantage_key' via constructor is deprecated"):
        GAE(gamma=0.9, lmbda=0.8, value_network=net, advantage_key="a")
    with pytest.raises(RuntimeError, match="at least one dimension"):
        gae(_transitions(np.random.default_rng(1))[0, 0])
    with pytest.raises(ValueError, match="key state_value is missing, and no value network"):
        TD0Estimator(gamma=0.9, value_network=None)(_transitions(np.random.default_rng(1)))
    with pytest.raises(KeyError):
        broken = _transitions(np.random.default_rng(1))
        del broken["next", "reward"]
        gae(broken)
    no_next = _transitions(np.random.default_rng(1)).exclude("next")
    for estimator in (gae, TD0Estimator(gamma=0.9, value_network=net)):  # a KeyError naming "next", not
        with pytest.raises(KeyError, match='key "next" not found'):  # a failure on None further on
            estimator.value_estimate(no_next.clone())
        with pytest.raises(KeyError, match='key "next" not found'):
            estimator(no_next.clone())


# ---- cuda -----------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("gae", [True, False])
def test_cuda_fused_kernel_matches_the_cpu(dtype, gae):
    cuda = rlpipe.backends.cuda_backend()
    rng = np.random.default_rng(21)
    v, nv, r, done, term = random_batch(rng, (6, 40), dtype, p_done=0.1)
    estimate = rlpipe.kernels.get("value_estimate", cuda)
    adv, target = estimate(*(cuda.asarray(a) for a in (r, v, nv, done, term)), 0.97, 0.9, gae)
    assert adv.dtype == dtype and target.dtype == dtype
    if gae:
        ref_adv, ref_target = brute_gae(0.97, 0.9, v, nv, r, done, term, 1)
    else:
        ref_target = brute_td_lambda(0.97, 0.9, nv, r, done, term, 1)
        ref_adv = ref_target - v
    tol = {np.float16: 3e-2, np.float32: 2e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(cuda.to_host(adv), ref_adv, rtol=tol, atol=tol)
    np.testing.assert_allclose(cuda.to_host(target), ref_target, rtol=tol, atol=tol)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_cuda_estimators_run_the_fused_kernel_and_differentiate(monkeypatch):
    import rlpipe.objectives.value.functional as functional

    def no_loop(*args, **kwargs):
        raise AssertionError("GAE on cuda ran the time loop")
    rng = np.random.default_rng(22)
    td = _transitions(rng, (4, 9))
    cpu = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(3))(td.clone())
    with monkeypatch.context() as m:
        m.setattr(functional, "_scan", no_loop)
        gpu = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(3).to("cuda"))(td.to("cuda"))
    assert gpu["advantage"].device.type == "cuda"
    np.testing.assert_allclose(gpu["advantage"].cpu().numpy(), cpu["advantage"].numpy(), rtol=1e-5, atol=1e-5)
    # with gradients the recursion runs as tensor-level passes (and its transpose backwards)
    v = rlpipe.tensor(rng.standard_normal((2, 5, 1)), device="cuda", requires_grad=True)
    flags = rlpipe.zeros(2, 5, 1, dtype=rlpipe.bool, device="cuda")
    adv, _ = F.generalized_advantage_estimate(0.9, 0.8, v, v.detach(), v.detach(), flags, flags)
    adv.sum().backward()
    v_cpu = v.detach().cpu().requires_grad_()
    F.generalized_advantage_estimate(0.9, 0.8, v_cpu, v_cpu.detach(), v_cpu.detach(), flags.cpu(),
                                     flags.cpu())[0].sum().backward()
    np.testing.assert_allclose(v.grad.cpu().numpy(), v_cpu.grad.numpy(), rtol=1e-12)
