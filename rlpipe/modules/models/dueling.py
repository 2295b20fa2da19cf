"""torchrl's dueling Q-networks (``torchrl.modules.models``): a feature trunk, then an advantage head and
a value head, combined as ``value + advantage - advantage.mean(-1)`` (Wang et al. 2016)."""
from ...nn import ELU, Conv2d, Linear, Module
from .models import MLP, ConvNet

__all__ = ["DuelingCnnDQNet", "DuelingMlpDQNet"]

_HEAD_DEFAULTS = {"depth": 1, "activation_class": ELU, "num_cells": 512, "bias_last_layer": True}


def _with_defaults(defaults, overrides):
    """``defaults`` updated with the user's ``overrides`` (None: none)."""
    return {**defaults, **(overrides or {})}


class _Dueling(Module):
    """The two heads over ``self.features``; the subclasses build the trunk."""

    def _build_heads(self, out_features, out_features_value, head_kwargs, device):
        self.out_features = out_features
        self.out_features_value = out_features_value
        head_kwargs = _with_defaults(_HEAD_DEFAULTS, head_kwargs)
        self.advantage = MLP(out_features=out_features, device=device, **head_kwargs)
        self.value = MLP(out_features=out_features_value, device=device, **head_kwargs)
        for layer in self.modules():  # torchrl starts every convolution and linear bias at zero
            if isinstance(layer, (Conv2d, Linear)) and layer.bias is not None:
                layer.bias.data.zero_()

    def forward(self, x):
        """Q-values ``[*B, out_features]`` of the input."""
        features = self.features(x)
        advantage = self.advantage(features)
        return self.value(features) + advantage - advantage.mean(dim=-1, keepdim=True)


class DuelingCnnDQNet(_Dueling):
    """A dueling Q-network on images ``[*B, C, H, W]``: a ``ConvNet`` trunk (default 32/64/64 channels,
    kernels 8/4/3, strides 4/2/1; ``cnn_kwargs`` override) and two ``MLP`` heads (one ELU hidden layer of
    512; ``mlp_kwargs`` override) giving ``out_features`` advantages and ``out_features_value`` values."""

    def __init__(self, out_features, out_features_value=1, cnn_kwargs=None, mlp_kwargs=None, device=None):
        super().__init__()
        cnn_defaults = {"num_cells": [32, 64, 64], "strides": [4, 2, 1], "kernel_sizes": [8, 4, 3]}
        self.features = ConvNet(device=device, **_with_defaults(cnn_defaults, cnn_kwargs))
        self._build_heads(out_features, out_features_value, mlp_kwargs, device)


class DuelingMlpDQNet(_Dueling):
    """A dueling Q-network on vectors: an ``MLP`` trunk (256-256 ELU, 256 activated outputs;
    ``mlp_kwargs_feature`` override) and two ``MLP`` heads (``mlp_kwargs_output`` override)."""

    def __init__(self, out_features, out_features_value=1, mlp_kwargs_feature=None, mlp_kwargs_output=None,
                 device=None):
        super().__init__()
        feature_defaults = {"num_cells": [256, 256], "out_features": 256, "activation_class": ELU,
                            "activate_last_layer": True}
        self.features = MLP(device=device, **_with_defaults(feature_defaults, mlp_kwargs_feature))
        self._build_heads(out_features, out_features_value, mlp_kwargs_output, device)
