# ruff: noqa: SIM118 - TensorDict.keys() is the API (tensordict raises on `key in td`)
"""``rlpipe.postprocs.MultiStep`` against independent truth.

1. torchrl 0.14.1's outputs stored in ``/work/shared/golden/multistep`` (the keys where rlpipe must
   agree with torchrl: rewards, gamma, steps_to_next_obs, the shifted observation);
2. a brute-force reference below, written with plain Python loops over every batch element and
   every time step, that implements DESIGN.md's "MultiStep semantics" literally (rlpipe is stricter
   than torchrl: the done entries are shifted too, and the last step of a batch is not terminal);
3. hand-worked examples (the seed's step_count example, a window running into a terminal state);
4. bad input: the right error, and the TensorDict left exactly as it was;
5. streaming: the concatenation of every emitted chunk equals the batch transform of the whole
   trajectory, each frame once, exactly n - 1 frames late.
"""
import glob
import os

import numpy as np
import pytest
from td_helpers import arr, leaves, make_td

import rlpipe
from rlpipe import TensorDict
from rlpipe.postprocs import MultiStep

GOLDEN_DIR = os.environ.get("RLPIPE_GOLDEN_DIR", "/work/shared/golden/multistep")
GOLDEN_FILES = sorted(glob.glob(os.path.join(GOLDEN_DIR, "case_*.npz")))

NEW_KEYS = {("gamma",), ("steps_to_next_obs",), ("nonterminal",)}

# ----------------------------------------------------------------------------------------------
# helpers: NumPy <-> TensorDict, by hand


def leaf_arrays(td):
    return {key: arr(value) for key, value in leaves(td).items()}


def nested_batch_sizes(td, prefix=()):
    out = {prefix: tuple(td.batch_size)}
    for key in td.keys():
        value = td.get(key)
        if isinstance(value, TensorDict):
            out.update(nested_batch_sizes(value, prefix + (key,)))
    return out


def snapshot(td):
    """Everything that identifies a TensorDict's content: leaf keys, dtypes, values, batch sizes."""
    return ({key: (str(v.dtype), arr(v)) for key, v in leaves(td).items()}, nested_batch_sizes(td))


def assert_snapshot_equal(td, before):
    now_leaves, now_batches = snapshot(td)
    old_leaves, old_batches = before
    assert now_batches == old_batches
    assert sorted(now_leaves) == sorted(old_leaves)
    for key, (dtype, value) in old_leaves.items():
        assert now_leaves[key][0] == dtype, key
        assert now_leaves[key][1].shape == value.shape, key
        np.testing.assert_array_equal(now_leaves[key][1], value, err_msg=str(key))


def assert_matches(got, expected, *, rtol=1e-6, atol=1e-5, what=""):
    """``got`` ({key: array}) equals ``expected`` ({key: array}): same keys, shapes and dtypes;
    floats to rtol/atol, everything else exactly."""
    assert sorted(got) == sorted(expected), (what, sorted(got), sorted(expected))
    for key, want in expected.items():
        have = got[key]
        assert have.shape == want.shape, (what, key, have.shape, want.shape)
        assert have.dtype == want.dtype, (what, key, have.dtype, want.dtype)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, err_msg=f"{what} {key}")
        else:
            np.testing.assert_array_equal(have, want, err_msg=f"{what} {key}")


# ----------------------------------------------------------------------------------------------
# the brute-force reference (DESIGN.md, "MultiStep semantics", one loop iteration per element)


def reference_multistep(arrays, batch_shape, n, gamma, reward_keys=(("next", "reward"),),
                        done_key=("next", "done"), terminated_key=("next", "terminated"),
                        mask_key=("collector", "mask")):
    """The expected leaves ({tuple key: array}) after ``MultiStep(gamma, n, reward_keys=...)``.

    ``batch_shape`` is ``[*B, T]``. ``done`` is ``[*B, T]``, ``[*B, T, 1]``, or, with several agents,
    ``[*B, T, A]`` (``A`` per-agent windows; every ``"next"`` entry then starts with ``[*B, T, A]``).
    A ``("collector", "mask")`` of shape ``[*B, T]`` marks the valid steps: a window also stops before
    the first masked-out step; a masked-out step keeps a window of 1 (its own transition) and is
    never nonterminal."""
    batch_shape = tuple(batch_shape)
    lead, T = batch_shape[:-1], batch_shape[-1]
    nb = len(batch_shape)
    done = arrays[done_key]
    agents = tuple(done.shape[nb:])
    if agents and agents[-1] == 1:  # a trailing 1 is a feature dim, as for single-agent done [*B, T, 1]
        agents = agents[:-1]
    done = done.reshape(batch_shape + agents).astype(bool)
    mask = arrays.get(mask_key)
    mask = None if mask is None else mask.reshape(batch_shape).astype(bool)

    def valid(b, s):
        return True if mask is None else bool(mask[b + (s,)])

    m = np.zeros(batch_shape + agents, dtype=np.int64)
    for b in np.ndindex(*lead):
        for e in np.ndindex(*agents):
            for t in range(T):
                if not valid(b, t):
                    m[b + (t,) + e] = 1
                    continue
                candidates = [n, T - t]
                first_done = next((s for s in range(t, T) if done[b + (s,) + e]), None)
                if first_done is not None:
                    candidates.append(1 + first_done - t)
                first_masked = next((s for s in range(t, T) if not valid(b, s)), None)
                if first_masked is not None:
                    candidates.append(first_masked - t)
                m[b + (t,) + e] = min(candidates)

    out = {key: np.array(value) for key, value in arrays.items()}
    reward_keys = [tuple(k) for k in reward_keys]
    for key in reward_keys:
        r = arrays[key]
        summed = np.zeros(r.shape, dtype=np.float64)
        for b in np.ndindex(*lead):
            for e in np.ndindex(*agents):
                for t in range(T):
                    i = b + (t,) + e
                    total = 0.0
                    for k in range(m[i]):
                        total = total + gamma ** k * r[b + (t + k,) + e].astype(np.float64)
                    summed[i] = total
        out[key[:-1] + ("original_" + key[-1],)] = np.array(r)
        out[key] = summed.astype(r.dtype)
    for key, value in arrays.items():
        if key[0] != "next" or key in reward_keys:
            continue
        shifted = np.array(value)
        for b in np.ndindex(*lead):
            for e in np.ndindex(*agents):
                for t in range(T):
                    i = b + (t,) + e
                    shifted[i] = value[b + (t + m[i] - 1,) + e]
        out[key] = shifted
    terminal = out[terminated_key] if terminated_key in arrays else out[done_key]
    terminal = terminal.reshape(batch_shape + agents).astype(bool)
    nonterminal = np.zeros(batch_shape + agents, dtype=bool)
    gammas = np.zeros(batch_shape + agents, dtype=np.float32)
    for i in np.ndindex(*(batch_shape + agents)):
        nonterminal[i] = (not terminal[i]) and valid(i[:nb - 1], i[nb - 1])
        gammas[i] = np.float32(gamma ** int(m[i]))
    out[("gamma",)] = gammas
    out[("steps_to_next_obs",)] = m
    out[("nonterminal",)] = nonterminal
    return out


