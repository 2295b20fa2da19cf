# ruff: noqa: F401 - this module re-exports the public API
"""``rlpipe.nn.utils``: gradient clipping, flattening parameters to one vector and back, and (in
``rnn``) packing and padding variable-length sequences."""
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from . import rnn, stateless

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "rnn", "stateless"]
