"""Vector envs in every Gymnasium autoreset mode, checked transition by transition.

A counter env (the observation is [step in episode, env index, episode number, sum of the
episode's actions], the reward the step index, episodes of varying length ending terminated or
truncated) runs as a native NEXT_STEP vector env without partial reset (the collector drops the
skipped reset steps), as Gymnasium's SyncVectorEnv in NEXT_STEP, SAME_STEP and DISABLED mode
(partial resets), and every batch the collector delivers is compared with a brute-force
expectation: the observations, actions, rewards, done flags, step counts, episode rewards and
trajectory ids of each env's transitions, with exact frame counts. Then Gymnasium's native
CartPole vector env and envpool (when installed) are checked for the invariants a real env allows.
"""
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import rlpipe
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import Compose, GymEnv, GymWrapper, RewardSum, StepCounter, TransformedEnv
from rlpipe.tensordict import TensorDictModule

AutoresetMode = gym.vector.AutoresetMode


def episode_length(env, episode):
    return 2 + (3 * env + episode) % 4


def ends_terminated(env, episode):
    return (env + episode) % 2 == 0


class Counter(gym.Env):
    """One counter env (``index``): the transitions ``expected_rows`` predicts."""
    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, index=0):
        self.index = index
        self.observation_space = spaces.Box(0.0, 1e6, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode = -1

    def _obs(self):
        return np.array([self.t, self.index, self.episode, self.actions], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = self.actions = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.actions += int(action)
        done = self.t >= episode_length(self.index, self.episode)
        terminated = done and ends_terminated(self.index, self.episode)
        return self._obs(), float(self.t), terminated, done and not terminated, {}


class CounterVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` counters stepped together, as Gymnasium's native vector envs are: NEXT_STEP
    autoreset (the step after a done resets that env, reward 0) and no partial reset."""
    metadata: ClassVar[dict] = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs=4):
        self.num_envs = num_envs
        self.single_observation_space = spaces.Box(0.0, 1e6, (4,), np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.index = np.arange(num_envs)

    def _obs(self):
        return np.stack([self.t, self.index, self.episode, self.actions], axis=1).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        self.t, self.episode, self.actions = (np.zeros(self.num_envs, np.int64) for _ in range(3))
        self.autoreset = np.zeros(self.num_envs, bool)
        return self._obs(), {}

    def step(self, actions):
        actions = np.asarray(actions)
        assert actions.shape == (self.num_envs,), actions.shape
        self.t += 1
        self.actions += actions
        reward = self.t.astype(np.float64)
        done = self.t >= episode_length(self.index, self.episode)
        terminated = done & ends_terminated(self.index, self.episode)
        truncated = done & ~terminated
        reset = self.autoreset
        self.t[reset], self.actions[reset], reward[reset] = 0, 0, 0.0
        self.episode[reset] += 1
        terminated[reset] = truncated[reset] = False
        self.autoreset = terminated | truncated
        return self._obs(), reward, terminated, truncated, {}


def counter_env(mode, num_envs):
    """The counter vector env in ``mode``: "native" (skips), or a SyncVectorEnv autoreset mode."""
    if mode == "native":
        return CounterVectorEnv(num_envs)
    return gym.vector.SyncVectorEnv([lambda i=i: Counter(i) for i in range(num_envs)],
                                    autoreset_mode=getattr(AutoresetMode, mode))


MODES = ["native", "NEXT_STEP", "SAME_STEP", "DISABLED"]


def expected_rows(num_envs, steps, lag, max_steps=None):
    """Brute force: per env, its first ``steps`` transitions as a dict of arrays [envs, steps]
    (t, episode, reward, terminated, truncated, traj id). ``lag``: the steps an env loses after each
    episode the env itself ends (1 when the vector env resets it in a step of its own), which
    orders the new trajectory ids: a done at an earlier step (then at a lower env index) gets the
    lower id. ``max_steps``: a StepCounter's truncation, which the wrapper resets at once."""
    rows = {k: np.zeros((num_envs, steps), np.int64) for k in ("t", "episode", "reward", "terminated", "truncated")}
    ends = []  # (global step of the done, env, episode that ends)
    for i in range(num_envs):
        t = episode = lost = 0
        for j in range(steps):
            length = episode_length(i, episode)
            rows["t"][i, j], rows["episode"][i, j], rows["reward"][i, j] = t, episode, t + 1
            by_env, by_counter = t + 1 == length, max_steps is not None and t + 1 == max_steps
            if by_env or by_counter:
                rows["terminated"][i, j] = by_env and ends_terminated(i, episode)
                rows["truncated"][i, j] = by_counter or not ends_terminated(i, episode)
                ends.append((j + lost, i, episode))
                lost += lag if by_env else 0
                t, episode = 0, episode + 1
            else:
                t += 1
    ids = {(i, 0): i for i in range(num_envs)}
    for rank, (_, i, episode) in enumerate(sorted(ends)):
        ids[(i, episode + 1)] = num_envs + rank
    rows["traj"] = np.vectorize(lambda i, e: ids[(int(i), int(e))])(np.arange(num_envs)[:, None], rows["episode"])
    return rows


def arr(x):
    return np.asarray(x.numpy())


def collect(env, frames_per_batch, batches, **kwargs):
    """The collector's batches, concatenated along time, with the frame count checks."""
    collector = SyncDataCollector(env, frames_per_batch=frames_per_batch,
                                  total_frames=frames_per_batch * batches, **kwargs)
    out = []
    for batch in collector:
        assert tuple(batch.batch_size) == (env.batch_size[0], frames_per_batch // env.batch_size[0])
        out.append(batch)
    assert collector._frames == frames_per_batch * batches
    collector.shutdown()
    return rlpipe.cat(out, 1)


def check_counter_batch(data, num_envs, lag, transforms=True, max_steps=None):
    steps = data.batch_size[1]
    want = expected_rows(num_envs, steps, lag, max_steps)
    obs, nxt = arr(data["observation"]), arr(data["next", "observation"])
    action = arr(data["action"]).argmax(-1)
    np.testing.assert_array_equal(obs[..., 0], want["t"])
    np.testing.assert_array_equal(obs[..., 1], np.arange(num_envs)[:, None] + 0 * want["t"])
    np.testing.assert_array_equal(obs[..., 2], want["episode"])
    np.testing.assert_array_equal(nxt[..., 0], want["t"] + 1)
    np.testing.assert_array_equal(nxt[..., 2], want["episode"])
    np.testing.assert_array_equal(nxt[..., 3], obs[..., 3] + action)  # the recorded action is the one applied
    np.testing.assert_array_equal(obs[..., 3][want["t"] == 0], 0)
    later = want["t"][:, 1:] > 0  # within an episode, a step starts where the last one ended
    np.testing.assert_array_equal(obs[:, 1:][later], nxt[:, :-1][later])
    np.testing.assert_array_equal(arr(data["next", "reward"])[..., 0], want["reward"])
    np.testing.assert_array_equal(arr(data["next", "terminated"])[..., 0], want["terminated"])
    np.testing.assert_array_equal(arr(data["next", "truncated"])[..., 0], want["truncated"])
    np.testing.assert_array_equal(arr(data["next", "done"])[..., 0], want["terminated"] | want["truncated"])
    assert not arr(data["done"]).any()
    np.testing.assert_array_equal(arr(data["collector", "traj_ids"]), want["traj"])
    if transforms:
        t = want["t"]
        np.testing.assert_array_equal(arr(data["step_count"])[..., 0], t)
        np.testing.assert_array_equal(arr(data["next", "step_count"])[..., 0], t + 1)
        np.testing.assert_array_equal(arr(data["episode_reward"])[..., 0], t * (t + 1) / 2)
        np.testing.assert_array_equal(arr(data["next", "episode_reward"])[..., 0], (t + 1) * (t + 2) / 2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("steps_per_batch", [1, 3, 7])
def test_counter_transitions_exact(mode, steps_per_batch):
    num_envs = 5
    base = GymWrapper(counter_env(mode, num_envs))
    assert base._skips_rows == (mode in ("native", "NEXT_STEP"))
    env = TransformedEnv(base, Compose(StepCounter(), RewardSum()))
    data = collect(env, num_envs * steps_per_batch, batches=40 // steps_per_batch + 2)
    check_counter_batch(data, num_envs, lag=1 if mode in ("native", "NEXT_STEP") else 0)


@pytest.mark.parametrize("mode", ["native", "NEXT_STEP"])
def test_counter_untransformed_and_random_frames(mode):
    """No transforms, and the first batches random (init_random_frames): the same transitions."""
    env = GymWrapper(counter_env(mode, 3))
    data = collect(env, 12, batches=6, init_random_frames=24)
    check_counter_batch(data, 3, lag=1, transforms=False)


def test_counter_policy_outputs_follow_their_transitions():
    """What a TensorDict policy writes besides the action (here, a copy of its observation) stays
    with its own transition when the reset steps are dropped."""
    class Policy(rlpipe.nn.Module):
        def forward(self, observation):
            action = rlpipe.nn.functional.one_hot((observation[..., 0] % 2).long(), 2)
            return action, observation * 1.0

    env = GymWrapper(counter_env("native", 4))
    policy = TensorDictModule(Policy(), in_keys=["observation"], out_keys=["action", "seen"])
    data = collect(env, 16, batches=5, policy=policy)
    np.testing.assert_array_equal(arr(data["seen"]), arr(data["observation"]))
    np.testing.assert_array_equal(arr(data["action"]).argmax(-1), arr(data["observation"])[..., 0] % 2)
    check_counter_batch(data, 4, lag=1, transforms=False)


def test_counter_carry_over_restarts_with_the_env():
    """Steps an env ran ahead of the batch are delivered first in the next batch; a reset of the
    collector (or an error inside a batch) drops them with the running trajectories."""
    env = GymWrapper(counter_env("native", 4))
    collector = SyncDataCollector(env, frames_per_batch=12, total_frames=-1)
    first = next(iter(collector))
    assert collector._carried is not None  # env 0 lost a step to its reset: the others ran ahead
    collector.reset()
    second = collector.rollout()
    assert tuple(second.batch_size) == (4, 3)
    # a fresh start: trajectories restart at t=0 under new ids
    np.testing.assert_array_equal(arr(second["observation"])[:, 0, 0], 0)
    assert arr(second["collector", "traj_ids"]).min() > arr(first["collector", "traj_ids"]).max()
    collector.shutdown()


def test_native_env_rejects_a_truncation_it_did_not_make():
    env = TransformedEnv(GymWrapper(counter_env("native", 3)), StepCounter(max_steps=1))
    collector = SyncDataCollector(env, frames_per_batch=6, total_frames=12)
    with pytest.raises(RuntimeError, match=r"envs \[0, 1, 2\] are done but the vector env did not end"):
        next(iter(collector))
    # a vector env with partial resets restarts them
    env = TransformedEnv(GymWrapper(counter_env("NEXT_STEP", 3)), StepCounter(max_steps=1))
    data = collect(env, 6, batches=2)
    np.testing.assert_array_equal(arr(data["observation"])[..., 0], 0)
    assert arr(data["next", "truncated"]).all()


def test_next_step_env_skips_its_own_ends_and_resets_a_transforms():
    """A NEXT_STEP env with partial resets: an episode the env ends costs a skipped step (its
    autoreset), one a StepCounter truncates is reset at once; both exact, in one batch."""
    env = TransformedEnv(GymWrapper(counter_env("NEXT_STEP", 5)), Compose(StepCounter(max_steps=4), RewardSum()))
    data = collect(env, 5 * 4, batches=12)
    check_counter_batch(data, 5, lag=1, max_steps=4)
    assert arr(data["next", "truncated"]).sum() > arr(data["next", "terminated"]).sum() > 0


def test_native_env_rollout():
    env = GymWrapper(counter_env("native", 3))
    td = env.rollout(10)  # stops at the first done: exact
    assert tuple(td.batch_size) == (3, 2)
    np.testing.assert_array_equal(arr(td["next", "done"])[0, :, 0], [False, True])
    with pytest.raises(NotImplementedError, match="break_when_any_done=True"):
        env.rollout(10, break_when_any_done=False)
    partial = GymWrapper(counter_env("NEXT_STEP", 3)).rollout(10, break_when_any_done=False)
    obs = arr(partial["observation"])
    np.testing.assert_array_equal(obs[..., 0], expected_rows(3, 10, 0)["t"])


def test_autoreset_mode_checks():
    env = CounterVectorEnv(2)
    env.metadata = {"autoreset_mode": "Sometimes"}
    with pytest.raises(ValueError, match="unknown autoreset_mode 'Sometimes'"):
        GymWrapper(env)
    env.metadata = {}  # Gymnasium's default: NEXT_STEP
    assert GymWrapper(env)._skips_rows
    native = GymEnv("CartPole-v1", num_envs=2, vectorization_mode=gym.VectorizeMode.VECTOR_ENTRY_POINT)
    assert native._skips_rows and not native._resets_rows  # Gymnasium's enum names the mode too
    with pytest.raises(ValueError, match="vectorization_mode must be 'sync', 'async' or 'vector_entry_point', "
                                         "got 'threads'"):
        GymEnv("CartPole-v1", num_envs=2, vectorization_mode="threads")


# ---- Gymnasium's native CartPole vector env ---------------------------------------------------------

def check_cartpole(data, max_steps):
    """What holds for every CartPole transition: reward 1 (the reset step, reward 0, is never
    delivered), an episode starts from a reset state (every entry within 0.05), continues from
    where its last step ended, and counts its steps."""
    obs, nxt = arr(data["observation"]), arr(data["next", "observation"])
    done = arr(data["next", "done"])[..., 0]
    step_count = arr(data["step_count"])[..., 0]
    assert (arr(data["next", "reward"]) == 1).all()
    starts = step_count == 0
    assert (np.abs(obs[starts]) <= 0.05).all()
    cont = ~done[:, :-1]
    np.testing.assert_array_equal(obs[:, 1:][cont], nxt[:, :-1][cont])
    np.testing.assert_array_equal(step_count[:, 1:][cont], step_count[:, :-1][cont] + 1)
    np.testing.assert_array_equal(step_count[:, 1:][done[:, :-1]], 0)
    assert step_count.max() < max_steps
    np.testing.assert_array_equal(arr(data["next", "truncated"])[..., 0], step_count == max_steps - 1)
    ids = arr(data["collector", "traj_ids"])
    np.testing.assert_array_equal(ids[:, 1:] != ids[:, :-1], done[:, :-1])
    return done.sum()


def test_native_cartpole_transitions():
    env = GymEnv("CartPole-v1", num_envs=16, vectorization_mode="vector_entry_point", max_episode_steps=30)
    assert env._skips_rows and type(env.env.unwrapped).__name__ == "CartPoleVectorEnv"
    env = TransformedEnv(env, StepCounter())
    env.set_seed(0)
    data = collect(env, 16 * 25, batches=4)
    assert check_cartpole(data, max_steps=30) > 20


# ---- envpool --------------------------------------------------------------------------------------------

def test_envpool_cartpole_transitions():
    pytest.importorskip("envpool")
    from rlpipe.envs import MultiThreadedEnv

    env = MultiThreadedEnv(8, "CartPole-v1", create_env_kwargs={"max_episode_steps": 30, "seed": 3})
    assert tuple(env.batch_size) == (8,) and env._skips_rows and env._resets_rows
    assert repr(env) == "MultiThreadedEnv(env=CartPole-v1, num_workers=8, device=None)"
    env = TransformedEnv(env, StepCounter())
    data = collect(env, 8 * 25, batches=4)
    assert check_cartpole(data, max_steps=30) > 10
    # a plain GymWrapper does not know envpool's partial reset: it skips the done envs the same way
    import envpool
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=8, max_episode_steps=30, seed=3)
    env = GymWrapper(pool)
    assert env._skips_rows and not env._resets_rows
    assert check_cartpole(collect(TransformedEnv(env, StepCounter()), 8 * 25, batches=4), max_steps=30) > 10
    # partial resets also serve a transform's own truncations, and rollouts through dones
    env = TransformedEnv(MultiThreadedEnv(4, "CartPole-v1"), StepCounter(max_steps=3))
    td = env.rollout(9, break_when_any_done=False)
    np.testing.assert_array_equal(arr(td["step_count"])[..., 0], np.tile([0, 1, 2], (4, 3)))
    assert (np.abs(arr(td["observation"])[:, ::3]) <= 0.05).all()


def test_envpool_seeding_and_bad_input():
    envpool = pytest.importorskip("envpool")
    from rlpipe.envs import MultiThreadedEnv, MultiThreadedEnvWrapper
    from rlpipe.envs.libs.envpool import MultiThreadedEnv as ByPath

    assert ByPath is MultiThreadedEnv
    env = MultiThreadedEnv(3, "CartPole-v1")
    assert type(env.action_spec).__name__ == "Categorical"  # torchrl's envpool action spec
    assert type(MultiThreadedEnv(3, "CartPole-v1", categorical_action_encoding=False).action_spec).__name__ == "OneHot"
    firsts = []
    for _ in range(2):
        env.set_seed(7)  # makes the pool anew: the same episodes
        firsts.append(arr(env.rollout(5)["observation"]))
    np.testing.assert_array_equal(firsts[0], firsts[1])
    env.set_seed(8)
    assert not np.array_equal(arr(env.rollout(5)["observation"]), firsts[0])

    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2)
    wrapped = MultiThreadedEnvWrapper(pool)
    assert repr(wrapped) == "MultiThreadedEnvWrapper(num_workers=2, device=None)"
    with pytest.warns(UserWarning, match="cannot be reseeded"):
        wrapped.set_seed(1)
    with pytest.raises(TypeError, match="env must be an envpool pool, got CounterVectorEnv"):
        MultiThreadedEnvWrapper(CounterVectorEnv(2))
    with pytest.raises(ValueError, match=r"only synchronous pools .* got batch_size=2, num_envs=4"):
        MultiThreadedEnvWrapper(envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2))
    with pytest.raises(ValueError, match="num_workers must be a positive integer, got 0"):
        MultiThreadedEnv(0, "CartPole-v1")
    with pytest.raises(ValueError, match="envpool could not make 'NoSuchEnv-v0'"):
        MultiThreadedEnv(2, "NoSuchEnv-v0")