def test_reference_against_a_hand_worked_case():
    """The reference itself, on a case worked out on paper (T=6, n=3, gamma=0.5, terminated at
    t=1, truncated at t=4)."""
    r = np.array([1, 2, 4, 8, 16, 32], np.float32)
    term = np.array([0, 1, 0, 0, 0, 0], bool)
    trunc = np.array([0, 0, 0, 0, 1, 0], bool)
    obs = np.arange(1, 7, dtype=np.float32)[:, None]
    arrays = {("next", "reward"): r, ("next", "done"): term | trunc, ("next", "terminated"): term,
              ("next", "truncated"): trunc, ("next", "observation"): obs}
    out = reference_multistep(arrays, (6,), 3, 0.5)
    np.testing.assert_array_equal(out[("steps_to_next_obs",)], [2, 1, 3, 2, 1, 1])
    np.testing.assert_allclose(out[("next", "reward")], [1 + 1, 2, 4 + 4 + 4, 8 + 8, 16, 32])
    np.testing.assert_array_equal(out[("next", "observation")][:, 0], [2, 2, 5, 5, 5, 6])
    np.testing.assert_array_equal(out[("next", "terminated")], [1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(out[("next", "truncated")], [0, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(out[("nonterminal",)], [0, 0, 1, 1, 1, 1])
    np.testing.assert_allclose(out[("gamma",)], [0.25, 0.5, 0.125, 0.25, 0.5, 0.5])


# ----------------------------------------------------------------------------------------------
# random batches


def random_arrays(rng, batch_shape, *, p_done=0.3, trailing=False, terminated=True, reward_keys=1,
                  mask=False, obs_dim=3):
    """Tuple-keyed arrays of a random batch ``[*B, T]`` (see the keys below). With ``terminated``,
    done = terminated | truncated (both entries present); without, only done."""
    batch_shape = tuple(batch_shape)
    ev = batch_shape
    sq = (lambda a: a[..., None]) if trailing else (lambda a: a)
    term = rng.random(ev) < p_done
    trunc = (rng.random(ev) < p_done / 2) & ~term
    done = term | trunc
    obs = rng.standard_normal(ev + (obs_dim,)).astype(np.float32)
    arrays = {
        ("observation",): obs,
        ("done",): np.zeros(ev + ((1,) if trailing else ()), bool),
        ("next", "observation"): rng.standard_normal(ev + (obs_dim,)).astype(np.float32),
        ("next", "reward"): sq(rng.standard_normal(ev).astype(np.float32)),
        ("next", "done"): sq(done),
        ("next", "step_count"): rng.integers(0, 1000, ev + (1,)),
        ("next", "info", "x"): rng.standard_normal(ev + (2,)),  # float64, nested
    }
    if terminated:
        arrays[("next", "terminated")] = sq(term)
        arrays[("next", "truncated")] = sq(trunc)
    if reward_keys > 1:
        arrays[("next", "cost")] = rng.standard_normal(ev)  # float64, never with a trailing 1
    if reward_keys > 2:
        arrays[("next", "aux", "bonus")] = sq(rng.standard_normal(ev).astype(np.float32))
    if mask:
        valid = np.ones(batch_shape, bool)
        for b in np.ndindex(*batch_shape[:-1]):
            kind = rng.integers(0, 3)
            if kind == 1:  # a padded trajectory: valid prefix
                valid[b + (slice(int(rng.integers(0, batch_shape[-1] + 1)), None),)] = False
            elif kind == 2:  # anywhere
                valid[b] = rng.random(batch_shape[-1]) < 0.7
        arrays[("collector", "mask")] = valid
    return arrays


REWARD_KEY_SETS = {1: [("next", "reward")], 2: [("next", "reward"), ("next", "cost")],
                   3: [("next", "reward"), ("next", "cost"), ("next", "aux", "bonus")]}


def run_and_compare(arrays, batch_shape, n, gamma, reward_keys=(("next", "reward"),), what=""):
    td = make_td(arrays, batch_shape)
    before = snapshot(td)
    out = MultiStep(gamma, n, reward_keys=list(reward_keys))(td)
    assert out is not td
    assert_snapshot_equal(td, before)  # the input keeps its entries, as torchrl's
    expected = reference_multistep(arrays, batch_shape, n, gamma, reward_keys=reward_keys)
    assert_matches(leaf_arrays(out), expected, what=what)
    assert tuple(out.batch_size) == tuple(batch_shape)


def _random_case(seed, lead_dims, p_done, trailing, terminated):
    rng = np.random.default_rng(seed)
    lead = tuple(int(x) for x in rng.integers(1, 4, size=lead_dims))
    T = int(rng.choice([1, 2, 3, int(rng.integers(1, 41)), int(rng.integers(1, 41)), 40]))
    n = int(rng.integers(1, 9))
    gamma = float(rng.choice([1.0, 0.99, 0.9, 0.5]))
    k = int(rng.integers(1, 4))
    arrays = random_arrays(rng, lead + (T,), p_done=p_done, trailing=trailing, terminated=terminated,
                           reward_keys=k, mask=bool(rng.integers(0, 3) == 0), obs_dim=int(rng.integers(1, 4)))
    return arrays, lead + (T,), n, gamma, REWARD_KEY_SETS[k]


@pytest.mark.parametrize("terminated", [True, False], ids=["term+trunc", "done-only"])
@pytest.mark.parametrize("trailing", [False, True], ids=["flat", "trailing1"])
@pytest.mark.parametrize("p_done", [0.0, 0.05, 0.3])
@pytest.mark.parametrize("lead_dims", [0, 1, 2])
def test_random_batches_match_reference(lead_dims, p_done, trailing, terminated):
    base = 1000 * lead_dims + int(100 * p_done) * 10 + 2 * trailing + terminated
    for seed in range(base, base + 5):
        arrays, shape, n, gamma, keys = _random_case(seed, lead_dims, p_done, trailing, terminated)
        run_and_compare(arrays, shape, n, gamma, keys, what=f"seed={seed} shape={shape} n={n} gamma={gamma}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, "bfloat16"])
def test_small_and_large_batch_sums_agree_bit_for_bit(dtype):
    """Small batches sum through gathers, large ones in n passes: the same terms in the same order,
    so the same bits (infinite rewards included: nothing outside a window is multiplied by 0)."""
    from rlpipe.postprocs import multistep
    dtype = rlpipe.bfloat16.np if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(78)
    for trial in range(200):
        shape = [(10,), (3, 7), (2, 2, 5), (1, 1)][trial % 4]
        n = int(rng.integers(1, 7))
        done = rng.random(shape) < 0.25
        valid = rng.random(shape) < 0.9 if trial % 3 == 0 else None
        reward = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape))
        reward[rng.random(shape) < 0.05] = np.inf
        reward = reward.astype(dtype)
        plan = multistep._plan_of(np, multistep._ends(done, valid), n, 0.93)
        assert plan.gather is not None  # the small-batch path
        gathered = multistep._discounted_sum(np, reward, plan, 0.93, n)
        passes = multistep._sum_in_passes(np, reward, plan.m, 0.93, n)
        assert gathered.dtype == passes.dtype == dtype
        np.testing.assert_array_equal(gathered.astype(np.float64), passes.astype(np.float64), err_msg=f"trial {trial}")


def test_plans_kept_for_small_batches_are_not_changed_through_outputs():
    """Small batches reuse the window plan of their done pattern: writing into one output (its
    window lengths, gammas, shifted entries) must not change the next batch's result."""
    rng = np.random.default_rng(77)
    stream = MultiStep(0.9, 4)
    for i in range(40):  # 10-frame batches, as a collector's postproc sees: few distinct patterns
        arrays = random_arrays(rng, (10,), p_done=0.1)
        out = stream(make_td(arrays, (10,)))
        assert_matches(leaf_arrays(out), reference_multistep(arrays, (10,), 4, 0.9), what=f"batch {i}")
        for key in ("steps_to_next_obs", "gamma", "nonterminal", ("next", "done"), ("next", "reward")):
            out[key].zero_()


@pytest.mark.parametrize("n", range(1, 9))
def test_every_n_and_short_batches(n):
    """Every n against every T around it (T < n, T == n, T > n), with and without dones."""
    rng = np.random.default_rng(n)
    for T in sorted({1, max(n - 1, 1), n, n + 1, 2 * n + 3}):
        for p_done in (0.0, 0.3):
            arrays = random_arrays(rng, (2, T), p_done=p_done)
            run_and_compare(arrays, (2, T), n, 0.9, what=f"T={T} p_done={p_done}")


@pytest.mark.parametrize("seed", range(6))
def test_masks_match_reference(seed):
    rng = np.random.default_rng(100 + seed)
    lead = tuple(int(x) for x in rng.integers(1, 4, size=seed % 3))
    T = int(rng.integers(1, 30))
    arrays = random_arrays(rng, lead + (T,), p_done=float(rng.choice([0.0, 0.1, 0.3])), mask=True,
                           trailing=bool(seed % 2))
    run_and_compare(arrays, lead + (T,), int(rng.integers(1, 9)), 0.9, what=f"seed={seed}")


def test_mask_stops_windows_and_masked_steps_are_not_nonterminal():
    """A padded trajectory (valid prefix of 3 steps, no done): the windows stop at the padding,
    which never bootstraps."""
    r = np.arange(1, 7, dtype=np.float32)
    arrays = {("next", "reward"): r, ("next", "done"): np.zeros(6, bool),
              ("next", "terminated"): np.zeros(6, bool), ("next", "observation"): r[:, None] * 10,
              ("collector", "mask"): np.array([1, 1, 1, 0, 0, 0], bool)}
    td = make_td(arrays, (6,))
    td = MultiStep(1.0, 4)(td)
    np.testing.assert_array_equal(arr(td["steps_to_next_obs"]), [3, 2, 1, 1, 1, 1])
    np.testing.assert_allclose(arr(td["next", "reward"]), [6, 5, 3, 4, 5, 6])
    np.testing.assert_array_equal(arr(td["next", "observation"])[:, 0], [30, 30, 30, 40, 50, 60])
    np.testing.assert_array_equal(arr(td["nonterminal"]), [1, 1, 1, 0, 0, 0])


@pytest.mark.parametrize("done_trailing", [False, True], ids=["done[B,T,A]", "done[B,T,A,1]"])
@pytest.mark.parametrize("seed", range(3))
def test_multi_agent_done_matches_reference(seed, done_trailing):
    """Batch [B, T], done [B, T, A]: one window per agent; per-agent rewards [B, T, A, 1] and
    observations [B, T, A, 3] follow their agent's window."""
    rng = np.random.default_rng(200 + seed)
    B, T, A = int(rng.integers(1, 4)), int(rng.integers(1, 25)), int(rng.integers(2, 5))
    term = rng.random((B, T, A)) < 0.2
    trunc = (rng.random((B, T, A)) < 0.1) & ~term
    sq = (lambda a: a[..., None]) if done_trailing else (lambda a: a)
    arrays = {
        ("observation",): rng.standard_normal((B, T, A, 3)).astype(np.float32),
        ("next", "observation"): rng.standard_normal((B, T, A, 3)).astype(np.float32),
        ("next", "reward"): rng.standard_normal((B, T, A, 1)).astype(np.float32),
        ("next", "done"): sq(term | trunc),
        ("next", "terminated"): sq(term),
        ("next", "truncated"): sq(trunc),
    }
    for n in (1, 3, 8):
        run_and_compare(arrays, (B, T), n, 0.9, what=f"B={B} T={T} A={A} n={n}")


def test_multi_agent_done_with_collector_mask():
    """A ("collector", "mask") [B, T] (the collector's, shared by the agents) with done [B, T, A]."""
    rng = np.random.default_rng(7)
    B, T, A = 2, 9, 3
    term = rng.random((B, T, A)) < 0.2
    arrays = {
        ("next", "observation"): rng.standard_normal((B, T, A, 3)).astype(np.float32),
        ("next", "reward"): rng.standard_normal((B, T, A, 1)).astype(np.float32),
        ("next", "done"): term, ("next", "terminated"): term,
        ("collector", "mask"): np.arange(T)[None, :] < np.array([[6], [9]]),
    }
    run_and_compare(arrays, (B, T), 4, 0.9)


# ----------------------------------------------------------------------------------------------
# golden: torchrl 0.14.1's outputs


def golden_input(z):
    batch = tuple(int(x) for x in z["batch_shape"])
    trailing = z["reward"].ndim == len(batch) + 1
    arrays = {
        ("observation",): z["observation"],
        ("done",): np.zeros(batch + ((1,) if trailing else ()), bool),
        ("next", "observation"): z["next_observation"],
        ("next", "reward"): z["reward"],
        ("next", "done"): z["done"],
        ("next", "terminated"): z["terminated"],
        ("next", "truncated"): z["truncated"],
    }
    return arrays, batch


def test_golden_files_present():
    assert len(GOLDEN_FILES) >= 10, f"expected the golden cases in {GOLDEN_DIR}"


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[os.path.basename(p)[:-4] for p in GOLDEN_FILES])
def test_golden_torchrl(path):
    z = np.load(path)
    arrays, batch = golden_input(z)
    gamma, n = float(z["gamma_in"]), int(z["n_steps"])
    td = make_td(arrays, batch)
    td = MultiStep(gamma, n)(td)
    got = {"out_next_reward": td["next", "reward"], "out_original_reward": td["next", "original_reward"],
           "out_gamma": td["gamma"], "out_steps_to_next_obs": td["steps_to_next_obs"],
           "out_next_observation": td["next", "observation"]}
    for name, value in got.items():
        want, have = z[name], arr(value)
        assert have.shape == want.shape, (name, have.shape, want.shape)
        assert have.dtype == want.dtype, (name, have.dtype, want.dtype)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(have, want, err_msg=name)
    # and everything (done entries and nonterminal included, where rlpipe differs from torchrl)
    # against the reference, which must itself agree with torchrl on the golden keys
    expected = reference_multistep(arrays, batch, n, gamma)
    np.testing.assert_array_equal(expected[("steps_to_next_obs",)], z["out_steps_to_next_obs"])
    np.testing.assert_allclose(expected[("next", "reward")], z["out_next_reward"], rtol=1e-6, atol=1e-6)
    assert_matches(leaf_arrays(td), expected, what=os.path.basename(path))


# ----------------------------------------------------------------------------------------------
# semantics on hand-made examples


def simple_td(T=6, lead=(), done_at=(), terminated=True):
    rng = np.random.default_rng(0)
    done = np.zeros(lead + (T,), bool)
    for t in done_at:
        done[..., t] = True
    arrays = {("observation",): rng.standard_normal(lead + (T, 2)).astype(np.float32),
              ("next", "observation"): rng.standard_normal(lead + (T, 2)).astype(np.float32),
              ("next", "reward"): rng.standard_normal(lead + (T, 1)).astype(np.float32),
              ("next", "done"): done[..., None]}
    if terminated:
        arrays[("next", "terminated")] = done[..., None].copy()
        arrays[("next", "truncated")] = np.zeros(lead + (T, 1), bool)
    return make_td(arrays, lead + (T,)), arrays


def test_n_steps_zero_is_the_identity():
    td, _ = simple_td(done_at=(2,))
    before = snapshot(td)
    out = MultiStep(0.9, 0)(td)
    assert out is td
    assert_snapshot_equal(td, before)


def test_n_steps_one_adds_keys_and_keeps_values():
    td, arrays = simple_td(T=7, lead=(2,), done_at=(3,))
    before = snapshot(td)
    out = MultiStep(0.9, 1)(td)
    assert out is not td
    got = leaf_arrays(out)
    assert set(got) == set(before[0]) | NEW_KEYS | {("next", "original_reward")}
    for key, (_, value) in before[0].items():
        np.testing.assert_array_equal(got[key], value, err_msg=str(key))
    np.testing.assert_array_equal(got[("next", "original_reward")], arrays[("next", "reward")])
    np.testing.assert_array_equal(got[("steps_to_next_obs",)], np.ones((2, 7), np.int64))
    np.testing.assert_array_equal(got[("gamma",)], np.full((2, 7), 0.9, np.float32))
    np.testing.assert_array_equal(got[("nonterminal",)], ~arrays[("next", "terminated")][..., 0])
    assert got[("gamma",)].dtype == np.float32 and got[("steps_to_next_obs",)].dtype == np.int64
    assert got[("nonterminal",)].dtype == np.bool_


def test_transform_returns_a_new_tensordict_and_leaves_the_input_alone():
    """As torchrl 0.14's MultiStep: the output is a new TensorDict (its nested "next" too) that
    shares the tensors it does not rewrite; the input keeps its keys and values."""
    td, _ = simple_td(T=8)
    next_td, obs = td["next"], td["observation"]
    before = snapshot(td)
    out = MultiStep(0.5, 3)(td)
    assert out is not td and out["next"] is not next_td
    assert td["next"] is next_td and "original_reward" not in next_td.keys() and "gamma" not in td.keys()
    assert_snapshot_equal(td, before)
    assert "original_reward" in out["next"].keys() and "gamma" in out.keys()
    assert out["observation"] is obs


def test_seed_step_count_example():
    td = TensorDict({"step_count": rlpipe.arange(10),
                     "next": {"step_count": rlpipe.arange(1, 11), "done": rlpipe.zeros(10, 1, dtype=rlpipe.bool),
                              "reward": rlpipe.ones(10, 1)}}, batch_size=[10])
    td = MultiStep(0.99, 4)(td)
    np.testing.assert_array_equal(arr(td["next", "step_count"]), [4, 5, 6, 7, 8, 9, 10, 10, 10, 10])
    np.testing.assert_array_equal(arr(td["step_count"]), np.arange(10))
    np.testing.assert_array_equal(arr(td["steps_to_next_obs"]), [4, 4, 4, 4, 4, 4, 4, 3, 2, 1])
    ones = 1 + 0.99 + 0.99 ** 2 + 0.99 ** 3
    np.testing.assert_allclose(arr(td["next", "reward"])[:, 0],
                               [ones] * 7 + [1 + 0.99 + 0.99 ** 2, 1 + 0.99, 1], rtol=1e-6)
    assert arr(td["nonterminal"]).all()  # the end of the batch is not a terminal state


def test_window_into_a_terminal_state_is_terminal():
    """torchrl 0.14 leaves next.terminated unshifted here (False at t=0, 1) and bootstraps from
    the terminal observation; rlpipe shifts it."""
    obs = np.arange(1, 7, dtype=np.float32)[:, None]
    term = np.array([0, 0, 1, 0, 0, 0], bool)[:, None]
    td = make_td({("next", "observation"): obs, ("next", "reward"): np.ones((6, 1), np.float32),
                  ("next", "done"): term, ("next", "terminated"): term,
                  ("next", "truncated"): np.zeros((6, 1), bool)}, (6,))
    td = MultiStep(0.9, 3)(td)
    np.testing.assert_array_equal(arr(td["steps_to_next_obs"]), [3, 2, 1, 3, 2, 1])
    np.testing.assert_array_equal(arr(td["next", "terminated"])[:, 0], [1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(arr(td["next", "done"])[:, 0], [1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(arr(td["nonterminal"]), [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(arr(td["next", "observation"])[:, 0], [3, 3, 3, 6, 6, 6])


def test_truncation_ends_the_window_but_stays_nonterminal():
    obs = np.arange(1, 6, dtype=np.float32)[:, None]
    trunc = np.array([0, 1, 0, 0, 0], bool)
    td = make_td({("next", "observation"): obs, ("next", "reward"): np.ones(5, np.float32),
                  ("next", "done"): trunc, ("next", "terminated"): np.zeros(5, bool),
                  ("next", "truncated"): trunc}, (5,))
    td = MultiStep(1.0, 4)(td)
    np.testing.assert_array_equal(arr(td["steps_to_next_obs"]), [2, 1, 3, 2, 1])
    np.testing.assert_allclose(arr(td["next", "reward"]), [2, 1, 3, 2, 1])
    np.testing.assert_array_equal(arr(td["next", "truncated"]), [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(arr(td["next", "done"]), [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(arr(td["nonterminal"]), [1, 1, 1, 1, 1])
    np.testing.assert_array_equal(arr(td["next", "observation"])[:, 0], [2, 2, 5, 5, 5])


def test_without_terminated_entry_done_decides_nonterminal():
    done = np.array([0, 1, 0, 0], bool)
    td = make_td({("next", "reward"): np.ones(4, np.float32), ("next", "done"): done}, (4,))
    td = MultiStep(0.9, 2)(td)
    np.testing.assert_array_equal(arr(td["nonterminal"]), [0, 0, 1, 1])


def test_numpy_integer_n_steps_and_integer_gamma_are_accepted():
    td, arrays = simple_td(T=5)
    td = MultiStep(1, np.int64(2))(td)
    expected = reference_multistep(arrays, (5,), 2, 1.0)
    assert_matches(leaf_arrays(td), expected)


# ----------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("n_steps", [-1, -5])
def test_negative_n_steps(n_steps):
    with pytest.raises(ValueError, match="n_steps"):
        MultiStep(0.9, n_steps)


@pytest.mark.parametrize("n_steps", [2.0, 2.5, "3", None, True])
def test_non_integer_n_steps(n_steps):
    with pytest.raises(TypeError, match="n_steps"):
        MultiStep(0.9, n_steps)


@pytest.mark.parametrize("gamma", [0, 0.0, 1.5, -0.1, float("nan"), float("inf")])
def test_gamma_out_of_range(gamma):
    with pytest.raises(ValueError, match="gamma"):
        MultiStep(gamma, 3)


def _bad(kind):
    """A TensorDict that MultiStep must refuse, and the reason it must give."""
    rng = np.random.default_rng(1)
    B, T = 3, 5
    base = {("observation",): rng.standard_normal((B, T, 3)).astype(np.float32),
            ("next", "observation"): rng.standard_normal((B, T, 3)).astype(np.float32),
            ("next", "reward"): rng.standard_normal((B, T, 1)).astype(np.float32),
            ("next", "done"): rng.random((B, T, 1)) < 0.3}
    if kind == "no reward":
        del base[("next", "reward")]
        return make_td(base, (B, T)), KeyError, "next.*reward"
    if kind == "no done":
        del base[("next", "done")]
        return make_td(base, (B, T)), KeyError, "next.*done"
    if kind == "done [B,T,2] vs reward [B,T,1]":
        base[("next", "done")] = rng.random((B, T, 2)) < 0.3
        base[("next", "reward")] = rng.standard_normal((B, T)).astype(np.float32)
        del base[("observation",)], base[("next", "observation")]
        return make_td(base, (B, T)), ValueError, "done|reward"
    if kind == "done [B,T,2] vs observation [B,T,3]":
        base[("next", "done")] = rng.random((B, T, 2)) < 0.3
        return make_td(base, (B, T)), ValueError, "done"
    if kind == "mask [B,T,2]":
        base[("collector", "mask")] = np.ones((B, T, 2), bool)
        return make_td(base, (B, T)), ValueError, "mask"
    if kind == "no next entry":  # done and reward at the root (custom keys): nothing to shift from
        base = {("done",): base[("next", "done")], ("reward",): base[("next", "reward")]}
        return make_td(base, (B, T)), KeyError, "next"
    if kind == "no batch dims":
        return make_td({("next", "reward"): np.float32(1.0), ("next", "done"): np.array(False)}, ()), \
            ValueError, "batch"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["no reward", "no done", "done [B,T,2] vs reward [B,T,1]",
                                  "done [B,T,2] vs observation [B,T,3]", "mask [B,T,2]", "no next entry",
                                  "no batch dims"])
def test_bad_tensordict_raises_and_leaves_it_unchanged(kind):
    td, error, pattern = _bad(kind)
    before = snapshot(td)
    transform = MultiStep(0.9, 3, **({"done_key": "done", "reward_keys": "reward"} if kind == "no next entry" else {}))
    with pytest.raises(error, match=pattern):
        transform(td)
    assert_snapshot_equal(td, before)


def test_locked_tensordict_is_transformed_into_a_new_one():
    td, _ = simple_td(T=5, done_at=(1,))
    td.lock_()
    before = snapshot(td)
    out = MultiStep(0.9, 3)(td)
    assert_snapshot_equal(td, before)
    assert "gamma" in out.keys() and "gamma" not in td.keys()


def test_not_a_tensordict():
    with pytest.raises(TypeError, match="TensorDict"):
        MultiStep(0.9, 3)({"next": {"reward": rlpipe.ones(3), "done": rlpipe.zeros(3, dtype=rlpipe.bool)}})


# ----------------------------------------------------------------------------------------------
# streaming


def _stream_arrays(rng, lead, T):
    arrays = random_arrays(rng, lead + (T,), p_done=0.1, trailing=True)
    arrays[("frame",)] = np.broadcast_to(np.arange(T), lead + (T,)).copy()
    return arrays


def _slice_time(arrays, lead, a, b):
    index = (slice(None),) * len(lead) + (slice(a, b),)
    return {key: value[index] for key, value in arrays.items()}


def _chunk_sizes(rng, T, n):
    sizes, total = [], 0
    while total < T:
        s = int(rng.choice([1, max(n - 2, 1), n - 1 if n > 1 else 1, n, n + 1, int(rng.integers(1, 12))]))
        s = min(s, T - total)
        sizes.append(s)
        total += s
    return sizes


@pytest.mark.parametrize("lead", [(), (3,)], ids=["[t]", "[B,t]"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8])
def test_streaming_equals_batch_transform(n, lead):
    rng = np.random.default_rng(300 + n + 10 * len(lead))
    for _ in range(3):
        T = int(rng.integers(1, 45))
        arrays = _stream_arrays(rng, lead, T)
        whole = make_td(arrays, lead + (T,))
        whole = MultiStep(0.9, n)(whole)
        expected = leaf_arrays(whole)
        if n:
            assert_matches(expected, reference_multistep(arrays, lead + (T,), n, 0.9))

        stream = MultiStep(0.9, n, streaming=True)
        fed = emitted = 0
        pieces = []
        for size in _chunk_sizes(rng, T, n):
            chunk = make_td(_slice_time(arrays, lead, fed, fed + size), lead + (size,))
            fed += size
            out = stream(chunk)
            ready = max(0, fed - max(n - 1, 0))  # exactly n - 1 frames late
            assert tuple(out.batch_size) == lead + (ready - emitted,), (fed, emitted, out.batch_size)
            assert_matches(leaf_arrays(out), _slice_time(expected, lead, emitted, ready),
                           what=f"chunk ending at {fed}")
            pieces.append(leaf_arrays(out))
            emitted = ready
        rest = stream.flush()
        if rest is not None:
            assert tuple(rest.batch_size) == lead + (T - emitted,)
            pieces.append(leaf_arrays(rest))
        else:
            assert emitted == T
        joined = {key: np.concatenate([p[key] for p in pieces], axis=len(lead)) for key in expected}
        assert_matches(joined, expected, what="all chunks")
        np.testing.assert_array_equal(joined[("frame",)], arrays[("frame",)])  # each frame exactly once
        assert stream.flush() is None


def test_streaming_several_trajectories_and_reset():
    rng = np.random.default_rng(11)
    n, lead = 4, (2,)
    first = _stream_arrays(rng, lead, 7)
    second = _stream_arrays(rng, lead, 9)
    stream = MultiStep(0.9, n, streaming=True)
    out = stream(make_td(first, lead + (7,)))
    assert tuple(out.batch_size) == (2, 4)
    stream.reset()
    assert stream.flush() is None  # reset forgot the held-back frames
    outs = [leaf_arrays(stream(make_td(_slice_time(second, lead, 0, 5), lead + (5,))))]
    outs.append(leaf_arrays(stream(make_td(_slice_time(second, lead, 5, 9), lead + (4,)))))
    outs.append(leaf_arrays(stream.flush()))
    expected = reference_multistep(second, lead + (9,), n, 0.9)
    joined = {key: np.concatenate([p[key] for p in outs], axis=1) for key in expected}
    assert_matches(joined, expected)


def test_streaming_mismatched_environment_dims():
    rng = np.random.default_rng(12)
    arrays = _stream_arrays(rng, (2,), 10)
    stream = MultiStep(0.9, 3, streaming=True)
    out1 = leaf_arrays(stream(make_td(_slice_time(arrays, (2,), 0, 4), (2, 4))))
    wrong = make_td(_stream_arrays(rng, (3,), 4), (3, 4))
    before = snapshot(wrong)
    with pytest.raises(ValueError):
        stream(wrong)
    assert_snapshot_equal(wrong, before)
    # the stream is intact: it goes on where it was
    out2 = leaf_arrays(stream(make_td(_slice_time(arrays, (2,), 4, 10), (2, 6))))
    out3 = leaf_arrays(stream.flush())
    expected = reference_multistep(arrays, (2, 10), 3, 0.9)
    joined = {key: np.concatenate([p[key] for p in (out1, out2, out3)], axis=1) for key in expected}
    assert_matches(joined, expected)


def test_multistep_on_an_empty_time_dimension():
    """T = 0 (what a streaming n_steps=1 transform holds back): nothing to compute, no error."""
    td = make_td({("next", "reward"): np.zeros((2, 0, 1), np.float32),
                  ("next", "done"): np.zeros((2, 0, 1), bool)}, (2, 0))
    out = MultiStep(0.9, 3)(td)
    assert tuple(out.batch_size) == (2, 0)
    assert tuple(out["gamma"].shape) == (2, 0)


# ----------------------------------------------------------------------------------------------
# CUDA against CPU


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("case", ["plain", "mask", "agents", "golden", "streaming"])
def test_cuda_matches_cpu(case):
    rng = np.random.default_rng(400)
    keys = [("next", "reward")]
    if case == "plain":
        arrays, shape, n, gamma, keys = _random_case(401, 2, 0.3, True, True)
    elif case == "mask":
        shape, n, gamma = (3, 17), 5, 0.9
        arrays = random_arrays(rng, shape, mask=True, reward_keys=2)
        keys = REWARD_KEY_SETS[2]
    elif case == "agents":
        shape, n, gamma = (2, 13), 4, 0.99
        term = rng.random((2, 13, 3)) < 0.2
        arrays = {("next", "observation"): rng.standard_normal((2, 13, 3, 3)).astype(np.float32),
                  ("next", "reward"): rng.standard_normal((2, 13, 3, 1)).astype(np.float32),
                  ("next", "done"): term, ("next", "terminated"): term}
    elif case == "golden":
        z = np.load(GOLDEN_FILES[-1])
        arrays, shape = golden_input(z)
        n, gamma = int(z["n_steps"]), float(z["gamma_in"])
    else:
        shape, n, gamma = (2, 20), 4, 0.9
        arrays = _stream_arrays(rng, (2,), 20)
    if case == "streaming":
        results = {}
        for device in ("cpu", "cuda"):
            stream = MultiStep(gamma, n, streaming=True)
            outs = [stream(make_td(_slice_time(arrays, (2,), a, b), (2, b - a), device=device))
                    for a, b in ((0, 2), (2, 9), (9, 20))] + [stream.flush()]
            for o in outs:
                assert all(v.device.type == device for v in leaves(o).values())
            results[device] = {k: np.concatenate([leaf_arrays(o)[k] for o in outs], axis=1)
                               for k in leaf_arrays(outs[0])}
        assert_matches(results["cuda"], results["cpu"], what="streaming")
        return
    cpu = make_td(arrays, shape)
    gpu = make_td(arrays, shape, device="cuda")
    cpu = MultiStep(gamma, n, reward_keys=keys)(cpu)
    out = MultiStep(gamma, n, reward_keys=keys)(gpu)
    for key, value in leaves(out).items():
        assert value.device.type == "cuda", key
    assert_matches(leaf_arrays(out), leaf_arrays(cpu), what=case)
    assert_matches(leaf_arrays(out), reference_multistep(arrays, shape, n, gamma, reward_keys=keys), what=case)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_cuda_fused_kernel_matches_the_tensor_ops(dtype):
    """The one-launch kernel against the CPU's n passes: the same window lengths, the same sums
    (term by term in the same order; float16 through CuPy's half type)."""
    from rlpipe.postprocs.multistep import window_lengths, windowed_discounted_sum
    rng = np.random.default_rng(402)
    shape, n, gamma = (5, 23), 6, 0.93
    done = rng.random(shape) < 0.2
    valid = np.ones(shape, bool)
    valid[1, 15:] = False  # a row whose batch ends early, as a collector mask does
    valid[3, 4] = False
    reward = (rng.standard_normal(shape) * 3).astype(dtype)
    cpu = [rlpipe.tensor(a) for a in (done, valid, reward)]
    m_cpu = window_lengths(cpu[0], cpu[1], n)
    total_cpu = windowed_discounted_sum(cpu[2], m_cpu, gamma, n)
    cuda = rlpipe.backends.cuda_backend()
    m, total = rlpipe.kernels.get("n_step_returns", cuda)(*(cuda.asarray(a) for a in (done, valid, reward)), gamma, n)
    np.testing.assert_array_equal(cuda.to_host(m), m_cpu.numpy())
    assert total.dtype == dtype
    tol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-14}[dtype]  # FMA contraction on a real GPU
    np.testing.assert_allclose(cuda.to_host(total), total_cpu.numpy(), rtol=tol, atol=tol)


@pytest.mark.cuda
@pytest.mark.skipif(not rlpipe.cuda.is_available(), reason="CUDA unavailable (CuPy or a GPU missing)")
def test_cuda_multistep_runs_the_fused_kernel(monkeypatch):
    """On cuda, MultiStep takes its windows and sums from the kernel, not from n passes of generic ops."""
    import rlpipe.postprocs.multistep as multistep

    def no_passes(*args):
        raise AssertionError("MultiStep on cuda ran the n-pass tensor ops")
    monkeypatch.setattr(multistep, "window_lengths", no_passes)
    monkeypatch.setattr(multistep, "windowed_discounted_sum", no_passes)
    arrays, shape, n, gamma, keys = _random_case(403, 2, 0.3, True, True)
    out = MultiStep(gamma, n, reward_keys=keys)(make_td(arrays, shape, device="cuda"))
    assert_matches(leaf_arrays(out), reference_multistep(arrays, shape, n, gamma, reward_keys=keys), what="fused")


def test_n_steps_beyond_the_batch_cost_what_the_batch_holds():
    """No window is longer than T: n_steps=10**9 on [1, 10] gives n_steps=10's result (it used to allocate
    n-step paddings: MemoryError)."""
    rng = np.random.default_rng(404)
    arrays = random_arrays(rng, (1, 10))
    expected = leaf_arrays(MultiStep(0.9, 10)(make_td(arrays, (1, 10))))
    assert_matches(leaf_arrays(MultiStep(0.9, 10 ** 9)(make_td(arrays, (1, 10)))), expected)


def test_streaming_rejected_batch_leaves_the_stream_intact():
    """A batch that fails inside the transform (here: no done entry) must not replace the held-back
    frames; a batch without a time dimension is a ValueError, as for the batch transform."""
    rng = np.random.default_rng(13)
    arrays = _stream_arrays(rng, (), 8)
    stream = MultiStep(0.9, 3, streaming=True)
    out1 = leaf_arrays(stream(make_td(_slice_time(arrays, (), 0, 4), (4,))))
    broken = make_td(_slice_time(arrays, (), 4, 6), (2,))
    del broken["next", "done"]
    with pytest.raises(KeyError):
        stream(broken)
    with pytest.raises(ValueError, match="time dimension"):
        stream(rlpipe.TensorDict({"a": rlpipe.zeros(())}, batch_size=[]))
    out2 = leaf_arrays(stream(make_td(_slice_time(arrays, (), 4, 8), (4,))))
    out3 = leaf_arrays(stream.flush())
    expected = reference_multistep(arrays, (8,), 3, 0.9)
    joined = {key: np.concatenate([p[key] for p in (out1, out2, out3)], axis=0) for key in expected}
    assert_matches(joined, expected)
