"""The spec surface of ``EnvBase``, as torchrl 0.14's: ``input_spec``, ``output_spec``, ``specs``, the
``full_*`` specs, their ``*_unbatched`` forms, the key lists and ``fake_tensordict``.

An env stores four specs (what the step protocol and the collectors read): ``action_spec`` (the
leaf under ``"action"``), ``observation_spec`` (a ``Composite``), ``reward_spec`` (the leaf under
``"reward"``) and ``done_spec`` (a ``Composite``), plus ``state_spec`` (a ``Composite``, empty
unless set: rlpipe envs take no input but the action). The ``full_*``, input and output specs are
built from them on each access; they share the stored leaves, but entries added to a built
``Composite`` are not kept: set specs through the properties, as torchrl asks.
"""
from ..tensordict import unravel_key_to_tuple
from .specs import Bounded, Categorical, Composite, Unbounded

__all__ = ["SpecSurface"]


def _by_depth(key):
    """torchrl's key order: top-level keys first, then by depth, then by name."""
    key = unravel_key_to_tuple(key)
    return len(key) - 1, ".".join(key)


def _sorted_keys(spec):
    keys = (k if isinstance(k, str) or len(k) > 1 else k[0] for k in spec.keys(True, True))
    return sorted(keys, key=_by_depth)


def _unbatched(spec, dims):
    """``spec`` without its first ``dims`` dims (the env's batch dims), as torchrl's ``spec[0, ...]``."""
    if not dims or spec is None:
        return spec
    if isinstance(spec, Composite):
        out = Composite(shape=spec.shape[dims:], device=spec.device, data_cls=spec.data_cls)
        for key, sub in spec.items():
            out[key] = _unbatched(sub, dims)
        return out
    if isinstance(spec, Bounded):
        first = (0,) * dims
        return Bounded(spec.low[first], spec.high[first], shape=spec.shape[dims:], device=spec.device,
                       dtype=spec.dtype)
    return spec._with(shape=spec.shape[dims:])


def _unbatched_property(name):
    def get(self):
        return _unbatched(getattr(self, name), len(self.batch_size))

    def set_(self, spec):
        setattr(self, name, spec.expand(*(tuple(self.batch_size) + tuple(spec.shape))))
    return property(get, set_, doc=f"``{name}`` without the env's batch dims; setting one adds them.")


def _single_leaf(spec):
    """A stored action or reward spec as torchrl's ``action_spec``/``reward_spec``: the leaf of a
    one-leaf ``Composite`` (torchrl-style envs store a Composite for other keys), else the spec."""
    if not isinstance(spec, Composite):
        return spec
    keys = list(spec.keys(True, True))
    return spec[keys[0]] if len(keys) == 1 else spec


def _one_key(keys, what):
    if len(keys) != 1:
        raise KeyError(f"{what}_key requested but the environment has {len(keys)} {what} keys: {keys} "
                       "(expected exactly one)")
    return keys[0]


