"""``SyncDataCollector`` against torchrl 0.14's semantics, on small Gymnasium envs known by hand.

``Counter`` (test_gym_env's, registered here under an id of its own): the observation is ``[t]``
(float32), ``t`` starts at 0 and grows by one per step; the reward is ``t + 10 * action`` (the
``t`` after the step); the episode terminates when ``t`` reaches 5. ``StepRaises`` is a Counter whose step
number 3 (0-based: the fourth call) raises. CartPole (single and ``num_envs=4``) checks the frame bookkeeping
on a real env: within a trajectory ``("next", "observation")[t] == observation[t + 1]``, across batch boundaries
too, and trajectory ids change exactly after done steps.
"""
import warnings

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe import nn
from rlpipe.collectors import RandomPolicy, SyncDataCollector
from rlpipe.envs import GymEnv
from rlpipe.envs.specs import Binary, Bounded, Categorical, OneHot
from rlpipe.postprocs import MultiStep
from rlpipe.tensordict import TensorDictModule
from test_gym_env import Counter  # (its seeded start is off by default)

COUNTER = "rlpipe_test/CollectorCounter-v0"
STEP_RAISES = "rlpipe_test/CollectorStepRaises-v0"


class StepRaises(Counter):
    def __init__(self):
        super().__init__(terminate_at=100)
        self.steps = 0

    def step(self, action):
        if self.steps == 3:
            raise RuntimeError("simulator crashed at step 3")
        self.steps += 1
        return super().step(action)


for _id, _cls in ((COUNTER, Counter), (STEP_RAISES, StepRaises)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls)


def arr(x):
    return np.array(x.detach().cpu().numpy()) if isinstance(x, rlpipe.Tensor) else np.asarray(x)


def leaves(td):
    return {k: arr(td.get(k)) for k in td.keys(True, True)}


def constant_policy(action, n=2):
    """A plain callable on TensorDicts writing the one-hot of ``action`` (any batch size)."""
    def policy(td):
        one_hot = np.zeros(tuple(td.batch_size) + (n,), np.int64)
        one_hot[..., action] = 1
        td.set("action", rlpipe.tensor(one_hot))
        return td
    return policy


def collect(collector, n=None):
    out = []
    for i, batch in enumerate(collector):
        out.append(batch)
        if n is not None and i + 1 == n:
            break
    return out


def check_bookkeeping(batches, obs_key="observation"):
    """Every batch row (env) continues where the previous batch's row stopped: within a trajectory
    next.obs[t] == obs[t+1] (across the batch boundary too), trajectory ids change exactly after a
    done step, and new ids are fresh (never seen before)."""
    rows = []
    for b in batches:
        obs = arr(b[obs_key])
        nxt = arr(b["next", obs_key])
        done = arr(b["next", "done"])[..., 0]
        ids = arr(b["collector", "traj_ids"])
        if obs.ndim == 2:  # single env: [T, ...] -> one row
            obs, nxt, done, ids = obs[None], nxt[None], done[None], ids[None]
        rows.append((obs, nxt, done, ids))
    n_envs = rows[0][0].shape[0]
    for e in range(n_envs):
        obs = np.concatenate([r[0][e] for r in rows])
        nxt = np.concatenate([r[1][e] for r in rows])
        done = np.concatenate([r[2][e] for r in rows])
        ids = np.concatenate([r[3][e] for r in rows])
        for t in range(len(obs) - 1):
            if done[t]:
                assert ids[t + 1] != ids[t], (e, t)
            else:
                np.testing.assert_array_equal(nxt[t], obs[t + 1], err_msg=f"env {e}, step {t}")
                assert ids[t + 1] == ids[t], (e, t)
    all_ids = np.concatenate([r[3].reshape(-1) for r in rows])
    # every id names one contiguous run in one row: the number of distinct ids is the number of runs
    runs = sum(1 + int(np.count_nonzero(np.diff(np.concatenate([r[3][e] for r in rows])))) for e in range(n_envs))
    assert len(np.unique(all_ids)) == runs


ROOT_KEYS = {"observation", "action", "done", "terminated", "truncated", ("collector", "traj_ids"),
             ("next", "observation"), ("next", "reward"), ("next", "done"), ("next", "terminated"),
             ("next", "truncated")}


def keyset(td):
    return {k if isinstance(k, str) or len(k) > 1 else k[0] for k in td.keys(True, True)}


# ---- shapes, keys, exact values ------------------------------------------------------------------------

def test_single_env_batch_shape_keys_dtypes():
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=7, total_frames=14)
    batches = collect(collector)
    assert len(batches) == 2
    for b in batches:
        assert tuple(b.batch_size) == (7,)
        assert keyset(b) == ROOT_KEYS
        assert tuple(b["observation"].shape) == (7, 1) and b["observation"].dtype is rlpipe.float32
        assert tuple(b["action"].shape) == (7, 2)
        assert tuple(b["next", "reward"].shape) == (7, 1) and b["next", "reward"].dtype is rlpipe.float32
        for key in ("done", "terminated", "truncated"):
            assert tuple(b[key].shape) == (7, 1) and b[key].dtype is rlpipe.bool
            assert tuple(b["next", key].shape) == (7, 1) and b["next", key].dtype is rlpipe.bool
        assert tuple(b["collector", "traj_ids"].shape) == (7,) and b["collector", "traj_ids"].dtype is rlpipe.int64
    collector.shutdown()


def test_counter_exact_values_across_batches():
    """Action 1 always: reward = t + 10. Episodes are 0..4 -> 1..5; traj ids 0, 1, 2, ..."""
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=7, total_frames=21)
    b0, b1, b2 = collect(collector)
    expect_obs = [[0, 1, 2, 3, 4, 0, 1], [2, 3, 4, 0, 1, 2, 3], [4, 0, 1, 2, 3, 4, 0]]
    expect_ids = [[0, 0, 0, 0, 0, 1, 1], [1, 1, 1, 2, 2, 2, 2], [2, 3, 3, 3, 3, 3, 4]]
    for b, obs, ids in zip((b0, b1, b2), expect_obs, expect_ids):
        obs = np.array(obs, np.float32)
        np.testing.assert_array_equal(arr(b["observation"])[:, 0], obs)
        nxt = obs + 1
        np.testing.assert_array_equal(arr(b["next", "observation"])[:, 0], nxt)
        np.testing.assert_array_equal(arr(b["next", "reward"])[:, 0], nxt + 10)
        np.testing.assert_array_equal(arr(b["next", "terminated"])[:, 0], nxt == 5)
        np.testing.assert_array_equal(arr(b["next", "done"])[:, 0], nxt == 5)
        assert not arr(b["next", "truncated"]).any()
        assert not arr(b["done"]).any() and not arr(b["terminated"]).any() and not arr(b["truncated"]).any()
        np.testing.assert_array_equal(arr(b["action"]), np.tile([0, 1], (7, 1)))
        np.testing.assert_array_equal(arr(b["collector", "traj_ids"]), ids)
    check_bookkeeping([b0, b1, b2])


