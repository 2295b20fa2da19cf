"""``logger``: the library's logger, as ``torchrl._utils.logger`` (INFO and above printed to stdout)."""
import logging
import sys

__all__ = ["logger"]

logger = logging.getLogger("rlpipe")
if not logger.handlers:
    _handler = logging.StreamHandler(stream=sys.stdout)
    _handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s] %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
