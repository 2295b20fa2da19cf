"""Child processes that die with their parent, and their reaping: what the multi-process collectors,
``ParallelEnv`` and Gymnasium's async vector envs (through ``GymEnv``) share; also how a worker lays
out the arrays it shares with the main process in one block, and how it reports a failure."""
import ctypes
import math
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np

__all__ = ["parent_watch", "die_with_parent", "reap", "pack", "views", "describe"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_WATCHDOG_S = 0.2       # how often a watchdog thread looks for its parent
_ALIGN = 64             # bytes: each array of a shared block starts on a cache line


def parent_watch(start_method):
    """What a child started now by this thread (with ``start_method``) passes to
    ``die_with_parent``: the pid its parent will have (None for ``forkserver``, whose server is the
    parent), and whether the kernel may watch that parent. Linux sends ``PR_SET_PDEATHSIG`` when
    the *thread* that started the child ends, so only a child started by a process's main thread
    (which lives as long as its process) gets it; others get a watchdog thread."""
    parent_pid = None if start_method == "forkserver" else os.getpid()
    return parent_pid, threading.current_thread() is threading.main_thread()


def die_with_parent(parent_pid, kernel_watch):
    """Called first thing in a child process: SIGKILL when the parent dies, whatever it died of
    (a SIGKILLed parent runs no cleanup, and a child stuck in an env step would never notice).
    ``parent_pid`` None: the parent at this moment."""
    if parent_pid is None:
        parent_pid = os.getppid()
    if not (kernel_watch and sys.platform.startswith("linux") and _set_pdeathsig()):
        threading.Thread(target=_watch, args=(parent_pid,), name="rlpipe-parent-watchdog", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the watch began
        _die()


def _set_pdeathsig():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid):
    while os.getppid() == parent_pid:
        time.sleep(_WATCHDOG_S)
    _die()


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def reap(process, timeout):
    """Waits up to ``timeout`` s for ``process`` (a ``multiprocessing.Process``) to exit, then
    terminates it, then kills it; it is joined (no zombie left) when this returns."""
    process.join(timeout)
    if process.is_alive():
        process.terminate()
        process.join(1.0)
    if process.is_alive():
        process.kill()
        process.join()


def pack(entries):
    """[(key, shape, dtype str, offset)] placing each ``(key, shape, dtype)`` of ``entries`` in one shared
    block, each array on a cache line, and the block's size in bytes."""
    layout, offset = [], 0
    for key, shape, dtype in entries:
        dtype = np.dtype(dtype)
        layout.append((key, tuple(shape), dtype.str, offset))
        offset += -(-math.prod(shape) * dtype.itemsize // _ALIGN) * _ALIGN
    return layout, max(offset, 1)


def views(buffer, layout):
    """{key: the array ``layout`` places in ``buffer``}, in the layout's order."""
    return {key: np.ndarray(shape, dtype=np.dtype(dtype), buffer=buffer, offset=offset)
            for key, shape, dtype, offset in layout}


def describe(error):
    """A worker's failure as the main process reports it: type, message and the worker's traceback."""
    return f"{type(error).__name__}: {error}\n{''.join(traceback.format_exception(error)).rstrip()}"
