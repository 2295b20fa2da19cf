"""The table of op cases shared by ``test_ops.py`` (rlpipe against NumPy, plus gradcheck) and
``test_cuda_ops.py`` (the CUDA backend against the CPU backend).

A case is a function of rlpipe tensors, the inputs it takes (shapes, or fixed values where the
values matter), the domain its input values are drawn from, and a NumPy reference computing the
same forward from NumPy arrays with plain NumPy / SciPy: the independent truth.
"""
import dataclasses
import operator
import zlib
from typing import Callable

import numpy as np
import scipy.linalg
import scipy.special as sp

import rlpipe as r

# ---- the case record and its inputs ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable             # rlpipe tensors -> a tensor or a tuple of tensors
    shapes: tuple            # per input: a shape, or a fixed float64 array (zeros for prod, ...)
    ref: Callable            # NumPy arrays -> an array or a tuple of arrays
    domain: object = "any"   # one DOMAINS key for every input, or a tuple with one per input
    grad: bool = True        # False: a forward-only case (no gradcheck, no backward comparison)
    out_dtypes: tuple = None  # expected dtype names per output, where not the inputs' float dtype

    def __repr__(self):
        return f"Case({self.name})"


# Values stay off the points where an op is not differentiable (0, integers and half-integers,
# ties between any two inputs' elements, bounds like -0.6 or 0.9) by far more than gradcheck's
# eps=1e-6: "away" domains draw distinct magnitudes from a grid (k + 0.3) / 4, which keeps every
# value >= 0.075 from any multiple of 0.25 and every two magnitudes >= 0.25 apart.
DOMAINS = ("any", "positive", "nonzero", "away_from_ties", "away_positive", "away_negative")
_AWAY_SIGN = {"away_from_ties": 0, "away_positive": 1, "away_negative": -1}


def make_inputs(case, dtype="float64"):
    """The case's input values as NumPy arrays of ``dtype``, the same on every call (seeded by name)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    domains = case.domain if isinstance(case.domain, tuple) else (case.domain,) * len(case.shapes)
    assert len(domains) == len(case.shapes), f"{case.name}: one domain per input"
    n_away = sum(int(np.prod(s)) for s, d in zip(case.shapes, domains) if d in _AWAY_SIGN and not _fixed(s))
    magnitudes = list(rng.permutation((np.arange(n_away) + 0.3) / 4))
    inputs = []
    for shape, domain in zip(case.shapes, domains):
        if _fixed(shape):
            values = np.array(shape, dtype=np.float64)
        elif domain == "any":
            values = rng.uniform(-1.5, 1.5, shape)
        elif domain == "positive":
            values = rng.uniform(0.5, 2.0, shape)
        elif domain == "nonzero":
            values = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)
        elif domain in _AWAY_SIGN:
            n = int(np.prod(shape))
            sign = _AWAY_SIGN[domain] or rng.choice([-1.0, 1.0], n)
            values = (sign * np.array([magnitudes.pop() for _ in range(n)])).reshape(shape)
        else:
            raise ValueError(f"{case.name}: unknown domain {domain!r}; expected one of {DOMAINS}")
        inputs.append(np.asarray(values, dtype=dtype))
    return inputs


def _fixed(shape):
    return isinstance(shape, np.ndarray)


def on(like, data):
    """A constant (index, mask, ...) as a tensor on ``like``'s device, so cases also run on cuda."""
    return r.tensor(data, device=like.device)


# ---- comparing outputs --------------------------------------------------------------------------

TOLERANCE = {"float64": dict(rtol=1e-7, atol=1e-10), "float32": dict(rtol=1e-4, atol=1e-5)}


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def as_numpy(x):
    """A host NumPy copy of a tensor, or the array itself."""
    if isinstance(x, r.Tensor):
        return np.array(x.detach().cpu().numpy())
    return np.asarray(x)


def assert_close(actual, expected, precision, what="output"):
    """Outputs (tensors or arrays, single or tuples) agree in count, shape and value within the
    tolerance of ``precision`` ('float32' or 'float64'); integer and bool outputs exactly."""
    actual, expected = as_tuple(actual), as_tuple(expected)
    assert len(actual) == len(expected), f"{len(actual)} {what}s, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        a, e = as_numpy(a), as_numpy(e)
        assert a.shape == e.shape, f"{what} {k}: shape {a.shape}, expected {e.shape}"
        exact = a.dtype.kind in "biu" and e.dtype.kind in "biu"
        tol = dict(rtol=0, atol=0) if exact else TOLERANCE[precision]
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), equal_nan=True,
                                   err_msg=f"{what} {k}", **tol)


# ---- constants shared by cases and their references ----------------------------------------------

MASK23 = np.array([[True, False, True], [False, False, True]])
MASK34 = np.array([[True, False, False, True], [False, False, False, False], [True, True, False, True]])
ROWS3 = np.array([True, False, True])


def _np_gather(x, dim, index):
    """out[p] = x[p with p[dim] replaced by index[p]]: torch.gather's definition, element by element."""
    out = np.empty(index.shape, dtype=x.dtype)
    for p in np.ndindex(*index.shape):
        q = list(p)
        q[dim] = index[p]
        out[p] = x[tuple(q)]
    return out


def _np_scatter(x, dim, index, src, add=False):
    """torch.scatter / scatter_add's definition: out[p with p[dim] = index[p]] (+)= src[p]."""
    out = x.copy()
    for p in np.ndindex(*index.shape):
        q = list(p)
        q[dim] = index[p]
        v = src[p] if np.ndim(src) else src
        out[tuple(q)] = out[tuple(q)] + v if add else v
    return out


def _rl_index(index, like):
    """A NumPy-style index with its arrays made tensors on ``like``'s device (lists stay lists)."""
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(on(like, i) if isinstance(i, np.ndarray) else i for i in items)
    return items if isinstance(index, tuple) else items[0]


# ---- the cases -------------------------------------------------------------------------------------

CASES = []


def case(name, fn, shapes, ref, domain="any", **kwargs):
    CASES.append(Case(name, fn, tuple(shapes), ref, domain, **kwargs))


# Binary arithmetic: tensor with tensor (broadcasting, 0-d, empty), with a scalar on either side.
_BINARY = [  # name, rlpipe op, NumPy op, domain of the left and of the right operand
    ("add", operator.add, np.add, "any", "any"),
    ("sub", operator.sub, np.subtract, "any", "any"),
    ("mul", operator.mul, np.multiply, "any", "any"),
    ("div", operator.truediv, np.true_divide, "any", "nonzero"),
    ("floordiv", operator.floordiv, np.floor_divide, "any", "nonzero"),
    ("mod", operator.mod, np.mod, "any", "nonzero"),
    ("pow", operator.pow, np.power, "positive", "any"),
]
# torch has no derivative for floor_divide, nor for number % tensor (test_ops checks that they raise)
NO_DERIVATIVE = {"floordiv", "mod_scalar_tensor"}
for _name, _op, _np_op, _left, _right in _BINARY:
    for _shapes in [((3, 1), (4,)), ((2, 3), (1, 3)), ((2, 3), ()), ((), (2, 2))]:
        _tag = "_".join("x".join(map(str, s)) or "0d" for s in _shapes)
        case(f"{_name}_{_tag}", _op, _shapes, _np_op, (_left, _right), grad=_name not in NO_DERIVATIVE)
    case(f"{_name}_tensor_scalar", lambda x, op=_op: op(x, 1.7), [(2, 3)], lambda x, op=_np_op: op(x, 1.7), _left,
         grad=_name not in NO_DERIVATIVE)
    case(f"{_name}_scalar_tensor", lambda x, op=_op: op(1.7, x), [(2, 3)], lambda x, op=_np_op: op(1.7, x), _right,
         grad=_name not in NO_DERIVATIVE and f"{_name}_scalar_tensor" not in NO_DERIVATIVE)
case("add_empty", operator.add, [(0, 3), (3,)], np.add)
case("mul_empty_0d", operator.mul, [(2, 0), ()], np.multiply)
case("add_alpha", lambda x, y: r.add(x, y, alpha=2), [(2, 3), (3,)], lambda x, y: x + 2 * y)
case("sub_alpha", lambda x, y: x.sub(y, alpha=0.5), [(2, 3), (2, 1)], lambda x, y: x - 0.5 * y)
case("mul_int_scalar", lambda x: x * 2, [(2, 3)], lambda x: x * 2)
case("true_divide", r.true_divide, [(2, 3), (2, 1)], np.true_divide, ("any", "nonzero"))
case("div_trunc", lambda x, y: r.div(x, y, rounding_mode="trunc"), [(2, 3), (3,)], lambda x, y: np.trunc(x / y),
     ("any", "nonzero"))
case("div_floor", lambda x, y: x.div(y, rounding_mode="floor"), [(2, 3), (3,)], lambda x, y: np.floor(x / y),
     ("any", "nonzero"))
case("pow_int_scalar", lambda x: x ** 3, [(2, 3)], lambda x: x ** 3)
case("pow_negative_int_scalar", lambda x: x ** -2, [(2, 3)], lambda x: x ** -2.0, "nonzero")
case("pow_zero_scalar", lambda x: x ** 0, [(2, 3)], lambda x: x ** 0)
case("pow_int_base", lambda x: 2 ** x, [(2, 3)], lambda x: 2.0 ** x)
case("pow_sqrt_method", lambda x: x.pow(0.5), [(2, 3)], np.sqrt, "positive")

