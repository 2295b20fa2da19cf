"""A vmapped ``Sequential`` of ``Linear`` layers and ReLU/Tanh activations as one node.

Under ``vmap`` over stacked parameters (``functional_call`` of an ensemble's base module), a plain
MLP would record a node per layer and per activation and pass every op through vmap's wrappers.
``functional_call`` instead runs such a Sequential here: one ``EnsembleMLP`` node whose forward is
one stacked matmul per layer (the first layer's shared input one 2-d GEMM against all the members'
weights side by side), the bias and the activation applied in place, and whose backward walks the
layers in NumPy (or CuPy) alone. With grad off no node is recorded at all.
"""
import functools

from .. import kernels
from ..nn.modules import module as _module
from ..nn.modules.activation import ReLU, Tanh
from ..nn.modules.container import Sequential
from ..nn.modules.linear import Linear
from ..primitives.base import Op
from ..primitives.double_backward import twice
from .._tensor import Tensor
from ._batched import BatchedTensor, batch_sizes
from ._ensemble import EnsembleLinear
from ._submodules import named_submodules

__all__ = ["EnsembleMLP", "fused_call", "fused_forwards"]

_ACTIVATIONS = {ReLU: "relu", Tanh: "tanh"}


def fused_forwards(module):
    """``{submodule: forward}`` for every Sequential in ``module`` (itself included) that can run as
    one EnsembleMLP node: the fused forward to put in place of its own for a vmapped call."""
    return {sub: functools.partial(_adapted_forward if _adapts(type(sub)) else _forward, sub, layout)
            for _, sub in named_submodules(module) if (layout := _layout(sub)) is not None}


def _adapts(cls):
    """Whether ``cls`` (a Sequential subclass such as MLP) declares its forward to be Sequential's
    between ``_layer_inputs(*inputs)`` and ``_layer_output(out)`` (its ``_adapts_sequential``)."""
    return cls.__dict__.get("_adapts_sequential", False) and cls.forward is cls.__dict__.get("forward")


def _layout(seq):
    """((Linear, activation name or None), ...) for a Sequential of Linear layers, each followed by
    at most one ReLU or Tanh, with no hook or patched forward anywhere; else None."""
    if not _sequential_forward(seq):
        return None
    layout = []
    for sub in seq._modules.values():
        if _hooked(sub):
            return None
        if type(sub) is Linear:
            layout.append([sub, None])
        elif type(sub) in _ACTIVATIONS and layout and layout[-1][1] is None:
            layout[-1][1] = _ACTIVATIONS[type(sub)]
        else:
            return None
    return tuple(map(tuple, layout)) or None


def _sequential_forward(seq):
    """Whether ``seq`` is a Sequential that runs Sequential's forward (between its adapters, see ``_adapts``)."""
    return isinstance(seq, Sequential) and "forward" not in seq.__dict__ and \
        (type(seq).forward is Sequential.forward or _adapts(type(seq)))


def _hooked(module):
    """Whether ``module`` has a hook of its own or a patched forward."""
    state = module.__dict__  # (its own entries: read as a dict, without the attribute lookup through the classes)
    return bool(state["_forward_hooks"] or state["_forward_pre_hooks"] or state["_backward_hooks"] or
                state["_backward_pre_hooks"] or "forward" in state)


def fused_call(module, values, args, kwargs):
    """``module(*args, **kwargs)`` as one EnsembleMLP node with its Linear layers' parameters read from
    ``values`` ({dotted name: tensor}), when ``module`` itself is a plain MLP without hooks and
    ``values`` holds exactly its parameters, none of them tied, batched at vmap's innermost level:
    no parameter is swapped in and no forward installed. Else ``NotImplemented``."""
    plan = None if kwargs or _hooked(module) or type(module).__call__ is not _module.Module.__call__ \
        else _given_layers(module, values)
    if plan is None:
        return NotImplemented
    adapts = _adapts(type(module))
    inputs = module._layer_inputs(*args) if adapts else args
    out = _fused_output(*plan, inputs[0]) if len(inputs) == 1 else None
    if out is None:
        return NotImplemented
    return module._layer_output(out) if adapts else out


