"""The named tuples that reductions returning (values, indices) give, as ``torch.return_types``."""
import collections

from . import _dtypes

__all__ = ["cummax", "cummin", "max", "min", "sort", "topk", "svd", "linalg_svd", "linalg_cholesky_ex",
           "linalg_slogdet", "slogdet", "linalg_eigh", "linalg_qr", "qr", "triangular_solve", "linalg_lstsq",
           "linalg_lu_factor", "linalg_lu_factor_ex", "linalg_lu", "lu_unpack", "median", "nanmedian", "kthvalue",
           "mode", "aminmax", "frexp", "histogram"]


class _ValuesIndices(collections.namedtuple("_ValuesIndices", ["values", "indices"])):
    """What max(dim)/min(dim) return: a (values, indices) tuple printed as torch prints it."""
    __slots__ = ()

    def __repr__(self):
        return (f"{_dtypes.shown_module()}.return_types.{type(self).__name__}(\nvalues={self.values!r},"
                f"\nindices={self.indices!r})")


def _named(name):
    """A (values, indices) tuple type that prints as ``return_types.<name>``."""
    doc = f"The ``(values, indices)`` named tuple that ``{name}`` returns, printed as ``return_types.{name}``."
    return type(name, (_ValuesIndices,), {"__slots__": (), "__doc__": doc})


max = _named("max")
min = _named("min")
sort = _named("sort")
topk = _named("topk")
cummax = _named("cummax")
cummin = _named("cummin")


def _factors(name, fields):
    """A named tuple of matrix factors that prints as ``return_types.<name>(U=..., ...)``."""
    def __repr__(self):
        body = ",\n".join(f"{f}={getattr(self, f)!r}" for f in fields)
        return f"{_dtypes.shown_module()}.return_types.{name}(\n{body})"
    doc = f"The ``({', '.join(fields)})`` named tuple that ``{name.replace('_', '.')}`` returns."
    return type(name, (collections.namedtuple(name, fields),), {"__slots__": (), "__doc__": doc, "__repr__": __repr__})


svd = _factors("svd", ["U", "S", "V"])
linalg_svd = _factors("linalg_svd", ["U", "S", "Vh"])
linalg_cholesky_ex = _factors("linalg_cholesky_ex", ["L", "info"])
linalg_slogdet = _factors("linalg_slogdet", ["sign", "logabsdet"])
slogdet = _factors("slogdet", ["sign", "logabsdet"])
linalg_eigh = _factors("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_qr = _factors("linalg_qr", ["Q", "R"])
qr = _factors("qr", ["Q", "R"])
triangular_solve = _factors("triangular_solve", ["solution", "cloned_coefficient"])
linalg_lstsq = _factors("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
linalg_lu_factor = _factors("linalg_lu_factor", ["LU", "pivots"])
linalg_lu_factor_ex = _factors("linalg_lu_factor_ex", ["LU", "pivots", "info"])
linalg_lu = _factors("linalg_lu", ["P", "L", "U"])
lu_unpack = _factors("lu_unpack", ["P", "L", "U"])
_lu_with_info = _factors("_lu_with_info", ["LU", "pivots", "info"])
median = _named("median")
nanmedian = _named("nanmedian")
kthvalue = _named("kthvalue")
mode = _named("mode")


class aminmax(collections.namedtuple("aminmax", ["min", "max"])):
    """The ``(min, max)`` named tuple that ``aminmax`` returns, printed as ``return_types.aminmax``."""
    __slots__ = ()

    def __repr__(self):
        return f"{_dtypes.shown_module()}.return_types.aminmax(\nmin={self.min!r},\nmax={self.max!r})"


class frexp(collections.namedtuple("frexp", ["mantissa", "exponent"])):
    """The ``(mantissa, exponent)`` named tuple that ``frexp`` returns, printed as ``return_types.frexp``."""
    __slots__ = ()

    def __repr__(self):
        return (f"{_dtypes.shown_module()}.return_types.frexp(\nmantissa={self.mantissa!r},"
                f"\nexponent={self.exponent!r})")


class histogram(collections.namedtuple("histogram", ["hist", "bin_edges"])):
    """The ``(hist, bin_edges)`` named tuple that ``histogram`` returns, printed as ``return_types.histogram``."""
    __slots__ = ()

    def __repr__(self):
        return (f"{_dtypes.shown_module()}.return_types.histogram(\nhist={self.hist!r},"
                f"\nbin_edges={self.bin_edges!r})")
