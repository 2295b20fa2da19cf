"""``Flatten`` and ``Unflatten``: reshape a range of dimensions into one, and one into several."""
import math

from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Merges dimensions ``start_dim`` to ``end_dim`` (inclusive) into one; by default all but the batch
    dimension."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def _inference_op(self, dtype, device):  # see Module's run_without_graph
        return _FlattenStep, (self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class _FlattenStep:
    """Flatten's step in a Sequential's inference plan: a reshape of the array (a view where it can be).
    Dimensions the usual path would refuse, or a 0-d input, raise ValueError, which hands the call back
    to that path and its error."""

    @staticmethod
    def forward(ctx, x, start_dim, end_dim):
        n = x.ndim
        if not (-n <= start_dim < n and -n <= end_dim < n) or start_dim % n > end_dim % n:
            raise ValueError(f"flatten step: dims ({start_dim}, {end_dim}) for a {n}-d input")
        start, end = start_dim % n, end_dim % n
        return x.reshape(x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


class Unflatten(Module):
    """Splits dimension ``dim`` into the shape ``unflattened_size`` (a tuple or list of ints, one of
    which may be -1). rlpipe has no named tensors, so ``dim`` must be an int."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, int):
            self._require_tuple_int(unflattened_size)
        elif isinstance(dim, str):
            raise TypeError("Unflatten: named dimensions are not supported by rlpipe (it has no named tensors); "
                            "pass dim as an int")
        else:
            raise TypeError("invalid argument type for dim parameter")
        self.dim = dim
        self.unflattened_size = unflattened_size

    @staticmethod
    def _require_tuple_int(sizes):
        if not isinstance(sizes, (tuple, list)):
            raise TypeError(f"unflattened_size must be a tuple of ints, but found type {type(sizes).__name__}")
        for idx, elem in enumerate(sizes):
            if not isinstance(elem, int):
                raise TypeError(f"unflattened_size must be tuple of ints, but found element of type "
                                f"{type(elem).__name__} at pos {idx}")

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
