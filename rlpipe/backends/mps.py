"""``rlpipe.backends.mps``: Apple's Metal backend, which rlpipe does not have (scripts ask before using it)."""


def is_available():
    return False


def is_built():
    return False
