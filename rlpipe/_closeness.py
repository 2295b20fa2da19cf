"""The closeness test behind ``rlpipe.testing.assert_close`` for tensors, below the layers that hold
tensor collections so that they can compare their leaves too (``rlpipe.tensordict.utils``'s
``assert_allclose_td``): torch.testing's default tolerances by dtype, its failure message, and
``_compare_tensors`` (shape, device, dtype, then the values)."""
import numpy as np

_DEFAULT_TOLERANCES = {  # (rtol, atol), as torch.testing
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _default_tolerances(*dtypes):
    rtols, atols = zip(*(_DEFAULT_TOLERANCES.get(d.name, (0.0, 0.0)) for d in dtypes))
    return max(rtols), max(atols)


def _tolerances(rtol, atol, *dtypes):
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, "
                         f"but got no {'rtol' if rtol is None else 'atol'}.")
    if rtol is None:
        return _default_tolerances(*dtypes)
    return float(rtol), float(atol)


def _fail(message, msg):
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise AssertionError(message)


def _mismatch_message(actual, expected, rtol, atol, equal_nan, what="Tensor-likes"):
    """None if close, else torch.testing's message. ``actual``/``expected`` are NumPy arrays of the
    same shape (host copies); integer and bool data is compared exactly unless tolerances are given."""
    exact = rtol == 0 and atol == 0 and actual.dtype.kind in "biu"
    if exact:
        a = actual.astype(np.int64)
        e = expected.astype(np.int64)
        matches = a == e
    else:
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            matches = (a == e) | (np.abs(a - e) <= atol + rtol * np.abs(e))
            matches &= np.isfinite(e) | (a == e)  # inf only equals itself
            if equal_nan:
                matches |= np.isnan(a) & np.isnan(e)
    if bool(np.all(matches)):
        return None
    total = matches.size
    mismatched = int(total - np.count_nonzero(matches))
    flat_matches = matches.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_diff = np.abs(a - e).reshape(-1)
        abs_diff = np.where(flat_matches, 0, abs_diff)
        rel_diff = (abs_diff / np.abs(e.reshape(-1))) if not exact else \
            abs_diff.astype(np.float64) / np.abs(e.reshape(-1)).astype(np.float64)
        rel_diff = np.where(flat_matches, 0, rel_diff)

    def greatest(diff):  # torch.max propagates NaN: the first NaN wins
        nan = np.isnan(diff) if diff.dtype.kind == "f" else np.zeros(diff.shape, bool)
        i = int(np.argmax(nan)) if nan.any() else int(np.argmax(diff))
        value = diff[i].item()
        return value, tuple(int(j) for j in np.unravel_index(i, actual.shape)) if actual.shape else ()

    max_abs, abs_idx = greatest(abs_diff)
    max_rel, rel_idx = greatest(rel_diff)
    if actual.size == 1 and what == "Scalars":
        lines = [f"{what} are not {'equal' if rtol == 0 and atol == 0 else 'close'}!", "",
                 f"Expected {e.reshape(-1)[0].item()} but got {a.reshape(-1)[0].item()}.",
                 f"Absolute difference: {max_abs}" + (f" (up to {atol} allowed)" if atol or rtol else ""),
                 f"Relative difference: {max_rel}" + (f" (up to {rtol} allowed)" if atol or rtol else "")]
        return "\n".join(lines)
    lines = [f"{what} are not {'equal' if rtol == 0 and atol == 0 else 'close'}!", "",
             f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})",
             f"Greatest absolute difference: {max_abs} at index {abs_idx}"
             + (f" (up to {atol} allowed)" if atol or rtol else ""),
             f"Greatest relative difference: {max_rel} at index {rel_idx}"
             + (f" (up to {rtol} allowed)" if atol or rtol else "")]
    return "\n".join(lines)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg):
    if actual.shape != expected.shape:
        _fail(f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.", msg)
    if check_device and actual.device != expected.device:
        _fail(f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.", msg)
    if check_dtype and actual.dtype is not expected.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.", msg)
    rtol, atol = _tolerances(rtol, atol, actual.dtype, expected.dtype)
    message = _mismatch_message(actual.detach()._host(), expected.detach()._host(), rtol, atol, equal_nan)
    if message is not None:
        _fail(message, msg)