# Elementwise functions.
_SQRT_2_OVER_PI = np.sqrt(2 / np.pi)
_UNARY = [  # name, rlpipe function, NumPy reference, domain
    ("neg", lambda x: -x, np.negative, "any"),
    ("neg_method", lambda x: x.neg(), np.negative, "any"),
    ("abs", abs, np.abs, "away_from_ties"),
    ("abs_method", lambda x: x.abs(), np.abs, "away_from_ties"),
    ("sign", lambda x: x.sign(), np.sign, "away_from_ties"),
    ("reciprocal", lambda x: x.reciprocal(), np.reciprocal, "nonzero"),
    ("exp", lambda x: x.exp(), np.exp, "any"),
    ("log", lambda x: x.log(), np.log, "positive"),
    ("log2", r.log2, np.log2, "positive"),
    ("log10", r.log10, np.log10, "positive"),
    ("log1p", lambda x: x.log1p(), np.log1p, "positive"),
    ("expm1", lambda x: x.expm1(), np.expm1, "any"),
    ("sqrt", lambda x: x.sqrt(), np.sqrt, "positive"),
    ("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), "positive"),
    ("square", r.square, np.square, "any"),
    ("sin", lambda x: x.sin(), np.sin, "any"),
    ("cos", r.cos, np.cos, "any"),
    ("tanh", lambda x: x.tanh(), np.tanh, "any"),
    ("sigmoid", lambda x: x.sigmoid(), sp.expit, "any"),
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), "away_from_ties"),
    ("leaky_relu", r.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x), "away_from_ties"),
    ("leaky_relu_slope", lambda x: r.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x), "away_from_ties"),
    ("gelu", r.gelu, lambda x: 0.5 * x * (1 + sp.erf(x / np.sqrt(2))), "any"),
    ("gelu_tanh", lambda x: r.gelu(x, approximate="tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))), "any"),
    ("softplus", r.softplus, lambda x: np.log1p(np.exp(x)), "any"),
    ("softplus_beta_threshold", lambda x: r.softplus(x, beta=2, threshold=1),  # linear where 2x > 1
     lambda x: np.where(2 * x > 1, x, np.log1p(np.exp(2 * x)) / 2), "away_from_ties"),
    ("erf", lambda x: x.erf(), sp.erf, "any"),
    ("floor", lambda x: x.floor(), np.floor, "away_from_ties"),
    ("ceil", lambda x: x.ceil(), np.ceil, "away_from_ties"),
    ("round", lambda x: x.round(), np.round, "away_from_ties"),
    ("round_decimals", lambda x: r.round(x, decimals=1), lambda x: np.round(x, 1), "away_from_ties"),
    ("trunc", lambda x: x.trunc(), np.trunc, "away_from_ties"),
]
for _name, _fn, _ref, _domain in _UNARY:
    case(_name, _fn, [(2, 3)], _ref, _domain)
case("exp_0d", r.exp, [()], np.exp)
case("exp_of_transpose", lambda x: x.T.exp(), [(2, 3)], lambda x: np.exp(x.T))
case("fix", r.fix, [(2, 3)], np.trunc, "away_from_ties")
case("tanh_empty", r.tanh, [(0, 3)], np.tanh)

# clamp with scalar and tensor bounds; maximum, minimum, where.
_away = "away_from_ties"
case("clamp_scalars", lambda x: x.clamp(-0.6, 0.9), [(2, 3)], lambda x: np.clip(x, -0.6, 0.9), _away)
case("clamp_min_scalar", lambda x: x.clamp(min=-0.2), [(2, 3)], lambda x: np.maximum(x, -0.2), _away)
case("clamp_max_scalar", lambda x: r.clamp(x, max=0.4), [(2, 3)], lambda x: np.minimum(x, 0.4), _away)
case("clamp_min_function", lambda x: r.clamp_min(x, 0.4), [(2, 3)], lambda x: np.maximum(x, 0.4), _away)
case("clamp_max_function", lambda x: x.clamp_max(-0.4), [(2, 3)], lambda x: np.minimum(x, -0.4), _away)
case("clip_scalars", lambda x: r.clip(x, -0.6, 0.9), [(2, 3)], lambda x: np.clip(x, -0.6, 0.9), _away)
case("clamp_scalars_crossed", lambda x: x.clamp(0.5, -0.5), [(2, 3)], lambda x: np.full_like(x, -0.5), _away)
case("clamp_tensors", lambda x, lo, hi: x.clamp(lo, hi), [(2, 3), (3,), (2, 1)],
     lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), (_away, "away_negative", "away_positive"))
case("clamp_min_tensor", lambda x, lo: x.clamp(min=lo), [(2, 3), (2, 1)], np.maximum, _away)
case("clamp_max_tensor_0d", lambda x, hi: r.clamp(x, max=hi), [(2, 3), ()], np.minimum, _away)
case("clamp_tensors_crossed", lambda x, lo, hi: x.clamp(lo, hi), [(2, 3), (3,), (2, 1)],  # min > max: max wins
     lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), (_away, "away_positive", "away_negative"))
case("maximum", r.maximum, [(3, 1), (4,)], np.maximum, _away)
case("minimum", lambda x, y: x.minimum(y), [(2, 3), ()], np.minimum, _away)
case("max_binary", r.max, [(2, 3), (1, 3)], np.maximum, _away)
case("min_binary", lambda x, y: x.min(y), [(3, 1), (3,)], np.minimum, _away)
case("where", lambda x, y: r.where(on(x, MASK23), x, y), [(2, 3), (3,)], lambda x, y: np.where(MASK23, x, y))
case("where_broadcast", lambda x, y: r.where(on(x, ROWS3[:, None]), x, y), [(1, 2), ()],
     lambda x, y: np.where(ROWS3[:, None], x, y))
case("where_scalar", lambda x: r.where(on(x, MASK23), x, 0.5), [(2, 3)], lambda x: np.where(MASK23, x, 0.5))
case("where_method", lambda x, y: x.where(on(x, MASK23), y), [(2, 3), (2, 1)], lambda x, y: np.where(MASK23, x, y))

# Reductions.
_ZEROS23 = np.array([[1.5, 0.0, -2.0], [0.0, 0.0, 0.7]])  # row 0 has one zero, row 1 two
case("sum", lambda x: x.sum(), [(2, 3)], np.sum)
case("sum_dim", lambda x: x.sum(1), [(2, 3)], lambda x: x.sum(1))
case("sum_negative_dim_keepdim", lambda x: r.sum(x, -2, keepdim=True), [(2, 3)], lambda x: x.sum(-2, keepdims=True))
case("sum_dims_keepdim", lambda x: x.sum((0, 2), keepdim=True), [(2, 3, 2)], lambda x: x.sum((0, 2), keepdims=True))
case("sum_0d", lambda x: x.sum(), [()], np.sum)
case("sum_negative_dims", lambda x: x.sum((-1, 0)), [(2, 3, 2)], lambda x: x.sum((0, 2)))
case("sum_of_transpose", lambda x: x.T.sum(0), [(2, 3)], lambda x: x.sum(1))
case("sum_dtype", lambda x: x.sum(1, dtype=r.float64), [(2, 3)], lambda x: x.sum(1), out_dtypes=("float64",))
case("nansum", lambda x: r.nansum(x, 0), [(2, 3)], lambda x: np.nansum(x, 0))
case("sum_empty_dim", lambda x: x.sum(0), [(0, 3)], lambda x: x.sum(0))
case("mean", lambda x: x.mean(), [(2, 3)], np.mean)
case("mean_dim_keepdim", lambda x: x.mean(-1, keepdim=True), [(2, 3)], lambda x: x.mean(-1, keepdims=True))
case("mean_0d", lambda x: x.mean(), [()], np.mean)
case("mean_dims", lambda x: r.mean(x, (0, 2)), [(2, 3, 2)], lambda x: x.mean((0, 2)))
case("prod", lambda x: x.prod(), [(2, 3)], np.prod)
case("prod_dim", lambda x: x.prod(1), [(2, 3)], lambda x: x.prod(1))
case("prod_0d", lambda x: x.prod(), [()], np.prod)
case("prod_dim_keepdim", lambda x: r.prod(x, 0, keepdim=True), [(3, 2)], lambda x: x.prod(0, keepdims=True))
case("prod_one_zero", lambda x: x.prod(), [np.array([[1.5, 0.0, -2.0], [0.5, 1.2, 0.7]])], np.prod)
case("prod_two_zeros", lambda x: x.prod(), [np.array([0.0, 1.3, 0.0, -0.6])], np.prod)
case("prod_dim_zeros", lambda x: x.prod(1), [_ZEROS23], lambda x: x.prod(1))
case("max", lambda x: x.max(), [(2, 3)], np.max, _away)
case("min", r.min, [(2, 3)], np.min, _away)
case("max_0d", lambda x: x.max(), [()], np.max)
case("max_dim", lambda x: x.max(1), [(2, 3)], lambda x: (x.max(1), x.argmax(1)), _away)
case("max_dim_negative", lambda x: r.max(x, dim=-1), [(2, 3, 2)], lambda x: (x.max(-1), x.argmax(-1)), _away)
case("max_dim_0d", lambda x: x.max(0), [()], lambda x: (x, np.array(0)))
case("min_dim_keepdim", lambda x: x.min(0, keepdim=True), [(2, 3)],
     lambda x: (x.min(0, keepdims=True), x.argmin(0, keepdims=True)), _away)
case("amax", lambda x: x.amax(), [(2, 3)], np.max, _away)
case("amax_dims", lambda x: x.amax((0, 2)), [(2, 3, 2)], lambda x: x.max((0, 2)), _away)
case("amax_negative_dim", lambda x: x.amax(-1), [(2, 3)], lambda x: x.max(-1), _away)
case("amin_dim_keepdim", lambda x: r.amin(x, 1, keepdim=True), [(2, 3)], lambda x: x.min(1, keepdims=True), _away)
case("var", lambda x: x.var(), [(2, 3)], lambda x: np.var(x, ddof=1))
for _c in (0, 1, 2):
    case(f"var_correction{_c}_dim", lambda x, c=_c: x.var(1, correction=c), [(2, 3)],
         lambda x, c=_c: np.var(x, axis=1, ddof=c))
    case(f"std_correction{_c}_dim_keepdim", lambda x, c=_c: x.std(0, keepdim=True, correction=c), [(4, 2)],
         lambda x, c=_c: np.std(x, axis=0, ddof=c, keepdims=True))
    case(f"std_correction{_c}", lambda x, c=_c: r.std(x, correction=c), [(2, 3)], lambda x, c=_c: np.std(x, ddof=c))
case("var_unbiased_false_dims", lambda x: x.var((0, 1), unbiased=False), [(2, 2, 2)], lambda x: np.var(x, (0, 1)))
case("var_mean", lambda x: r.var_mean(x, 1), [(2, 3)], lambda x: (np.var(x, 1, ddof=1), np.mean(x, 1)))
case("std_mean_correction0", lambda x: r.std_mean(x, 0, correction=0), [(3, 2)],
     lambda x: (np.std(x, 0), np.mean(x, 0)))
case("logsumexp_dim", lambda x: x.logsumexp(1), [(2, 3)], lambda x: sp.logsumexp(x, 1))
case("logsumexp_dims_keepdim", lambda x: r.logsumexp(x, (0, 1), keepdim=True), [(2, 3)],
     lambda x: sp.logsumexp(x, (0, 1), keepdims=True))
