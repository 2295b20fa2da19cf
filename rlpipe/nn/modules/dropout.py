"""``Dropout`` and its variants: zero random elements (or whole channels) while training and rescale the
rest by ``1 / (1 - p)``; ``AlphaDropout`` keeps the statistics of SELU activations instead."""
from ...primitives.shape import Clone
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    """Holds and validates the drop probability ``p`` and the ``inplace`` flag."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training mode each element is zeroed with probability ``p`` (a fresh draw per call) and the
    survivors are scaled by ``1 / (1 - p)``; in eval mode it returns the input unchanged."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def _inference_op(self, dtype, device):  # see Module's run_without_graph
        # in eval mode a copy of the input (what a Sequential returns is a new tensor anyway)
        return None if self.training else (Clone, ())


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` inputs with probability ``p`` in training."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, H, W)`` or ``(C, H, W)`` inputs with probability ``p`` in training."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs with probability ``p`` in training."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: keeps zero mean and unit variance (see ``F.alpha_dropout``)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """``AlphaDropout`` of whole channels."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)
