"""FrameStackReplayBuffer against a brute-force reference: whole trajectories with their frames
stacked by hand and rlpipe's MultiStep run over each of them.

Every frame carries its own identity in its first three bytes, so a sampled transition names the
trajectory step it comes from; the test keeps its own model of which frames the ring still holds
(frames are written in batch order, row by row, each step's observation followed by the last
observation where a trajectory ends or a row ends) and so knows which transitions must be
sampleable.
"""
import sys
import threading

import numpy as np
import pytest

import rlpipe
from rlpipe import TensorDict
from rlpipe.data import FrameStackReplayBuffer
from rlpipe.postprocs import MultiStep

GAMMA = 0.9


def frame_id(frames, frame_ndim):
    """The identities written into frames [..., *frame] (first three bytes of each)."""
    head = frames.reshape(frames.shape[:frames.ndim - frame_ndim] + (-1,))[..., :3].astype(np.int64)
    return head[..., 0] + 256 * head[..., 1] + 65536 * head[..., 2]


class World:
    """Random trajectories for several envs, cut into collector batches.

    ``envs[e]`` is a list of trajectories; each has ``frames`` [L + 1, *frame] (the observations),
    ``action`` [L, 2], ``reward`` [L, 1], ``end`` ("terminated", "truncated", "break": a new
    trajectory id without done, or "open": still running) and ``ids`` of its frames.
    """

    def __init__(self, rng, num_envs, frame_shape, steps_per_env):
        self.rng, self.frame_shape = rng, frame_shape
        self.next_id = 1
        self.envs = []
        for _ in range(num_envs):
            trajectories, steps = [], 0
            while steps < steps_per_env:
                length = int(rng.integers(1, 9))
                end = str(rng.choice(["terminated", "truncated", "break"]))
                if steps + length >= steps_per_env:
                    length, end = steps_per_env - steps, "open"
                trajectories.append(self._trajectory(length, end))
                steps += length
            self.envs.append(trajectories)

    def _trajectory(self, length, end):
        ids = np.arange(self.next_id, self.next_id + length + 1)
        self.next_id += length + 1
        frames = self.rng.integers(0, 256, (length + 1,) + self.frame_shape).astype(np.uint8)
        flat = frames.reshape(length + 1, -1)
        flat[:, 0], flat[:, 1], flat[:, 2] = ids % 256, ids // 256 % 256, ids // 65536
        return {"frames": frames, "ids": ids, "end": end,
                "action": self.rng.standard_normal((length, 2)).astype(np.float32),
                "reward": self.rng.integers(-3, 4, (length, 1)).astype(np.float32) / 4}

    def steps(self, e):
        """Env e's stream of steps: (trajectory number, t) for each."""
        return [(j, t) for j, traj in enumerate(self.envs[e]) for t in range(len(traj["action"]))]

    def batch(self, rows, start, T, flat):
        """The collector batch of steps [start, start + T) of each env in ``rows``."""
        keys = {"pixels": [], "next_pixels": [], "action": [], "reward": [], "done": [], "terminated": [],
                "truncated": [], "traj": []}
        for e in rows:
            for j, t in self.steps(e)[start:start + T]:
                traj = self.envs[e][j]
                last = t == len(traj["action"]) - 1
                keys["pixels"].append(traj["frames"][t])
                keys["next_pixels"].append(traj["frames"][t + 1])
                keys["action"].append(traj["action"][t])
                keys["reward"].append(traj["reward"][t])
                keys["terminated"].append([last and traj["end"] == "terminated"])
                keys["truncated"].append([last and traj["end"] == "truncated"])
                keys["done"].append([keys["terminated"][-1][0] or keys["truncated"][-1][0]])
                keys["traj"].append(e * 1000 + j)
        shape = [T] if flat else [len(rows), T]

        def t(name):
            values = np.array(keys[name])
            return rlpipe.tensor(values.reshape(shape + list(values.shape[1:])))
        return TensorDict({"pixels": t("pixels"), "action": t("action"), "collector": {"traj_ids": t("traj")},
                           "next": {"pixels": t("next_pixels"), "reward": t("reward"), "done": t("done"),
                                    "terminated": t("terminated"), "truncated": t("truncated")}}, shape)