case("logsumexp_0d", lambda x: r.logsumexp(x, 0), [()], lambda x: x)
case("norm", lambda x: x.norm(), [(2, 3)], lambda x: np.linalg.norm(x.ravel()))
case("norm_fro", lambda x: r.norm(x, "fro"), [(2, 3)], lambda x: np.linalg.norm(x, "fro"))
case("norm_dim_keepdim", lambda x: x.norm(dim=1, keepdim=True), [(2, 3)],
     lambda x: np.linalg.norm(x, axis=1, keepdims=True))
case("norm_p1", lambda x: x.norm(p=1), [(2, 3)], lambda x: np.linalg.norm(x.ravel(), 1), _away)
case("norm_p3_dim", lambda x: x.norm(3, dim=0), [(2, 3)], lambda x: np.linalg.norm(x, 3, axis=0), _away)
case("norm_inf", lambda x: x.norm(float("inf")), [(2, 3)], lambda x: np.linalg.norm(x.ravel(), np.inf), _away)
case("norm_negative_inf", lambda x: x.norm(float("-inf")), [(2, 3)],
     lambda x: np.linalg.norm(x.ravel(), -np.inf), _away)
case("norm_inf_dim", lambda x: r.norm(x, float("inf"), dim=1), [(2, 3)], lambda x: np.linalg.norm(x, np.inf, 1), _away)
case("cumsum", lambda x: x.cumsum(0), [(2, 3)], lambda x: np.cumsum(x, 0))
case("cumsum_negative_dim", lambda x: r.cumsum(x, -1), [(2, 3)], lambda x: np.cumsum(x, -1))
case("cumsum_0d", lambda x: x.cumsum(0), [()], lambda x: x)
case("cumprod", lambda x: x.cumprod(1), [(2, 3)], lambda x: np.cumprod(x, 1))
case("cumprod_of_strided", lambda x: x[:, ::2].cumprod(1), [(2, 5)], lambda x: np.cumprod(x[:, ::2], 1))
case("cumprod_0d", lambda x: x.cumprod(0), [()], lambda x: x)
case("cumprod_dim0", lambda x: r.cumprod(x, 0), [(3, 2)], lambda x: np.cumprod(x, 0))
case("cumprod_zeros", lambda x: x.cumprod(1), [np.array([[1.5, 0.0, -2.0, 0.8], [0.0, 1.3, 0.0, -0.6]])],
     lambda x: np.cumprod(x, 1))
case("softmax", lambda x: x.softmax(1), [(2, 3)], lambda x: sp.softmax(x, 1))
case("softmax_dim0", lambda x: r.softmax(x, 0), [(2, 3)], lambda x: sp.softmax(x, 0))
case("softmax_0d", lambda x: x.softmax(0), [()], lambda x: np.ones_like(x))
case("softmax_dtype", lambda x: x.softmax(1, dtype=r.float64), [(2, 3)], lambda x: sp.softmax(x, 1),
     out_dtypes=("float64",))
case("log_softmax", lambda x: x.log_softmax(-1), [(2, 3)], lambda x: sp.log_softmax(x, -1))
case("log_softmax_dim0", lambda x: r.log_softmax(x, 0), [(3, 2)], lambda x: sp.log_softmax(x, 0))

# Shapes and views.
case("reshape", lambda x: x.reshape(3, 2), [(2, 3)], lambda x: x.reshape(3, 2))
case("reshape_infer", lambda x: r.reshape(x, (-1,)), [(2, 3)], lambda x: x.reshape(-1))
case("reshape_empty", lambda x: x.reshape(3, 0), [(0, 3)], lambda x: x.reshape(3, 0))
case("reshape_0d", lambda x: x.reshape(1, 1), [()], lambda x: x.reshape(1, 1))
case("view", lambda x: x.view(6), [(2, 3)], lambda x: x.reshape(6))
case("view_infer", lambda x: x.view(-1, 2), [(2, 3)], lambda x: x.reshape(-1, 2))
case("flatten", lambda x: x.flatten(), [(2, 3, 2)], lambda x: x.reshape(-1))
case("flatten_start", lambda x: r.flatten(x, 1), [(2, 3, 2)], lambda x: x.reshape(2, 6))
case("flatten_0d", lambda x: x.flatten(), [()], lambda x: x.reshape(1))
case("unflatten", lambda x: x.unflatten(1, (2, 2)), [(2, 4)], lambda x: x.reshape(2, 2, 2))
case("unflatten_infer", lambda x: r.unflatten(x, 0, (-1, 2)), [(4, 2)], lambda x: x.reshape(2, 2, 2))
case("permute", lambda x: x.permute(2, 0, 1), [(2, 3, 2)], lambda x: x.transpose(2, 0, 1))
case("permute_tuple_negative", lambda x: r.permute(x, (-1, 0, 1)), [(2, 3, 2)], lambda x: x.transpose(2, 0, 1))
case("transpose", lambda x: x.transpose(0, 2), [(2, 3, 2)], lambda x: x.swapaxes(0, 2))
case("t", lambda x: x.t(), [(2, 3)], lambda x: x.T)
case("T", lambda x: x.T, [(2, 3)], lambda x: x.T)
case("mT", lambda x: x.mT, [(2, 2, 3)], lambda x: x.swapaxes(-1, -2))
case("swapaxes", lambda x: r.swapaxes(x, 0, -1), [(2, 3, 2)], lambda x: x.swapaxes(0, -1))
case("movedim", lambda x: x.movedim(0, -1), [(2, 3, 2)], lambda x: np.moveaxis(x, 0, -1))
case("squeeze", lambda x: x.squeeze(), [(2, 1, 3, 1)], np.squeeze)
case("squeeze_dim", lambda x: x.squeeze(1), [(2, 1, 3)], lambda x: x.squeeze(1))
case("squeeze_dims", lambda x: x.squeeze((0, 2)), [(1, 2, 1)], lambda x: x.reshape(2))
case("squeeze_0d", lambda x: x.squeeze(0), [()], lambda x: x)
case("squeeze_dim_not_one", lambda x: x.squeeze(0), [(2, 1, 3)], lambda x: x)
case("unsqueeze", lambda x: x.unsqueeze(0), [(2, 3)], lambda x: x[None])
case("unsqueeze_negative", lambda x: r.unsqueeze(x, -1), [(2, 3)], lambda x: x[..., None])
case("unsqueeze_0d", lambda x: x.unsqueeze(0), [()], lambda x: x.reshape(1))
case("expand", lambda x: x.expand(2, 3, 4), [(3, 1)], lambda x: np.broadcast_to(x, (2, 3, 4)))
case("expand_keep", lambda x: x.expand(-1, 4), [(3, 1)], lambda x: np.broadcast_to(x, (3, 4)))
case("expand_0d", lambda x: x.expand(2, 2), [()], lambda x: np.broadcast_to(x, (2, 2)))
case("expand_as", lambda x, y: x.expand_as(y), [(3, 1), (3, 2)], lambda x, y: np.broadcast_to(x, y.shape))
case("view_as", lambda x, y: x.view_as(y) * y, [(2, 3), (3, 2)], lambda x, y: x.reshape(3, 2) * y)
case("broadcast_tensors", lambda x, y: r.broadcast_tensors(x, y), [(3, 1), (2,)],
     lambda x, y: tuple(np.broadcast_arrays(x, y)))
case("broadcast_to", lambda x: r.broadcast_to(x, (2, 3)), [(3,)], lambda x: np.broadcast_to(x, (2, 3)))
case("repeat", lambda x: x.repeat(2, 1, 2), [(2, 3)], lambda x: np.tile(x, (2, 1, 2)))
case("repeat_same_ndim", lambda x: x.repeat(1, 3), [(2, 1)], lambda x: np.tile(x, (1, 3)))
case("flip", lambda x: x.flip(1), [(2, 3)], lambda x: np.flip(x, 1))
case("flip_dims", lambda x: r.flip(x, (0, -1)), [(2, 3, 2)], lambda x: np.flip(x, (0, 2)))
case("roll", lambda x: x.roll(1, 1), [(2, 3)], lambda x: np.roll(x, 1, 1))
case("roll_flat", lambda x: x.roll(-2), [(2, 3)], lambda x: np.roll(x, -2))
case("roll_dims", lambda x: r.roll(x, (1, -1), (0, 1)), [(2, 3)], lambda x: np.roll(x, (1, -1), (0, 1)))
case("narrow", lambda x: x.narrow(1, 1, 2), [(2, 3)], lambda x: x[:, 1:3])
case("narrow_negative_start", lambda x: r.narrow(x, 0, -2, 2), [(3, 2)], lambda x: x[1:3])
case("select", lambda x: x.select(0, 1), [(2, 3)], lambda x: x[1])
case("select_negative", lambda x: x.select(1, -1), [(2, 3)], lambda x: x[:, -1])

# Joining and splitting.
case("cat", lambda x, y: r.cat([x, y]), [(2, 3), (1, 3)], lambda x, y: np.concatenate([x, y]))
case("cat_dim1_three", lambda x, y, z: r.cat((x, y, z), dim=1), [(2, 1), (2, 3), (2, 2)],
     lambda x, y, z: np.concatenate([x, y, z], 1))
case("cat_empty", lambda x, y: r.cat([x, y], 0), [(0, 3), (2, 3)], lambda x, y: np.concatenate([x, y]))
case("cat_legacy_empty_1d", lambda x, e: r.cat([x, e], 1), [(2, 3), (0,)], lambda x, e: x)
case("hstack", lambda x, y: r.hstack([x, y]), [(2, 1), (2, 2)], lambda x, y: np.hstack([x, y]))
case("vstack_1d", lambda x, y: r.vstack([x, y]), [(3,), (2, 3)], lambda x, y: np.vstack([x, y]))
case("stack", lambda x, y: r.stack([x, y]), [(2, 3), (2, 3)], lambda x, y: np.stack([x, y]))
case("stack_last", lambda x, y: r.stack((x, y), dim=-1), [(2, 3), (2, 3)], lambda x, y: np.stack([x, y], -1))
case("stack_0d", lambda x, y: r.stack([x, y]), [(), ()], lambda x, y: np.stack([x, y]))
case("split", lambda x: x.split(2, dim=1), [(2, 5)], lambda x: tuple(np.split(x, [2, 4], 1)))
case("split_sections", lambda x: r.split(x, [1, 3, 1], 1), [(2, 5)], lambda x: tuple(np.split(x, [1, 4], 1)))
case("split_larger_than_dim", lambda x: x.split(4), [(3,)], lambda x: (x,))
case("chunk", lambda x: x.chunk(2), [(3, 2)], lambda x: tuple(np.split(x, [2])))
case("chunk_uneven", lambda x: x.chunk(3), [(5,)], lambda x: tuple(np.split(x, [2, 4])))
case("chunk_fewer_than_asked", lambda x: r.chunk(x, 4), [(6,)], lambda x: tuple(np.split(x, [2, 4])))
case("tensor_split", lambda x: r.tensor_split(x, 3, dim=1), [(2, 5)], lambda x: tuple(np.array_split(x, 3, 1)))
case("tensor_split_indices", lambda x: x.tensor_split([1, 4]), [(5,)], lambda x: tuple(np.split(x, [1, 4])))
case("unbind_negative_dim", lambda x: r.unbind(x, -1), [(2, 2)], lambda x: (x[:, 0], x[:, 1]))
case("unbind", lambda x: x.unbind(1), [(2, 3)], lambda x: tuple(np.moveaxis(x, 1, 0)))
case("unbind_sum", lambda x: sum(x.unbind(0)), [(3, 2)], lambda x: x.sum(0))

