"""PyTorch-style printing: ``tensor([1.0000, 2.5000], requires_grad=True)``."""
import numpy as np

from . import _dtypes

_IMPLICIT_DTYPES = ("int64", "bool")


def _float_formatter(values):
    """One format for every element, chosen as torch does from the finite non-zero magnitudes."""
    finite = np.abs(values[np.isfinite(values)]).astype(np.float64)
    nonzero = finite[finite != 0]
    if nonzero.size == 0:
        return lambda x: _special(x) or "0."
    lo, hi = nonzero.min(), nonzero.max()
    if np.all(finite == np.ceil(finite)):
        if hi / lo > 1000 or hi > 1e8:
            return lambda x: _special(x) or f"{x:.4e}"
        return lambda x: _special(x) or f"{x:.0f}."
    if hi / lo > 1000 or hi > 1e8 or lo < 1e-4:
        return lambda x: _special(x) or f"{x:.4e}"
    return lambda x: _special(x) or f"{x:.4f}"


def _special(x):
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return None


def _summarized(values, edge=3, threshold=1000):
    """The elements that will be printed (the edges of each axis when the tensor is large)."""
    if values.size <= threshold:
        return values
    for axis in range(values.ndim):
        if values.shape[axis] > 2 * edge:
            values = np.concatenate([values.take(range(edge), axis), values.take(range(-edge, 0), axis)], axis)
    return values


def tensor_repr(t, prefix="tensor("):
    values = t._host()
    if values.dtype.kind not in "biuf":  # bfloat16 and other extension dtypes print through float32
        values = values.astype(np.float32)
    if values.dtype.kind == "f":
        element = _float_formatter(values)
    elif values.dtype.kind == "b":
        element = lambda x: "True" if x else "False"
    else:
        element = str
    shown = _summarized(values)
    if values.dtype.kind == "f":  # torch sizes float columns from the finite non-zero values only
        shown = shown[np.isfinite(shown) & (shown != 0)]
    width = max((len(element(v)) for v in shown.flat), default=0)
    pad = lambda x: element(x).rjust(width)
    fmt = {"all": pad}
    body = np.array2string(values, separator=", ", prefix=prefix, formatter=fmt, threshold=1000,
                           edgeitems=3, max_line_width=80)
    extras = []
    if values.size == 0 and values.ndim != 1:
        extras.append(f"size={tuple(values.shape)}")
    if t._device.type != "cpu":
        extras.append(f"device='{t._device}'")
    dtype = t.dtype
    if dtype is not _dtypes.get_default_dtype() and dtype.name not in _IMPLICIT_DTYPES or values.size == 0 and dtype is not _dtypes.get_default_dtype():
        extras.append(f"dtype=rlpipe.{dtype.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"
