"""tensordict.nn.CudaGraphModule: rlpipe records no CUDA graphs, so the wrapper runs its module eagerly."""

__all__ = ["CudaGraphModule"]


class CudaGraphModule:
    """tensordict's ``CudaGraphModule`` with its signature (``module``, ``warmup``, ``in_keys``,
    ``out_keys``, ``device``). tensordict captures the module into a CUDA graph after ``warmup``
    calls; rlpipe records no CUDA graphs, so every call runs ``module`` itself, with the same
    arguments and result (as ``rlpipe.compile`` runs a function eagerly). ``counter`` counts the
    calls; ``in_keys``/``out_keys`` are the module's when it has them, as tensordict's."""

    def __init__(self, module, warmup=2, in_keys=None, out_keys=None, device=None):
        if not callable(module):
            raise TypeError(f"CudaGraphModule: module must be callable, got {type(module).__name__}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
            raise ValueError(f"warmup must be an integer greater than 0, got {warmup!r}.")
        self.module = module
        self.counter = 0
        self._warmup = warmup
        self.device = device
        self.in_keys = module.in_keys if hasattr(module, "in_keys") else in_keys
        if hasattr(module, "out_keys"):
            self.out_keys = module.out_keys
        else:
            self.out_keys = [] if out_keys is None and self.in_keys is not None else out_keys

    def __call__(self, *args, **kwargs):
        """Runs the module on the arguments as they are."""
        self.counter += 1
        return self.module(*args, **kwargs)

    def state_dict(self):
        """The module's ``state_dict()`` (an empty dict for a module without one)."""
        try:
            return self.module.state_dict()
        except AttributeError:
            return {}

    def load_state_dict(self, state_dict):
        """Loads ``state_dict`` into the module (nothing for a module without ``load_state_dict``)."""
        try:
            self.module.load_state_dict(state_dict)
        except AttributeError:
            pass

    def __repr__(self):
        return (f"{type(self).__name__}(\n    module={self.module}, \n    warmup={self._warmup}, "
                f"\n    in_keys={self.in_keys}, \n    out_keys={self.out_keys}\n)")
