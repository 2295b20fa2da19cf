# ruff: noqa: SIM118 - TensorDict.keys() is the API (tensordict raises on `key in td`)
"""``split_trajectories``, ``discounted_cumsum`` and ``reward2go`` against brute-force Python loops.

``split_trajectories``: the trajectories are the runs of equal ``("collector", "traj_ids")`` in
row-major order, or, without that entry, the runs that end at each ``("next", "done")`` and at
the end of each batch row; the result is ``[num_trajectories, max_length]``, zero-padded, with a
boolean ``("collector", "mask")`` marking the real steps.

``discounted_cumsum``: ``G[t] = r[t] + gamma * (1 - done[t]) * G[t + 1]`` along ``time_dim``.
"""
import numpy as np
import pytest
import td_helpers
from td_helpers import arr, make_td

import rlpipe
from rlpipe.postprocs import discounted_cumsum, reward2go, split_trajectories

# ----------------------------------------------------------------------------------------------
# helpers


def leaves(td):
    """{tuple key: NumPy copy} of every leaf."""
    return {key: arr(value) for key, value in td_helpers.leaves(td).items()}


# ----------------------------------------------------------------------------------------------
# split_trajectories


def brute_force_trajectories(arrays, batch_shape, trajectory_key=("collector", "traj_ids"),
                             done_key=("next", "done")):
    """The trajectories as lists of row-major flat step indices, in order of appearance."""
    batch_shape = tuple(batch_shape)
    N = int(np.prod(batch_shape))
    trajectories = []
    if trajectory_key in arrays:
        ids = arrays[trajectory_key].reshape(N)
        for i in range(N):
            if i == 0 or ids[i] != ids[i - 1]:
                trajectories.append([])
            trajectories[-1].append(i)
        return trajectories
    T = batch_shape[-1]
    done = arrays[done_key].reshape(N)
    for i in range(N):
        if i % T == 0 or done[i - 1]:
            trajectories.append([])
        trajectories[-1].append(i)
    return trajectories


def expected_split(arrays, batch_shape, trajectories, prefix="collector"):
    N = int(np.prod(batch_shape))
    count = len(trajectories)
    longest = max(len(t) for t in trajectories)
    out = {}
    for key, value in arrays.items():
        flat = value.reshape((N,) + value.shape[len(batch_shape):])
        padded = np.zeros((count, longest) + flat.shape[1:], dtype=value.dtype)
        for row, steps in enumerate(trajectories):
            for col, i in enumerate(steps):
                padded[row, col] = flat[i]
        out[key] = padded
    mask = np.zeros((count, longest), bool)
    for row, steps in enumerate(trajectories):
        mask[row, :len(steps)] = True
    out[(prefix, "mask")] = mask
    return out


def assert_split_equal(td, expected):
    got = leaves(td)
    assert sorted(got) == sorted(expected)
    count, longest = next(iter(expected.values())).shape[:2]
    assert tuple(td.batch_size) == (count, longest)
    for key, want in expected.items():
        assert got[key].shape == want.shape, (key, got[key].shape, want.shape)
        assert got[key].dtype == want.dtype, (key, got[key].dtype, want.dtype)
        np.testing.assert_array_equal(got[key], want, err_msg=str(key))


def random_steps(rng, batch_shape, p_done, with_ids=False):
    batch_shape = tuple(batch_shape)
    done = rng.random(batch_shape + (1,)) < p_done
    arrays = {
        ("observation",): rng.standard_normal(batch_shape + (3,)).astype(np.float32),
        ("step",): rng.integers(1, 100, batch_shape),
        ("next", "reward"): rng.standard_normal(batch_shape + (1,)).astype(np.float32),
        ("next", "done"): done,
        ("next", "observation"): rng.standard_normal(batch_shape + (3,)).astype(np.float32),
        ("next", "info", "x"): rng.standard_normal(batch_shape + (2, 2)),
    }
    if with_ids:
        # trajectory ids as a collector writes them: new id after a done, distinct per row
        ids = np.zeros(batch_shape, np.int64)
        flat_done = done.reshape(-1, batch_shape[-1])
        flat_ids = ids.reshape(-1, batch_shape[-1])
        next_id = int(rng.integers(0, 5))
        for row in range(flat_ids.shape[0]):
            for t in range(batch_shape[-1]):
                flat_ids[row, t] = next_id
                if flat_done[row, t]:
                    next_id += 1
            next_id += int(rng.integers(1, 3))
        arrays[("collector", "traj_ids")] = flat_ids.reshape(batch_shape)
    return arrays


