"""``MultiStepTransform``: torchrl 0.14's replay-buffer transform of n-step returns, on ``MultiStep``.

It runs on the data written to a replay buffer (its ``inv``, as torchrl's): each write is appended
to the last ``n_steps`` frames of the previous one along the time dim (the last batch dim),
``MultiStep`` computes the n-step returns of the whole, and all but its last ``n_steps`` frames
come out, each frame exactly once, ``n_steps`` writes late: so what is stored does not depend on
how the collection was split into writes. A write that leaves nothing to emit gives None (the
buffer stores nothing). The n-step entries are ``MultiStep``'s: rewards summed with discounts
(``("next", "original_reward")`` kept), ``gamma``, ``steps_to_next_obs``, ``nonterminal``, and
every other ``"next"`` entry from the window's last step. Unlike torchrl, the done entries are
shifted with them (``MultiStep``'s rule), and the valid-steps mask is the collector's
``("collector", "mask")``.

It lives with ``MultiStep`` in the postprocessors' layer (an env transform module may not import
it); import it from ``rlpipe.postprocs``.
"""
from .. import primitives as _ops
from ..envs.common import EnvBase
from ..envs.transformed_env import Transform
from ..tensordict import unravel_key_to_tuple
from .multistep import MultiStep, _check_arguments

__all__ = ["MultiStepTransform"]

_DEFAULT_DONE_KEYS = [("done",), ("truncated",), ("terminated",)]


def _under_next(key):
    return ("next",) + unravel_key_to_tuple(key)


class MultiStepTransform(Transform):
    """n-step returns for a replay buffer, as torchrl's ``MultiStepTransform(n_steps, gamma)``
    (module docstring). ``n_steps`` may be changed between writes. ``reward_keys`` and
    ``done_key`` are keys under ``"next"`` (default ``["reward"]`` and ``"done"``);
    ``mask_key`` the valid-steps mask (default the collector's ``("collector", "mask")``)."""

    ENV_ERR = "The MultiStepTransform is only an inverse transform and can be applied exclusively to replay buffers."

    def __init__(self, n_steps, gamma, *, reward_keys=None, done_key=None, done_keys=None, mask_key=None):
        super().__init__()
        if done_keys is not None and sorted(map(unravel_key_to_tuple, done_keys)) != sorted(_DEFAULT_DONE_KEYS):
            raise NotImplementedError(f"MultiStepTransform: done_keys {list(done_keys)}: rlpipe's MultiStep shifts "
                                      "every 'next' entry but the rewards, the done flags included")
        self.n_steps = n_steps
        _check_arguments(gamma, n_steps)
        self.gamma = float(gamma)
        self.reward_keys = [_under_next(k) for k in (reward_keys or ["reward"])]
        self.done_key = _under_next("done" if done_key is None else done_key)
        self.mask_key = ("collector", "mask") if mask_key is None else unravel_key_to_tuple(mask_key)
        self._buffer = None

    @property
    def n_steps(self):
        """The n of the n-step returns (a positive int; may change between writes)."""
        return self._n_steps

    @n_steps.setter
    def n_steps(self, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"The value of n_steps must be a strictly positive integer, got {value!r}.")
        self._n_steps = value

    def _set_container(self, container):
        node = container  # torchrl checks this when it is first used
        while node is not None and not isinstance(node, EnvBase):
            node = node._container
        if node is not None:
            raise ValueError(self.ENV_ERR)
        super()._set_container(container)

    def _inv_call(self, tensordict):
        """The frames of ``tensordict`` (after the held-back ones) with their n-step returns, but the
        last ``n_steps``; None when no frame is ready."""
        if tensordict.batch_dims == 0:  # one transition (a buffer's add): a batch of one step
            tensordict = tensordict.unsqueeze(0)
        time = tensordict.batch_dims - 1
        total = tensordict if self._buffer is None else _ops.cat([self._buffer, tensordict], time)
        length = total.batch_size[-1]
        index = (slice(None),) * time
        self._buffer = total[index + (slice(max(length - self.n_steps, 0), length),)].clone()
        if length <= self.n_steps:
            return None
        step = MultiStep(self.gamma, self.n_steps, reward_keys=self.reward_keys, done_key=self.done_key,
                         mask_key=self.mask_key)
        return step(total)[index + (slice(0, length - self.n_steps),)]

    def forward(self, tensordict):
        """Samples pass unchanged (the n-step returns were computed when they were written)."""
        return tensordict

    def __repr__(self):
        return f"MultiStepTransform(n_steps={self.n_steps}, gamma={self.gamma})"
