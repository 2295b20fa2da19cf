"""``Timer``: times a Python statement in blocks of runs, as torch.utils.benchmark.Timer."""
import enum
import sys
import textwrap
import timeit

from ... import cuda
from .common import Measurement, TaskSpec

__all__ = ["Timer", "timer", "Language"]


def timer():
    """The default clock: ``timeit.default_timer``, after waiting for the GPU's queued work when one is used."""
    if cuda.is_available():
        cuda.synchronize()
    return timeit.default_timer()


class Language(enum.Enum):
    """The language of a timed statement; only PYTHON is supported (CPP exists for torch compatibility)."""
    PYTHON = 0
    CPP = 1


def _clean(code):
    code = textwrap.dedent(code)
    return (code[1:] if code and code[0] == "\n" else code).rstrip()


class Timer:
    """Times ``stmt`` after running ``setup`` once, with ``globals`` (which gets ``rlpipe`` unless it names
    its own); ``label``, ``sub_label``, ``description`` and ``env`` name the result. ``num_threads``
    is recorded in the report: rlpipe does not change the BLAS thread count while timing (set
    ``OPENBLAS_NUM_THREADS`` before NumPy loads for that). Only Python statements are supported.
    """

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None, label=None,
                 sub_label=None, description=None, env=None, num_threads=1, language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`: rlpipe.utils.benchmark times Python statements only.")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be "
                             f"moved to `setup`.")
        self._globals = dict(globals or {})
        self._globals.setdefault("rlpipe", sys.modules["rlpipe"])  # as torch's Timer provides ``torch``
        stmt, setup = _clean(stmt), _clean(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup, label=label,
                                   sub_label=sub_label, description=description, env=env, num_threads=num_threads)

    def _timeit(self, number):
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """One block of ``number`` runs, after a warm-up of a hundredth as many."""
        self._timeit(max(number // 100, 2))
        return Measurement(number_per_run=number, raw_times=[self._timeit(number)], task_spec=self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        """Not implemented, as in torch: use ``blocked_autorange``."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        """Not implemented, as in torch: use ``blocked_autorange``."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _estimate_block_size(self, min_run_time):
        """Runs per block: a power of ten large enough for the timer's own overhead not to count."""
        overhead = sorted(self._timeit(0) for _ in range(5))[2]
        number = 1
        while True:
            taken = self._timeit(number)
            if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000) or taken > min_run_time:
                return number
            if number * 10 > 2147483647:
                return number
            number *= 10

    def _measure(self, number, can_stop, min_run_time, max_run_time=None, callback=None):
        """Blocks of ``number`` runs until ``min_run_time`` seconds are spent and ``can_stop(times)``,
        or ``max_run_time`` seconds are."""
        total, times = 0.0, []
        while True:
            spent = self._timeit(number)
            times.append(spent)
            total += spent
            if callback:
                callback(number, spent)
            if (total >= min_run_time and can_stop(times)) or (max_run_time and total > max_run_time):
                return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of runs until ``min_run_time`` seconds are spent; the block size is chosen first."""
        number = self._estimate_block_size(min_run_time)
        return self._measure(number, lambda times: True, min_run_time, callback=callback)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, callback=None):
        """Blocks of runs until their interquartile range is under ``threshold`` of their median (after at
        least four blocks and ``min_run_time`` seconds), or ``max_run_time`` seconds are spent."""
        number = self._estimate_block_size(min_run_time=0.05)

        def confident(times):
            return len(times) > 3 and Measurement(number, times, self._task_spec).meets_confidence(threshold)

        return self._measure(number, confident, min_run_time, max_run_time, callback)
