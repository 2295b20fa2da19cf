"""Convolution layers: ``Conv1d``, ``Conv2d`` and the transposed ``ConvTranspose1d``/``ConvTranspose2d`` on a
shared ``_ConvNd`` base."""
from ... import primitives as P
from .. import functional as F
from .._functional_conv import _conv2d_out_size, _conv2d_pads
from ._params import inference_arrays, register_optional, reset_like_linear
from .module import Module
from .utils import _pair, _reverse_repeat_tuple, _single

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]


class _ConvNd(Module):
    """Argument checks, weight/bias creation, initialization and repr shared by the convolutions."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # the padding F.pad applies for the non-zero padding modes, last spatial dimension first
        if isinstance(padding, str):
            pads = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    pads[2 * i] = total // 2
                    pads[2 * i + 1] = total - total // 2
            self._reversed_padding_repeated_twice = pads
        else:
            self._reversed_padding_repeated_twice = list(_reverse_repeat_tuple(padding, 2))
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        register_optional(self, "weight", True, (*shape, *kernel_size), device, dtype)
        register_optional(self, "bias", bias, (out_channels,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """torch's default: Kaiming uniform (a=sqrt(5)) weight, bias uniform in ±1/sqrt(fan_in)."""
        reset_like_linear(self.weight, self.bias)

    def extra_repr(self):
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            text += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


def _conv_in_padding_mode(module, conv, no_padding, input, weight, bias):
    """``conv`` (F.conv1d or F.conv2d) with ``module``'s settings; a ``padding_mode`` other than 'zeros' pads
    the input with ``F.pad`` first and convolves with ``no_padding``."""
    padding = module.padding
    if module.padding_mode != "zeros":
        input = F.pad(input, module._reversed_padding_repeated_twice, mode=module.padding_mode)
        padding = no_padding
    return conv(input, weight, bias, module.stride, padding, module.dilation, module.groups)


class Conv2d(_ConvNd):
    """2-D cross-correlation over ``(N, C_in, H, W)`` (or unbatched ``(C_in, H, W)``) inputs.

    ``weight`` is ``(out_channels, in_channels // groups, kH, kW)``. ``padding`` is an int, a pair,
    ``'valid'`` (none) or ``'same'`` (output as large as the input; stride 1 only). ``padding_mode``
    other than ``'zeros'`` pads with ``F.pad`` first.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _pair(kernel_size), _pair(stride),
                         padding if isinstance(padding, str) else _pair(padding), _pair(dilation), False, _pair(0),
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input, weight, bias):
        return _conv_in_padding_mode(self, F.conv2d, _pair(0), input, weight, bias)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def _inference_op(self, dtype, device):  # see Module's run_without_graph
        arrays = inference_arrays(self, dtype, device)
        if arrays is None or self.padding_mode != "zeros":
            return None
        padding = None if self.padding == "same" else (0, 0) if self.padding == "valid" else self.padding
        pads = _conv2d_pads(padding, self.dilation, self.kernel_size)
        return _Conv2dStep, arrays + (self.stride, pads, self.dilation, self.groups)


class _Conv2dStep:
    """Conv2d's step in a Sequential's inference plan: the output size for this input, then the Conv2d
    primitive's forward. An input the usual path would refuse (or treat as unbatched) raises ValueError,
    which hands the call back to that path and its error."""

    @staticmethod
    def forward(ctx, x, w, b, stride, pads, dilation, groups):
        if x.ndim != 4 or x.shape[1] != w.shape[1] * groups:
            raise ValueError(f"conv2d step: expected input [N, {w.shape[1] * groups}, H, W], got {x.shape}")
        out_size = _conv2d_out_size(x.shape[2:], w.shape[2:], stride, pads, dilation)
        if out_size[0] < 1 or out_size[1] < 1:
            raise ValueError(f"conv2d step: input {x.shape} smaller than the kernel {w.shape[2:]}")
        return P.Conv2d.forward(ctx, x, w, b, stride, pads, dilation, groups, out_size)


class Conv1d(_ConvNd):
    """1-D cross-correlation over ``(N, C_in, L)`` (or unbatched ``(C_in, L)``) inputs.

    ``weight`` is ``(out_channels, in_channels // groups, kernel_size)``; ``padding`` and ``padding_mode``
    as in ``Conv2d``.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _single(kernel_size), _single(stride),
                         padding if isinstance(padding, str) else _single(padding), _single(dilation), False,
                         _single(0), groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input, weight, bias):
        return _conv_in_padding_mode(self, F.conv1d, _single(0), input, weight, bias)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTransposeNd(_ConvNd):
    """The transposed convolutions' checks and ``forward(input, output_size=None)``: an ``output_size``
    picks the output padding that gives it."""
    _dims = 2
    _functional = None

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, output_padding, groups,
                 bias, padding_mode, device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def _output_padding(self, input, output_size):
        """The output padding that makes the output ``output_size`` (spatial sizes, or with the leading
        batch and channel sizes), or ``self.output_padding`` without one."""
        if output_size is None:
            return self.output_padding
        dims = self._dims
        leading = 2 if input.ndim == dims + 2 else 1
        if len(output_size) == leading + dims:
            output_size = output_size[leading:]
        if len(output_size) != dims:
            raise ValueError(f"ConvTranspose{dims}D: for {input.ndim}D input, output_size must have {dims} or "
                             f"{leading + dims} elements (got {len(output_size)})")
        smallest = [(input.shape[d + leading] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(dims)]
        largest = [m + s - 1 for m, s in zip(smallest, self.stride)]
        for size, low, high in zip(output_size, smallest, largest):
            if size < low or size > high:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {smallest} "
                                 f"to {largest} (for an input of {input.shape[leading:]})")
        return tuple(size - low for size, low in zip(output_size, smallest))

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return type(self)._functional(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                      self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """The transposed 1-D convolution (the gradient of ``Conv1d`` with respect to its input), over
    ``(N, C_in, L)`` or ``(C_in, L)`` inputs; ``weight`` is ``(in_channels, out_channels // groups, kernel_size)``."""
    _dims = 1
    _functional = staticmethod(F.conv_transpose1d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _single(kernel_size), _single(stride), _single(padding),
                         _single(dilation), _single(output_padding), groups, bias, padding_mode, device=device,
                         dtype=dtype)


class ConvTranspose2d(_ConvTransposeNd):
    """The transposed 2-D convolution (the gradient of ``Conv2d`` with respect to its input, often called
    a deconvolution), over ``(N, C_in, H, W)`` or ``(C_in, H, W)`` inputs; ``weight`` is
    ``(in_channels, out_channels // groups, kH, kW)``."""
    _dims = 2
    _functional = staticmethod(F.conv_transpose2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _pair(kernel_size), _pair(stride), _pair(padding),
                         _pair(dilation), _pair(output_padding), groups, bias, padding_mode, device=device,
                         dtype=dtype)