def test_counter_done_on_last_step_of_a_batch():
    """A batch that ends exactly on a done: the next batch starts a new trajectory from a reset."""
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=15)
    batches = collect(collector)
    for i, b in enumerate(batches):
        np.testing.assert_array_equal(arr(b["observation"])[:, 0], [0, 1, 2, 3, 4])
        np.testing.assert_array_equal(arr(b["next", "done"])[:, 0], [0, 0, 0, 0, 1])
        np.testing.assert_array_equal(arr(b["collector", "traj_ids"]), [i] * 5)
        action = arr(b["action"]).argmax(-1)
        np.testing.assert_array_equal(arr(b["next", "reward"])[:, 0], np.arange(1, 6) + 10 * action)


def test_vector_counter_exact_values():
    env = GymEnv(COUNTER, num_envs=2)
    collector = SyncDataCollector(env, constant_policy(0), frames_per_batch=14, total_frames=28)
    b0, b1 = collect(collector)
    for b in (b0, b1):
        assert tuple(b.batch_size) == (2, 7)
        assert keyset(b) == ROOT_KEYS
        assert tuple(b["observation"].shape) == (2, 7, 1)
        assert tuple(b["action"].shape) == (2, 7, 2)
        assert tuple(b["next", "done"].shape) == (2, 7, 1)
    for b, obs, ids in ((b0, [0, 1, 2, 3, 4, 0, 1], [[0] * 5 + [2] * 2, [1] * 5 + [3] * 2]),
                        (b1, [2, 3, 4, 0, 1, 2, 3], [[2] * 3 + [4] * 4, [3] * 3 + [5] * 4])):
        obs = np.array(obs, np.float32)
        for row in range(2):
            np.testing.assert_array_equal(arr(b["observation"])[row, :, 0], obs)
            np.testing.assert_array_equal(arr(b["next", "observation"])[row, :, 0], obs + 1)
            np.testing.assert_array_equal(arr(b["next", "reward"])[row, :, 0], obs + 1)
            np.testing.assert_array_equal(arr(b["next", "terminated"])[row, :, 0], obs + 1 == 5)
        np.testing.assert_array_equal(arr(b["collector", "traj_ids"]), ids)
    check_bookkeeping([b0, b1])


def test_cartpole_trajectories_continue_across_batches():
    env = GymEnv("CartPole-v1")
    env.set_seed(1)
    collector = SyncDataCollector(env, None, frames_per_batch=16, total_frames=160)
    batches = collect(collector)
    assert len(batches) == 10
    assert sum(b.numel() for b in batches) == 160
    dones = sum(int(arr(b["next", "done"]).sum()) for b in batches)
    assert dones >= 1  # random CartPole episodes last ~20 steps: the test crosses episode ends
    check_bookkeeping(batches)
    # the batch boundary itself: last next obs of batch k is the first obs of batch k + 1 unless done
    for a, b in zip(batches, batches[1:]):
        if not arr(a["next", "done"])[-1, 0]:
            np.testing.assert_array_equal(arr(a["next", "observation"])[-1], arr(b["observation"])[0])
            assert arr(a["collector", "traj_ids"])[-1] == arr(b["collector", "traj_ids"])[0]
        else:
            assert arr(a["collector", "traj_ids"])[-1] != arr(b["collector", "traj_ids"])[0]


def test_vectorized_cartpole_no_frame_lost_or_duplicated():
    env = GymEnv("CartPole-v1", num_envs=4)
    env.set_seed(3)
    collector = SyncDataCollector(env, RandomPolicy(env.action_spec), frames_per_batch=64, total_frames=64 * 6)
    assert len(collector) == 6
    batches = collect(collector)
    assert len(batches) == 6
    for b in batches:
        assert tuple(b.batch_size) == (4, 16)
        assert b.numel() == 64
    assert sum(b.numel() for b in batches) == 384
    assert sum(int(arr(b["next", "done"]).sum()) for b in batches) >= 4
    check_bookkeeping(batches)
    for a, b in zip(batches, batches[1:]):
        for e in range(4):
            if not arr(a["next", "done"])[e, -1, 0]:
                np.testing.assert_array_equal(arr(a["next", "observation"])[e, -1], arr(b["observation"])[e, 0])
    # no two rows ever share a trajectory id
    for b in batches:
        ids = arr(b["collector", "traj_ids"])
        for e in range(4):
            for f in range(e + 1, 4):
                assert not set(ids[e]) & set(ids[f])
    collector.shutdown()


def test_batches_do_not_alias_each_other():
    collector = SyncDataCollector(GymEnv("CartPole-v1"), None, frames_per_batch=8, total_frames=24)
    it = iter(collector)
    first = next(it)
    saved = leaves(first)
    rest = list(it)
    assert len(rest) == 2
    for key, value in leaves(first).items():
        np.testing.assert_array_equal(value, saved[key], err_msg=str(key))


# ---- frame accounting --------------------------------------------------------------------------------

def test_exact_total_frames_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=10, total_frames=30)
        assert len(collector) == 3
        batches = collect(collector)
    assert [b.numel() for b in batches] == [10, 10, 10]


def test_total_frames_not_divisible_is_rounded_up_with_warning():
    with pytest.warns(UserWarning, match=r"total_frames \(25\) is not exactly divisible by frames_per_batch \(10\)"):
        collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=10, total_frames=25)
    assert len(collector) == 3
    batches = collect(collector)
    assert len(batches) == 3 and sum(b.numel() for b in batches) == 30


