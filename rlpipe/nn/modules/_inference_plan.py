"""Sequential's cached inference plan: the ``run_without_graph`` steps of its modules, built once and
reused while nothing they depend on changed.

A plan holds the raw arrays of the modules' parameters. Before each use it checks, cheaply, that it
is still what building it again would give:

- no module attribute was assigned or deleted anywhere since it was built (``attribute_epoch``,
  bumped by ``Module.__setattr__``/``__delattr__``: train/eval, a replaced child or parameter, a
  patched ``forward``, an activation's settings);
- the Sequential holds the same modules, in the same order, and none has a forward hook;
- every parameter is the same object in its module's table (``functional_call`` and ``to_module``
  swap them there directly) and still holds the same array: in-place updates (optimizer steps,
  ``load_state_dict``, ``copy_``) write into that array, so the plan sees them; anything that
  rebinds it (``.data = ...``, ``.to(dtype)``, ``share_memory_``) makes the plan rebuild;
- grad is disabled, no global forward hook exists, and the input is a plain Tensor of the dtype
  and device it was built for.
"""
from ..._tensor import Tensor
from ...autograd.function import null_context
from ...autograd.grad_mode import state as _grad_state
from . import module as _module
from .module import attribute_epoch, inference_steps, run_steps


def _no_plan():
    """What a pickled plan loads as: none (the copy builds its own on its first call)."""
    return None


class InferencePlan:
    """One Sequential's inference steps for inputs of one dtype and device, with what they depend on."""
    __slots__ = ("epoch", "modules", "hooks", "dtype", "device", "ctx", "steps", "tensors")

    def __init__(self, modules, dtype, device):
        # what the plan depends on is read before its steps are built: a change made meanwhile (another
        # thread's) then shows as a mismatch, never as a plan that looks current
        self.epoch = attribute_epoch[0]
        self.modules = modules
        self.hooks = tuple(table for m in modules for table in (m._forward_hooks, m._forward_pre_hooks))
        self.dtype, self.device, self.ctx = dtype, device, null_context(device._backend)
        # (an entry that is not a Tensor, vmap's batched one, has no array: inference_steps refuses it)
        self.tensors = tuple((m._parameters, name, p, p._data) for m in modules for name, p in m._parameters.items()
                             if isinstance(p, Tensor))
        self.steps = inference_steps(modules, dtype, device)  # None: the fast path does not apply

    def __reduce__(self):
        return _no_plan, ()

    def __deepcopy__(self, memo):
        return None

    def fits(self, modules, input):
        """Whether this plan is what building one for ``modules`` and ``input`` would give now."""
        dtype = input._data.dtype
        if self.epoch != attribute_epoch[0] or input._device is not self.device or \
                dtype is not self.dtype and dtype != self.dtype or modules != self.modules or any(self.hooks):
            return False
        for table, name, tensor, array in self.tensors:
            if table.get(name) is not tensor or tensor._data is not array:
                return False
        return True


def run_planned(sequential, input):
    """``sequential``'s modules applied to ``input`` through its cached plan (built or rebuilt as
    needed), or None where the inference fast path does not apply (see ``run_without_graph``)."""
    if _grad_state.grad or type(input) is not Tensor or _module._global_forward_pre_hooks or \
            _module._global_forward_hooks:
        return None
    state = sequential.__dict__
    modules = tuple(state["_modules"].values())
    plan = state.get("_inference_plan")
    if plan is None or not plan.fits(modules, input):
        plan = InferencePlan(modules, input._data.dtype, input._device)
        if plan.steps is None:
            plan = None
        state["_inference_plan"] = plan  # (not through __setattr__: that would bump the epoch)
        if plan is None:
            return None
    return run_steps(plan.steps, input, plan.ctx)