def _given_layers(module, values):
    """(activations, [(weight, bias or None), ...]): ``module``'s layout (see ``_layout``) with its Linear
    layers' parameters read from ``values``, when ``values`` names exactly the parameters of ``module``,
    all distinct, and ``module`` has no buffer; else None. (One walk: it runs on every call.)"""
    state = module.__dict__
    if not _sequential_forward(module) or state["_parameters"] or state["_buffers"]:
        return None
    acts, params, seen = [], [], set()
    for key, sub in state["_modules"].items():
        sub_state = sub.__dict__
        if _hooked(sub) or sub_state["_buffers"] or sub_state["_modules"]:
            return None
        table = sub_state["_parameters"]
        prefix = key + "."
        for name, tensor in table.items():
            if tensor is not None:
                if id(tensor) in seen or prefix + name not in values:
                    return None
                seen.add(id(tensor))
        kind = type(sub)
        if kind is Linear:
            if len(table) != 2 or "weight" not in table or "bias" not in table:
                return None
            params.append((values.get(prefix + "weight"), None if table["bias"] is None else values[prefix + "bias"]))
            acts.append(None)
        elif kind in _ACTIVATIONS and acts and acts[-1] is None:
            acts[-1] = _ACTIVATIONS[kind]
        else:
            return None
    return (tuple(acts), params) if acts and len(seen) == len(values) else None


def _forward(seq, layout, input):
    """The Sequential's output as one EnsembleMLP node when its parameters are batched at vmap's
    innermost level (an ensemble); otherwise its usual forward."""
    params = [(linear._parameters["weight"], linear._parameters.get("bias")) for linear, _ in layout]
    out = _fused_output(tuple(act for _, act in layout), params, input)
    return Sequential.forward(seq, input) if out is None else out


def _adapted_forward(seq, layout, *inputs):
    """``_forward`` between the Sequential subclass's own input and output adapters."""
    return seq._layer_output(_forward(seq, layout, *seq._layer_inputs(*inputs)))


def _fused_output(acts, params, input):
    """The batched output of one EnsembleMLP node (``acts``: each layer's activation, ``params``: its
    weight and bias), or None where it does not apply."""
    args = _fused_args(params, input)
    if args is None:
        return None
    return BatchedTensor(EnsembleMLP.apply(*args, acts=acts), len(batch_sizes))


def _fused_args(params, input):
    """(x, x_batched, w0, b0, w1, b1, ...) as plain tensors when the fused node applies, else None."""
    level = len(batch_sizes)
    if not level or _module._global_forward_hooks or _module._global_forward_pre_hooks or \
            _module._global_backward_hooks or _module._global_backward_pre_hooks:
        return None
    x_batched = type(input) is BatchedTensor and input._level == level
    x = input._value if x_batched else input
    if not isinstance(x, Tensor) or x._data.ndim < 1 + x_batched:
        return None
    args, dtype, features = [x, x_batched], x._data.dtype, x._data.shape[-1]
    for weight, b in params:
        w = _member_stack(weight, level)
        shape = None if w is None else w._data.shape
        if shape is None or len(shape) != 3 or shape[2] != features or w._data.dtype != dtype:
            return None
        if b is not None:
            b = _member_stack(b, level)
            if b is None or b._data.shape != shape[:2] or b._data.dtype != dtype:
                return None
        args += [w, b]
        features = shape[1]
    return args


def _member_stack(value, level):
    """The stacked tensor behind a parameter batched at ``level``, else None."""
    if type(value) is not BatchedTensor or value._level != level or not isinstance(value._value, Tensor):
        return None
    return value._value


