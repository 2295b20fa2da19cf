"""SerialEnv and ParallelEnv as torchrl 0.14's beyond the frame buffers: envs whose steps the buffers cannot
carry (several actions, nested rewards and done flags: torchrl's multi-agent layout; non-tensor entries) and
``use_buffers=False`` take the TensorDict path (each sub-env's reset/step TensorDicts, stacked along the
workers' dim; partial resets through the nested ``"_reset"`` masks); attributes the batched env lacks are
dispatched to its envs. Expected values worked by hand from the counting envs below."""
import pytest

import rlpipe as torch
from rlpipe.collectors import SyncDataCollector
from rlpipe.envs import EnvBase, ParallelEnv, SerialEnv
from rlpipe.envs.specs import Categorical, Composite, Unbounded
from rlpipe.tensordict import TensorDict

AGENTS = 2


class TeamCountingEnv(EnvBase):
    """Two agents count their own actions (``("agents", "action")``, a 0/1 each); an agent is done once its
    count reaches ``limit``, and the team (root ``"done"``) once every agent is. Each agent's reward is its
    count; ``("agents", "bonus")`` is a second action that adds 10 to it."""

    def __init__(self, limit=2, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit
        batch = tuple(self.batch_size)
        agents = batch + (AGENTS,)
        flag = Categorical(2, shape=agents + (1,), dtype=torch.bool)
        self.observation_spec = Composite(
            agents=Composite(count=Unbounded(agents + (1,), dtype=torch.int64), shape=agents), shape=batch)
        self.action_spec = Composite(
            agents=Composite(action=Categorical(2, shape=agents + (1,)), bonus=Categorical(2, shape=agents + (1,)),
                             shape=agents), shape=batch)
        self.reward_spec = Composite(agents=Composite(reward=Unbounded(agents + (1,)), shape=agents), shape=batch)
        self.done_spec = Composite(done=Categorical(2, shape=batch + (1,), dtype=torch.bool),
                                   agents=Composite(done=flag, terminated=flag.clone(), shape=agents), shape=batch)
        self.count = torch.zeros(agents + (1,), dtype=torch.int64)

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict, **kwargs):
        mask = None if tensordict is None else tensordict.get(("agents", "_reset"), None)
        if mask is None:
            self.count.zero_()
        else:
            self.count[mask] = 0
        return self._out()

    def _out(self):
        done = self.count >= self.limit
        return TensorDict({"agents": {"count": self.count.clone(), "done": done, "terminated": done.clone()},
                           "done": done.all(-2)}, batch_size=self.batch_size)

    def _step(self, tensordict):
        self.count += tensordict.get(("agents", "action"))
        out = self._out()
        reward = self.count.to(torch.float32) + 10.0 * tensordict.get(("agents", "bonus")).to(torch.float32)
        out.set(("agents", "reward"), reward)
        return out


def _actions(env, action, bonus):
    def policy(td):
        shape = tuple(env.batch_size) + (AGENTS, 1)
        td.set(("agents", "action"), torch.full(shape, action))
        td.set(("agents", "bonus"), torch.full(shape, bonus))
        return td
    return policy


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_multi_key_env_batched_rollout_hand_values(batched):
    env = batched(2, TeamCountingEnv)
    try:
        assert env.batch_size == (2,)
        assert env.action_keys == [("agents", "action"), ("agents", "bonus")]
        assert env.reward_keys == [("agents", "reward")]
        assert env.full_action_spec["agents", "action"].shape == (2, AGENTS, 1)
        td = env.reset()
        assert td["agents"].batch_size == (2, AGENTS)
        assert td["agents", "count"].sum().item() == 0
        out = env.rollout(3, _actions(env, 1, 1), break_when_any_done=False)
        assert out.batch_size == (2, 3)
        # counts 1, 2 (done: limit 2), then reset and 1 again; reward = count + 10 (the bonus)
        assert out["next", "agents", "count"][0, :, 0, 0].tolist() == [1, 2, 1]
        assert out["next", "agents", "reward"][1, :, 1, 0].tolist() == [11.0, 12.0, 11.0]
        assert out["next", "done"][:, :, 0].tolist() == [[False, True, False], [False, True, False]]
        assert out["agents", "count"][0, :, 0, 0].tolist() == [0, 1, 0]  # the root after the reset
    finally:
        env.close()


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_multi_key_env_partial_reset_through_nested_masks(batched):
    env = batched(2, TeamCountingEnv, create_env_kwargs={"limit": 5})
    try:
        td = env.reset()
        td = env.step(_actions(env, 1, 0)(td))
        root = td["next"].exclude(("agents", "reward"))
        root.set("_reset", torch.tensor([[True], [False]]))  # torchrl: the root mask rules the root's rows
        root.set(("agents", "_reset"), torch.tensor([[[True], [False]], [[False], [False]]]))
        out = env.reset(root)
        # env 0's first agent is reset; its second agent and env 1 keep their count of 1
        assert out["agents", "count"][..., 0].tolist() == [[0, 1], [1, 1]]
        assert ("agents", "_reset") not in out.keys(True) and "_reset" not in out.keys()
    finally:
        env.close()


