"""Returns over ``[rows, steps]`` batches: n-step discounted sums (``n_step_returns``, for ``MultiStep``) and
GAE / TD(lambda) (``value_estimate``, for the value estimators).

On a GPU each is one launch. Off the GPU their callers run their own vectorized formulas (``MultiStep``'s
per-pattern plans, the estimators' differentiable scan), which the tests hold to these references.
"""
from ._registry import Source, define


# ---- n-step returns ---------------------------------------------------------------------------

def n_step_returns(xp, done, valid, reward, gamma, n):
    """``(m, total)`` for [rows, steps] arrays (``done``, ``valid`` bool; ``reward`` float): ``m[t]``, the window's
    length, is min(n, steps - t, 1 + first done at or after t), the window also ending before an invalid step
    (an invalid step's own m is 1); ``total[t]`` sums ``reward[t + k] * gamma ** k`` over k < m[t], term by
    term from k = 0, each discount, product and partial sum rounded to the reward's dtype."""
    rows, steps = reward.shape
    # a window ends after step t + k where done is set or the next step is invalid (past the end counts as invalid)
    after = xp.concatenate((valid[:, 1:], xp.zeros((rows, n + 1), dtype=bool)), axis=1)
    ends = xp.concatenate((done, xp.ones((rows, n), dtype=bool)), axis=1) | ~after
    m = xp.full(reward.shape, n, dtype=xp.int64)
    still_open = valid.copy()
    for k in range(n):
        m[still_open & ends[:, k:k + steps]] = k + 1
        still_open &= ~ends[:, k:k + steps]
    m[~valid] = 1
    padded = xp.concatenate((reward, xp.zeros((rows, n), dtype=reward.dtype)), axis=1)
    total = xp.zeros_like(reward)
    for k in range(n):
        term = padded[:, k:k + steps] * reward.dtype.type(gamma ** k)
        total = total + xp.where(m > k, term, reward.dtype.type(0))
    return m, total


# one thread per step t; the sums' terms rounded as the reference rounds them (discounts[k] = gamma ** k
# rounded to T; each product rounded to T too: CuPy's float16 multiplies in float and would carry the
# extra precision)
_N_STEP_RETURNS = Source(
    "n_step_returns",
    "raw bool done, raw bool valid, raw T reward, raw float64 discounts, int64 steps, int64 n",
    "int64 m, T total",
    "const long long t = i % steps;\n"
    "long long length = 1;\n"
    "if (valid[i]) {\n"
    "    length = n;\n"
    "    for (long long k = 0; k < n; ++k) {\n"
    "        if (done[i + k] || t + k + 1 >= steps || !valid[i + k + 1]) {\n"
    "            length = k + 1;\n"
    "            break;\n"
    "        }\n"
    "    }\n"
    "}\n"
    "T sum = T(0);\n"
    "for (long long k = 0; k < length; ++k) sum = sum + (T)(reward[i + k] * (T)discounts[k]);\n"
    "m = length;\n"
    "total = sum;")


def _launch_n_step_returns(backend, compiled, done, valid, reward, gamma, n):
    xp = backend.xp
    with reward.device:
        discounts = xp.asarray([float(gamma ** k) for k in range(n)], dtype=xp.float64)
        m = xp.empty(reward.shape, xp.int64)
        total = xp.empty_like(reward)
        compiled[0](done, valid, reward, discounts, reward.shape[-1], n, m, total)
        return m, total


define("n_step_returns", reference=n_step_returns, sources=[_N_STEP_RETURNS], launch=_launch_n_step_returns)


# ---- GAE and TD(lambda) -----------------------------------------------------------------------