class EnsembleMLP(Op):
    """Every member's MLP on ``x`` (``[E, ..., in]`` when ``x_batched``, else ``[..., in]`` shared by
    all): ``params`` are ``w0, b0, w1, b1, ...`` (weights ``[E, out, in]``, biases ``[E, out]`` or
    None), ``acts`` each layer's activation ('relu', 'tanh' or None)."""
    node_name = "EnsembleMLPBackward0"

    @staticmethod
    def forward(ctx, x, x_batched, *params, acts):
        """``[E, ..., out]``: the layers in turn, bias and activation in place on each product."""
        xp, ensemble = ctx.xp, params[0].shape[0]
        lead = x.shape[1:-1] if x_batched else x.shape[:-1]
        h = x.reshape(ensemble, -1, x.shape[-1]) if x_batched else x.reshape(-1, x.shape[-1])
        inputs, ones_in = [], False
        for i, act in enumerate(acts):
            inputs.append(h)
            # the shared first product also gives each member a column of ones (kept by ReLU or no
            # activation) against which the next layer's bias is one more row of its weights
            ones_out = h.ndim == 2 and i + 1 < len(acts) and act != "tanh" and params[2 * i + 3] is not None
            h = _affine(xp, h, params[2 * i], params[2 * i + 1], ones_in, ones_out)
            ones_in = ones_out
            _activate(xp, _dense(h), act)
        ctx.save_for_backward(*inputs, h, *params[::2])
        ctx.x_shape, ctx.x_batched, ctx.acts = x.shape, x_batched, acts
        ctx.biases = params[1::2]  # for the double backward, which runs the layers again
        return h.reshape((ensemble, *lead, h.shape[-1]))

    @staticmethod
    def backward(ctx, g):
        """The gradients of x (summed over the members when shared) and of every weight and bias."""
        saved, layers = ctx.saved_tensors, len(ctx.acts)
        inputs, outputs, weights = saved[:layers], saved[1:layers + 1], saved[layers + 1:]
        needs = ctx.needs_input_grad
        grads = [None] * (2 + 2 * layers)
        g = g.reshape(outputs[-1].shape)
        ones = ctx.xp.ones((1, g.shape[1]), dtype=g.dtype) if any(needs[3::2]) else None  # (for the bias gradients)
        for i in reversed(range(layers)):
            g = _activation_grad(ctx, ctx.acts[i], outputs[i], g, owned=i < layers - 1)
            w = weights[i]
            h = _without_ones(inputs[i], w.shape[2])
            if needs[2 + 2 * i]:
                grads[2 + 2 * i] = g.swapaxes(-1, -2) @ h
            if needs[3 + 2 * i]:  # the sum over rows as a matmul with ones: faster than sum(axis=1)
                grads[3 + 2 * i] = (ones @ g).reshape(w.shape[:2])
            if i == 0:
                if needs[0]:
                    grads[0] = _input_grad(ctx.xp, g, w, ctx.x_batched).reshape(ctx.x_shape)
            elif not any(needs[:2 + 2 * i]):  # nothing below needs a gradient
                break
            else:
                g = _times_weights(ctx.xp, g, w)
        return tuple(grads)


def _affine(xp, h, w, b, ones_in=False, ones_out=False):
    """``h @ w[e].T + b[e]`` for every member ``e``: ``[E, rows, out]`` (``out + 1`` with ``ones_out``).
    ``ones_in``: ``h``'s last column is ones, so the bias is one more row of the weights."""
    if h.ndim == 2:
        return _shared_affine(xp, h, w, b, ones_out)
    if ones_in:  # (laid out in C order: BLAS runs a product with a transposed operand about 10% slower)
        weights = xp.empty((w.shape[0], w.shape[2] + 1, w.shape[1]), dtype=w.dtype)
        weights[:, :-1] = w.swapaxes(-1, -2)
        weights[:, -1] = b
        return h @ weights
    out = h @ w.swapaxes(-1, -2)
    if b is None:
        return out
    if out.shape[-1] == 1:  # (one output: added along the rows, not in inner loops of one element)
        out[..., 0] += b
    else:
        out += b[:, None, :]
    return out


def _shared_affine(xp, h, w, b, ones_out):
    """The layer on a 2-d ``h`` shared by all members: one GEMM against the weights side by side
    (``[rows, in + 1] @ [in + 1, E*out]``, the bias the last row against a column of ones, so no pass
    of its own), returned as a strided ``[E, rows, out]`` view; ``ones_out`` adds each member one
    more output column of ones (zero weights, bias 1)."""
    ensemble, out_features, in_features = w.shape
    width = out_features + ones_out
    weights = xp.zeros((in_features + 1, ensemble, width), dtype=w.dtype)
    weights[:in_features, :, :out_features] = w.transpose(2, 0, 1)
    if b is not None:
        weights[in_features, :, :out_features] = b
    if ones_out:
        weights[in_features, :, out_features] = 1
    h = xp.concatenate([h, xp.ones((h.shape[0], 1), dtype=h.dtype)], axis=1)
    return (h @ weights.reshape(in_features + 1, -1)).reshape(h.shape[0], ensemble, width).swapaxes(0, 1)


_ZEROS_ROW = 16384  # NumPy's maximum against a row of zeros this long runs at full speed (a short row or a
# scalar, in inner loops shorter than its buffer, is two to five times slower)


def _activate(xp, h, act):
    """The activation in place on ``h``."""
    if act == "relu":
        _relu(xp, h.reshape(-1) if h.flags.c_contiguous else h)
    elif act == "tanh":
        xp.tanh(h, out=h)


def _relu(xp, h):
    """``max(h, 0)`` in place: a flat ``h`` as rows of ``_ZEROS_ROW`` and the rest."""
    if h.ndim > 1:
        xp.maximum(h, xp.zeros(h.shape[-1], dtype=h.dtype), out=h)
        return
    zeros = xp.zeros(min(h.size, _ZEROS_ROW) or 1, dtype=h.dtype)
    whole = h.size - h.size % zeros.size
    rows = h[:whole].reshape(-1, zeros.size)
    xp.maximum(rows, zeros, out=rows)
    if whole < h.size:
        xp.maximum(h[whole:], zeros[:h.size - whole], out=h[whole:])


