# ruff: noqa: F401 - this module re-exports the public API
"""``rlpipe.utils.benchmark``: torch.utils.benchmark's ``Timer`` and ``Measurement`` (timing a Python
statement, and reporting the figures as torch prints them)."""
from .common import Measurement, TaskSpec, select_unit
from .timer import Language, Timer, timer

__all__ = ["Timer", "timer", "Language", "Measurement", "TaskSpec", "select_unit"]
