"""torchrl.modules.tensordict_module.rnn: the recurrent-mode switch. The recurrent modules themselves
(``LSTMModule``, ``GRUModule``) are not implemented in rlpipe (no RNN layers); their names exist and
raise NotImplementedError when built."""
import functools

from ..._utils import unavailable

__all__ = ["set_recurrent_mode", "recurrent_mode", "LSTMModule", "GRUModule"]

_MODES = {True: "recurrent", False: "sequential", "recurrent": "recurrent", "sequential": "sequential"}
_current = ["sequential"]


def recurrent_mode():
    """True inside a ``set_recurrent_mode(True)`` block (torchrl's default outside any block: False)."""
    return _current[0] == "recurrent"


class set_recurrent_mode:
    """Context manager (and decorator) that sets whether recurrent modules process whole sequences
    (``True`` or ``"recurrent"``) or one step (``False`` or ``"sequential"``)."""

    def __init__(self, mode=True):
        if mode not in _MODES or mode is None:
            raise ValueError(f"set_recurrent_mode: mode must be True, False, 'recurrent' or 'sequential', got {mode!r}")
        self.mode = _MODES[mode]

    def clone(self):
        return type(self)(self.mode)

    def __enter__(self):
        self.prev = _current[0]
        _current[0] = self.mode
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _current[0] = self.prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_in_mode(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return run_in_mode


LSTMModule = unavailable("LSTMModule", "rlpipe has no recurrent layers (nn.LSTM)")
GRUModule = unavailable("GRUModule", "rlpipe has no recurrent layers (nn.GRU)")
