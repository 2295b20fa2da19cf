"""``ExponentialFamily``: the base of distributions with density exp(<t(x), theta> - F(theta) + k(x)), which give
their natural parameters theta (``_natural_params``) and log-normalizer F (``_log_normalizer``)."""
from ..autograd import enable_grad, grad
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """An exponential family; the generic ``entropy`` follows from the log-normalizer by Bregman's identity, computed
    as torch's from detached natural parameters (so it carries no gradient: every family rlpipe defines overrides it
    with a closed-form, differentiable one)."""

    @property
    def _natural_params(self):
        """The natural parameters theta, a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """F(theta), the log of the normalizing constant."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """E[k(x)], the expected carrier measure."""
        raise NotImplementedError

    def _log_normalizer_and_gradients(self):
        """(detached natural parameters, F at them, dF/dtheta)."""
        params = [p.detach().requires_grad_() for p in self._natural_params]
        with enable_grad():
            value = self._log_normalizer(*params)
            gradients = grad(value.sum(), params)
        return params, value.detach(), gradients

    def entropy(self):
        """-E[k(x)] + F(theta) - <theta, grad F(theta)>."""
        params, value, gradients = self._log_normalizer_and_gradients()
        result = value - self._mean_carrier_measure
        for p, g in zip(params, gradients):
            result = result - (p.detach() * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
