"""torchrl._utils's timer and device helper and torch's matmul-precision switch, which torchrl's
sota-implementations call (recorded from torchrl 0.14 / torch 2.13)."""
import pytest

import rlpipe
from rlpipe._utils import get_available_device, timeit


@pytest.fixture(autouse=True)
def fresh_timers():
    saved = dict(timeit._REG), timeit._printevery_count
    timeit._REG.clear()
    yield
    timeit._REG.clear()
    timeit._REG.update(saved[0])
    timeit._printevery_count = saved[1]


def test_timeit_context_and_decorator_share_a_registry():
    @timeit("work")
    def work():
        return 3

    assert work() == 3
    with timeit("work") as timer:
        assert timer.elapsed() >= 0.0
    mean, total, count = timeit._REG["work"]
    assert count == 2 and total >= mean >= 0.0
    assert timeit.todict() == {"work": mean}
    assert timeit.todict(percall=False, prefix="t") == {"t/work": total}


def test_timeit_erase_keeps_the_names_with_zeros():
    with timeit("a"):
        pass
    timeit.erase()
    assert timeit._REG == {"a": [0.0, 0.0, 0]}  # torchrl 0.14: erase zeroes, it does not forget
    assert timeit.todict() == {"a": 0.0}


def test_timeit_printevery_prints_on_every_interval_th_call():
    with timeit("a"):
        pass
    printed = []
    original = timeit.print
    timeit.print = staticmethod(lambda prefix=None: printed.append(prefix))
    try:
        timeit._printevery_count = 0
        for _ in range(10):  # 10 // 3 = 3: calls 0, 3, 6, 9 print
            timeit.printevery(3, 10, prefix="p")
    finally:
        timeit.print = original
    assert printed == ["p"] * 4


def test_timeit_print_returns_the_lines():
    timeit._REG["x"] = [0.002, 0.01, 5]
    assert timeit.print() == "x took 2.0000 msec (total =  0.0100 sec since last reset)."


def test_timeit_elapsed_before_start_raises():
    with pytest.raises(RuntimeError, match="never started"):
        timeit("idle").elapsed()


def test_get_available_device_is_cpu_without_a_gpu():
    expected = "cuda:0" if rlpipe.cuda.is_available() else "cpu"
    assert get_available_device(return_str=True) == expected
    assert get_available_device() == rlpipe.device(expected)


def test_float32_matmul_precision_round_trips():
    assert rlpipe.get_float32_matmul_precision() == "highest"  # torch 2.13's default
    try:
        rlpipe.set_float32_matmul_precision("high")
        assert rlpipe.get_float32_matmul_precision() == "high"
    finally:
        rlpipe.set_float32_matmul_precision("highest")


def test_float32_matmul_precision_bad_values():
    with pytest.raises(TypeError, match="must be a str, got int"):
        rlpipe.set_float32_matmul_precision(3)
    with pytest.raises(ValueError, match="got 'low'"):
        rlpipe.set_float32_matmul_precision("low")
    assert rlpipe.get_float32_matmul_precision() == "highest"


def test_compile_with_warmup_runs_the_model_before_and_after_warmup():
    from rlpipe._utils import compile_with_warmup

    def double(x):
        return 2 * x

    wrapped = compile_with_warmup(double, warmup=2, mode="reduce-overhead")
    assert [wrapped(i) for i in range(4)] == [0, 2, 4, 6]
    assert wrapped.__name__ == "double"
    later = compile_with_warmup(warmup=1)(double)  # torchrl: without a model, a decorator
    assert later(5) == 10
    with pytest.raises(TypeError, match="must be callable, got int"):
        compile_with_warmup(3)


def test_group_optimizers_keeps_each_groups_options():
    from rlpipe.objectives import group_optimizers
    a = rlpipe.nn.Parameter(rlpipe.tensor([1.0, 2.0]))
    b = rlpipe.nn.Parameter(rlpipe.tensor([3.0]))
    grouped = group_optimizers(rlpipe.optim.Adam([a], lr=0.1), None, rlpipe.optim.Adam([b], lr=0.01, eps=1e-4))
    assert type(grouped).__name__ == "Adam"
    assert [g["lr"] for g in grouped.param_groups] == [0.1, 0.01]
    assert [g["eps"] for g in grouped.param_groups] == [1e-08, 1e-4]
    (a.pow(2).sum() + 3 * b.sum()).backward()
    grouped.step()
    # torchrl 0.14.1 / torch 2.13
    assert a.tolist() == pytest.approx([0.9000000357627869, 1.899999976158142])
    assert b.tolist() == pytest.approx([2.9900002479553223])


def test_group_optimizers_bad_input():
    from rlpipe.objectives import group_optimizers
    p = rlpipe.nn.Parameter(rlpipe.tensor([1.0]))
    with pytest.raises(ValueError, match="must be a Adam, got a SGD"):
        group_optimizers(rlpipe.optim.Adam([p]), rlpipe.optim.SGD([p], lr=1.0))
    with pytest.raises(ValueError, match="at least one optimizer, got none"):
        group_optimizers(None)


def test_compiler_switches_are_no_ops():
    # torch 2.13 on CPU: None, False, False; disable(f)(1) == 2; disable(recursive=False)(f)(2) == 3
    assert rlpipe.compiler.cudagraph_mark_step_begin() is None
    assert rlpipe.compiler.is_compiling() is False and rlpipe.compiler.is_dynamo_compiling() is False

    def f(x):
        return x + 1

    assert rlpipe.compiler.disable(f)(1) == 2
    assert rlpipe.compiler.disable(recursive=False)(f)(2) == 3
    assert rlpipe.compiler.reset() is None
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        rlpipe.compiler.disable(3)


def test_torchrl_top_level_helpers():
    # torchrl 0.14.1's __init__ re-exports these from torchrl._utils
    from rlpipe import _utils
    assert rlpipe.timeit is _utils.timeit and rlpipe.logger is _utils.logger
    assert rlpipe.compile_with_warmup is _utils.compile_with_warmup


def test_set_num_threads_reaches_numpys_blas():
    before = rlpipe.get_num_threads()
    try:
        rlpipe.set_num_threads(1)
        assert rlpipe.get_num_threads() == 1
        if rlpipe.backends.cpu.blas_threads() is not None:  # NumPy's bundled OpenBLAS: really set
            assert rlpipe.backends.cpu.blas_threads() == 1
    finally:
        rlpipe.set_num_threads(before)
    assert rlpipe.get_num_threads() == before


def test_set_num_threads_bad_values():
    # torch 2.13's messages: "set_num_threads expects a positive integer" / "expects an int, but got float"
    before = rlpipe.get_num_threads()
    with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer, got 0"):
        rlpipe.set_num_threads(0)
    with pytest.raises(RuntimeError, match="set_num_threads expects an int, but got float"):
        rlpipe.set_num_threads(1.5)
    with pytest.raises(RuntimeError, match="set_num_threads expects an int, but got str"):
        rlpipe.set_num_threads("2")
    assert rlpipe.get_num_threads() == before