def stacked(frames, k, padding):
    """[len(frames), k, *frame]: the stack ending at each frame, padded before the first."""
    out = []
    for j in range(len(frames)):
        rows = []
        for i in range(k):
            src = j - (k - 1) + i
            rows.append(frames[max(src, 0)] if src >= 0 or padding == "same" else np.zeros_like(frames[0]))
        out.append(np.stack(rows))
    return np.stack(out)


def reference(traj, k, n, padding):
    """MultiStep(GAMMA, n) over the whole trajectory with hand-stacked frames."""
    L = len(traj["action"])
    terminated = np.zeros((L, 1), bool)
    truncated = np.zeros((L, 1), bool)
    terminated[-1] = traj["end"] == "terminated"
    truncated[-1] = traj["end"] == "truncated"
    stacks = stacked(traj["frames"], k, padding)
    td = TensorDict({"pixels": rlpipe.tensor(stacks[:-1]), "action": rlpipe.tensor(traj["action"]),
                     "next": {"pixels": rlpipe.tensor(stacks[1:]), "reward": rlpipe.tensor(traj["reward"]),
                              "done": rlpipe.tensor(terminated | truncated),
                              "terminated": rlpipe.tensor(terminated), "truncated": rlpipe.tensor(truncated)}}, [L])
    return MultiStep(GAMMA, n)(td)


class RingModel:
    """Which frames the ring holds: the last ``capacity`` written, in the documented order."""

    def __init__(self, capacity):
        self.capacity, self.count, self.position = capacity, 0, {}

    def alive(self, fid):
        return fid in self.position and self.position[fid] >= self.count - self.capacity

    def write(self, fid):
        self.position[fid] = self.count
        self.count += 1

    @staticmethod
    def last_observation_stored(traj, t, i, T, with_next):
        """Whether the batch stores step t's next observation as a frame of its own: where its
        trajectory ends inside the batch (a done, or a new id on the next row), and at the row's end
        when the batch has ("next", "pixels")."""
        ends = t == len(traj["action"]) - 1
        if i < T - 1:
            return ends
        return with_next or ends and traj["end"] in ("terminated", "truncated")

    def extend(self, world, rows, start, T, with_next):
        most = sum(T + sum(self.last_observation_stored(world.envs[e][j], t, i, T, with_next)
                           for i, (j, t) in enumerate(world.steps(e)[start:start + T])) for e in rows)
        pending = {}
        for e in rows:  # a continuing row's first observation is reused where the ring holds it after the batch
            steps = world.steps(e)
            if start:
                j, t = steps[start - 1]
                traj = world.envs[e][j]
                fid = traj["ids"][t + 1]
                if t < len(traj["action"]) - 1 and self.alive(fid):
                    pending[e] = self.position[fid] >= self.count + most - self.capacity
        for e in rows:
            for i, (j, t) in enumerate(world.steps(e)[start:start + T]):
                traj = world.envs[e][j]
                if not (i == 0 and pending.get(e)):
                    self.write(traj["ids"][t])
                if self.last_observation_stored(traj, t, i, T, with_next):
                    self.write(traj["ids"][t + 1])


def expected_sampleable(world, ring, k, n):
    """{frame id of step t: (env, trajectory, t)} of the transitions that must be sampleable."""
    expected = {}
    for e, trajectories in enumerate(world.envs):
        for j, traj in enumerate(trajectories):
            L = len(traj["action"])
            for t in range(L):
                if traj["end"] == "open" and t + n > L:
                    continue  # its window is not complete yet
                m = min(n, L - t)
                if all(ring.alive(fid) for fid in traj["ids"][max(t - k + 1, 0):t + m + 1]):
                    expected[traj["ids"][t]] = (e, j, t)
    return expected


def step_ids(sample):
    """The frame identity of each sampled transition's own observation (its stack's last frame)."""
    last = sample["pixels"].numpy()[:, -1]
    return frame_id(last, last.ndim - 1)


