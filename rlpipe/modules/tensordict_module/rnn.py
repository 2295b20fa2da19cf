"""torchrl.modules.tensordict_module.rnn: ``LSTMModule`` and ``GRUModule`` (an ``nn.LSTM``/``nn.GRU`` that
reads its input and recurrent state from a tensordict and writes its output and next state back), and the
recurrent-mode switch that picks between one step per call (collection) and whole sequences (training).

The step-by-step and the whole-sequence runs give the same outputs: in sequence mode the time axis (the
tensordict's last batch dim) is cut where ``is_init`` is set, and each piece starts from the state stored at
its first step, as a primer-reset environment stores it (zeros). torchrl picks among several backends
(``pad``, ``scan``, ``triton``) for that; rlpipe computes the ``pad`` result for ``pad``, ``scan`` and
``auto`` alike."""
import math
import threading

import numpy as np

from ... import primitives as _ops
from ..._creation import as_tensor, zeros, zeros_like
from ..._dtypes import int64
from ..._utils import ScopedSetting
from ... import nn
from ...nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from ...tensordict.keys import unravel_key_list
from ...tensordict.nn.common import TensorDictModuleBase

__all__ = ["set_recurrent_mode", "recurrent_mode", "LSTMModule", "GRUModule", "LSTMCell", "GRUCell", "LSTM", "GRU"]

_MODES = {True: True, False: False, None: None, "recurrent": True, "sequential": False}


class _PerThread(threading.local):
    """A one-item slot (``slot[0]``) with a value per thread: a ``set_recurrent_mode`` block in one thread
    leaves the others' mode alone, as torchrl's."""

    def __init__(self):
        self.value = None

    def __getitem__(self, index):
        return self.value

    def __setitem__(self, index, value):
        self.value = value


_current = _PerThread()


def recurrent_mode():
    """True inside a ``set_recurrent_mode(True)`` block, False inside a ``set_recurrent_mode(False)`` one,
    None outside any block (each module then follows its ``default_recurrent_mode``), as in torchrl."""
    return _current[0]


class set_recurrent_mode(ScopedSetting):
    """Context manager (and decorator) that sets whether recurrent modules process whole sequences
    (``True`` or ``"recurrent"``) or one step (``False`` or ``"sequential"``); ``None`` restores each
    module's own default."""
    _store = _current

    def __init__(self, mode=True):
        if not isinstance(mode, (bool, str, type(None))) or mode not in _MODES:
            raise ValueError(f"set_recurrent_mode: mode must be True, False, 'recurrent' or 'sequential', got {mode!r}")
        self.mode = _MODES[mode]

    def _setting(self):
        return self.mode


