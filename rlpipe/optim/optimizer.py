"""``Optimizer``: the base class of the optimizers, with torch.optim's interface.

Parameters live in ``param_groups`` (dicts holding ``params`` and the group's options) and
per-parameter buffers in ``state`` (keyed by the parameter tensor). ``state_dict`` swaps the
tensors for their positions, so a dict saved from one optimizer loads into another built over
other tensors of the same layout.

An update never records a graph: it runs under ``no_grad`` and hands the raw backend arrays
to the in-place step kernel for its backend (``kernels.get("adam_step", p._device._backend)(...)``),
which on a GPU is one fused launch per parameter.
"""
import copy
import warnings
from collections import defaultdict
from itertools import chain

from .. import _dtypes
from .._creation import tensor
from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad, no_grad


class _RequiredParameter:
    """Default of an option that every parameter group must set itself."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj):
    """How torch names a type in its messages: 'int', 'rlpipe.FloatTensor', 'module.Class'."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    module = cls.__module__ or ""
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


def _step_counter(count=0.0):
    """A 'step' entry: a 0-d CPU tensor (float64 when that is the default dtype, else
    float32, as torch)."""
    dtype = _dtypes.float64 if _dtypes.get_default_dtype() is _dtypes.float64 else _dtypes.float32
    return tensor(count, dtype=dtype)


def _advance(step):
    """Adds one to a 'step' tensor in place; the new count as a Python float."""
    data = step._data
    count = data.item() + 1.0
    data.fill(count)
    step._vc[0] += 1
    return count


def _cast_state(param, value, key=None):
    """A loaded state value for ``param``: tensors move to its device (and dtype, when it is a
    float) except 'step' counters, which stay as saved; dicts and sequences are walked."""
    if isinstance(value, Tensor):
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value


class Optimizer:
    """Base class: holds parameter groups and per-parameter state.

    ``params`` is an iterable of tensors (or of ``(name, tensor)`` pairs), or of dicts that
    each define a parameter group with its own options; ``defaults`` fills the options a
    group leaves out. Subclasses implement ``_update(group)`` (one step over one group).
    """
    # options that older state dicts may lack, with their values
    _late_defaults = {}
    # whether the state holds 'step' counters (made tensors when loaded as plain numbers)
    _counts_steps = False

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {_typename(params)}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Adds a group (a dict with 'params' and any options to override) to optimize too."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        param_group["params"] = params
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {_typename(p)}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = {id(p) for p in params}
        if len(ids) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error", stacklevel=3)
        for group in self.param_groups:
            if ("param_names" in group) != ("param_names" in param_group):
                kind = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {kind} to the optimizer")
            if not ids.isdisjoint(id(p) for p in group["params"]):
                raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def _params_with_grad(self, group):
        """(param, its state) for each of the group's params that has a gradient; a param's
        state is initialised (``_init_state``) the first time."""
        states = self.state
        for p in group["params"]:
            if p.grad is not None:
                state = states[p]
                if not state:
                    self._init_state(p, state, group)
                yield p, state

    def _init_state(self, param, state, group):
        raise NotImplementedError

    def _update(self, group):
        raise NotImplementedError

    def step(self, closure=None):
        """One update of every parameter that has a gradient. ``closure``, when given, is
        called first (with grad enabled) to recompute the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._update(group)
        return loss

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's gradient, or with ``set_to_none=False`` fills it with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if grad.grad_fn is not None:
                        grad.detach_()
                    else:
                        grad.requires_grad_(False)
                    grad.zero_()

    # ---- saving and loading ----

    def state_dict(self):
        """{'state': {index: buffers}, 'param_groups': [options with 'params': [indices]]}.

        Indices number the parameters in group order. The buffers are the optimizer's own
        tensors, not copies (deep-copy the dict to keep a snapshot)."""
        index = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Takes the options and buffers of a ``state_dict()`` whose groups match this
        optimizer's in number and size; buffers go to each parameter's device and dtype."""
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        by_index = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                            chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in by_index:
                state[by_index[k]] = _cast_state(by_index[k], v)
            else:
                state[k] = v
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for group in self.param_groups:
            for name, value in self._late_defaults.items():
                group.setdefault(name, value)
        if self._counts_steps:
            for entry in self.state.values():
                if "step" in entry and not isinstance(entry["step"], Tensor):
                    entry["step"] = _step_counter(float(entry["step"]))

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"
