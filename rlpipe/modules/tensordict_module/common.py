"""``SafeModule``: a TensorDictModule with output specs (torchrl.modules.tensordict_module.common)."""
from ...envs.specs import Composite, TensorSpec
from ...tensordict import TensorDictModule
from ...tensordict.keys import unravel_key_list

__all__ = ["SafeModule", "register_spec"]


def register_spec(module, safe, spec):
    """Stores ``spec`` as a Composite keyed by ``module.out_keys`` (missing keys: None); with ``safe``,
    outputs are projected into their specs after each call."""
    if spec is not None and not isinstance(spec, TensorSpec):
        raise TypeError("spec must be a TensorSpec subclass")
    spec = Composite() if spec is None else spec.clone()
    if not isinstance(spec, Composite):
        if len(module.out_keys) > 1:
            raise RuntimeError(f"got more than one out_key for the TensorDictModule: {module.out_keys},\nbut only one "
                               "spec. Consider using a Composite object or no spec at all.")
        spec = Composite({module.out_keys[0]: spec})
    out_keys = set(unravel_key_list(list(module.out_keys)))
    for key in out_keys - set(unravel_key_list(list(spec.keys(True, True)))):
        spec[key] = None
    spec_keys = set(unravel_key_list(list(spec.keys(True, True))))
    if spec_keys != out_keys:
        raise RuntimeError(f"spec keys and out_keys do not match, got: {spec_keys} and {out_keys} respectively")
    module._spec = spec
    module.safe = safe
    if safe:
        if all(s is None for s in spec.values()):
            raise RuntimeError("`TensorDictModule(spec=None, safe=True)` is not a valid configuration as the tensor "
                               "specs are not specified")
        module.register_forward_hook(_project_outputs)


def _project_outputs(module, args, tensordict_out):
    for key in module.spec.keys(True, True):
        spec = module.spec[key]
        value = tensordict_out.get(key, None)
        if spec is not None and value is not None:
            tensordict_out.set(key, spec.project(value))


class SafeModule(TensorDictModule):
    """A ``TensorDictModule`` that carries the specs of its outputs (``spec``, a Composite keyed by the
    out-keys); with ``safe=True`` each output is projected into its spec."""

    def __init__(self, module, in_keys, out_keys, spec=None, safe=False, inplace=True):
        super().__init__(module, in_keys, out_keys, inplace=inplace)
        register_spec(self, safe, spec)

    @property
    def spec(self):
        """The Composite spec of the module's outputs (its out-keys' specs); settable to another Composite."""
        return self._spec

    @spec.setter
    def spec(self, spec):
        if not isinstance(spec, Composite):
            raise RuntimeError(f"Trying to set an object of type {type(spec)} as a tensorspec but expected a "
                               "Composite instance.")
        self._spec = spec

    def random(self, tensordict):
        """Writes a random value of the first out-key's spec into ``tensordict``."""
        key = self.out_keys[0]
        tensordict.set(key, self.spec[key].rand(tensordict.batch_size))
        return tensordict

    random_sample = random
