"""Grad mode is per thread, as in PyTorch: one thread's no_grad leaves the others recording."""
import threading

import rlpipe


def _in_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def test_a_new_thread_starts_recording_whatever_its_parent_has():
    with rlpipe.no_grad():
        assert _in_thread(rlpipe.is_grad_enabled) is True
    with rlpipe.inference_mode():
        assert _in_thread(rlpipe.is_inference_mode_enabled) is False
        assert rlpipe.is_inference_mode_enabled()


def test_another_threads_no_grad_leaves_this_thread_recording():
    entered, leave = threading.Event(), threading.Event()

    def evaluate():
        with rlpipe.no_grad():
            entered.set()
            leave.wait(10)

    evaluator = threading.Thread(target=evaluate)
    evaluator.start()
    try:
        assert entered.wait(10)
        x = rlpipe.ones(3, requires_grad=True)
        y = (x * 2).sum()
        assert rlpipe.is_grad_enabled() and y.requires_grad
        y.backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]
    finally:
        leave.set()
        evaluator.join()


def test_set_grad_enabled_in_a_thread_stays_in_that_thread():
    def switch_off():
        rlpipe.set_grad_enabled(False)
        return rlpipe.is_grad_enabled()

    assert _in_thread(switch_off) is False
    assert rlpipe.is_grad_enabled()
