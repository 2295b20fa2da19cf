"""``TaskSpec`` (what was timed) and ``Measurement`` (the times, their statistics and torch's report)."""
import dataclasses
import math
import textwrap

__all__ = ["TaskSpec", "Measurement", "select_unit"]

_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(frozen=True, repr=False)
class TaskSpec:
    """What a Timer times: the statement, its setup and the labels that name it in reports."""
    stmt: str
    setup: str
    global_setup: str = ""
    label: str = None
    sub_label: str = None
    description: str = None
    env: str = None
    num_threads: int = 1

    @property
    def title(self):
        """The label (or the one-line statement), with the sub-label; a multi-line statement indented."""
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self):
        """The setup code as a report line (indented block when multi-line); empty for no setup."""
        if self.setup == "pass" or not self.setup:
            return ""
        return f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup else f"setup: {self.setup}"

    def summarize(self):
        """The title, description and setup lines of a Measurement's report."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


def _quantile(ordered, q):
    """The q-quantile of sorted values, interpolating linearly (as torch.quantile and NumPy do)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclasses.dataclass(repr=False)
class Measurement:
    """The times of ``number_per_run`` runs of a statement, one per block in ``raw_times`` (seconds);
    ``times`` are per run. ``mean``, ``median`` and ``iqr`` summarize them, and the repr prints them as
    torch does. The TaskSpec's fields (``stmt``, ``label``, ``num_threads``...) read through."""
    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict = None

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self):
        """Seconds per run of the statement, one per measured block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def _sorted_times(self):
        return sorted(self.times)

    @property
    def median(self):
        """The median of ``times``."""
        return _quantile(self._sorted_times, 0.5)

    @property
    def mean(self):
        """The mean of ``times``."""
        return sum(self.times) / len(self.raw_times)

    @property
    def iqr(self):
        """The interquartile range of ``times`` (75th minus 25th percentile)."""
        ordered = self._sorted_times
        return _quantile(ordered, 0.75) - _quantile(ordered, 0.25)

    @property
    def title(self):
        """The task's title (label or statement, with the sub-label)."""
        return self.task_spec.title

    @property
    def has_warnings(self):
        """True when the spread of the times (IQR relative to the median) is large enough to warn about."""
        return bool(self._warnings())

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        """True when the IQR relative to the median is below ``threshold``."""
        return self.iqr / self.median < threshold

    def _warnings(self):
        if self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            if self.meets_confidence(_IQR_WARN_THRESHOLD):
                return []
            message = "This could indicate system fluctuation."
        else:
            message = "This suggests significant environmental influence."
        return [f"  WARNING: Interquartile range is {self.iqr / self.median * 100:.1f}% of the median measurement.\n"
                f"           {message}"]

    def __repr__(self):
        ordered = self._sorted_times
        n, median = len(ordered), self.median
        unit, scale = select_unit(median)
        p25, p75 = _quantile(ordered, 0.25), _quantile(ordered, 0.75)
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {(p75 - p25) / scale:.2f} {unit} ({p25 / scale:.2f} to {p75 / scale:.2f})")
        threads = self.task_spec.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} thread{'s' if threads > 1 else ''}")
        lines += self._warnings()
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements):
        """One Measurement per TaskSpec, its times those of all the given replicates, per run."""
        groups = {}
        for m in measurements:
            groups.setdefault(m.task_spec, []).extend(m.times)
        return [Measurement(1, times, spec) for spec, times in groups.items()]


def select_unit(t):
    """The unit (``"ns"``, ``"us"``, ``"ms"`` or ``"s"``) and its scale in seconds that print ``t`` seconds
    with one to three digits before the point."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]