# Indexing: x[index] and (through an out-of-place wrapper) x[index] = value.
_GETITEM = [  # name, input shape, a NumPy index (its arrays become tensors on the input's device)
    ("int", (3, 4), 1),
    ("negative_int", (3, 4), -1),
    ("int_pair", (3, 4), (1, 2)),
    ("slice", (3, 4), slice(1, None)),
    ("slice_step", (3, 4), (slice(None), slice(None, None, 2))),
    ("slice_step_start", (3, 4), (slice(0, 3, 2), slice(1, None, 2))),
    ("none", (3, 4), None),
    ("ellipsis", (2, 3, 2), (Ellipsis, 1)),
    ("none_ellipsis_slice", (2, 3, 2), (None, Ellipsis, slice(0, 2))),
    ("int_tensor", (3, 4), np.array([2, 0, 2])),
    ("int_tensor_negative", (3, 4), np.array([-1, 0])),
    ("int_tensor_2d", (3, 4), np.array([[0, 1], [2, 2]])),
    ("int_tensor_0d", (3, 4), np.array(1)),
    ("bool_tensor", (3, 4), MASK34),
    ("bool_tensor_rows", (3, 4), ROWS3),
    ("list", (3, 4), [0, 2]),
    ("list_pair", (3, 4), ([0, 2], [1, 3])),
    ("list_empty", (3, 4), []),
    ("slice_int_tensor", (3, 4), (slice(1, None), np.array([0, 3]))),
    ("int_tensor_slice_step", (3, 4), (np.array([2, 0]), slice(None, None, 2))),
    ("int_list", (3, 4), (1, [0, 3])),
    ("separated_advanced", (2, 3, 2), (np.array([0, 1]), slice(None), np.array([1, 0]))),
    ("none_int_tensor_ellipsis", (2, 3, 2), (None, np.array([1, 0]), Ellipsis)),
    ("bool_rows_slice", (3, 4), (ROWS3, slice(1, 3))),
    ("0d_none", (), None),
    ("0d_ellipsis", (), Ellipsis),
    ("0d_empty_tuple", (), ()),
]
for _name, _shape, _index in _GETITEM:
    case(f"getitem_{_name}", lambda x, i=_index: x[_rl_index(i, x)], [_shape], lambda x, i=_index: x[i])
# torch applies integer indices first, so the list's dim stays in place; NumPy would move it to the front
case("getitem_int_slice_list", lambda x: x[0, :, [1, 0]], [(2, 3, 2)], lambda x: x[0][:, [1, 0]])

_SETITEM = [  # name, input shape, index, value shape (None: the scalar 0.5)
    ("int", (3, 4), 0, (4,)),
    ("slice_scalar", (3, 4), (slice(None), 1), None),
    ("broadcast_value", (3, 4), slice(1, None), (1, 4)),
    ("step", (3, 4), (slice(None, None, 2), slice(1, None, 2)), (2, 2)),
    ("0d_value", (3, 4), (1, 2), ()),
    ("bool_tensor_scalar", (3, 4), MASK34, None),
    ("bool_tensor_values", (3, 4), MASK34, (int(MASK34.sum()),)),
    ("int_tensor", (3, 4), np.array([2, 0]), (2, 4)),
    ("list_pair", (3, 4), ([0, 2], [1, 3]), (2,)),
    ("ellipsis", (2, 3, 2), (Ellipsis, 0), (3,)),
]


def _setitem_case(name, shape, index, value_shape):
    def fn(x, *value):
        y = x * 1
        y[_rl_index(index, y)] = value[0] if value else 0.5
        return y

    def ref(x, *value):
        y = x.copy()
        y[index] = value[0] if value else 0.5
        return y
    case(f"setitem_{name}", fn, [shape] + ([] if value_shape is None else [value_shape]), ref)


for _args in _SETITEM:
    _setitem_case(*_args)

# gather, scatter, index_select, masked_fill, take_along_dim.
_IDX23 = np.array([[0, 2], [1, 0]])
_IDX_REPEAT = np.array([[0, 0, 0], [2, 2, 1]])
_IDX_ROWS = np.array([[2, 0, 1], [0, 0, 2]])  # gather along dim 0 of a (3, 3), index smaller than the input
_IDX_SCATTER = np.array([[0, 2], [3, 1], [1, 0]])  # into (3, 4) along dim 1, no repeats within a row
_IDX_SCATTER_ADD = np.array([[0, 0, 3], [1, 1, 1]])
_IDX_DIM0 = np.array([[1, 0, 1]])  # into (2, 3) along dim 0
case("gather", lambda x: x.gather(1, on(x, _IDX23)), [(2, 3)], lambda x: _np_gather(x, 1, _IDX23))
case("gather_repeated", lambda x: r.gather(x, 1, on(x, _IDX_REPEAT)), [(2, 3)],
     lambda x: _np_gather(x, 1, _IDX_REPEAT))
case("gather_dim0_smaller_index", lambda x: x.gather(0, on(x, _IDX_ROWS)), [(3, 3)],
     lambda x: _np_gather(x, 0, _IDX_ROWS))
case("scatter", lambda x, s: x.scatter(1, on(x, _IDX_SCATTER), s), [(3, 4), (3, 3)],
     lambda x, s: _np_scatter(x, 1, _IDX_SCATTER, s))
case("scatter_value", lambda x: x.scatter(1, on(x, _IDX_SCATTER), 0.5), [(3, 4)],
     lambda x: _np_scatter(x, 1, _IDX_SCATTER, 0.5))
case("scatter_dim0", lambda x, s: r.scatter(x, 0, on(x, _IDX_DIM0), s), [(2, 3), (2, 3)],
     lambda x, s: _np_scatter(x, 0, _IDX_DIM0, s))
case("scatter_add", lambda x, s: x.scatter_add(1, on(x, _IDX_SCATTER_ADD), s), [(2, 4), (2, 3)],
     lambda x, s: _np_scatter(x, 1, _IDX_SCATTER_ADD, s, add=True))
case("scatter_reduce_add", lambda x, s: x.scatter(1, on(x, _IDX_SCATTER_ADD), s, reduce="add"), [(2, 4), (2, 3)],
     lambda x, s: _np_scatter(x, 1, _IDX_SCATTER_ADD, s, add=True))
case("masked_select", lambda x: x.masked_select(on(x, MASK23)), [(2, 3)], lambda x: x[MASK23])
case("masked_select_broadcast", lambda x: r.masked_select(x, on(x, MASK23)), [(3,)],
     lambda x: np.broadcast_to(x, (2, 3))[MASK23])
case("index_select", lambda x: x.index_select(0, on(x, [2, 0, 2])), [(3, 2)], lambda x: x[[2, 0, 2]])
case("index_select_dim1", lambda x: r.index_select(x, 1, on(x, [1, 1])), [(2, 3)], lambda x: x[:, [1, 1]])
case("masked_fill", lambda x: x.masked_fill(on(x, MASK23), 0.5), [(2, 3)], lambda x: np.where(MASK23, 0.5, x))
case("masked_fill_broadcast_mask", lambda x: r.masked_fill(x, on(x, MASK23[1]), -1.0), [(2, 3)],
     lambda x: np.where(MASK23[1], -1.0, x))
case("masked_fill_tensor_value", lambda x, v: x.masked_fill(on(x, MASK23), v), [(2, 3), ()],
     lambda x, v: np.where(MASK23, v, x))
case("take_along_dim", lambda x: x.take_along_dim(on(x, _IDX23), 1), [(2, 3)],
     lambda x: np.take_along_axis(x, _IDX23, 1))
case("take_along_dim_broadcast", lambda x: r.take_along_dim(x, on(x, _IDX23[:1]), dim=1), [(2, 3)],
     lambda x: np.take_along_axis(x, _IDX23[:1], 1))
case("take_along_dim_flat", lambda x: r.take_along_dim(x, on(x, [5, 0, 3])), [(2, 3)],
     lambda x: np.take_along_axis(x, np.array([5, 0, 3]), None))

# Matrix products and einsum.
_MATMUL = [
    ("vec_vec", (3,), (3,)),
    ("mat_vec", (2, 3), (3,)),
    ("vec_mat", (3,), (3, 2)),
    ("mat_mat", (2, 3), (3, 2)),
    ("batched_broadcast", (2, 1, 2, 3), (3, 3, 2)),
    ("batch_vec", (2, 2, 3), (3,)),
    ("vec_batch", (3,), (2, 3, 2)),
    ("batch_mat", (2, 2, 3), (3, 2)),
]
for _name, _a, _b in _MATMUL:
    case(f"matmul_{_name}", operator.matmul, [_a, _b], np.matmul)
