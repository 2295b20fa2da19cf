"""3-D layers: ``Conv3d``, ``MaxPool3d``, ``AvgPool3d``, ``AdaptiveAvgPool3d`` and ``AdaptiveMaxPool3d``, on
the shared bases of the 1-D and 2-D ones."""
from .. import functional as F
from .conv import _ConvNd, _conv_in_padding_mode
from .pooling import AvgPool2d, _AdaptiveMaxPool, _AdaptivePool, _MaxPoolNd
from .utils import _triple

__all__ = ["Conv3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d"]


class Conv3d(_ConvNd):
    """3-D cross-correlation over ``(N, C_in, D, H, W)`` (or unbatched ``(C_in, D, H, W)``) inputs.

    ``weight`` is ``(out_channels, in_channels // groups, kD, kH, kW)``; ``padding`` (an int, a triple,
    ``'valid'`` or ``'same'``) and ``padding_mode`` as in ``Conv2d``.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _triple(kernel_size), _triple(stride),
                         padding if isinstance(padding, str) else _triple(padding), _triple(dilation), False,
                         _triple(0), groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input, weight, bias):
        return _conv_in_padding_mode(self, F.conv3d, _triple(0), input, weight, bias)

    def forward(self, input):
        """The convolution of ``input`` with this layer's weight and bias."""
        return self._conv_forward(input, self.weight, self.bias)


class MaxPool3d(_MaxPoolNd):
    """The maximum over each ``kernel_size`` window of an ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input (padding
    counts as -inf); ``return_indices=True`` also returns the flat ``D * H * W`` position of each maximum."""

    def forward(self, input):
        """The pooled input (and the indices with ``return_indices``)."""
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(AvgPool2d):
    """The mean over each ``kernel_size`` window of an ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input; settings
    as ``AvgPool2d``'s."""

    def forward(self, input):
        """The pooled input."""
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Averages an ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input down to ``output_size`` (an int, or a triple
    whose ``None`` keeps that input size) whatever D, H and W are."""

    def forward(self, input):
        """The pooled input."""
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """The maxima of a grid of ``output_size`` bins covering an ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input;
    with ``return_indices`` also their flat positions."""

    def forward(self, input):
        """The pooled input (and the indices with ``return_indices``)."""
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)