def assert_rows_match(sample, refs):
    """Every entry of every sampled row equals the reference row it comes from (its dtype and
    shape too); the sample has no other entries but "index" (and "priority_weight")."""
    for row, fid in enumerate(step_ids(sample)):
        e, j, t = refs["where"][int(fid)]
        ref = refs[e, j]
        keys = set(ref.keys(True, True))
        extra = set(sample.keys(True, True)) - keys
        assert keys <= set(sample.keys(True, True))
        assert "index" in extra and extra <= {"index", "priority_weight"}
        for key in keys:
            got, want = sample[key][row], ref[key][t]
            assert got.dtype == want.dtype and got.shape == want.shape, (key, got, want)
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str((key, e, j, t)))


def fill(seed, frame_shape, k, n, padding, capacity=None, batches=None, **options):
    rng = np.random.default_rng(seed)
    num_envs = int(rng.integers(1, 4))
    flat = num_envs == 1 and bool(rng.integers(2))
    lengths = rng.integers(1, 9, int(rng.integers(3, 10)) if batches is None else batches)
    world = World(rng, num_envs, frame_shape, int(lengths.sum()))
    capacity = int(rng.integers(2 * num_envs * 8, 120)) if capacity is None else capacity
    rb = FrameStackReplayBuffer(capacity, frame_stack=k, n_steps=n, gamma=GAMMA, padding=padding,
                                generator=rlpipe.Generator().manual_seed(seed), **options)
    ring = RingModel(capacity)
    start = 0
    for T in lengths:
        batch = world.batch(range(num_envs), start, int(T), flat)
        traj = batch["collector", "traj_ids"].numpy()
        ends = batch["next", "done"].numpy().any() or (traj[..., 1:] != traj[..., :-1]).any()
        with_next = ends or bool(rng.integers(2))  # without last observations where no trajectory ends
        rb.extend(batch if with_next else batch.exclude(("next", "pixels")))
        ring.extend(world, range(num_envs), start, int(T), with_next)
        start += int(T)
    refs = {"where": {}}
    for e, trajectories in enumerate(world.envs):
        for j, traj in enumerate(trajectories):
            refs[e, j] = reference(traj, k, n, padding)
            refs["where"].update({int(fid): (e, j, t) for t, fid in enumerate(traj["ids"][:-1])})
    return rb, world, ring, refs