case("matmul_function", r.matmul, [(2, 2, 3), (1, 3, 2)], np.matmul)
case("matmul_of_transposes", lambda a, b: a.mT @ b.T, [(2, 3, 2), (2, 3)], lambda a, b: a.swapaxes(-1, -2) @ b.T)
case("mm", lambda a, b: a.mm(b), [(2, 3), (3, 2)], np.matmul)
case("bmm", r.bmm, [(2, 2, 3), (2, 3, 2)], np.matmul)
case("dot", r.dot, [(3,), (3,)], np.dot)
case("outer", lambda a, b: a.outer(b), [(2,), (3,)], np.outer)
_EINSUM = [  # equation, operand shapes[, a name suffix] (the reference is np.einsum of the same equation)
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij,jk", [(2, 3), (3, 2)]),
    ("ji", [(2, 3)]),
    ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ijk->kji", [(2, 3, 2)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("Ab,bC->AC", [(2, 3), (3, 2)]),
    ("ij, jk -> ik", [(2, 3), (3, 2)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 2)]),
    ("...ij,jk", [(2, 2, 3), (3, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 1, 2), (3, 2, 1)], "_ranks_differ"),  # ellipses align from the right
    ("i...->...", [(2, 3)]),
    ("b...,b->...", [(2, 3), (2,)]),
]
for _eq, _shapes, *_suffix in _EINSUM:
    case(f"einsum_{_eq}{''.join(_suffix)}", lambda *ops, eq=_eq: r.einsum(eq, *ops), _shapes,
         lambda *ops, eq=_eq: np.einsum(eq, *ops))
case("einsum_operand_list", lambda a, b: r.einsum("ij,jk->ik", [a, b]), [(2, 3), (3, 2)],
     lambda a, b: np.einsum("ij,jk->ik", a, b))
case("einsum_ii->i", lambda x: r.einsum("ii->i", x), [(3, 3)], lambda x: np.einsum("ii->i", x), grad=False)
case("einsum_ii", lambda x: r.einsum("ii", x), [(3, 3)], lambda x: np.einsum("ii", x), grad=False)


# In-place ops on non-leaf tensors (and on their views).
def _inplace_chain(x, z):
    y = x * 1
    y.mul_(z)
    y.add_(1)
    y[0].mul_(2)
    return y


def _inplace_chain_ref(x, z):
    y = x * z + 1
    y[0] *= 2
    return y


def _inplace_operators(x, z):
    y = x * 1
    y += z
    y *= 2
    y -= 0.5
    y /= 1.5
    y **= 2
    return y


def _inplace_keywords(x, z):
    y = x * 1
    y.sub_(z, alpha=2)
    y.div_(z)
    return y


def _inplace_unary(x):
    y = x * 1
    y.tanh_().mul_(3).sigmoid_()
    return y


def _inplace_view_of_view(x, z):
    y = x * 1
    y.transpose(0, 1)[1].sub_(z)
    return y


def _inplace_view_of_view_ref(x, z):
    y = x.copy()
    y[:, 1] -= z
    return y


def _inplace_returns_view(x):
    y = x * 1
    v = y[:, 1:]
    v.mul_(2)
    return y, v


def _inplace_fill_copy(x, z):
    y = x * 1
    y[0].fill_(1.5)
    y[:, 2].copy_(z)
    return y


def _inplace_fill_copy_ref(x, z):
    y = x.copy()
    y[0] = 1.5
    y[:, 2] = z
    return y


def _inplace_masked_scatter(x, s):
    y = x * 1
    y.masked_fill_(on(y, MASK23), 0.25)
    y.scatter_add_(1, on(y, _IDX23), s)
    return y


def _inplace_setitem_on_view(x, v):
    y = x * 1
    y[1][0:2] = v
    return y


def _inplace_setitem_on_view_ref(x, v):
    y = x.copy()
    y[1, 0:2] = v
    return y


case("inplace_chain", _inplace_chain, [(2, 3), (3,)], _inplace_chain_ref)
case("inplace_operators", _inplace_operators, [(2, 3), (2, 1)], lambda x, z: (((x + z) * 2 - 0.5) / 1.5) ** 2)
case("inplace_keywords", _inplace_keywords, [(2, 3), (3,)], lambda x, z: (x - 2 * z) / z, ("any", "nonzero"))
case("inplace_unary", _inplace_unary, [(2, 3)], lambda x: sp.expit(np.tanh(x) * 3))
case("inplace_view_of_view", _inplace_view_of_view, [(2, 3), (2,)], _inplace_view_of_view_ref)
case("inplace_returns_view", _inplace_returns_view, [(2, 3)],
     lambda x: (np.concatenate([x[:, :1], 2 * x[:, 1:]], 1), 2 * x[:, 1:]))
case("inplace_fill_copy", _inplace_fill_copy, [(2, 3), (2,)], _inplace_fill_copy_ref)
case("inplace_masked_fill_scatter_add", _inplace_masked_scatter, [(2, 3), (2, 2)],
     lambda x, s: _np_scatter(np.where(MASK23, 0.25, x), 1, _IDX23, s, add=True))
case("inplace_setitem_on_view", _inplace_setitem_on_view, [(2, 3), (2,)], _inplace_setitem_on_view_ref)

# dtype round trips and copies.
case("to_float64_round_trip", lambda x: x.to(r.float64).to(x.dtype), [(2, 3)], lambda x: x)
case("to_float64", lambda x: x.to(r.float64) * 2, [(2, 3)], lambda x: x * 2, out_dtypes=("float64",))
case("double", lambda x: x.double(), [(2, 3)], lambda x: x, out_dtypes=("float64",))
case("to_dtype_keyword", lambda x: x.to(dtype=r.float64).sum(0), [(2, 3)], lambda x: x.sum(0),
     out_dtypes=("float64",))
case("float", lambda x: x.float(), [(2, 3)], lambda x: x, grad=False, out_dtypes=("float32",))
case("type", lambda x: x.type(r.float64), [(2, 3)], lambda x: x, out_dtypes=("float64",))
case("clone", lambda x: x.clone(), [(2, 3)], lambda x: x)
case("clone_then_inplace", lambda x: x.clone().mul_(3), [(2, 3)], lambda x: 3 * x)
case("contiguous", lambda x: x.contiguous(), [(2, 3)], lambda x: x)
case("contiguous_transposed", lambda x: x.T.contiguous(), [(2, 3)], lambda x: x.T)

# Special functions (dist): lgamma, digamma (its backward is trigamma, by reflection below zero), atanh, logit.
_NEGATIVE_NON_INTEGERS = np.array([[-0.5, -1.7, -2.3], [-0.2, -3.6, -1.25]])
_PROBABILITIES = np.array([[0.1, 0.35, 0.6], [0.9, 0.45, 0.75]])
case("lgamma", lambda x: x.lgamma(), [(2, 3)], sp.gammaln, "positive")
case("lgamma_negative", r.lgamma, [_NEGATIVE_NON_INTEGERS], sp.gammaln)
case("digamma", lambda x: x.digamma(), [(2, 3)], sp.digamma, "positive")
case("digamma_negative", r.digamma, [_NEGATIVE_NON_INTEGERS], sp.digamma)
case("atanh", lambda x: (x * 0.6).atanh(), [(2, 3)], lambda x: np.arctanh(x * 0.6))
case("arctanh", lambda x: r.arctanh(x * 0.6), [(2, 3)], lambda x: np.arctanh(x * 0.6))
case("logit", lambda x: x.logit(), [_PROBABILITIES], sp.logit)
case("logit_eps", lambda x: r.logit(x, eps=0.2), [_PROBABILITIES], lambda x: sp.logit(np.clip(x, 0.2, 0.8)))
case("logit_inplace", lambda x: x.clone().logit_(), [_PROBABILITIES], sp.logit)

# Sorting, topk, index_add, lerp, nan_to_num, tril/triu, repeat_interleave (issue 13).
def _np_sort(x, dim, descending=False, k=None):
    """Stable sort by a key; descending sorts the negated values (no ties or NaN in these cases)."""
    idx = np.argsort(-x if descending else x, axis=dim, kind="stable")
    if k is not None:
        idx = np.take(idx, np.arange(k), axis=dim)
    return np.take_along_axis(x, idx, dim), idx


def _np_index_add(x, dim, index, source, alpha=1):
    """index_add's definition, slice by slice: out.select(dim, index[i]) += alpha * source.select(dim, i)."""
    out = np.moveaxis(x.copy(), dim, 0)
    for i, j in enumerate(index):
        out[j] += alpha * np.moveaxis(source, dim, 0)[i]
    return np.moveaxis(out, 0, dim)


def _inplace_index_add_lerp(x, s, e):
    y = x * 1
    y[1:].index_add_(0, on(y, [1, 0, 1]), s)
    return y.lerp_(e, 0.25)


_NONFINITE = np.array([[np.nan, 0.7, np.inf], [-1.3, -np.inf, np.nan]])
case("sort_dim1", lambda x: x.sort(1), [(2, 4)], lambda x: _np_sort(x, 1), _away)
case("sort_descending_dim0", lambda x: r.sort(x, 0, descending=True), [(3, 2)],
     lambda x: _np_sort(x, 0, descending=True), _away)
case("sort_default_dim", lambda x: r.sort(x, stable=True), [(2, 3, 2)], lambda x: _np_sort(x, -1), _away)
case("sort_0d", lambda x: x.sort(), [()], lambda x: (x, np.array(0)))
case("argsort", lambda x: x.argsort(0, descending=True), [(3, 2)], lambda x: _np_sort(x, 0, True)[1], _away,
     grad=False)
case("msort", r.msort, [(3, 2)], lambda x: np.sort(x, 0), _away)
case("topk", lambda x: x.topk(2), [(2, 4)], lambda x: _np_sort(x, -1, True, 2), _away)
case("topk_smallest_dim0", lambda x: r.topk(x, 2, dim=0, largest=False), [(3, 2)], lambda x: _np_sort(x, 0, False, 2),
     _away)
case("topk_all_unsorted", lambda x: x.topk(3, sorted=False), [(3,)], lambda x: _np_sort(x, 0, True), _away)
case("index_add", lambda x, s: x.index_add(0, on(x, [0, 2, 0]), s), [(3, 2), (3, 2)],
     lambda x, s: _np_index_add(x, 0, [0, 2, 0], s))
case("index_add_alpha_dim1", lambda x, s: r.index_add(x, 1, on(x, [1, 1]), s, alpha=2), [(2, 3), (2, 2)],
     lambda x, s: _np_index_add(x, 1, [1, 1], s, 2))
case("index_add_0d", lambda x, s: x.index_add(0, on(x, [0, 0]), s), [(), (2,)], lambda x, s: x + s.sum())
case("lerp_scalar_weight", lambda x, e: r.lerp(x, e, 0.3), [(2, 3), (3,)], lambda x, e: x + 0.3 * (e - x))
case("lerp_scalar_weight_high", lambda x, e: x.lerp(e, 0.8), [(2, 3), (2, 3)], lambda x, e: x + 0.8 * (e - x))
case("lerp_tensor_weight", lambda x, e, w: r.lerp(x, e, w), [(2, 3), (1, 3), (2, 1)], lambda x, e, w: x + w * (e - x))
case("inplace_index_add_lerp", _inplace_index_add_lerp, [(4, 2), (3, 2), (4, 2)],
     lambda x, s, e: (lambda y: y + 0.25 * (e - y))(np.concatenate([x[:1], _np_index_add(x[1:], 0, [1, 0, 1], s)])))
