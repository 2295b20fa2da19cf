"""The env step protocol's rule (rlpipe/envs/step_protocol.py): a transform written only against
TensorDicts and specs, as torchrl's are, works in ``rollout``, ``reset``/``step``,
``SyncDataCollector`` and ``MultiSyncDataCollector``, through partial resets of vector envs and the
skipped rows of a native vector env. Each check is a hand computation: CartPole's equations of
motion for the action the base env received, the reward scale, and an episode clock and first
observation restarted at every trajectory start."""
import numpy as np
import pytest

import rlpipe
from rlpipe.collectors import MultiSyncDataCollector, SyncDataCollector
from rlpipe.data import LazyTensorStorage, ReplayBuffer
from rlpipe.envs import (Bounded, Compose, GymEnv, StepCounter, Transform, TransformedEnv, Unbounded,
                         check_env_specs)

SCALE = 0.5


class ScaleReward(Transform):
    """torchrl style: the reward scaled in ``_call``, its spec left as it is (Unbounded)."""

    def __init__(self, scale):
        super().__init__(in_keys=["reward"], out_keys=["reward"])
        self.scale = scale

    def _call(self, next_tensordict):
        next_tensordict.set("reward", next_tensordict.get("reward") * self.scale)
        return next_tensordict


class EpisodeStart(Transform):
    """torchrl style: adds ``clock`` (steps since the episode's reset, float32) and ``first_obs``
    (the episode's first observation), restarted by ``_reset`` in the rows under ``"_reset"``."""

    def __init__(self):
        super().__init__(in_keys=["observation"], out_keys=["clock", "first_obs"])

    def _reset(self, tensordict, tensordict_reset):
        obs = tensordict_reset.get("observation")
        clock = rlpipe.zeros(*obs.shape[:-1], 1)
        first = obs.clone()
        mask = tensordict.get("_reset", None)
        if mask is not None:  # a partial reset: the other rows go on
            clock = rlpipe.where(mask, clock, tensordict.get("clock"))
            first = rlpipe.where(mask, first, tensordict.get("first_obs"))
        tensordict_reset.set("clock", clock)
        tensordict_reset.set("first_obs", first)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        next_tensordict.set("clock", tensordict.get("clock") + 1)
        next_tensordict.set("first_obs", tensordict.get("first_obs").clone())
        return next_tensordict

    def transform_observation_spec(self, observation_spec):
        obs = observation_spec["observation"]
        observation_spec["clock"] = Unbounded(shape=tuple(obs.shape[:-1]) + (1,), dtype="float32")
        observation_spec["first_obs"] = obs.clone()
        return observation_spec


class FlipAction(Transform):
    """torchrl style: the outside action ``a`` (CartPole, categorical) reaches the env as ``1 - a``."""

    def _inv_call(self, tensordict):
        tensordict.set("action", 1 - tensordict.get("action"))
        return tensordict


class HalveAction(Transform):
    """torchrl style, by keys: the outside action in [-1, 1] reaches Pendulum doubled, in [-2, 2]
    (``_inv_apply_transform``), and the action spec says so (``transform_input_spec``)."""

    def __init__(self):
        super().__init__(in_keys_inv=["action"], out_keys_inv=["action"])

    def _inv_apply_transform(self, action):
        return action * 2

    def transform_input_spec(self, input_spec):
        action = input_spec["full_action_spec", "action"]
        input_spec["full_action_spec", "action"] = Bounded(-1.0, 1.0, shape=action.shape, dtype=action.dtype)
        return input_spec


def cartpole_env(**kwargs):
    env = GymEnv("CartPole-v1", categorical_action_encoding=True, **kwargs)
    return TransformedEnv(env, Compose(FlipAction(), ScaleReward(SCALE), EpisodeStart(), StepCounter()))


def cartpole_next(obs, action):
    """CartPole-v1's Euler step (Gymnasium's equations and constants) from observations [..., 4] and
    actions [...] (1 pushes right)."""
    x, x_dot, theta, theta_dot = (obs[..., i].astype(np.float64) for i in range(4))
    force = np.where(action == 1, 10.0, -10.0)
    cos, sin = np.cos(theta), np.sin(theta)
    temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
    theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
    x_acc = temp - 0.05 * theta_acc * cos / 1.1
    return np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                     theta_dot + 0.02 * theta_acc], axis=-1)


def arrays(td):
    return {key: np.asarray(td[key]) for key in (
        "observation", "action", "clock", "first_obs", "step_count", ("next", "observation"), ("next", "reward"),
        ("next", "done"), ("next", "clock"), ("next", "first_obs"), ("next", "step_count"))}


