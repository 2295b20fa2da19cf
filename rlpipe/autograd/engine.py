"""The backward pass: walks the graph of Function nodes in dependency order."""
from .function import as_array, edge_of, NOT_A_TENSOR
from .grad_mode import no_grad, enable_grad
from .._dispatch import handle_torch_function, has_torch_function
from .._tensor import Tensor, wrap
from ..backends.cpu import silence_fp_warnings, restore_fp_warnings


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates d(sum of tensors * grad_tensors)/d(leaf) into each leaf's ``.grad``
    (or only into ``inputs`` when given). With ``create_graph``, the backward pass is itself recorded,
    so the gradients can be differentiated again; the graph is then kept unless ``retain_graph=False``."""
    tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
    retain_graph = create_graph if retain_graph is None else retain_graph
    roots = _roots(tensors, grad_tensors, create_graph)
    if inputs is not None:
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        grads = _run(roots, bool(retain_graph), inputs, accumulate=False, graph=create_graph)
        for t, g in zip(inputs, grads):
            if g is not None:
                (_accumulate_graph if create_graph else _accumulate)(t, g, t._device)
        return
    _run(roots, bool(retain_graph), None, accumulate=True, graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, returned (nothing is accumulated); with
    ``create_graph``, they are recorded tensors that can be differentiated again."""
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
    retain_graph = create_graph if retain_graph is None else retain_graph
    roots = _roots(outputs, grad_outputs, create_graph)
    grads = _run(roots, bool(retain_graph), inputs, accumulate=False, graph=create_graph)
    result = []
    for i, (t, g) in enumerate(zip(inputs, grads)):
        if g is None:
            if materialize_grads:
                g = t._device._backend.xp.zeros_like(t._data)
            elif not allow_unused:
                raise RuntimeError(f"One of the differentiated Tensors (input {i}) appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the desired behavior.")
        result.append(g if g is None or isinstance(g, Tensor) else wrap(as_array(g, t._device), t._device))
    return tuple(result)


def _roots(tensors, grad_tensors, create_graph):
    """(edge, gradient) for each output: arrays, or Tensors with ``create_graph`` (a given gradient
    that requires grad stays in the recorded graph)."""
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
            g = wrap(g, t._device) if create_graph else g
        else:
            if not isinstance(g, Tensor):
                raise TypeError(f"gradient must be a Tensor, got {type(g).__name__}")
            if g.shape != t.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(g.shape)} and "
                                   f"output[{i}] has a shape of {tuple(t.shape)}.")
            if create_graph:
                g = g if g._data.dtype == t._data.dtype else g.to(t.dtype)
            else:
                g = g._data if g._data.dtype == t._data.dtype else g._data.astype(t._data.dtype)
        roots.append((edge_of(t), g))
    return roots


def _run(roots, retain_graph, inputs, accumulate, graph=False):
    """Propagates the root gradients through the graph: a node runs its backward once every node that
    feeds it a gradient has run. With ``inputs``, returns their gradients instead of accumulating into
    the leaves. NumPy's floating-point warnings stay off meanwhile, as for the forward ops. With
    ``graph`` (create_graph), the gradients are Tensors and the backward pass is recorded."""
    quiet = silence_fp_warnings()
    try:
        if not graph:
            return _walk(roots, retain_graph, inputs, accumulate, False)
        _check_double_backward(edge[0] for edge, _ in roots if type(edge) is tuple)
        with enable_grad():
            return _walk(roots, retain_graph, inputs, accumulate, True)
    finally:
        restore_fp_warnings(quiet)


def _check_double_backward(nodes):
    """Raises before any gradient is computed when a node the walk may reach cannot record its backward."""
    stack = list(nodes)
    seen = {id(node) for node in stack}
    while stack:
        node = stack.pop()
        cls = type(node)
        if cls.raw and cls.backward_graph is None:
            raise RuntimeError(f"create_graph=True: {cls.__name__} has no double backward in rlpipe yet "
                               f"(node {node.name()})")
        if getattr(cls.backward, "once_differentiable", False):
            raise RuntimeError(f"create_graph=True: {node.name()}'s backward is marked @once_differentiable: "
                               "trying to differentiate twice a function that was marked with @once_differentiable")
        for edge in node._edges:
            if type(edge) is tuple and id(edge[0]) not in seen:
                seen.add(id(edge[0]))
                stack.append(edge[0])


