"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their one-step cells, as torch.nn's.

Parameters, their names, shapes, order and initialisation are torch's, so a torch ``state_dict`` loads
as it is. A layer projects the input of every time step in one matmul per layer and direction; each step
then costs one ``h @ W_hh.T`` and the gate math, which is written once per kind of cell below
(``lstm_gates``, ``gru_gates``, ``rnn_gates``). An LSTM layer without projection over a padded (not packed)
sequence runs as one graph node (``rnn_fused.LSTMLayer``): one matmul a step for the input and recurrent
products together, its gates in the ``lstm_cell_columns`` kernel; a GRU layer likewise (``GRULayer``).
"""
import math
import numbers
import warnings

from ... import primitives as ops
from ..._creation import zeros
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..utils.rnn import PackedSequence
from ._params import register_optional
from .rnn_fused import GRULayer, LSTMGates, LSTMLayer
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "rnn_gates", "lstm_gates", "gru_gates"]


# ---- the gate math of one step, shared by the layers and the cells ---------------------------------

def rnn_gates(gates, nonlinearity="tanh"):
    """The Elman update: ``tanh`` (or ``relu``) of ``x W_ih^T + b_ih + h W_hh^T + b_hh``."""
    return ops.tanh(gates) if nonlinearity == "tanh" else ops.relu(gates)


def lstm_gates(gates, c):
    """The LSTM update from the summed pre-activations ``gates`` (``[B, 4 * H]``, columns in the order
    i, f, g, o) and the cell state ``c`` (``[B, H]``): returns ``(o * tanh(c'), c')`` with ``c' = f * c + i * g``
    (one graph node, running the ``lstm_cell`` kernel)."""
    if not (isinstance(gates, Tensor) and isinstance(c, Tensor)):  # vmap's batched tensors: the ops' rules
        size = c.shape[-1]
        i, f, o = (_sigmoid(gates[..., k * size:(k + 1) * size]) for k in (0, 1, 3))
        c = f * c + i * ops.tanh(gates[..., 2 * size:3 * size])
        return o * ops.tanh(c), c
    return LSTMGates.apply(gates, c)


def gru_gates(x_gates, h_gates, h):
    """The GRU update from the input part ``x W_ih^T + b_ih`` and the hidden part ``h W_hh^T + b_hh``
    (both ``[B, 3 * H]``, columns r, z, n), ``b_hn`` staying inside the reset product as in torch:
    ``n = tanh(x_n + r * h_n)``, ``h' = (1 - z) * n + z * h``."""
    size = h.shape[-1]
    rz = _sigmoid(x_gates[:, :2 * size] + h_gates[:, :2 * size])
    n = ops.tanh(x_gates[:, 2 * size:] + rz[:, :size] * h_gates[:, 2 * size:])
    return n + rz[:, size:] * (h - n)


def _sigmoid(x):
    # sigmoid(x) = (1 + tanh(x / 2)) / 2: on NumPy, tanh is about 20x faster than the overflow-safe
    # exp-and-where that rlpipe.sigmoid runs, which dominated a whole LSTM forward
    return ops.tanh(x * 0.5) * 0.5 + 0.5


# ---- the layers ----------------------------------------------------------------------------------

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: the parameters of every layer and direction, the argument
    checks and the loop over layers, directions and time steps. ``mode`` is one of ``"LSTM"``, ``"GRU"``,
    ``"RNN_TANH"``, ``"RNN_RELU"``."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        _check_layer_arguments(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, proj_size)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(self._directions):
                names = self._register_layer(layer, direction, device, dtype)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    @property
    def _output_size(self):
        return self.proj_size if self.proj_size > 0 else self.hidden_size

    def _register_layer(self, layer, direction, device, dtype):
        """Registers one layer-direction's parameters in torch's order; returns their names."""
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        gate_size = _GATES[self.mode] * self.hidden_size
        in_size = self.input_size if layer == 0 else self._output_size * self._directions
        shapes = {"weight_ih": (gate_size, in_size), "weight_hh": (gate_size, self._output_size)}
        if self.bias:
            shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
        if self.proj_size > 0:
            shapes["weight_hr"] = (self.proj_size, self.hidden_size)
        for name, shape in shapes.items():
            register_optional(self, name + suffix, True, shape, device, dtype)
        return [name + suffix for name in shapes]

    @property
    def _flat_weights(self):
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters per layer and direction, each list in registration order."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op: torch packs the weights into one buffer for cuDNN; rlpipe has nothing to pack."""

    def reset_parameters(self):
        """Redraws every parameter uniformly in ``±1/sqrt(hidden_size)``, as torch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ---- argument checks (torch's messages) ----

    def check_input(self, input, batch_sizes):
        """Raises torch's errors for an input of the wrong dtype, number of dimensions or feature size."""
        weight_dtype = getattr(self, self._flat_weights_names[0]).dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). Convert "
                             f"input: input.to({weight_dtype}), or convert model: model.to({input.dtype})")
        expected_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_dim:
            raise RuntimeError(f"input must have {expected_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def _mini_batch(self, input, batch_sizes):
        if batch_sizes is not None:
            return int(batch_sizes[0])
        return input.size(0) if self.batch_first else input.size(1)

    def get_expected_hidden_size(self, input, batch_sizes):
        """``(layers * directions, batch, output size)``: the shape ``h_0`` must have for ``input``."""
        return self.num_layers * self._directions, self._mini_batch(input, batch_sizes), self._output_size

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        """Raises a RuntimeError (``msg``) when ``hx`` does not have the expected shape."""
        if hx.size() != expected_hidden_size:
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        """Checks the input and the initial state's shape(s), with torch's messages."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        """The state with its batch reordered by ``permutation`` (a packed batch's sorting), or as it is."""
        return hx if permutation is None else hx.index_select(1, permutation)

    # ---- the forward pass ----

    def _zero_state(self, input, batch, size):
        return zeros(self.num_layers * self._directions, batch, size, dtype=input.dtype, device=input.device)

    def _prepare(self, input, hx):
        """Splits a packed input or adds the batch dimension to an unbatched one; returns the time-major
        input, its batch sizes (None unless packed), the sorting permutations, the checked initial state
        (batched, and sorted as a packed input is) and whether the input was batched."""
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            if hx is None:
                hx = self._default_hidden(data, int(batch_sizes[0]))
            else:
                hx = self.permute_hidden(hx, sorted_indices)
            self.check_forward_args(data, hx, batch_sizes)
            return data, batch_sizes, sorted_indices, unsorted_indices, hx, True
        if input.dim() not in (2, 3):
            raise ValueError(f"{self._name_in_errors}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"{'instead' if self.mode == 'LSTM' else 'tensor instead'}")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        if hx is None:
            hx = self._default_hidden(input, self._mini_batch(input, None))
        else:
            hx = self._batched_hidden(hx, batched)
        self.check_forward_args(input, hx, None)
        if input.shape[1 if self.batch_first else 0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if self.batch_first:
            input = input.transpose(0, 1)
        return input, None, None, None, hx, batched

    @property
    def _name_in_errors(self):
        return "RNN" if self.mode.startswith("RNN") else self.mode

    def _default_hidden(self, input, batch):
        return self._zero_state(input, batch, self.hidden_size)

    def _batched_hidden(self, hx, batched):
        if batched and hx.dim() != 3:
            raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        if not batched:
            if hx.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
            hx = hx.unsqueeze(1)
        return hx

    def forward(self, input, hx=None):
        """``(output, h_n)`` (``(output, (h_n, c_n))`` for an LSTM) for a padded, unbatched or packed ``input``."""
        packed_input = isinstance(input, PackedSequence)
        x, batch_sizes, sorted_indices, unsorted_indices, hx, batched = self._prepare(input, hx)
        state = hx if isinstance(hx, tuple) else (hx,)
        sizes = None if batch_sizes is None else [int(n) for n in batch_sizes.tolist()]
        output, final = self._run_layers(x, state, sizes)
        final = final[0] if len(final) == 1 else final
        if packed_input:
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden(final, unsorted_indices)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(0 if self.batch_first else 1)
            final = tuple(s.squeeze(1) for s in final) if isinstance(final, tuple) else final.squeeze(1)
        return output, final

    def _run_layers(self, x, state, batch_sizes):
        """Every layer and direction in turn; returns the last layer's output and the final states stacked
        as ``state`` is (a tuple of ``[layers * directions, B, size]`` tensors)."""
        finals = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outputs = []
            for direction in range(self._directions):
                index = layer * self._directions + direction
                initial = tuple(s[index] for s in state)
                out, last = self._run_direction(x, initial, self._all_weights[index], batch_sizes, direction == 1)
                outputs.append(out)
                finals.append(last)
            x = outputs[0] if len(outputs) == 1 else ops.cat(outputs, -1)
        return x, tuple(_stack(parts) for parts in zip(*finals))

    def _run_direction(self, x, state, names, batch_sizes, reverse):
        """One layer in one direction over every time step: the input projection in one matmul, then one
        recurrent step per time step. Returns the outputs (time-major, or packed) and the final state."""
        table = self._parameters  # faster than attribute lookups; a replaced parameter is not in it
        params = [table[name] if name in table else getattr(self, name) for name in names]
        w_ih, w_hh = params[:2]
        b_ih, b_hh = params[2:4] if self.bias else (None, None)
        w_hr = params[-1] if self.proj_size > 0 else None
        fused = batch_sizes is None and w_hr is None and self.mode in ("LSTM", "GRU")
        if fused and _plain_same_dtype((x, *state, w_ih), params):
            if self.mode == "GRU":
                out, h = GRULayer.apply(x, *state, w_ih, w_hh, b_ih, b_hh, reverse=reverse)
                return out, (h,)
            out, h, c = LSTMLayer.apply(x, *state, w_ih, w_hh, b_ih, b_hh, reverse=reverse)
            return out, (h, c)
        x_gates = F.linear(x, w_ih, b_ih)
        if batch_sizes is not None:
            steps = x_gates.split(batch_sizes, 0)
        else:  # (one step: indexing is a tenth of an unbind's cost)
            steps = x_gates.unbind(0) if len(x_gates) > 1 else [x_gates[0]]
        order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
        h0, finished, outputs = state, [], [None] * len(steps)
        if reverse and batch_sizes is not None:  # a reversed packed batch starts with its longest sequences only
            state = tuple(s[:batch_sizes[-1]] for s in h0)
        for t in order:
            if batch_sizes is not None:
                state = _resize_state(state, batch_sizes[t], h0, finished)
            state = self._step(steps[t], state, w_hh, b_hh, w_hr)
            outputs[t] = state[0]
        if finished:
            state = tuple(ops.cat([s, *parts[::-1]], 0) for s, parts in zip(state, zip(*finished)))
        return (_stack(outputs) if batch_sizes is None else ops.cat(outputs, 0)), state

    def _step(self, x_gates, state, w_hh, b_hh, w_hr):
        """One time step of this layer's cell; ``state`` is ``(h,)`` or ``(h, c)``."""
        h = state[0]
        h_gates = F.linear(h, w_hh, b_hh)
        if self.mode == "LSTM":
            h, c = lstm_gates(x_gates + h_gates, state[1])
            return (h if w_hr is None else F.linear(h, w_hr)), c
        if self.mode == "GRU":
            return (gru_gates(x_gates, h_gates, h),)
        return (rnn_gates(x_gates + h_gates, "tanh" if self.mode == "RNN_TANH" else "relu"),)


def _plain_same_dtype(tensors, params):
    """Whether the fused layer can take ``tensors`` (of one dtype) and ``params``: plain tensors, not
    vmap's batched ones (those run the per-step ops and their batching rules)."""
    dtype = tensors[0].dtype
    return all(isinstance(t, Tensor) and t.dtype == dtype for t in tensors) and \
        all(isinstance(p, Tensor) for p in params)


def _stack(tensors):
    """``stack(tensors, 0)``; an unsqueeze for one tensor, which costs a tenth of a stack (a single step)."""
    return tensors[0].unsqueeze(0) if len(tensors) == 1 else ops.stack(tensors, 0)


def _resize_state(state, rows, h0, finished):
    """The state cut or grown to the ``rows`` sequences still running at this step of a packed batch:
    rows whose sequence ended are kept aside in ``finished``, rows whose (reversed) sequence starts
    now come from the initial state ``h0``."""
    current = state[0].shape[0]
    if rows < current:
        finished.append(tuple(s[rows:] for s in state))
        return tuple(s[:rows] for s in state)
    if rows > current:
        return tuple(ops.cat([s, s0[current:rows]], 0) for s, s0 in zip(state, h0))
    return state


def _check_layer_arguments(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, proj_size):
    if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                         "being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                      f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                      stacklevel=4)
    for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                              ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")
        if kind is int and value <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")
    if mode not in _GATES:
        raise ValueError("Unrecognized RNN mode: " + mode)


class RNN(RNNBase):
    """A multi-layer Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (``relu`` with
    ``nonlinearity="relu"``). Arguments: ``input_size, hidden_size, num_layers=1, nonlinearity="tanh",
    bias=True, batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None``.
    ``forward(input, hx=None)`` returns ``(output, h_n)``."""

    def __init__(self, *args, **kwargs):
        _refuse_projection(kwargs)
        if len(args) > 3:
            nonlinearity, args = args[3], args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity


def _refuse_projection(kwargs):
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")


class LSTM(RNNBase):
    """A multi-layer LSTM (gates i, f, g, o; ``c' = f * c + i * g``, ``h' = o * tanh(c')``), with an
    optional projection ``h' @ W_hr^T`` of size ``proj_size``. Arguments: ``input_size, hidden_size,
    num_layers=1, bias=True, batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
    dtype=None``. ``forward(input, hx=None)`` with ``hx = (h_0, c_0)`` returns ``(output, (h_n, c_n))``."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        """``(layers * directions, batch, hidden_size)``: the shape ``c_0`` must have for ``input``."""
        return self.num_layers * self._directions, self._mini_batch(input, batch_sizes), self.hidden_size

    def check_forward_args(self, input, hidden, batch_sizes):
        """Checks the input and the initial state's shape(s), with torch's messages."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        """The state with its batch reordered by ``permutation`` (a packed batch's sorting), or as it is."""
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)

    def _default_hidden(self, input, batch):
        return self._zero_state(input, batch, self._output_size), self._zero_state(input, batch, self.hidden_size)

    def _batched_hidden(self, hx, batched):
        dims = (hx[0].dim(), hx[1].dim())
        if batched and dims != (3, 3):
            raise RuntimeError(f"For batched 3-D input, hx and cx should also be 3-D but got ({dims[0]}-D, "
                               f"{dims[1]}-D) tensors")
        if not batched:
            if dims != (2, 2):
                raise RuntimeError(f"For unbatched 2-D input, hx and cx should also be 2-D but got ({dims[0]}-D, "
                                   f"{dims[1]}-D) tensors")
            hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        return hx


class GRU(RNNBase):
    """A multi-layer GRU (gates r, z, n; ``n = tanh(x_n + r * (h W_hn^T + b_hn))``,
    ``h' = (1 - z) * n + z * h``). Arguments: ``input_size, hidden_size, num_layers=1, bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None``.
    ``forward(input, hx=None)`` returns ``(output, h_n)``."""

    def __init__(self, *args, **kwargs):
        _refuse_projection(kwargs)
        super().__init__("GRU", *args, **kwargs)


# ---- the cells -----------------------------------------------------------------------------------

class RNNCellBase(Module):
    """What the one-step cells share: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` (the biases
    None with ``bias=False``), torch's initialisation and checks."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        register_optional(self, "weight_ih", True, (num_chunks * hidden_size, input_size), device, dtype)
        register_optional(self, "weight_hh", True, (num_chunks * hidden_size, hidden_size), device, dtype)
        register_optional(self, "bias_ih", bias, (num_chunks * hidden_size,), device, dtype)
        register_optional(self, "bias_hh", bias, (num_chunks * hidden_size,), device, dtype)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        """Redraws every parameter uniformly in ``±1/sqrt(hidden_size)``, as torch."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def _batched(self, input, hidden, name):
        """``input`` and the ``hidden`` tensors (None for zeros) checked and made 2-D; also says whether
        ``input`` was batched."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        for label, h in hidden:
            if h is not None and h.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {h.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        hidden = [zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device) if h is None
                  else h if batched else h.unsqueeze(0) for _, h in hidden]
        self._check_sizes(input, hidden)
        return input, hidden, batched

    def _check_sizes(self, input, hidden):
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for k, h in enumerate(hidden):
            if input.size(0) != h.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{k} batch size "
                                   f"{h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.size(1)}, expected "
                                   f"{self.hidden_size}")

    def _gate_parts(self, input, h):
        return F.linear(input, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh)


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ``relu``).
    ``forward(input, hx=None)`` returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        """``h'`` for ``input`` (``[B, input_size]`` or unbatched) and ``hx`` (zeros when None)."""
        input, (h,), batched = self._batched(input, [("hidden", hx)], "RNNCell")
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        x_gates, h_gates = self._gate_parts(input, h)
        h = rnn_gates(x_gates + h_gates, self.nonlinearity)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, hx=None)`` with ``hx = (h, c)`` returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        """``(h', c')`` for ``input`` and ``hx = (h, c)`` (zeros when None)."""
        pair = (None, None) if hx is None else hx
        input, (h, c), batched = self._batched(input, [("hx[0]", pair[0]), ("hx[1]", pair[1])], "LSTMCell")
        x_gates, h_gates = self._gate_parts(input, h)
        h, c = lstm_gates(x_gates + h_gates, c)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step; ``forward(input, hx=None)`` returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        """``h'`` for ``input`` and ``hx`` (zeros when None)."""
        input, (h,), batched = self._batched(input, [("hidden", hx)], "GRUCell")
        h = gru_gates(*self._gate_parts(input, h), h)
        return h if batched else h.squeeze(0)
