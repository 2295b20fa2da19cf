"""Batched environments: ``SerialEnv`` (every env in this process) and ``ParallelEnv`` (one worker
process per env), torchrl 0.14's, on the env step protocol (``step_protocol.py``).

Both are envs of ``batch_size = [num_workers, *inner]`` (``inner``: the batch size of the envs
they batch, ``[]`` for a single env, ``[n]`` for a vector env), with the first env's specs
batched along a new leading dim. Every sub-env writes its frames into its rows of one set of
buffers (one NumPy array per observation key, ``"action"``, ``"reward"``, the done flags), and a
frame method answers with copies of those arrays: a ``SerialEnv`` holds them in its own memory,
a ``ParallelEnv`` in one ``multiprocessing.shared_memory`` block its workers write in place.
Only a one-byte command and a one-byte reply cross a worker's pipe at each step.

Where rlpipe differs from torchrl 0.14:

- ``ParallelEnv`` starts its workers with ``fork`` where the platform has it (lambdas and local
  functions work, no re-import), else ``spawn``; a start method set with
  ``multiprocessing.set_start_method`` or ``mp_start_method`` takes precedence. torchrl uses
  ``spawn`` unless a global method is set.
- ``set_seed(seed)`` seeds the envs one after the other, each with the seed the previous one
  returned (torchrl's chain): with rlpipe's envs, worker ``i`` of single envs gets ``seed + i``,
  and the next seed ``seed + num_workers * max(1, prod(inner))`` is returned. It also seeds
  rlpipe's generator in this process (random actions), as ``GymEnv.set_seed`` does.
- a list of different constructors (torchrl's multi-task batch) builds each env once to read its
  specs, which are stacked as torchrl stacks them when they can be: equal specs, or ``Bounded``
  ones that differ only in their bounds (per-env bounds). Envs whose entries differ in keys, shapes,
  dtypes or spec types are a ValueError naming the env and the entry (torchrl lazily stacks those,
  ``share_individual_td``).
- a worker that dies, or does not answer within ``timeout`` seconds, is a RuntimeError naming it
  (torchrl waits without bound); the workers are then shut down, and the next call starts new ones.
"""
import multiprocessing as mp
import pickle
import weakref
from collections.abc import Mapping
from copy import deepcopy
from multiprocessing import connection, resource_tracker, shared_memory

import numpy as np

from .. import random as _random
from .._processes import describe, die_with_parent, pack, parent_watch, reap, views
from .._tensor import Size, Tensor, host_array
from ..tensordict import unravel_key_to_tuple
from .common import EnvBase
from .env_creator import EnvCreator, EnvMetaData, env_creator, get_env_metadata
from .step_protocol import ACTION, REWARD, TERMINATED, TRUNCATED, one_hot_hint
from .tensordict_envs import TorchRLStyleFrames

__all__ = ["SerialEnv", "ParallelEnv", "EnvCreator", "env_creator"]  # (the creators: env_creator.py)

_DONE_IN = ("_done",)       # the done mask a continue command reads
_SKIPPED = ("_skipped",)    # the rows a vector env skipped at the last step (step_protocol.py)
_STEP = b"s"                # the step command: all its data is in the buffers
_OK = b"k"
_ERROR = b"e"
_CALL = b"c"


# ---- the buffers ---------------------------------------------------------------------------------------

def _np_dtype(spec):
    return np.dtype(getattr(spec.dtype, "np", spec.dtype))


def _buffer_specs(meta, num_workers):
    """[(key, shape, dtype)] of every buffer, for ``num_workers`` envs described by ``meta``."""
    flag_shape = (num_workers,) + tuple(meta.batch_size) + (1,)
    buffers = [(ACTION, (num_workers,) + tuple(meta.action_spec.shape), _np_dtype(meta.action_spec))]
    for key in meta.observation_spec.keys(True, True):
        spec = meta.observation_spec[key]
        buffers.append((unravel_key_to_tuple(key), (num_workers,) + tuple(spec.shape), _np_dtype(spec)))
    buffers.append((REWARD, flag_shape, np.dtype(np.float32)))
    buffers += [(key, flag_shape, np.dtype(bool)) for key in (TERMINATED, TRUNCATED, _DONE_IN)]
    buffers.append((_SKIPPED, flag_shape[:-1], np.dtype(bool)))
    return buffers


def _rows(arrays, index):
    """Env ``index``'s rows of the buffers: views, 0-d ones too."""
    return {key: array[index, ...] for key, array in arrays.items()}


