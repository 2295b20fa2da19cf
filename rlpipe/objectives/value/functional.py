"""Value and advantage estimates over trajectories: torchrl.objectives.value.functional's API.

Every function takes tensors shaped ``[*B, T, *F]`` (time at ``time_dim``, -2 by default) and the
``done``/``terminated`` flags of each step. ``terminated`` ends an episode: the next state's value is
dropped. ``done`` without ``terminated`` (a truncation) ends the trajectory but still bootstraps from
the next state's value. Where ``terminated`` is not given, ``done`` stands for it.

torchrl runs a Python loop over time (``generalized_advantage_estimate``) or a convolution with a
``[T]`` geometric kernel (the ``vec_`` functions). rlpipe computes every estimate the same way for
both names: the recursion ``x[t] = b[t] + c[t] * x[t + 1]`` (GAE: ``b`` the TD error, ``c`` =
gamma * lmbda * not done) in one backward pass over time, each step one vectorized operation over
the whole batch; on a GPU the whole estimate is one fused kernel launch (``value_estimate`` in
``rlpipe.kernels``). The estimates are differentiable with respect to the values and rewards
(the gradient is the same recursion run forward in time). ``rolling_gamma=False`` is not
implemented (torchrl implements it only in the non-vectorized functions).
"""
import numbers
import warnings

from ..._tensor import Tensor
from ... import _dtypes, kernels
from ...primitives.base import Op

__all__ = [
    "generalized_advantage_estimate",
    "vec_generalized_advantage_estimate",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td1_return_estimate",
    "vec_td1_return_estimate",
    "td1_advantage_estimate",
    "vec_td1_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_td_lambda_return_estimate",
    "td_lambda_advantage_estimate",
    "vec_td_lambda_advantage_estimate",
]

SHAPE_ERR = "All input tensors (value, reward and done states) must share a unique shape."
_TIME_ERR = "The tensor shape and the time dimension are not compatible: got {} and time_dim={}."


# ---- the recursion --------------------------------------------------------------------------------

def _scan(xp, b, c, reverse):
    """Over ``[rows, T]`` arrays: ``x[:, t] = b[:, t] + c[:, t] * x[:, t + 1]`` from the last step
    backwards (``reverse``), or ``x[:, t] = b[:, t] + c[:, t - 1] * x[:, t - 1]`` from the first
    forwards (the transposed recursion, for gradients). One pass over time, each step one vectorized
    multiply-add over the rows, on time-major copies so that every step reads contiguous memory."""
    x = xp.array(b.T, order="C")
    coef = xp.ascontiguousarray(c.T)
    rows, scaled = list(x), xp.empty(x.shape[1:], x.dtype)
    if reverse:
        for t in range(x.shape[0] - 2, -1, -1):
            xp.multiply(coef[t], rows[t + 1], out=scaled)
            xp.add(rows[t], scaled, out=rows[t])
    else:
        for t in range(1, x.shape[0]):
            xp.multiply(coef[t - 1], rows[t - 1], out=scaled)
            xp.add(rows[t], scaled, out=rows[t])
    return x.T


class _ValueEstimate(Op):
    """(advantage, value_target) of GAE (``gae=True``) or TD(lambda) over ``[rows, T]`` arrays.

    GAE: ``advantage = scan(r + gamma * nt * v' - v, gamma * lmbda * nd)``, ``value_target =
    advantage + v``. TD(lambda): ``value_target = scan(r + gamma * nt * v' * (1 - lmbda * nd),
    gamma * lmbda * nd)`` with the last step of every row treated as done (it bootstraps), and
    ``advantage = value_target - v``. ``nt``/``nd``: not terminated, not done; ``gamma`` and ``lmbda``
    are numbers or [rows, T] arrays."""

    @staticmethod
    def forward(ctx, reward, value, next_value, done, terminated, gamma, lmbda, gae):
        xp = ctx.xp
        fused = kernels.get("value_estimate", ctx.be)
        if fused is not None and not ctx.needs_input_grad and isinstance(gamma, float) and isinstance(lmbda, float):
            return fused(reward, value, next_value, done, terminated, gamma, lmbda, gae)
        dtype = value.dtype
        not_done = xp.logical_not(done)
        if not gae:
            not_done[:, -1] = False
        keep_next = xp.logical_not(terminated).astype(dtype)
        nd = not_done.astype(dtype)
        decay = gamma * lmbda * nd
        bootstrap = gamma * keep_next if gae else gamma * keep_next * (1 - lmbda * nd)
        if ctx.needs_input_grad:
            ctx.decay, ctx.bootstrap, ctx.gae = decay, bootstrap, gae
        b = reward + bootstrap * next_value
        if gae:
            advantage = _scan(xp, b - value, decay, reverse=True)
            return advantage, advantage + value
        target = _scan(xp, b, decay, reverse=True)
        return target - value, target

    @staticmethod
    def backward(ctx, grad_advantage, grad_target):
        total = _scan(ctx.xp, grad_advantage + grad_target, ctx.decay, reverse=False)
        grad_value = grad_target - total if ctx.gae else -grad_advantage
        return total, grad_value, total * ctx.bootstrap, None, None, None, None, None


