"""The PyTorch surface that training scripts reach for: torch.backends' flags, finfo/iinfo, legacy
constructors, the default device. Expected values were measured on torch 2.13 and pasted here."""
import pytest

import rlpipe as r


# ---- rlpipe.backends.cudnn / mps ----------------------------------------------------------------

def test_cudnn_flags_are_settable_module_attributes_with_torchs_defaults():
    cudnn = r.backends.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == (True, False, False, True)
    assert cudnn.is_available() is False and cudnn.version() is None
    try:
        r.backends.cudnn.deterministic = True
        r.backends.cudnn.benchmark = True
        import rlpipe.backends.cudnn as again
        assert again.deterministic is True and again.benchmark is True
    finally:
        cudnn.deterministic, cudnn.benchmark = False, False


def test_cudnn_flags_context_restores_the_flags():
    cudnn = r.backends.cudnn
    with cudnn.flags(enabled=True, deterministic=True):
        assert cudnn.deterministic is True and cudnn.enabled is True and cudnn.benchmark is False
    assert cudnn.deterministic is False
    with pytest.raises(ZeroDivisionError):
        with cudnn.flags(deterministic=True):
            1 / 0
    assert cudnn.deterministic is False and cudnn.enabled is True


def test_mps_is_not_available():
    assert r.backends.mps.is_available() is False and r.backends.mps.is_built() is False


# ---- finfo / iinfo (values from torch 2.13) ---------------------------------------------------

FINFO = {  # dtype: bits, eps, max, tiny, resolution
    "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e+38, 1.1754943508222875e-38, 1e-06),
    "float64": (64, 2.220446049250313e-16, 1.7976931348623157e+308, 2.2250738585072014e-308, 1e-15),
    "float16": (16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
    "bfloat16": (16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01),
}


@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo_matches_torch(name):
    f = r.finfo(getattr(r, name))
    bits, eps, big, tiny, resolution = FINFO[name]
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == \
        (bits, eps, big, -big, tiny, tiny, resolution, name)
    assert type(f.eps) is float and type(f.bits) is int


def test_finfo_of_the_default_dtype_and_repr():
    assert r.finfo() == r.finfo(r.float32)
    assert repr(r.finfo()) == ("finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
                               "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")
    r.set_default_dtype(r.float64)
    try:
        assert r.finfo().dtype == "float64"
    finally:
        r.set_default_dtype(r.float32)


IINFO = {"int64": (64, -9223372036854775808, 9223372036854775807), "int32": (32, -2147483648, 2147483647),
         "int16": (16, -32768, 32767), "int8": (8, -128, 127), "uint8": (8, 0, 255)}


@pytest.mark.parametrize("name", sorted(IINFO))
def test_iinfo_matches_torch(name):
    i = r.iinfo(getattr(r, name))
    assert (i.bits, i.min, i.max, i.dtype) == IINFO[name] + (name,)
    assert type(i.max) is int


def test_iinfo_repr():
    assert repr(r.iinfo(r.int64)) == "iinfo(min=-9.22337e+18, max=9.22337e+18, dtype=int64)"


@pytest.mark.parametrize("call, message", [
    (lambda: r.finfo(r.int64), "rlpipe.finfo() requires a floating point input type. Use rlpipe.iinfo"),
    (lambda: r.finfo(r.bool), "rlpipe.finfo() requires a floating point input type"),
    (lambda: r.iinfo(r.float32), "rlpipe.iinfo() requires an integer input type. Use rlpipe.finfo"),
    (lambda: r.iinfo(r.bool), "rlpipe.bool is not supported by rlpipe.iinfo"),
    (lambda: r.finfo("float32"), "finfo(): argument 'type' (position 1) must be rlpipe.dtype, not str"),
    (lambda: r.iinfo(), "missing 1 required positional argument"),
])
def test_info_of_the_wrong_kind_raises_type_error(call, message):
    with pytest.raises(TypeError) as e:
        call()
    assert message in str(e.value)