class SpecSurface:
    """torchrl's spec properties over the four stored specs (module docstring)."""

    # ---- the stored specs ----------------------------------------------------------------------------
    def _check_shape(self, name, value, unbatched_hint=True):
        if not hasattr(value, "shape"):
            raise TypeError(f"{name} of type {type(value).__name__} has no shape attribute (expected a spec)")
        batch = tuple(self.batch_size)
        if tuple(value.shape[:len(batch)]) != batch:
            hint = f" Set `env.{name}_unbatched = value` to set an unbatched spec." if unbatched_hint else ""
            raise ValueError(f"The value of {name}.shape ({list(value.shape)}) must start with the env batch size "
                             f"({list(batch)}).{hint}")

    def _on_device(self, spec):
        return spec if self.device is None else spec.to(self.device)

    def _only_leaf(self, name, value, key):
        """The leaf of a one-entry ``Composite`` keyed ``key`` (rlpipe envs have one action, one reward)."""
        if not isinstance(value, Composite):
            return value
        keys = [unravel_key_to_tuple(k) for k in value.keys(True, True)]
        if getattr(self, "_tensordict_style", False):  # torchrl's envs: any keys (kept as the Composite)
            return value[key] if keys == [(key,)] else value.clone()
        if keys != [(key,)]:
            raise ValueError(f"{name}: rlpipe envs have exactly one {key} entry, under {key!r}; got the keys "
                             f"{keys}")
        return value[key]

    @property
    def action_spec(self):
        """The spec of ``"action"`` (a leaf)."""
        spec = self.__dict__.get("_action_spec")
        if spec is None:
            raise KeyError(f"Failed to find the action_spec of {type(self).__name__} (set env.action_spec)")
        return _single_leaf(spec)

    @action_spec.setter
    def action_spec(self, value):
        self._check_shape("action_spec", value)
        self.__dict__["_action_spec"] = self._on_device(self._only_leaf("action_spec", value, "action"))

    @property
    def reward_spec(self):
        """The spec of ``"reward"`` (a leaf; ``Unbounded`` float32 ``batch_size + (1,)`` until set)."""
        spec = self.__dict__.get("_reward_spec")
        if spec is None:
            spec = self.__dict__["_reward_spec"] = Unbounded(shape=tuple(self.batch_size) + (1,), dtype="float32",
                                                             device=self.device)
        return _single_leaf(spec)

    @reward_spec.setter
    def reward_spec(self, value):
        self._check_shape("reward_spec", value)
        leaf = self._only_leaf("reward_spec", value, "reward")
        if not isinstance(leaf, Composite) and not len(leaf.shape):
            raise RuntimeError("the reward_spec's leaves shape cannot be empty: use a spec with a singleton "
                               f"dimension at the tail (shape {list(self.batch_size) + [1]})")
        self.__dict__["_reward_spec"] = self._on_device(leaf)

    @property
    def done_spec(self):
        """The done entries (a ``Composite``; ``done`` and ``terminated`` until set)."""
        spec = self.__dict__.get("_done_spec")
        if spec is None:
            spec = self.__dict__["_done_spec"] = self._completed_done(Composite(shape=self.batch_size,
                                                                                device=self.device))
        return spec

    @done_spec.setter
    def done_spec(self, value):
        self._check_shape("done_spec", value, unbatched_hint=False)
        if not isinstance(value, Composite):
            value = Composite(done=value, terminated=value.clone(), shape=self.batch_size, device=value.device)
        shapes = {tuple(leaf.shape) for leaf in value.values(True, True)}
        if getattr(self, "_tensordict_style", False):  # torchrl's envs: nested groups of their own shapes
            shapes = {tuple(leaf.shape) for leaf in value.values() if not isinstance(leaf, Composite)}
        if () in shapes:
            raise RuntimeError("the done_spec's leaves shape cannot be empty: use a spec with a singleton "
                               f"dimension at the tail (shape {list(self.batch_size) + [1]})")
        if len(shapes) > 1:
            raise ValueError(f"All shapes should match in done_spec, got {sorted(shapes)}")
        self.__dict__["_done_spec"] = self._completed_done(self._on_device(value.clone()))

    def _completed_done(self, spec):
        """torchrl's completion of a done spec: ``terminated`` beside a lone ``done`` and the other way
        round; ``done`` and ``terminated`` (bool, ``batch_size + (1,)``) in an empty one."""
        has_done, has_terminated = "done" in spec.keys(), "terminated" in spec.keys()
        if has_done and not has_terminated:
            spec["terminated"] = spec["done"].clone()
        elif has_terminated and not has_done:
            spec["done"] = spec["terminated"].clone()
        elif spec.is_empty():
            for key in ("done", "terminated"):
                spec[key] = Categorical(2, shape=tuple(spec.shape) + (1,), dtype="bool", device=self.device)
        return spec

    @property
    def observation_spec(self):
        """Every output that is not a reward or a done flag (a ``Composite``, empty until set)."""
        spec = self.__dict__.get("_observation_spec")
        if spec is None:
            spec = self.__dict__["_observation_spec"] = Composite(shape=self.batch_size, device=self.device)
        return spec

    @observation_spec.setter
    def observation_spec(self, value):
        self._check_shape("observation_spec", value, unbatched_hint=False)
        if not isinstance(value, Composite):  # a leaf goes under "observation"
            value = Composite(observation=value, shape=self.batch_size, device=value.device)
        self.__dict__["_observation_spec"] = self._on_device(value)

    @property
    def state_spec(self):
        """Inputs other than the action (a ``Composite``, empty until set)."""
        spec = self.__dict__.get("_state_spec")
        if spec is None:
            spec = self.__dict__["_state_spec"] = Composite(shape=self.batch_size, device=self.device)
        return spec

    @state_spec.setter
    def state_spec(self, value):
        if value is None:
            self.__dict__.pop("_state_spec", None)
            return
        if not isinstance(value, Composite):
            raise TypeError(f"The type of a state_spec must be Composite, got {type(value).__name__}")
        self._check_shape("state_spec", value, unbatched_hint=False)
        self.__dict__["_state_spec"] = self._on_device(value)

    # ---- the full specs ------------------------------------------------------------------------------
    def _stored(self, attribute, name):
        """A torchrl-style env's stored spec (a Composite keeps its keys), else the property ``name``."""
        if getattr(self, "_tensordict_style", False):
            getattr(self, name)  # raises or builds the default
            return self.__dict__[attribute]
        return getattr(self, name)

    def _holding(self, key, leaf):
        if isinstance(leaf, Composite):
            return leaf
        return Composite({key: leaf}, shape=self.batch_size, device=self.device)

    @property
    def full_action_spec(self):
        """``Composite(action=action_spec)`` (empty while the env has no action spec)."""
        try:
            spec = self._stored("_action_spec", "action_spec")
        except KeyError:
            return Composite(shape=self.batch_size, device=self.device)
        return self._holding("action", spec)

    @full_action_spec.setter
    def full_action_spec(self, spec):
        self.action_spec = spec

    @property
    def full_reward_spec(self):
        """``Composite(reward=reward_spec)``."""
        return self._holding("reward", self._stored("_reward_spec", "reward_spec"))

    @full_reward_spec.setter
    def full_reward_spec(self, spec):
        self.reward_spec = spec

    @property
    def full_observation_spec(self):
        """``observation_spec`` (a ``Composite``), under torchrl's full name."""
        return self.observation_spec

    @full_observation_spec.setter
    def full_observation_spec(self, spec):
        self.observation_spec = spec

    @property
    def full_done_spec(self):
        """``done_spec`` (a ``Composite``), under torchrl's full name."""
        return self.done_spec

    @full_done_spec.setter
    def full_done_spec(self, spec):
        self.done_spec = spec

    @property
    def full_state_spec(self):
        """``state_spec`` (a ``Composite``), under torchrl's full name."""
        return self.state_spec

    @full_state_spec.setter
    def full_state_spec(self, spec):
        self.state_spec = spec

    @property
    def input_spec(self):
        """What the env reads: ``Composite(full_state_spec=..., full_action_spec=...)`` (read-only)."""
        return Composite(full_state_spec=self.full_state_spec, full_action_spec=self.full_action_spec,
                         shape=self.batch_size, device=self.device)

    @input_spec.setter
    def input_spec(self, value):
        raise RuntimeError("input_spec is protected: set action_spec or state_spec instead")

    @property
    def output_spec(self):
        """What the env writes: ``Composite(full_observation_spec=..., full_done_spec=...,
        full_reward_spec=...)`` (read-only)."""
        return Composite(full_observation_spec=self.full_observation_spec, full_done_spec=self.full_done_spec,
                         full_reward_spec=self.full_reward_spec, shape=self.batch_size, device=self.device)

    @output_spec.setter
    def output_spec(self, value):
        raise RuntimeError("output_spec is protected: set observation_spec, reward_spec or done_spec instead")

    @property
    def specs(self):
        """Every spec in one ``Composite(output_spec=..., input_spec=...)``."""
        return Composite(output_spec=self.output_spec, input_spec=self.input_spec, shape=self.batch_size)

    action_spec_unbatched = _unbatched_property("action_spec")
    full_action_spec_unbatched = _unbatched_property("full_action_spec")
    observation_spec_unbatched = _unbatched_property("observation_spec")
    full_observation_spec_unbatched = _unbatched_property("full_observation_spec")
    reward_spec_unbatched = _unbatched_property("reward_spec")
    full_reward_spec_unbatched = _unbatched_property("full_reward_spec")
    done_spec_unbatched = _unbatched_property("done_spec")
    full_done_spec_unbatched = _unbatched_property("full_done_spec")
    state_spec_unbatched = _unbatched_property("state_spec")
    full_state_spec_unbatched = _unbatched_property("full_state_spec")
    input_spec_unbatched = _unbatched_property("input_spec")
    output_spec_unbatched = _unbatched_property("output_spec")

    # ---- keys ----------------------------------------------------------------------------------------
    @property
    def action_keys(self):
        """The keys of the action entries, torchrl's order (by depth, then name)."""
        return _sorted_keys(self.full_action_spec)

    @property
    def reward_keys(self):
        """The keys of the reward entries, torchrl's order."""
        return _sorted_keys(self.full_reward_spec)

    @property
    def done_keys(self):
        """The keys of the done entries (done, terminated, truncated...), torchrl's order."""
        return _sorted_keys(self.full_done_spec)

    @property
    def observation_keys(self):
        """The keys of the observation entries, torchrl's order."""
        return _sorted_keys(self.full_observation_spec)

    @property
    def state_keys(self):
        """The keys of the state entries (inputs other than the action), torchrl's order."""
        return _sorted_keys(self.full_state_spec)

    @property
    def action_key(self):
        """The one action key (a KeyError when the env has several or none)."""
        return _one_key(self.action_keys, "action")

    @property
    def reward_key(self):
        """The one reward key (a KeyError when the env has several or none)."""
        return _one_key(self.reward_keys, "reward")

    @property
    def done_key(self):
        """The one done key (a KeyError when the env has several or none)."""
        return _one_key(self.done_keys, "done")

    @property
    def done_keys_groups(self):
        """The done keys grouped by the TensorDict holding them, in ``reset_keys`` order (torchrl's)."""
        groups = {}
        for key in self.done_keys:
            groups.setdefault(unravel_key_to_tuple(key)[:-1], []).append(key)
        return [groups[root] for root in sorted(groups, key=lambda r: (len(r), ".".join(r)))]

    @property
    def shape(self):
        """The env's ``batch_size`` (torchrl's alias)."""
        return self.batch_size

    @property
    def reset_keys(self):
        """The partial-reset key beside each group of done entries: ``["_reset"]`` for root dones."""
        roots = {unravel_key_to_tuple(key)[:-1] for key in self.done_keys}
        return sorted(("_reset" if not root else root + ("_reset",) for root in roots), key=_by_depth)

    @property
    def batch_locked(self):
        """Whether the env only takes TensorDicts of its own ``batch_size``: always True in rlpipe."""
        return True

    @batch_locked.setter
    def batch_locked(self, value):
        raise RuntimeError("batch_locked is a read-only property")

    def fake_tensordict(self):
        """Zeros shaped as a step's TensorDict: state, action, observations and done flags at the root,
        observations, reward and done flags under ``"next"`` (as torchrl's)."""
        fake = self.full_state_spec.zero()
        fake.update(self.full_action_spec.zero())
        observations = self.full_observation_spec.zero()
        done = self.full_done_spec.zero()
        fake.update(observations)
        fake.update(done.clone())
        next_td = observations.clone()
        next_td.update(self.full_reward_spec.zero())
        next_td.update(done)
        fake.set("next", next_td)
        return fake
