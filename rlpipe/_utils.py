"""Small helpers at torchrl's ``torchrl._utils`` path."""
import copy
import functools
import logging
import os
import sys
import time

__all__ = ["_ends_with", "_replace_last", "RL_WARNINGS", "rl_warnings", "logger", "timeit", "get_available_device",
           "compile_with_warmup"]


def _ends_with(key, match):
    """Whether the nested key ``key`` (a string or a tuple of strings) ends with ``match``."""
    return key == match if isinstance(key, str) else key[-1] == match


def _replace_last(key, new_ending):
    """``key`` with its last element replaced by ``new_ending``."""
    return new_ending if isinstance(key, str) else key[:-1] + (new_ending,)


_RL_WARNINGS_OFF = ("n", "no", "f", "false", "off", "0")


def rl_warnings():
    """Whether torchrl-style warnings are on: the ``RL_WARNINGS`` environment variable, read now
    (default on; ``0``, ``false``, ``no``, ``off``, ... turn them off)."""
    return os.environ.get("RL_WARNINGS", "1").strip().lower() not in _RL_WARNINGS_OFF


RL_WARNINGS = rl_warnings()  # as torchrl: the value at import


class ScopedSetting:
    """A context manager that also decorates functions: inside a ``with`` block (or a call of the
    decorated function) the one-item list ``_store`` holds ``_setting()``; the previous value comes
    back after. Subclasses give ``_store`` and parse their argument in ``__init__``."""
    _store = None

    def _setting(self):
        raise NotImplementedError

    def clone(self):
        """A shallow copy, so nested or recursive uses of one decorator each keep their own previous value."""
        return copy.copy(self)

    def __enter__(self):
        self._prev = self._store[0]
        self._store[0] = self._setting()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._store[0] = self._prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_with_setting(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return run_with_setting


def unavailable(name, why, base=object):
    """A class named ``name`` that exists (so code importing it loads) but raises
    NotImplementedError, saying ``why``, when built."""
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{name} is not available in rlpipe: {why}")
    return type(name, (base,), {"__init__": __init__, "__doc__": f"Not available in rlpipe: {why}"})

# torchrl._utils.logger: the library's logger, INFO and above printed to stdout
logger = logging.getLogger("rlpipe")
if not logger.handlers:
    _handler = logging.StreamHandler(stream=sys.stdout)
    _handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


class timeit:  # noqa: N801 - torchrl's name
    """torchrl's profiling timer: ``with timeit("name"):`` or ``@timeit("name")`` adds the block's
    wall time to a registry shared by all timers, which ``timeit.print()`` logs (mean per call and
    total per name) and ``timeit.todict()`` returns; ``erase()``/``reset()`` zero it."""

    _REG = {}  # name -> [mean seconds per call, total seconds, calls]
    _MARKS = {}
    _printevery_count = 0

    def __init__(self, name):
        self.name = name
        self.t0 = None

    def __call__(self, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with timeit(self.name):
                return fn(*args, **kwargs)
        return timed

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc_value, traceback):
        self._record(self.name, self.elapsed())

    def start(self):
        """Starts the clock (outside a ``with`` block); returns the timer."""
        self.t0 = time.perf_counter()
        return self

    def elapsed(self):
        """Seconds since the timer started; RuntimeError if it never did."""
        if self.t0 is None:
            raise RuntimeError(f"timeit({self.name!r}).elapsed(): the timer was never started (use it in a with "
                               "block or call start() first)")
        return time.perf_counter() - self.t0

    @classmethod
    def _record(cls, name, seconds):
        entry = cls._REG.setdefault(name, [0.0, 0.0, 0])
        entry[2] += 1
        entry[1] += seconds
        entry[0] = entry[1] / entry[2]

    @classmethod
    def mark_start(cls, name):
        """Starts the named event (ended by ``mark_end``)."""
        cls._MARKS[name] = time.perf_counter()

    @classmethod
    def mark_end(cls, name):
        """Records the time since ``mark_start(name)``; KeyError naming it if it was never started."""
        if name not in cls._MARKS:
            raise KeyError(f"timeit.mark_end({name!r}): no mark_start({name!r}) before it; started: "
                           f"{sorted(cls._MARKS)}")
        cls._record(name, time.perf_counter() - cls._MARKS.pop(name))

    @classmethod
    def print(cls, prefix=None):
        """Logs one line per timer name (sorted), as torchrl words it, and returns them joined."""
        lines = []
        for name in sorted(cls._REG):
            mean, total, _ = cls._REG[name]
            line = f"{name} took {mean * 1000:4.4f} msec (total = {total: 4.4f} sec since last reset)."
            lines.append(f"{prefix} -- {line}" if prefix else line)
            logger.info(lines[-1])
        return "\n".join(lines)

    @classmethod
    def printevery(cls, num_prints, total_count, *, prefix=None, erase=False):
        """Prints about ``num_prints`` times over ``total_count`` calls of this method."""
        if cls._printevery_count % max(1, total_count // num_prints) == 0:
            cls.print(prefix=prefix)
            if erase:
                cls.erase()
        cls._printevery_count += 1

    @classmethod
    def todict(cls, percall=True, prefix=None):
        """``{name: seconds}``: the mean per call, or the total with ``percall=False``; keys ``prefix/name``."""
        column = 0 if percall else 1
        return {(f"{prefix}/{name}" if prefix else name): entry[column] for name, entry in cls._REG.items()}

    @classmethod
    def erase(cls):
        """Zeroes every timer (the names stay)."""
        for name in cls._REG:
            cls._REG[name] = [0.0, 0.0, 0]

    @classmethod
    def reset(cls):
        """The same as ``erase``."""
        cls.erase()


def get_available_device(return_str=False):
    """The first accelerator present (``cuda:0``), else ``cpu``: a device, or its name with ``return_str=True``."""
    from rlpipe._device import device
    from rlpipe.cuda import is_available
    name = "cuda:0" if is_available() else "cpu"
    return name if return_str else device(name)


def compile_with_warmup(model=None, *, warmup=1, **compile_options):
    """torchrl's ``compile_with_warmup``: ``model`` wrapped so it would be compiled after ``warmup`` eager
    calls (without ``model``, a function that wraps one). rlpipe compiles nothing (``rlpipe.compile``
    runs eagerly), so every call runs ``model`` itself; the options are accepted and unused."""
    if model is None:
        return functools.partial(compile_with_warmup, warmup=warmup, **compile_options)
    if not callable(model):
        raise TypeError(f"compile_with_warmup: model must be callable, got {type(model).__name__}")

    @functools.wraps(model)
    def run_model(*args, **kwargs):
        return model(*args, **kwargs)
    return run_model