class _RecurrentModule(TensorDictModuleBase):
    """What ``LSTMModule`` and ``GRUModule`` share: the keys, the mode, and running the layer on a tensordict
    step by step or over sequences. Subclasses give the layer's attribute name, its number of states and how
    to call it."""
    _layer_attr = ""
    _n_states = 1
    DEFAULT_IN_KEYS = []
    DEFAULT_OUT_KEYS = []

    def _setup(self, layer, in_key, in_keys, out_key, out_keys, recurrent_backend, default_recurrent_mode):
        name = type(self).__name__
        if recurrent_backend not in ("auto", "pad", "scan", "triton"):
            raise ValueError(f"{name}: recurrent_backend must be one of 'auto', 'pad', 'scan' or 'triton', "
                             f"got {recurrent_backend!r}")
        if recurrent_backend == "triton":
            raise RuntimeError(f"{name}: recurrent_backend='triton' needs Triton kernels, which rlpipe does not "
                               "have; use 'pad' (or 'scan'/'auto', which rlpipe computes the same way)")
        in_keys = self._keys(in_key, in_keys, self.DEFAULT_IN_KEYS, "in")
        out_keys = self._keys(out_key, out_keys, self.DEFAULT_OUT_KEYS, "out")
        width = 1 + self._n_states
        if len(in_keys) != width and not (len(in_keys) == width + 1 and in_keys[-1] == "is_init"):
            raise ValueError(f"{name}: in_keys must hold a value key and {self._n_states} state key(s) (optionally "
                             f"followed by 'is_init'), got {in_keys}")
        if len(out_keys) != width:
            raise ValueError(f"{name}: out_keys must hold a value key and {self._n_states} state key(s), "
                             f"got {out_keys}")
        setattr(self, self._layer_attr, layer)
        self.in_keys = in_keys if in_keys[-1] == "is_init" else in_keys + ["is_init"]
        self.out_keys = out_keys
        self._recurrent_mode = default_recurrent_mode
        self.recurrent_backend = recurrent_backend

    def _keys(self, key, keys, defaults, side):
        if (key is None) == (keys is None):
            raise ValueError(f"{type(self).__name__}: give either {side}_keys or {side}_key, not both or none; got "
                             f"{side}_keys={keys!r} and {side}_key={key!r}")
        if not isinstance(keys, (list, tuple)) and key is None:
            raise TypeError(f"{type(self).__name__}: incompatible function arguments: {side}_keys must be a list of "
                            f"keys, got {keys!r}")
        return unravel_key_list([key, *defaults] if key is not None else list(keys))

    @property
    def _layer(self):
        return getattr(self, self._layer_attr)

    @property
    def recurrent_mode(self):
        """The mode set by an enclosing ``set_recurrent_mode`` block, else ``default_recurrent_mode``."""
        mode = recurrent_mode()
        return bool(self._recurrent_mode) if mode is None else mode

    @recurrent_mode.setter
    def recurrent_mode(self, value):
        raise RuntimeError("recurrent_mode cannot be changed in-place. Please use the set_recurrent_mode context "
                           "manager.")

    def set_recurrent_mode(self, mode=True):
        """Removed in torchrl 0.8 (as there): raises, pointing to the context manager."""
        raise RuntimeError(f"The {self._layer_attr}.set_recurrent_mode() API has been removed in v0.8. To set the "
                           "recurrent mode, use the set_recurrent_mode context manager or the "
                           "`default_recurrent_mode` keyword argument in the constructor.")

    def make_python_based(self):
        """Swaps the layer for torchrl's Python class (``rlpipe.modules.LSTM``/``GRU``), same weights, as
        torchrl; rlpipe computes both classes the same way. Returns self."""
        return self._swap_layer(self._python_class)

    def make_cudnn_based(self):
        """Swaps the layer back to ``nn.LSTM``/``nn.GRU`` (torchrl's cuDNN-backed class), same weights.
        Returns self."""
        return self._swap_layer(self._torch_class)

    def _swap_layer(self, cls):
        layer = self._layer
        if type(layer) is cls:
            return self
        kwargs = dict(num_layers=layer.num_layers, bias=layer.bias, batch_first=True, dropout=layer.dropout,
                      bidirectional=layer.bidirectional)
        if layer.proj_size:
            kwargs["proj_size"] = layer.proj_size
        weight = next(layer.parameters())
        new = cls(layer.input_size, layer.hidden_size, device=weight.device, dtype=weight.dtype, **kwargs)
        new.load_state_dict(layer.state_dict())
        new.train(layer.training)
        setattr(self, self._layer_attr, new)
        return self

    def _state_shapes(self):
        """The (layers x directions, size) of each state."""
        raise NotImplementedError

    def make_tensordict_primer(self):
        """A ``TensorDictPrimer`` for the environment: it declares the recurrent states as observations of
        shape ``[layers * directions, size]`` (expanded to the env's batch), sets them to zeros at each reset
        and carries them from step to step, so a collector or ``rollout`` hands the policy's
        ``("next", state)`` back to it at the next step. The out keys must be ``("next", <in key>)``."""
        from rlpipe.envs.specs import Unbounded
        from rlpipe.envs.transforms import TensorDictPrimer

        state_keys = self.in_keys[1:1 + self._n_states]
        for in_key, out_key in zip(state_keys, self.out_keys[1:]):
            if _as_tuple(out_key) != ("next", *_as_tuple(in_key)):
                raise RuntimeError("make_tensordict_primer is supposed to work with in_keys/out_keys that have "
                                   "compatible names, ie. the out_keys should be named after ('next', <in_key>). "
                                   f"Got in_keys={self.in_keys} and out_keys={self.out_keys} instead.")
        specs = {_as_tuple(key): Unbounded(shape=shape) for key, shape in zip(state_keys, self._state_shapes())}
        return TensorDictPrimer(specs, expand_specs=True)

    def _call_layer(self, x, states):
        """``(output, [final states])`` of the layer on ``x`` from the initial ``states``."""
        raise NotImplementedError

    def forward(self, *args, **kwargs):
        """Reads the input, the states and ``is_init`` from a tensordict and writes the output and the next
        states into it; or, called with tensors (positionally or by key name, as tensordict's ``dispatch``),
        returns the output and the next states."""
        tensordict, _, _, dispatched = self._dispatch(args, kwargs)
        if not dispatched:
            return self._run_on(tensordict)
        value = tensordict.get(self.in_keys[0], None)
        if value is None:
            raise KeyError(f"{type(self).__name__}: no {self.in_keys[0]!r} among the tensors given (its in_keys[0])")
        tensordict.batch_size = value.shape[:-1]
        return self._dispatch_result(self._run_on(tensordict))

    def _run_on(self, tensordict):
        recurrent = self.recurrent_mode
        batch = tuple(tensordict.shape)
        rows_steps = self._rows_and_steps(batch, recurrent)
        value = self._read_value(tensordict, rows_steps)
        is_init = self._read_is_init(tensordict, rows_steps)
        states = self._read_states(tensordict, rows_steps, value)
        if not recurrent:
            # a step that starts an episode must not inherit the previous episode's state
            mask = is_init.reshape(*is_init.shape, 1, 1)
            states = [_ops.where(mask, zeros_like(s), s) for s in states]
        output, next_states = self._run(value, states, is_init)
        for key, out in zip(self.out_keys, [output, *next_states]):
            tensordict.set(key, out.reshape(*batch, *out.shape[2:]))
        return tensordict

    def _rows_and_steps(self, batch, recurrent):
        """The entries are read as [rows, steps, ...]: one step per row step by step; in recurrent mode the
        last batch dim is time and the others are rows."""
        if not recurrent:
            return math.prod(batch), 1
        if not batch:
            raise ValueError(f"{type(self).__name__} in recurrent mode needs a tensordict with at least one batch "
                             "dim (time), got batch_size []")
        return math.prod(batch[:-1]), batch[-1]

    def _read_value(self, tensordict, rows_steps):
        key, size = self.in_keys[0], self._layer.input_size
        value = tensordict.get(key, None)
        if value is None:
            raise KeyError(f"{type(self).__name__}: the input tensordict has no {key!r} entry (its in_keys[0])")
        if value.dim() != tensordict.ndim + 1 or value.shape[-1] != size:
            raise ValueError(f"{type(self).__name__}: {key!r} must have shape [*batch, {size}] (here "
                             f"{[*tensordict.shape, size]}), got {list(value.shape)}")
        return value.reshape(*rows_steps, size)

    def _read_is_init(self, tensordict, rows_steps):
        is_init = tensordict.get("is_init", None)
        if is_init is None:
            raise KeyError(f"{type(self).__name__}: the input tensordict has no 'is_init' entry (add an "
                           "InitTracker transform to the environment, or write it)")
        if is_init.numel() != math.prod(rows_steps):
            raise ValueError(f"{type(self).__name__}: 'is_init' must have shape [*batch, 1] (here "
                             f"{[*tensordict.shape, 1]}), got {list(is_init.shape)}")
        return is_init.reshape(rows_steps)

    def _read_states(self, tensordict, rows_steps, value):
        """The state entries as [rows, steps, L, H], zeros where none is given; all or none must be present."""
        keys = self.in_keys[1:1 + self._n_states]
        states = [tensordict.get(key, None) for key in keys]
        shapes = self._state_shapes()
        if all(s is None for s in states):
            return [zeros(*rows_steps, *shape, dtype=value.dtype, device=value.device) for shape in shapes]
        batch = tuple(tensordict.shape)
        for key, state, shape in zip(keys, states, shapes):
            if state is None:
                raise RuntimeError(f"{type(self).__name__}: the state {key!r} is missing while {keys} are not all "
                                   "missing (give all the states or none)")
            if tuple(state.shape) != (*batch, *shape):
                raise ValueError(f"{type(self).__name__}: the state {key!r} must have shape [*batch, {shape[0]}, "
                                 f"{shape[1]}] (here {[*batch, *shape]}), got {list(state.shape)}")
        return [state.reshape(*rows_steps, *shape) for state, shape in zip(states, shapes)]

    def _run(self, value, states, is_init):
        """Output [B, T, H] and next states [B, T, L, H] (zero but at each piece's last step) on pieces of the
        rows cut at ``is_init``, each started from the state stored at its first step."""
        steps = value.shape[1]
        if steps == 1 or not is_init[:, 1:].any():
            output, finals = self._call_layer(value, [s[:, 0].transpose(0, 1) for s in states])
            return output, [_at_last_step(h.transpose(0, 1), steps) for h in finals]
        return self._run_pieces(value, states, is_init)

    def _run_pieces(self, value, states, is_init):
        pieces = _Pieces(is_init)
        padded = pieces.pad(value)
        first = [pieces.firsts(s) for s in states]
        if pieces.equal_lengths:
            output, finals = self._call_layer(padded, first)
        else:
            packed = pack_padded_sequence(padded, pieces.lengths, batch_first=True, enforce_sorted=False)
            output, finals = self._call_layer(packed, first)
            output = pad_packed_sequence(output, batch_first=True, total_length=pieces.longest)[0]
        return pieces.unpad(output), [pieces.place_last(h.transpose(0, 1)) for h in finals]