case("nan_to_num", lambda x: r.nan_to_num(x, nan=2.5, posinf=5.0, neginf=-7.0), [_NONFINITE],
     lambda x: np.nan_to_num(x, nan=2.5, posinf=5.0, neginf=-7.0))
case("nan_to_num_inplace", lambda x: (x * 1).nan_to_num_(posinf=1.0, neginf=-1.0), [_NONFINITE],
     lambda x: np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0))
case("tril", lambda x: x.tril(), [(3, 4)], np.tril)
case("tril_negative_diagonal_batched", lambda x: r.tril(x, -1), [(2, 3, 3)], lambda x: np.tril(x, -1))
case("triu_diagonal", lambda x: r.triu(x, 1), [(3, 2)], lambda x: np.triu(x, 1))
case("triu_inplace", lambda x: (x * 1).triu_(-1), [(2, 4, 3)], lambda x: np.triu(x, -1))
case("repeat_interleave_int", lambda x: x.repeat_interleave(2), [(2, 2)], lambda x: np.repeat(x, 2))
case("repeat_interleave_dim", lambda x: r.repeat_interleave(x, 3, dim=1), [(2, 2)], lambda x: np.repeat(x, 3, 1))
case("repeat_interleave_tensor", lambda x: x.repeat_interleave(on(x, [1, 0, 2]), dim=0), [(3, 2)],
     lambda x: np.repeat(x, [1, 0, 2], 0))
case("repeat_interleave_0d_tensor_repeats", lambda x: x.repeat_interleave(on(x, 2), dim=-1, output_size=6),
     [(2, 3)], lambda x: np.repeat(x, 2, -1))

# unique (forward only, as torch): rounded inputs so that values repeat.
case("unique_all_outputs", lambda x: (x * 2).round().unique(return_inverse=True, return_counts=True), [(3, 4)],
     lambda x: (lambda u: (u[0], u[1].reshape(x.shape), u[2]))(np.unique(np.round(x * 2), return_inverse=True,
                                                                          return_counts=True)), grad=False)
case("unique_dim", lambda x: (x * 0.5).round().unique(dim=1, return_inverse=True), [(2, 5)],
     lambda x: (lambda u: (u[0], u[1].reshape(-1)))(np.unique(np.round(x * 0.5), axis=1, return_inverse=True)),
     grad=False)

# scaled dot-product attention against softmax(q k^T * scale + mask) v in NumPy (nan_to_num: a row with every
# key masked out gives zeros, as torch's)
_SDPA_ROWS_MASKED = np.array([[True, False, True, True, False], [False] * 5, [True] * 5])
_SDPA_CAUSAL = np.where(np.tril(np.ones((3, 3), bool)), 0.0, -np.inf)
_SDPA_KEEP = np.array([[0.0, 2.0, 2.0, 0.0, 2.0], [2.0, 2.0, 0.0, 2.0, 2.0], [0.0, 0.0, 2.0, 2.0, 0.0]])  # p = 0.5


def _np_attention(q, k, v, bias=0.0, scale=0.5):
    with np.errstate(invalid="ignore"):  # (the masked rows' -inf - -inf)
        return np.nan_to_num(sp.softmax(q @ k.swapaxes(-1, -2) * scale + bias, -1)) @ v


case("sdpa", lambda q, k, v: r.nn.functional.scaled_dot_product_attention(q, k, v), [(2, 3, 4), (2, 5, 4), (2, 5, 2)],
     _np_attention)
case("sdpa_bool_mask_row_masked", lambda q, k, v: r.nn.functional.scaled_dot_product_attention(
    q, k, v, on(q, _SDPA_ROWS_MASKED), scale=0.7), [(2, 3, 4), (2, 5, 4), (2, 5, 2)],
    lambda q, k, v: _np_attention(q, k, v, np.where(_SDPA_ROWS_MASKED, 0.0, -np.inf), 0.7))
case("sdpa_float_mask", lambda q, k, v, m: r.nn.functional.scaled_dot_product_attention(q, k, v, m),
     [(2, 3, 4), (2, 5, 4), (2, 5, 2), (3, 5)], _np_attention)
case("sdpa_causal_gqa", lambda q, k, v: r.nn.functional.scaled_dot_product_attention(
    q, k, v, is_causal=True, enable_gqa=True), [(1, 4, 3, 2), (1, 2, 3, 2), (1, 1, 3, 2)],
    lambda q, k, v: _np_attention(q, np.repeat(k, 2, -3), np.repeat(v, 4, -3), _SDPA_CAUSAL, 2 ** -0.5))
case("sdpa_function_dropout_keep", lambda q, k, v: r.primitives.ScaledDotProductAttention.apply(
    q, k, v, None, on(q, _SDPA_KEEP).to(q.dtype), 0.5, False), [(2, 3, 4), (2, 5, 4), (2, 5, 2)],
    lambda q, k, v: (sp.softmax(q @ k.swapaxes(-1, -2) * 0.5, -1) * _SDPA_KEEP) @ v)



