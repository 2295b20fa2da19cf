"""SerialEnv, ParallelEnv and EnvCreator (torchrl 0.14's batched envs on the env step protocol)."""
import functools
import gc
import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest

import rlpipe
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import EnvCreator, GymEnv, ParallelEnv, SerialEnv, StepCounter, TransformedEnv

BATCHED = [SerialEnv, ParallelEnv]
T = 60  # steps per rollout: with random CartPole actions, episodes end at different steps


def cartpole(**kwargs):
    return GymEnv("CartPole-v1", **kwargs)


def table_policy(actions):
    """A policy playing ``actions[..., t]`` (indices) at its t-th call, one-hot."""
    count = [0]

    def policy(td):
        index = actions[..., count[0]]
        count[0] += 1
        td.set("action", rlpipe.as_tensor(np.eye(2, dtype=np.int64)[index]))
        return td
    return policy


def rollout_arrays(td):
    return {key: td[key].numpy() for key in ("observation", ("next", "observation"), ("next", "reward"),
                                              ("next", "done"), ("next", "terminated"))}


def one_by_one(actions, seeds, **kwargs):
    """The rollouts of separate envs seeded ``seeds``, stacked along a leading dim."""
    outs = []
    for i, seed in enumerate(seeds):
        env = cartpole(**kwargs)
        env.set_seed(seed)
        outs.append(rollout_arrays(env.rollout(T, table_policy(actions[i]), break_when_any_done=False)))
        env.close()
    return {key: np.stack([out[key] for out in outs]) for key in outs[0]}


@pytest.mark.parametrize("cls", BATCHED)
def test_rollout_equals_envs_stepped_one_by_one(cls):
    actions = np.random.default_rng(0).integers(0, 2, size=(3, T))
    env = cls(3, cartpole)
    assert env.batch_size == rlpipe.Size([3])
    assert env.set_seed(7) == 10  # worker i seeded 7 + i, the next seed returned
    got = rollout_arrays(env.rollout(T, table_policy(actions), break_when_any_done=False))
    env.close()
    want = one_by_one(actions, [7, 8, 9])
    done_steps = [tuple(np.flatnonzero(d)) for d in want[("next", "done")].reshape(3, T)]
    assert len(set(done_steps)) == 3 and all(done_steps)  # partial resets at different steps
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=str(key))


@pytest.mark.parametrize("cls", BATCHED)
def test_vector_envs_inside_have_nested_batch(cls):
    actions = np.random.default_rng(1).integers(0, 2, size=(2, 2, T))
    env = cls(2, cartpole, {"num_envs": 2})
    assert env.batch_size == rlpipe.Size([2, 2])
    assert env.action_spec.shape == rlpipe.Size([2, 2, 2])
    assert env.observation_spec["observation"].shape == rlpipe.Size([2, 2, 4])
    assert env.set_seed(3) == 7
    got = rollout_arrays(env.rollout(T, table_policy(actions), break_when_any_done=False))
    env.close()
    want = one_by_one(actions, [3, 5], num_envs=2)  # a vector env of 2 takes two seeds
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=str(key))


def test_serial_and_parallel_agree_in_a_collector_with_a_step_counter():
    batches = []
    for cls in BATCHED:
        env = TransformedEnv(cls(2, cartpole), StepCounter())
        env.set_seed(11)
        collector = SyncDataCollector(env, None, frames_per_batch=2 * T, total_frames=2 * T)
        batch = next(iter(collector))
        collector.shutdown()  # closes the env
        assert env.base_env.is_closed
        batches.append(batch)
    serial, parallel = batches
    assert parallel.batch_size == rlpipe.Size([2, T])
    for key in ("observation", "action", ("next", "observation"), ("next", "done"), ("next", "step_count")):
        np.testing.assert_array_equal(serial[key].numpy(), parallel[key].numpy(), err_msg=str(key))
    count, next_count = parallel["step_count"].numpy(), parallel["next", "step_count"].numpy()
    done = parallel["next", "done"].numpy()
    np.testing.assert_array_equal(next_count, count + 1)
    assert done.any()
    np.testing.assert_array_equal(count[:, 1:][done[:, :-1]], 0)  # a partial reset restarts the counter


