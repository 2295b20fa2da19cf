"""torch.testing._internal.common_dtype for rlpipe: the dtype lists PyTorch's tests parametrize over
(``floating_types()``, ``all_types_and(torch.half)``...), as rlpipe dtypes.

rlpipe has no complex dtypes: the complex entries of torch's lists are left out, so
``floating_and_complex_types()`` is ``floating_types()`` and ``complex_types()`` is empty. It has no
float8 or quantized dtypes either (``float8_types()`` and ``get_all_qint_dtypes()`` are empty)."""
from ... import _dtypes


def _validate_dtypes(*dtypes):
    for dtype in dtypes:
        if not isinstance(dtype, _dtypes.dtype):
            raise TypeError(f"expected every dtype to be an rlpipe dtype, got {dtype!r} ({type(dtype).__name__})")
    return dtypes


class _dispatch_dtypes(tuple):
    """A tuple of dtypes; adding a tuple gives another one."""
    __slots__ = ()

    def __add__(self, other):
        if not isinstance(other, tuple):
            raise TypeError(f"expected a tuple of dtypes to add, got {type(other).__name__}")
        return _dispatch_dtypes(tuple.__add__(self, other))


_floating = _dispatch_dtypes((_dtypes.float32, _dtypes.float64))
_integral = _dispatch_dtypes((_dtypes.uint8, _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64))
_none = _dispatch_dtypes(())


def empty_types():
    """No dtypes."""
    return _none


def floating_types():
    """float32, float64."""
    return _floating


def floating_types_and_half():
    """float32, float64, float16."""
    return _floating + (_dtypes.float16,)


def floating_types_and(*dtypes):
    """float32, float64 and ``dtypes``."""
    return _floating + _validate_dtypes(*dtypes)


def floating_and_complex_types():
    """float32, float64 (torch's complex64 and complex128 are not in rlpipe)."""
    return _floating


def floating_and_complex_types_and(*dtypes):
    """float32, float64 and ``dtypes`` (no complex dtypes in rlpipe)."""
    return _floating + _validate_dtypes(*dtypes)


def double_types():
    """float64 (torch's complex128 is not in rlpipe)."""
    return _dispatch_dtypes((_dtypes.float64,))


def integral_types():
    """uint8, int8, int16, int32, int64."""
    return _integral


def integral_types_and(*dtypes):
    """The integral types and ``dtypes``."""
    return _integral + _validate_dtypes(*dtypes)


def all_types():
    """The floating types, then the integral ones."""
    return _floating + _integral


def all_types_and(*dtypes):
    """``all_types()`` and ``dtypes``."""
    return all_types() + _validate_dtypes(*dtypes)


def complex_types():
    """Empty: rlpipe has no complex dtypes."""
    return _none


def complex_types_and(*dtypes):
    """``dtypes`` (rlpipe has no complex dtypes)."""
    return _none + _validate_dtypes(*dtypes)


def all_types_and_complex():
    """``all_types()`` (rlpipe has no complex dtypes)."""
    return all_types()


def all_types_and_complex_and(*dtypes):
    """``all_types()`` and ``dtypes`` (rlpipe has no complex dtypes)."""
    return all_types() + _validate_dtypes(*dtypes)


def all_types_and_half():
    """``all_types()`` and float16."""
    return all_types() + (_dtypes.float16,)


def float8_types():
    """Empty: rlpipe has no float8 dtypes."""
    return _none


def custom_types(*dtypes):
    """Exactly ``dtypes``."""
    return _none + _validate_dtypes(*dtypes)


def get_all_int_dtypes():
    """[uint8, int8, int16, int32, int64]."""
    return list(_integral)


def get_all_fp_dtypes(include_half=True, include_bfloat16=True):
    """[float32, float64] with float16 and bfloat16 unless left out."""
    return [_dtypes.float32, _dtypes.float64] + [_dtypes.float16] * bool(include_half) + \
        [_dtypes.bfloat16] * bool(include_bfloat16)


def get_all_complex_dtypes(include_complex32=False):  # noqa: ARG001
    """[]: rlpipe has no complex dtypes."""
    return []


def get_all_qint_dtypes():
    """[]: rlpipe has no quantized dtypes."""
    return []


def get_all_dtypes(include_half=True, include_bfloat16=True, include_bool=True, include_complex=True,
                   include_complex32=False, include_qint=False):
    """The integral dtypes, the floating ones (see ``get_all_fp_dtypes``) and bool (complex and quantized
    dtypes are not in rlpipe)."""
    del include_complex, include_complex32, include_qint
    floating = get_all_fp_dtypes(include_half, include_bfloat16)
    return get_all_int_dtypes() + floating + [_dtypes.bool] * bool(include_bool)


def get_all_math_dtypes(device):
    """The integral and floating dtypes for ``device`` (float16 on CUDA only, as torch)."""
    return get_all_int_dtypes() + get_all_fp_dtypes(include_half=str(device).startswith("cuda"), include_bfloat16=False)


def highest_precision_float(device):  # noqa: ARG001
    """float64."""
    return _dtypes.float64