# nn.functional's newer layers against brute-force NumPy loops (issue: the missing nn layers).
def _np_conv1d(x, w, stride, padding, dilation):
    """out[n, o, j] = sum over c, k of x[n, c, j * stride + k * dilation - padding] * w[o, c, k]."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    k = w.shape[2]
    length = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], length))
    for j in range(length):
        for t in range(k):
            out[:, :, j] += xp[:, :, j * stride + t * dilation] @ w[:, :, t].T
    return out


def _np_conv_transpose1d(x, w, stride, padding, output_padding, dilation):
    """Each input position i adds x[n, c, i] * w[c, o, k] at i * stride + k * dilation - padding."""
    k = w.shape[2]
    full = np.zeros((x.shape[0], w.shape[1], (x.shape[2] - 1) * stride + dilation * (k - 1) + 1 + output_padding))
    for i in range(x.shape[2]):
        for t in range(k):
            full[:, :, i * stride + t * dilation] += x[:, :, i] @ w[:, :, t]
    return full[:, :, padding:full.shape[2] - padding]


def _np_bilinear_align_corners(x, size):
    """Bilinear resize with corners aligned, one output pixel at a time."""
    (h, w), (oh, ow) = x.shape[2:], size
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            y, z = i * (h - 1) / max(oh - 1, 1), j * (w - 1) / max(ow - 1, 1)
            y0, z0 = min(int(y), h - 1), min(int(z), w - 1)
            y1, z1 = min(y0 + 1, h - 1), min(z0 + 1, w - 1)
            a, b = y - y0, z - z0
            out[:, :, i, j] = ((1 - a) * (1 - b) * x[:, :, y0, z0] + (1 - a) * b * x[:, :, y0, z1]
                               + a * (1 - b) * x[:, :, y1, z0] + a * b * x[:, :, y1, z1])
    return out


def _np_group_norm(x, groups, eps=1e-5):
    g = x.reshape(x.shape[0], groups, -1)
    return ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)


def _np_pixel_shuffle(x, r):
    n, c, h, w = x.shape
    out = np.zeros((n, c // (r * r), h * r, w * r))
    for ch in range(c):
        out[:, ch // (r * r), (ch % (r * r)) // r::r, ch % r::r] = x[:, ch]
    return out


case("nn_conv1d", lambda x, w: r.nn.functional.conv1d(x, w, stride=2, padding=1, dilation=2), [(2, 3, 9), (4, 3, 3)],
     lambda x, w: _np_conv1d(x, w, 2, 1, 2))
case("nn_conv_transpose1d", lambda x, w: r.nn.functional.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1,
                                                                          dilation=2),
     [(2, 3, 4), (3, 2, 3)], lambda x, w: _np_conv_transpose1d(x, w, 2, 1, 1, 2))
case("nn_interpolate_bilinear_align_corners", lambda x: r.nn.functional.interpolate(x, size=(5, 2), mode="bilinear",
                                                                                    align_corners=True),
     [(1, 2, 3, 4)], lambda x: _np_bilinear_align_corners(x, (5, 2)))
case("nn_group_norm", lambda x: r.nn.functional.group_norm(x, 2), [(2, 4, 3)], lambda x: _np_group_norm(x, 2))
case("nn_pixel_shuffle", lambda x: r.nn.functional.pixel_shuffle(x, 2), [(1, 8, 2, 3)],
     lambda x: _np_pixel_shuffle(x, 2))
# linear algebra (rlpipe.linalg): symmetric positive-definite inputs are built inside the case from any matrix.
def _spd(x):
    return x @ x.mT + 3 * r.eye(x.shape[-1], dtype=x.dtype, device=x.device)


def _np_spd(x):
    return x @ np.swapaxes(x, -1, -2) + 3 * np.eye(x.shape[-1])


def _np_tri_solve(a, b, upper):
    t = np.triu(a) if upper else np.tril(a)
    return np.linalg.solve(t, b)


case("linalg_cholesky", lambda x: r.linalg.cholesky(_spd(x)), [(2, 3, 3)], lambda x: np.linalg.cholesky(_np_spd(x)))
case("linalg_solve", lambda a, b: r.linalg.solve(_spd(a), b), [(2, 3, 3), (3, 2)],
     lambda a, b: np.linalg.solve(_np_spd(a), b))
case("linalg_solve_triangular", lambda a, b: r.linalg.solve_triangular(_spd(a), b, upper=True), [(2, 3, 3), (2, 3, 1)],
     lambda a, b: _np_tri_solve(_np_spd(a), b, True))
case("linalg_inv", lambda x: r.linalg.inv(_spd(x)), [(2, 3, 3)], lambda x: np.linalg.inv(_np_spd(x)))
case("linalg_det", lambda x: r.linalg.det(x), [(2, 3, 3)], np.linalg.det)
case("linalg_slogdet", lambda x: r.linalg.slogdet(x).logabsdet, [(2, 3, 3)], lambda x: np.linalg.slogdet(x)[1])
case("linalg_eigvalsh", lambda x: r.linalg.eigvalsh(_spd(x)), [(2, 3, 3)], lambda x: np.linalg.eigvalsh(_np_spd(x)))
case("linalg_qr_r_abs", lambda x: r.linalg.qr(x).R.abs(), [(2, 4, 3)], lambda x: np.abs(np.linalg.qr(x)[1]))
case("linalg_pinv", lambda x: r.linalg.pinv(x), [(2, 3)], np.linalg.pinv)
case("linalg_matrix_power", lambda x: r.linalg.matrix_power(x, 3), [(2, 3, 3)], lambda x: np.linalg.matrix_power(x, 3))
case("linalg_matrix_exp", lambda x: r.linalg.matrix_exp(x), [(2, 3, 3)],
     lambda x: np.stack([scipy.linalg.expm(m) for m in x]))
case("linalg_matrix_norm_nuc", lambda x: r.linalg.matrix_norm(x, "nuc"), [(2, 3, 3)],
     lambda x: np.linalg.norm(x, "nuc", axis=(-2, -1)))
case("cholesky_solve", lambda b, x: r.cholesky_solve(b, r.linalg.cholesky(_spd(x))), [(3, 2), (3, 3)],
     lambda b, x: np.linalg.solve(_np_spd(x), b))
# The math, search and index ops of pointwise.py, products.py, searching.py, index_ops.py and splits.py.
case("atan2", r.atan2, [(2, 3), (3,)], np.arctan2, ("any", "nonzero"))
case("arctan2_method", lambda y, x: y.arctan2(x), [(3, 1), (1, 2)], np.arctan2, ("nonzero", "any"))
case("hypot", r.hypot, [(2, 3), (2, 1)], np.hypot, "nonzero")
case("fmod", r.fmod, [(2, 3), (3,)], np.fmod, ("any", "nonzero"))
case("fmod_scalar", lambda x: x.fmod(0.7), [(2, 3)], lambda x: np.fmod(x, 0.7))
case("xlogy", r.xlogy, [(2, 3), (3,)], sp.xlogy, ("any", "positive"))
case("xlogy_scalar_other", lambda x: r.xlogy(x, 2.5), [(4,)], lambda x: sp.xlogy(x, 2.5))
case("float_power", r.float_power, [(2, 3), (3,)], np.power, ("positive", "any"), out_dtypes=("float64",))
case("fmax", r.fmax, [(2, 3), (3,)], np.fmax, "away_from_ties")
case("fmin_method", lambda x, y: x.fmin(y), [(2, 1), (1, 3)], np.fmin, "away_from_ties")
case("sinc", r.sinc, [(2, 3)], np.sinc)
case("exp2", lambda x: x.exp2(), [(2, 3)], np.exp2)
case("asinh", r.asinh, [(2, 3)], np.arcsinh)
case("acosh", lambda x: r.acosh(x + 1.0), [(2, 3)], lambda x: np.arccosh(x + 1.0), "positive")
case("arcsinh_inplace", lambda x: (x * 1).arcsinh_(), [(3,)], np.arcsinh)
case("erfinv", lambda x: (x * 0.6).erfinv(), [(2, 3)], lambda x: sp.erfinv(x * 0.6))
case("logaddexp2", r.logaddexp2, [(2, 3), (3,)], np.logaddexp2)
case("deg2rad", r.deg2rad, [(2, 3)], np.deg2rad)
case("rad2deg_method", lambda x: x.rad2deg(), [(2, 3)], np.rad2deg)
case("addcmul", lambda x, a, b: r.addcmul(x, a, b, value=0.5), [(2, 3), (3,), (2, 1)],
     lambda x, a, b: x + 0.5 * a * b)
case("addcdiv_inplace", lambda x, a, b: (x * 1).addcdiv_(a, b, value=-2), [(2, 3), (2, 3), (3,)],
     lambda x, a, b: x - 2 * a / b, ("any", "any", "nonzero"))
case("addmm", lambda x, a, b: r.addmm(x, a, b, beta=0.5, alpha=2), [(4,), (2, 3), (3, 4)],
     lambda x, a, b: 0.5 * x + 2 * a @ b)
case("addmm_beta0", lambda x, a, b: x.addmm(a, b, beta=0), [(2, 4), (2, 3), (3, 4)], lambda x, a, b: a @ b)
case("addmv", lambda x, a, v: r.addmv(x, a, v, alpha=-1), [(2,), (2, 3), (3,)], lambda x, a, v: x - a @ v)
case("addr", lambda x, u, v: x.addr(u, v, beta=2), [(2, 3), (2,), (3,)], lambda x, u, v: 2 * x + np.outer(u, v))
case("baddbmm", lambda x, a, b: r.baddbmm(x, a, b, alpha=0.5), [(2, 1, 4), (2, 3, 2), (2, 2, 4)],
     lambda x, a, b: x + 0.5 * a @ b)
case("addbmm", lambda x, a, b: x.addbmm(a, b), [(3, 4), (2, 3, 2), (2, 2, 4)], lambda x, a, b: x + (a @ b).sum(0))
case("kron", r.kron, [(2, 3), (2,)], np.kron)
case("kron_3d", lambda a, b: a.kron(b), [(2, 1, 2), (1, 2, 2)], np.kron)
case("inner", r.inner, [(2, 3), (4, 3)], np.inner)
case("inner_0d", r.inner, [(), (2, 3)], np.inner)
case("vdot", r.vdot, [(4,), (4,)], np.vdot)
case("block_diag", lambda a, b, c: r.block_diag(a, b, c), [(2, 3), (), (2,)],
     lambda a, b, c: __import__("scipy.linalg").linalg.block_diag(a, b, c))
case("cov", r.cov, [(3, 5)], np.cov)
case("cov_weights",
     lambda x: r.cov(x, correction=0, fweights=on(x, [1, 2, 1, 3]), aweights=on(x, [0.5, 1.0, 2.0, 1.5])),
     [(2, 4)], lambda x: np.cov(x, ddof=0, fweights=[1, 2, 1, 3], aweights=[0.5, 1.0, 2.0, 1.5]))
case("corrcoef", lambda x: x.corrcoef(), [(3, 5)], np.corrcoef)
_np_cdist = lambda a, b, p: np.linalg.norm(a[..., :, None, :] - b[..., None, :, :], ord=p, axis=-1)
case("cdist", r.cdist, [(3, 2), (4, 2)], lambda a, b: _np_cdist(a, b, 2))
case("cdist_p1_batched", lambda a, b: r.cdist(a, b, p=1), [(2, 3, 2), (1, 2, 2)], lambda a, b: _np_cdist(a, b, 1),
     "away_from_ties")
case("cdist_p3", lambda a, b: r.cdist(a, b, p=3), [(2, 3), (2, 3)], lambda a, b: _np_cdist(a, b, 3))
case("cdist_pinf", lambda a, b: r.cdist(a, b, p=float("inf")), [(2, 3), (3, 3)], lambda a, b: _np_cdist(a, b, np.inf),
     "away_from_ties")
_lower = lambda x, dim: (lambda o: (np.take_along_axis(x, o, dim), o))(
    np.take(np.argsort(x, dim, kind="stable"), [(x.shape[dim] - 1) // 2], dim))
case("median", lambda x: x.median(), [(3, 4)], lambda x: np.sort(x, None)[(x.size - 1) // 2], "away_from_ties")
case("median_dim", lambda x: r.median(x, 1), [(3, 4)], lambda x: tuple(a[:, 0] for a in _lower(x, 1)), "away_from_ties")
case("nanmedian_dim_keepdim", lambda x: x.nanmedian(0, keepdim=True), [(3, 2)], lambda x: _lower(x, 0),
     "away_from_ties")
case("kthvalue", lambda x: x.kthvalue(2, 0), [(3, 2)],
     lambda x: (np.sort(x, 0)[1], np.argsort(x, 0)[1]), "away_from_ties")
case("mode_distinct", lambda x: r.mode(x), [(2, 3)], lambda x: (x.min(1), x.argmin(1)), "away_from_ties")
case("aminmax", lambda x: r.aminmax(x, dim=0), [(3, 2)], lambda x: (x.min(0), x.max(0)), "away_from_ties")
case("searchsorted", lambda s, v: r.searchsorted(s.sort().values, v), [(5,), (2, 3)],
     lambda s, v: np.searchsorted(np.sort(s), v), grad=False)
case("searchsorted_rows_right", lambda s, v: r.searchsorted(s.sort().values, v, right=True), [(2, 4), (2, 3)],
     lambda s, v: np.stack([np.searchsorted(np.sort(a), b, "right") for a, b in zip(s, v)]), grad=False)
case("bucketize", lambda v, b: r.bucketize(v, b.sort().values), [(2, 3), (4,)],
     lambda v, b: np.searchsorted(np.sort(b), v), grad=False)
case("histc", lambda x: r.histc(x, bins=4, min=-1, max=1), [(10,)],
     lambda x: np.histogram(x, bins=4, range=(-1, 1))[0].astype(x.dtype), grad=False)
case("take", lambda x: r.take(x, on(x, [[0, 5], [-1, 2]])), [(2, 3)], lambda x: x.reshape(-1)[[[0, 5], [-1, 2]]])
case("index_copy", lambda x, s: x.index_copy(1, on(x, [2, 0]), s), [(2, 3), (2, 2)],
     lambda x, s: (lambda o: (o.__setitem__((slice(None), [2, 0]), s), o)[1])(x.copy()))
case("index_fill_tensor_value", lambda x, v: r.index_fill(x, 0, on(x, [1]), v), [(2, 3), ()],
     lambda x, v: np.concatenate([x[:1], np.full((1, 3), v)]))
case("index_put_accumulate", lambda x, v: x.index_put((on(x, [0, 0, 1]), on(x, [2, 2, 0])), v, accumulate=True),
     [(2, 3), (3,)], lambda x, v: (lambda o: (np.add.at(o, ([0, 0, 1], [2, 2, 0]), v), o)[1])(x.copy()))
case("index_put_mask", lambda x, v: (x * 1).index_put_((on(x, MASK23),), v), [(2, 3), ()],
     lambda x, v: np.where(MASK23, v, x))


def _np_scatter_reduce(x, index, src, reduce, include_self):
    """torch.scatter_reduce along dim 0, element by element: each target's own value (if kept) and its contributions."""
    groups = {}
    for p in np.ndindex(*index.shape):
        groups.setdefault((index[p],) + p[1:], []).append(src[p])
    out = x.copy()
    for q, values in groups.items():
        values = values + ([x[q]] if include_self else [])
        out[q] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](values)
    return out


