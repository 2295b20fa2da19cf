"""torchrl 0.14's ``torchrl.checkpoint``: one ``Checkpoint`` object that saves and restores named
components (a policy, an optimizer, a replay buffer, the global RNG state, JSON-compatible
configuration and progress) into a directory or a ZIP archive, with a ``manifest.json`` listing them.

Each component goes through an adapter: ``StateDictCheckpointAdapter`` (objects with
``state_dict``/``load_state_dict``), ``DumpLoadCheckpointAdapter`` (``dump``/``load``: replay
buffers), ``JSONCheckpointAdapter`` (plain values; mutable mappings and lists are updated in place
on load), or a ``CheckpointAdapter`` subclass of one's own. The manifest layout is torchrl's; the
state-dict payloads are written with ``rlpipe.save`` (plain data, no pickle) under the file names
torchrl uses for each ``payload_format``, so checkpoints are not exchanged with torchrl itself.
Rotation (``CheckpointRotation``) and manifest migrations are not provided.
"""
import abc
import contextlib
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import uuid
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import numpy as np

from . import random as _random
from ._creation import as_tensor
from ._tensor import Tensor
from ._utils import logger
from .serialization import load as _load, save as _save

__all__ = ["Checkpoint", "CheckpointAdapter", "CheckpointError", "CheckpointLoadResult", "CheckpointOptions",
           "DumpLoadCheckpointAdapter", "GlobalRNGState", "JSONCheckpointAdapter", "StateDictCheckpointAdapter"]

_MANIFEST_NAME = "manifest.json"
_FORMAT_NAME = "torchrl.checkpoint"
_FORMAT_VERSION = 1
_FORMATS = ("directory", "archive")
_STRICTNESS = ("error", "warn", "ignore")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be saved or restored; ``result`` holds the partial load result, if any."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


@dataclasses.dataclass(frozen=True)
class CheckpointOptions:
    """Arguments for a component's save and load methods; ``merged`` lays an operation's over these."""
    save_args: tuple = None
    save_kwargs: dict = None
    load_args: tuple = None
    load_kwargs: dict = None

    def merged(self, override):
        """These options with ``override``'s given fields (keyword arguments merged) on top."""
        if override is None:
            return self
        return CheckpointOptions(
            save_args=self.save_args if override.save_args is None else override.save_args,
            save_kwargs={**(self.save_kwargs or {}), **(override.save_kwargs or {})},
            load_args=self.load_args if override.load_args is None else override.load_args,
            load_kwargs={**(self.load_kwargs or {}), **(override.load_kwargs or {})})


@dataclasses.dataclass
class CheckpointLoadResult:
    """What ``Checkpoint.load`` did: components ``loaded``, requested but ``missing`` from the checkpoint,
    ``incompatible`` (name -> reason), in the checkpoint but ``unrequested``, adapters' returned
    ``values``, and the ``manifest``."""
    loaded: set = dataclasses.field(default_factory=set)
    missing: set = dataclasses.field(default_factory=set)
    incompatible: dict = dataclasses.field(default_factory=dict)
    unrequested: set = dataclasses.field(default_factory=set)
    values: dict = dataclasses.field(default_factory=dict)
    manifest: dict = dataclasses.field(default_factory=dict)
    comparison: dict = dataclasses.field(default_factory=dict)


class CheckpointAdapter(abc.ABC):
    """Saves and restores one component below a directory of its own (a real directory, even when the
    checkpoint is an archive). Subclasses set ``adapter_id`` (recorded in the manifest)."""

    adapter_id = None
    format_version = 1

    @abc.abstractmethod
    def save(self, component, path, *, args, kwargs):
        """Writes ``component`` below ``path``."""

    @abc.abstractmethod
    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        """Restores ``component`` from ``path``; may return a value (``CheckpointLoadResult.values``)."""


class DumpLoadCheckpointAdapter(CheckpointAdapter):
    """For objects with ``dump(path)`` and ``load(path)`` (replay buffers)."""

    adapter_id = "torchrl.dump_load"

    def save(self, component, path, *, args, kwargs):
        """``component.dump(path, *args, **kwargs)``."""
        path.mkdir(parents=True, exist_ok=True)
        return component.dump(path, *args, **kwargs)

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        """``component.load(path, *args, **kwargs)``."""
        component.load(path, *args, **kwargs)