def test_step_counter_truncates_parallel_workers():
    env = TransformedEnv(ParallelEnv(2, EnvCreator(cartpole)), StepCounter(max_steps=5))
    td = env.rollout(12, break_when_any_done=False)
    env.close()
    counts = td["next", "step_count"].numpy().reshape(2, 12)
    assert counts.max() == 5
    truncated = td["next", "truncated"].numpy().reshape(2, 12)
    np.testing.assert_array_equal(truncated, counts == 5)


class _FailingEnv(GymEnv):
    """CartPole whose step raises at its ``fail_at``-th step (never by default)."""

    def __init__(self, fail_at=None):
        super().__init__("CartPole-v1")
        self.fail_at, self.steps = fail_at, 0

    def _step_frame(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError(f"boom at step {self.steps}")
        return super()._step_frame(action)


def test_error_in_a_worker_names_it_and_the_exception():
    env = ParallelEnv(3, _FailingEnv, [{}, {"fail_at": 3}, {}])
    with pytest.raises(RuntimeError, match=r"worker 1 failed in 'step': ValueError: boom at step 3"):
        env.rollout(10, break_when_any_done=False)
    td = env.rollout(4)  # the workers live on
    assert td.batch_size == rlpipe.Size([3, 4])
    env.close()


def test_error_in_a_serial_env_propagates():
    env = SerialEnv(2, _FailingEnv, [{"fail_at": 2}, {}])
    with pytest.raises(ValueError, match="boom at step 2"):
        env.rollout(5, break_when_any_done=False)
    env.close()


def test_killed_worker_is_a_quick_clear_error_and_nothing_is_left():
    env = ParallelEnv(2, cartpole)
    env.rollout(3)
    workers, block = env._resources
    os.kill(workers[1].process.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 1 died \(exit code -9\) in 'reset'"):
        env.rollout(3)
    assert time.monotonic() - start < 5
    assert not any(w.process.is_alive() for w in workers)
    assert not os.path.exists(f"/dev/shm/{block.name}")
    assert env.rollout(3).batch_size == rlpipe.Size([2, 3])  # new workers
    env.close()


class _HangingEnv(GymEnv):
    def __init__(self):
        super().__init__("CartPole-v1")

    def _step_frame(self, action):
        time.sleep(60)


def test_hanging_worker_times_out():
    env = ParallelEnv(2, _HangingEnv, timeout=0.5)
    env.reset()
    workers = env._resources[0]
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 0 did not answer within 0.5 s in 'step'"):
        env.rollout(2)
    assert time.monotonic() - start < 10
    assert env.is_closed and not any(w.process.is_alive() for w in workers)


def test_close_leaves_no_process_and_no_shared_memory():
    env = ParallelEnv(2, cartpole)
    assert env.is_closed  # started lazily, as torchrl
    env.reset()
    workers, block = env._resources
    path = f"/dev/shm/{block.name}"
    assert os.path.exists(path) and all(w.process.is_alive() for w in workers)
    env.close()
    assert not os.path.exists(path)
    for w in workers:
        assert w.process.exitcode is not None
        with pytest.raises(ProcessLookupError):
            os.kill(w.process.pid, 0)  # reaped: not even a zombie
    with pytest.raises(RuntimeError, match="trying to close a closed environment"):
        env.close()
    env.close(raise_if_closed=False)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_workers must be >= 1, got 0"):
        ParallelEnv(0, cartpole)
    with pytest.raises(TypeError, match="num_workers must be an int, got str"):
        SerialEnv("2", cartpole)
    with pytest.raises(RuntimeError, match=r"len\(create_env_kwargs\) and num_workers mismatch, got 3 and 2"):
        ParallelEnv(2, cartpole, [{}, {}, {}])
    with pytest.raises(RuntimeError, match=r"len\(create_env_fn\) and num_workers mismatch, got 1 and 2"):
        SerialEnv(2, [cartpole])
    with pytest.raises(TypeError, match="create_env_kwargs must be a list of one item per worker, got int"):
        SerialEnv(2, cartpole, 5)
    with pytest.raises(ValueError, match="mp_start_method must be one of"):
        ParallelEnv(2, cartpole, mp_start_method="thread")
    env = SerialEnv(2, cartpole)
    with pytest.raises(RuntimeError, match=r"len\(kwargs\) and num_workers mismatch, got 1 and 2"):
        env.update_kwargs([{}])
    with pytest.raises(ValueError, match=r"expected an action of shape \(2, 2\), got \(2,\)"):
        env._step_frame(np.zeros(2, dtype=np.int64))
    assert env.rollout(2).batch_size == rlpipe.Size([2, 2])  # still usable
    env.close()


def test_update_kwargs_takes_effect_at_restart():
    env = SerialEnv(2, cartpole)
    env.update_kwargs([{"max_episode_steps": 3}, {"max_episode_steps": 4}])
    assert env.create_env_kwargs == [{"max_episode_steps": 3}, {"max_episode_steps": 4}]
    td = env.rollout(4, policy=table_policy(np.zeros((2, 4), dtype=np.int64) + [[0, 1, 0, 1]]),
                     break_when_any_done=False)
    truncated = td["next", "truncated"].numpy().reshape(2, 4)
    np.testing.assert_array_equal(truncated, [[False, False, True, False], [False, False, False, True]])
    env.close()


def test_env_creator_builds_once_and_exposes_the_specs():
    built = []

    def make(**kwargs):
        built.append(kwargs)
        return cartpole(**kwargs)
    creator = EnvCreator(make, {"max_episode_steps": 9})
    assert built == [{"max_episode_steps": 9}]
    assert creator.meta_data.observation_spec["observation"].shape == rlpipe.Size([4])
    assert creator.meta_data.batch_size == rlpipe.Size([])
    env = creator(max_episode_steps=3)  # the construction kwargs take precedence (torchrl)
    assert built[-1] == {"max_episode_steps": 9}
    env.close()
    par = ParallelEnv(2, creator)  # specs from the creator, envs built in the workers only
    assert len(built) == 2 and par.batch_size == rlpipe.Size([2])
    assert par.rollout(2).batch_size == rlpipe.Size([2, 2])
    par.close()
    assert len(built) == 2
    with pytest.raises(TypeError, match="create_env_fn must be callable, got int"):
        EnvCreator(3)


def test_spawned_worker_with_a_picklable_creator():
    env = ParallelEnv(1, functools.partial(GymEnv, "CartPole-v1"), mp_start_method="spawn")
    env.set_seed(4)
    got = env.rollout(5, table_policy(np.zeros((1, 5), dtype=np.int64)))
    env.close()
    ref = cartpole()
    ref.set_seed(4)
    want = ref.rollout(5, table_policy(np.zeros(5, dtype=np.int64)))
    np.testing.assert_array_equal(got["next", "observation"].numpy()[0], want["next", "observation"].numpy())


def test_transformed_envs_inside_the_workers():
    env = ParallelEnv(2, lambda: TransformedEnv(cartpole(), StepCounter(max_steps=3)))
    assert "step_count" in env.observation_spec.keys()
    td = env.rollout(7, break_when_any_done=False)
    env.close()
    np.testing.assert_array_equal(td["next", "step_count"].numpy()[..., 0], [[1, 2, 3, 1, 2, 3, 1]] * 2)


def test_a_collected_env_frees_its_workers_and_block():
    env = ParallelEnv(2, cartpole)
    env.reset()
    workers, block = env._resources
    path, processes = f"/dev/shm/{block.name}", [w.process for w in workers]
    del env, workers, block
    gc.collect()
    assert not os.path.exists(path)
    assert not any(p.is_alive() for p in processes)


def test_async_vector_envs_inside_the_workers():
    env = ParallelEnv(2, cartpole, {"num_envs": 2, "vectorization_mode": "async"})  # workers start processes
    td = env.rollout(30, break_when_any_done=False)
    env.close()
    assert td.batch_size == rlpipe.Size([2, 2, 30]) and td["next", "done"].numpy().any()


def test_collector_refuses_a_batched_env_of_next_step_reset_vector_envs():
    # their skipped rows are tracked for a one-dim batch only: a clear error, not an IndexError mid-collection
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point"))
    try:
        expected = r"batch size \[2, 2\].*reset in the step after.*vectorization_mode='sync'"
        with pytest.raises(ValueError, match=expected):
            SyncDataCollector(env, frames_per_batch=40, total_frames=80)
    finally:
        env.close(raise_if_closed=False)


# ---- heterogeneous envs (a list of different constructors) ---------------------------------------------------

class _BoxEnv(gym.Env):
    """Observations and actions in [-bound, bound] (``n`` observation entries); the next observation
    repeats the action."""

    def __init__(self, bound, n=2):
        self.observation_space = gym.spaces.Box(-bound, bound, (n,), np.float32)
        self.action_space = gym.spaces.Box(-bound, bound, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.full(self.observation_space.shape, float(action[0]), np.float32), 1.0, False, False, {}


@pytest.mark.parametrize("batched", BATCHED)
def test_envs_with_different_bounds_get_per_env_bounds(batched):
    env = batched(2, [lambda: GymEnv(_BoxEnv(1.0)), lambda: GymEnv(_BoxEnv(3.0))])
    try:
        assert env.action_spec.high.flatten().tolist() == [1.0, 3.0]
        assert env.observation_spec["observation"].low.tolist() == [[-1.0, -1.0], [-3.0, -3.0]]
        env.set_seed(0)
        rollout = env.rollout(20)
        actions = rollout["action"].numpy()
        assert np.abs(actions[0]).max() <= 1.0 < np.abs(actions[1]).max() <= 3.0
        np.testing.assert_array_equal(rollout["next", "observation"].numpy()[..., 0], actions[..., 0])
    finally:
        env.close(raise_if_closed=False)


def test_envs_with_different_shapes_or_batch_sizes_are_refused():
    with pytest.raises(ValueError, match=r"SerialEnv: env 1's observation_spec\['observation'\] differs from env 0's "
                                         r"\(BoundedContinuous of shape \[3\].* vs BoundedContinuous of shape \[2\]"):
        SerialEnv(2, [lambda: GymEnv(_BoxEnv(1.0)), lambda: GymEnv(_BoxEnv(1.0, 3))])
    with pytest.raises(ValueError, match=r"env 1's action_spec differs from env 0's \(Categorical"):
        SerialEnv(2, [lambda: GymEnv("CartPole-v1", categorical_action_encoding=True),
                      lambda: GymEnv("Acrobot-v1", categorical_action_encoding=True)])
    with pytest.raises(ValueError, match=r"env 1 has batch_size \[2\], env 0 \[\]; the envs of a batched env must "
                                         "share their batch size"):
        SerialEnv(2, [lambda: GymEnv("CartPole-v1"), lambda: GymEnv("CartPole-v1", num_envs=2)])


def test_a_list_of_one_constructor_is_single_task():
    make = functools.partial(GymEnv, "CartPole-v1")
    env = SerialEnv(2, [make, make])
    assert env._single_task and not isinstance(env.meta_data, list)
    assert not SerialEnv(2, [make, functools.partial(GymEnv, "CartPole-v1")])._single_task
