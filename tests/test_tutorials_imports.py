"""What torchrl's pendulum tutorial imports and calls before it trains: the
``torchrl.envs.transforms.transforms`` path, ``_apply_to_composite``, ``random_()`` without bounds
and ``check_env_specs`` on an env whose observations are also its state."""
import importlib

import pytest

import rlpipe
from rlpipe.envs import Bounded, Composite, EnvBase, Transform, Unbounded
from rlpipe.envs.transforms.transforms import _apply_to_composite  # torchrl's import path
from rlpipe.envs.utils import check_env_specs
from rlpipe.tensordict import TensorDict


def test_transforms_package_paths_name_the_same_classes():
    package = importlib.import_module("rlpipe.envs.transforms")
    module = importlib.import_module("rlpipe.envs.transforms.transforms")
    for name in ("StepCounter", "TransformedEnv", "Compose", "UnsqueezeTransform", "CatFrames", "TensorDictPrimer"):
        assert getattr(package, name) is getattr(module, name) is getattr(importlib.import_module("rlpipe.envs"), name)


class _Widen(Transform):
    @_apply_to_composite
    def transform_observation_spec(self, spec):
        return Bounded(low=-1.0, high=2.0, shape=tuple(spec.shape) + (2,), dtype=spec.dtype)


def test_apply_to_composite_maps_each_present_in_key_as_torchrl():
    # recorded from torchrl 0.14.1 (same transform, same spec)
    t = _Widen(in_keys=["a", ("n", "b"), "missing"], out_keys=["a2", ("n", "c"), "m2"])
    spec = Composite(a=Unbounded(shape=(3,)), n=Composite(b=Unbounded(shape=())), z=Unbounded(shape=(1,)))
    out = t.transform_observation_spec(spec)
    shapes = {k if isinstance(k, str) else tuple(k): tuple(out[k].shape) for k in out.keys(True, True)}
    assert shapes == {"a": (3,), ("n", "b"): (), ("n", "c"): (2,), "a2": (3, 2), "z": (1,)}
    assert isinstance(out["a2"], Bounded) and isinstance(out["a"], Unbounded)
    assert isinstance(t.transform_observation_spec(Unbounded(shape=(4,))), Bounded)
    assert set(spec.keys()) == {"a", "n", "z"}  # the input spec is left alone


@pytest.mark.parametrize("dtype, high", [(rlpipe.int64, 2 ** 63 - 1), (rlpipe.int32, 2 ** 31 - 1),
                                         (rlpipe.uint8, 255), (rlpipe.float32, 2 ** 24), (rlpipe.bool, 1)])
def test_random_without_bounds_spans_the_dtype(dtype, high):
    rlpipe.manual_seed(0)
    values = rlpipe.empty((4000,), dtype=dtype).random_()
    assert values.dtype == dtype
    assert values.min().item() >= 0 and values.max().item() <= high
    assert float(values.max().item()) > high / 2  # spread over the range, not stuck at 0


def test_random_with_bounds_is_unchanged():
    values = rlpipe.empty((1000,), dtype=rlpipe.int64).random_(3, 5)
    assert set(values.tolist()) == {3, 4}
    assert set(rlpipe.empty((1000,), dtype=rlpipe.int64).random_(2).tolist()) == {0, 1}
    with pytest.raises(RuntimeError, match="from=4 >= to=4"):
        rlpipe.empty((2,), dtype=rlpipe.int64).random_(4, 4)


class _StatefulCounter(EnvBase):
    """A stateless-style env as in torchrl's pendulum tutorial: ``x`` is both observation and state."""

    def __init__(self):
        super().__init__(batch_size=[])
        self.observation_spec = Composite(x=Unbounded(shape=(), dtype=rlpipe.float32))
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Unbounded(shape=(1,), dtype=rlpipe.float32)
        self.reward_spec = Unbounded(shape=(1,), dtype=rlpipe.float32)

    def _reset(self, tensordict):
        return TensorDict({"x": rlpipe.zeros(())}, [])

    def _step(self, tensordict):
        x = tensordict["x"] + tensordict["action"][0]
        return TensorDict({"x": x, "reward": x.reshape(1), "done": rlpipe.zeros(1, dtype=rlpipe.bool)}, [])

    def _set_seed(self, seed):
        return seed


def test_check_env_specs_compares_next_entries_that_are_state_and_observation():
    env = _StatefulCounter()
    check_env_specs(env)
    rollout = env.rollout(3)
    assert ("next", "x") in rollout.keys(True, True)