class _Runner:
    """One env and its rows of the buffers: runs the commands of the batched env on it, reading its
    action (and done mask) from its rows and writing its frames there. The same in a ``SerialEnv``
    and in a ``ParallelEnv``'s worker."""

    def __init__(self, env, rows, obs_keys):
        self.env, self.rows, self.obs_keys = env, rows, obs_keys
        self.next_obs = None  # the last step's observations, which a continue carries on from

    def _write_obs(self, frame):
        rows = self.rows
        for key in self.obs_keys:
            rows[key][...] = frame[key]

    def reset(self, seed):
        self._write_obs(self.env._reset_frame(seed))

    def step(self):
        rows = self.rows
        next_obs, reward, terminated, truncated = self.env._step_frame(rows[ACTION].copy())
        self.next_obs = next_obs
        self._write_obs(next_obs)
        rows[REWARD][...] = reward
        rows[TERMINATED][...] = terminated
        rows[TRUNCATED][...] = truncated
        skipped = self.env._skipped_rows
        rows[_SKIPPED][...] = False if skipped is None else skipped

    def continue_(self):
        self._write_obs(self.env._continue_frame(self.next_obs, self.rows[_DONE_IN].copy()))

    def set_seed(self, seed, static_seed):
        return self.env.set_seed(seed, static_seed=static_seed)

    def attr_kind(self, path):
        """``"missing"``, ``"callable"`` or ``"value"``: what ``env.<path>`` is in this worker."""
        obj = self.env
        for name in path:
            if not hasattr(obj, name):
                return "missing"
            obj = getattr(obj, name)
        return "callable" if callable(obj) else "value"

    def call_attr(self, path, args, kwargs):
        """``env.<path>(*args, **kwargs)``, or the value ``env.<path>`` when it is not callable."""
        obj = self.env
        for name in path:
            obj = getattr(obj, name)
        return obj(*args, **kwargs) if callable(obj) else obj

    def metadata(self):
        """The env's specs, batch size and device (``metadata_from_workers``)."""
        return EnvMetaData.metadata_from_env(self.env)

    def td_reset(self, tensordict):
        """The env's ``reset(tensordict)`` (the TensorDict path, see ``_fits_frames``)."""
        return self.env.reset(tensordict)

    def td_step(self, tensordict):
        """The ``"next"`` TensorDict of the env's ``step(tensordict)`` (the TensorDict path)."""
        return self.env.step(tensordict).get("next")

    def set_exact_resets(self, exact):
        return self.env._set_exact_resets(exact)

    def set_snapshot(self, source):
        """``env[:] = source`` (torchrl's snapshot writeback); the failure's description when the env
        cannot, else None."""
        try:
            self.env[slice(None)] = source
        except (TypeError, NotImplementedError, AttributeError) as error:
            return f"{type(error).__name__}: {error}"
        return None


# ---- what both batched envs share ----------------------------------------------------------------------

def _stacked(specs, name, owner, key=()):
    """torchrl's stack of the envs' specs along a new leading dim: equal specs expanded; ``Bounded``
    leaves that differ only in their bounds with per-env bounds. Envs whose entries differ in keys,
    shapes, dtypes or spec types are a ValueError (torchrl lazily stacks them)."""
    from rlpipe.envs.specs import Bounded, Composite
    first = specs[0]
    if all(spec == first for spec in specs[1:]):
        return first.expand(len(specs), *first.shape)
    where = f"{name}[{key[0] if len(key) == 1 else key!r}]" if key else name
    for i, spec in enumerate(specs[1:], 1):
        same = (type(spec) is type(first) and tuple(spec.shape) == tuple(first.shape)
                and (isinstance(first, Composite) or spec.dtype is first.dtype))
        if isinstance(first, Composite) and same:
            same = sorted(map(str, spec.keys())) == sorted(map(str, first.keys()))
        if not same or not isinstance(first, (Bounded, Composite)):
            raise ValueError(
                f"{owner}: env {i}'s {where} differs from env 0's ({_describe(spec)} vs {_describe(first)}); rlpipe "
                "batches envs whose specs share keys, shapes, dtypes and types, with different bounds at most "
                "(torchrl lazily stacks others)")
    if isinstance(first, Composite):
        out = Composite(shape=(len(specs),) + tuple(first.shape), device=first.device)
        for sub in first.keys():
            out[sub] = _stacked([spec[sub] for spec in specs], name, owner, key + (sub,))
        return out
    from rlpipe import primitives
    return Bounded(primitives.stack([spec.low for spec in specs]), primitives.stack([spec.high for spec in specs]),
                   shape=(len(specs),) + tuple(first.shape), dtype=first.dtype, device=first.device)


def _fits_frames(meta):
    """Whether the buffers can carry the env's steps: one action under ``"action"``, one reward under
    ``"reward"``, root done flags, no non-tensor observation. Other envs (torchrl's multi-key and nested-key
    envs) take the TensorDict path: each sub-env's ``reset``/``step`` TensorDicts, stacked (pickled to and from a
    ``ParallelEnv``'s workers: correct, but slower than the buffers)."""
    from rlpipe.envs.specs import Composite, NonTensor
    if [*meta.full_action_spec.keys(True, True)] != ["action"]:
        return False
    if [*meta.full_reward_spec.keys(True, True)] != ["reward"]:
        return False
    if any(isinstance(spec, NonTensor) for spec in meta.observation_spec.values(True, True)):
        return False
    return all(not isinstance(spec, Composite) and key in ("done", "terminated", "truncated")
               for key, spec in meta.done_spec.items())


def _describe(spec):
    return f"{type(spec).__name__} of shape {list(spec.shape)} and dtype {spec.dtype}"