_SCATTER_INDEX = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 2]])
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _keep in (True, False):
        case(f"scatter_reduce_{_reduce}_{'self' if _keep else 'noself'}",
             lambda x, s, red=_reduce, keep=_keep: x.scatter_reduce(0, on(x, _SCATTER_INDEX), s, red,
                                                                     include_self=keep),
             [(3, 3), (3, 3)],
             lambda x, s, red=_reduce, keep=_keep: _np_scatter_reduce(x, _SCATTER_INDEX, s, red, keep),
             "away_from_ties")
case("hsplit", lambda x: r.hsplit(x, 2), [(2, 4)], lambda x: tuple(np.hsplit(x, 2)))
case("vsplit_indices", lambda x: x.vsplit([1]), [(3, 2)], lambda x: tuple(np.vsplit(x, [1])))
case("dsplit", lambda x: r.dsplit(x, [1, 3]), [(1, 2, 4)], lambda x: tuple(np.dsplit(x, [1, 3])))
case("ravel", lambda x: x.t().ravel(), [(2, 3)], lambda x: x.T.ravel())
case("column_stack", lambda a, b: r.column_stack([a, b]), [(3,), (3, 2)], lambda a, b: np.column_stack([a, b]))
case("cartesian_prod", lambda a, b: r.cartesian_prod(a, b), [(2,), (3,)],
     lambda a, b: np.array(list(__import__("itertools").product(a, b))))
case("combinations", lambda x: r.combinations(x, 2), [(4,)],
     lambda x: np.array(list(__import__("itertools").combinations(x, 2))))

case("sgn", r.sgn, [(2, 3)], np.sign, "away_from_ties")
case("rsub", lambda x, y: r.rsub(x, y, alpha=2), [(2, 3), (3,)], lambda x, y: y - 2 * x)
case("ldexp", lambda x, e: r.ldexp(x, e), [(2, 3), (3,)], lambda x, e: x * 2.0 ** e)
case("frexp", lambda x: (lambda m, e: (m.double(), e))(*r.frexp(x)), [(2, 3)],  # (a mantissa of either precision)
     lambda x: (np.frexp(x)[0], np.frexp(x)[1]), out_dtypes=("float64", "int32"))
case("logcumsumexp", lambda x: r.logcumsumexp(x, 1), [(2, 4)], lambda x: np.logaddexp.accumulate(x, axis=1))
case("logcumsumexp_spread", lambda x: (x * 300).logcumsumexp(0), [(5,)], lambda x: np.logaddexp.accumulate(x * 300))
case("trapezoid_x", lambda y, x: r.trapezoid(y, x, dim=0), [(3, 2), (3,)],
     lambda y, x: np.trapezoid(y, x, axis=0) if hasattr(np, "trapezoid") else np.trapz(y, x, axis=0))
case("cumulative_trapezoid_dx", lambda y: r.cumulative_trapezoid(y, dx=0.5), [(2, 4)],
     lambda y: np.cumsum((y[:, 1:] + y[:, :-1]) / 2 * 0.5, axis=1))
case("dist", lambda x, y: r.dist(x, y, 3), [(2, 3), (3,)], lambda x, y: np.sum(np.abs(x - y) ** 3) ** (1 / 3))
case("isin", lambda x: r.isin(x.round(), on(x, [0.0, 1.0])), [(2, 3)], lambda x: np.isin(np.round(x), [0.0, 1.0]),
     grad=False)
case("put_accumulate", lambda x, s: x.put(on(x, [0, 5, 0]), s, accumulate=True), [(2, 3), (3,)],
     lambda x, s: (lambda o: (np.add.at(o.reshape(-1), [0, 5, 0], s), o)[1])(x.copy()))
case("masked_scatter", lambda x, s: x.masked_scatter(on(x, MASK23), s), [(2, 3), (4,)],
     lambda x, s: (lambda o: (o.__setitem__(MASK23, s[:3]), o)[1])(x.copy()))
case("index_reduce_amax", lambda x, s: x.index_reduce(0, on(x, [0, 2, 0]), s, "amax", include_self=False),
     [(3, 2), (3, 2)], lambda x, s: np.stack([np.maximum(s[0], s[2]), x[1], s[1]]), "away_from_ties")
case("dstack", lambda a, b: r.dstack([a, b]), [(2, 3), (2, 3)], lambda a, b: np.dstack([a, b]))
case("diagflat", lambda x: r.diagflat(x, 1), [(2, 2)], lambda x: np.diagflat(x, 1))
case("fill_diagonal_wrap", lambda x: (x * 1).fill_diagonal_(0.5, wrap=True), [(5, 2)],
     lambda x: (lambda o: (np.fill_diagonal(o, 0.5, wrap=True), o)[1])(x.copy()))
case("cumsum_inplace", lambda x: (x * 1).cumsum_(1), [(2, 3)], lambda x: np.cumsum(x, 1))
case("square_negative_inplace", lambda x: (x * 1).square_().negative_(), [(2, 3)], lambda x: -x * x)

case("nanquantile", lambda x: r.nanquantile(x, r.tensor([0.25, 0.6], dtype=x.dtype, device=x.device), dim=1),
     [np.array([[0.3, np.nan, 1.7, -0.4], [1.1, -0.8, 0.45, 2.2]])],
     lambda x: np.nanquantile(x, [0.25, 0.6], axis=1))
case("nanquantile_all_keepdim", lambda x: x.nanquantile(0.3, keepdim=True), [(2, 3)],
     lambda x: np.quantile(x, 0.3).reshape(1, 1), "away_from_ties")
case("pdist", lambda x: r.pdist(x), [(4, 3)],
     lambda x: np.array([np.linalg.norm(x[i] - x[j]) for i in range(4) for j in range(i + 1, 4)]))

case("histogram_weighted", lambda x, w: r.histogram(x, 5, range=(-1.0, 1.0), weight=w.abs()), [(12,), (12,)],
     lambda x, w: tuple(np.histogram(x, 5, range=(-1, 1), weights=np.abs(w))), grad=False)
case("histogram_edges_density", lambda x: r.histogram(x, r.tensor([-1.5, -0.2, 0.3, 1.5], dtype=x.dtype,
                                                                 device=x.device), density=True), [(12,)],
     lambda x: tuple(np.histogram(x, [-1.5, -0.2, 0.3, 1.5], density=True)), grad=False)

case("tensordot", r.tensordot, [(3, 4, 2), (4, 2, 5)], np.tensordot)
case("tensordot_lists", lambda a, b: r.tensordot(a, b, dims=([0, 2], [1, 0])), [(3, 4, 2), (2, 3, 5)],
     lambda a, b: np.tensordot(a, b, axes=([0, 2], [1, 0])))
case("ger", lambda a, b: a.ger(b), [(3,), (2,)], np.outer)
case("vander", lambda x: r.vander(x, N=4, increasing=True), [(3,)], lambda x: np.vander(x, 4, increasing=True))

case("cdist_matrix_product", lambda a, b: r.cdist(a, b), [(2, 26, 3), (4, 3)], lambda a, b: _np_cdist(a, b, 2))
case("cdist_mm_mode", lambda a, b: r.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), [(3, 2), (1, 2, 2)],
     lambda a, b: _np_cdist(a, b, 2))

case("diagonal_scatter", lambda x, s: r.diagonal_scatter(x, s, 1), [(3, 4), (3,)],
     lambda x, s: (lambda o: (o.__setitem__((range(3), range(1, 4)), s), o)[1])(x.copy()))
case("select_scatter", lambda x, s: x.select_scatter(s, 1, 0), [(2, 3), (2,)],
     lambda x, s: np.concatenate([s[:, None], x[:, 1:]], 1))
case("slice_scatter", lambda x, s: r.slice_scatter(x, s, 0, 1, None, 2), [(4, 2), (2, 2)],
     lambda x, s: (lambda o: (o.__setitem__(slice(1, None, 2), s), o)[1])(x.copy()))
case("angle", r.angle, [(2, 3)], lambda x: np.where(x < 0, np.pi, 0.0), "away_from_ties")
case("sum_to_size", lambda x: x.sum_to_size(1, 3), [(2, 2, 3)], lambda x: x.sum((0, 1)).reshape(1, 3))
case("chain_matmul", lambda a, b, c: r.chain_matmul(a, b, c), [(2, 3), (3, 4), (4, 2)], lambda a, b, c: a @ b @ c)
case("adjoint", lambda x: x.adjoint(), [(2, 3, 4)], lambda x: np.swapaxes(x, -1, -2))
case("split_with_sizes", lambda x: r.split_with_sizes(x, [1, 3], 1), [(2, 4)], lambda x: tuple(np.split(x, [1], 1)))
case("unsafe_chunk", lambda x: x.unsafe_chunk(2), [(5,)], lambda x: tuple(np.split(x, [3])))

case("gradient", lambda x: r.gradient(x, spacing=[0.5, 2.0]), [(4, 3)], lambda x: tuple(np.gradient(x, 0.5, 2.0)))
case("gradient_coordinates_order2", lambda x: r.gradient(x, spacing=[on(x, [0.0, 1.0, 3.0, 4.5, 5.0])], dim=1,
                                                         edge_order=2),
     [(2, 5)], lambda x: (np.gradient(x, [0.0, 1.0, 3.0, 4.5, 5.0], axis=1, edge_order=2),))

case("polygamma0", lambda x: r.polygamma(0, x), [(2, 3)], sp.digamma, "positive")
case("polygamma1_method", lambda x: x.polygamma(1), [(2, 3)], lambda x: sp.polygamma(1, x), "positive")
case("polygamma3", lambda x: r.special.polygamma(3, x), [(4,)], lambda x: sp.polygamma(3, x), "positive")
case("zeta_q", lambda q: r.special.zeta(3.0, q), [(2, 3)], lambda q: sp.zeta(3.0, q), "positive")
case("mvlgamma", lambda x: r.mvlgamma(x + 2, 3), [(2, 3)], lambda x: sp.multigammaln(x + 2, 3) + 0 * x, "positive")
case("entr", r.special.entr, [(2, 3)], sp.entr, "positive")
case("xlog1py", r.special.xlog1py, [(2, 3), (3,)], sp.xlog1py, ("any", "positive"))
case("ndtr", r.special.ndtr, [(2, 3)], sp.ndtr)
case("ndtri", lambda p: r.special.ndtri(p * 0.25 + 0.5), [(2, 3)], lambda p: sp.ndtri(p * 0.25 + 0.5))

_names = [c.name for c in CASES]
assert len(set(_names)) == len(_names), f"repeated case names: {sorted({n for n in _names if _names.count(n) > 1})}"
