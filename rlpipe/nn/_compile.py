"""``rlpipe.compile``: torch.compile's signature and wrapping, running eagerly."""
from .modules.module import Module

__all__ = ["compile", "OptimizedModule"]


class OptimizedModule(Module):
    """What ``rlpipe.compile(module)`` returns, as torch's wrapper: calling it calls the original module
    (hooks on either run), which it holds as ``_orig_mod``, so its ``state_dict`` keys start with
    ``_orig_mod.``; other attributes are read from and written to the original module."""

    _opt_mod_attributes = {"_orig_mod", "compile_options", "forward", "__dict__", "_super_module_initialized"}

    def __init__(self, mod, compile_options):
        object.__setattr__(self, "_orig_mod", mod)  # first: attribute reads during Module.__init__ forward to it
        self._super_module_initialized = False
        super().__init__()
        self._super_module_initialized = True
        self._orig_mod = mod  # now registered as the child module
        self.compile_options = compile_options

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    @property
    def training(self):
        """The wrapped module's training flag (setting it sets the wrapped module's)."""
        return self._orig_mod.training

    @training.setter
    def training(self, value):
        if self.__dict__.get("_super_module_initialized"):  # Module.__init__'s default is not the module's
            self._orig_mod.training = value

    def __len__(self):
        try:
            return len(self._orig_mod)
        except TypeError:
            raise TypeError(f"{type(self._orig_mod).__name__} does not support len()") from None

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __dir__(self):
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, name=None,
            disable=False, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """torch.compile's interface, for code written against it: rlpipe has no graph compiler, so every
    model runs eagerly, as torch's ``backend="eager"`` would run it, and the tuning arguments
    (``fullgraph``, ``dynamic``, ``backend``, ``mode``, ``options``, ...) are accepted and kept on
    the wrapper's ``compile_options``, but change nothing.

    A function comes back unchanged; a Module comes back wrapped in an ``OptimizedModule`` (call it as
    the module; the module is its ``_orig_mod``). With no ``model`` this is a decorator, with or without
    arguments: ``@rlpipe.compile`` or ``@rlpipe.compile(mode="max-autotune")``. ``disable=True`` returns
    ``model`` itself.
    """
    settings = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, name=name,
                    disable=disable, recompile_limit=recompile_limit, isolate_recompiles=isolate_recompiles,
                    shapes_spec=shapes_spec)
    if model is None:
        def decorate(model):
            if model is None:
                raise RuntimeError("Model can't be None")
            return compile(model, **settings)
        return decorate
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if not callable(model):
        raise TypeError(f"A callable function is expected, but {type(model)} is provided.")
    if disable or not isinstance(model, Module):
        return model
    return OptimizedModule(model, settings)
