"""``rlpipe.backends.mps``: Apple's Metal backend, which rlpipe does not have (scripts ask before using it)."""


def is_available():
    """Always False: rlpipe has no Metal backend."""
    return False


def is_built():
    """Always False: rlpipe is not built with Metal support."""
    return False
