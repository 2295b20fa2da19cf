"""Lazy modules: layers whose input size is read from their first input (torch's ``LazyModuleMixin``).

A lazy module holds ``UninitializedParameter`` placeholders. A forward pre-hook calls
``initialize_parameters(*inputs)`` on the first call; once nothing is left uninitialized the hooks are
removed and the module becomes ``cls_to_become`` (``LazyLinear`` becomes ``Linear``). The placeholders
are materialized in place, so an optimizer built before the first call holds the real parameters;
one built after it sees them too. ``load_state_dict`` with initialized entries materializes the
placeholders to the stored shapes first.
"""
import itertools

from ...autograd.grad_mode import no_grad
from ..parameter import UninitializedParameter, is_lazy
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .linear import Linear

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv2d", "LazyConv1d", "LazyConvTranspose1d", "LazyConvTranspose2d"]


class LazyModuleMixin:
    """Mixin for modules whose parameters are shaped by their first input. A subclass sets
    ``cls_to_become`` and implements ``initialize_parameters(*args, **kwargs)``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._add_hook(self._load_state_dict_pre_hooks, self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters, with_kwargs=True)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer of this module is still a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        """Gives the placeholder parameters their shapes from the first input, then initializes them; subclasses define
        it."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs):
        # placeholders take the shapes of the initialized entries they are about to receive
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if param is not None and is_lazy(param) and key in state_dict and not is_lazy(state_dict[key]):
                with no_grad():
                    param.materialize(state_dict[key].shape)


def _infer_parameters(module, args, kwargs):
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    module._load_hook.remove()
    del module._initialize_hook
    del module._load_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """A ``Linear`` whose ``in_features`` is the last dimension of its first input; it then becomes a
    ``Linear`` initialized as torch's (``in_features`` reads 0 until then)."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.out_features = out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """Takes ``in_features`` from the last dim of the first input, materializes weight and bias and initializes
        them."""
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """A convolution whose ``in_channels`` is the channel dimension of its first input (batched or not);
    ``_spatial`` is its number of spatial dims. Until then ``in_channels`` reads 0."""
    _spatial = 2

    def _lazy_init(self, out_channels, bias, device, dtype):
        self.out_channels = out_channels
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        """Initializes the parameters as the convolution does, once they have their shapes."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """Takes ``in_channels`` from the channel dim of the first input, materializes weight and bias and
        initializes them."""
        if not self.has_uninitialized_params():
            return
        unbatched = self._spatial + 1
        if input.ndim not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {input.shape}")
        with no_grad():
            self.in_channels = input.shape[-unbatched]
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize((*shape, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class LazyConv1d(_LazyConvMixin, Conv1d):
    """A ``Conv1d`` whose ``in_channels`` is read from its first input; it then becomes a ``Conv1d``."""

    cls_to_become = Conv1d
    _spatial = 1

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConv2d(_LazyConvMixin, Conv2d):
    """A ``Conv2d`` whose ``in_channels`` is the channel dimension of its first input (``(N, C, H, W)``
    or unbatched ``(C, H, W)``); it then becomes a ``Conv2d``."""

    cls_to_become = Conv2d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConvTranspose1d(_LazyConvMixin, ConvTranspose1d):
    """A ``ConvTranspose1d`` whose ``in_channels`` is read from its first input."""

    cls_to_become = ConvTranspose1d
    _spatial = 1

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConvTranspose2d(_LazyConvMixin, ConvTranspose2d):
    """A ``ConvTranspose2d`` whose ``in_channels`` is read from its first input."""

    cls_to_become = ConvTranspose2d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)
