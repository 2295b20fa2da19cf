"""torchrl's ``torchrl.data.utils`` helpers for specs: ``consolidate_spec``, ``check_no_exclusive_keys`` and
``contains_lazy_spec`` (they live with the lazily stacked specs, in ``rlpipe.envs``)."""
from ..envs._specs_stacked import check_no_exclusive_keys, consolidate_spec, contains_lazy_spec

__all__ = ["consolidate_spec", "check_no_exclusive_keys", "contains_lazy_spec"]