def test_frames_per_batch_not_divisible_by_num_envs_is_rounded_up_with_warning():
    env = GymEnv(COUNTER, num_envs=4)
    with pytest.warns(UserWarning, match=r"frames_per_batch \(10\).*\(4\)"):
        collector = SyncDataCollector(env, None, frames_per_batch=10, total_frames=24)
    batches = collect(collector)
    assert [tuple(b.batch_size) for b in batches] == [(4, 3), (4, 3)]
    assert sum(b.numel() for b in batches) == 24
    check_bookkeeping(batches)


def test_total_frames_minus_one_runs_until_break():
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=4, total_frames=-1)
    count = 0
    for count, batch in enumerate(collector, 1):
        assert batch.numel() == 4
        if count == 12:
            break
    assert count == 12
    with pytest.raises(RuntimeError):
        len(collector)


def test_len():
    assert len(SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=5)) == 1
    assert len(SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=100)) == 20
    assert len(SyncDataCollector(GymEnv(COUNTER, num_envs=2), None, frames_per_batch=6, total_frames=60)) == 10


# ---- policies -------------------------------------------------------------------------------------------

class TanhPolicy(nn.Module):
    """A plain nn.Module whose forward takes ``observation`` (Pendulum: 3 -> 1 in [-2, 2])."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, observation):
        return self.linear(observation).tanh() * 2.0


def tanh_by_hand(obs, module):
    w, b = arr(module.linear.weight), arr(module.linear.bias)
    return np.tanh(obs @ w.T + b) * 2.0


def test_policy_none_and_random_policy():
    for policy in (None, "random"):
        env = GymEnv(COUNTER)
        policy = RandomPolicy(env.action_spec) if policy == "random" else policy
        collector = SyncDataCollector(env, policy, frames_per_batch=50, total_frames=50)
        (b,) = collect(collector)
        action = arr(b["action"])
        assert action.shape == (50, 2) and (action.sum(-1) == 1).all()
        assert 0 < action[:, 1].sum() < 50  # both actions show up in 50 uniform draws
        np.testing.assert_array_equal(arr(b["next", "reward"])[:, 0],
                                      arr(b["next", "observation"])[:, 0] + 10 * action.argmax(-1))


def test_plain_callable_policy_sees_the_observation():
    seen = []

    def policy(td):
        obs = arr(td["observation"])
        seen.append(obs.copy())
        td.set("action", rlpipe.tensor([1, 0]) if obs[0] % 2 == 0 else rlpipe.tensor([0, 1]))
        return td

    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=7, total_frames=7)
    (b,) = collect(collector)
    np.testing.assert_array_equal(np.concatenate(seen), arr(b["observation"])[:, 0])
    obs = arr(b["observation"])[:, 0]
    np.testing.assert_array_equal(arr(b["action"]).argmax(-1), obs % 2)
    np.testing.assert_array_equal(arr(b["next", "reward"])[:, 0], obs + 1 + 10 * (obs % 2))


def test_tensordict_module_policy():
    rlpipe.manual_seed(0)
    module = TanhPolicy()
    policy = TensorDictModule(module, in_keys=["observation"], out_keys=["action"])
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    collector = SyncDataCollector(env, policy, frames_per_batch=12, total_frames=24)
    batches = collect(collector)
    for b in batches:
        action = arr(b["action"])
        assert action.shape == (12, 1)
        np.testing.assert_allclose(action, tanh_by_hand(arr(b["observation"]), module), rtol=1e-5, atol=1e-6)
        assert not b["action"].requires_grad
    check_bookkeeping(batches)


def test_outputs_that_view_the_observation_are_recorded_per_step():
    # the policy's step TensorDict reuses its observation buffers: a view of them must be copied at each step
    def policy(td):
        td.set("first_two", td["observation"][..., :2])
        td.set("action", rlpipe.tensor(np.array([1, 0], np.int64)))
        return td
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    batch = collect(SyncDataCollector(env, policy, frames_per_batch=6, total_frames=6))[0]
    np.testing.assert_array_equal(arr(batch["first_two"]), arr(batch["observation"])[:, :2])
    assert len(np.unique(arr(batch["first_two"])[:, 0])) == 6


def test_plain_module_policy_is_wrapped():
    rlpipe.manual_seed(0)
    module = TanhPolicy()
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    collector = SyncDataCollector(env, module, frames_per_batch=12, total_frames=12)
    (b,) = collect(collector)
    assert keyset(b) == ROOT_KEYS
    np.testing.assert_allclose(arr(b["action"]), tanh_by_hand(arr(b["observation"]), module), rtol=1e-5, atol=1e-6)
    assert module.linear.weight.requires_grad  # the parameters are left alone
    for key, value in ((k, b.get(k)) for k in b.keys(True, True)):
        assert not value.requires_grad, key


def test_policies_run_under_no_grad():
    modes = []

    def policy(td):
        modes.append(rlpipe.is_grad_enabled())
        td.set("action", rlpipe.tensor([1, 0]))
        return td

    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=5, total_frames=10)
    collect(collector)
    assert modes == [False] * 10
    assert rlpipe.is_grad_enabled()


# ---- options ------------------------------------------------------------------------------------------

class CountingPolicy:
    def __init__(self, action=0):
        self.calls = 0
        self.policy = constant_policy(action)

    def __call__(self, td):
        self.calls += 1
        return self.policy(td)


def test_init_random_frames_whole_batches():
    policy = CountingPolicy(action=0)
    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=5, total_frames=25, init_random_frames=10)
    calls = []
    for _ in collector:
        calls.append(policy.calls)
    # one call before the first random batch learns what the policy writes (torchrl calls it at
    # start too); then none in the random batches and one per frame after them
    assert calls == [1, 1, 6, 11, 16]


def test_init_random_frames_not_a_multiple_of_frames_per_batch():
    """torchrl: a batch is random while the frames collected *before* it are < init_random_frames
    (whole batches: 7 -> 10 random frames), with a warning."""
    policy = CountingPolicy(action=0)
    with pytest.warns(UserWarning, match=r"init_random_frames \(7\)"):
        collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=5, total_frames=15,
                                      init_random_frames=7)
    calls = []
    for _ in collector:
        calls.append(policy.calls)
    assert calls == [1, 1, 6]  # (the first call learns what the policy writes)


def test_max_frames_per_traj_truncates():
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=8, total_frames=16,
                                  max_frames_per_traj=3)
    b0, b1 = collect(collector)
    np.testing.assert_array_equal(arr(b0["observation"])[:, 0], [0, 1, 2, 0, 1, 2, 0, 1])
    np.testing.assert_array_equal(arr(b1["observation"])[:, 0], [2, 0, 1, 2, 0, 1, 2, 0])
    np.testing.assert_array_equal(arr(b0["next", "truncated"])[:, 0], [0, 0, 1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(arr(b0["next", "done"])[:, 0], [0, 0, 1, 0, 0, 1, 0, 0])
    assert not arr(b0["next", "terminated"]).any()
    np.testing.assert_array_equal(arr(b0["collector", "traj_ids"]), [0, 0, 0, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(arr(b1["collector", "traj_ids"]), [2, 3, 3, 3, 4, 4, 4, 5])
    np.testing.assert_array_equal(arr(b1["next", "truncated"])[:, 0], [1, 0, 0, 1, 0, 0, 1, 0])
    check_bookkeeping([b0, b1])


def test_max_frames_per_traj_vectorized():
    collector = SyncDataCollector(GymEnv(COUNTER, num_envs=2), None, frames_per_batch=16, total_frames=32,
                                  max_frames_per_traj=3)
    batches = collect(collector)
    for b in batches:
        assert tuple(b.batch_size) == (2, 8)
    obs = np.concatenate([arr(b["observation"])[..., 0] for b in batches], axis=1)
    np.testing.assert_array_equal(obs, np.tile(np.arange(16) % 3, (2, 1)))
    check_bookkeeping(batches)


def test_max_frames_per_traj_adds_step_count():
    """torchrl wraps the env in ``StepCounter(max_frames_per_traj)``: the batches carry step_count."""
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=6, total_frames=6, max_frames_per_traj=3)
    (b,) = collect(collector)
    np.testing.assert_array_equal(arr(b["step_count"])[:, 0], [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(arr(b["next", "step_count"])[:, 0], [1, 2, 3, 1, 2, 3])


def test_reset_at_each_iter():
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=3, total_frames=9, reset_at_each_iter=True)
    for b in collect(collector):
        np.testing.assert_array_equal(arr(b["observation"])[:, 0], [0, 1, 2])
        np.testing.assert_array_equal(arr(b["next", "observation"])[:, 0], [1, 2, 3])
        assert len(np.unique(arr(b["collector", "traj_ids"]))) == 1


def test_split_trajs():
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=7, total_frames=14,
                                  split_trajs=True)
    b0, b1 = collect(collector)
    assert tuple(b0.batch_size) == (2, 5)
    mask0 = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    np.testing.assert_array_equal(arr(b0["collector", "mask"]), mask0)
    np.testing.assert_array_equal(arr(b0["observation"])[..., 0], [[0, 1, 2, 3, 4], [0, 1, 0, 0, 0]])
    np.testing.assert_array_equal(arr(b0["next", "reward"])[..., 0], [[11, 12, 13, 14, 15], [11, 12, 0, 0, 0]])
    np.testing.assert_array_equal(arr(b0["collector", "traj_ids"])[mask0], [0] * 5 + [1] * 2)
    assert tuple(b1.batch_size) == (2, 4)
    mask1 = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    np.testing.assert_array_equal(arr(b1["collector", "mask"]), mask1)
    np.testing.assert_array_equal(arr(b1["observation"])[..., 0], [[2, 3, 4, 0], [0, 1, 2, 3]])
    np.testing.assert_array_equal(arr(b1["collector", "traj_ids"])[mask1], [1] * 3 + [2] * 4)
    np.testing.assert_array_equal(arr(b1["next", "done"])[..., 0], [[0, 0, 1, 0], [0, 0, 0, 0]])


def test_split_trajs_vectorized():
    collector = SyncDataCollector(GymEnv(COUNTER, num_envs=2), constant_policy(0), frames_per_batch=14,
                                  total_frames=14, split_trajs=True)
    (b,) = collect(collector)
    assert tuple(b.batch_size) == (4, 5)
    np.testing.assert_array_equal(arr(b["collector", "mask"]).sum(-1), [5, 2, 5, 2])
    assert arr(b["collector", "mask"]).sum() == 14



def test_batches_name_the_time_dim_as_torchrl():
    """torchrl 0.14.1's collector batches name their last dim "time" (nested "next" too), after
    split_trajs as well ([None, "time"])."""
    (b,) = collect(SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=7, total_frames=7))
    assert b.names == ["time"] and b["next"].names == ["time"]
    (b,) = collect(SyncDataCollector(GymEnv(COUNTER, num_envs=2), constant_policy(0), frames_per_batch=14,
                                     total_frames=14))
    assert b.names == [None, "time"] and b["next"].names == [None, "time"]
    (b,) = collect(SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=7, total_frames=7,
                                     split_trajs=True))
    assert tuple(b.batch_size) == (2, 5) and b.names == [None, "time"]

def test_multistep_postproc_keys():
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(1), frames_per_batch=7, total_frames=7,
                                  postproc=MultiStep(0.99, 4))
    (b,) = collect(collector)
    assert tuple(b.batch_size) == (7,)
    for key in ("gamma", "nonterminal", "steps_to_next_obs", ("next", "original_reward")):
        assert key in b.keys(True, True), key
    # episode 0..4 (done after obs 4), then 0, 1: windows stop after the done and at the batch end
    np.testing.assert_array_equal(arr(b["steps_to_next_obs"]).reshape(-1), [4, 4, 3, 2, 1, 2, 1])
    np.testing.assert_array_equal(arr(b["next", "observation"])[:, 0], [4, 5, 5, 5, 5, 2, 2])
    np.testing.assert_array_equal(arr(b["next", "original_reward"])[:, 0], [11, 12, 13, 14, 15, 11, 12])
    r = [11, 12, 13, 14, 15]
    expected0 = sum(0.99 ** k * r[k] for k in range(4))
    np.testing.assert_allclose(arr(b["next", "reward"])[0, 0], expected0, rtol=1e-6)


def test_multistep_with_step_counter_seed_example():
    """The torchrl MultiStep reference example: CartPole, seed 0, StepCounter, MultiStep(0.99, 4)."""
    from rlpipe.envs.transforms import StepCounter, TransformedEnv
    rlpipe.manual_seed(0)
    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    env.set_seed(0)
    collector = SyncDataCollector(env, policy=RandomPolicy(env.action_spec), frames_per_batch=10, total_frames=2000,
                                  postproc=MultiStep(gamma=0.99, n_steps=4))
    data = next(iter(collector))
    collector.shutdown()
    step_count = arr(data["step_count"])[:, 0]
    next_step_count = arr(data["next", "step_count"])[:, 0]
    m = arr(data["steps_to_next_obs"]).reshape(-1)
    # expected shift from the data: next.step_count[t] = step_count[t + m[t] - 1] + 1, the window
    # m[t] stopping after a done and at the end of the batch
    done = arr(data["done"])[:, 0]  # root done is never set: use the step counts to find the episode ends
    ends = [t for t in range(9) if step_count[t + 1] == 0] + [9]
    for t in range(10):
        end = min(e for e in ends if e >= t)
        assert m[t] == min(4, end - t + 1), t
        assert next_step_count[t] == step_count[t + m[t] - 1] + 1, t
    assert not done.any()
    if len(ends) == 1:  # no episode ends in the first 10 frames (CartPole, seed 0)
        np.testing.assert_array_equal(step_count, np.arange(10))
        np.testing.assert_array_equal(next_step_count, [4, 5, 6, 7, 8, 9, 10, 10, 10, 10])


def test_storing_device_cpu():
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10, storing_device="cpu")
    for b in collect(collector):
        assert b.device is not None and str(b.device) == "cpu"
        for key in b.keys(True, True):
            assert str(b.get(key).device) == "cpu"


# ---- control ---------------------------------------------------------------------------------------------

def test_set_seed_reproducible():
    def run():
        collector = SyncDataCollector(GymEnv("CartPole-v1"), None, frames_per_batch=20, total_frames=60)
        collector.set_seed(42)
        out = [leaves(b) for b in collector]
        collector.shutdown()
        return out

    a, b = run(), run()
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=str(key))


def test_set_seed_reproducible_vectorized():
    def run():
        collector = SyncDataCollector(GymEnv("CartPole-v1", num_envs=3), None, frames_per_batch=30, total_frames=60)
        collector.set_seed(7)
        return [leaves(b) for b in collector]

    a, b = run(), run()
    for x, y in zip(a, b):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=str(key))


def test_state_dict_round_trip_continues_frame_count():
    rlpipe.manual_seed(0)
    policy = TensorDictModule(TanhPolicy(), in_keys=["observation"], out_keys=["action"])
    first = SyncDataCollector(GymEnv("Pendulum-v1"), policy, frames_per_batch=10, total_frames=50)
    seen = collect(first, n=2)
    assert len(seen) == 2
    state = first.state_dict()
    first.shutdown()

    rlpipe.manual_seed(1)
    other = TensorDictModule(TanhPolicy(), in_keys=["observation"], out_keys=["action"])
    second = SyncDataCollector(GymEnv("Pendulum-v1"), other, frames_per_batch=10, total_frames=50)
    second.load_state_dict(state)
    rest = collect(second)
    assert len(rest) == 3  # 20 of 50 frames were collected before: 30 remain
    for p, q in zip(policy.parameters(), other.parameters()):
        np.testing.assert_array_equal(arr(p), arr(q))
    second.shutdown()


def test_state_dict_of_a_finished_collector_yields_nothing():
    first = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10)
    assert len(collect(first)) == 2
    second = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10)
    second.load_state_dict(first.state_dict())
    assert collect(second) == []


def test_shutdown_and_context_manager():
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10)
    collect(collector, n=1)
    assert collector.shutdown() is None
    assert collector.shutdown() is None  # twice is fine
    with SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10) as c:
        assert len(collect(c)) == 2
        env = c.env
    assert env._is_closed


def test_reset_starts_new_trajectories():
    collector = SyncDataCollector(GymEnv(COUNTER), constant_policy(0), frames_per_batch=3, total_frames=-1)
    it = iter(collector)
    b0 = next(it)
    np.testing.assert_array_equal(arr(b0["observation"])[:, 0], [0, 1, 2])
    collector.reset()
    b1 = next(it)
    np.testing.assert_array_equal(arr(b1["observation"])[:, 0], [0, 1, 2])
    assert len(np.unique(arr(b1["collector", "traj_ids"]))) == 1
    b2 = next(it)
    np.testing.assert_array_equal(arr(b2["observation"])[:, 0], [3, 4, 0])
    collector.shutdown()


def test_update_policy_weights_runs():
    rlpipe.manual_seed(0)
    module = TanhPolicy()
    collector = SyncDataCollector(GymEnv("Pendulum-v1"), module, frames_per_batch=4, total_frames=8)
    it = iter(collector)
    next(it)
    with rlpipe.no_grad():
        module.linear.weight.fill_(0.0)
        module.linear.bias.fill_(0.25)
    collector.update_policy_weights_()
    b = next(it)
    np.testing.assert_allclose(arr(b["action"]), np.full((4, 1), 2 * np.tanh(0.25)), rtol=1e-6)
    collector.shutdown()


# ---- bad input and faults -------------------------------------------------------------------------------

@pytest.mark.parametrize("fpb", [0, -1, 1.5])
def test_bad_frames_per_batch(fpb):
    with pytest.raises(ValueError, match="frames_per_batch"):
        SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=fpb, total_frames=100)


def test_total_frames_smaller_than_frames_per_batch():
    """An error, as the issue asks (torchrl 0.14 collects one whole batch instead)."""
    with pytest.raises(ValueError, match=r"total_frames \(5\).*frames_per_batch \(10\)"):
        SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=10, total_frames=5)


def test_policy_action_of_wrong_shape():
    def policy(td):
        td.set("action", rlpipe.zeros(3, dtype=rlpipe.int64))
        return td

    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=5, total_frames=5)
    with pytest.raises(ValueError, match=r"shape \[3\].*\[2\]"):
        collect(collector)
    collector.shutdown()


def test_policy_one_hot_with_two_ones():
    def policy(td):
        td.set("action", rlpipe.tensor([1, 1]))
        return td

    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=5, total_frames=5, check_action_spec=True)
    assert isinstance(collector.env.action_spec, OneHot)
    with pytest.raises(ValueError, match="outside the action spec"):
        collect(collector)
    collector.shutdown()


def test_policy_categorical_index_out_of_range():
    def policy(td):
        td.set("action", rlpipe.tensor(7))
        return td

    env = GymEnv(COUNTER, categorical_action_encoding=True)
    assert isinstance(env.action_spec, Categorical)
    collector = SyncDataCollector(env, policy, frames_per_batch=5, total_frames=5, check_action_spec=True)
    with pytest.raises(ValueError, match="outside the action spec"):
        collect(collector)
    collector.shutdown()


def test_nonexistent_env_id():
    with pytest.raises(gym.error.Error, match="NoSuchCollectorEnv-v0"):
        SyncDataCollector(lambda: GymEnv("NoSuchCollectorEnv-v0"), None, frames_per_batch=5, total_frames=5)


def test_create_env_fn_returning_something_else():
    with pytest.raises(TypeError, match="create_env_fn"):
        SyncDataCollector(lambda: gym.make("CartPole-v1"), None, frames_per_batch=5, total_frames=5)


def test_env_step_raises():
    collector = SyncDataCollector(GymEnv(STEP_RAISES), None, frames_per_batch=10, total_frames=10)
    with pytest.raises(RuntimeError, match=r"CollectorStepRaises-v0.*step 3") as info:
        collect(collector)
    assert "simulator crashed at step 3" in str(info.value)
    assert collector.shutdown() is None
    assert collector.shutdown() is None


@pytest.mark.parametrize("spec", [OneHot(3), OneHot(3, shape=(4, 3)), OneHot(2, dtype=rlpipe.bool),
                                  Categorical(3), Categorical(3, shape=(4,)), Binary(3), Binary(3, shape=(5, 3)),
                                  Bounded(-1.0, 2.0, shape=(2,))], ids=repr)
def test_membership_test_agrees_with_spec_is_in(spec):
    """The collector's per-step action check against the spec's own is_in, on valid samples, on
    brute-force perturbations of them and at sizes on both sides of the list/NumPy switch."""
    from rlpipe.envs.specs import _LIST_CHECK_SIZE
    check = spec.host_membership_test()
    rng = np.random.default_rng(0)
    for batch in [(), (_LIST_CHECK_SIZE,)]:
        for _ in range(20):
            good = spec.rand(batch).numpy()
            candidates = [good]
            for delta in (-1, 1, 2):
                bad = good.astype(np.float64).copy()
                flat = bad.reshape(-1)
                flat[rng.integers(flat.size)] += delta
                candidates.append(bad.astype(good.dtype))
            candidates.append(good.astype(np.float64 if good.dtype != np.float64 else np.float32))
            for a in candidates:
                expected = bool(spec.is_in(rlpipe.from_numpy(np.ascontiguousarray(a)))) and a.dtype == good.dtype
                assert check(a) == expected, (a, spec)


def _greedy_linear(device):
    """A fixed Linear(1, 2) policy whose greedy one-hot action is 1 for the Counter's observations."""
    net = nn.Linear(1, 2).to(device)
    with rlpipe.no_grad():
        net.weight.copy_(rlpipe.tensor([[0.0], [0.0]], device=device))
        net.bias.copy_(rlpipe.tensor([0.0, 1.0], device=device))

    def policy(td):
        td.set("action", nn.functional.one_hot(net(td.get("observation")).argmax(-1), 2))
        return td
    return net, policy


