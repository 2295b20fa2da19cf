"""``Module``'s walks over its tree and the changes they make: iterating over submodules,
parameters and buffers, training mode and gradients, moving and casting (``to`` and its argument
parsing), as a mixin ``Module`` derives from (``module.py`` is their public home).
"""

from ... import __future__ as _future
from ... import _dtypes
from ..._memory_format import memory_format
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..parameter import Parameter


class _TraversalMixin:
    """``Module``'s iteration over its tree, its modes and gradients, and its moves and casts."""

    # ---- iteration ----------------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else \
            [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + "." if module_prefix else "") + name, value

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    # ---- modes and gradients ------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:  # zeroed in place: the same tensor stays p.grad
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def apply(self, fn):
        """Calls ``fn`` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- moving and casting -------------------------------------------------------------------
    def _replicate_for_data_parallel(self):
        """A shallow replica as torch's DataParallel makes one: it shares the submodules and buffers dicts'
        contents but holds no parameters of its own (the caller sets them, usually as views)."""
        replica = self.__new__(type(self))
        replica.__dict__ = self.__dict__.copy()
        replica._parameters = {}
        replica._buffers = replica._buffers.copy()
        replica._modules = replica._modules.copy()
        replica._is_replica = True
        return replica

    def _apply(self, fn, recurse=True):
        """Applies ``fn`` to every parameter, gradient and buffer. Parameters keep their identity
        (their data is swapped), so optimizers holding them stay valid."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        overwrite = _future.get_overwrite_module_params_on_conversion() and \
            not _future.get_swap_module_params_on_conversion()
        with no_grad():
            for key, param in self._parameters.items():
                if param is None:
                    continue
                if overwrite:  # rlpipe.__future__'s switch: new Parameter objects, as torch makes them
                    new = Parameter(fn(param), requires_grad=param.requires_grad)
                    if param.grad is not None:
                        new.grad = fn(param.grad).requires_grad_(param.grad.requires_grad)
                    self._parameters[key] = new
                    continue
                param.data = fn(param)
                if param.grad is not None:
                    param.grad.data = fn(param.grad)
            for key, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(tensor)``, ``to(device, dtype, non_blocking)``: only
        floating parameters and buffers change dtype; ``memory_format=`` lays out the 4-D and 5-D ones."""
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")
        fmt = kwargs.get("memory_format")

        def convert(t):
            laid_out = fmt is not None and t.dim() in (4, 5)  # (t.dim() only when asked: a lazy placeholder refuses it)
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None,
                        memory_format=fmt if laid_out else None)
        return self._apply(convert)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def _unsupported(self, kind):
        raise RuntimeError(f"rlpipe does not support {kind} devices; use cpu() or cuda()")

    def ipu(self, device=None):
        self._unsupported("IPU")

    def xpu(self, device=None):
        self._unsupported("XPU")

    def mtia(self, device=None):
        self._unsupported("MTIA")

    def _cast_floating(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self):
        return self._cast_floating(_dtypes.float32)

    def double(self):
        return self._cast_floating(_dtypes.float64)

    def half(self):
        return self._cast_floating(_dtypes.float16)

    def bfloat16(self):
        return self._cast_floating(_dtypes.bfloat16)

    def type(self, dst_type):
        """Casts every parameter and buffer (integer ones too) to ``dst_type``."""
        return self._apply(lambda t: t.to(dst_type))

    def to_empty(self, *, device, recurse=True):
        """Moves to ``device`` without copying values (they are uninitialized afterwards)."""
        from rlpipe._creation import empty_like
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def share_memory(self):
        return self._apply(lambda t: t.share_memory_())



_TO_TAIL = "bool non_blocking = False, bool copy = False, *, memory_format memory_format = None)"
_TO_SIGNATURES = ("({m}.device device = None, {m}.dtype dtype = None, " + _TO_TAIL,
                  "({m}.dtype dtype, " + _TO_TAIL, "(Tensor tensor, " + _TO_TAIL)


def _parse_to(*args, **kwargs):
    """(device, dtype) from Tensor.to's three forms: ``(device, dtype, non_blocking, copy)``,
    ``(dtype, non_blocking, copy)`` and ``(tensor, non_blocking, copy)``; any other combination
    raises torch's TypeError."""
    from rlpipe._device import device as device_cls

    def type_name(a):
        if type(a) in (device_cls, _dtypes.dtype, memory_format):
            return f"{_dtypes.shown_module()}.{type(a).__name__}"
        return "Tensor" if isinstance(a, Tensor) else type(a).__name__

    if len(args) > 4:
        raise TypeError(f"to() takes from 0 to 4 positional arguments but {len(args)} were given")
    first = args[0] if args else None
    names = ("tensor" if isinstance(first, Tensor) else "dtype" if isinstance(first, _dtypes.dtype) else "device",
             "non_blocking", "copy")
    if names[0] == "device":
        names = ("device", "dtype") + names[1:]
    given = dict(zip(names, args))
    checks = {"tensor": lambda v: isinstance(v, Tensor), "device": lambda v: isinstance(v, (str, int, device_cls)),
              "dtype": lambda v: isinstance(v, _dtypes.dtype), "non_blocking": lambda v: isinstance(v, bool),
              "copy": lambda v: isinstance(v, bool), "memory_format": lambda v: isinstance(v, memory_format)}
    valid = len(args) <= len(names) and not set(given) & set(kwargs) and set(kwargs) <= set(checks) - {"tensor"}
    given.update(kwargs)
    if not valid or "tensor" in given and {"device", "dtype"} & set(kwargs) or \
            not all(v is None and k in ("device", "dtype", "memory_format") or checks[k](v) for k, v in given.items()):
        got = ", ".join([type_name(a) for a in args] + [f"{k}={type_name(v)}" for k, v in kwargs.items()])
        raise TypeError(f"to() received an invalid combination of arguments - got ({got}), but expected one of:\n"
                        + "\n".join(" * " + s.format(m=_dtypes.shown_module()) for s in _TO_SIGNATURES))
    if given.get("copy"):
        raise RuntimeError(".to() does not accept copy argument")
    if "tensor" in given:
        return given["tensor"].device, given["tensor"].dtype
    return given.get("device"), given.get("dtype")
