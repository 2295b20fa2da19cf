"""``torch.nn.utils.stateless``: ``functional_call`` (the same as ``rlpipe.func.functional_call``)."""
from ...func import functional_call

__all__ = ["functional_call"]
