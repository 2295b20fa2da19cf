"""How a TensorDict prints: ``__repr__`` in tensordict's layout and the print options
(``set_printoptions``/``get_printoptions``)."""
import textwrap
from functools import wraps

from .._tensor import size_repr as _shape_str
from .base import TensorDictBase


class _ReprMixin:
    """``repr(td)`` (see the module docstring)."""
    __slots__ = ()

    def __repr__(self):
        """tensordict's layout: the fields (sorted by key, see set_printoptions), then batch size,
        device and is_shared, each part shown or not as the print options say."""
        opts = _REPR_OPTIONS
        fields = [f"{key}: {repr(value) if isinstance(value, TensorDictBase) else _leaf_repr(value, opts)}"
                  for key, value in self._tensordict.items()]
        if opts["sort_keys"] == "alphabetical":
            fields.sort()
        elif callable(opts["sort_keys"]):
            fields.sort(key=opts["sort_keys"])
        parts = [textwrap.indent("fields={" + textwrap.indent("\n" + ",\n".join(fields), "    ") + "}", "    ")]
        if opts["show_batch_size"]:
            parts.append(f"    batch_size={_shape_str(self._batch_size)}")
        if opts["show_device"]:
            parts.append(f"    device={self._device}")
        if opts["show_is_shared"]:
            parts.append(f"    is_shared={self.is_shared()}")
        return f"{type(self).__name__}(\n" + ",\n".join(parts) + ")"


def _leaf_repr(t, opts):
    """One leaf as tensordict prints it: ``Tensor(shape=..., device=..., dtype=..., is_shared=...)``."""
    parts = []
    if opts["show_shape"]:
        parts.append(f"shape={_shape_str(t.shape)}")
    if opts["show_field_device"]:
        parts.append(f"device={t.device}")
    if opts["show_dtype"]:
        parts.append(f"dtype={t.dtype}")
    if opts["show_field_is_shared"]:
        parts.append(f"is_shared={t.is_shared()}")
    if opts["show_grad"]:
        parts.append(f"requires_grad={t.requires_grad}")
    if opts["show_is_contiguous"]:
        parts.append(f"is_contiguous={t.is_contiguous()}")
    if opts["show_is_view"]:
        parts.append(f"is_view={t._data.base is not None}")
    if opts["show_storage_size"]:
        base = t._data if t._data.base is None else t._data.base
        parts.append(f"storage_size={base.nbytes}")
    if opts["plain"]:
        parts.append(_plain_summary(t))
    return f"{type(t).__name__}({', '.join(parts)})"


def _plain_summary(t):
    """The value summary of ``set_printoptions(plain=True)``: ``mean=..., std=...`` (4 significant
    digits, computed in float64) for floating leaves, ``min=..., max=...`` otherwise, ``[]`` if empty."""
    if t.numel() == 0:
        return "[]"
    if t.is_floating_point() or t.is_complex():
        wide = t.double()
        return f"mean={wide.mean().item():.4g}, std={wide.std().item():.4g}"
    return f"min={t.min().item()}, max={t.max().item()}"


# what TensorDict.__repr__ shows (tensordict's print options and defaults)
_REPR_OPTIONS = {"plain": False, "show_batch_size": True, "show_device": True, "show_is_shared": True,
                 "show_shape": True, "show_field_device": True, "show_dtype": True, "show_field_is_shared": True,
                 "show_grad": False,
                 "show_is_contiguous": False, "show_is_view": False, "show_storage_size": False,
                 "sort_keys": "alphabetical"}


_TERSE = {"show_device": False, "show_is_shared": False, "show_field_device": False, "show_dtype": False,
          "show_field_is_shared": False}


class set_printoptions:
    """Chooses what ``repr(td)`` shows: ``with set_printoptions(show_dtype=False): ...``, as a
    decorator, or for good with ``set_printoptions(...).set()``. ``verbose=False`` hides devices,
    dtypes and is_shared. TypeError for an option tensordict does not have."""

    def __init__(self, *, verbose=True, **options):
        unknown = set(options) - set(_REPR_OPTIONS)
        if unknown:
            raise TypeError(f"Unknown printoptions: {unknown}. Valid options: {sorted(_REPR_OPTIONS)}")
        self._options = {**({} if verbose else _TERSE), **options}
        self._saved = []

    def set(self):
        """Applies these options until ``unset`` (what entering the context does)."""
        self._saved.append(dict(_REPR_OPTIONS))
        _REPR_OPTIONS.update(self._options)

    def __enter__(self):
        self.set()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _REPR_OPTIONS.update(self._saved.pop())
        return False

    def __call__(self, fn):
        @wraps(fn)
        def with_options(*args, **kwargs):
            with set_printoptions(**self._options):
                return fn(*args, **kwargs)
        return with_options


def get_printoptions():
    """The current print options, as a dict (a copy)."""
    return dict(_REPR_OPTIONS)
