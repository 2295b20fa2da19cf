"""Collectors carry an env's non-tensor observations (a string each step, declared with a
``NonTensor`` spec) as torchrl 0.14 does: stacked as NonTensorStacks, root and ("next", ...).

The expected strings were recorded from torchrl 0.14.1's ``Collector`` and ``rollout`` on the same
env (``tensordict``/``torchrl`` in the peer venv)."""
import pytest

import rlpipe
from rlpipe.collectors import MultiaSyncDataCollector, MultiSyncDataCollector, SyncDataCollector
from rlpipe.envs import EnvBase
from rlpipe.envs.specs import Categorical, Composite, NonTensor, Unbounded
from rlpipe.tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictModule


class TextEnv(EnvBase):
    """A torchrl-style env whose observation holds a string: "start" after a reset, "step t"
    after step t; it ends after 3 steps."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded((1,)), text=NonTensor(shape=()))
        self.action_spec = Categorical(2)
        self.reward_spec = Unbounded((1,))
        self.t = 0

    def _reset(self, td=None):
        self.t = 0
        return TensorDict({"obs": rlpipe.zeros(1), "text": "start"}, [])

    def _step(self, td):
        self.t += 1
        done = rlpipe.tensor([self.t >= 3])
        return TensorDict({"obs": rlpipe.full((1,), float(self.t)), "text": f"step {self.t}",
                           "reward": rlpipe.ones(1), "done": done, "terminated": done.clone()}, [])

    def _set_seed(self, seed):
        pass


# torchrl 0.14.1's two first batches of 4 frames (SyncDataCollector / Collector, random policy)
ROOT = [["start", "step 1", "step 2", "start"], ["step 1", "step 2", "start", "step 1"]]
NEXT = [["step 1", "step 2", "step 3", "step 1"], ["step 2", "step 3", "step 1", "step 2"]]


def test_rollout_stacks_the_strings():
    out = TextEnv().rollout(4)
    assert isinstance(out.get("text"), NonTensorStack)
    assert out.get("text").tolist() == ["start", "step 1", "step 2"]
    assert out["next", "text"] == ["step 1", "step 2", "step 3"]


def test_sync_collector_with_random_actions():
    batches = list(SyncDataCollector(TextEnv(), None, frames_per_batch=4, total_frames=8))
    for batch, root, nxt in zip(batches, ROOT, NEXT):
        assert isinstance(batch.get("text"), NonTensorStack) and batch.get("text").batch_size == (4,)
        assert batch.get("text").tolist() == root and batch["next", "text"] == nxt
        assert batch["obs"].reshape(-1).tolist() == [["start", "step 1", "step 2"].index(s) for s in root]


def test_a_policy_sees_each_step_string():
    seen = []

    def policy(td):
        text = td.get("text")
        assert isinstance(text, NonTensorData)
        seen.append(text.data)
        td.set("action", rlpipe.tensor(0))
        return td
    batch = next(iter(SyncDataCollector(TextEnv(), policy, frames_per_batch=4, total_frames=4)))
    assert seen == ROOT[0] and batch.get("text").tolist() == ROOT[0]


def test_a_module_policy_reading_numbers_only_keeps_the_strings():
    policy = TensorDictModule(lambda obs: (obs[..., 0] * 0).long(), in_keys=["obs"], out_keys=["action"])
    batch = next(iter(SyncDataCollector(TextEnv(), policy, frames_per_batch=4, total_frames=4)))
    assert batch.get("text").tolist() == ROOT[0] and batch["next", "text"] == NEXT[0]


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_multi_process_collectors_carry_the_strings(cls):
    collector = cls([TextEnv, TextEnv], None, frames_per_batch=8, total_frames=16)
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    for i, batch in enumerate(batches):
        text = batch.get("text")
        assert isinstance(text, NonTensorStack) and text.batch_size == batch.batch_size
        if cls is MultiSyncDataCollector:  # [workers, 4]: each worker's part as one env's batch
            assert text.tolist() == [ROOT[i]] * 2 and batch["next", "text"] == [NEXT[i]] * 2
        else:  # one worker's batch of 8, its first or second: the 3-step episodes from frame 0 or 8
            assert (text.tolist(), batch["next", "text"]) in (_episodes(0), _episodes(8))


def _episodes(first):
    """(root strings, next strings) of 8 frames of back-to-back 3-step episodes from frame ``first``."""
    frames = range(first, first + 8)
    return [["start", "step 1", "step 2"][t % 3] for t in frames], [f"step {t % 3 + 1}" for t in frames]