# ---- arguments ------------------------------------------------------------------------------------

def _to_time_minus_2(tensor, time_dim):
    """torchrl's ``_transpose_time``: the tensor with its time dim moved to -2 (a 1-d tensor with
    ``time_dim=-1`` gets a trailing feature dim); and whether that dim was added."""
    if not isinstance(tensor, Tensor) or tensor.numel() <= 1 or time_dim == -2:
        return tensor, False
    ndim = tensor.ndim
    timedim = time_dim - ndim if time_dim >= 0 else time_dim
    if timedim < -ndim or timedim >= 0:
        raise RuntimeError(_TIME_ERR.format(tuple(tensor.shape), timedim))
    if ndim >= 2:
        return tensor.transpose(timedim, -2), False
    if timedim == -1:
        return tensor.unsqueeze(-1), True
    raise RuntimeError(_TIME_ERR.format(tuple(tensor.shape), timedim))


def _from_time_minus_2(tensor, time_dim, added):
    if time_dim == -2:
        return tensor
    if added:
        return tensor.squeeze(-1)
    ndim = tensor.ndim
    return tensor.transpose(time_dim - ndim if time_dim >= 0 else time_dim, -2)


def _check_shapes(*tensors):
    first = tensors[0].shape
    if any(t.shape != first for t in tensors[1:]):
        raise RuntimeError(SHAPE_ERR)


def _coefficient(x, shape, name):
    """A number, or a tensor expanded to the inputs' shape, for gamma and lmbda."""
    if isinstance(x, Tensor):
        if x.numel() == 1:
            return float(x.item())
        try:
            return x.detach().expand(shape)
        except RuntimeError as e:
            raise RuntimeError(f"{name} of shape {list(x.shape)} does not broadcast to the inputs' shape "
                               f"{list(shape)}: {e}") from None
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    raise TypeError(f"{name} must be a number or a tensor, got {type(x).__name__}")


def _rolling(rolling_gamma, gamma, lmbda):
    if rolling_gamma is None or rolling_gamma:
        return
    if isinstance(gamma, float) and isinstance(lmbda, float):
        raise RuntimeError("rolling_gamma=False is expected only with time-sensitive gamma or lambda values")
    raise NotImplementedError("rolling_gamma=False is not implemented in rlpipe (use rolling_gamma=True, the "
                              "default): every gamma is tied to its own step")


def _estimate(gae, gamma, lmbda, state_value, next_state_value, reward, done, terminated, time_dim,
              rolling_gamma=None):
    """(advantage, value_target) for inputs in torchrl's layout (see the module docstring)."""
    if terminated is None:
        terminated = done
    if state_value is None:
        state_value = next_state_value
    inputs = [state_value, next_state_value, reward, done, terminated]
    if not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError("values, reward, done and terminated must be tensors, got "
                        + ", ".join(type(t).__name__ for t in inputs))
    moved = [_to_time_minus_2(t, time_dim) for t in inputs]
    added = any(a for _, a in moved)
    value, next_value, reward, done, terminated = (t for t, _ in moved)
    _check_shapes(value, next_value, reward, done, terminated)
    shape = tuple(value.shape)
    if len(shape) < 2:  # torchrl fails unpacking [*B, T, F] here: a ValueError
        raise ValueError(f"the inputs need a time dimension and a feature dimension ([*B, T, F]) with "
                         f"time_dim={time_dim}, got shape {shape}; pass time_dim=-1 for [*B, T] inputs")
    gamma = _coefficient(gamma, shape, "gamma")
    lmbda = _coefficient(lmbda, shape, "lmbda")
    _rolling(rolling_gamma, gamma, lmbda)
    dtype = value.dtype if value.is_floating_point() else _dtypes.float32
    steps = shape[-2]

    def rows(t, as_type=None):  # [*B, T, F] -> [B * F, T], time last
        return t.transpose(-2, -1).reshape(-1, steps).to(as_type)

    def coef_rows(x):
        return x if isinstance(x, float) else rows(x, dtype)._data

    if value.numel() == 0:
        estimates = (value.detach().to(dtype), value.detach().to(dtype))
    else:
        estimates = _ValueEstimate.apply(
            rows(reward, dtype), rows(value, dtype), rows(next_value, dtype), rows(done, _dtypes.bool),
            rows(terminated, _dtypes.bool), coef_rows(gamma), coef_rows(lmbda), gae)
        back = shape[:-2] + (shape[-1], steps)
        estimates = (x.reshape(back).transpose(-2, -1) for x in estimates)
    advantage, target = (_from_time_minus_2(x, time_dim, added) for x in estimates)
    return advantage, target


# ---- GAE ------------------------------------------------------------------------------------------