def _walk(roots, retain_graph, inputs, accumulate, graph):
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
    node_backward = _graph_backward if graph else _node_backward
    while ready:
        node = ready.pop()
        grads = buffers.pop(id(node))
        if node._out_meta is not None or node._tensor_hooks or node._pre_hooks:
            grads = _prepare_output_grads(node, grads, graph)
        if capture:
            _capture_output_grads(node, grads, capture, found)
        input_grads = node_backward(node, grads)
        if not retain_graph:
            node._saved = None  # frees the saved tensors: another backward through this node raises
        _hand_to_inputs(node, input_grads, dependencies, buffers, leaf_grads, ready)
    _finish_leaves(leaf_grads, capture, found, accumulate, graph)
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


def _finish_leaves(leaf_grads, capture, found, accumulate, graph):
    """Runs each leaf's hooks on its summed gradient, then stores it in ``found`` when the leaf is one of
    the requested inputs, else accumulates it into ``.grad`` (when ``accumulate``)."""
    for leaf, g in leaf_grads.values():
        g = _run_leaf_hooks(leaf, g, graph)
        k = capture.get(id(leaf)) if capture else None
        if k is not None:
            found[k] = g
        elif accumulate:
            (_accumulate_graph if graph else _accumulate)(leaf, g, leaf._device)


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


def _prepare_output_grads(node, grads, graph=False):
    """Materializes missing output grads as zeros and runs tensor and node pre-hooks (hooks see Tensors:
    arrays are wrapped for them, unless ``graph``, where the gradients are Tensors already)."""
    device = node._device
    if node._out_meta is not None and node._materialize:
        xp = node.be.xp
        zeros = (lambda m: wrap(xp.zeros(m[0], m[1]), device)) if graph else (lambda m: xp.zeros(m[0], m[1]))
        grads = [zeros(m) if g is None and m is not None else g for g, m in zip(grads, node._out_meta)]
    if not (node._tensor_hooks or node._pre_hooks):
        return grads
    as_tensor, as_data = _converters(device, graph)
    if node._tensor_hooks:
        for nr, hooks in node._tensor_hooks.items():
            for hook in list(hooks.values()):
                if grads[nr] is None:
                    continue
                out = hook(as_tensor(grads[nr]))
                if out is not None:
                    grads[nr] = as_data(out)
    if node._pre_hooks:
        for hook in list(node._pre_hooks.values()):
            out = hook(tuple(as_tensor(g) for g in grads))
            if out is not None:
                grads = [as_data(g) for g in _checked_hook_result(hook, out, len(grads))]
    return grads


def _converters(device, graph):
    """(array -> Tensor, Tensor -> array) for handing gradients to hooks; identities when ``graph``."""
    if graph:
        return _same, _same
    return (lambda g: None if g is None else wrap(g, device)), (lambda t: None if t is None else t._data)


def _same(value):
    return value


def _call_backward(node, grads, graph=False):
    """Runs a node's backward the general way: user Functions (tensors in and out), checks, post-hooks.
    With ``graph``, the gradients are Tensors and a built-in op runs its ``backward_graph``."""
    cls = type(node)
    device = node._device
    as_tensor, as_data = _converters(device, graph)
    if cls.raw:
        out = cls.backward_graph(node, *grads) if graph else cls.backward(node, *grads)
    elif graph:
        out = cls.backward(node, *grads)
    else:
        with no_grad():
            out = cls.backward(node, *(as_tensor(g) for g in grads))
    out = out if type(out) is tuple else (out,)
    n_inputs = len(node._edges)
    if len(out) < n_inputs or any(g is not None for g in out[n_inputs:]):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {n_inputs}, got {len(out)})")
    out = out[:n_inputs]
    if not cls.raw:
        out = tuple(as_data(_check_user_grad(node, i, g)) for i, g in enumerate(out))
    if node._post_hooks:
        for hook in list(node._post_hooks.values()):
            replaced = hook(tuple(as_tensor(g) for g in out), tuple(as_tensor(g) for g in grads))
            if replaced is not None:
                out = tuple(as_data(g) for g in _checked_hook_result(hook, replaced, len(out)))
    return out


def _graph_backward(node, grads):
    """``_node_backward`` for create_graph: Tensors in and out, the backward itself recorded."""
    return _call_backward(node, grads, graph=True)


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
    return g


def _run_leaf_hooks(leaf, g, graph=False):
    if leaf._hooks:
        as_tensor, as_data = _converters(leaf._device, graph)
        for hook in list(leaf._hooks.values()):
            out = hook(as_tensor(g))
            if out is not None:
                g = as_data(out)
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


def _accumulate_graph(leaf, g, device):
    """``_accumulate`` for create_graph: ``.grad`` becomes a recorded copy of ``g`` (or ``.grad + g``),
    so it can be differentiated again, as torch's AccumulateGrad does in grad mode."""
    if g._data.dtype != leaf._data.dtype:
        g = g.to(leaf.dtype)
    leaf.grad = g.clone() if leaf.grad is None else leaf.grad + g