def test_policy_device_defaults_to_the_parameters_and_can_be_given():
    net, policy = _greedy_linear("cpu")
    c = SyncDataCollector(GymEnv(COUNTER), net, frames_per_batch=4, total_frames=4)
    assert c.policy_device == rlpipe.device("cpu")
    c = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=4, total_frames=4, policy_device="cpu")
    batch = next(iter(c))
    assert arr(batch["action"]).tolist() == [[0, 1]] * 4
    assert arr(batch["next", "reward"]).ravel().tolist() == [11.0, 12.0, 13.0, 14.0]


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_cuda_policy_collects_like_the_cpu_one():
    batches = []
    for device in ("cpu", "cuda"):
        net, policy = _greedy_linear(device)
        collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=6, total_frames=12,
                                      policy_device=device)
        batches.append([leaves(b) for b in collector])
        module_policy = SyncDataCollector(GymEnv(COUNTER), net, frames_per_batch=6, total_frames=6)
        assert module_policy.policy_device.type == device
    for cpu_batch, cuda_batch in zip(*batches):
        for key in cpu_batch:
            np.testing.assert_array_equal(cpu_batch[key], cuda_batch[key])


# ---- torchrl 0.14.1 parity: found by differential runs against torchrl's Collector ------------------------

class LogitsAndAction(nn.Module):
    """Writes logits ``[2 * obs + 1, -obs]`` and the one-hot of ``action``."""

    def __init__(self, action=1):
        super().__init__()
        self.action = action

    def forward(self, observation):
        one_hot = np.zeros(tuple(observation.shape[:-1]) + (2,), np.int64)
        one_hot[..., self.action] = 1
        return rlpipe.cat([observation * 2 + 1, -observation], -1), rlpipe.tensor(one_hot)


