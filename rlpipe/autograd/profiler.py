"""``torch.autograd.profiler``'s ``profile`` and ``record_function``: time spent per op (every
``Function.apply``, named ``rlpipe::<Function>``) and per labelled block, summed into a table."""
import collections
import functools
import time

from .function import Function

__all__ = ["profile", "record_function", "EventList", "FunctionEventAvg"]

_active = []  # the running profile (at most one)


class FunctionEventAvg:
    """The totals of one op or label: ``count``, ``self_cpu_time_total`` and ``cpu_time_total`` (µs)."""

    def __init__(self, key):
        self.key, self.count, self.self_cpu_time_total, self.cpu_time_total = key, 0, 0.0, 0.0

    @property
    def cpu_time(self):
        """The mean total time of one call (µs)."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time_total:.3f}us count={self.count}>")


_SORT_KEYS = {"self_cpu_time_total", "cpu_time_total", "cpu_time", "count"}


def _us(t):
    return f"{t / 1000:.3f}ms" if t >= 1000 else f"{t:.3f}us"


class EventList(list):
    """The averaged events of a profile, as a list; ``table()`` formats them like torch's profiler."""

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, **unused):
        """The events (sorted by ``sort_by``, descending) as a text table with a self-time total line."""
        if sort_by is not None and sort_by not in _SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {sorted(_SORT_KEYS)} (or None), got {sort_by!r}")
        rows = sorted(self, key=lambda e: getattr(e, sort_by), reverse=True) if sort_by else list(self)
        rows = rows[:row_limit] if row_limit is not None and row_limit >= 0 else rows
        total = sum(e.self_cpu_time_total for e in self) or 1.0
        width = min(max([len(e.key) for e in rows] + [4]), max_name_column_width)
        heads = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        line = "-" * width + "  " + "  ".join("-" * 12 for _ in heads)
        out = [line, f"{'Name':>{width}}  " + "  ".join(f"{h:>12}" for h in heads), line]
        for e in rows:
            cells = [f"{100 * e.self_cpu_time_total / total:.2f}%", _us(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / total:.2f}%", _us(e.cpu_time_total), _us(e.cpu_time), str(e.count)]
            out.append(f"{e.key[:width]:>{width}}  " + "  ".join(f"{c:>12}" for c in cells))
        out += [line, f"Self CPU time total: {_us(sum(e.self_cpu_time_total for e in self))}", ""]
        return "\n".join(out)


class profile:
    """Context manager: while open, records the time of every op and ``record_function`` block (this
    thread's, CPU wall time). ``key_averages()`` sums them per name. CUDA timing is not measured."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 **unused):
        self.enabled = enabled
        self._totals = collections.OrderedDict()
        self._stack = []  # [name, start, time spent in children] of the blocks now open

    def __enter__(self):
        if not self.enabled:
            return self
        if _active:
            raise RuntimeError("Profiler is already enabled on this thread")
        _active.append(self)
        Function.apply = _timed_apply
        return self

    def __exit__(self, *exc):
        if self.enabled and _active and _active[-1] is self:
            _active.pop()
            Function.apply = _plain_apply
        return False

    def _open(self, name):
        self._stack.append([name, time.perf_counter(), 0.0])

    def _close(self):
        name, start, children = self._stack.pop()
        spent = (time.perf_counter() - start) * 1e6
        if self._stack:
            self._stack[-1][2] += spent
        event = self._totals.get(name) or self._totals.setdefault(name, FunctionEventAvg(name))
        event.count += 1
        event.cpu_time_total += spent
        event.self_cpu_time_total += spent - children

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        """One ``FunctionEventAvg`` per op or label name, in first-seen order."""
        return EventList(self._totals.values())

    @property
    def self_cpu_time_total(self):
        """The self time of everything recorded (µs)."""
        return sum(e.self_cpu_time_total for e in self._totals.values())

    def table(self, *args, **kwargs):
        """``key_averages().table(...)``."""
        return self.key_averages().table(*args, **kwargs)


_plain_apply = Function.__dict__["apply"]


@classmethod
def _timed_apply(cls, *args, **kwargs):
    prof = _active[-1]
    prof._open(f"rlpipe::{cls.__name__}")
    try:
        return _plain_apply.__func__(cls, *args, **kwargs)
    finally:
        prof._close()


class record_function:
    """Labels a block (``with record_function("name"):``) or a function (as a decorator) in the running
    profile; does nothing when none runs."""

    def __init__(self, name, args=None):
        self.name = name
        self._prof = None

    def __enter__(self):
        self._prof = _active[-1] if _active else None
        if self._prof is not None:
            self._prof._open(self.name)
        return self

    def __exit__(self, *exc):
        if self._prof is not None:
            self._prof._close()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper
