"""Arithmetic, elementwise math and reductions on TensorDicts, leaf by leaf (tensordict 0.14's API).

``TensorDictMath`` is a mixin of ``TensorDictBase`` and works through its contract only (``items``,
``batch_size``, ``device``, ``_build``, ``_map``, ``apply``, ``expand``, ``get``/``set``...), so every
kind of TensorDict has it.

Operand rules, as in tensordict: a number or 0-d tensor applies to every leaf; a tensor with
dims is broadcast against the batch size and lined up with the *leading* dims of each leaf; a
TensorDict must hold the same keys (``default=`` fills the missing ones) and is broadcast over
the batch dims. In-place forms (``add_``, ``+=``, ``exp_`` ...) compute every leaf first and
write only when all of them succeeded, so a failing call leaves the TensorDict unchanged.
"""
import builtins

import numpy as np

from .. import primitives as _ops, autograd as _autograd
from .._tensor import Size, Tensor, size_repr as _shape_str
from ..autograd.grad_mode import state as _grad_state

_NO_DIM = object()

# unary elementwise ops with an in-place form (tensordict's _foreach list)
_UNARY = ("abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 neg "
          "reciprocal round sigmoid sign sin sinh sqrt tan tanh trunc").split()
# tests that give a bool TensorDict
_TESTS = "isnan isfinite isinf isneginf isposinf isreal".split()


def _is_td(x):
    return isinstance(x, TensorDictMath)


def _is_operand(x):
    return isinstance(x, (TensorDictMath, Tensor, int, float, np.number, np.bool_))  # bool is an int


def _operator(method):
    """The binary operator ``method`` answering NotImplemented for operands it does not take, so that
    Python tries the other operand and then raises its own TypeError."""
    def op(self, other):
        return method(self, other) if _is_operand(other) else NotImplemented
    op.__name__, op.__doc__ = method.__name__, method.__doc__
    return op


def _right_expand(t, leaf):
    """``t`` (shaped like the batch) with trailing unit dims, to broadcast over ``leaf``'s features."""
    extra = leaf.ndim - t.ndim
    return t.reshape(tuple(t.shape) + (1,) * extra) if extra > 0 else t


def _leaf_call(name, *args, **kwargs):
    """A function calling the Tensor method ``name`` on a leaf."""
    return lambda t: getattr(t, name)(*args, **kwargs)