def test_multi_key_batched_env_refuses_the_frame_path_of_the_collectors():
    env = SerialEnv(2, TeamCountingEnv)
    with pytest.raises(NotImplementedError, match="SerialEnv: its envs have several actions, rewards or nested done "
                                                  "flags, which the frame buffers"):
        env._reset_frame()
    assert env.reset()["agents", "count"].shape == (2, AGENTS, 1)  # still usable
    collector = SyncDataCollector(env, _actions(env, 1, 0), frames_per_batch=4, total_frames=4)
    with pytest.raises(NotImplementedError, match="frame buffers"):
        next(iter(collector))
    env.close()


def test_multi_key_worker_error_names_the_worker():
    env = ParallelEnv(2, TeamCountingEnv)
    try:
        td = env.reset()
        td.set(("agents", "action"), torch.ones(2, AGENTS, 1, dtype=torch.int64))  # no bonus: get gives None
        with pytest.raises(RuntimeError, match=r"ParallelEnv: worker 0 failed in 'td_step': AttributeError"):
            env.step(td)
        assert env.reset()["agents", "count"].sum().item() == 0  # the workers still answer
    finally:
        env.close(raise_if_closed=False)


class AgentsOnlyDoneEnv(TeamCountingEnv):
    """The counting env with no root done flag: only the agents' (torchrl's multi-agent envs)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.done_spec = self.done_spec.exclude("done", "terminated")

    def _out(self):
        return super()._out().exclude("done")


def test_rollout_of_an_env_with_only_nested_done_flags_stops_when_an_agent_is_done():
    env = AgentsOnlyDoneEnv(limit=2)
    assert env.done_keys == [("agents", "done"), ("agents", "terminated")]
    out = env.rollout(5, _actions(env, 1, 0))  # break_when_any_done: the step where the agents reach 2
    assert out.batch_size == (2,) and out["next", "agents", "count"][:, 0, 0].tolist() == [1, 2]
    out = env.rollout(3, _actions(env, 1, 0), break_when_any_done=False)  # reset after the done step
    assert out["next", "agents", "count"][:, 1, 0].tolist() == [1, 2, 1]


def test_rollout_refuses_a_policy_that_misses_one_of_the_action_keys():
    env = TeamCountingEnv()

    def half_policy(td):
        return td.set(("agents", "action"), torch.ones(AGENTS, 1, dtype=torch.int64))
    with pytest.raises(KeyError, match="the policy 'test_rollout_refuses_a_policy_that_misses_one_of_the_action_keys"
                                       ".<locals>.half_policy' wrote no 'action' entry"):
        env.rollout(2, half_policy)
    assert env.rollout(2, _actions(env, 1, 0)).batch_size == (2,)  # the env is still usable


# ---- use_buffers=False: the TensorDict path for any env, as torchrl's ---------------------------------------
def _cartpole():
    from rlpipe.envs import GymEnv
    return GymEnv("CartPole-v1")


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_use_buffers_false_gives_the_buffers_rollout(batched):
    import numpy as np

    actions = np.random.default_rng(0).integers(0, 2, size=(3, 30))

    def table(td):
        step = table.count
        table.count += 1
        return td.set("action", torch.as_tensor(np.eye(2, dtype=np.int64)[actions[:, step]]))

    outs = []
    for use_buffers in (True, False):
        env = batched(3, _cartpole, use_buffers=use_buffers)
        assert env.use_buffers is use_buffers and env._tensordict_style is not use_buffers
        env.set_seed(5)
        table.count = 0
        outs.append(env.rollout(30, table, break_when_any_done=False))
        env.close()
    for key in ("observation", ("next", "observation"), ("next", "reward"), ("next", "done")):
        assert outs[0][key].tolist() == outs[1][key].tolist()


def test_use_buffers_false_works_in_the_collector():
    env = SerialEnv(2, _cartpole, use_buffers=False)
    env.set_seed(0)
    collector = SyncDataCollector(env, None, frames_per_batch=20, total_frames=20)
    batch = next(iter(collector))
    assert batch.batch_size == (2, 10) and batch["next", "observation"].shape == (2, 10, 4)
    collector.shutdown()


def test_use_buffers_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="use_buffers must be None, True or False, got str"):
        SerialEnv(2, _cartpole, use_buffers="no")


class NoteCountingEnv(EnvBase):
    """A torchrl-style env whose observation and state hold a non-tensor count (torchrl's EnvWithMetadata)."""

    def __init__(self):
        super().__init__()
        from rlpipe.envs.specs import NonTensor
        self.observation_spec = Composite(obs=Unbounded(1), note=NonTensor(shape=()))
        self.state_spec = Composite(note=NonTensor(shape=()))
        self.action_spec = Unbounded(1)

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict, **kwargs):
        out = TensorDict({"obs": torch.zeros(1)}, [])
        out.set_non_tensor("note", 0)
        return out

    def _step(self, tensordict):
        out = TensorDict({"obs": torch.zeros(1), "reward": torch.zeros(1)}, [])
        out.set_non_tensor("note", tensordict["note"] + 1)
        return out


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_non_tensor_observations_go_through_batched_envs(batched):
    env = batched(2, NoteCountingEnv)
    try:
        assert env._tensordict_style  # the buffers hold no non-tensor data
        out = env.rollout(4)
        assert out.get(("next", "note")).tolist() == [[1, 2, 3, 4]] * 2
        assert out.get("note").tolist() == [[0, 1, 2, 3]] * 2
    finally:
        env.close()