def _as_tuple(key):
    return key if isinstance(key, tuple) else (key,)


def _at_last_step(state, steps):
    """[B, L, H] -> [B, steps, L, H], zeros before the last step."""
    state = state.unsqueeze(1)
    if steps == 1:
        return state
    return _ops.cat([zeros(state.shape[0], steps - 1, *state.shape[2:], dtype=state.dtype,
                           device=state.device), state], 1)


class _Pieces:
    """The rows of a [B, T] batch cut into pieces where ``is_init`` is set (a piece also ends with its row),
    and the gathers between [B, T, ...] and the padded [pieces, longest, ...]."""

    def __init__(self, is_init):
        starts = np.array(is_init.detach().cpu().numpy(), dtype=bool)
        starts[:, 0] = True
        self.batch, self.steps = starts.shape
        starts = starts.reshape(-1)
        size = starts.size
        self.start_at = np.flatnonzero(starts)
        self.lengths = np.diff(np.append(self.start_at, size)).tolist()
        self.longest = max(self.lengths)
        self.equal_lengths = min(self.lengths) == self.longest
        self.count = len(self.lengths)
        piece = np.cumsum(starts) - 1
        position = np.arange(size) - self.start_at[piece]
        gather = np.full((self.count, self.longest), size)
        gather[piece, position] = np.arange(size)
        self._pad_index = gather
        self._unpad_index = piece * self.longest + position
        place = np.full(size, self.count)
        place[self.start_at + np.array(self.lengths) - 1] = np.arange(self.count)
        self._last_index = place

    def pad(self, x):
        """[B, T, *F] -> [pieces, longest, *F], zeros past each piece's end."""
        flat = x.reshape(self.batch * self.steps, *x.shape[2:])
        return _with_zero_row(flat)[_index(self._pad_index, x)]

    def unpad(self, x):
        """[pieces, longest, *F] -> [B, T, *F]."""
        flat = x.reshape(self.count * self.longest, *x.shape[2:])
        return flat[_index(self._unpad_index, x)].reshape(self.batch, self.steps, *x.shape[2:])

    def firsts(self, state):
        """The state stored at each piece's first step, [B, T, L, H] -> [L, pieces, H]."""
        flat = state.reshape(self.batch * self.steps, *state.shape[2:])
        return flat[_index(self.start_at, state)].transpose(0, 1)

    def place_last(self, state):
        """[pieces, *F] -> [B, T, *F]: each piece's value at its last step, zeros elsewhere."""
        placed = _with_zero_row(state)[_index(self._last_index, state)]
        return placed.reshape(self.batch, self.steps, *state.shape[1:])


