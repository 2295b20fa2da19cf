"""``Function``: an op with a forward and a backward, and the node it leaves in the graph.

Calling ``SomeFunction.apply(*args)`` runs ``forward(ctx, *args)``; when gradients are being
recorded, ``ctx`` is a fresh instance of the Function that becomes the output's ``grad_fn``
and later runs ``backward(ctx, *grad_outputs)``.

Built-in ops set ``raw = True``: their forward and backward receive and return backend arrays
(NumPy or CuPy), so one piece of code serves both devices. User-defined Functions keep
PyTorch's form: they receive and return Tensors.

For gradients of gradients (``create_graph=True``) a built-in op also has ``backward_graph(ctx,
*grads)``: the same gradient written with Tensor ops on Tensors, so the backward pass is recorded.
It rebuilds the op's inputs and outputs as Tensors on the graph from what forward saved, with
``ctx.graph_input(i, array)`` and ``ctx.graph_output(array)``.
"""
import numpy as np

from .grad_mode import state as _grad_state
from .._tensor import Tensor, wrap, FLOATING_NP
from ..backends.cpu import silence_fp_warnings, restore_fp_warnings

_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after "
          "they have already been freed). Saved intermediate values of the graph are freed when you call "
          ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
          "graph a second time or if you need to access saved tensors after calling backward.")


class _NullContext:
    """The ctx that forward receives when no graph is recorded: saving is a no-op."""
    needs_input_grad = ()

    def __init__(self, backend):
        self.be = backend
        self.xp = backend.xp

    def save_for_backward(self, *values):
        pass

    def mark_non_differentiable(self, *values):
        pass

    def set_materialize_grads(self, value):
        pass

    def mark_dirty(self, *values):
        pass


_null_contexts = {}


