"""``functional_call``: run a module with some of its parameters and buffers replaced by given tensors."""
import contextlib

from .._tensor import Tensor
from ._batched import BatchedTensor
from ._submodules import named_submodules

__all__ = ["functional_call", "named_tensors", "reparametrized", "stack_module_state"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the parameters and buffers named (``"layer.weight"``) in
    ``parameter_and_buffer_dicts`` (a mapping, a TensorDict or a tuple of them) replaced by the given
    tensors for the call, so gradients flow to those tensors; the module's own ones are put back
    afterwards, also when the call raises. ``tie_weights``: a tensor registered under several names
    is replaced under all of them when one is given. ``strict``: every parameter and buffer must be
    given, and only those."""
    values = _merged(parameter_and_buffer_dicts)
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    ensemble = _is_ensemble(values)
    if ensemble:  # a plain MLP given all its parameters runs as one node, with nothing swapped in
        out = _ensemble_mlp().fused_call(module, values, args, kwargs)
        if out is not NotImplemented:
            return out
    with reparametrized(module, values, tie_weights=tie_weights, strict=strict), \
            _ensemble_forwards(module, ensemble):
        return module(*args, **kwargs)


def _is_ensemble(values):
    """Whether some of ``values`` are batched by vmap (stacked parameters: an ensemble)."""
    for value in values.values():
        if type(value) is BatchedTensor:
            return True
    return False


def _ensemble_mlp():
    """The module ``_ensemble_mlp`` (imported on first use: it imports rlpipe.nn, which imports this one)."""
    module = _LAZY.get("ensemble_mlp")
    if module is None:
        from rlpipe.func import _ensemble_mlp as module
        _LAZY["ensemble_mlp"] = module
    return module


_LAZY = {}


@contextlib.contextmanager
def _ensemble_forwards(module, ensemble):
    """Within the block, for an ``ensemble``'s values, every plain MLP in ``module`` runs as one
    EnsembleMLP node (see ``_ensemble_mlp``)."""
    if not ensemble:
        yield
        return
    patched = _ensemble_mlp().fused_forwards(module)
    try:
        for sub, forward in patched.items():
            sub.__dict__["forward"] = forward
        yield
    finally:
        for sub in patched:
            sub.__dict__.pop("forward", None)


def _merged(dicts):
    """One flat {dotted name: tensor} dict from a mapping, a TensorDict or a sequence of them."""
    if _is_mapping(dicts):
        return _flat(dicts)
    if not isinstance(dicts, (list, tuple)):
        raise ValueError(f"Expected all elements of parameter_and_buffer_dicts to be dictionaries, got "
                         f"{type(dicts).__name__}")
    merged = {}
    for d in dicts:
        if not _is_mapping(d):
            raise ValueError(f"Expected all elements of parameter_and_buffer_dicts to be dictionaries, got "
                             f"{type(d).__name__}")
        flat = _flat(d)
        repeated = sorted(set(flat) & set(merged))
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                             "ambiguous")
        merged.update(flat)
    return merged


def _is_mapping(obj):
    return hasattr(obj, "items") and hasattr(obj, "keys")


def _flat(mapping, prefix=""):
    """{dotted name: tensor}: a TensorDict's nested TensorDicts (one per submodule) are walked, not
    flattened into a new TensorDict, which would cost more than the call itself."""
    if not hasattr(mapping, "flatten_keys"):
        return dict(mapping.items())
    flat = {}
    for key, value in mapping.items():
        # (tensors first: hasattr's miss costs an exception; on the type: a batched tensor's missing attribute raises)
        if type(value) is not BatchedTensor and not isinstance(value, Tensor) and hasattr(type(value), "flatten_keys"):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def named_tensors(module, remove_duplicate=True):
    """(dotted name, tensor) of every parameter, then every buffer, of ``module`` and its submodules,
    in one walk over the modules (``named_parameters`` and ``named_buffers`` walk once each)."""
    modules = named_submodules(module, remove_duplicate)
    seen = set()
    for table in ("_parameters", "_buffers"):
        for prefix, sub in modules:
            for name, tensor in sub.__dict__[table].items():
                if tensor is None or remove_duplicate and id(tensor) in seen:
                    continue
                seen.add(id(tensor))
                yield (prefix + "." + name if prefix else name), tensor


def _tied_names(module):
    """{name: [every name of the same tensor]} for the parameters and buffers registered more than once."""
    by_tensor = {}
    for name, tensor in named_tensors(module, remove_duplicate=False):
        by_tensor.setdefault(id(tensor), []).append(name)
    return {name: names for names in by_tensor.values() if len(names) > 1 for name in names}


def _with_tied(module, values):
    """``values`` with each tied alias filled in; two different values for one tied tensor is an error."""
    tied = _tied_names(module)
    if not tied:  # (the common case: nothing to fill in)
        return values
    out = dict(values)
    for name, value in values.items():
        for alias in tied.get(name, ()):
            if alias in values and values[alias] is not value:
                raise ValueError(f"functional_call got multiple values for keys {sorted([name, alias])}, which are "
                                 "tied. Consider using tie_weights=False")
            out[alias] = value
    return out


def _check_strict(module, values):
    expected = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
        {n for n, _ in module.named_buffers(remove_duplicate=False)}
    missing, unexpected = sorted(expected - set(values)), sorted(set(values) - expected)
    if missing or unexpected:
        parts = ([f"Unexpected key(s): {', '.join(map(repr, unexpected))}."] if unexpected else []) + \
            ([f"Missing key(s): {', '.join(map(repr, missing))}."] if missing else [])
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(parts))


@contextlib.contextmanager
def reparametrized(module, values, *, tie_weights=True, strict=False):
    """Within the block, ``module``'s tensors named in ``values`` are the given ones (see functional_call)."""
    if tie_weights:
        values = _with_tied(module, values)
    if strict:
        _check_strict(module, values)
    swapped, owners = [], {}
    try:
        for name, value in values.items():
            path, _, leaf = name.rpartition(".")
            owner = owners.get(path)
            if owner is None:  # (looked up once per submodule)
                owner = owners[path] = module.get_submodule(path) if path else module
            swapped.append(_swap(owner, leaf, value))
        yield module
    finally:
        for owner, table, name, old in reversed(swapped):
            _put(owner, table, name, old)


_ABSENT = object()


def _swap(owner, leaf, value):
    """Puts ``value`` under ``owner``'s name ``leaf``; returns what restores the old state."""
    for table_name in ("_parameters", "_buffers"):
        table = owner.__dict__[table_name]
        if leaf in table:
            old = table[leaf]
            table[leaf] = value
            return owner, table, leaf, old
    old = owner.__dict__.get(leaf, _ABSENT)
    owner.__dict__[leaf] = value  # not a parameter or buffer of the module: a plain attribute for the call
    return owner, owner.__dict__, leaf, old


def _put(owner, table, name, old):
    if old is _ABSENT:
        del table[name]
    else:
        table[name] = old


def stack_module_state(models):
    """``(params, buffers)``: dicts of the parameters and buffers of ``models`` (of one class, all in
    training or all in eval mode) stacked along a new first dim, named as in ``named_parameters``:
    new leaves, detached from the models' own, for ``vmap`` over an ensemble."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    return (_stacked([dict(m.named_parameters()) for m in models]),
            _stacked([dict(m.named_buffers()) for m in models]))


def _stacked(dicts):
    return {name: _stacked_leaf([d[name] for d in dicts], name) for name in dicts[0]}


def _stacked_leaf(tensors, name):
    from rlpipe.primitives.shape import stack
    requires_grad = {t.requires_grad for t in tensors}
    if len(requires_grad) != 1:
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(tensors)
    return result.detach().requires_grad_() if requires_grad.pop() else result
