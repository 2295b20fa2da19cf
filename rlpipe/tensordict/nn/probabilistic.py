"""How probabilistic modules turn a distribution into a value: the interaction type, as
tensordict.nn.probabilistic (torchrl calls it the exploration type).

``RANDOM`` samples (``rsample`` where the distribution has it), ``MODE``/``MEDIAN``/``MEAN`` read the
distribution's property of that name, ``DETERMINISTIC`` reads ``deterministic_sample`` (the mean when a
distribution has none). ``interaction_type()`` is None outside any ``set_interaction_type`` block: each
module then uses its own default. The setting is process-wide, not per thread.
"""
import enum
import functools

__all__ = ["InteractionType", "set_interaction_type", "interaction_type"]


class InteractionType(enum.StrEnum):
    MODE = "mode"
    MEDIAN = "median"
    MEAN = "mean"
    RANDOM = "random"
    DETERMINISTIC = "deterministic"

    @classmethod
    def from_str(cls, type_str):
        """The member named ``type_str``, case-insensitively."""
        return cls(type_str.lower())

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None


_current = [None]


def interaction_type():
    """The interaction type set by the innermost ``set_interaction_type`` block, or None."""
    return _current[0]


class set_interaction_type:
    """Context manager (and decorator) setting the interaction type of every probabilistic and
    exploration module called inside it. ``type`` is an ``InteractionType``, its name as a string
    (any case), or None (each module's default)."""

    def __init__(self, type=InteractionType.DETERMINISTIC):
        if not isinstance(type, InteractionType) and type is not None:
            if not isinstance(type, str):
                raise ValueError(f"{type} is not a valid InteractionType")
            type = InteractionType(type.lower())
        self.type = type

    def clone(self):
        return type(self)(self.type)

    def __enter__(self):
        self.prev = _current[0]
        _current[0] = self.type

    def __exit__(self, exc_type, exc_value, traceback):
        _current[0] = self.prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def run_with_type(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return run_with_type
