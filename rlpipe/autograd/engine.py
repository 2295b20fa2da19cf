"""The backward pass: walks the graph of Function nodes in dependency order."""
from .function import as_array, edge_of, NOT_A_TENSOR
from .grad_mode import no_grad
from .._dispatch import handle_torch_function, has_torch_function
from .._tensor import Tensor, wrap
from ..backends.cpu import silence_fp_warnings, restore_fp_warnings


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates d(sum of tensors * grad_tensors)/d(leaf) into each leaf's ``.grad``
    (or only into ``inputs`` when given)."""
    tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
    roots = _roots(tensors, grad_tensors, create_graph)
    if inputs is not None:
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        grads = _run(roots, bool(retain_graph), inputs, accumulate=False)
        for t, g in zip(inputs, grads):
            if g is not None:
                _accumulate(t, g, t._device)
        return
    _run(roots, bool(retain_graph), None, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, returned (nothing is accumulated)."""
    if type(outputs) is not Tensor and has_torch_function(outputs, inputs, grad_outputs):
        return handle_torch_function(grad, (outputs, inputs, grad_outputs), {
            "retain_graph": retain_graph, "create_graph": create_graph, "allow_unused": allow_unused,
            "is_grads_batched": is_grads_batched, "materialize_grads": materialize_grads})
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    single = isinstance(inputs, Tensor)
    inputs = (inputs,) if single else tuple(inputs)
    if is_grads_batched:
        raise RuntimeError("grad(): is_grads_batched=True is not supported by rlpipe")
    for i, t in enumerate(inputs):
        if not t._requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors (input {i}) does not require grad")
    roots = _roots(outputs, grad_outputs, create_graph)
    grads = _run(roots, bool(retain_graph), inputs, accumulate=False)
    result = []
    for i, (t, g) in enumerate(zip(inputs, grads)):
        if g is None:
            if materialize_grads:
                g = t._device._backend.xp.zeros_like(t._data)
            elif not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors (input {i}) appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the desired behavior.")
        result.append(None if g is None else wrap(as_array(g, t._device), t._device))
    return tuple(result)


def _roots(tensors, grad_tensors, create_graph):
    if create_graph:
        raise RuntimeError("create_graph=True (gradients of gradients) is not supported by rlpipe: "
                           "backward passes compute plain arrays")
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,) * len(tensors) if grad_tensors is None else (grad_tensors,)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"grad can be given for each output: got {len(grad_tensors)} gradients "
                           f"for {len(tensors)} outputs")
    roots = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = t._device._backend.xp.ones_like(t._data)
        else:
            if not isinstance(g, Tensor):
                raise TypeError(f"gradient must be a Tensor, got {type(g).__name__}")
            if g.shape != t.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(g.shape)} and "
                                   f"output[{i}] has a shape of {tuple(t.shape)}.")
            g = g._data if g._data.dtype == t._data.dtype else g._data.astype(t._data.dtype)
        roots.append((edge_of(t), g))
    return roots


def _run(roots, retain_graph, inputs, accumulate):
    """Propagates the root gradients through the graph: a node runs its backward once every node that
    feeds it a gradient has run. With ``inputs``, returns their gradients instead of accumulating into
    the leaves. NumPy's floating-point warnings stay off meanwhile, as for the forward ops."""
    quiet = silence_fp_warnings()
    try:
        return _walk(roots, retain_graph, inputs, accumulate)
    finally:
        restore_fp_warnings(quiet)


def _walk(roots, retain_graph, inputs, accumulate):
    capture = _capture_positions(inputs)
    found = [None] * (len(inputs) if inputs is not None else 0)
    root_nodes = {id(edge[0]): edge[0] for edge, _ in roots if type(edge) is tuple}
    dependencies = _count_dependencies(root_nodes.values())
    buffers = {}     # id(node) -> the gradients summed so far for each of its outputs
    leaf_grads = {}  # id(leaf) -> [leaf, summed gradient]: leaf hooks see each leaf's total, once
    for edge, g in roots:
        if type(edge) is tuple:
            _add_to_buffer(buffers, edge, g)
        else:
            _add_to_leaf(leaf_grads, edge, g)
    ready = [node for nid, node in root_nodes.items() if nid not in dependencies]
    while ready:
        node = ready.pop()
        grads = buffers.pop(id(node))
        if node._out_meta is not None or node._tensor_hooks or node._pre_hooks:
            grads = _prepare_output_grads(node, grads)
        if capture:
            _capture_output_grads(node, grads, capture, found)
        input_grads = _node_backward(node, grads)
        if not retain_graph:
            node._saved = None  # frees the saved tensors: another backward through this node raises
        _hand_to_inputs(node, input_grads, dependencies, buffers, leaf_grads, ready)
    _finish_leaves(leaf_grads, capture, found, accumulate)
    return found