def generalized_advantage_estimate(gamma, lmbda, state_value, next_state_value, reward, done, terminated=None,
                                   *, time_dim=-2):
    """Generalized advantage estimate (Schulman et al., 2015): ``(advantage, value_target)``.

    ``advantage[t] = delta[t] + gamma * lmbda * (1 - done[t]) * advantage[t + 1]`` with the TD error
    ``delta[t] = reward[t] + gamma * (1 - terminated[t]) * next_state_value[t] - state_value[t]``;
    ``value_target = advantage + state_value``. All inputs ``[*B, T, *F]``.
    """
    return _estimate(True, gamma, lmbda, state_value, next_state_value, reward, done, terminated, time_dim)


def vec_generalized_advantage_estimate(gamma, lmbda, state_value, next_state_value, reward, done,
                                       terminated=None, *, time_dim=-2):
    """The same as ``generalized_advantage_estimate`` (rlpipe has one implementation, vectorized
    over the batch; torchrl's vec_ version is a convolution)."""
    return _estimate(True, gamma, lmbda, state_value, next_state_value, reward, done, terminated, time_dim)


# ---- TD(0) ----------------------------------------------------------------------------------------

def td0_return_estimate(gamma, next_state_value, reward, terminated=None, *, done=None):
    """One-step return ``reward + gamma * (1 - terminated) * next_state_value`` (``done`` is
    torchrl's deprecated name for ``terminated``)."""
    if done is not None and terminated is None:
        terminated = done
        warnings.warn("done for td0_return_estimate is deprecated. Pass ``terminated`` instead.", stacklevel=2)
    if terminated is None:
        raise TypeError("td0_return_estimate() needs terminated (the end-of-episode flags)")
    _check_shapes(next_state_value, reward, terminated)
    return reward + gamma * terminated.bool().logical_not().to(next_state_value.dtype) * next_state_value


def td0_advantage_estimate(gamma, state_value, next_state_value, reward, done, terminated=None):
    """One-step advantage ``td0_return_estimate(...) - state_value``."""
    if terminated is None:
        terminated = done
    _check_shapes(next_state_value, state_value, reward, done, terminated)
    return td0_return_estimate(gamma, next_state_value, reward, terminated) - state_value


# ---- TD(1) and TD(lambda) -------------------------------------------------------------------------

def td_lambda_return_estimate(gamma, lmbda, next_state_value, reward, done, terminated=None, rolling_gamma=None,
                              *, time_dim=-2):
    """TD(lambda) return: ``G[t] = reward[t] + gamma * ((1 - lmbda) * V'[t] + lmbda * G[t + 1])``,
    where ``V'`` is the next state's value (zero where terminated) and ``G[t + 1]`` is replaced by
    ``V'[t]`` where the trajectory is done and at the last step."""
    return _estimate(False, gamma, lmbda, None, next_state_value, reward, done, terminated, time_dim,
                     rolling_gamma)[1]


def vec_td_lambda_return_estimate(gamma, lmbda, next_state_value, reward, done, terminated=None,
                                  rolling_gamma=None, *, time_dim=-2):
    """The same as ``td_lambda_return_estimate``."""
    return td_lambda_return_estimate(gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma,
                                     time_dim=time_dim)


def td_lambda_advantage_estimate(gamma, lmbda, state_value, next_state_value, reward, done, terminated=None,
                                 rolling_gamma=None, time_dim=-2):
    """``td_lambda_return_estimate(...) - state_value``."""
    return _estimate(False, gamma, lmbda, state_value, next_state_value, reward, done, terminated, time_dim,
                     rolling_gamma)[0]


def vec_td_lambda_advantage_estimate(gamma, lmbda, state_value, next_state_value, reward, done, terminated=None,
                                     rolling_gamma=None, time_dim=-2):
    """The same as ``td_lambda_advantage_estimate``."""
    return td_lambda_advantage_estimate(gamma, lmbda, state_value, next_state_value, reward, done, terminated,
                                        rolling_gamma, time_dim)


def td1_return_estimate(gamma, next_state_value, reward, done, terminated=None, rolling_gamma=None, *,
                        time_dim=-2):
    """TD(1) (Monte-Carlo, bootstrapped at truncations and at the end of the batch) return:
    TD(lambda) with ``lmbda=1``."""
    return td_lambda_return_estimate(gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma,
                                     time_dim=time_dim)


def vec_td1_return_estimate(gamma, next_state_value, reward, done, terminated=None, rolling_gamma=None,
                            time_dim=-2):
    """The same as ``td1_return_estimate``."""
    return td1_return_estimate(gamma, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim)


def td1_advantage_estimate(gamma, state_value, next_state_value, reward, done, terminated=None,
                           rolling_gamma=None, time_dim=-2):
    """``td1_return_estimate(...) - state_value``."""
    return td_lambda_advantage_estimate(gamma, 1.0, state_value, next_state_value, reward, done, terminated,
                                        rolling_gamma, time_dim)


def vec_td1_advantage_estimate(gamma, state_value, next_state_value, reward, done, terminated=None,
                               rolling_gamma=None, time_dim=-2):
    """The same as ``td1_advantage_estimate``."""
    return td1_advantage_estimate(gamma, state_value, next_state_value, reward, done, terminated, rolling_gamma,
                                  time_dim)
