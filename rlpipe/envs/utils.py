"""Environment helpers, as torchrl's ``torchrl.envs.utils``: ``check_env_specs``, ``step_mdp`` and the
exploration type (tensordict's interaction type under torchrl's names)."""
import contextlib
import logging

from .._creation import zeros
from .._tensor import Tensor
from ..tensordict import LazyStackedTensorDict, TensorDictBase, unravel_key_to_tuple
from ..tensordict.utils import is_non_tensor
from ..tensordict.nn.probabilistic import InteractionType as ExplorationType
from ..tensordict.nn.probabilistic import interaction_type as exploration_type
from ..tensordict.nn.probabilistic import set_interaction_type as set_exploration_type

__all__ = ["check_env_specs", "step_mdp", "RandomPolicy", "ExplorationType", "exploration_type", "set_exploration_type",
           "make_composite_from_td", "terminated_or_truncated"]

logger = logging.getLogger(__name__)


class FixedSwitch(contextlib.ContextDecorator):
    """A torchrl setting (a context manager and decorator, with ``set()``) that rlpipe supports in one
    mode only: the subclass's ``__init__`` refuses the others, so entering and leaving change nothing."""

    def set(self):
        """Sets the mode for good (it is rlpipe's only one)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class RandomPolicy:
    """Samples actions uniformly from ``action_spec``: ``policy(td)`` sets ``td["action"]``."""

    def __init__(self, action_spec, action_key="action"):
        self.action_spec = action_spec
        self.action_key = action_key

    def __call__(self, tensordict):
        tensordict.set(self.action_key, self.action_spec.rand())
        return tensordict


_DONE_NAMES = ("done", "terminated", "truncated")


def terminated_or_truncated(data, full_done_spec=None, key="_reset", write_full_false=False):
    """Whether any done flag of ``data`` is True, as torchrl's: at each level holding done flags (the
    leaves of ``full_done_spec``, else the entries named done/terminated/truncated) their OR is written
    under ``key`` beside them; a level's flags prevail over those of its sub-TensorDicts in the result.
    Nothing stays written when no flag is True, unless ``write_full_false``. ``key=None`` writes nothing."""
    written = []
    any_done = _flag_levels(data, full_done_spec, key, (), written)
    if not any_done and not write_full_false:
        data.exclude(*written, inplace=True)
    return any_done


def _flag_levels(data, spec, key, prefix, written):
    """OR of the flags at this level, written under ``key``; the sub-levels' answer only counts when this
    level has no flags of its own."""
    if spec is None:
        items = list(data.items())
        flags = [value for name, value in items if name in _DONE_NAMES]
        children = [(name, value, None) for name, value in items
                    if name not in _DONE_NAMES and isinstance(value, TensorDictBase)]
    else:
        flags = [_flag_or_false(data, name) for name, leaf in spec.items() if not _is_composite(leaf)]
        children = [(name, data.get(name), leaf) for name, leaf in spec.items() if _is_composite(leaf)]
    any_below = False
    for name, child, child_spec in children:
        any_below = _flag_levels(child, child_spec, key, prefix + (name,), written) or any_below
    if not flags:
        return any_below
    aggregate = flags[0]
    for flag in flags[1:]:
        aggregate = aggregate | flag
    if key is not None:
        data.set(key, aggregate)
        written.append(prefix + (key,))
    return bool(aggregate.any())


def _is_composite(spec):
    from rlpipe.envs.specs import Composite, StackedComposite
    return isinstance(spec, (Composite, StackedComposite))


def _flag_or_false(data, name):
    """``data[name]``, or False flags (``data.shape + (1,)``) when the entry is missing."""
    value = data.get(name, None)
    return zeros(tuple(data.shape) + (1,), dtype="bool", device=data.device) if value is None else value


_terminated_or_truncated = terminated_or_truncated


def _key_list(keys):
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    return [unravel_key_to_tuple(k) for k in keys]


def _key_str(key):
    return key[0] if len(key) == 1 else key


def step_mdp(tensordict, next_tensordict=None, keep_other=True, exclude_reward=True, exclude_done=False,
             exclude_action=True, reward_keys="reward", done_keys="done", action_keys="action"):
    """The root TensorDict of the next step from a stepped one, as torchrl's ``step_mdp``.

    The result holds the entries of ``tensordict["next"]`` at its root; with ``keep_other``, also
    the root entries of ``tensordict`` that ``"next"`` does not replace (except ``"next"`` itself).
    ``exclude_reward`` (default True) drops ``reward_keys``, ``exclude_done`` drops ``done_keys``
    (``"done"`` only, by default), ``exclude_action`` (default True) drops ``action_keys`` (kept even
    without ``keep_other`` when False, as torchrl). Entries are shared, not copied; nested TensorDicts
    keep their batch sizes; a lazy stack is stepped per stacked TensorDict. With ``next_tensordict``,
    the result is written into it and returned.
    """
    if not isinstance(tensordict, TensorDictBase):
        raise TypeError(f"step_mdp expects a TensorDict, got {type(tensordict).__name__}")
    keys = dict(reward_keys=reward_keys, done_keys=done_keys, action_keys=action_keys)
    flags = dict(keep_other=keep_other, exclude_reward=exclude_reward, exclude_done=exclude_done,
                 exclude_action=exclude_action)
    if isinstance(tensordict, LazyStackedTensorDict):
        dim = tensordict.stack_dim
        parts = tensordict.tensordicts
        outs = [None] * len(parts) if next_tensordict is None else next_tensordict.unbind(dim)
        out = LazyStackedTensorDict.lazy_stack(
            [step_mdp(td, nxt, **flags, **keys) for td, nxt in zip(parts, outs)], dim)
    else:
        out = _step_mdp_plain(tensordict, _excluded(flags, keys), keep_other, exclude_action,
                              _key_list(action_keys))
    if next_tensordict is not None:
        next_tensordict.update(out)
        return next_tensordict
    return out


def _excluded(flags, keys):
    excluded = set()
    for what in ("reward", "done", "action"):
        if flags[f"exclude_{what}"]:
            excluded.update(_key_list(keys[f"{what}_keys"]))
    return excluded


def _step_mdp_plain(tensordict, excluded, keep_other, exclude_action, action_keys):
    nxt = tensordict.get("next", None)
    out = (tensordict if nxt is None else nxt).empty()
    if keep_other:
        for key in tensordict.keys():
            if key != "next":
                _copy_tree(tensordict, out, (key,), excluded)
    elif not exclude_action:
        for key in action_keys:
            if key in tensordict.keys(True):
                _copy_tree(tensordict, out, key, excluded)
    if nxt is not None:
        for key in nxt.keys():
            _copy_tree(nxt, out, (key,), excluded)
    return out


def _copy_tree(source, dest, key, excluded, prefix=()):
    """Sets ``source[key]`` into ``dest`` (sharing leaves), rebuilding nested TensorDicts with their own
    batch sizes and skipping ``excluded`` keys; returns whether anything was set."""
    head, rest = key[0], key[1:]
    total = prefix + (head,)
    if total in excluded:
        return False
    value = source.get(head)
    if not isinstance(value, TensorDictBase) or is_non_tensor(value):  # a non-tensor entry is a leaf
        if rest:
            return False
        dest.set(head, value)
        return True
    sub = dest.get(head, None)
    if isinstance(value, LazyStackedTensorDict) and not rest:
        return _copy_lazy(value, dest, head, sub, excluded, total)
    sub = value.empty() if sub is None else sub
    subkeys = [rest] if rest else [(k,) for k in value.keys()]
    wrote = False
    for subkey in subkeys:
        wrote = _copy_tree(value, sub, subkey, excluded, total) or wrote
    if wrote:
        dest.set(head, sub)
    return wrote


def _copy_lazy(value, dest, head, existing, excluded, prefix):
    """``_copy_tree`` of a lazily stacked TensorDict: each stacked one copied (into ``existing``'s, when
    ``dest`` already holds a stack of as many), stacked lazily again, so their own keys and shapes stay."""
    if not (isinstance(existing, LazyStackedTensorDict) and len(existing.tensordicts) == len(value.tensordicts)):
        existing = None
    parts = []
    for i, part in enumerate(value.tensordicts):
        out = part.empty() if existing is None else existing.tensordicts[i]
        for key in part.keys():
            _copy_tree(part, out, (key,), excluded, prefix)
        parts.append(out)
    dest.set(head, LazyStackedTensorDict.lazy_stack(parts, value.stack_dim))
    return True


class _StepMDP:
    """torchrl's cached ``step_mdp`` for one env: ``_StepMDP(env, ...)(tensordict)`` is ``step_mdp``
    with the env's reward, done and action keys."""

    def __init__(self, env, keep_other=True, exclude_reward=True, exclude_done=False, exclude_action=True):
        self.keys = dict(reward_keys=env.reward_keys, done_keys=env.done_keys, action_keys=env.action_keys)
        self.flags = dict(keep_other=keep_other, exclude_reward=exclude_reward, exclude_done=exclude_done,
                          exclude_action=exclude_action)

    def __call__(self, tensordict):
        return step_mdp(tensordict, **self.flags, **self.keys)


