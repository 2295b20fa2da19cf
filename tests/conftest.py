"""With ``RLPIPE_CUPY_STANDIN=1``, the CuPy stand-in (``cupy_standin``) is ``cupy`` for the whole
test session, so the cuda-marked tests run on a CPU:

    RLPIPE_CUPY_STANDIN=1 python3 -m pytest -q -m cuda -p no:cacheprovider

It replaces a real CuPy if one is installed. Without the variable nothing changes.
"""
import os

if os.environ.get("RLPIPE_CUPY_STANDIN") == "1":
    from cupy_standin._install import install
    install()