def test_env_step_mdp_method_keeps_the_action_and_drops_the_reward():
    env = NoteCountingEnv()
    td = env.reset()
    td.set("action", torch.ones(1))
    root = env.step_mdp(env.step(td))
    assert sorted(root.keys()) == ["action", "done", "note", "obs", "terminated"]
    assert root["note"] == 1 and root["action"].tolist() == [1.0]


# ---- attributes dispatched to the envs, as torchrl's ------------------------------------------------------
class _Nested:
    value = 42

    def get_value(self):
        return self.value


class GadgetEnv(NoteCountingEnv):
    """An env with a method, a class attribute, a property and a nested object, as torchrl's mock envs."""

    custom_attr = 1

    def __init__(self):
        super().__init__()
        self.nested = _Nested()

    def custom_fun(self, add=0):
        return 10 + add

    @property
    def custom_prop(self):
        return 2


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_attributes_the_batched_env_lacks_are_dispatched_to_its_envs(batched):
    env = batched(2, GadgetEnv)
    try:
        if batched is ParallelEnv:  # torchrl's: a closed ParallelEnv starts its workers and refuses the access
            with pytest.raises(RuntimeError, match="Trying to access attributes of closed/non started environments"):
                env.custom_fun
            assert not env.is_closed
        assert env.custom_fun() == [10, 10] and env.custom_fun(add=5) == [15, 15]
        assert list(env.custom_attr) == [1, 1] and env.custom_attr[1] == 1 and len(env.custom_attr) == 2
        assert list(env.custom_prop) == [2, 2]
        assert list(env.nested.value) == [42, 42] and env.nested.get_value() == [42, 42]
        with pytest.raises(AttributeError, match=f"attribute nested.missing not found in env 0 of {batched.__name__}"):
            env.nested.missing
        assert not hasattr(env, "no_such_attribute") and not hasattr(env, "_private")
        assert env.rollout(2).batch_size == (2, 2)  # still usable
    finally:
        env.close()


class PairCounter(EnvBase):
    """A torchrl-style env of batch size [2] on the buffers' path: each row adds its action to a count, and
    is done once the count passes 1."""

    def __init__(self):
        super().__init__(batch_size=[2])
        self.observation_spec = Composite(count=Unbounded((2, 1), dtype=torch.int64), shape=(2,))
        self.action_spec = Categorical(2, shape=(2, 1))
        self.done_spec = Categorical(2, shape=(2, 1), dtype=torch.bool)
        self.count = torch.zeros(2, 1, dtype=torch.int64)

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict, **kwargs):
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            self.count.zero_()
        else:
            self.count[mask] = 0
        return TensorDict({"count": self.count.clone(), "done": self.count > 1}, [2])

    def _step(self, tensordict):
        self.count += tensordict["action"]
        return TensorDict({"count": self.count.clone(), "done": self.count > 1, "reward": torch.zeros(2, 1)}, [2])


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_partial_reset_within_a_worker_resets_only_the_masked_rows(batched):
    env = batched(2, PairCounter)
    try:
        assert not env._tensordict_style  # the buffers' path
        td = env.reset()
        for _ in range(2):
            td = env.step_mdp(env.step(td.set("action", torch.ones(2, 2, 1, dtype=torch.int64))))
        assert td["done"].all()
        td.set("_reset", torch.tensor([[[True], [False]], [[False], [True]]]))
        out = env.reset(td)
        assert out["count"][..., 0].tolist() == [[0, 2], [2, 0]]
        assert out["done"][..., 0].tolist() == [[False, True], [True, False]]
    finally:
        env.close()


def test_serial_for_single_gives_a_serial_env_for_one_worker():
    env = ParallelEnv(1, _cartpole, serial_for_single=True)
    assert type(env) is SerialEnv and env.batch_size == (1,)
    env.close(raise_if_closed=False)
    env = ParallelEnv(2, _cartpole, serial_for_single=True, mp_start_method="fork")
    assert type(env) is ParallelEnv and env._mp_start_method == "fork"
    assert env.rollout(2).batch_size == (2, 2)
    env.close()
