"""Collectors that run on several processes or machines. Importing this package never needs the
optional backends: ``RayCollector`` asks for Ray only when it is constructed
(``pip install "rlpipe[ray]"``)."""
from .ray import RayCollector

__all__ = ["RayCollector"]