def _dense(h):
    """The contiguous array ``h`` is a permuted view of (the shared product's), else ``h``: an
    elementwise pass over it runs in memory order."""
    base = h.base
    return base if base is not None and base.size == h.size and base.flags.c_contiguous else h


def _without_ones(h, features):
    """``h`` without the column of ones ``_shared_affine`` may have added (a view)."""
    return h if h.shape[-1] == features else h[..., :features]


def _activation_grad(ctx, act, y, g, owned):
    """``g`` through the activation whose output is ``y`` (the same formulas as Relu's and Tanh's),
    in place when ``g`` is ``owned`` (made by this backward, not handed in)."""
    if act is None:
        return g
    fused = kernels.get(_BACKWARD_KERNELS[act], ctx.be)  # a backend's one-launch kernel, where it has one (cuda)
    if fused:
        return fused(_without_ones(y, g.shape[-1]), g)
    factor = _in_memory_order(y, g.shape[-1], _relu_factor if act == "relu" else _tanh_factor)
    return ctx.xp.multiply(g, factor, out=g) if owned else g * factor


_BACKWARD_KERNELS = {"relu": "relu_backward", "tanh": "tanh_backward"}


def _relu_factor(y):
    """ReLU's gradient factor from its output: y != 0 is Relu's ~(y <= 0) (the output is never below
    zero), NaN included, in one pass."""
    return y != 0


def _tanh_factor(y):
    """Tanh's gradient factor from its output."""
    return 1 - y * y


def _in_memory_order(y, features, fn):
    """``fn(y)[..., :features]``, computed over the contiguous product behind ``y`` when ``y`` is the
    shared first layer's strided view of it (faster than walking the view)."""
    dense = _dense(y)
    out = fn(dense)
    if dense is not y:
        out = out.reshape(y.shape[1], y.shape[0], y.shape[2]).swapaxes(0, 1)
    return _without_ones(out, features)


def _times_weights(xp, g, w):
    """``g @ w`` for every member. For a layer of width 1 an outer product, which NumPy's batched matmul
    runs without BLAS when the inner dim is 1 (and a broadcast product runs in short inner loops): as
    a product over an inner dim of 2, the second term zero, which BLAS runs (2-3x faster)."""
    if w.shape[1] != 1:
        return g @ w
    padded_g = xp.zeros(g.shape[:-1] + (2,), dtype=g.dtype)
    padded_g[..., :1] = g
    padded_w = xp.zeros(w.shape[:-2] + (2, w.shape[-1]), dtype=w.dtype)
    padded_w[..., :1, :] = w
    return padded_g @ padded_w


def _input_grad(xp, g, w, x_batched):
    """The gradient of the first layer's input: per member, or summed over the members in one GEMM
    (``[rows, E*out] @ [E*out, in]``) when the input is shared."""
    if x_batched:
        return _times_weights(xp, g, w)
    rows = g.shape[1]
    return g.swapaxes(0, 1).reshape(rows, -1) @ w.reshape(-1, w.shape[2])


@twice(EnsembleMLP)
def _ensemble_mlp_twice(ctx, g):
    """EnsembleMLP's backward for create_graph: the layers run again as EnsembleLinear and activation nodes
    on the graph, then each node's own double backward runs, from the last layer to the first."""
    saved, acts = ctx.saved_tensors, ctx.acts
    weights = saved[len(acts) + 1:]
    values = [v for pair in zip(weights, ctx.biases) for v in pair]
    params = [ctx.graph_input(2 + k, v) for k, v in enumerate(values)]
    h, chain = ctx.graph_input(0, saved[0].reshape(ctx.x_shape)), []
    for i, act in enumerate(acts):
        h = EnsembleLinear.apply(h, params[2 * i], params[2 * i + 1], ctx.x_batched or i > 0)
        chain.append((i, h.grad_fn))
        if act is not None:
            h = h.relu() if act == "relu" else h.tanh()
            chain.append((None, h.grad_fn))
    grads = [None] * (2 + len(params))
    for layer, node in reversed(chain):
        if node is None or g is None:  # nothing below needs a gradient
            break
        out = type(node).backward_graph(node, g)
        g = out[0] if type(out) is tuple else out
        if layer is not None:
            grads[2 + 2 * layer], grads[3 + 2 * layer] = out[1], out[2]
    grads[0] = g if ctx.needs_input_grad[0] else None
    return tuple(grads)