def make_composite_from_td(data, *, unsqueeze_null_shapes=True, dynamic_shape=False):
    """A ``Composite`` of ``Unbounded`` specs shaped, typed and placed as the entries of the TensorDict
    ``data`` (nested TensorDicts become nested Composites), as torchrl's. ``unsqueeze_null_shapes``:
    a 0-d entry gets shape ``[1]``. rlpipe's specs have no dynamic dims: ``dynamic_shape=True`` is a
    ValueError."""
    from rlpipe.envs.specs import Composite, Unbounded
    if dynamic_shape:
        raise ValueError("make_composite_from_td: rlpipe's specs have no dynamic (-1) dims; expected "
                         "dynamic_shape=False, got True")
    entries = {}
    for key, value in data.items():
        if isinstance(value, TensorDictBase):
            entries[key] = make_composite_from_td(value, unsqueeze_null_shapes=unsqueeze_null_shapes)
        elif isinstance(value, Tensor):
            shape = tuple(value.shape) if value.ndim or not unsqueeze_null_shapes else (1,)
            entries[key] = Unbounded(shape=shape, dtype=value.dtype, device=value.device)
        else:
            raise TypeError(f"make_composite_from_td: the entry {key!r} is a {type(value).__name__}; expected "
                            "tensors and TensorDicts (rlpipe has no non-tensor specs)")
    return Composite(entries, shape=data.batch_size, device=data.device)