def value_estimate(xp, reward, value, next_value, done, terminated, gamma, lmbda, gae):
    """``(advantage, value_target)`` of GAE (``gae``) or TD(lambda) for [rows, steps] arrays, backwards over
    time: ``x[t] = b[t] + gamma * lmbda * (1 - done[t]) * x[t + 1]``, where ``b[t]`` is the TD error
    ``r + gamma * v'[t] - v[t]`` for GAE (``x`` the advantage) and ``r + gamma * v'[t] * (1 - lmbda * (1 -
    done[t]))`` for TD(lambda) (``x`` the target); ``v'`` is zero where terminated, and TD(lambda)'s last step
    counts as done (it bootstraps). Computed in float32 (float64 for float64 values), stored in the values'
    dtype."""
    dtype = value.dtype
    acc = xp.float64 if dtype == xp.float64 else xp.float32
    reward, value = reward.astype(acc), value.astype(acc)
    bootstrap = xp.where(terminated, acc(0), next_value.astype(acc))
    g, lam, decay = acc(gamma), acc(lmbda), acc(gamma * lmbda)
    advantage, target = xp.empty_like(value), xp.empty_like(value)
    carry = xp.zeros(value.shape[0], dtype=acc)
    steps = value.shape[1]
    for t in range(steps - 1, -1, -1):
        goes_on = ~done[:, t] if gae or t + 1 < steps else xp.zeros(value.shape[0], dtype=bool)
        tail = xp.where(goes_on, decay * carry, acc(0))
        if gae:
            carry = reward[:, t] + g * bootstrap[:, t] - value[:, t] + tail
            advantage[:, t], target[:, t] = carry, carry + value[:, t]
        else:
            carry = reward[:, t] + g * bootstrap[:, t] * xp.where(goes_on, acc(1) - lam, acc(1)) + tail
            advantage[:, t], target[:, t] = carry - value[:, t], carry
    return advantage.astype(dtype), target.astype(dtype)


# one thread per row, running backwards over time as the reference does
_VALUE_ESTIMATE = Source(
    "value_estimate",
    "raw T reward, raw T value, raw T next_value, raw bool done, raw bool terminated, float64 gamma, "
    "float64 lmbda, bool gae, int64 steps",
    "raw T advantage, raw T value_target",
    "const acc_t g = (acc_t)gamma;\n"
    "const acc_t l = (acc_t)lmbda;\n"
    "const acc_t decay = (acc_t)(gamma * lmbda);\n"
    "acc_t carry = acc_t(0);\n"
    "for (long long t = steps - 1; t >= 0; --t) {\n"
    "    const long long j = i * steps + t;\n"
    "    const acc_t next = terminated[j] ? acc_t(0) : (acc_t)next_value[j];\n"
    "    const acc_t v = (acc_t)value[j];\n"
    "    const bool goes_on = !done[j] && (gae || t + 1 < steps);\n"
    "    const acc_t tail = goes_on ? decay * carry : acc_t(0);\n"
    "    if (gae) {\n"
    "        carry = (acc_t)reward[j] + g * next - v + tail;\n"
    "        advantage[j] = (T)carry;\n"
    "        value_target[j] = (T)(carry + v);\n"
    "    } else {\n"
    "        carry = (acc_t)reward[j] + g * next * (goes_on ? acc_t(1) - l : acc_t(1)) + tail;\n"
    "        advantage[j] = (T)(carry - v);\n"
    "        value_target[j] = (T)carry;\n"
    "    }\n"
    "}")


def _launch_value_estimate(backend, compiled, reward, value, next_value, done, terminated, gamma, lmbda, gae):
    xp = backend.xp
    with reward.device:
        reward, value, next_value, done, terminated = (xp.ascontiguousarray(a) for a in (
            reward, value, next_value, done, terminated))
        advantage = xp.empty_like(value)
        target = xp.empty_like(value)
        rows, steps = value.shape
        compiled[0](reward, value, next_value, done, terminated, float(gamma), float(lmbda), bool(gae), steps,
                    advantage, target, size=rows)
        return advantage, target


define("value_estimate", reference=value_estimate, sources=[_VALUE_ESTIMATE], launch=_launch_value_estimate)
