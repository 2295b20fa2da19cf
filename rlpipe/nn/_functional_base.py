"""Helpers that ``nn.functional`` and its companion modules share: the ``inplace=True`` switch and the
loss reductions."""
import warnings

from .. import primitives as ops
from ..primitives import _inplace


def _maybe_inplace(input, inplace, compute):
    """compute(input), or the same written into input (torch's ``inplace=True``)."""
    return _inplace(input, compute) if inplace else compute(input)


def _reduction(size_average, reduce, reduction):
    """The reduction name, from the legacy ``size_average``/``reduce`` flags when given (with torch's
    deprecation warning)."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
        warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' "
                      "instead.", stacklevel=3)
        return reduction
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    return loss if reduction == "none" else ops.mean(loss) if reduction == "mean" else ops.sum(loss)
