"""Puts the stand-in in ``sys.modules`` as ``cupy`` and ``cupyx`` (for tests only)."""
import importlib
import sys

_MODULES = {
    "cupy": "", "cupy.cuda": ".cuda", "cupy.cuda.runtime": ".cuda.runtime", "cupy.random": ".random",
    "cupy.linalg": ".linalg", "cupy.fft": ".fft", "cupy.lib": ".lib", "cupy.lib.stride_tricks": ".lib.stride_tricks",
    "cupyx": "._cupyx", "cupyx.scipy": "._cupyx.scipy", "cupyx.scipy.special": "._cupyx.scipy.special",
}


def install():
    """Replace any real CuPy already imported: every ``cupy``/``cupyx`` module is the stand-in's
    or absent (so nothing of a real CuPy mixes in)."""
    if "rlpipe.backends.cuda" in sys.modules:
        raise RuntimeError("the CuPy stand-in must be installed before rlpipe.backends.cuda is imported")
    for name in [n for n in sys.modules if n.split(".")[0] in ("cupy", "cupyx", "cupy_backends")]:
        del sys.modules[name]
    package = __name__.rpartition(".")[0]
    for name, relative in _MODULES.items():
        sys.modules[name] = importlib.import_module(package + relative)