@pytest.mark.parametrize("seed", range(96))
def test_every_sampleable_transition_equals_catframes_and_multistep(seed):
    rng = np.random.default_rng(1000 + seed)
    k, n = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    padding = ["same", "constant"][seed % 2]
    frame_shape = [(3, 4), (2, 3, 4)][seed // 2 % 2]
    rb, world, ring, refs = fill(seed, frame_shape, k, n, padding)
    expected = expected_sampleable(world, ring, k, n)
    index = rb.sampleable_indices()
    assert len(rb) == len(index) == len(expected)
    if not expected:
        return
    everything = rb[index]
    assert sorted(step_ids(everything).tolist()) == sorted(expected)
    np.testing.assert_array_equal(everything["index"].numpy(), index.numpy())
    assert_rows_match(everything, refs)
    sample = rb.sample(64)
    assert set(sample["index"].numpy().tolist()) <= set(index.numpy().tolist())
    assert_rows_match(sample, refs)


@pytest.mark.parametrize("seed", range(6))
def test_wraps_many_times_and_stays_exact(seed):
    rb, world, ring, refs = fill(seed, (3, 4), 4, 3, ["same", "constant"][seed % 2], capacity=48, batches=30)
    assert ring.count > 2 * rb.capacity
    expected = expected_sampleable(world, ring, 4, 3)
    index = rb.sampleable_indices()
    assert len(rb) == len(expected) > 0
    everything = rb[index]
    assert sorted(step_ids(everything).tolist()) == sorted(expected)
    assert_rows_match(everything, refs)


def test_sampling_reaches_every_sampleable_transition_uniformly():
    rb, world, ring, refs = fill(3, (3, 4), 2, 2, "same")
    index = set(rb.sampleable_indices().numpy().tolist())
    seen = np.concatenate([rb.sample(256)["index"].numpy() for _ in range(40)])
    assert set(seen.tolist()) == index
    counts = np.bincount(seen, minlength=rb.capacity)[sorted(index)]
    assert counts.min() > 0.5 * counts.mean()


# ---- open ends, without ("next", "pixels") --------------------------------------------------------

def one_env_batch(world, start, T, with_next):
    td = world.batch([0], start, T, flat=True)
    return td if with_next else td.exclude(("next", "pixels"))


def test_without_next_frames_an_open_end_waits_for_the_next_batch():
    rng = np.random.default_rng(0)
    world = World(rng, 1, (3, 4), 12)
    world.envs[0] = [world._trajectory(12, "open")]
    rb = FrameStackReplayBuffer(100, frame_stack=2, n_steps=3, gamma=GAMMA)
    rb.extend(one_env_batch(world, 0, 6, with_next=False))
    assert len(rb) == 3  # steps 0..2: their windows (3 steps) and the frame after are stored
    rb.extend(one_env_batch(world, 6, 6, with_next=False))
    assert len(rb) == 9
    ref = reference(world.envs[0][0], 2, 3, "same")
    refs = {"where": {int(f): (0, 0, t) for t, f in enumerate(world.envs[0][0]["ids"][:-1])}, (0, 0): ref}
    assert_rows_match(rb[rb.sampleable_indices()], refs)
    assert rb.write_count == 12  # each frame once


def test_an_episode_end_needs_the_next_frame():
    rng = np.random.default_rng(1)
    world = World(rng, 1, (3, 4), 4)
    world.envs[0] = [world._trajectory(4, "terminated")]
    rb = FrameStackReplayBuffer(100)
    with pytest.raises(KeyError, match=r"no entry \(.+next.+pixels.+\), their last observations"):
        rb.extend(one_env_batch(world, 0, 4, with_next=False))
    rb.extend(one_env_batch(world, 0, 4, with_next=True))
    assert len(rb) == 4


# ---- bad input ---------------------------------------------------------------------------------

def good_batch(T=6, frame=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    world = World(rng, 1, frame, T)
    return world.batch([0], 0, T, flat=True)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"capacity": 0}, ValueError, "capacity must be >= 1, got capacity=0"),
    ({"capacity": 10, "n_steps": 0}, ValueError, "n_steps must be >= 1, got n_steps=0"),
    ({"capacity": 10, "frame_stack": 0}, ValueError, "frame_stack must be >= 1, got frame_stack=0"),
    ({"capacity": 10, "frame_stack": 2.0}, TypeError, "frame_stack must be an int, got float"),
    ({"capacity": 10, "padding": "zeros"}, ValueError, r"padding must be one of \['same', 'constant'\], got "
                                                       "padding='zeros'"),
    ({"capacity": 10, "storage": "disk"}, ValueError, "storage must be one of .*got storage='disk'"),
    ({"capacity": 10, "gamma": 1.5}, ValueError, "gamma must be in"),
    ({"capacity": 10, "batch_size": 0}, ValueError, "batch_size must be a positive int"),
    ({"capacity": 10, "prioritized": True}, ValueError, "prioritized=True needs alpha and beta"),
    ({"capacity": 10, "scratch_dir": "/tmp/x"}, ValueError, "scratch_dir=.* needs storage='memmap'"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        FrameStackReplayBuffer(**kwargs)


def with_entry(td, key, value):
    td = td.clone()
    td.set(key, value)
    return td


@pytest.mark.parametrize("change, error, match", [
    (lambda td: with_entry(td, "pixels", td["pixels"].to(rlpipe.float32)), TypeError,
     r"entry 'pixels' must be uint8 frames, got dtype float32"),
    (lambda td: with_entry(td, "pixels", rlpipe.zeros((6, 3), dtype=rlpipe.uint8)), ValueError,
     r"\[H, W\] or \[C, H, W\] = \[3, 4\]; got frames of shape \[3\]"),
    (lambda td: with_entry(td, "pixels", rlpipe.zeros((6, 4, 4), dtype=rlpipe.uint8)), ValueError,
     r"= \[3, 4\]; got frames of shape \[4, 4\]"),
    (lambda td: td.exclude("action"), KeyError, "has no entry .+action"),
    (lambda td: td.exclude(("next", "terminated")), KeyError, r"has no entry \(.+next.+terminated.+\)"),
    (lambda td: td.exclude(("next", "truncated")), KeyError, r"no entry \(.+next.+truncated.+\), which the buffer"),
    (lambda td: with_entry(td, "action", td["action"].to(rlpipe.float64)), ValueError,
     "entry 'action' has per-step shape \\[2\\] and dtype float64; the buffer stores \\[2\\] float32"),
    (lambda td: with_entry(td, ("next", "reward"), rlpipe.zeros((6, 2))), ValueError,
     r"one value per step, shape \[1, 6\] or \[1, 6, 1\]; got \[1, 6, 2\]"),
    (lambda td: td.reshape(2, 3).reshape(1, 2, 3), ValueError, r"batch_size=\[1, 2, 3\]"),
    (lambda td: td["pixels"], TypeError, "expected a TensorDict, got Tensor"),
])
def test_bad_batches_raise_and_leave_the_buffer_usable(change, error, match):
    rb = FrameStackReplayBuffer(50, frame_stack=2, n_steps=2, batch_size=4)
    rb.extend(good_batch(seed=0))
    before = (len(rb), rb.write_count, rb.state_dict())
    with pytest.raises(error, match=match):
        rb.extend(change(good_batch(seed=1)))
    assert (len(rb), rb.write_count) == before[:2]
    after = rb.state_dict()
    for name, array in before[2]["arrays"].items():
        np.testing.assert_array_equal(after["arrays"][name], array)
    rb.extend(good_batch(seed=2))
    assert rb.sample()["pixels"].shape == (4, 2, 3, 4)


def test_sampling_errors():
    rb = FrameStackReplayBuffer(50)
    with pytest.raises(RuntimeError, match="Cannot sample from an empty storage"):
        rb.sample(4)
    with pytest.raises(RuntimeError, match="batch_size not specified"):
        rb.sample()
    with pytest.raises(ValueError, match="batch_size must be a positive int, got batch_size=0"):
        rb.sample(0)
    rb.extend(good_batch())
    with pytest.raises(ValueError, match="slot 49 holds no sampleable transition"):
        rb[[0, 49]]
    with pytest.raises(ValueError, match="more than the capacity 5"):
        FrameStackReplayBuffer(5).extend(good_batch())


# ---- priorities ----------------------------------------------------------------------------------

def test_priorities_drive_sampling_and_weights():
    alpha, beta, eps = 0.7, 0.5, 1e-8
    rb = FrameStackReplayBuffer(200, frame_stack=2, n_steps=2, gamma=GAMMA, prioritized=True, alpha=alpha, beta=beta,
                                eps=eps, generator=rlpipe.Generator().manual_seed(0))
    world = World(np.random.default_rng(4), 2, (3, 4), 30)
    rb.extend(world.batch(range(2), 0, 30, False))
    index = rb.sampleable_indices().numpy()
    priority = np.linspace(0.1, 3.0, len(index))
    rb.update_priority(index, priority)
    sample = rb.sample(500)
    mass = (priority + eps) ** alpha
    by_slot = dict(zip(index.tolist(), mass))
    want = np.array([(by_slot[i] / mass.min()) ** -beta for i in sample["index"].numpy()], np.float32)
    np.testing.assert_allclose(sample["priority_weight"].numpy(), want, rtol=1e-6)
    assert sample["priority_weight"].dtype == rlpipe.float32
    frequency = np.bincount(sample["index"].numpy(), minlength=rb.capacity)[index] / 500
    assert np.corrcoef(frequency, mass / mass.sum())[0, 1] > 0.8
    rb.update_priority(index[:1], 100.0)  # only one transition left with weight
    rb.update_priority(index[1:], 0.0)
    assert set(rb.sample(50)["index"].numpy().tolist()) == {int(index[0])}
    before = rb.write_count
    rb.extend(world.batch(range(2), 0, 5, False))  # new transitions: the largest priority given so far
    ready = rb.sampleable_indices().numpy()
    new = ready[rb._slots.stamp[ready] >= before]
    assert len(new) and (rb._priority[new] == 100.0).all()
    assert (rb._priority[np.setdiff1d(ready, np.concatenate([new, index]))] == 1.0).all()  # written before
    with pytest.raises(ValueError, match="priorities must be finite and >= 0"):
        rb.update_priority(index[:1], -1.0)
    with pytest.raises(ValueError, match="slots that hold transitions"):
        rb.update_priority([199], 1.0)


# ---- checkpoints and memmap ----------------------------------------------------------------------

@pytest.mark.parametrize("storage", ["memory", "memmap"])
def test_dumps_loads_round_trip(tmp_path, storage):
    options = dict(prioritized=True, alpha=0.6, beta=0.4)
    scratch = tmp_path / "scratch" if storage == "memmap" else None
    rb, world, ring, refs = fill(11, (2, 3, 4), 3, 2, "same", storage=storage, scratch_dir=scratch, **options)
    index = rb.sampleable_indices()
    rb.update_priority(index, np.arange(1, len(index) + 1))
    if storage == "memmap":
        assert (tmp_path / "scratch" / "frame.npy").exists()
    rb.dumps(tmp_path / "dump")
    copy = FrameStackReplayBuffer(rb.capacity, frame_stack=3, n_steps=2, gamma=GAMMA, **options)
    copy.loads(tmp_path / "dump")
    assert len(copy) == len(rb) and copy.write_count == rb.write_count
    np.testing.assert_array_equal(copy.sampleable_indices().numpy(), index.numpy())
    assert_same(copy[index], rb[index])
    assert_rows_match(copy[index], refs)
    for buffer in (rb, copy):  # the same priorities: the same draws and weights from the same generator
        buffer.set_rng(rlpipe.Generator().manual_seed(5))
    assert_same(copy.sample(64), rb.sample(64))
    more = world.batch(range(len(world.envs)), 0, 4, False)  # both go on identically
    rb.extend(more)
    copy.extend(more)
    assert_same(copy[copy.sampleable_indices()], rb[rb.sampleable_indices()])
    with pytest.raises(ValueError, match="frame_stack=3, this buffer has frame_stack=4"):
        FrameStackReplayBuffer(rb.capacity, n_steps=2, gamma=GAMMA, **options).loads(tmp_path / "dump")
    rb.dumps(tmp_path / "dump")  # a rejected load changed nothing; a new dump replaces the old one
    copy.loads(tmp_path / "dump")
    assert copy.write_count == rb.write_count


def assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert a[key].dtype == b[key].dtype
        np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())


