# ruff: noqa: F401 - this module re-exports the public API
"""torchrl.modules.models: ready-made networks."""
from .dueling import DuelingCnnDQNet, DuelingMlpDQNet
from .models import MLP, ConvNet
from .utils import SquashDims, Squeeze2dLayer, SqueezeLayer, create_on_device