def test_policy_outputs_besides_the_action_are_kept():
    """torchrl keeps every entry the policy writes (logits, log-probs, ...), nested ones too; not
    "_"-prefixed ones."""
    policy = TensorDictModule(LogitsAndAction(), in_keys=["observation"], out_keys=[("pol", "logits"), "action"])

    def with_private(td):
        td = policy(td)
        td.set("_hidden", rlpipe.zeros(1))
        return td

    collector = SyncDataCollector(GymEnv(COUNTER), with_private, frames_per_batch=6, total_frames=12)
    b0, b1 = collect(collector)
    assert keyset(b0) == ROOT_KEYS | {("pol", "logits")}
    obs = np.array([0, 1, 2, 3, 4, 0], np.float32)
    np.testing.assert_array_equal(arr(b0["pol", "logits"]), np.stack([2 * obs + 1, -obs], -1))
    assert arr(b0["pol", "logits"]).dtype == np.float32
    obs = np.array([1, 2, 3, 4, 0, 1], np.float32)
    np.testing.assert_array_equal(arr(b1["pol", "logits"]), np.stack([2 * obs + 1, -obs], -1))


@pytest.mark.parametrize("wrapped", [True, False])
def test_policy_outputs_are_zeros_in_random_batches(wrapped):
    """torchrl preallocates the policy's outputs: a random batch holds zeros there, so every batch
    has the same keys (a replay buffer takes them all)."""
    module = TensorDictModule(LogitsAndAction(), in_keys=["observation"], out_keys=["logits", "action"])
    policy = module if wrapped else (lambda td: module(td))  # a plain callable: no out_keys to read
    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=4, total_frames=12, init_random_frames=4)
    b0, b1, b2 = collect(collector)
    assert keyset(b0) == keyset(b1) == ROOT_KEYS | {"logits"}
    np.testing.assert_array_equal(arr(b0["logits"]), np.zeros((4, 2), np.float32))
    obs = arr(b1["observation"])[:, 0]
    np.testing.assert_array_equal(arr(b1["logits"]), np.stack([2 * obs + 1, -obs], -1))
    np.testing.assert_array_equal(arr(b2["action"]).argmax(-1), [1, 1, 1, 1])