def check_cartpole(td, starts):
    """Every transition of ``td`` ([*envs, T]) against the hand computation; ``starts`` [*envs, T]:
    where a trajectory starts (its root comes from a reset)."""
    a = arrays(td)
    assert a["action"].dtype.kind == "i" and set(np.unique(a["action"])) <= {0, 1}
    # the base env pushed the other way than the recorded (outside) action
    np.testing.assert_allclose(a["next", "observation"], cartpole_next(a["observation"], 1 - a["action"]), atol=1e-4)
    np.testing.assert_array_equal(a["next", "reward"], np.full(a["next", "reward"].shape, SCALE, np.float32))
    np.testing.assert_array_equal(a["next", "clock"], a["clock"] + 1)
    np.testing.assert_array_equal(a["next", "first_obs"], a["first_obs"])
    np.testing.assert_array_equal(a["clock"], a["step_count"])  # StepCounter (the array fast path) agrees
    np.testing.assert_array_equal(a["next", "clock"], a["next", "step_count"])
    assert starts.any() and (~starts).any()
    np.testing.assert_array_equal(a["clock"][starts], 0)
    np.testing.assert_array_equal(a["first_obs"][starts], a["observation"][starts])
    later = ~starts[..., 1:]  # a step that goes on from the step before it
    for key in ("clock", "first_obs"):
        np.testing.assert_array_equal(a[key][..., 1:, :][later], a["next", key][..., :-1, :][later])


def starts_after_done(td):
    done = np.asarray(td["next", "done"])[..., 0]
    return np.concatenate([np.ones_like(done[..., :1]), done[..., :-1]], axis=-1)


def starts_of_trajectories(ids):
    return np.concatenate([np.ones_like(ids[..., :1], dtype=bool), ids[..., 1:] != ids[..., :-1]], axis=-1)


def collected(collector, batches):
    """``batches`` batches joined along time, and where their trajectories start."""
    tds = [b for _, b in zip(range(batches), collector)]
    td = rlpipe.cat(tds, dim=-1) if len(tds) > 1 else tds[0]
    return td, starts_of_trajectories(np.asarray(td["collector", "traj_ids"]))


def test_specs_are_transformed():
    env = cartpole_env(num_envs=3)
    base = env.base_env
    spec = env.observation_spec
    assert tuple(spec["clock"].shape) == (3, 1) and spec["clock"].dtype is rlpipe.float32
    assert tuple(spec["first_obs"].shape) == tuple(base.observation_spec["observation"].shape)
    assert "clock" not in base.observation_spec.keys()
    check_env_specs(env, seed=0)
    pendulum = TransformedEnv(GymEnv("Pendulum-v1"), HalveAction())
    assert np.asarray(pendulum.action_spec.space.high).tolist() == [1.0]
    assert np.asarray(pendulum.base_env.action_spec.space.high).tolist() == [2.0]
    check_env_specs(pendulum, seed=0)


@pytest.mark.parametrize("num_envs", [None, 3])
def test_rollout_through_partial_resets(num_envs):
    env = cartpole_env(num_envs=num_envs)
    env.set_seed(0)
    td = env.rollout(80, break_when_any_done=False)
    check_cartpole(td, starts_after_done(td))
    assert np.asarray(td["next", "done"]).sum() >= (3 if num_envs else 2)  # episodes ended and went on


def test_reset_and_step_by_hand():
    env = cartpole_env()
    td = env.reset()
    np.testing.assert_array_equal(np.asarray(td["clock"]), [0.0])
    np.testing.assert_array_equal(np.asarray(td["first_obs"]), np.asarray(td["observation"]))
    td.set("action", rlpipe.tensor(0))
    out = env.step(td)
    expected = cartpole_next(np.asarray(td["observation"]), np.array(1))
    np.testing.assert_allclose(np.asarray(out["next", "observation"]), expected, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(out["next", "clock"]), [1.0])
    np.testing.assert_array_equal(np.asarray(out["next", "reward"]), [SCALE])


@pytest.mark.parametrize("kwargs", [{}, {"num_envs": 3}, {"num_envs": 3, "vectorization_mode": "vector_entry_point"}],
                         ids=["single", "sync", "native-skipping"])
def test_sync_collector(kwargs):
    env = cartpole_env(**kwargs)
    env.set_seed(1)
    assert env._skips_rows == ("vectorization_mode" in kwargs)
    collector = SyncDataCollector(env, frames_per_batch=48, total_frames=-1)
    td, starts = collected(collector, 4)
    check_cartpole(td, starts)
    collector.shutdown()


def test_multisync_collector():
    with MultiSyncDataCollector(lambda: cartpole_env(num_envs=2), None, num_workers=2, frames_per_batch=96,
                                total_frames=192) as collector:
        td, starts = collected(collector, 2)
    assert tuple(td.batch_size) == (2, 2, 48)  # [workers, envs, time]
    check_cartpole(td, starts)


def pendulum_reward(obs, action):
    """Pendulum-v1's reward for the state ``obs`` [..., 3] (cos, sin, speed) and torque [..., 1]."""
    theta = np.arctan2(obs[..., 1], obs[..., 0])
    torque = np.clip(action[..., 0], -2.0, 2.0)
    return -(theta ** 2 + 0.1 * obs[..., 2] ** 2 + 0.001 * torque ** 2)


