"""torchrl.modules.utils: the env transforms a recurrent policy needs (its ``TensorDictPrimer`` for the
recurrent states, an ``InitTracker`` for ``is_init``), found by walking the policy's submodules."""
import warnings

from ..envs.transforms import Compose, InitTracker, TensorDictPrimer
from ..tensordict.keys import unravel_key_to_tuple

__all__ = ["get_primers_from_module", "get_env_transforms_from_module"]


def get_primers_from_module(module, warn=True, strict=True):
    """The ``TensorDictPrimer`` of every submodule that has ``make_tensordict_primer()`` (an
    ``LSTMModule``, a ``GRUModule``): one primer, a ``Compose`` of several, or None (with a
    warning when ``warn``). With ``strict=False`` a submodule whose primer fails is skipped, and a
    UserWarning names it."""
    primers, failures = [], []

    def collect(submodule):
        if not hasattr(submodule, "make_tensordict_primer"):
            return
        try:
            primers.append(submodule.make_tensordict_primer())
        except Exception as err:
            if strict:
                raise
            failures.append(f"{type(submodule).__name__}: {err}")

    module.apply(collect)
    if failures:
        names = "; ".join(sorted(set(failures)))
        warnings.warn(f"Could not auto-wire tensordict primers from these submodules: {names}. They need "
                      "explicit configuration to build a primer; wire them manually if needed.",
                      UserWarning, stacklevel=2)
    if not primers:
        if warn:
            warnings.warn("No primers found in the module.", UserWarning, stacklevel=2)
        return None
    return primers[0] if len(primers) == 1 else Compose(*primers)


def get_env_transforms_from_module(module, init_key="is_init"):
    """``Compose(InitTracker(init_key), primer)`` for a module with recurrent submodules, or the bare
    ``InitTracker`` for one without (torchrl's helper for ``TransformedEnv``)."""
    primer = get_primers_from_module(module, warn=False)
    tracker = InitTracker(init_key=init_key)
    return tracker if primer is None else Compose(tracker, primer)


def _flat_transforms(transform):
    if isinstance(transform, Compose):
        return [leaf for inner in transform for leaf in _flat_transforms(inner)]
    return [transform]


def missing_env_transforms(env, module, init_key="is_init"):
    """The transforms ``module`` needs that ``env`` lacks, judged by the env's observation and state
    specs: an ``InitTracker`` when no ``init_key`` leaf is there, and each primer whose keys are not
    all there. Nothing for a module that is not an ``nn.Module`` (a plain callable cannot be walked)."""
    if not hasattr(module, "apply"):
        return []
    primer = get_primers_from_module(module, warn=False, strict=False)
    keys = set()
    for spec in (env.full_observation_spec, env.full_state_spec):
        keys.update(unravel_key_to_tuple(key) for key in spec.keys(True, True))
    needed = []
    if not any(key[-1] == init_key for key in keys):
        needed.append(InitTracker(init_key=init_key))
    for transform in _flat_transforms(primer) if primer is not None else ():
        if not (isinstance(transform, TensorDictPrimer)
                and {unravel_key_to_tuple(k) for k in transform.primers.keys(True, True)} <= keys):
            needed.append(transform)
    return needed


def append_missing_env_transforms(env, module, init_key="is_init"):
    """``env`` with ``missing_env_transforms`` appended (the env itself when none is missing): what a
    collector made with ``auto_register_policy_transforms=True`` steps."""
    for transform in missing_env_transforms(env, module, init_key):
        env = env.append_transform(transform)
    return env