class StateDictCheckpointAdapter(CheckpointAdapter):
    """For objects with ``state_dict()``/``load_state_dict()``. ``payload_format`` (``"directory"``,
    ``"archive"``, ``"consolidated"`` or ``"torch"``) picks torchrl's file name for the payload;
    loading finds whichever is there."""

    adapter_id = "torchrl.state_dict"
    _FILES = {"directory": "state", "archive": "state.tdz", "consolidated": "state.tdc", "torch": "state.pt"}

    def __init__(self, payload_format="directory", *, archive_compression=None):
        if payload_format not in self._FILES:
            raise ValueError("payload_format must be 'directory', 'archive', 'consolidated', or 'torch', got "
                             f"{payload_format!r}.")
        self.payload_format = payload_format
        self.archive_compression = archive_compression

    def save(self, component, path, *, args, kwargs):
        """Writes ``component.state_dict(*args, **kwargs)``; returns it."""
        path.mkdir(parents=True, exist_ok=True)
        state = component.state_dict(*args, **kwargs)
        target = path / self._FILES[self.payload_format]
        if self.payload_format == "directory":
            target.mkdir()
            target = target / "state.pt"
        _save(state, os.fspath(target))
        return state

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        """``component.load_state_dict(saved state, *args, **kwargs)``."""
        candidates = [path / "state" / "state.pt"] + [path / name for name in list(self._FILES.values())[1:]]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise FileNotFoundError(f"No state-dict payload was found below {path!s}.")
        state = _load(os.fspath(found), map_location=map_location)
        component.load_state_dict(state, *args, **kwargs)


def _to_json_value(value):
    if isinstance(value, Path):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json_value(v) for v in value]
    return value


