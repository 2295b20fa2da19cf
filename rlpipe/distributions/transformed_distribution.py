"""``TransformedDistribution``: a base distribution pushed through a sequence of transforms; log_prob
by the change of variables ``log p(y) = log p_base(x) - sum log |det J(x)|``."""
from .._tensor import Size
from ..autograd import no_grad
from . import constraints
from .distribution import Distribution
from .independent import Independent
from .transforms import ComposeTransform, Transform
from .utils import sum_rightmost

__all__ = ["TransformedDistribution"]


class TransformedDistribution(Distribution):
    """``base_distribution`` pushed through ``transforms`` in order: samples are transformed, ``log_prob`` subtracts
    each log |det Jacobian|."""
    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise ValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        self._attach(base_distribution, ComposeTransform(self.transforms), validate_args)

    def _attach(self, base_distribution, transform, validate_args):
        """Expands the base to the transforms' shapes, reinterprets batch dims as event dims where a
        transform acts on vectors, and sets this distribution's batch and event shapes."""
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        base_event_dim = len(base_distribution.event_shape)
        if len(base_shape) < transform.domain.event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least "
                             f"{transform.domain.event_dim}, but got {Size(base_shape)}.")
        forward_shape = tuple(transform.forward_shape(base_shape))
        expanded_base_shape = tuple(transform.inverse_shape(forward_shape))
        if base_shape != expanded_base_shape:
            base_distribution = base_distribution.expand(expanded_base_shape[:len(expanded_base_shape)
                                                                             - base_event_dim])
        reinterpreted_batch_ndims = transform.domain.event_dim - base_event_dim
        if reinterpreted_batch_ndims > 0:
            base_distribution = Independent(base_distribution, reinterpreted_batch_ndims)
        self.base_dist = base_distribution
        event_dim = max(transform.codomain.event_dim,
                        base_event_dim + transform.codomain.event_dim - transform.domain.event_dim)
        cut = len(forward_shape) - event_dim
        Distribution.__init__(self, forward_shape[:cut], forward_shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = Size(batch_shape)
        shape = tuple(batch_shape) + tuple(self.event_shape)
        for t in reversed(self.transforms):
            shape = tuple(t.inverse_shape(shape))
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape) - support.event_dim)
        return support

    @property
    def has_rsample(self):
        """Whether the base distribution has reparameterized samples (the transforms keep the gradient)."""
        return self.base_dist.has_rsample

    def sample(self, sample_shape=()):
        with no_grad():
            return self._forward(self.base_dist.sample(sample_shape))

    def rsample(self, sample_shape=()):
        return self._forward(self.base_dist.rsample(sample_shape))

    def _forward(self, x):
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_prob = log_prob - sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                event_dim - transform.domain.event_dim)
            y = x
        return log_prob + sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """Flips the CDF where the transforms decrease."""
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for transform in self.transforms[::-1]:
            value = transform.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        return self._forward(self.base_dist.icdf(self._monotonize_cdf(value)))