def test_policy_writing_only_the_action_is_not_called_in_random_batches():
    calls = []
    module = TensorDictModule(LogitsAndAction(), in_keys=["observation"], out_keys=["_", "action"])

    def policy(td):
        calls.append(1)
        return module(td)
    policy.out_keys = ["action"]
    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=4, total_frames=8, init_random_frames=4)
    counts = [len(calls) for _ in collector]
    assert counts == [0, 4]


def test_rl_warnings_false_silences_the_collector_warnings(monkeypatch):
    monkeypatch.setenv("RL_WARNINGS", "False")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collector = SyncDataCollector(GymEnv(COUNTER, num_envs=3), None, frames_per_batch=10, total_frames=25,
                                      init_random_frames=5)
    assert collector.frames_per_batch == 12 and collector.total_frames == 36


def test_warning_texts_are_torchrls():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SyncDataCollector(GymEnv(COUNTER, num_envs=3), None, frames_per_batch=10, total_frames=36,
                          init_random_frames=5)
    assert [str(w.message) for w in caught] == [
        ("frames_per_batch (10) is not exactly divisible by the number of batched environments (3), this results in "
         "more frames_per_batch per iteration that requested (12). To silence this message, set the environment "
         "variable RL_WARNINGS to False."),
        ("init_random_frames (5) is not exactly a multiple of frames_per_batch (12), this results in more "
         "init_random_frames than requested (12). To silence this message, set the environment variable RL_WARNINGS "
         "to False.")]