def _leaves(spec, prefix=()):
    from rlpipe.envs.specs import Composite
    if spec is None:
        return {}
    if isinstance(spec, Composite):  # a full spec: its keys are the entries' keys
        return {unravel_key_to_tuple(k): v for k, v in spec.items(True, True) if v is not None}
    return {prefix: spec}


def _fmt_keys(keys):
    return "{" + ", ".join(repr(_key_str(k)) for k in sorted(keys)) + "}" if keys else "set()"


def _check_keys(real, fake):
    if real != fake:
        raise AssertionError(
            "The keys of the specs and data do not match:\n"
            f"    - List of keys present in real but not in fake: {_fmt_keys(real - fake)},\n"
            f"    - List of keys present in fake but not in real: {_fmt_keys(fake - real)}.")


def check_env_specs(env, return_contiguous=True, check_dtype=True, seed=None, tensordict=None,
                    break_when_any_done=True):
    """Runs a short rollout (3 steps, random actions) of ``env`` and checks that every entry matches
    the specs: the set of keys, each entry's shape (the rollout's batch dims + the spec's feature
    dims) and, with ``check_dtype``, dtype, and that every step's value lies in its spec
    (``is_in``). Raises an AssertionError naming the first mismatching key; returns None.

    Keys expected (as torchrl's ``fake_tensordict``): at the root, the state, observation and done
    entries and the action; under ``"next"``, the observation, reward and done entries (state
    entries there are ignored). ``seed`` seeds the env first (``env.set_seed``).
    ``return_contiguous`` is accepted for torchrl compatibility (rollouts are always contiguous).
    ``break_when_any_done="both"`` runs the check with True, then with False (as torchrl).
    """
    if break_when_any_done == "both":
        for mode in (True, False):
            check_env_specs(env, return_contiguous, check_dtype, seed, tensordict, break_when_any_done=mode)
        return
    if seed is not None:
        env.set_seed(seed)
    obs = _leaves(env.observation_spec)
    done = _leaves(env.done_spec)
    reward = _leaves(env.reward_spec, ("reward",))
    action = _leaves(env.action_spec, ("action",))
    state = _leaves(env.state_spec)
    expected = {}
    for group, specs in (("state", state), ("observation", obs), ("done", done), ("action", action)):
        for key, spec in specs.items():
            expected[key] = (group, spec)
    for group, specs in (("observation", obs), ("reward", reward), ("done", done)):
        for key, spec in specs.items():
            expected[("next",) + key] = (group, spec)

    try:
        rollout = env.rollout(3, return_contiguous=return_contiguous, tensordict=tensordict,
                              auto_reset=tensordict is None, break_when_any_done=break_when_any_done)
    except KeyError as err:  # a spec key the data lacks breaks the rollout itself: report the keys
        root = {unravel_key_to_tuple(k) for k in env.reset().keys(True, True)}
        fake = {k for k in expected if k[0] != "next" and k != ("action",)}
        _check_keys(root, fake)
        raise AssertionError(f"check_env_specs: the rollout failed: {err}") from err
    # as torchrl, state entries may or may not be repeated under "next": not compared there
    # (an entry both state and observation, as in torchrl's pendulum tutorial, is an observation there)
    real = {unravel_key_to_tuple(k) for k in rollout.keys(True, True)} - {("next",) + k for k in state if k not in obs}
    _check_keys(real, set(expected))

    env_dims = len(env.batch_size)
    batch = tuple(rollout.batch_size)
    for key, (group, spec) in expected.items():
        value = rollout[key]
        if not isinstance(value, Tensor):
            raise AssertionError(  # noqa: TRY004 - a failed check, as every other mismatch
                f"The entry {_key_str(key)!r} of the rollout is a {type(value).__name__}, not a tensor")
        fake_shape = batch + tuple(spec.shape)[env_dims:]
        if tuple(value.shape) != fake_shape:
            raise AssertionError(f"The shapes of the real and fake tensordict don't match for key "
                                 f"{_key_str(key)!r} ({group} spec). Got fake={list(fake_shape)} and "
                                 f"real={list(value.shape)}.")
        if check_dtype and value.dtype is not spec.dtype:
            raise AssertionError(f"The dtypes of the real and fake tensordict don't match for key "
                                 f"{_key_str(key)!r} ({group} spec). Got fake={spec.dtype} and real={value.dtype}.")

    steps = batch[-1] if batch else 1
    for t in range(steps):
        step = rollout[(Ellipsis, t)]
        for key, (group, spec) in expected.items():
            value = step[key]
            if not check_dtype and value.dtype is not spec.dtype:
                value = value.to(spec.dtype)
            if not spec.is_in(value):
                where = "next" if key[0] == "next" else "root"
                raise AssertionError(
                    f"spec check failed at {where} for key {_key_str(key)!r} at step {t}: the value is not in the "
                    f"{group} spec.\nspec={spec}\nvalue={value}")
    logger.info("check_env_specs succeeded!")
