"""torchrl 0.14's ``BatchSizeTransform``: gives an env another batch size, by expanding a stateless
(not batch-locked) env's to a fixed ``batch_size`` or by reshaping its TensorDicts and specs with a
``reshape_fn`` (``reshape``, ``unsqueeze``, ``squeeze``, ``flatten``, ``unflatten``). An env holding
one steps over TensorDicts (torchrl's path), not over frames."""
from .._creation import zeros
from .._tensor import Size
from .transformed_env import Transform

__all__ = ["BatchSizeTransform"]


class BatchSizeTransform(Transform):
    """Changes the batch size of the env it is in: ``batch_size=`` (the parent's must expand to it; a
    stateless env then steps that many envs at once) or ``reshape_fn=`` (a function applied to the
    env's TensorDicts and specs), exactly one of them. ``reset_func(tensordict, tensordict_reset)``
    (with ``env=`` the transformed env if ``env_kwarg``) may build the reset TensorDict."""

    _needs_tensordicts = True  # the env steps over TensorDicts: frames keep the base env's batch size

    def __init__(self, *, batch_size=None, reshape_fn=None, reset_func=None, env_kwarg=False):
        super().__init__()
        if (batch_size is None) == (reshape_fn is None):
            raise ValueError("One and only one of batch_size OR reshape_fn must be provided.")
        if reshape_fn is not None and not callable(reshape_fn):
            raise TypeError(f"BatchSizeTransform: reshape_fn must be callable, got {type(reshape_fn).__name__}")
        if reset_func is not None and not callable(reset_func):
            raise TypeError(f"BatchSizeTransform: reset_func must be callable, got {type(reset_func).__name__}")
        self.batch_size = None if batch_size is None else Size(batch_size)
        self.reshape_fn = reshape_fn
        self.reset_func = reset_func
        self.env_kwarg = env_kwarg

    def _reshaped(self, value):
        """``value`` (a TensorDict or a spec) with the new batch size."""
        if self.batch_size is not None:
            return value.expand(self.batch_size)
        return self.reshape_fn(value)

    def _reset(self, tensordict, tensordict_reset):
        if self.reset_func is not None:
            if self.env_kwarg:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset, env=self.container)
            else:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset)
        return self._reshaped(tensordict_reset)

    def _call(self, next_tensordict):
        if self.reshape_fn is not None:
            next_tensordict = self.reshape_fn(next_tensordict)
        return next_tensordict

    def forward(self, tensordict):
        """``reshape_fn`` on ``tensordict`` (data outside an env); unchanged with ``batch_size``."""
        return self._call(tensordict)

    def _inv_call(self, tensordict):
        """A reshaped TensorDict back to the parent env's batch size (an expanded one is left as it
        is: a stateless env steps any batch)."""
        parent = self.parent
        if self.reshape_fn is not None and parent is not None:
            tensordict = tensordict.reshape(parent.batch_size)
        return tensordict

    def transform_env_batch_size(self, batch_size):
        """The env's batch size after this transform, from the one before it."""
        if self.batch_size is not None:
            return self.batch_size
        return Size(self.reshape_fn(zeros(tuple(batch_size))).shape)

    def transform_output_spec(self, output_spec):
        """The output spec with the new batch size."""
        return self._reshaped(output_spec)

    def transform_input_spec(self, input_spec):
        """The input spec with the new batch size."""
        return self._reshaped(input_spec)

    def transform_state_spec(self, state_spec):
        """The state spec with the new batch size."""
        return self._reshaped(state_spec)

    def __repr__(self):
        what = f"batch_size={list(self.batch_size)}" if self.batch_size is not None else "reshape_fn"
        return f"BatchSizeTransform({what})"