class TensorDictMath:
    """The math methods of TensorDict (see the module docstring)."""
    __slots__ = ()

    # ---- walking leaves ------------------------------------------------------------------------
    def _leaf_items(self, prefix=()):
        """(key tuple, leaf) for every leaf, nested ones included, in insertion order."""
        for key, value in self.items():
            if _is_td(value):
                yield from value._leaf_items(prefix + (key,))
            else:
                yield prefix + (key,), value

    def _rebuild(self, values, prefix=()):
        """A TensorDict shaped like this one whose leaves are ``values[key tuple]``."""
        entries = {k: v._rebuild(values, prefix + (k,)) if _is_td(v) else values[prefix + (k,)]
                   for k, v in self.items()}
        return self._build(entries, self.batch_size, self.device)

    def _paired(self, other, fn, default):
        """A TensorDict of ``fn(leaf, other_leaf)``; the key sets must match unless ``default`` fills gaps."""
        mine, theirs = dict(self.items()), dict(other.items())
        if default is None and mine.keys() != theirs.keys():
            missing = [k for k in mine if k not in theirs]
            extra = [k for k in theirs if k not in mine]
            raise KeyError(f"the TensorDicts have different keys: {sorted(mine)} and {sorted(theirs)} "
                           f"(missing from the other: {missing}, only in the other: {extra}); pass default= to fill "
                           f"the missing entries")
        entries = {}
        for key in (*mine, *(k for k in theirs if k not in mine)):
            a, b = mine.get(key, default), theirs.get(key, default)
            if _is_td(a) and _is_td(b):
                entries[key] = a._paired(b, fn, default)
            elif _is_td(a) or _is_td(b):
                if (a if _is_td(b) else b) is not default:
                    raise TypeError(f"entry {key!r} is a TensorDict on one side and a tensor on the other")
                entries[key] = a._map(lambda t, b=b: fn(t, b)) if _is_td(a) else b._map(lambda t, a=a: fn(a, t))
            else:
                entries[key] = fn(a, b)
        return self._build(entries, self.batch_size, self.device)

    def _broadcast(self, others):
        """``self`` and ``others`` brought to one batch shape: tensors with dims and TensorDicts of
        another batch size are broadcast against the batch size (tensordict's rule)."""
        shapes = [tuple(o.batch_size) if _is_td(o) else tuple(o.shape) for o in others
                  if isinstance(o, Tensor) and o.ndim or _is_td(o) and o.batch_size != self.batch_size]
        if not shapes:
            return self, others
        try:
            shape = Size(np.broadcast_shapes(tuple(self.batch_size), *shapes))
        except ValueError:
            raise RuntimeError(f"the TensorDict of batch size {_shape_str(self.batch_size)} cannot be broadcast "
                               f"with operands of shape {[list(s) for s in shapes]}") from None
        td = self if shape == self.batch_size else self.expand(shape)
        return td, [o if not isinstance(o, Tensor) and not _is_td(o) or tuple(o.shape) == tuple(shape)
                    or isinstance(o, Tensor) and not o.ndim else o.expand(shape) for o in others]

    def _elementwise(self, fn, *others, default=None):
        """A TensorDict of ``fn(leaf, *operands)`` where each operand is taken leaf by leaf."""
        for o in others:
            if not _is_operand(o):
                raise TypeError(f"TensorDict math takes a TensorDict, a Tensor or a number as operand, got "
                                f"{type(o).__name__}")
        td, others = self._broadcast(others)
        if not others:
            return td._map(fn)
        if len(others) == 1 and _is_td(others[0]):
            return td._paired(others[0], fn, default)
        tds = [o for o in others if _is_td(o)]

        def leaf_fn(t, *leaves):
            it = iter(leaves)
            return fn(t, *[next(it) if _is_td(o) else _right_expand(o, t) if isinstance(o, Tensor) else o
                           for o in others])
        return td.apply(leaf_fn, *tds) if tds else td._map(leaf_fn)

    def _elementwise_(self, fn, *others):
        """In place: every ``fn(leaf, *operands)`` is computed first, then all are written."""
        out = self._elementwise(fn, *others)
        if out.batch_size != self.batch_size:
            raise RuntimeError(f"output with batch size {_shape_str(self.batch_size)} doesn't match the broadcast "
                               f"batch size {_shape_str(out.batch_size)}")
        pairs = list(zip((t for _, t in self._leaf_items()), (t for _, t in out._leaf_items())))
        tracking = _grad_state.grad and any(leaf._requires_grad or result._requires_grad for leaf, result in pairs)
        for leaf, result in pairs:  # every check before the first write
            _ops._check_write(leaf, result._data)
            _ops._check_writable(leaf)
            if tracking and leaf._requires_grad and leaf.grad_fn is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if not tracking:
            for leaf, result in pairs:
                _ops._write(leaf, result._data)
            return self
        # with a graph to record, each leaf's own in-place op keeps autograd's view and version rules
        _, others = self._broadcast(others)
        operands = [dict(o._leaf_items()) if _is_td(o) else o for o in others]
        for key, leaf in self._leaf_items():
            args = [o[key] if isinstance(o, dict) else _right_expand(o, leaf) if isinstance(o, Tensor) else o
                    for o in operands]
            _ops._inplace(leaf, fn, *args)
        return self

    # ---- arithmetic --------------------------------------------------------------------------------
    def add(self, other, *, alpha=None, default=None):
        """``self + alpha * other`` leaf by leaf."""
        if alpha is None:
            return self._elementwise(_ops.add, other, default=default)
        return self._elementwise(lambda a, b: _ops.add(a, b, alpha=alpha), other, default=default)

    def add_(self, other, *, alpha=None):
        """Adds ``other`` (times ``alpha``) to every leaf in place."""
        if alpha is None:
            return self._elementwise_(_ops.add, other)
        return self._elementwise_(lambda a, b: _ops.add(a, b, alpha=alpha), other)

    def sub(self, other, *, alpha=None, default=None):
        """Leafwise ``self - alpha * other``."""
        if alpha is None:
            return self._elementwise(_ops.sub, other, default=default)
        return self._elementwise(lambda a, b: _ops.sub(a, b, alpha=alpha), other, default=default)

    def sub_(self, other, alpha=None):
        """Subtracts ``other`` (times ``alpha``) from every leaf in place."""
        if alpha is None:
            return self._elementwise_(_ops.sub, other)
        return self._elementwise_(lambda a, b: _ops.sub(a, b, alpha=alpha), other)

    def rsub(self, other, alpha=None):
        """``other - alpha * self`` leaf by leaf."""
        scale = 1 if alpha is None else alpha
        return self._elementwise(lambda a, b: _ops.sub(b, a, alpha=scale), other)

    def mul(self, other, *, default=None):
        """Leafwise product with ``other``."""
        return self._elementwise(_ops.mul, other, default=default)

    def mul_(self, other):
        """Multiplies every leaf by ``other`` in place."""
        return self._elementwise_(_ops.mul, other)

    def div(self, other, *, default=None):
        """Leafwise division by ``other``."""
        return self._elementwise(_ops.div, other, default=default)

    def div_(self, other):
        """Divides every leaf by ``other`` in place."""
        return self._elementwise_(_ops.div, other)

    def pow(self, other, *, default=None):
        """Leafwise power."""
        return self._elementwise(_ops.pow, other, default=default)

    def pow_(self, other):
        """Raises every leaf to ``other`` in place."""
        return self._elementwise_(_ops.pow, other)

    def mod(self, other):
        """Leafwise remainder of the division by ``other``."""
        return self._elementwise(_ops.remainder, other)

    def maximum(self, other, *, default=None):
        """Leafwise maximum with ``other``."""
        return self._elementwise(_ops.maximum, other, default=default)

    def maximum_(self, other):
        """Leafwise maximum with ``other``, in place."""
        return self._elementwise_(_ops.maximum, other)

    def minimum(self, other, *, default=None):
        """Leafwise minimum with ``other``."""
        return self._elementwise(_ops.minimum, other, default=default)

    def minimum_(self, other):
        """Leafwise minimum with ``other``, in place."""
        return self._elementwise_(_ops.minimum, other)

    def clamp_min(self, other, default=None):
        """Every leaf clamped from below."""
        return self._elementwise(_ops.clamp_min, other, default=default)

    def clamp_min_(self, other):
        """Clamps every leaf from below, in place."""
        return self._elementwise_(_ops.clamp_min, other)

    def clamp_max(self, other, *, default=None):
        """Every leaf clamped from above."""
        return self._elementwise(_ops.clamp_max, other, default=default)

    def clamp_max_(self, other):
        """Clamps every leaf from above, in place."""
        return self._elementwise_(_ops.clamp_max, other)

    def _clamp_bounds(self, min, max):
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        if (min is not None and max is not None) and _is_td(min) != _is_td(max):
            raise ValueError("Mixed tensordict and non-tensordict min/max values are not authorized.")

    def clamp(self, min=None, max=None):
        """Every leaf clamped to [min, max] (numbers, tensors, or TensorDicts for both bounds)."""
        self._clamp_bounds(min, max)
        if min is None:
            return self.clamp_max(max)
        if max is None:
            return self.clamp_min(min)
        return self._elementwise(_ops.clamp, min, max)

    def clamp_(self, min=None, max=None):
        """Clamps every leaf to ``[min, max]`` in place."""
        self._clamp_bounds(min, max)
        if min is None:
            return self.clamp_max_(max)
        if max is None:
            return self.clamp_min_(min)
        return self._elementwise_(_ops.clamp, min, max)

    def lerp(self, end, weight):
        """``self + weight * (end - self)`` leaf by leaf (``end`` and ``weight``: TensorDicts, tensors or numbers)."""
        return self._elementwise(_ops.lerp, end, weight)

    def lerp_(self, end, weight):
        """Moves every leaf towards ``end`` by ``weight``, in place."""
        return self._elementwise_(_ops.lerp, end, weight)

    def addcmul(self, other1, other2, *, value=1):
        """``self + value * other1 * other2`` leaf by leaf."""
        return self._elementwise(lambda a, b, c: a + value * b * c, other1, other2)

    def addcmul_(self, other1, other2, *, value=1):
        """Adds ``value * tensor1 * tensor2`` to every leaf in place."""
        return self._elementwise_(lambda a, b, c: a + value * b * c, other1, other2)

    def addcdiv(self, other1, other2, *, value=1):
        """``self + value * other1 / other2`` leaf by leaf."""
        return self._elementwise(_addcdiv(value), other1, other2)

    def addcdiv_(self, other1, other2, *, value=1):
        """Adds ``value * tensor1 / tensor2`` to every leaf in place."""
        return self._elementwise_(_addcdiv(value), other1, other2)

    __add__ = add
    __iadd__ = add_
    __sub__ = sub
    __isub__ = sub_
    __mul__ = mul
    __imul__ = mul_
    __truediv__ = div
    __itruediv__ = div_
    __pow__ = pow
    __ipow__ = pow_
    __mod__ = mod

    def __radd__(self, other):
        return self._elementwise(lambda a, b: _ops.add(b, a), other)

    def __rmul__(self, other):
        return self._elementwise(lambda a, b: _ops.mul(b, a), other)

    def __rsub__(self, other):
        return self.rsub(other)

    def __rtruediv__(self, other):
        """``other / self``, computed as tensordict does: ``self.reciprocal() * other``."""
        return self.reciprocal() * other

    def __rpow__(self, other):
        """``other ** leaf`` for every leaf (tensordict 0.14 raises NotImplementedError here)."""
        return self._elementwise(lambda a, b: _ops.pow(b, a), other)

    def __rmod__(self, other):
        return self._elementwise(lambda a, b: _ops.remainder(b, a), other)

    def __neg__(self):
        return self.neg()

    def __abs__(self):
        return self.abs()

    # ---- comparisons and logic ----------------------------------------------------------------
    def __lt__(self, other):
        return self._elementwise(_ops.lt, other)

    def __le__(self, other):
        return self._elementwise(_ops.le, other)

    def __gt__(self, other):
        return self._elementwise(_ops.gt, other)

    def __ge__(self, other):
        return self._elementwise(_ops.ge, other)

    def bitwise_and(self, other, *, default=None):
        """Leafwise bitwise and with ``other``."""
        return self._elementwise(_ops.bitwise_and, other, default=default)

    def logical_and(self, other, *, default=None):
        """Leafwise logical and with ``other``."""
        return self._elementwise(_ops.logical_and, other, default=default)

    def __and__(self, other):
        return self._bitwise(_ops.bitwise_and, other)

    def __or__(self, other):
        return self._bitwise(_ops.bitwise_or, other)

    def __xor__(self, other):
        return self._bitwise(_ops.bitwise_xor, other)

    def _bitwise(self, op, other):
        """``op`` leaf by leaf; against a TensorDict, a dense one's non-tensor entries (bools...) are
        combined object by object too, as in tensordict."""
        result = self._elementwise(op, other)
        if _is_td(other) and hasattr(self, "_object_results"):
            return self._object_results(result, other, op)
        return result

    def __rand__(self, other):
        return self._elementwise(lambda a, b: _ops.bitwise_and(b, a), other)

    def __ror__(self, other):
        return self._elementwise(lambda a, b: _ops.bitwise_or(b, a), other)

    def __rxor__(self, other):
        return self._elementwise(lambda a, b: _ops.bitwise_xor(b, a), other)

    def __invert__(self):
        return self._map(lambda t: ~t)

    # ---- reductions --------------------------------------------------------------------------------
    def _reduction_dims(self, dim):
        """``dim`` (an int or tuple of ints over the batch dims) as a tuple of non-negative ints."""
        n = len(self.batch_size)
        dims = dim if isinstance(dim, tuple) else (dim,)
        for d in dims:
            if not isinstance(d, int) or not -n <= d < n:
                raise IndexError(f"Incompatible dim {d} for tensordict with batch dims {n}.")
        return tuple(d % n for d in dims)

    def _reduced(self, leaf_fn, batch_fn):
        """A TensorDict of ``leaf_fn(leaf, td)`` with batch sizes ``batch_fn(td)`` at every level."""
        entries = {k: v._reduced(leaf_fn, batch_fn) if _is_td(v) else leaf_fn(v, self)
                   for k, v in self.items()}
        return self._build(entries, Size(batch_fn(self)), self.device)

    def _reduce(self, name, dim=_NO_DIM, keepdim=_NO_DIM, reduce=None, call=None, **kwargs):
        """tensordict's reduction rules: no dim reduces each leaf entirely (batch size []); an int or
        tuple reduces those batch dims; ``"feature"`` reduces every feature dim; ``reduce=True``
        reduces across all leaves into one tensor."""
        call = call or (lambda t, **kw: getattr(t, name)(**kw))
        if dim is None:
            dim = _NO_DIM
        if keepdim is not _NO_DIM:
            kwargs["keepdim"] = keepdim
        if reduce:
            return self._reduce_all(call, dim, kwargs)
        if isinstance(dim, str):
            if dim != "feature":
                raise ValueError(f"dim should be an int, a tuple of ints or 'feature', got {dim!r}")
            if keepdim is True:
                raise TypeError("dim='feature' is incompatible with keepdim=True.")
            return self._reduced(lambda t, td: call(_features_flat(t, td.ndim), dim=-1, **kwargs),
                                 lambda td: td.batch_size)
        if dim is _NO_DIM:
            if keepdim is True:
                return self._reduced(lambda t, td: call(t, **kwargs), lambda td: [1] * td.ndim)
            return self._reduced(lambda t, td: call(t, **kwargs), lambda td: [])
        dims = self._reduction_dims(dim)
        kwargs["dim"] = dims if isinstance(dim, tuple) else dims[0]
        keep = keepdim is True
        return self._reduced(lambda t, td: call(t, **kwargs),
                             lambda td: [1 if i in dims else s for i, s in enumerate(td.batch_size)
                                         if keep or i not in dims])

    def _reduce_all(self, call, dim, kwargs):
        """One tensor: the leaves joined (flattened, or along ``dim``) and reduced together."""
        leaves = [t for _, t in self._leaf_items()]
        if not leaves:
            raise ValueError(f"cannot reduce a TensorDict without leaves (batch size {_shape_str(self.batch_size)})")
        if dim is _NO_DIM:
            return call(_ops.cat([t.reshape(-1) for t in leaves]), **kwargs)
        if dim == "feature":
            kwargs.pop("keepdim", None)
            return call(_ops.cat([_features_flat(t, self.ndim) for t in leaves], -1), dim=-1, **kwargs)
        dims = self._reduction_dims(dim)
        joined = _ops.cat(leaves, dims[0])
        return call(joined, dim=dims if isinstance(dim, tuple) else dims[0], **kwargs)

    def sum(self, dim=_NO_DIM, keepdim=_NO_DIM, *, dtype=None, reduce=None):
        """Sums: see ``_reduce`` for ``dim``/``keepdim``/``reduce``."""
        return self._reduce("sum", dim, keepdim, reduce, **({} if dtype is None else {"dtype": dtype}))

    def nansum(self, dim=_NO_DIM, keepdim=_NO_DIM, *, dtype=None, reduce=None):
        """Each leaf summed ignoring NaNs (over ``dim``, or reduced as tensordict's ``reduce``)."""
        return self._reduce("nansum", dim, keepdim, reduce, **({} if dtype is None else {"dtype": dtype}))

    def mean(self, dim=_NO_DIM, keepdim=_NO_DIM, *, dtype=None, reduce=None):
        """Each leaf's mean (over ``dim``, or reduced as tensordict's ``reduce``)."""
        return self._reduce("mean", dim, keepdim, reduce, **({} if dtype is None else {"dtype": dtype}))

    def nanmean(self, dim=_NO_DIM, keepdim=_NO_DIM, *, dtype=None, reduce=None):
        """Each leaf's mean ignoring NaNs."""
        return self._reduce("nanmean", dim, keepdim, reduce, call=_nanmean,
                            **({} if dtype is None else {"dtype": dtype}))

    def prod(self, dim=_NO_DIM, keepdim=_NO_DIM, *, dtype=None, reduce=None):
        """Each leaf's product."""
        return self._reduce("prod", dim, keepdim, reduce, **({} if dtype is None else {"dtype": dtype}))

    def std(self, dim=_NO_DIM, keepdim=_NO_DIM, *, correction=1, reduce=None):
        """Each leaf's standard deviation (``correction`` as torch)."""
        return self._reduce("std", dim, keepdim, reduce, correction=correction)

    def var(self, dim=_NO_DIM, keepdim=_NO_DIM, *, correction=1, reduce=None):
        """Each leaf's variance (``correction`` as torch)."""
        return self._reduce("var", dim, keepdim, reduce, correction=correction)

    def amax(self, dim=_NO_DIM, keepdim=False, *, reduce=None):
        """Each leaf's largest value."""
        return self._reduce("amax", dim, keepdim, reduce)

    def amin(self, dim=_NO_DIM, keepdim=False, *, reduce=None):
        """Each leaf's smallest value."""
        return self._reduce("amin", dim, keepdim, reduce)

    def _extreme(self, name, dim, keepdim, reduce, return_indices):
        """max/min: without ``dim`` a TensorDict of extremes; with it, ``(values, indices)`` TensorDicts."""
        if dim is _NO_DIM or dim is None or reduce:
            if keepdim and not reduce:
                raise TypeError(f"{name}(): keepdim=True needs a dim")
            return self._reduce(name, dim, keepdim if reduce else _NO_DIM, reduce)
        if isinstance(dim, tuple):
            raise TypeError(f"{name}(): dim must be an int, got a tuple {dim}")
        pairs = self._reduce(name, dim, _NO_DIM if dim == "feature" else keepdim)
        values, indices = pairs._map(lambda p: p[0]), pairs._map(lambda p: p[1])
        if not return_indices:
            return values
        return (_ops.max_return if name == "max" else _ops.min_return)(values, indices)

    def max(self, dim=_NO_DIM, keepdim=False, *, reduce=None, return_indices=True):
        """Each leaf's maximum (values and indices along ``dim``)."""
        return self._extreme("max", dim, keepdim, reduce, return_indices)

    def min(self, dim=_NO_DIM, keepdim=False, *, reduce=None, return_indices=True):
        """Each leaf's minimum (values and indices along ``dim``)."""
        return self._extreme("min", dim, keepdim, reduce, return_indices)

    def logsumexp(self, dim=None, keepdim=False, *, out=None):
        """log(sum(exp)) over batch dims (all of them by default); features are kept. With ``out``,
        the result is written into that TensorDict, which is returned."""
        n = len(self.batch_size)
        dims = tuple(range(n)) if dim is None else dim if isinstance(dim, tuple) else (dim,)
        if any(not isinstance(d, int) or not -n <= d < n for d in dims):
            raise ValueError(f"The dimension {dim} is incompatible with a tensordict with batch_size "
                             f"{_shape_str(self.batch_size)}.")
        result = self._reduce("logsumexp", tuple(d % n for d in dims), keepdim)
        return result if out is None else result._into(out)

    def _running(self, name, dim, reduce, return_indices):
        """cummax/cummin along a batch dim: ``(values, indices)`` TensorDicts of the same batch size."""
        d = self._reduction_dims(dim)[0]
        if reduce:
            return getattr(_ops, name)(_ops.cat([t for _, t in self._leaf_items()], d), d)
        pairs = self._map(lambda t: getattr(_ops, name)(t, d))
        values, indices = pairs._map(lambda p: p[0]), pairs._map(lambda p: p[1])
        if not return_indices:
            return values
        return getattr(_ops, name + "_return")(values, indices)

    def cummax(self, dim, *, reduce=None, return_indices=True):
        """Each leaf's running maximum along ``dim`` (values and indices)."""
        return self._running("cummax", dim, reduce, return_indices)

    def cummin(self, dim, *, reduce=None, return_indices=True):
        """Each leaf's running minimum along ``dim`` (values and indices)."""
        return self._running("cummin", dim, reduce, return_indices)

    def quantile(self, q, dim=_NO_DIM, keepdim=_NO_DIM, *, interpolation="linear", reduce=None):
        """The q-th quantile, with the reductions' ``dim``/``keepdim``/``reduce`` rules; of a tuple of
        dims only the first is used (torch.quantile takes one dim; tensordict does the same)."""
        if isinstance(dim, tuple):
            dim = dim[0]
        return self._reduce("quantile", dim, keepdim, reduce,
                            call=lambda t, **kw: _ops.quantile(t, q, interpolation=interpolation, **kw))

    # ---- autograd --------------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backpropagates from every leaf that requires grad; ``gradient`` (a TensorDict with those
        keys) is needed unless every such leaf holds one element."""
        # keys as tensordict names them in its errors: 'a' at the root, ('n', 'a') below
        pairs = [(k[0] if len(k) == 1 else k, t) for k, t in self._leaf_items() if t.requires_grad]
        if not pairs:
            raise RuntimeError("backward() cannot be called on a tensordict that has no leaf tensor requiring "
                               "gradients.")
        grads = None
        if gradient is None:
            for key, t in pairs:
                if t.numel() != 1:
                    raise RuntimeError(f"grad can be implicitly created only for scalar outputs: the leaf at key "
                                       f"{key!r} has shape {tuple(t.shape)}. Pass a gradient tensordict matching "
                                       f"the structure of this tensordict to backward().")
        elif not _is_td(gradient):
            raise TypeError(f"gradient must be a TensorDictBase instance with entries matching the differentiable "
                            f"leaves of the tensordict, got {type(gradient).__name__} instead.")
        else:
            grads = [gradient.get(key, None) for key, _ in pairs]
            for (key, t), g in zip(pairs, grads):
                if g is None:
                    raise KeyError(f"Missing gradient entry for key {key!r} in the gradient tensordict passed to "
                                   f"backward().")
                if tuple(g.shape) != tuple(t.shape):
                    raise RuntimeError(f"Mismatch in shape: the gradient at key {key!r} has shape {tuple(g.shape)} "
                                       f"but the corresponding leaf has shape {tuple(t.shape)}.")
        if _is_td(inputs):
            inputs = [t for _, t in inputs._leaf_items()]
        _autograd.backward([t for _, t in pairs], grads, retain_graph=retain_graph, create_graph=create_graph,
                           inputs=inputs)

    def _into(self, out):
        """Writes this TensorDict's leaves into ``out`` (a leaf ``out`` has is filled in place, a
        missing one is set) and returns ``out``: the ``out=`` form of TensorDict functions."""
        if not _is_td(out):
            raise TypeError(f"out must be a TensorDict, got {type(out).__name__}")
        for key, value in self._leaf_items():
            target = out.get(key, None)
            if target is None:
                out.set(key, value)
            else:
                target.copy_(value)
        return out

    def norm(self, *, dtype=None):
        """The 2-norm of each leaf (all its elements), in a TensorDict of batch size []."""
        return self._reduce("norm", **({} if dtype is None else {"dtype": dtype}))

    def softmax(self, dim, dtype=None):
        """softmax over a batch dim, for every leaf."""
        d = self._softmax_dim(dim)
        return self._map(lambda t: t.softmax(d, dtype=dtype))

    def _softmax_dim(self, dim):
        n = len(self.batch_size)
        if not isinstance(dim, int) or not -n <= dim < n:
            raise IndexError(f"Incompatible dim {dim} for tensordict with shape {_shape_str(self.batch_size)}.")
        return dim % n

    # ---- selection ----------------------------------------------------------------------------
    def where(self, condition, other, *, out=None, pad=None):
        """``condition ? self : other`` leaf by leaf. ``condition`` is lined up with the batch dims;
        ``other`` is a number, a tensor or a TensorDict. With a TensorDict, a key that only one side
        holds takes ``pad`` on the other side (KeyError without ``pad``). With ``out``, the result is
        written into that TensorDict (see ``_into``), which is returned."""
        if not _is_td(other):
            result = self._map(lambda t: _ops.where(_right_expand(condition, t), t,
                                                    _right_expand(other, t) if isinstance(other, Tensor) else other))
        else:
            result = self._where_td(condition, other, pad)
        return result if out is None else result._into(out)

    def _where_td(self, condition, other, pad):
        def pick(key, a, b):
            present = a if a is not None else b
            if a is None or b is None:
                if pad is None:
                    raise KeyError(f"Key {key} not found and no pad value provided.")
                if _is_td(present):
                    return present._map(lambda t: pick(key, t, None) if a is not None else pick(key, None, t))
                filler = _ops.full_like(present, pad)  # a 0-d tensor of the present entry's dtype
                a, b = (a, filler) if a is not None else (filler, b)
            if _is_td(a):
                return a._where_td(condition, b, pad)
            return _ops.where(_right_expand(condition, present), a, b)

        mine, theirs = dict(self.items()), dict(other.items())
        entries = {key: pick(key, mine.get(key), theirs.get(key))
                   for key in (*mine, *(k for k in theirs if k not in mine))}
        return self._build(entries, self.batch_size, self.device)

    def masked_select(self, mask):
        """The batch elements where ``mask`` (shaped like the leading batch dims) is True, stacked in
        one new leading dim."""
        if tuple(mask.shape) != tuple(self.batch_size[:mask.ndim]):
            raise RuntimeError(f"masked_select: the mask's shape {list(mask.shape)} does not match the leading "
                               f"batch dims {list(self.batch_size)}")
        n = int(mask.sum().item())
        new_batch = Size((n,) + tuple(self.batch_size[mask.ndim:]))
        return self._reduced(lambda t, td: t[mask], lambda td: new_batch + tuple(td.batch_size[len(self.batch_size):]))


def _features_flat(t, ndim):
    """``t`` with its feature dims (after the first ``ndim``) flattened into one (added if none)."""
    return t.flatten(ndim, -1) if t.ndim > ndim else t.unsqueeze(-1)


def _nanmean(t, dim=None, keepdim=False, dtype=None):
    """The mean of the non-NaN elements (rlpipe's Tensor has nansum but no nanmean)."""
    if dtype is not None:
        t = t.to(dtype)
    kw = {"keepdim": keepdim} if dim is None and keepdim else {} if dim is None else {"dim": dim, "keepdim": keepdim}
    count = (~t.isnan()).sum(**kw)
    return t.nansum(**kw) / count


def _addcdiv(value):
    def op(a, b, c):
        if not (b.is_floating_point() if isinstance(b, Tensor) else isinstance(b, builtins.float)) and not (
                c.is_floating_point() if isinstance(c, Tensor) else isinstance(c, builtins.float)):
            raise RuntimeError("Integer division with addcdiv is no longer supported: use a floating point tensor1 "
                               "or tensor2")
        return a + value * (b / c)
    return op


def _unary(name):
    def op(self):
        return self._map(lambda t: getattr(_ops, name)(t))
    op.__name__, op.__doc__ = name, f"{name} of every leaf."
    return op


def _unary_(name):
    def op(self):
        return self._elementwise_(getattr(_ops, name))
    op.__name__ = name + "_"
    op.__doc__ = f"In-place {name} of every leaf (all leaves are computed before any is written)."
    return op


def _test(name):
    def op(self):
        return self._map(getattr(_ops, name))
    op.__name__, op.__doc__ = name, f"{name} of every leaf (a bool TensorDict)."
    return op


for _name in ("add iadd sub isub mul imul truediv itruediv pow ipow mod radd rmul rsub rtruediv rpow rmod lt le gt "
              "ge and or xor rand ror rxor").split():
    setattr(TensorDictMath, f"__{_name}__", _operator(getattr(TensorDictMath, f"__{_name}__")))
for _name in _UNARY:
    setattr(TensorDictMath, _name, _unary(_name))
    setattr(TensorDictMath, _name + "_", _unary_(_name))
for _name in _TESTS:
    setattr(TensorDictMath, _name, _test(_name))
del _name
