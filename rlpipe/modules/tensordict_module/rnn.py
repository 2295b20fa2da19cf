"""torchrl.modules.tensordict_module.rnn: the recurrent-mode switch. The recurrent modules themselves
(``LSTMModule``, ``GRUModule``) are not implemented in rlpipe (no RNN layers); their names exist and
raise NotImplementedError when built."""
from ..._utils import ScopedSetting, unavailable

__all__ = ["set_recurrent_mode", "recurrent_mode", "LSTMModule", "GRUModule"]

_MODES = {True: "recurrent", False: "sequential", "recurrent": "recurrent", "sequential": "sequential"}
_current = ["sequential"]


def recurrent_mode():
    """True inside a ``set_recurrent_mode(True)`` block (torchrl's default outside any block: False)."""
    return _current[0] == "recurrent"


class set_recurrent_mode(ScopedSetting):
    """Context manager (and decorator) that sets whether recurrent modules process whole sequences
    (``True`` or ``"recurrent"``) or one step (``False`` or ``"sequential"``)."""
    _store = _current

    def __init__(self, mode=True):
        if mode not in _MODES or mode is None:
            raise ValueError(f"set_recurrent_mode: mode must be True, False, 'recurrent' or 'sequential', got {mode!r}")
        self.mode = _MODES[mode]

    def _setting(self):
        return self.mode


LSTMModule = unavailable("LSTMModule", "rlpipe has no recurrent layers (nn.LSTM)")
GRUModule = unavailable("GRUModule", "rlpipe has no recurrent layers (nn.GRU)")