def _hand_to_inputs(node, input_grads, dependencies, buffers, leaf_grads, ready):
    """Gives each input of ``node`` its gradient (an op's output into that op's buffer, a leaf's into
    ``leaf_grads``) and pushes onto ``ready`` the ops that no longer wait for any other node."""
    for edge, g in zip(node._edges, input_grads):
        if type(edge) is tuple:  # (node, output_nr): the output of another op
            if g is not None:
                _add_to_buffer(buffers, edge, g)
            nid = id(edge[0])
            left = dependencies[nid] - 1
            dependencies[nid] = left
            if left == 0:
                if nid in buffers:
                    ready.append(edge[0])
                else:  # no gradient reached it: its subgraph gets none either
                    _release(edge[0], dependencies, buffers, ready)
        elif g is not None and edge is not None and edge is not NOT_A_TENSOR:  # a leaf tensor
            _add_to_leaf(leaf_grads, edge, g)


def _finish_leaves(leaf_grads, capture, found, accumulate):
    """Runs each leaf's hooks on its summed gradient, then stores it in ``found`` when the leaf is one of
    the requested inputs, else accumulates it into ``.grad`` (when ``accumulate``)."""
    for leaf, g in leaf_grads.values():
        g = _run_leaf_hooks(leaf, g)
        k = capture.get(id(leaf)) if capture else None
        if k is not None:
            found[k] = g
        elif accumulate:
            _accumulate(leaf, g, leaf._device)


def _capture_positions(inputs):
    """Where each of ``inputs`` shows up in the graph (a leaf by id, an op's output by (id of its node,
    output_nr)) -> its position in ``inputs``."""
    if inputs is None:
        return {}
    return {id(t) if t.grad_fn is None else (id(t.grad_fn), t._output_nr): k for k, t in enumerate(inputs)}


def _count_dependencies(nodes):
    """id(node) -> how many edges lead into it, for every node reachable from ``nodes``: a node is
    ready when the nodes at the other end of all those edges have run."""
    dependencies = {}
    stack = list(nodes)
    seen = {id(node) for node in stack}
    while stack:
        for edge in stack.pop()._edges:
            if type(edge) is tuple:
                nid = id(edge[0])
                dependencies[nid] = dependencies.get(nid, 0) + 1
                if nid not in seen:
                    seen.add(nid)
                    stack.append(edge[0])
    return dependencies


def _add_to_leaf(leaf_grads, leaf, g):
    entry = leaf_grads.get(id(leaf))
    if entry is None:
        leaf_grads[id(leaf)] = [leaf, g]
    else:
        entry[1] = entry[1] + g


def _capture_output_grads(node, grads, capture, found):
    """Adds the gradients of a node's outputs that are among the requested ``inputs`` to ``found``."""
    for nr, g in enumerate(grads):
        k = capture.get((id(node), nr))
        if k is not None and g is not None:
            found[k] = g if found[k] is None else found[k] + g


def _node_backward(node, grads):
    """The gradients of a node's inputs, as a tuple: built-in ops without post-hooks directly, the
    rest through ``_call_backward``."""
    cls = type(node)
    if cls.raw and not node._post_hooks:
        input_grads = cls.backward(node, *grads)
        return input_grads if type(input_grads) is tuple else (input_grads,)
    return _call_backward(node, grads)


def _release(node, dependencies, buffers, ready):
    """A node that received no gradient still counts down its children, so they are not stuck."""
    stack = [node]
    while stack:
        n = stack.pop()
        for e in n._edges:
            if type(e) is tuple:
                nid = id(e[0])
                dependencies[nid] -= 1
                if dependencies[nid] == 0:
                    (ready.append if nid in buffers else stack.append)(e[0])


