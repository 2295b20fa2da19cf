"""torchrl's ready-made networks: ``MLP`` and ``ConvNet`` (``torchrl.modules.models``), with torchrl 0.14's
arguments and defaults. A missing input size (``in_features=None``) gives a lazy first layer."""
import copy
from collections.abc import Sequence
from numbers import Number

from ... import primitives as _ops
from ...nn import Conv2d, Dropout, ELU, LazyConv2d, LazyLinear, Linear, Module, Sequential, Tanh
from .utils import SquashDims, Squeeze2dLayer, create_on_device

__all__ = ["MLP", "ConvNet"]

_LAZY = {Linear: LazyLinear}


def _iter_maybe_over_single(item, n):
    """``n`` copies of a dict of kwargs, or the given list of dicts, as an iterator."""
    if item is None:
        return iter([{} for _ in range(n)])
    if isinstance(item, dict):
        return iter([copy.deepcopy(item) for _ in range(n)])
    return iter([copy.deepcopy(i) for i in item])


class _ExecutableLayer(Module):
    """A plain function as a layer."""

    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def __repr__(self):
        return f"{type(self).__name__}(func={self.func})"


def _as_modules(layers):
    return [layer if isinstance(layer, Module) else _ExecutableLayer(layer) for layer in layers]


class MLP(Sequential):
    """A multi-layer perceptron: ``depth`` hidden layers of ``num_cells`` units, each followed by
    ``activation_class`` (default ``Tanh``), then a linear layer to ``out_features``.

    ``num_cells`` is a list (one width per hidden layer) or an int with ``depth``; with neither, the MLP
    is a single linear layer (torchrl's default). ``in_features=None`` makes the first layer a
    ``LazyLinear``. ``out_features`` may be a shape: the output is then reshaped to it. Several inputs are
    concatenated along the last dimension. ``dropout`` and ``norm_class`` add layers before each
    activation; ``activate_last_layer`` activates the output too; ``*_kwargs`` are a dict for every layer
    or a list of one dict per layer.
    """

    def __init__(self, in_features=None, out_features=None, depth=None, num_cells=None, activation_class=Tanh,
                 activation_kwargs=None, norm_class=None, norm_kwargs=None, dropout=None, bias_last_layer=True,
                 single_bias_last_layer=False, layer_class=Linear, layer_kwargs=None, activate_last_layer=False,
                 device=None):
        if out_features is None:
            raise ValueError("out_features must be specified for MLP.")
        if num_cells is None:
            if depth is None:
                num_cells, depth = [], 0
            else:
                num_cells = [32] * depth
        if single_bias_last_layer:
            raise NotImplementedError("MLP: single_bias_last_layer is not supported by rlpipe")
        if not (isinstance(num_cells, Sequence) or depth is not None):
            raise RuntimeError("If num_cells is provided as an integer, depth must be provided too.")
        self.in_features = in_features
        self.out_features = out_features
        self._reshape_out = not isinstance(out_features, Number)
        self._out_features_num = out_features if isinstance(out_features, Number) else _prod(out_features)
        self.activation_class = activation_class
        self.norm_class = norm_class
        self.dropout = dropout
        self.bias_last_layer = bias_last_layer
        self.single_bias_last_layer = single_bias_last_layer
        self.layer_class = layer_class
        self.activation_kwargs = activation_kwargs
        self.norm_kwargs = norm_kwargs
        self.layer_kwargs = layer_kwargs
        self.activate_last_layer = activate_last_layer
        self.num_cells = list(num_cells) if isinstance(num_cells, Sequence) else [num_cells] * depth
        if depth is not None and len(self.num_cells) != depth:
            raise RuntimeError("depth and num_cells length conflict, consider matching or specifying a constant "
                               "num_cells argument together with a a desired depth")
        self.depth = len(self.num_cells)
        n_activations = self.depth + activate_last_layer
        activation_iter = _iter_maybe_over_single(activation_kwargs, n_activations)
        norm_iter = _iter_maybe_over_single(norm_kwargs, n_activations)
        layer_iter = _iter_maybe_over_single(layer_kwargs, self.depth + 1)
        layers = []
        sizes_in = [in_features] + self.num_cells
        sizes_out = self.num_cells + [self._out_features_num]
        for i, (n_in, n_out) in enumerate(zip(sizes_in, sizes_out)):
            kwargs = next(layer_iter)
            bias = kwargs.pop("bias", bias_last_layer if i == self.depth else True)
            if n_in is not None:
                layers.append(create_on_device(layer_class, device, n_in, n_out, bias=bias, **kwargs))
            else:
                if layer_class not in _LAZY:
                    raise KeyError(f"The lazy version of {layer_class.__name__} is not implemented yet. Consider "
                                   "providing the input feature dimensions explicitly when creating an MLP module")
                layers.append(create_on_device(_LAZY[layer_class], device, n_out, bias=bias, **kwargs))
            if i < self.depth or activate_last_layer:
                if dropout is not None:
                    layers.append(Dropout(p=dropout))
                if norm_class is not None:
                    layers.append(create_on_device(norm_class, device, **next(norm_iter)))
                layers.append(create_on_device(activation_class, device, **next(activation_iter)))
        super().__init__(*_as_modules(layers))

    # forward is Sequential's between _layer_inputs and _layer_output: vmap over an ensemble of MLPs
    # (functional_call) may then run the layers as one fused node (rlpipe.func._ensemble_mlp)
    _adapts_sequential = True

    def forward(self, *inputs):
        return self._layer_output(super().forward(*self._layer_inputs(*inputs)))

    def _layer_inputs(self, *inputs):
        """The layers' one input: several inputs concatenated along the last dim."""
        return (_ops.cat(list(inputs), -1),) if len(inputs) > 1 else inputs

    def _layer_output(self, out):
        """The layers' output, reshaped to ``out_features`` when that is a shape."""
        return out.view(*out.shape[:-1], *self.out_features) if self._reshape_out else out


