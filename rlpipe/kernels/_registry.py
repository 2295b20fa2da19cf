"""The kernels by name, and the table of callables each backend gets."""
import collections
import functools

# One CUDA kernel's source, as ``backend.elementwise`` takes it: parameters (CuPy's notation) and body.
Source = collections.namedtuple("Source", "name in_params out_params body")

# Helpers the fused kernels share (after the backend's ``acc_t`` preamble). The templates take their
# own parameter U: the ElementwiseKernel machinery declares T before the preamble.
PREAMBLE = r"""
template <typename U> __device__ bool rlpipe_positive(const U v) { return v > U(0); }

// 1 / (1 + exp(-v)) that never overflows: the exponent is never positive
template <typename U> __device__ U rlpipe_sigmoid(const U v) {
    const U e = exp(-fabs(v));
    return v >= U(0) ? U(1) / (U(1) + e) : e / (U(1) + e);
}

// max(a, b) that returns NaN when either one is NaN, as numpy.maximum does
template <typename U> __device__ U rlpipe_nan_max(const U a, const U b) {
    return (a > b || a != a) ? a : b;
}
"""


class Kernel:
    """One fused computation.

    ``reference(xp, *args)``: its definition against an array namespace (NumPy's or CuPy's), or None
    where the caller's own formula is the reference. ``sources``: its CUDA kernels; ``launch(backend,
    compiled, *args)`` runs them (``compiled``: the sources built, in order). ``host``: whether a
    backend without CUDA runs the reference (True) or the caller's own formula (False: ``get`` gives
    None there)."""

    __slots__ = ("name", "reference", "sources", "launch", "host")

    def __init__(self, name, reference, sources, launch, host):
        self.name, self.reference, self.sources, self.launch, self.host = name, reference, sources, launch, host

    def compile(self, backend):
        """The CUDA sources as the cuda ``backend``'s kernels (compiled on their first launch)."""
        return tuple(backend.elementwise(s.name, s.in_params, s.out_params, s.body, PREAMBLE) for s in self.sources)

    def on(self, backend):
        """The callable ``backend`` runs, arguments as the reference's after ``xp``; or None."""
        if backend.name == "cuda":
            return functools.partial(self.launch, backend, self.compile(backend))
        return functools.partial(self.reference, backend.xp) if self.host else None


KERNELS = {}
_tables = {}  # backend module -> {name: callable or None}


def define(name, *, reference=None, sources, launch, host=False):
    """Registers a kernel (see ``Kernel``); every kernel has a CUDA version."""
    if name in KERNELS:
        raise ValueError(f"kernel {name!r} is defined twice")
    KERNELS[name] = Kernel(name, reference, tuple(sources), launch, host)


def get(name, backend):
    """What ``backend`` runs for kernel ``name``: the compiled CUDA kernel on cuda, the reference where
    the kernel's ``host`` says so, else None (the caller runs its own formula)."""
    try:
        return _tables[backend][name]
    except KeyError:
        return _get_slowly(name, backend)


def _get_slowly(name, backend):
    """``get`` on a backend's first call (its table is built) or for an unknown name (KeyError)."""
    if name not in KERNELS:
        raise KeyError(f"no kernel named {name!r}; the kernels are {sorted(KERNELS)}")
    if backend not in _tables:
        _tables[backend] = {kernel.name: kernel.on(backend) for kernel in KERNELS.values()}
    return _tables[backend][name]


def cuda_kernels(backend):
    """Every CUDA kernel of every registered computation, built by the cuda ``backend`` (compile checks)."""
    return [compiled for kernel in KERNELS.values() for compiled in kernel.compile(backend)]