def _with_zero_row(x):
    return _ops.cat([x, zeros(1, *x.shape[1:], dtype=x.dtype, device=x.device)], 0)


def _index(array, like):
    return as_tensor(np.asarray(array, dtype=np.int64), dtype=int64, device=like.device)


def _given_or_new(name, layer_name, given, input_size, hidden_size, batch_first, build):
    """The layer given (checked), or ``build()`` when none is."""
    if given is None:
        if not batch_first:
            raise ValueError(f"{name}: batch_first must be True, got {batch_first!r}")
        if not hidden_size:
            raise ValueError(f"{name}: hidden_size must be passed, got {hidden_size!r}")
        return build()
    if not given.batch_first:
        raise ValueError(f"{name}: the {layer_name} given must have batch_first=True, got batch_first=False")
    if input_size is not None or hidden_size is not None:
        raise ValueError(f"{name}: give either {layer_name}= or input_size/hidden_size, not both (got "
                         f"input_size={input_size!r}, hidden_size={hidden_size!r})")
    return given


class LSTMModule(_RecurrentModule):
    """An ``nn.LSTM`` (``batch_first``) run on tensordicts. In keys: the input, then the two states
    (``in_key="obs"`` means ``["obs", "recurrent_state_h", "recurrent_state_c"]``) and ``"is_init"``
    (appended when absent); out keys: the output, then the next states (``out_key="y"`` means
    ``["y", ("next", "recurrent_state_h"), ("next", "recurrent_state_c")]``), which the collector's
    ``step_mdp`` moves to the root for the next step. States have shape ``[*batch, num_layers, hidden]``;
    missing states are zeros. Step by step (the default, or ``set_recurrent_mode(False)``) the states are
    zeroed where ``is_init`` is set; in recurrent mode the input is ``[*batch, T, features]`` and the time
    axis is cut at ``is_init``. ``python_based`` is accepted (rlpipe has one implementation)."""
    _layer_attr = "lstm"
    _n_states = 2
    _torch_class = nn.LSTM
    DEFAULT_IN_KEYS = ["recurrent_state_h", "recurrent_state_c"]
    DEFAULT_OUT_KEYS = [("next", "recurrent_state_h"), ("next", "recurrent_state_c")]

    def __init__(self, input_size=None, hidden_size=None, num_layers=1, bias=True, batch_first=True, dropout=0,
                 proj_size=0, bidirectional=False, python_based=False, recurrent_backend="pad", *, in_key=None,
                 in_keys=None, out_key=None, out_keys=None, device=None, lstm=None, default_recurrent_mode=None):
        super().__init__()
        lstm = _given_or_new(type(self).__name__, "lstm", lstm, input_size, hidden_size, batch_first, lambda: nn.LSTM(
            input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=bias, dropout=dropout,
            proj_size=proj_size, device=device, batch_first=True, bidirectional=bidirectional))
        self._setup(lstm, in_key, in_keys, out_key, out_keys, recurrent_backend, default_recurrent_mode)

    def _state_shapes(self):
        lstm = self.lstm
        layers = lstm.num_layers * (2 if lstm.bidirectional else 1)
        return [(layers, lstm.proj_size or lstm.hidden_size), (layers, lstm.hidden_size)]

    def _call_layer(self, x, states):
        output, (h, c) = self.lstm(x, tuple(states))
        return output, [h, c]