def test_memmap_lives_in_scratch_dir(tmp_path):
    rb = FrameStackReplayBuffer(64, storage="memmap", scratch_dir=tmp_path / "s", batch_size=8)
    rb.extend(good_batch(20))
    on_disk = np.load(tmp_path / "s" / "frame.npy", mmap_mode="r")  # the frames live in the file
    assert on_disk.shape == (64, 3, 4) and on_disk[:20].any()
    np.testing.assert_array_equal(on_disk, rb._slots.frame)
    assert rb.sample()["pixels"].shape == (8, 4, 3, 4)
    with pytest.raises(ValueError, match="already holds a buffer's frames"):
        FrameStackReplayBuffer(64, storage="memmap", scratch_dir=tmp_path / "s")
    with pytest.raises(ValueError, match="holds the buffer's scratch_dir"):
        rb.dumps(tmp_path)


# ---- threads -------------------------------------------------------------------------------------

def test_writers_and_samplers_in_threads():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        _threads()
    finally:
        sys.setswitchinterval(interval)


def _threads():
    writers, episodes, k, n = 3, 30, 3, 2
    worlds = [World(np.random.default_rng(50 + w), 1, (3, 4), 1) for w in range(writers)]
    for w, world in enumerate(worlds):
        world.next_id = 1 + w * 10_000
        world.envs[0] = [world._trajectory(int(L), "terminated") for L in np.random.default_rng(w).integers(1, 8,
                                                                                                             episodes)]
    total = sum(len(t["action"]) for world in worlds for t in world.envs[0])
    frames = total + writers * episodes
    rb = FrameStackReplayBuffer(frames, frame_stack=k, n_steps=n, gamma=GAMMA)
    errors = []

    def write(world):
        start = 0
        for traj in world.envs[0]:  # whole episodes, so the batches of different writers do not continue each other
            rb.extend(world.batch([0], start, len(traj["action"]), flat=True))
            start += len(traj["action"])

    def sample():
        for _ in range(200):
            if len(rb):
                s = rb.sample(16)
                ids = frame_id(s["pixels"].numpy(), 2)
                steps = ids[:, -1:] - ids  # a stack holds consecutive frames of one trajectory (or padding)
                if not ((steps >= 0) & (steps < k)).all():
                    errors.append(ids)
    threads = [threading.Thread(target=write, args=(w,)) for w in worlds] + [threading.Thread(target=sample)
                                                                              for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert rb.write_count == frames and len(rb) == total
    refs = {"where": {}}
    for w, world in enumerate(worlds):
        for j, traj in enumerate(world.envs[0]):
            refs[w, j] = reference(traj, k, n, "same")
            refs["where"].update({int(f): (w, j, t) for t, f in enumerate(traj["ids"][:-1])})
    everything = rb[rb.sampleable_indices()]
    assert sorted(step_ids(everything).tolist()) == sorted(refs["where"])
    assert_rows_match(everything, refs)


def test_a_bad_state_is_refused_and_changes_nothing():
    rb, world, ring, refs = fill(2, (3, 4), 2, 2, "same")
    before = rb[rb.sampleable_indices()]
    state = rb.state_dict()
    other = FrameStackReplayBuffer(rb.capacity + 1, frame_stack=2, n_steps=2, gamma=GAMMA)
    with pytest.raises(ValueError, match=f"capacity={rb.capacity}, this buffer has capacity={rb.capacity + 1}"):
        other.load_state_dict(state)
    broken = dict(state, arrays=dict(state["arrays"], frame=state["arrays"]["frame"][:-1]))
    with pytest.raises(ValueError, match="slot array 'frame' has shape"):
        rb.load_state_dict(broken)
    with pytest.raises(ValueError, match="bad state"):
        rb.load_state_dict({"config": state["config"]})
    assert_same(rb[rb.sampleable_indices()], before)


def test_another_frame_key():
    td = good_batch(8)
    td.set("observation", td.pop("pixels"))
    td.set(("next", "observation"), td.pop(("next", "pixels")))
    rb = FrameStackReplayBuffer(32, frame_stack=2, frame_key="observation")
    rb.extend(td)
    sample = rb[rb.sampleable_indices()]
    assert len(rb) == 8 and "pixels" not in sample.keys()
    np.testing.assert_array_equal(sample["observation"][:, -1].numpy(), td["observation"].numpy())
    np.testing.assert_array_equal(sample["next", "observation"][:, -1].numpy(), td["next", "observation"].numpy())
    with pytest.raises(KeyError, match=r"has no entry .observation. \(entries: action, collector/traj_ids, next/done"):
        rb.extend(good_batch(8))


def test_sum_tree_leaves_set_to_zero_count_in_neither_sum_nor_min():
    """The buffer masks unsampleable slots out of the priority tree by setting them to 0."""
    from rlpipe.data import SumMinTree
    tree = SumMinTree(6)
    tree.update(np.arange(6), [3.0, 1.0, 4.0, 1.5, 5.0, 9.0])
    tree.update([1, 3], [0.0, 0.0])
    assert tree.total == 21.0 and tree.min == 3.0
    rebuilt = SumMinTree(6)
    rebuilt.load(tree.leaves())
    np.testing.assert_array_equal(rebuilt._min, tree._min)
