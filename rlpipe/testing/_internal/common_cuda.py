"""torch.testing._internal.common_cuda for rlpipe: ``TEST_CUDA`` and ``TEST_MULTIGPU`` from
``rlpipe.cuda`` (CuPy), the cuDNN, CUDA-graph and fused-attention flags (False: rlpipe uses none of
them), and ``tf32_on_and_off`` (rlpipe never computes float32 in TF32, so a test runs once, as is)."""
from ... import cuda as _cuda

TEST_CUDA = _cuda.is_available()
TEST_MULTIGPU = TEST_CUDA and _cuda.device_count() >= 2
TEST_CUDNN = TEST_CUDNN_VERSION = False
TEST_CUDA_GRAPH = TEST_MAGMA = TEST_CUSPARSE_GENERIC = TEST_WITH_ROCM = False
CUDA_DEVICE = "cuda:0" if TEST_CUDA else None
SM53OrLater = SM60OrLater = SM70OrLater = SM75OrLater = SM80OrLater = SM89OrLater = SM90OrLater = False
PLATFORM_SUPPORTS_FLASH_ATTENTION = PLATFORM_SUPPORTS_MEM_EFF_ATTENTION = False
PLATFORM_SUPPORTS_FUSED_ATTENTION = PLATFORM_SUPPORTS_CUDNN_ATTENTION = PLATFORM_SUPPORTS_FUSED_SDPA = False
PLATFORM_SUPPORTS_BF16 = False


def tf32_is_not_fp32():
    """False: rlpipe computes float32 in float32 (no TF32)."""
    return False


def tf32_on_and_off(tf32_precision=1e-5, only_if=True):  # noqa: ARG001
    """Runs the test once as is: rlpipe has no TF32 mode to switch."""
    def decorator(fn):
        return fn
    return decorator


def with_tf32_off(fn):
    """The test unchanged: TF32 is always off in rlpipe."""
    return fn


def _get_torch_cuda_version():
    """(0, 0): rlpipe is not built against a CUDA toolkit (CuPy brings its own)."""
    return (0, 0)