def _is_json_value(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(map(_is_json_value, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False


class JSONCheckpointAdapter(CheckpointAdapter):
    """For JSON-compatible values (configuration, progress counters): a mapping or a list is updated in
    place on load; another value is returned (``CheckpointLoadResult.values``)."""

    adapter_id = "torchrl.json"

    def save(self, component, path, *, args, kwargs):
        """Writes ``component`` to ``value.json``."""
        if args or kwargs:
            raise TypeError("JSON checkpoint components do not accept save options.")
        path.mkdir(parents=True, exist_ok=True)
        (path / "value.json").write_text(json.dumps(_to_json_value(component), indent=2, sort_keys=True))
        return component

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        """The saved value, written into ``component`` when both are mappings or lists."""
        if args or kwargs:
            raise TypeError("JSON checkpoint components do not accept load options.")
        value = json.loads((path / "value.json").read_text())
        if isinstance(component, dict) and isinstance(value, dict):
            component.clear()
            component.update(value)
            return component
        if isinstance(component, list) and isinstance(value, list):
            component[:] = value
            return component
        return value


class GlobalRNGState:
    """The process's random generators as one checkpoint component: Python's ``random``, NumPy's
    global generator and rlpipe's (``rlpipe.get_rng_state``)."""

    def state_dict(self):
        """The three generators' states."""
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        return {"python": random.getstate(), "numpy": (kind, as_tensor(keys.astype(np.int64)), pos, has_gauss, cached),
                "rlpipe": _random.get_rng_state()}

    def load_state_dict(self, state_dict):
        """Puts the generators back where ``state_dict()`` found them."""
        version, internal, gauss = state_dict["python"]
        random.setstate((version, tuple(internal), gauss))
        kind, keys, pos, has_gauss, cached = state_dict["numpy"]
        keys = keys.numpy() if isinstance(keys, Tensor) else np.asarray(keys)
        np.random.set_state((kind, keys.astype(np.uint32), pos, has_gauss, cached))
        _random.set_rng_state(state_dict["rlpipe"])


@dataclasses.dataclass
class _Component:
    value: object
    adapter: CheckpointAdapter
    options: CheckpointOptions


def _local_path(path):
    if "://" in str(path):
        raise ValueError(f"Only local checkpoint paths are supported, got {path!s}.")
    return Path(path).expanduser().absolute()


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _publish(source, destination):
    """Moves ``source`` over ``destination`` (an existing one is replaced only once the new one is there)."""
    backup = destination.parent / f".{destination.name}.backup-{uuid.uuid4().hex}"
    if destination.exists():
        os.replace(destination, backup)
    try:
        os.replace(source, destination)
    except BaseException:
        if backup.exists():
            os.replace(backup, destination)
        raise
    _remove(backup)


class Checkpoint:
    """Saves and restores named components, as torchrl 0.14's ``Checkpoint``.

    ``Checkpoint(policy=net, optimizer=opt, rng=GlobalRNGState(), trainer_state={"frames": 0})``
    registers components by keyword (``register(name, value, adapter=..., options=...)`` one by
    one); ``save(path, format="directory"|"archive")`` writes them all (or ``components``) and
    returns the path; ``load(path, components=...)`` restores the registered ones and returns a
    ``CheckpointLoadResult``; ``strict`` (``"error"``, ``"warn"``, ``"ignore"``) says what a requested
    component missing or incompatible does. ``Checkpoint.manifest(path)`` reads the manifest.
    """

    def __init__(self, *, format="directory", strict="error", archive_compression="stored", save_components=None,
                 **components):
        self._check_choice("format", format, _FORMATS)
        self._check_choice("strict", strict, _STRICTNESS)
        self._check_choice("archive_compression", archive_compression, ("stored", "deflate"))
        self.format, self.strict, self.archive_compression = format, strict, archive_compression
        self.save_components = None if save_components is None else frozenset(save_components)
        self._components = {}
        self._adapter_registry = []
        for name, component in components.items():
            self.register(name, component)

    @staticmethod
    def _check_choice(what, value, choices):
        if value not in choices:
            raise ValueError(f"{what} must be one of {list(choices)}, got {value!r}.")

    @property
    def components(self):
        """``{name: registered value}``."""
        return {name: c.value for name, c in self._components.items()}

    def __contains__(self, name):
        return name in self._components

    def register(self, name, component, *, adapter=None, options=None):
        """Registers ``component`` under ``name``; returns the checkpoint."""
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name:
            raise ValueError(f"Checkpoint component names must be non-empty strings without path separators, got "
                             f"{name!r}.")
        if name in self._components:
            raise KeyError(f"Checkpoint component {name!r} is already registered.")
        if adapter is not None and not isinstance(adapter, CheckpointAdapter):
            raise TypeError(f"adapter must be a CheckpointAdapter instance, got {type(adapter).__name__}.")
        self._components[name] = _Component(component, adapter, options or CheckpointOptions())
        return self

    def register_adapter(self, component_type, adapter):
        """Uses ``adapter`` for the registered values of ``component_type``; returns the checkpoint."""
        if not isinstance(component_type, type) or not isinstance(adapter, CheckpointAdapter):
            raise TypeError("register_adapter takes a type and a CheckpointAdapter instance.")
        self._adapter_registry.insert(0, (component_type, adapter))
        return self

    def _adapter(self, component):
        if component.adapter is not None:
            return component.adapter
        for component_type, adapter in self._adapter_registry:
            if isinstance(component.value, component_type):
                return adapter
        value = component.value
        if callable(getattr(value, "dump", None)) and callable(getattr(value, "load", None)):
            return DumpLoadCheckpointAdapter()
        if callable(getattr(value, "state_dict", None)) and callable(getattr(value, "load_state_dict", None)):
            return StateDictCheckpointAdapter()
        if _is_json_value(value):
            return JSONCheckpointAdapter()
        raise TypeError(f"No checkpoint adapter could be inferred for {type(value).__name__}. Provide an adapter, "
                        "implement dump/load, or implement state_dict/load_state_dict.")

    def _selection(self, components):
        selected = set(self._components) if components is None else set(components)
        unknown = selected - set(self._components)
        if unknown:
            raise KeyError(f"Unregistered checkpoint components: {sorted(unknown)}.")
        return selected

    # ---- saving --------------------------------------------------------------------------------------
    def save(self, path, *, components=None, component_options=None, format=None, metadata=None):
        """Writes the selected components and the manifest to ``path`` (replaced whole, once written);
        returns the path."""
        destination = _local_path(path)
        output_format = self.format if format is None else format
        self._check_choice("format", output_format, _FORMATS)
        selected = self._selection(self.save_components if components is None else components)
        options = component_options or {}
        if set(options) - selected:
            raise KeyError(f"Options were provided for unselected checkpoint components: "
                           f"{sorted(set(options) - selected)}.")
        if not _is_json_value(metadata or {}):
            raise TypeError("Checkpoint manifest metadata must be JSON-compatible.")
        destination.parent.mkdir(parents=True, exist_ok=True)
        stage = destination.parent / f".{destination.name}.stage-{uuid.uuid4().hex}"
        stage.mkdir()
        try:
            records = {name: self._save_component(name, index, stage, options.get(name))
                       for index, name in enumerate(sorted(selected))}
            manifest = {"format": _FORMAT_NAME, "format_version": _FORMAT_VERSION, "container": output_format,
                        "checkpoint_id": uuid.uuid4().hex, "created_at": datetime.now(timezone.utc).isoformat(),
                        "versions": {"rlpipe": _rlpipe_version()}, "metadata": _to_json_value(metadata or {}),
                        "components": records}
            (stage / _MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
            if output_format == "directory":
                _publish(stage, destination)
            else:
                self._publish_archive(stage, destination)
        finally:
            _remove(stage)
        return destination

    def _save_component(self, name, index, stage, override):
        registration = self._components[name]
        adapter = self._adapter(registration)
        relative = Path("components") / f"{index:04d}-{quote(name, safe='._-')}"
        options = registration.options.merged(override)
        adapter.save(registration.value, stage / relative, args=options.save_args or (),
                     kwargs=options.save_kwargs or {})
        files = sorted(f.relative_to(stage / relative).as_posix() for f in (stage / relative).rglob("*") if f.is_file())
        return {"adapter": adapter.adapter_id, "adapter_version": adapter.format_version,
                "path": relative.as_posix(), "files": files}

    def _publish_archive(self, stage, destination):
        archive = destination.parent / f".{destination.name}.archive-{uuid.uuid4().hex}"
        compression = zipfile.ZIP_STORED if self.archive_compression == "stored" else zipfile.ZIP_DEFLATED
        try:
            with zipfile.ZipFile(archive, "w", compression=compression) as file:
                for source in sorted(stage.rglob("*")):
                    if source.is_file():
                        file.write(source, source.relative_to(stage).as_posix())
            _publish(archive, destination)
        finally:
            _remove(archive)

    # ---- loading -------------------------------------------------------------------------------------
    @classmethod
    def manifest(cls, path):
        """The manifest of the checkpoint at ``path`` (a directory or an archive), checked."""
        source = _local_path(path)
        if not source.exists():
            raise FileNotFoundError(f"Checkpoint path does not exist: {source}.")
        try:
            if source.is_dir():
                manifest = json.loads((source / _MANIFEST_NAME).read_text())
            elif zipfile.is_zipfile(source):
                with zipfile.ZipFile(source) as archive, archive.open(_MANIFEST_NAME) as file:
                    manifest = json.load(file)
            else:
                raise CheckpointError(f"Path is not a TorchRL checkpoint directory or archive: {source}.")
        except (KeyError, FileNotFoundError, json.JSONDecodeError, zipfile.BadZipFile) as error:
            raise CheckpointError(f"Invalid checkpoint manifest at {source}.") from error
        if manifest.get("format") != _FORMAT_NAME:
            raise CheckpointError(f"Path does not contain a TorchRL checkpoint: {source}.")
        if manifest.get("format_version") != _FORMAT_VERSION:
            raise CheckpointError(f"Unsupported checkpoint format version {manifest.get('format_version')!r}; this "
                                  f"build supports version {_FORMAT_VERSION}.")
        if not isinstance(manifest.get("components"), dict):
            raise CheckpointError("Checkpoint manifest has no component mapping.")
        for name, record in manifest["components"].items():
            if Path(record.get("path", "")).is_absolute() or ".." in Path(record.get("path", "")).parts:
                raise CheckpointError(f"Checkpoint component {name!r} has an unsafe path {record.get('path')!r}.")
        return manifest

    @classmethod
    def is_checkpoint(cls, path):
        """Whether ``path`` holds a checkpoint manifest."""
        try:
            cls.manifest(path)
        except (CheckpointError, OSError, TypeError, ValueError):
            return False
        return True

    def load(self, path, *, components=None, component_options=None, map_location=None, tensor_load_kwargs=None,
             strict=None):
        """Restores the selected registered components (all by default) from ``path``."""
        source = _local_path(path)
        strict = self.strict if strict is None else strict
        self._check_choice("strict", strict, _STRICTNESS)
        manifest = self.manifest(source)
        requested = self._selection(components)
        saved = manifest["components"]
        result = CheckpointLoadResult(missing=requested - set(saved), unrequested=set(saved) - requested,
                                      manifest=manifest)
        options = component_options or {}
        if set(options) - requested:
            raise KeyError(f"Options were provided for unrequested checkpoint components: "
                           f"{sorted(set(options) - requested)}.")
        adapters = {}
        for name in sorted(requested & set(saved)):
            adapter = self._adapter(self._components[name])
            if saved[name]["adapter"] != adapter.adapter_id:
                result.incompatible[name] = (f"manifest adapter is {saved[name]['adapter']!r}, target adapter is "
                                             f"{adapter.adapter_id!r}")
            else:
                adapters[name] = adapter
        self._report(result, strict)
        with self._materialized(source, {name: saved[name] for name in adapters}) as root:
            for name, adapter in adapters.items():
                self._load_component(name, adapter, root / saved[name]["path"], options.get(name), result, strict,
                                     map_location, tensor_load_kwargs or {})
        return result

    def _load_component(self, name, adapter, path, override, result, strict, map_location, tensor_load_kwargs):
        registration = self._components[name]
        opts = registration.options.merged(override)
        try:
            value = adapter.load(registration.value, path, map_location=map_location,
                                 tensor_load_kwargs=tensor_load_kwargs, args=opts.load_args or (),
                                 kwargs=opts.load_kwargs or {})
        except Exception as error:
            result.incompatible[name] = str(error)
            if strict == "error":
                raise CheckpointError(f"Failed to load checkpoint component {name!r}: {error}", result) from error
            if strict == "warn":
                logger.warning("Failed to load checkpoint component %r: %s", name, error)
            return
        result.loaded.add(name)
        if value is not None:
            result.values[name] = value

    @staticmethod
    def _report(result, strict):
        if not result.missing and not result.incompatible:
            return
        parts = [f"missing={sorted(result.missing)}"] if result.missing else []
        parts += [f"incompatible={result.incompatible}"] if result.incompatible else []
        message = "Checkpoint restore issues: " + ", ".join(parts)
        if strict == "error":
            raise CheckpointError(message, result)
        if strict == "warn":
            logger.warning(message)

    @staticmethod
    @contextlib.contextmanager
    def _materialized(source, records):
        """A directory holding the components' files: ``source`` itself, or an archive's extracted."""
        if source.is_dir():
            yield source
            return
        temporary = Path(tempfile.mkdtemp(prefix="rlpipe-checkpoint-load-"))
        try:
            with zipfile.ZipFile(source) as archive:
                for record in records.values():
                    (temporary / record["path"]).mkdir(parents=True, exist_ok=True)
                    for relative in record["files"]:
                        member = Path(record["path"]) / relative
                        if member.is_absolute() or ".." in member.parts:
                            raise CheckpointError(f"Unsafe archive member path: {member}.")
                        (temporary / member).parent.mkdir(parents=True, exist_ok=True)
                        with archive.open(member.as_posix()) as src, (temporary / member).open("wb") as dst:
                            shutil.copyfileobj(src, dst)
            yield temporary
        finally:
            _remove(temporary)


def _rlpipe_version():
    return getattr(sys.modules.get("rlpipe"), "__version__", None)
