"""PyTorch-style printing: ``tensor([1.0000, 2.5000], requires_grad=True)``.

Follows the layout rules of torch's ``_tensor_str``: one element format for the whole tensor,
columns padded to a common width, lines filled up to 80 characters, ``...`` past 1000
elements, and suffixes (dtype, grad_fn) moved to their own line when they would not fit.
"""
import math

import numpy as np

from . import _dtypes

LINE_WIDTH = 80
EDGE_ITEMS = 3
THRESHOLD = 1000
PRECISION = 4


class _Formatter:
    """Formats single elements: integer, fixed or scientific notation chosen from the values."""

    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        if not self.floating:
            self.width = max((len(self._plain(v)) for v in values.flat), default=1)
            return
        vals = values[np.isfinite(values) & (values != 0)].astype(np.float64)
        if vals.size == 0:
            return
        lo, hi = np.abs(vals).min(), np.abs(vals).max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or (not self.int_mode and lo < 1.0e-4)
        self.width = max(len(self._plain(v)) for v in vals)

    def _plain(self, value):
        if not self.floating:
            return str(bool(value)) if isinstance(value, (bool, np.bool_)) else str(int(value))
        value = float(value)
        if self.sci_mode:
            return f"{value:.{PRECISION}e}"
        if self.int_mode:
            return f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        return f"{value:.{PRECISION}f}"

    def format(self, value):
        return self._plain(value).rjust(self.width)


def _vector(values, indent, summarize, fmt):
    element_length = fmt.width + 2
    per_line = max(1, int(math.floor((LINE_WIDTH - indent) / element_length)))
    if summarize and values.shape[0] > 2 * EDGE_ITEMS:
        items = ([fmt.format(v) for v in values[:EDGE_ITEMS]] + [" ..."] +
                 [fmt.format(v) for v in values[-EDGE_ITEMS:]])
    else:
        items = [fmt.format(v) for v in values]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, indent, summarize, fmt):
    if values.ndim == 0:
        return fmt._plain(values[()])
    if values.ndim == 1:
        return _vector(values, indent, summarize, fmt)
    if summarize and values.shape[0] > 2 * EDGE_ITEMS:
        rows = ([_nested(values[i], indent + 1, summarize, fmt) for i in range(EDGE_ITEMS)] + ["..."] +
                [_nested(values[i], indent + 1, summarize, fmt) for i in range(len(values) - EDGE_ITEMS, len(values))])
    else:
        rows = [_nested(values[i], indent + 1, summarize, fmt) for i in range(values.shape[0])]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _summarized(values):
    """The elements that are printed: the edges of every long axis."""
    for axis in range(values.ndim):
        if values.shape[axis] > 2 * EDGE_ITEMS:
            values = np.concatenate([values.take(range(EDGE_ITEMS), axis),
                                     values.take(range(-EDGE_ITEMS, 0), axis)], axis)
    return values


def _with_suffixes(body, suffixes, indent):
    """Appends ', suffix' parts, starting a new line where the current one would pass 80 columns."""
    parts = [body]
    last_line = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > LINE_WIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(parts) + ")"


def tensor_repr(t, prefix="tensor("):
    """The text ``repr(t)`` shows, laid out as torch prints it: values, then device, dtype and grad suffixes."""
    values = t._host()
    if values.dtype.kind not in "biuf":  # bfloat16 and other extension types print through float32
        values = values.astype(np.float32)
    indent = len(prefix)
    summarize = values.size > THRESHOLD
    suffixes = []
    if values.size == 0 and values.ndim != 1:
        body = "[]"
        suffixes.append(f"size={tuple(values.shape)}")
    elif values.size == 0:
        body = "[]"
    else:
        fmt = _Formatter(_summarized(values) if summarize else values)
        body = _nested(values, indent, summarize, fmt)
    if t._device.type != "cpu":
        suffixes.append(f"device='{t._device}'")
    dtype = t.dtype
    default = _dtypes.get_default_dtype()
    if dtype is not default and (dtype.name not in ("int64", "bool") or values.size == 0):
        suffixes.append(f"dtype={dtype!r}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)