class GRUModule(_RecurrentModule):
    """An ``nn.GRU`` (``batch_first``) run on tensordicts, as ``LSTMModule`` with one state:
    ``in_key="obs"`` means ``["obs", "recurrent_state"]`` (and ``"is_init"``), ``out_key="y"`` means
    ``["y", ("next", "recurrent_state")]``."""
    _layer_attr = "gru"
    _n_states = 1
    _torch_class = nn.GRU
    DEFAULT_IN_KEYS = ["recurrent_state"]
    DEFAULT_OUT_KEYS = [("next", "recurrent_state")]

    def __init__(self, input_size=None, hidden_size=None, num_layers=1, bias=True, batch_first=True, dropout=0,
                 bidirectional=False, python_based=False, recurrent_backend="pad", *, in_key=None, in_keys=None,
                 out_key=None, out_keys=None, device=None, gru=None, default_recurrent_mode=None):
        super().__init__()
        gru = _given_or_new(type(self).__name__, "gru", gru, input_size, hidden_size, batch_first, lambda: nn.GRU(
            input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=bias, dropout=dropout,
            device=device, batch_first=True, bidirectional=bidirectional))
        self._setup(gru, in_key, in_keys, out_key, out_keys, recurrent_backend, default_recurrent_mode)

    def _state_shapes(self):
        gru = self.gru
        return [(gru.num_layers * (2 if gru.bidirectional else 1), gru.hidden_size)]

    def _call_layer(self, x, states):
        output, h = self.gru(x, states[0])
        return output, [h]


# ---- torchrl's Python layers ------------------------------------------------------------------------

class LSTMCell(nn.LSTMCell):
    """torchrl's ``LSTMCell`` (its Python implementation of ``nn.LSTMCell``): rlpipe's cell is Python already,
    so this is ``nn.LSTMCell`` under torchrl's name."""


class GRUCell(nn.GRUCell):
    """torchrl's ``GRUCell``: ``nn.GRUCell`` under torchrl's name (see ``LSTMCell``)."""


class LSTM(nn.LSTM):
    """torchrl's ``LSTM`` : ``nn.LSTM`` with torchrl's signature,
    ``batch_first`` before ``bias`` and True by default. ``use_scan`` (torchrl's scan-based forward, same
    results) is accepted; rlpipe runs its one implementation."""

    def __init__(self, input_size, hidden_size, num_layers=1, batch_first=True, bias=True, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None, use_scan=False):
        super().__init__(input_size, hidden_size, num_layers=num_layers, bias=bias, batch_first=batch_first,
                         dropout=dropout, bidirectional=bidirectional, proj_size=proj_size, device=device,
                         dtype=dtype)


class GRU(nn.GRU):
    """torchrl's ``GRU`` : ``nn.GRU`` with ``batch_first=True`` by default;
    ``use_scan`` accepted as for ``LSTM``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=True, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, use_scan=False):
        super().__init__(input_size, hidden_size, num_layers=num_layers, bias=bias, batch_first=batch_first,
                         dropout=dropout, bidirectional=bidirectional, device=device, dtype=dtype)


LSTMModule._python_class = LSTM
GRUModule._python_class = GRU
