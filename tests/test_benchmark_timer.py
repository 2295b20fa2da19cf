"""rlpipe.utils.benchmark: Timer's blocks of runs on a fake clock, and Measurement's statistics and repr
against torch 2.13's printed reports."""
import re

import pytest

from rlpipe.utils.benchmark import Measurement, TaskSpec, Timer, select_unit

TICK = 2.0 ** -20  # seconds per fake run: a binary fraction, so sums of ticks are exact


class FakeClock:
    """A clock that moves only when the timed statement calls ``tick``."""

    def __init__(self, durations=(TICK,)):
        self.now, self.durations, self.calls = 0.0, durations, 0

    def tick(self):
        self.now += self.durations[self.calls % len(self.durations)]
        self.calls += 1

    def __call__(self):
        return self.now


def _without_address(text):
    return re.sub(r" object at 0x[0-9a-f]+>", " object at ADDRESS>", text)


def test_timeit_times_one_block_after_a_warm_up():
    clock = FakeClock()
    m = Timer("clock.tick()", timer=clock, globals={"clock": clock}).timeit(1000)
    assert clock.calls == 10 + 1000  # the warm-up is a hundredth of the runs
    assert m.number_per_run == 1000 and m.raw_times == [1000 * TICK] and m.times == [TICK]
    assert _without_address(repr(m)) == ("<rlpipe.utils.benchmark.common.Measurement object at ADDRESS>\n"
                                         "clock.tick()\n"
                                         "  953.67 ns\n"
                                         "  1 measurement, 1000 runs , 1 thread")


def test_blocked_autorange_picks_a_block_size_then_fills_min_run_time():
    clock = FakeClock()
    timer = Timer("clock.tick()", setup="pass", timer=clock, globals={"clock": clock}, label="tick",
                  sub_label="fake", description="a fake clock", num_threads=2)
    m = timer.blocked_autorange(min_run_time=0.01)
    # 1 and 10 runs take under min_run_time / 1000 (10 us); 100 runs (95.4 us) do: blocks of 100 runs until
    # 0.01 s are spent, which takes 105 of them (104.9 rounded up)
    assert m.number_per_run == 100 and len(m.times) == 105
    assert m.median == TICK and m.mean == pytest.approx(TICK) and m.iqr == 0.0
    assert _without_address(repr(m)) == ("<rlpipe.utils.benchmark.common.Measurement object at ADDRESS>\n"
                                         "tick: fake\n"
                                         "a fake clock\n"
                                         "  Median: 953.67 ns\n"
                                         "  IQR:    0.00 ns (953.67 to 953.67)\n"
                                         "  105 measurements, 100 runs per measurement, 2 threads")


def test_adaptive_autorange_stops_once_the_spread_is_small_or_time_is_up():
    clock = FakeClock()
    m = Timer("clock.tick()", timer=clock, globals={"clock": clock}).adaptive_autorange(min_run_time=0.001)
    # blocks of 100 runs (the block size is chosen for 0.05 s, as torch's), until 0.001 s are spent
    assert m.number_per_run == 100 and len(m.times) == 11 and m.iqr == 0.0
    m = Timer("clock.tick()", timer=clock, globals={"clock": clock}).adaptive_autorange(min_run_time=1e-6)
    assert len(m.times) == 4  # four blocks is the least it takes
    noisy = FakeClock(durations=(TICK,) * 1000 + (TICK * 8,) * 1000)  # blocks alternate between 1x and 8x
    m = Timer("clock.tick()", timer=noisy, globals={"clock": noisy}).adaptive_autorange(max_run_time=0.5)
    assert not m.meets_confidence(0.1) and 0.5 < sum(m.raw_times) < 0.52


def test_measurement_statistics_and_warnings_match_torchs_report():
    # torch 2.13 printed this report for the same Measurement (address aside)
    m = Measurement(10, [1.0e-4, 1.2e-4, 1.1e-4, 2.0e-4, 1.05e-4], TaskSpec("f(x)", "pass"))
    assert m.times == pytest.approx([1.0e-5, 1.2e-5, 1.1e-5, 2.0e-5, 1.05e-5])
    assert m.mean == pytest.approx(1.27e-05) and m.median == pytest.approx(1.1e-05)
    assert m.iqr == pytest.approx(1.5e-06) and m.has_warnings
    assert _without_address(repr(m)) == (
        "<rlpipe.utils.benchmark.common.Measurement object at ADDRESS>\n"
        "f(x)\n"
        "  Median: 11.00 us\n"
        "  IQR:    1.50 us (10.50 to 12.00)\n"
        "  5 measurements, 10 runs per measurement, 1 thread\n"
        "  WARNING: Interquartile range is 13.6% of the median measurement.\n"
        "           This could indicate system fluctuation.")


def test_multi_line_statements_and_setups_print_as_torchs():
    spec = TaskSpec("a = 1\nb = 2", "import x\nimport y", sub_label="sub", num_threads=4)
    m = Measurement(100, [1.0e-4, 1.01e-4, 1.02e-4, 1.03e-4], spec)
    assert _without_address(repr(m)) == (
        "<rlpipe.utils.benchmark.common.Measurement object at ADDRESS>\n"
        "stmt: (sub)\n  a = 1\n  b = 2\n\n"
        "setup:\n  import x\n  import y\n\n"
        "  Median: 1.02 us\n"
        "  IQR:    0.01 us (1.01 to 1.02)\n"
        "  4 measurements, 100 runs per measurement, 4 threads")
    assert m.stmt == "a = 1\nb = 2" and m.num_threads == 4  # the TaskSpec's fields read through
    gross = Measurement(1, [1.0, 1.0, 2.0, 3.0], TaskSpec("s", "pass"))
    assert "This suggests significant environmental influence." in repr(gross)


def test_merge_and_units():
    spec = TaskSpec("s", "pass")
    merged = Measurement.merge([Measurement(10, [1e-3], spec), Measurement(20, [4e-3], spec)])
    assert len(merged) == 1 and merged[0].number_per_run == 1 and merged[0].raw_times == [1e-4, 2e-4]
    assert [select_unit(t)[0] for t in (3e-9, 3e-6, 3e-3, 3.0)] == ["ns", "us", "ms", "s"]


def test_unsupported_arguments_raise():
    with pytest.raises(ValueError, match="only a `str` stmt"):
        Timer(lambda: None)
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        Timer("pass", global_setup="int x;")
    with pytest.raises(ValueError, match="Invalid language"):
        Timer("pass", language="cpp")
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        Timer("pass").repeat()


def test_the_statement_sees_rlpipe_and_the_setup():
    m = Timer("y = rlpipe.zeros(n)", setup="n = 3").timeit(5)
    assert m.number_per_run == 5 and m.raw_times[0] > 0
