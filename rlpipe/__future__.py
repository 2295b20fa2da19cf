"""``rlpipe.__future__``: the two switches PyTorch keeps for how ``nn.Module`` conversions treat parameters.

- ``set_overwrite_module_params_on_conversion(True)``: ``to()``, ``float()``, ``cuda()``, ... give the
  module new ``Parameter`` objects instead of changing the existing ones in place.
- ``set_swap_module_params_on_conversion(True)``: the existing ``Parameter`` objects keep their identity
  through conversions and through ``load_state_dict`` (with ``assign=True`` they take the checkpoint's
  tensor data, shared, instead of being replaced). This switch wins over the first.

Both default to False, as in PyTorch.
"""
_overwrite_module_params_on_conversion = False
_swap_module_params_on_conversion = False


def set_overwrite_module_params_on_conversion(value):
    """Makes module conversions assign new parameters (``value=True``) or change them in place."""
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = value


def get_overwrite_module_params_on_conversion():
    """Whether module conversions assign new parameters; False by default."""
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value):
    """Makes conversions and ``load_state_dict`` keep each parameter object (``value=True``)."""
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = value


def get_swap_module_params_on_conversion():
    """Whether conversions and ``load_state_dict`` keep parameter objects; False by default."""
    return _swap_module_params_on_conversion
