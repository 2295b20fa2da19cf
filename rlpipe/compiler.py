"""torch.compiler's switches for code written against them. rlpipe compiles nothing (``rlpipe.compile``
runs eagerly), so nothing here is ever inside a compiled region."""
import functools

__all__ = ["cudagraph_mark_step_begin", "is_compiling", "is_dynamo_compiling", "disable", "reset"]


def cudagraph_mark_step_begin():
    """Marks the start of a training step for CUDA graphs; rlpipe records no graphs, so it does nothing."""


def is_compiling():
    """Whether the caller is being traced by the compiler: always False in rlpipe."""
    return False


def is_dynamo_compiling():
    """Same as ``is_compiling()``: always False."""
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """Keeps ``fn`` out of compilation: with nothing compiled, returns ``fn`` itself (or, without
    ``fn``, a decorator that does)."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"torch.compiler.disable: fn must be callable, got {type(fn).__name__}")
    return fn


def reset():
    """Clears compilation caches; rlpipe has none."""