def _add_to_buffer(buffers, edge, g):
    node, nr = edge
    slots = buffers.get(id(node))
    if slots is None:
        n_out = len(node._out_meta) if node._out_meta is not None else 1
        slots = buffers[id(node)] = [None] * n_out
    slots[nr] = g if slots[nr] is None else slots[nr] + g


def _prepare_output_grads(node, grads):
    """Materializes missing output grads as zeros and runs tensor and node pre-hooks."""
    if node._out_meta is not None and node._materialize:
        xp = node.be.xp
        grads = [xp.zeros(m[0], m[1]) if g is None and m is not None else g
                 for g, m in zip(grads, node._out_meta)]
    device = None
    if node._tensor_hooks:
        for nr, hooks in node._tensor_hooks.items():
            for hook in list(hooks.values()):
                if grads[nr] is None:
                    continue
                device = node._device
                out = hook(wrap(grads[nr], device))
                if out is not None:
                    grads[nr] = out._data
    if node._pre_hooks:
        device = node._device
        for hook in list(node._pre_hooks.values()):
            out = hook(tuple(None if g is None else wrap(g, device) for g in grads))
            if out is not None:
                grads = [None if g is None else g._data for g in _checked_hook_result(hook, out, len(grads))]
    return grads


def _call_backward(node, grads):
    """Runs a node's backward the general way: user Functions (tensors in and out), checks, post-hooks."""
    cls = type(node)
    if cls.raw:
        out = cls.backward(node, *grads)
    else:
        device = node._device
        with no_grad():
            out = cls.backward(node, *(None if g is None else wrap(g, device) for g in grads))
    out = out if type(out) is tuple else (out,)
    n_inputs = len(node._edges)
    if len(out) < n_inputs or any(g is not None for g in out[n_inputs:]):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {n_inputs}, got {len(out)})")
    out = out[:n_inputs]
    if not cls.raw:
        out = tuple(_check_user_grad(node, i, g) for i, g in enumerate(out))
    if node._post_hooks:
        device = node._device
        as_tensors = lambda gs: tuple(None if g is None else wrap(g, device) for g in gs)
        for hook in list(node._post_hooks.values()):
            replaced = hook(as_tensors(out), as_tensors(grads))
            if replaced is not None:
                out = tuple(None if g is None else g._data for g in _checked_hook_result(hook, replaced, len(out)))
    return out


def _checked_hook_result(hook, result, expected):
    """A node hook's replacement gradients, refused as torch does when they are not a tuple of the
    node's own length."""
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != expected:
        name = getattr(hook, "__name__", type(hook).__name__)
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values (got {len(result)}, but "
                           f"expected {expected})")
    return result


def _check_user_grad(node, i, g):
    if g is not None and node._edges[i] is NOT_A_TENSOR:
        raise RuntimeError(f"function {node.name()} returned a gradient different than None at position {i + 1}, "
                           "but the corresponding forward input was not a Variable")
    if g is None or node._edges[i] is None:
        return None
    if not isinstance(g, Tensor):
        raise TypeError(f"function {node.name()} returned a gradient of type {type(g).__name__} at index {i}; "
                        "expected a Tensor or None")
    expected = node._input_shapes[i]
    if tuple(g.shape) != tuple(expected):
        raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {i} - got "
                           f"{list(g.shape)} but expected shape compatible with {list(expected)}")
    return g._data


def _run_leaf_hooks(leaf, g):
    if leaf._hooks:
        for hook in list(leaf._hooks.values()):
            out = hook(wrap(g, leaf._device))
            if out is not None:
                g = out._data
    return g


def _accumulate(leaf, g, device):
    """Adds ``g`` into a leaf's ``.grad`` (in the leaf's dtype)."""
    if g.dtype != leaf._data.dtype:
        g = g.astype(leaf._data.dtype)
    if leaf.grad is None:
        # copied: the same array may reach other leaves too (xp.array also turns a scalar into a 0-d array)
        leaf.grad = wrap(device._backend.xp.array(g, copy=True), device)
    else:
        leaf.grad._data = leaf.grad._data + g