def test_inverse_by_keys_in_rollout_and_collector():
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(HalveAction(), ScaleReward(SCALE)))
    env.set_seed(0)
    rollout = env.rollout(30)
    collector = SyncDataCollector(env, frames_per_batch=30, total_frames=30)
    for td in (rollout, next(iter(collector))):
        action = np.asarray(td["action"])
        assert np.abs(action).max() <= 1.0 and np.abs(action).max() > 0.5
        expected = SCALE * pendulum_reward(np.asarray(td["observation"]), 2 * action)
        np.testing.assert_allclose(np.asarray(td["next", "reward"])[..., 0], expected, rtol=1e-4, atol=1e-5)
    collector.shutdown()


class ShiftObservation(Transform):
    """torchrl style, by keys: ``shifted = observation + 1`` through ``_apply_transform``; mapped at
    resets too, as torchrl's observation transforms do it (``_reset`` calls ``_call``)."""

    def __init__(self):
        super().__init__(in_keys=["observation"], out_keys=["shifted"])

    def _apply_transform(self, observation):
        return observation + 1

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        observation_spec["shifted"] = Unbounded(shape=observation_spec["observation"].shape, dtype="float32")
        return observation_spec


def test_apply_transform_in_an_env_and_in_a_replay_buffer():
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=2), ShiftObservation())
    env.set_seed(0)
    td = SyncDataCollector(env, frames_per_batch=60, total_frames=60).next()
    for prefix in ((), ("next",)):
        np.testing.assert_array_equal(np.asarray(td[prefix + ("shifted",)]),
                                      np.asarray(td[prefix + ("observation",)]) + 1)
    buffer = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=8, transform=ShiftObservation())
    buffer.extend(td.exclude("shifted", ("next", "shifted")).reshape(-1))
    sample = buffer.sample()
    np.testing.assert_array_equal(np.asarray(sample["shifted"]), np.asarray(sample["observation"]) + 1)


def test_a_transform_with_the_old_frame_hook_names_is_refused_where_it_is_defined():
    with pytest.raises(TypeError, match=r"Old defines \['_continue', '_inv_action'\], frame hooks rlpipe renamed"):
        type("Old", (Transform,), {"_continue": lambda self, n, f, d: f, "_inv_action": lambda self, a: a})


def test_frame_to_tensordict_wraps_host_arrays_and_checks_shapes():
    """A frame's NumPy arrays become the TensorDict's leaves without a copy (as ``as_tensor``),
    keeping their dtypes; other values go through ``as_tensor``; nested keys and a prefix nest;
    an array without the batch dims is refused as ``set`` refuses it."""
    from rlpipe.envs.step_protocol import frame_to_tensordict
    obs = np.arange(6, dtype=np.float64).reshape(2, 3)
    flags = np.array([[True], [False]])
    counts = np.array([[3], [4]], dtype=np.int32)
    frame = {("observation",): obs, ("done",): flags, ("agent", "count"): counts, ("listed",): [[1.0], [2.0]]}
    td = frame_to_tensordict(frame, (2,), prefix=("next",))
    assert td["next", "observation"].dtype == rlpipe.float64
    assert td["next", "observation"].numpy() is obs or np.shares_memory(td["next", "observation"].numpy(), obs)
    assert td["next", "done"].dtype == rlpipe.bool and td["next", "done"].tolist() == [[True], [False]]
    assert td["next", "agent", "count"].dtype == rlpipe.int32 and td["next", "agent", "count"].tolist() == [[3], [4]]
    assert td["next", "listed"].dtype == rlpipe.float32 and td["next", "listed"].tolist() == [[1.0], [2.0]]
    assert td.batch_size == (2,) and td["next"].batch_size == (2,)
    with pytest.raises(RuntimeError, match=r"batch dimension mismatch.*\[3, 2\].*'obs'"):
        frame_to_tensordict({("obs",): np.zeros((3, 2))}, (2,))


@pytest.mark.parametrize("seed", range(4))
def test_pick_transitions_against_a_brute_force_walk(seed):
    """Each env's first T data rows, walked step by step, and the data rows beyond them."""
    from rlpipe.envs.step_protocol import pick_transitions
    rng = np.random.default_rng(seed)
    n, T, steps = 5, 6, 11
    dropped = [None if rng.random() < 0.3 else rng.random(n) < 0.3 for _ in range(steps)]
    dropped[0] = np.zeros(n, bool)  # a mask with nothing dropped is allowed too
    envs, picked, rest = pick_transitions(dropped, n, T)
    expected_pairs, expected_rest = [], np.zeros((n, steps), bool)
    for e in range(n):
        rows = [s for s in range(steps) if dropped[s] is None or not dropped[s][e]]
        expected_pairs += [(e, s) for s in rows[:T]]
        expected_rest[e, rows[T:]] = True
    assert list(zip(envs.tolist(), picked.tolist())) == expected_pairs
    np.testing.assert_array_equal(rest, expected_rest)
