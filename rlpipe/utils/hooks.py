"""``RemovableHandle``: what every ``register_*hook`` returns."""


class RemovableHandle:
    """Removes the hook it was returned for from its dict(s): ``handle.remove()``, or on leaving a ``with``."""
    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extras = extra_dict if isinstance(extra_dict, (list, tuple)) else [] if extra_dict is None else [extra_dict]
        self._dicts = [d for d in (hooks_dict, *extras) if d is not None]

    @classmethod
    def add(cls, hooks_dict, hook):
        handle = cls(hooks_dict)
        hooks_dict[handle.id] = hook
        return handle

    def remove(self):
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