def null_context(backend):
    """The shared no-op ctx for ``backend``, which forward receives when no graph is recorded."""
    ctx = _null_contexts.get(backend)
    if ctx is None:
        ctx = _null_contexts[backend] = _NullContext(backend)
    return ctx


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``, then call ``apply``."""
    raw = False
    scalar_operands = False  # Python numbers count as (constant) tensor inputs, as torch wraps them
    _materialize = True
    _saved = ()
    _saved_versions = ()
    _non_diff = ()
    _pre_hooks = None
    _post_hooks = None
    _tensor_hooks = None  # {output_nr: [hook]} for hooks registered on non-leaf output tensors
    _out_meta = None      # [(shape, np_dtype)] per output, to materialize missing grads

    # ---- ctx API used inside forward/backward ----
    @property
    def xp(self):
        """The array namespace (``numpy`` or ``cupy``) of the device the op runs on, for raw forwards and backwards."""
        return self.be.xp

    def save_for_backward(self, *values):
        """Keeps ``values`` for backward (read back as ``ctx.saved_tensors``); in-place changes to them are detected."""
        self._saved = values

    @property
    def saved_tensors(self):
        """What forward saved, in order; RuntimeError if the graph was freed or a saved tensor was changed in place."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_FREED)
        for counter, version, shape, dtype in self._saved_versions:
            if counter[0] != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{dtype!r} {list(shape)}] is at version {counter[0]}; expected "
                    f"version {version} instead. Hint: clone() the tensor before modifying it in place.")
        return saved

    def mark_non_differentiable(self, *values):
        """Marks outputs of forward that get no gradient (their ``requires_grad`` stays False)."""
        self._non_diff = tuple(id(v) for v in values)

    def set_materialize_grads(self, value):
        """With False, backward receives None (not zeros) for outputs whose gradient was not computed."""
        self._materialize = bool(value)

    def mark_dirty(self, *values):
        """Accepted for torch compatibility (inputs changed in place by forward); rlpipe needs no bookkeeping for it."""
        pass

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """Computes the op's outputs from its inputs (backend arrays when ``raw``, else Tensors); may save on
        ``ctx``."""
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """One gradient per forward input (None for a non-differentiable one) from the gradients of the outputs."""
        raise NotImplementedError("a Function subclass must define backward(ctx, *grad_outputs)")

    backward_graph = None  # a raw op's differentiable backward (Tensors in and out), for create_graph

    def graph_input(self, i, value):
        """Forward input ``i`` as a Tensor on the graph, from ``value`` (its array, as saved): the leaf
        itself, the output of the node that made it, or a constant; a Python number stays a number."""
        edge = self._edges[i]
        if not hasattr(value, "shape"):
            return value
        if isinstance(edge, Tensor):
            return edge
        if type(edge) is tuple:
            return _on_graph(value, self._device, *edge)
        return wrap(as_array(value, self._device), self._device)

    def graph_output(self, value, nr=0):
        """Output ``nr`` of this node as a Tensor on the graph, from ``value`` (its array, as saved)."""
        return _on_graph(value, self._device, self, nr)

    # ---- node API (what grad_fn shows) ----
    def name(self):
        """The node's name as ``grad_fn`` shows it, torch's where one exists (``MulBackward0``)."""
        # built-in nodes carry torch's numbered names (node_name where ours differ); custom ones, torch's unnumbered
        return getattr(self, "node_name", None) or type(self).__name__ + ("Backward0" if self.raw else "Backward")

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_functions(self):
        """The nodes the gradient flows to next, one ``(node, output_nr)`` per Tensor input (``AccumulateGrad`` for
        leaves)."""
        return tuple((None, 0) if e is None else (AccumulateGrad(e), 0) if isinstance(e, Tensor) else e
                     for e in self._edges if e is not NOT_A_TENSOR)

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) runs after this node's backward; it may return new grad_inputs."""
        from rlpipe.utils.hooks import RemovableHandle
        if self._post_hooks is None:
            self._post_hooks = {}
        return RemovableHandle.add(self._post_hooks, fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) runs before this node's backward; it may return new grad_outputs."""
        from rlpipe.utils.hooks import RemovableHandle
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return RemovableHandle.add(self._pre_hooks, fn)

    # ---- running an op ----
    @classmethod
    def apply(cls, *args, **kwargs):
        """Runs the op on ``args``; when an input requires grad, records a node so backward reaches the inputs."""
        device = None
        requires_grad = False
        raw = cls.raw
        values = []
        for a in args:
            if isinstance(a, Tensor):
                if device is None:
                    device = a._device
                elif a._device is not device:
                    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                                       f"two devices, {device} and {a._device}! (in {cls.__name__})")
                if a._requires_grad:
                    requires_grad = True
                values.append(a._data if raw else a)
            else:
                values.append(a)
        if requires_grad and _grad_state.grad:
            return cls._record(device._backend, device, args, values, kwargs)
        if device is None:
            raise TypeError(f"{cls.__name__}.apply() needs at least one Tensor argument, got "
                            f"{[type(a).__name__ for a in args]}")
        if raw:
            quiet = silence_fp_warnings()
            try:
                out = cls.forward(_null_contexts.get(device._backend) or null_context(device._backend),
                                  *values, **kwargs)
            except (ValueError, TypeError) as e:  # NumPy's words for a shape or dtype torch rejects
                raise RuntimeError(explain(e, values)) from None
            finally:
                restore_fp_warnings(quiet)
            if type(out) is tuple:
                return tuple(wrap(as_array(o, device), device) for o in out)
            return wrap(as_array(out, device), device)
        from rlpipe.autograd.grad_mode import no_grad
        with no_grad():
            return cls.forward(null_context(device._backend), *values, **kwargs)

    @classmethod
    def _record(cls, backend, device, args, values, kwargs):
        ctx = cls()
        ctx.be = backend
        ctx._device = device
        needs, edges = [], []
        for a in args:
            if isinstance(a, Tensor):
                if a._view_of is not None and a._view_of[2] != a._vc[0]:
                    a._refresh_view()
                if "_returned_input_of" in a.__dict__:
                    _check_returned_input(a)
                if a._requires_grad:
                    needs.append(True)
                    edges.append(a if a.grad_fn is None else (a.grad_fn, a._output_nr))
                    continue
                edges.append(None)
            else:
                edges.append(None if cls.scalar_operands and type(a) in _NUMBERS else NOT_A_TENSOR)
            needs.append(False)
        ctx.needs_input_grad = tuple(needs)
        ctx._edges = edges
        if cls.raw:
            quiet = silence_fp_warnings()
            try:
                out = cls.forward(ctx, *values, **kwargs)
            except (ValueError, TypeError) as e:
                raise RuntimeError(explain(e, values)) from None
            finally:
                restore_fp_warnings(quiet)
        else:
            from rlpipe.autograd.grad_mode import no_grad
            with no_grad():
                out = cls.forward(ctx, *values, **kwargs)
            ctx._input_shapes = tuple(a.shape if isinstance(a, Tensor) else None for a in args)
        single = type(out) is not tuple
        outs = (out,) if single else out
        results = []
        for nr, o in enumerate(outs):
            if cls.raw:
                o = as_array(o, device)
                t = wrap(o, device)
            elif isinstance(o, Tensor):
                t = o
                if any(o is a for a in args):
                    t = wrap(o._data, device)
                    t._vc = o._vc
                    t.__dict__["_returned_input_of"] = type(ctx).__name__  # torch names the Function class here
                    t.__dict__["_returned_input_version"] = o._vc[0]
                    t.__dict__["_returned_input_multi"] = len(outs) > 1
            else:
                t = o
            if isinstance(t, Tensor) and t._data.dtype in FLOATING_NP and id(o) not in ctx._non_diff:
                t._requires_grad = True
                t.grad_fn = ctx
                t._output_nr = nr
            results.append(t)
        if not single:
            ctx._out_meta = [(o.shape, o.dtype) if hasattr(o, "shape") else None
                             for o in (outs if cls.raw else [getattr(r, "_data", None) for r in results])]
        if ctx._saved:
            ctx._saved_versions = _versions_of(ctx._saved, args, values, results, cls.raw)
        return results[0] if single else tuple(results)


