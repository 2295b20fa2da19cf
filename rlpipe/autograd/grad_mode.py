"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode.

The switch is per thread, as in PyTorch: a thread's ``no_grad`` leaves the others recording (an
evaluation thread must not turn off the training thread's gradients), and a new thread starts with
recording on and inference mode off, whatever the thread that started it had.
"""
import functools
import threading


class _State(threading.local):
    """This thread's modes (the class attributes are every new thread's starting values)."""
    grad = True  # gradient recording on
    inference = False  # inference mode on


state = _State()


def is_grad_enabled():
    """True unless gradient recording is off in this thread (``no_grad``, ``inference_mode``)."""
    return state.grad


def is_inference_mode_enabled():
    """True inside ``inference_mode()`` in this thread."""
    return state.inference


class _Mode:
    """A context manager that also decorates functions. Subclasses set ``grad`` and ``inference``
    (None leaves that part of the state as it is)."""
    grad = None
    inference = None

    def __enter__(self):
        self._prev = (state.grad, state.inference)
        if self.grad is not None:
            state.grad = self.grad
        if self.inference is not None:
            state.inference = self.inference
        return self

    def __exit__(self, *exc):
        state.grad, state.inference = self._prev
        return False

    def clone(self):
        copy = object.__new__(type(self))
        copy.grad, copy.inference = self.grad, self.inference
        return copy

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_in_mode(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return run_in_mode


class no_grad(_Mode):
    """Ops inside record no graph: their outputs do not require grad.
    Works as ``with no_grad():``, ``@no_grad()`` and ``@no_grad``."""
    grad = False

    def __new__(cls, orig_func=None):
        mode = object.__new__(cls)
        return mode if orig_func is None else mode(orig_func)

    def __enter__(self):  # the common case, kept short: it runs around every inference call
        self._prev = state.grad
        state.grad = False
        return self

    def __exit__(self, *exc):
        state.grad = self._prev
        return False


class enable_grad(_Mode):
    """Turns gradient recording back on inside a no_grad block."""
    grad = True

    def __new__(cls, orig_func=None):
        mode = super().__new__(cls)
        return mode if orig_func is None else mode(orig_func)


class set_grad_enabled(_Mode):
    """Sets gradient recording on or off: at once when called (as torch does), for a ``with``
    block, or around a decorated function."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): mode must be a bool, got {type(mode).__name__}")
        self.grad = mode
        self._prev = (state.grad, state.inference)
        self._set_by_init = True
        state.grad = mode

    def __enter__(self):
        if getattr(self, "_set_by_init", False):  # the call already switched; keep the state from before it
            self._set_by_init = False
            return self
        return super().__enter__()

    def __call__(self, fn):
        state.grad, state.inference = self._prev  # as a decorator it must not switch the mode at definition time
        self._set_by_init = False
        return super().__call__(fn)


class inference_mode(_Mode):
    """Like no_grad. Unlike PyTorch, tensors made here are ordinary tensors (not inference tensors).
    Works as ``with inference_mode():``, ``@inference_mode()`` and ``@inference_mode``."""

    def __new__(cls, mode=True):
        self = object.__new__(cls)
        if callable(mode):  # used as a bare decorator
            self.__init__(True)
            return self(mode)
        return self

    def __init__(self, mode=True):
        self.grad = not mode
        self.inference = bool(mode)