def _prod(shape):
    out = 1
    for s in shape:
        out *= s
    return out


def _find_depth(depth, *lists_or_ints):
    if depth is None:
        for item in lists_or_ints:
            if isinstance(item, (list, tuple)):
                depth = len(item)
    if depth is None:
        raise ValueError("depth=None requires one of the input args (kernel_sizes, strides, num_cells) to be a a list "
                         f"or tuple. Got {tuple(type(item) for item in lists_or_ints)}")
    return depth


class ConvNet(Sequential):
    """A stack of ``Conv2d`` layers (``num_cells`` channels each, default ``[32, 32, 32]``), each followed by
    ``activation_class`` (default ``ELU``) and ``norm_class`` if given, then ``aggregator_class`` (default
    ``SquashDims``: the channel and spatial dims flattened into one). ``kernel_sizes``, ``strides`` and
    ``paddings`` are ints or one per layer. ``in_features=None`` makes the first convolution lazy. Inputs
    may have several batch dims (``[*B, C, H, W]``)."""

    def __init__(self, in_features=None, depth=None, num_cells=None, kernel_sizes=3, strides=1, paddings=0,
                 activation_class=ELU, activation_kwargs=None, norm_class=None, norm_kwargs=None,
                 bias_last_layer=True, aggregator_class=SquashDims, aggregator_kwargs=None, squeeze_output=False,
                 device=None):
        if num_cells is None:
            num_cells = [32, 32, 32]
        self.in_features = in_features
        self.activation_class = activation_class
        self.norm_class = norm_class
        self.bias_last_layer = bias_last_layer
        self.aggregator_class = aggregator_class
        self.aggregator_kwargs = aggregator_kwargs if aggregator_kwargs is not None else {"ndims_in": 3}
        self.squeeze_output = squeeze_output
        self.activation_kwargs = activation_kwargs if activation_kwargs is not None else {}
        self.norm_kwargs = norm_kwargs if norm_kwargs is not None else {}
        depth = _find_depth(depth, num_cells, kernel_sizes, strides, paddings)
        if depth == 0:
            raise ValueError("Null depth is not permitted with ConvNet.")
        for field, value in (("num_cells", num_cells), ("kernel_sizes", kernel_sizes), ("strides", strides),
                             ("paddings", paddings)):
            values = list(value) if isinstance(value, Sequence) else [value] * depth
            if len(values) != depth:
                raise RuntimeError(f"depth={depth} and {field}={len(values)} length conflict, consider matching or "
                                   f"specifying a constant {field} argument together with a a desired depth")
            setattr(self, field, values)
        self.out_features = self.num_cells[-1]
        self.depth = depth
        activation_iter = _iter_maybe_over_single(activation_kwargs, depth)
        norm_iter = _iter_maybe_over_single(norm_kwargs, depth)
        layers = []
        sizes_in = [in_features] + self.num_cells[:-1]
        for i, (n_in, n_out, kernel, stride, padding) in enumerate(
                zip(sizes_in, self.num_cells, self.kernel_sizes, self.strides, self.paddings)):
            bias = i < depth - 1 or bias_last_layer
            if n_in is not None:
                layers.append(Conv2d(n_in, n_out, kernel_size=kernel, stride=stride, bias=bias, padding=padding,
                                     device=device))
            else:
                layers.append(LazyConv2d(n_out, kernel_size=kernel, stride=stride, bias=bias, padding=padding,
                                         device=device))
            layers.append(create_on_device(activation_class, device, **next(activation_iter)))
            if norm_class is not None:
                layers.append(create_on_device(norm_class, device, **next(norm_iter)))
        if aggregator_class is not None:
            layers.append(create_on_device(aggregator_class, device, **self.aggregator_kwargs))
        if squeeze_output:
            layers.append(Squeeze2dLayer())
        super().__init__(*_as_modules(layers))

    def forward(self, inputs):
        *batch, _, _, _ = inputs.shape
        if len(batch) > 1:
            inputs = inputs.flatten(0, len(batch) - 1)
        out = super().forward(inputs)
        if len(batch) > 1:
            out = out.unflatten(0, batch)
        return out

    @classmethod
    def default_atari_dqn(cls, num_actions):
        """The network of the DQN paper (Mnih et al. 2015): three ReLU convolutions, then a 512-unit MLP."""
        from rlpipe.nn import ReLU
        cnn = ConvNet(activation_class=ReLU, num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3], strides=[4, 2, 1])
        mlp = MLP(activation_class=ReLU, out_features=num_actions, num_cells=[512])
        return Sequential(cnn, mlp)
