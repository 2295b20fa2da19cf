"""``RemovableHandle``: what every ``register_*hook`` returns."""
import weakref
from collections import OrderedDict


def _ref(table):
    """A weak reference to a hook table (a plain dict cannot have one: it is held strongly)."""
    try:
        return weakref.ref(table)
    except TypeError:
        return lambda: table


class RemovableHandle:
    """Removes the hook it was returned for from its dict(s): ``handle.remove()``, or on leaving a
    ``with``. As in torch, it refers to the dicts weakly (``hooks_dict_ref()``, ``extra_dict_ref``),
    so a handle does not keep a module alive, and it pickles with the dicts it refers to."""
    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = _ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extras = extra_dict if isinstance(extra_dict, (list, tuple)) else [] if extra_dict is None else [extra_dict]
        self.extra_dict_ref = tuple(_ref(d) for d in extras if d is not None)

    @classmethod
    def add(cls, hooks_dict, hook):
        """Stores ``hook`` in ``hooks_dict`` under a new id and returns the handle that removes it."""
        handle = cls(hooks_dict)
        hooks_dict[handle.id] = hook
        return handle

    def remove(self):
        """Takes the hook out of its table(s); does nothing if it is gone already."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            table = ref()
            if table is not None:
                table.pop(self.id, None)

    def __getstate__(self):
        return self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref)

    def __setstate__(self, state):
        # a dict that died before pickling comes back as an empty one nothing else refers to
        self.hooks_dict_ref = _ref(OrderedDict() if state[0] is None else state[0])
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        self.extra_dict_ref = tuple(_ref(d) for d in (state[2] if len(state) > 2 else ()) if d is not None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