@pytest.mark.parametrize("with_ids", [False, True], ids=["from-done", "from-traj_ids"])
@pytest.mark.parametrize("batch_kind", ["[T]", "[B,T]", "[A,B,T]"])
@pytest.mark.parametrize("p_done", [0.0, 0.1, 0.5])
def test_split_trajectories_matches_brute_force(p_done, batch_kind, with_ids):
    rng = np.random.default_rng(int(p_done * 10) + 7 * with_ids + 31 * len(batch_kind))
    for _ in range(4):
        T = int(rng.choice([1, 2, int(rng.integers(1, 30))]))
        lead = tuple(int(x) for x in rng.integers(1, 5, size=batch_kind.count(",")))
        shape = lead + (T,)
        arrays = random_steps(rng, shape, p_done, with_ids)
        td = make_td(arrays, shape)
        out = split_trajectories(td)
        trajectories = brute_force_trajectories(arrays, shape)
        assert_split_equal(out, expected_split(arrays, shape, trajectories))


def test_split_trajectories_hand_worked():
    done = np.array([[0, 1, 0, 0, 1], [0, 0, 0, 0, 0]], bool)[..., None]
    step = np.arange(10).reshape(2, 5)
    out = split_trajectories(make_td({("step",): step, ("next", "done"): done}, (2, 5)))
    assert tuple(out.batch_size) == (3, 5)
    np.testing.assert_array_equal(arr(out["step"]), [[0, 1, 0, 0, 0], [2, 3, 4, 0, 0], [5, 6, 7, 8, 9]])
    np.testing.assert_array_equal(arr(out["collector", "mask"]),
                                  [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


def test_split_trajectories_traj_ids_take_precedence_and_are_runs():
    """Runs of equal ids in row-major order, in order of appearance (not sorted by id); the done
    entry is ignored when ids are there."""
    ids = np.array([5, 5, 2, 2, 2, 7, 5, 5])
    done = np.array([1, 0, 0, 1, 0, 0, 0, 1], bool)[:, None]
    step = np.arange(8) + 1
    out = split_trajectories(make_td({("step",): step, ("next", "done"): done,
                                      ("collector", "traj_ids"): ids}, (8,)))
    np.testing.assert_array_equal(arr(out["collector", "traj_ids"]),
                                  [[5, 5, 0], [2, 2, 2], [7, 0, 0], [5, 5, 0]])
    np.testing.assert_array_equal(arr(out["step"]), [[1, 2, 0], [3, 4, 5], [6, 0, 0], [7, 8, 0]])


def test_split_trajectories_prefix_and_keys():
    rng = np.random.default_rng(5)
    arrays = random_steps(rng, (3, 6), 0.3)
    arrays[("meta", "ids")] = np.repeat(np.arange(9), 2).reshape(3, 6)
    out = split_trajectories(make_td(arrays, (3, 6)), prefix="meta", trajectory_key=("meta", "ids"))
    trajectories = brute_force_trajectories(arrays, (3, 6), trajectory_key=("meta", "ids"))
    assert len(trajectories) == 9
    assert_split_equal(out, expected_split(arrays, (3, 6), trajectories, prefix="meta"))

    arrays = random_steps(rng, (2, 7), 0.3)
    arrays[("term",)] = arrays.pop(("next", "done"))
    out = split_trajectories(make_td(arrays, (2, 7)), done_key="term")
    trajectories = brute_force_trajectories(arrays, (2, 7), done_key=("term",))
    assert_split_equal(out, expected_split(arrays, (2, 7), trajectories))


def test_split_trajectories_leaves_input_unchanged():
    rng = np.random.default_rng(6)
    arrays = random_steps(rng, (2, 9), 0.3, with_ids=True)
    td = make_td(arrays, (2, 9))
    split_trajectories(td)
    assert tuple(td.batch_size) == (2, 9)
    got = leaves(td)
    assert sorted(got) == sorted(arrays)
    for key, value in arrays.items():
        np.testing.assert_array_equal(got[key], value)


# ----------------------------------------------------------------------------------------------
# discounted_cumsum / reward2go


def brute_force_return(reward, done, gamma, time_dim):
    """G[t] = r[t] + gamma * (1 - done[t]) * G[t + 1], a backward loop per series, in float64."""
    r = np.moveaxis(reward.astype(np.float64), time_dim, -1)
    d = np.moveaxis(np.broadcast_to(done, reward.shape), time_dim, -1)
    out = np.zeros(r.shape)
    scale = np.zeros(r.shape)  # the same recursion on |r|: the size of the terms summed
    for i in np.ndindex(*r.shape[:-1]):
        g = s = 0.0
        for t in reversed(range(r.shape[-1])):
            if d[i + (t,)]:
                g = s = 0.0
            g = r[i + (t,)] + gamma * g
            s = abs(r[i + (t,)]) + gamma * s
            out[i + (t,)] = g
            scale[i + (t,)] = s
    return np.moveaxis(out, -1, time_dim), np.moveaxis(scale, -1, time_dim)


def check_return(fn, reward, done, gamma, time_dim):
    got = fn(rlpipe.tensor(reward), rlpipe.tensor(done), gamma, time_dim=time_dim)
    want, scale = brute_force_return(reward, done, gamma, time_dim)
    have = arr(got)
    assert have.shape == reward.shape and have.dtype == reward.dtype
    eps = np.finfo(reward.dtype).eps
    T = reward.shape[time_dim]
    tol = 4 * eps * (np.log2(max(T, 2)) + 1) * scale + 1e-12
    bad = np.abs(have - want) > tol
    assert not bad.any(), (f"{bad.sum()} of {bad.size} differ; worst {np.abs(have - want).max()} "
                           f"at {np.unravel_index(np.argmax(np.abs(have - want) - tol), have.shape)}")


@pytest.mark.parametrize("fn", [discounted_cumsum, reward2go])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("gamma", [1.0, 0.9, 0.0])
@pytest.mark.parametrize("time_dim", [-2, -1])
def test_discounted_cumsum_matches_backward_loop(time_dim, gamma, dtype, fn):
    rng = np.random.default_rng(int(gamma * 10) + 3 * (time_dim == -1) + 50 * (dtype == np.float32))
    for T in (1, 2, 7, 64, 300):
        for p_done in (0.0, 0.02, 0.3):
            if time_dim == -2:
                reward = rng.standard_normal((3, T, 1)).astype(dtype)
                done = rng.random((3, T, 1)) < p_done
            else:
                reward = rng.standard_normal((2, 2, T)).astype(dtype)
                done = rng.random((2, 2, T)) < p_done
            check_return(fn, reward, done, gamma, time_dim)


def test_discounted_cumsum_broadcasts_done_over_reward_features():
    rng = np.random.default_rng(9)
    reward = rng.standard_normal((2, 50, 3)).astype(np.float32)
    done = rng.random((2, 50, 1)) < 0.1
    check_return(discounted_cumsum, reward, done, 0.95, -2)


def test_discounted_cumsum_hand_worked():
    reward = np.array([1.0, 2.0, 4.0, 8.0], np.float32)[:, None]
    done = np.array([0, 1, 0, 0], bool)[:, None]
    got = arr(discounted_cumsum(rlpipe.tensor(reward), rlpipe.tensor(done), 0.5))
    np.testing.assert_allclose(got[:, 0], [1 + 0.5 * 2, 2, 4 + 0.5 * 8, 8])
    got = arr(reward2go(rlpipe.tensor(reward[:, 0]), rlpipe.tensor(done[:, 0]), 1.0, time_dim=-1))
    np.testing.assert_allclose(got, [3, 2, 12, 8])
