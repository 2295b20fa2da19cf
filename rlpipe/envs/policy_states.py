"""The entries a policy writes under ``"next"`` (a recurrent module's next state) and how they reach the next
step, as torchrl's ``EnvBase.step`` and ``step_mdp`` hand them on; ``EnvBase.rollout`` and ``SyncDataCollector``
use these helpers.

torchrl merges the policy's ``("next", k)`` into the step's output where the base env does not produce ``k``
(a transform such as ``TensorDictPrimer`` only carries the value it would copy otherwise), then ``step_mdp``
makes it the next step's ``k``, except in the envs a reset restarted (there the reset's value, a primer's
zeros). rlpipe's environments take no input but the action, so the env's own record of a primer's entry is
the value it carried; the callers put the policy's in its place.
"""
from ..tensordict import unravel_key_to_tuple

__all__ = ["base_observation_keys", "carry_into_root", "only_common_keys", "policy_next_entries", "policy_next_keys",
           "reset_mask"]


def base_observation_keys(env):
    """The observation keys (tuples) of the environment under ``env``'s transforms: those the policy cannot
    override. Empty when ``env`` has no ``base_env`` (a batched env: its workers' transforms are not known)."""
    base = env
    while "base_env" in vars(base):
        base = base.base_env
    if base is env:
        return set()
    return {unravel_key_to_tuple(k) for k in base.observation_spec.keys(True, True)}


def policy_next_keys(written, env):
    """The keys ``k`` (tuples) of the ``("next", k)`` entries in ``written`` (what the policy returned) that
    the next step takes from the policy: every one but the base env's observations and the step's reward
    and done flags."""
    own = base_observation_keys(env) | {("reward",), ("done",), ("terminated",), ("truncated",)}
    keys = [unravel_key_to_tuple(key) for key in written.keys(True, True)]
    return [key[1:] for key in keys if key[0] == "next" and len(key) > 1 and key[1:] not in own]


def reset_mask(done, value, batch_dims):
    """``done`` (shaped ``[*batch, 1]``) reshaped to broadcast against ``value`` (``[*batch, *entry]``)."""
    return done.reshape(tuple(done.shape[:batch_dims]) + (1,) * (value.ndim - batch_dims))


def policy_next_entries(tensordict, env):
    """``{k: value}`` of the ``("next", k)`` entries of ``tensordict`` (a policy's output, before the env's
    step replaces ``"next"``) that the next step takes from the policy."""
    if tensordict.get("next", None) is None:
        return {}
    return {key: tensordict.get(("next", *key)) for key in policy_next_keys(tensordict, env)}


def carry_into_root(root, entries, done, batch_dims):
    """Puts the policy's ``entries`` (from ``policy_next_entries``) into the next step's ``root``, as torchrl's
    ``step_mdp``: where ``root`` has the entry (an env observation, a primer's), the envs that ``done`` reset
    keep the reset's value."""
    from rlpipe.primitives import where

    for key, value in entries.items():
        reset_value = root.get(key, None)
        root.set(key, value if reset_value is None else where(reset_mask(done, value, batch_dims), reset_value, value))
    return root


def only_common_keys(steps):
    """The step TensorDicts of a rollout without the root entries that some steps lack (a policy's state
    carried in after the first step, with no primer to start it), as torchrl's rollout stacks them."""
    keys = [set(map(unravel_key_to_tuple, td.keys(True, True))) for td in steps]
    extra = set().union(*keys) - set.intersection(*keys)
    if not extra:
        return steps
    return [td.exclude(*[key for key in extra if key in keys[i]]) for i, td in enumerate(steps)]