class _Dispatch:
    """``batched_env.<path>`` (torchrl's dispatch of an attribute the batched env lacks to its envs): calling
    it calls the attribute of every env (a list of their results); iterating, indexing or ``len`` see the
    list of their values; a further attribute extends the path (``env.nested.value``)."""

    def __init__(self, env, path):
        self._env, self._path = env, path

    def __call__(self, *args, **kwargs):
        env = self._env
        return env._run(env._all(), "call_attr", [(self._path, args, kwargs)] * env.num_workers)

    def __iter__(self):
        return iter(self())

    def __len__(self):
        return self._env.num_workers

    def __getitem__(self, index):
        return self()[index]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"{name!r}: private attributes of the envs are not dispatched")
        return self._env._dispatch(self._path + (name,))

    def __repr__(self):
        return f"_Dispatch({'.'.join(self._path)} of {self._env!r})"


def _per_worker(value, num_workers, what):
    """``value`` (a list or tuple of one item per worker) as a list, checked for its length."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{what} must be a list of one item per worker, got {type(value).__name__}")
    if len(value) != num_workers:
        raise RuntimeError(f"len({what}) and num_workers mismatch, got {len(value)} and {num_workers}.")
    return list(value)


def _env_indices(item, num_workers):
    """torchrl's indices of the envs ``item`` selects (an int, a slice, or a 1-D array or tensor of
    ints; negative ones from the end), as a list."""
    if isinstance(item, (bool, np.bool_)):
        raise NotImplementedError("Boolean masks are not supported for batched envs.")
    if isinstance(item, (int, np.integer)):
        index = int(item) + num_workers if item < 0 else int(item)
        if not 0 <= index < num_workers:
            raise IndexError(f"index {item} is out of bounds for {num_workers} envs.")
        return [index]
    if isinstance(item, slice):
        indices = list(range(num_workers))[item]
        if not indices:
            raise IndexError("Empty batched env indexing is not supported.")
        return indices
    index = np.asarray(host_array(item) if isinstance(item, Tensor) else item)
    if index.dtype == bool:
        raise NotImplementedError("Boolean masks are not supported for batched envs.")
    if index.ndim == 0:
        return _env_indices(index.item(), num_workers)
    if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
        raise IndexError(f"Batched env indices must be ints, scalar or 1D, got shape {list(index.shape)} and dtype "
                         f"{index.dtype}.")
    if not index.size:
        raise IndexError("Empty batched env indexing is not supported.")
    return [_env_indices(int(i), num_workers)[0] for i in index]


def _schema(meta):
    """An env's batch size and, per spec, each leaf's key, spec type, shape and dtype (what the
    workers of ``metadata_from_workers`` must agree on; bounds and non-tensor values may differ)."""
    specs = (meta.action_spec, meta.observation_spec, meta.reward_spec, meta.done_spec, meta.state_spec)
    leaves = [[(str(key), type(leaf).__name__, tuple(leaf.shape), str(leaf.dtype))
               for key, leaf in spec.items(True, True)] if hasattr(spec, "items")
              else [(type(spec).__name__, tuple(spec.shape), str(spec.dtype))] for spec in specs]
    return tuple(meta.batch_size), leaves


def _snapshot_sources(source, expected):
    """The envs written back by ``batched_env[item] = source``: one per selected env."""
    if isinstance(source, ParallelEnv):
        raise NotImplementedError("Writing back from a ParallelEnv source is not supported; use an EnvBase "
                                  "snapshot or a SerialEnv source instead.")
    if isinstance(source, SerialEnv):
        source._ensure_started()
        sources = [runner.env for runner in source._runners]
    elif isinstance(source, EnvBase):
        sources = [source]
    elif isinstance(source, (list, tuple)):
        sources = list(source)
    else:
        raise TypeError(f"Expected an EnvBase or sequence of EnvBase sources, got {type(source).__name__}.")
    if len(sources) != expected:
        raise ValueError(f"The source count does not match the indexed destination: got {len(sources)} and "
                         f"expected {expected}.")
    if not all(isinstance(env, EnvBase) for env in sources):
        raise TypeError("All indexed sources must be EnvBase instances.")
    return sources


class _BatchedEnv(EnvBase):
    """The batched env over ``_run(indices, command, args)`` (the subclasses: in-process calls, or
    commands to worker processes); torchrl's ``BatchedEnvBase``."""

    def __init__(self, num_workers, create_env_fn, create_env_kwargs=None, *, device=None, use_buffers=None):
        if use_buffers is not None and not isinstance(use_buffers, bool):
            raise TypeError(f"use_buffers must be None, True or False, got {type(use_buffers).__name__}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)):
            raise TypeError(f"num_workers must be an int, got {type(num_workers).__name__}")
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        num_workers = int(num_workers)
        self._single_task = callable(create_env_fn) or len(set(create_env_fn)) == 1  # torchrl's test
        if callable(create_env_fn):
            create_env_fn = [create_env_fn] * num_workers
        create_env_fn = _per_worker(create_env_fn, num_workers, "create_env_fn")
        for fn in create_env_fn:
            if not callable(fn):
                raise TypeError(f"create_env_fn must be a callable or a list of callables, got {type(fn).__name__}")
        if create_env_kwargs is None or isinstance(create_env_kwargs, Mapping):
            create_env_kwargs = [deepcopy(dict(create_env_kwargs or {})) for _ in range(num_workers)]
        create_env_kwargs = _per_worker(create_env_kwargs, num_workers, "create_env_kwargs")
        self.num_workers = num_workers
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = [dict(kwargs) for kwargs in create_env_kwargs]
        self.is_closed = True
        self._buffers = None
        meta, others = self._envs_metadata()
        self.meta_data = meta if self._single_task else [meta, *others]
        super().__init__(device=meta.device if device is None else device,
                         batch_size=(num_workers,) + tuple(meta.batch_size))
        self._fits_frames = _fits_frames(meta)
        # the TensorDict path (EnvBase's reset/step then call _reset/_step): for envs the buffers cannot carry,
        # and with torchrl's use_buffers=False
        self._tensordict_style = not self._fits_frames or use_buffers is False
        self.use_buffers = not self._tensordict_style
        self._set_specs(meta, others)

    def _envs_metadata(self):
        """(the first env's metadata, the other envs' when the constructors differ): each env read is
        built here once (``EnvCreator`` reads it once for all)."""
        meta = get_env_metadata(self.create_env_fn[0], self.create_env_kwargs[0])
        others = [] if self._single_task else [get_env_metadata(fn, kwargs) for fn, kwargs in
                                               zip(self.create_env_fn[1:], self.create_env_kwargs[1:])]
        return meta, others

    @property
    def _use_buffers(self):
        """torchrl's name of ``use_buffers``."""
        return self.use_buffers

    def _set_specs(self, meta, others=()):
        """The envs' specs stacked along a new leading dim: the first env's, expanded, when every env
        has them (``others``: the other envs' metadata, for a list of different constructors)."""
        batch = tuple(self.batch_size)
        self._per_env = max(int(np.prod(tuple(meta.batch_size), dtype=np.int64)), 1)
        self._skips_rows = meta.skips_rows or any(other.skips_rows for other in others)
        metas = [meta, *others]
        for i, other in enumerate(others, 1):
            if tuple(other.batch_size) != tuple(meta.batch_size):
                raise ValueError(f"{type(self).__name__}: env {i} has batch_size {list(other.batch_size)}, env 0 "
                                 f"{list(meta.batch_size)}; the envs of a batched env must share their batch size")
        names = ("action_spec", "observation_spec", "reward_spec", "done_spec", "state_spec")
        if self._tensordict_style:  # the action and reward specs under their keys
            names = ("full_action_spec", "observation_spec", "full_reward_spec", "done_spec", "state_spec")
        for name in names:
            specs = [getattr(m, name) for m in metas]
            if name == "state_spec" and specs[0].is_empty() and all(spec.is_empty() for spec in specs):
                continue
            if len(specs) == 1:  # one constructor: its env's specs for every worker
                specs = specs * self.num_workers
            setattr(self, name, _stacked(specs, name, type(self).__name__))
        if not self._tensordict_style and "truncated" not in self.done_spec.keys():
            self.done_spec["truncated"] = self.done_spec["done"].clone()  # the buffers carry one: the data has it
        self._buffer_specs = _buffer_specs(meta, self.num_workers)
        self._obs_keys = tuple(unravel_key_to_tuple(k) for k in meta.observation_spec.keys(True, True))
        self._flag_shape = batch + (1,)

    def __getattr__(self, name):
        """An attribute the batched env lacks, from its envs (torchrl's dispatch): a ``_Dispatch`` when
        every env has it, else an AttributeError. Private names are never dispatched. A closed
        ``SerialEnv`` starts its envs; a closed ``ParallelEnv`` starts its workers and raises a
        RuntimeError, as torchrl's."""
        if name.startswith("_") or "num_workers" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self._dispatch((name,))

    _closed_access_raises = False  # ParallelEnv: torchrl's refusal of an attribute of closed envs

    def _dispatch(self, path):
        if self.is_closed and self._closed_access_raises:
            self._ensure_started()  # as torchrl's: the workers start, and this access is refused
            raise RuntimeError("Trying to access attributes of closed/non started environments. Check that the "
                               "batched environment has been started (e.g. by calling env.reset)")
        self._ensure_started()
        kinds = self._run(self._all(), "attr_kind", [(path,)] * self.num_workers)
        if "missing" in kinds:
            raise AttributeError(f"attribute {'.'.join(path)} not found in env {kinds.index('missing')} of "
                                 f"{type(self).__name__}")
        return _Dispatch(self, path)

    def update_kwargs(self, kwargs):
        """Updates each env's construction kwargs from a dict (every env) or a list of one dict per env;
        they take effect when the workers (re)start."""
        if isinstance(kwargs, Mapping):
            for env_kwargs in self.create_env_kwargs:
                env_kwargs.update(kwargs)
            return
        for env_kwargs, new in zip(self.create_env_kwargs, _per_worker(kwargs, self.num_workers, "kwargs")):
            env_kwargs.update(new)

    # ---- starting and stopping -------------------------------------------------------------------
    def start(self):
        """Builds the envs (torchrl starts them at the first call that needs them, as here)."""
        if not self.is_closed:
            raise RuntimeError("trying to start a environment that is not closed.")
        if "_parent_env" in self.__dict__:
            raise RuntimeError("Cannot start an indexed batched environment view: create a new view from the "
                               "parent environment instead.")
        self._start_workers()
        self.is_closed = False

    def _ensure_started(self):
        if "_parent_env" in self.__dict__:
            self._check_view()
        elif self.is_closed:
            self.start()

    def close(self, *, raise_if_closed=True):
        """Stops the envs (and worker processes). Closing a closed env is a RuntimeError unless
        ``raise_if_closed=False`` (as torchrl); a later call that needs the envs starts them again.
        Closing a view (``env[item]``) leaves its envs running for the env it was taken from."""
        if self.is_closed:
            if raise_if_closed:
                raise RuntimeError("trying to close a closed environment")
            return
        self.is_closed = True
        if "_parent_env" not in self.__dict__:
            self._shutdown_workers()

    # ---- views over some of the envs (torchrl's indexing) -------------------------------------------
    def __getitem__(self, item):
        """A live view over the envs ``item`` selects (an int, a slice, or a 1-D array or tensor of
        indices): an env of the same class, batch size ``[len(selected), *inner]``, that steps those
        envs (the same ones: the parent's rows change with them) over TensorDicts. Closing it leaves
        them running; closing the parent closes it."""
        self._ensure_started()
        indices = _env_indices(item, self.num_workers)
        return self._view(indices)

    def __setitem__(self, item, source):
        """torchrl's snapshot writeback: ``env[item] = source`` sets the selected envs' state from
        ``source`` (an env, a list of envs, or a SerialEnv's envs) where those envs support it."""
        self._ensure_started()
        indices = _env_indices(item, self.num_workers)
        sources = _snapshot_sources(source, len(indices))
        for index, failure in zip(indices, self._run(indices, "set_snapshot", [(env,) for env in sources])):
            if failure is not None:
                env_str = (self.meta_data if self._single_task else self.meta_data[index]).env_str
                raise NotImplementedError(f"Env workers of type {env_str} do not support snapshot writeback "
                                          f"({failure}).")

    def _view(self, indices):
        parent = self.__dict__.get("_parent_env", self)
        rows = self.__dict__.get("_view_rows", range(self.num_workers))
        view = object.__new__(type(self))
        view.__dict__.update({k: v for k, v in self.__dict__.items() if not k.endswith("_spec")})
        view.__dict__.update(_parent_env=parent, _view_rows=[rows[i] for i in indices],
                             num_workers=len(indices), batch_size=Size((len(indices),) + tuple(self.batch_size[1:])),
                             _tensordict_style=True, use_buffers=False, _run=view._view_run,
                             create_env_fn=[self.create_env_fn[i] for i in indices],
                             create_env_kwargs=[self.create_env_kwargs[i] for i in indices])
        if self._single_task:
            view._set_specs(self.meta_data)
        else:
            view.meta_data = [self.meta_data[i] for i in indices]
            view._set_specs(view.meta_data[0], view.meta_data[1:])
        return view

    def _view_run(self, indices, command, args=None):
        rows = self._view_rows
        return self._parent_env._run([rows[i] for i in indices], command, args)

    def _check_view(self):
        if self.is_closed:
            raise RuntimeError("Cannot use a closed indexed batched environment view. Create a new view from the "
                               "parent environment instead.")
        if self._parent_env.is_closed:
            self.is_closed = True
            raise RuntimeError("Cannot use an indexed batched environment view after its parent environment has "
                               "been closed.")

    def _all(self):
        return range(self.num_workers)

    # ---- the TensorDict path (``_fits_frames``) ---------------------------------------------------
    def _reset(self, tensordict=None, **kwargs):
        """Resets the envs a ``"_reset"`` mask names (all without masks), each with its rows of
        ``tensordict``; the others' rows are zeros, which ``EnvBase.reset`` replaces by the input's."""
        self._ensure_started()
        masks = [] if tensordict is None else [tensordict.get(key, None) for key in self.reset_keys]
        masks = [mask.reshape(self.num_workers, -1).any(-1) for mask in masks if mask is not None]
        workers = [i for i in self._all() if not masks or any(bool(mask[i]) for mask in masks)]
        inputs = [(None if tensordict is None else tensordict[i].exclude("next"),) for i in workers]
        results = dict(zip(workers, self._run(workers, "td_reset", inputs) if workers else []))
        template = self.full_observation_spec.zero()
        template.update(self.full_done_spec.zero())
        template.update(self.full_state_spec.zero())
        keys = list(template.keys())  # (top-level: nested leaves only would miss the non-tensor entries)
        rows = []
        for i in self._all():
            row = template[i]
            if i in results:
                row.update(results[i].select(*keys, strict=False))
            rows.append(row)
        from rlpipe.primitives import stack
        return stack(rows, 0)

    def _step(self, tensordict):
        """Each env's step with its rows of the actions and states; their ``"next"`` stacked."""
        self._ensure_started()
        keys = self.action_keys + self.state_keys
        inputs = [(tensordict[i].select(*keys, strict=False),) for i in self._all()]
        from rlpipe.primitives import stack
        return stack(self._run(self._all(), "td_step", inputs), 0)

    def _refuse_frames(self):
        if not self._fits_frames:
            raise NotImplementedError(f"{type(self).__name__}: its envs have several actions, rewards or nested done "
                                      "flags, which the frame buffers (collectors) do not carry; use reset, step "
                                      "and rollout")

    # ---- the frame methods (step_protocol.py) ----------------------------------------------------
    def _observations(self):
        buffers = self._buffers
        return {key: buffers[key].copy() for key in self._obs_keys}

    def _current_observation(self, key):
        """The envs' last observations of ``key`` (what the buffers hold), as torchrl's."""
        if self._buffers is None:
            return super()._current_observation(key)
        return self._buffers[key].copy()

    def _reset_frame(self, seed=None):
        self._refuse_frames()
        if self._tensordict_style:  # use_buffers=False: frames over the TensorDict path
            return TorchRLStyleFrames._reset_frame(self, seed)
        self._ensure_started()
        self._skipped_rows = None
        seeds = [None] * self.num_workers if seed is None else [seed + i * self._per_env for i in self._all()]
        self._run(self._all(), "reset", [(s,) for s in seeds])
        return self._observations()

    def _step_frame(self, action):
        if self._tensordict_style:
            return TorchRLStyleFrames._step_frame(self, action)
        self._ensure_started()
        if type(action) is not np.ndarray:
            action = np.asarray(action)
        buffers = self._buffers
        if action.shape != buffers[ACTION].shape:
            raise ValueError(f"{type(self).__name__}: expected an action of shape {buffers[ACTION].shape}, got "
                             f"{action.shape}{one_hot_hint(self.action_spec, action.shape)}")
        buffers[ACTION][...] = action
        self._run(self._all(), "step")
        if self._skips_rows:
            skipped = buffers[_SKIPPED]
            self._skipped_rows = skipped.copy() if skipped.any() else None
        return (self._observations(), buffers[REWARD].copy(), buffers[TERMINATED].copy(),
                buffers[TRUNCATED].copy())

    def _continue_frame(self, next_obs, done):
        if self._tensordict_style:
            return TorchRLStyleFrames._continue_frame(self, next_obs, done)
        done = np.asarray(done, dtype=bool).reshape(self._flag_shape)
        workers = np.flatnonzero(done.reshape(self.num_workers, -1).any(axis=1))
        if not len(workers):
            return next_obs
        self._ensure_started()
        buffers = self._buffers
        buffers[_DONE_IN][...] = done
        self._run(workers.tolist(), "continue_")
        out = {}
        for key in self._obs_keys:
            out[key] = np.array(next_obs[key])
            out[key][workers] = buffers[key][workers]
        return out

    def _set_exact_resets(self, exact):
        if not self._skips_rows:
            return True
        self._ensure_started()
        return all(self._run(self._all(), "set_exact_resets", [(exact,)] * self.num_workers))

    def set_seed(self, seed=None, static_seed=False):
        """Seeds the envs one after the other, each with the seed the previous one returned (the
        module docstring); returns the last one's."""
        self._ensure_started()
        first = seed
        for i in self._all():
            seed = self._run([i], "set_seed", [(seed, static_seed)])[0]
        if first is not None:  # (after the envs: a SerialEnv's GymEnvs seed it too)
            _random.manual_seed(first)
        return seed

    def __repr__(self):
        first = self.meta_data if self._single_task else self.meta_data[0]
        return (f"{type(self).__name__}(num_workers={self.num_workers}, env={first.env_str}, "
                f"batch_size={list(self.batch_size)}, device={self.device})")


class SerialEnv(_BatchedEnv):
    """``num_workers`` envs stepped one after the other in this process, as one env of batch size
    ``[num_workers, *inner]`` (torchrl's ``SerialEnv``; module docstring).

    Args:
        num_workers: the number of envs (>= 1).
        create_env_fn: a callable building an env (an ``EnvCreator`` too), or a list of one per env.
        create_env_kwargs: the kwargs of ``create_env_fn``: a dict for every env or a list of one per env.
        device: the device of the TensorDicts (default: the first env's).
        use_buffers: False takes the TensorDict path (``_fits_frames``) for any env, as torchrl's; None
            and True take the buffers where the env's steps fit them (the TensorDict path otherwise).
        mp_start_method: accepted and unused, as torchrl's (its envs run in this process).
    """

    def __init__(self, num_workers, create_env_fn, create_env_kwargs=None, *, device=None, use_buffers=None,
                 mp_start_method=None):
        super().__init__(num_workers, create_env_fn, create_env_kwargs, device=device, use_buffers=use_buffers)

    def _start_workers(self):
        layout, size = pack(self._buffer_specs)
        self._buffers = views(bytearray(size), layout)
        self._runners = []
        try:
            for i, (fn, kwargs) in enumerate(zip(self.create_env_fn, self.create_env_kwargs)):
                self._runners.append(_Runner(fn(**kwargs), _rows(self._buffers, i), self._obs_keys))
        except BaseException:
            self._shutdown_workers()
            raise

    def _shutdown_workers(self):
        runners, self._runners = self._runners, []
        for runner in runners:
            runner.env.close()

    def _run(self, indices, command, args=None):
        runners = self._runners
        if args is None:
            return [getattr(runners[i], command)() for i in indices]
        return [getattr(runners[i], command)(*a) for i, a in zip(indices, args)]


# ---- ParallelEnv: the worker side ---------------------------------------------------------------------

def _answer(conn, runner, message):
    """Runs one command message on ``runner`` and replies: ``_OK`` (plus the pickled result of a
    call) or ``_ERROR`` plus the failure's description."""
    try:
        if message == _STEP:
            runner.step()
            conn.send_bytes(_OK)
            return
        command, args = pickle.loads(message[1:])
        result = getattr(runner, command)(*args)
    except Exception as error:
        conn.send_bytes(_ERROR + describe(error).encode())
        return
    conn.send_bytes(_OK + pickle.dumps(result))


def _worker_main(conn, create_env_fn, kwargs, index, block_name, layout, obs_keys, watch, inherited):
    """A worker process: builds its env, then answers commands until ``close`` or until the main
    process closes its pipe (it is killed when the main process dies: ``rlpipe._processes``).
    ``inherited``: the main process's pipe ends a forked worker holds copies of, closed at once."""
    die_with_parent(*watch)
    for end in inherited:
        end.close()
    block = runner = env = None
    try:
        block = shared_memory.SharedMemory(name=block_name)
        env = create_env_fn(**kwargs)
        runner = _Runner(env, _rows(views(block.buf, layout), index), obs_keys)
        conn.send_bytes(_OK)
        while True:
            message = conn.recv_bytes()
            if message[:1] == _CALL and pickle.loads(message[1:])[0] == "close":
                break
            _answer(conn, runner, message)
    except EOFError:
        pass  # the main process closed its end
    except BaseException as error:  # noqa: B902 - a failure to start must reach the main process
        try:
            conn.send_bytes(_ERROR + describe(error).encode())
        except Exception:
            pass
    finally:
        runner = None  # (the block cannot close while arrays view it)
        if env is not None:
            env.close()
        if block is not None:
            block.close()
        conn.close()


# ---- ParallelEnv: the main side -----------------------------------------------------------------------

class _Worker:
    def __init__(self, index, process, conn):
        self.index, self.process, self.conn = index, process, conn


def _release(resources, timeout):
    """Stops every worker (politely, then by force) and frees the shared block; never raises.
    ``resources``: [workers, block], emptied."""
    workers, block = resources or ([], None)
    resources.clear()
    for worker in workers:
        try:
            worker.conn.send_bytes(_CALL + pickle.dumps(("close", ())))
        except Exception:
            pass
    for worker in workers:
        reap(worker.process, timeout)
        worker.conn.close()
    if block is not None:
        try:
            block.close()
        except BufferError:  # arrays of a collected env still view it: unlinking frees it all the same
            pass
        try:
            block.unlink()
        except FileNotFoundError:
            pass


class ParallelEnv(_BatchedEnv):
    """``num_workers`` envs, each in its own worker process, as one env of batch size
    ``[num_workers, *inner]`` (torchrl's ``ParallelEnv``; module docstring).

    The workers share one ``multiprocessing.shared_memory`` block with this process (actions in,
    observations, rewards and done flags out, written in place) and get one-byte commands over a
    pipe. They die with this process, whatever it dies of, and ``close()`` (or the env's garbage
    collection) stops them and frees the block. An exception in a worker is a RuntimeError here
    naming the worker and the original exception; a worker that dies or does not answer within
    ``timeout`` s is a RuntimeError too, after which every worker is stopped.

    Args: as ``SerialEnv``'s, and
        mp_start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (default: the global start
            method if one was set, else ``fork`` where available; spawn needs a picklable
            ``create_env_fn``).
        timeout: seconds to wait for a worker's answer (default 120).
        daemon: whether the workers are daemonic processes (default False, as torchrl: a daemonic
            worker cannot start processes of its own, an async vector env's).
        serial_for_single: with one worker, build a ``SerialEnv`` instead (torchrl's option).
        metadata_from_workers: start the workers at once and read the specs from their envs, so that
            no env is built in this process (torchrl's option; it needs ``use_buffers=False``).
        shutdown_timeout: seconds a worker is given to close its env before it is terminated
            (default 5; torchrl's is 10).
    """

    _closed_access_raises = True

    def __new__(cls, num_workers=None, create_env_fn=None, create_env_kwargs=None, *, serial_for_single=False,
                **kwargs):
        if serial_for_single and num_workers == 1:  # torchrl's: one env needs no worker process
            serial_kwargs = {k: v for k, v in kwargs.items() if k in ("device", "use_buffers", "mp_start_method")}
            return SerialEnv(num_workers, create_env_fn, create_env_kwargs, **serial_kwargs)
        return super().__new__(cls, num_workers, create_env_fn, create_env_kwargs, **kwargs)

    def __init__(self, num_workers, create_env_fn, create_env_kwargs=None, *, device=None, mp_start_method=None,
                 timeout=120.0, daemon=False, use_buffers=None, serial_for_single=False, metadata_from_workers=False,
                 shutdown_timeout=5.0):
        if mp_start_method is not None and mp_start_method not in mp.get_all_start_methods():
            raise ValueError(f"mp_start_method must be one of {mp.get_all_start_methods()}, got {mp_start_method!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if not shutdown_timeout >= 0:
            raise ValueError(f"shutdown_timeout must be >= 0 seconds, got {shutdown_timeout}")
        if metadata_from_workers and use_buffers:
            raise RuntimeError("metadata_from_workers=True currently requires use_buffers=False because shared "
                               "buffers must be allocated before workers start.")
        self._metadata_from_workers = bool(metadata_from_workers)
        self.shutdown_timeout = float(shutdown_timeout)
        self._mp_start_method = mp_start_method
        self._timeout = float(timeout)
        self.daemon = bool(daemon)
        self._resources = []
        super().__init__(num_workers, create_env_fn, create_env_kwargs, device=device,
                         use_buffers=False if metadata_from_workers else use_buffers)

    def _envs_metadata(self):
        """With ``metadata_from_workers``: the workers start here and each reads its own env's metadata
        (no env is built in this process); they must agree on keys, spec types, shapes and dtypes."""
        if not self._metadata_from_workers:
            return super()._envs_metadata()
        self._buffer_specs, self._obs_keys = [], ()  # (the TensorDict path: no buffers)
        self.start()
        try:
            metas = self._run(self._all(), "metadata")
            for i, meta in enumerate(metas[1:], 1):
                if _schema(meta) != _schema(metas[0]):
                    raise RuntimeError(f"ParallelEnv worker metadata are incompatible: worker {i} reports "
                                       f"{_schema(meta)}, worker 0 {_schema(metas[0])}")
        except BaseException:
            self.close(raise_if_closed=False)
            raise
        return metas[0], ([] if self._single_task else metas[1:])

    @property
    def _workers(self):
        """The worker processes (torchrl's attribute); empty when the env is closed."""
        return [worker.process for worker in (self._resources[0] if self._resources else [])]

    def _start_method(self):
        if self._mp_start_method is not None:
            return self._mp_start_method
        method = mp.get_start_method(allow_none=True)
        if method is not None:
            return method
        return "fork" if "fork" in mp.get_all_start_methods() else "spawn"

    def _start_workers(self):
        method = self._start_method()
        context = mp.get_context(method)
        resource_tracker.ensure_running()  # before the workers start, so they share it and never unlink the block
        layout, size = pack(self._buffer_specs)
        block = shared_memory.SharedMemory(create=True, size=size)
        workers = []
        self._resources = [workers, block]
        self._finalizer = weakref.finalize(self, _release, self._resources, 5.0)
        self._buffers = views(block.buf, layout)
        watch = parent_watch(method)
        try:
            for i, (fn, kwargs) in enumerate(zip(self.create_env_fn, self.create_env_kwargs)):
                parent, child = context.Pipe()
                inherited = [w.conn for w in workers] + [parent] if method == "fork" else []
                process = context.Process(target=_worker_main, name=f"rlpipe-ParallelEnv-{i}", daemon=self.daemon,
                                          args=(child, fn, kwargs, i, block.name, layout, self._obs_keys, watch,
                                                inherited))
                process.start()
                child.close()
                workers.append(_Worker(i, process, parent))
            self._gather(self._all(), "start")
        except BaseException:
            self._shutdown_workers()
            raise

    def _shutdown_workers(self, timeout=None):
        self._buffers = None  # (the block cannot close while arrays view it)
        _release(self._resources, self.shutdown_timeout if timeout is None else timeout)

    def _run(self, indices, command, args=None):
        workers = self._resources[0]
        for k, i in enumerate(indices):
            message = _STEP if command == "step" else _CALL + pickle.dumps((command, args[k] if args else ()))
            try:
                workers[i].conn.send_bytes(message)
            except OSError:  # a broken pipe: the worker is gone
                self._lost(i, command, died=True)
        return self._gather(indices, command)

    def _gather(self, indices, command):
        """Every worker's answer to ``command`` (results of calls, None otherwise); the first
        failure, once every answer is in, as a RuntimeError naming its worker."""
        results, failure = [], None
        for i in indices:
            reply = self._receive(i, command)
            if reply[:1] == _ERROR:
                failure = failure or (i, reply[1:].decode())
                results.append(None)
            else:
                results.append(pickle.loads(reply[1:]) if len(reply) > 1 else None)
        if failure is not None:
            raise RuntimeError(f"ParallelEnv: worker {failure[0]} failed in {command!r}: {failure[1]}")
        return results

    def _receive(self, index, command):
        worker = self._resources[0][index]
        conn = worker.conn
        if not conn.poll():
            ready = connection.wait([conn, worker.process.sentinel], self._timeout)
            if conn not in ready:
                self._lost(index, command, died=bool(ready))
        try:
            return conn.recv_bytes()
        except (EOFError, OSError):
            self._lost(index, command, died=True)

    def _lost(self, index, command, died):
        """A worker that died or hangs: every worker is stopped, and a RuntimeError says so."""
        process = self._resources[0][index].process
        self.is_closed = True
        self._shutdown_workers(timeout=0.2)  # (which also joins the dead worker: its exit code)
        what = f"died (exit code {process.exitcode})" if died else f"did not answer within {self._timeout:g} s"
        raise RuntimeError(f"ParallelEnv: worker {index} {what} in {command!r}; the workers were shut down "
                           "(the next call starts new ones)")