def as_array(value, device):
    """NumPy reductions and ufuncs on 0-d arrays return scalars; a tensor always holds an array.

    Only scalars are converted: an array of another backend is ``ToDevice``'s result, which belongs
    to the target device (converting it here would copy it back, or fail: CuPy refuses implicit
    host conversion)."""
    backend = device._backend
    if type(value) is backend.ndarray or not isinstance(value, _SCALARS):
        return value
    return backend.xp.asarray(value)


_NUMBERS = (int, float, bool)
_SCALARS = (np.generic, int, float, bool, complex)
NOT_A_TENSOR = object()  # the edge of a forward argument that was not a Tensor


def explain(error, values):
    """A NumPy error from a forward pass, in torch's words where torch has a standard message."""
    if "broadcast" in str(error):
        shapes = [getattr(v, "shape", None) for v in values]
        shapes = [sh for sh in shapes if sh is not None]
        for a, b in zip(shapes, shapes[1:]):
            for d in range(1, min(len(a), len(b)) + 1):
                if a[-d] != b[-d] and 1 not in (a[-d], b[-d]):
                    return (f"The size of tensor a ({a[-d]}) must match the size of tensor b ({b[-d]}) at "
                            f"non-singleton dimension {max(len(a), len(b)) - d}")
    return str(error)


def edge_of(t):
    """Where a gradient for ``t`` goes: its node and output number, or the leaf itself."""
    if t._view_of is not None and t._view_of[2] != t._vc[0]:
        t._refresh_view()
    return t if t.grad_fn is None else (t.grad_fn, t._output_nr)


def returned_input_error(t, what):
    """torch's RuntimeError for a forbidden in-place change reaching ``t``, an input a custom Function returned
    as-is (so a view of that input); ``what`` says what happened to it."""
    if t.__dict__["_returned_input_multi"]:
        why = ("This view is the output of a function that returns multiple views. Such functions do not allow the "
               "output views to be modified inplace. You should replace the inplace operation by an out-of-place one.")
    else:
        why = ("This view was created inside a custom Function (or because an input was returned as-is) and the "
               "autograd logic to handle view+inplace would override the custom backward associated with the custom "
               "Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the "
               "output of the custom Function.")
    return RuntimeError(f"Output {t._output_nr} of {t.__dict__['_returned_input_of']} is a view and {what}. {why}")


def _check_returned_input(t):
    """Raises when ``t`` (see ``returned_input_error``) is used in a recorded op after its input, or another
    view of it, was modified in place: torch checks only when it records the op."""
    if t._vc[0] != t.__dict__["_returned_input_version"]:
        raise returned_input_error(t, "its base or another view of its base has been modified inplace")


def _versions_of(saved, args, values, results, raw):
    """(version counter, version now, shape, dtype) for each saved value that belongs to a tensor."""
    out = []
    for s in saved:
        owner = None
        for v, a in zip(values, args):
            if s is v and isinstance(a, Tensor):
                owner = a
                break
        else:
            for r in results:
                if isinstance(r, Tensor) and (r._data if raw else r) is s:
                    owner = r
                    break
        if owner is not None:
            out.append((owner._vc, owner._vc[0], owner._data.shape, owner._data.dtype))
    return out


def _on_graph(value, device, node, nr):
    """A Tensor around ``value`` whose gradient flows to output ``nr`` of ``node``."""
    t = wrap(value, device)
    t._requires_grad = True
    t.grad_fn = node
    t._output_nr = nr
    return t


class AccumulateGrad:
    """The node that ``next_functions`` shows for a leaf tensor."""

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        """Always ``"AccumulateGrad"``, as torch names the node that adds into a leaf's ``.grad``."""
        return "AccumulateGrad"

    @property
    def next_functions(self):
        """Empty: a leaf is where the graph ends."""
        return ()

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self):#x}>"

    def __eq__(self, other):
        return isinstance(other, AccumulateGrad) and other.variable is self.variable

    def __hash__(self):
        return id(self.variable)


class once_differentiable:
    """Marks a Function's backward as not differentiable: a create_graph backward through it raises."""

    def __new__(cls, fn):
        fn.once_differentiable = True
        return fn
