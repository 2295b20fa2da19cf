"""Small layers and helpers used by torchrl's networks."""
import inspect

from ...nn import Module

__all__ = ["SquashDims", "Squeeze2dLayer", "SqueezeLayer", "create_on_device"]


def create_on_device(module_class, device, *args, **kwargs):
    """``module_class(*args, **kwargs)`` on ``device``: passed to the constructor when it takes a
    ``device`` argument, else the module is moved there."""
    try:
        spec = inspect.getfullargspec(module_class.__init__)
        takes_device = "device" in spec.args or "device" in spec.kwonlyargs
    except TypeError:
        takes_device = False
    if takes_device:
        return module_class(*args, device=device, **kwargs)
    result = module_class(*args, **kwargs)
    if device is not None and hasattr(result, "to"):
        result = result.to(device)
    return result


class SquashDims(Module):
    """Flattens the last ``ndims_in`` dimensions into one."""

    def __init__(self, ndims_in=3):
        super().__init__()
        self.ndims_in = ndims_in

    def forward(self, value):
        return value.flatten(-self.ndims_in, -1)


class SqueezeLayer(Module):
    """Squeezes the given singleton dimensions (an error if one is not of size 1)."""

    def __init__(self, dims=(-1,)):
        super().__init__()
        for dim in dims:
            if dim >= 0:
                raise RuntimeError("dims must all be < 0")
        self.dims = dims

    def forward(self, input):
        for dim in self.dims:
            if input.shape[dim] != 1:
                raise RuntimeError(f"Tried to squeeze an input over dims {self.dims} with shape {input.shape}")
            input = input.squeeze(dim)
        return input


class Squeeze2dLayer(SqueezeLayer):
    """Squeezes the last two singleton dimensions (a ConvNet output of spatial size 1x1)."""

    def __init__(self):
        super().__init__((-2, -1))