@pytest.mark.parametrize("total", [None, -5])
def test_total_frames_none_or_negative_runs_until_stopped(total):
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=total)
    assert collector.total_frames == -1
    assert len(collect(collector, n=4)) == 4


def test_init_random_frames_none_means_none():
    policy = CountingPolicy(action=0)
    collector = SyncDataCollector(GymEnv(COUNTER), policy, frames_per_batch=5, total_frames=10, init_random_frames=None)
    assert [policy.calls for _ in collector] == [5, 10]


def test_requested_frames_per_batch():
    collector = SyncDataCollector(GymEnv(COUNTER, num_envs=3), None, frames_per_batch=12, total_frames=24)
    assert collector.requested_frames_per_batch == collector.frames_per_batch == 12
    assert collector.steps_per_batch == 4


def test_set_seed_passes_static_seed_to_the_env():
    env = GymEnv(COUNTER)
    seen = []
    env.set_seed = lambda seed, static_seed=False: seen.append((seed, static_seed)) or seed
    collector = SyncDataCollector(env, None, frames_per_batch=5, total_frames=10)
    assert collector.set_seed(7, static_seed=True) == 7
    collector.set_seed(8)
    assert seen == [(7, True), (8, False)]


def test_state_dict_layout_and_iter():
    """torchrl's keys, in its order; ``iter`` is the index of the last batch (-1 before the first)."""
    policy = TensorDictModule(TanhPolicy(), in_keys=["observation"], out_keys=["action"])
    collector = SyncDataCollector(GymEnv("Pendulum-v1"), policy, frames_per_batch=5, total_frames=20)
    state = collector.state_dict()
    assert list(state) == ["policy_state_dict", "env_state_dict", "frames", "iter", "traj_pool"]
    assert (state["frames"], state["iter"], int(state["traj_pool"]["traj_id"])) == (0, -1, 0)
    assert dict(state["env_state_dict"]) == {}
    collect(collector, n=2)
    state = collector.state_dict()
    assert (state["frames"], state["iter"], int(state["traj_pool"]["traj_id"])) == (10, 1, 1)
    plain = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=20).state_dict()
    assert list(plain) == ["env_state_dict", "frames", "iter", "traj_pool"]


def test_load_state_dict_in_place_gives_the_running_trajectory_a_fresh_id():
    """As torchrl: the restored counter names the trajectories that go on, so no id is used twice."""
    collector = SyncDataCollector(GymEnv(COUNTER, terminate_at=3), constant_policy(1), frames_per_batch=4,
                                  total_frames=-1)
    it = iter(collector)
    ids = [arr(next(it)["collector", "traj_ids"]) for _ in range(2)]
    state = collector.state_dict()  # next id 3; trajectory 2 is running
    ids += [arr(next(it)["collector", "traj_ids"]) for _ in range(2)]
    collector.load_state_dict(state)
    ids += [arr(next(it)["collector", "traj_ids"]) for _ in range(2)]
    np.testing.assert_array_equal(np.concatenate(ids), [0, 0, 0, 1, 1, 1, 2, 2,   # before the state_dict
                                                        2, 3, 3, 3, 4, 4, 4, 5,   # then
                                                        3, 3, 4, 4, 4, 5, 5, 5])  # after loading it: the
    # running trajectory (5, frame 15 of 15..17) goes on as 3, as torchrl does
    old = {k: v for k, v in state.items() if k != "traj_pool"}
    old["next_traj_id"] = 9  # rlpipe's earlier layout still loads
    collector.load_state_dict(old)
    np.testing.assert_array_equal(arr(next(it)["collector", "traj_ids"]), [9, 9, 9, 10])


def test_reset_with_an_index():
    single = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10)
    with pytest.raises(RuntimeError, match="resetting unique env with index is not permitted"):
        single.reset(0)
    vector = SyncDataCollector(GymEnv(COUNTER, num_envs=2), None, frames_per_batch=4, total_frames=8)
    with pytest.raises(NotImplementedError, match="resetting only some"):
        vector.reset(1)


def test_next():
    collector = SyncDataCollector(GymEnv(COUNTER), None, frames_per_batch=5, total_frames=10)
    b0, b1, end = collector.next(), collector.next(), collector.next()
    assert b0.batch_size == b1.batch_size == rlpipe.Size([5]) and end is None
    np.testing.assert_array_equal(arr(b1["observation"])[:, 0], [0, 1, 2, 3, 4])


