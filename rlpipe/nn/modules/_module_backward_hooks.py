"""The wiring of a module's full backward (pre-)hooks into the autograd graph: an identity
``Function`` around the module's inputs and outputs whose nodes run the hooks (``module.py`` is
its public home).
"""

from ..._tensor import Tensor
from ...autograd.function import Function
from ...autograd.grad_mode import is_grad_enabled


class BackwardHookFunction(Function):
    """An identity op around a module's inputs and outputs whose node carries the module's backward
    hooks: the output node sees grad_output, the input node grad_input."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads

    def name(self):
        return "BackwardHookFunctionBackward"


class _BackwardHook:
    """Wires a module's full backward (pre-)hooks through BackwardHookFunction nodes, as torch's
    utils.hooks.BackwardHook does."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_index = self.output_index = None

    @staticmethod
    def _pack(indices, values, size):
        out = [None] * size
        for i, v in zip(indices, values):
            out[i] = v
        return tuple(out)

    def _wrap_tensors(self, on_node, args):
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (any(t.requires_grad for t in tensors) and is_grad_enabled()):
            return args, None
        wrapped = BackwardHookFunction.apply(*tensors)
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        node = next(t.grad_fn for t in wrapped if t.grad_fn is not None)
        on_node(node)
        out = list(args)
        for i, t in zip(index, wrapped):
            out[i] = t
        return tuple(out), index

    def setup_input_hook(self, args):
        def on_node(node):
            def hook(grad_input, _):
                if self.grad_outputs is None:
                    return None
                result = self._pack(self.input_index, grad_input, self.n_inputs)
                for user_hook in self.user_hooks:
                    out = user_hook(self.module, result, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(result):
                        raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(out)}, "
                                           f"but expected {len(result)}")
                    result = out
                self.grad_outputs = None
                return tuple(result[i] for i in self.input_index)
            node.register_hook(hook)
        wrapped, self.input_index = self._wrap_tensors(on_node, args)
        self.n_inputs = len(args)
        return wrapped

    def setup_output_hook(self, result):
        def on_node(node):
            def hook(_, grad_output):
                self.grad_outputs = self._pack(self.output_index, grad_output, self.n_outputs)
                for pre_hook in self.user_pre_hooks:
                    out = pre_hook(self.module, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(self.grad_outputs):
                        raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                           f"{len(out)}, but expected {len(self.grad_outputs)}")
                    self.grad_outputs = out
                local = self.grad_outputs
                if self.input_index is None:  # no input needs a gradient: the hooks run now
                    for user_hook in self.user_hooks:
                        out = user_hook(self.module, self._pack([], [], self.n_inputs), self.grad_outputs)
                        if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
                            raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                               "always return None or None for all gradients.")
                    self.grad_outputs = None
                return tuple(local[i] for i in self.output_index)
            node.register_hook(hook)
        single = not isinstance(result, tuple)
        wrapped, self.output_index = self._wrap_tensors(on_node, (result,) if single else result)
        self.n_outputs = 1 if single else len(result)
        return wrapped[0] if single else wrapped