def test_env_state_dict_carries_observation_norm_statistics():
    """A collector checkpoint restores the transforms' state (here ObservationNorm's loc/scale)."""
    from rlpipe.envs import Compose, ObservationNorm, StepCounter, TransformedEnv

    def make_env(loc=None, scale=None):
        return TransformedEnv(GymEnv(COUNTER), Compose(StepCounter(), ObservationNorm(loc, scale)))
    source = SyncDataCollector(make_env(rlpipe.tensor([1.0]), rlpipe.tensor([2.0])), constant_policy(0),
                               frames_per_batch=4, total_frames=8)
    state = source.state_dict()
    assert list(state["env_state_dict"]) == ["transforms.1.loc", "transforms.1.scale"]  # torchrl's names
    target = SyncDataCollector(make_env(rlpipe.tensor([0.0]), rlpipe.tensor([1.0])), constant_policy(0),
                               frames_per_batch=4, total_frames=8)
    target.load_state_dict(state)
    batch = next(iter(target))
    np.testing.assert_array_equal(arr(batch["observation"]).ravel(), [1.0, 3.0, 5.0, 7.0])  # t * 2 + 1


def test_torchrl_014_collector_names_are_the_same_classes():
    import rlpipe.collectors as c
    from rlpipe.collectors import collectors as single
    from rlpipe.collectors.collectors import MultiAsyncCollector, MultiCollector, MultiSyncCollector
    from rlpipe.collectors.distributed import RayCollector
    assert c.Collector is c.SyncDataCollector is single.Collector
    assert c.MultiSyncCollector is c.MultiSyncDataCollector is MultiSyncCollector
    assert c.MultiAsyncCollector is c.MultiaSyncDataCollector is MultiAsyncCollector
    assert c.MultiCollector is MultiCollector
    for cls in (c.Collector, c.MultiSyncCollector, c.MultiAsyncCollector, RayCollector):
        assert issubclass(cls, c.BaseCollector)
    assert issubclass(c.MultiSyncCollector, c.MultiCollector) and issubclass(c.MultiAsyncCollector, c.MultiCollector)
    new_names = {"Collector", "MultiSyncCollector", "MultiAsyncCollector", "BaseCollector", "MultiCollector"}
    assert new_names <= set(c.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'AsyncCollector'"):
        single.AsyncCollector


# ---- exploration type: the policy runs under torchrl's default, RANDOM, unless told otherwise --------------

class RecordsExploration:
    """A TensorDict policy that records the exploration type it is called under."""

    def __init__(self, env):
        self.env, self.seen = env, []

    def __call__(self, td):
        from rlpipe.envs.utils import exploration_type
        self.seen.append(exploration_type())
        return td.set("action", self.env.action_spec.zero())


@pytest.mark.parametrize("given, expected", [(None, "random"), ("mode", "mode"), ("DETERMINISTIC", "deterministic")])
def test_policy_runs_under_the_exploration_type(given, expected):
    from rlpipe.envs.utils import ExplorationType, exploration_type
    env = GymEnv("CartPole-v1")
    policy = RecordsExploration(env)
    kwargs = {} if given is None else {"exploration_type": given}
    collector = SyncDataCollector(env, policy, frames_per_batch=5, total_frames=10, **kwargs)
    assert collector.exploration_type is ExplorationType(expected)
    for _ in collector:
        assert exploration_type() is None, "the exploration type must not leak out of the batch"
    assert policy.seen and set(policy.seen) == {ExplorationType(expected)}


def test_bad_exploration_type():
    with pytest.raises(ValueError, match="'sometimes' is not a valid InteractionType"):
        SyncDataCollector(lambda: GymEnv("CartPole-v1"), None, frames_per_batch=5, total_frames=10,
                          exploration_type="sometimes")


def test_nested_observations_stay_nested_in_the_batch():
    """A Dict observation space holding a Dict (test_gym_env's Sensors: t steps since the reset,
    done at t = 4): the batch keeps ("sensors", "mode") and ("sensors", "bits") in a nested
    TensorDict, at the root and under "next", with the env's values at every step."""
    from test_gym_env import SENSORS
    with SyncDataCollector(GymEnv(SENSORS), None, frames_per_batch=6, total_frames=6) as c:
        (batch,) = list(c)
    t = np.array([0, 1, 2, 3, 0, 1])
    t_next = np.array([1, 2, 3, 4, 1, 2])
    for td, steps in ((batch, t), (batch["next"], t_next)):
        assert isinstance(td.get("sensors"), rlpipe.TensorDict)
        assert tuple(td.get("sensors").batch_size) == (6,)
        np.testing.assert_array_equal(arr(td["sensors", "mode"]).argmax(-1), steps % 3)  # one-hot
        bits = arr(td["sensors", "bits"])
        assert bits.shape == (6, 4) and bits.dtype == np.int8
        np.testing.assert_array_equal(bits, (steps[:, None] >> np.arange(4)) & 1)
        np.testing.assert_array_equal(arr(td["position"]), np.stack([steps, -steps], -1))
    np.testing.assert_array_equal(arr(batch["next", "done"])[:, 0], t_next == 4)


@pytest.mark.parametrize("seed", range(3))
def test_trajectory_ids_equal_a_step_by_step_update(seed):
    from rlpipe.collectors.collectors import trajectory_ids
    rng = np.random.default_rng(seed)
    steps, n = 9, 4
    dones = rng.random((steps, n)) < 0.3
    start = np.array([7, 3, 9, 5], np.int64)
    counter = [100]

    def new_ids(count):
        counter[0] += count
        return np.arange(counter[0] - count, counter[0], dtype=np.int64)

    ids, after = trajectory_ids(dones, start, new_ids)
    expected, current, next_id = [], start.copy(), 100
    for step in range(steps):
        expected.append(current.copy())
        for env in np.flatnonzero(dones[step]):
            current[env], next_id = next_id, next_id + 1
    np.testing.assert_array_equal(ids, np.array(expected))
    np.testing.assert_array_equal(after, current)
    assert counter[0] == next_id
    none, same = trajectory_ids(np.zeros((0, n), bool), start, new_ids)
    assert none.shape == (0, n) and same is start
