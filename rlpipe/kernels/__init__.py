"""Layer 1½: the fused computations, each defined once, by name.

A kernel here is one computation that a caller (an op, an optimizer, ``MultiStep``, a value estimator)
would otherwise spell as several array calls: its reference, written against the array namespace
``xp`` (so it runs on NumPy and on CuPy), and its CUDA source (``ElementwiseKernel``-shaped), which a
cuda backend runs in one launch. Callers look a kernel up for their backend in one line::

    step = kernels.get("adam_step", backend)   # the CUDA kernel on cuda, the reference on the CPU

``get`` gives None where the caller's own formula is the reference (the fused activations: the ops'
formulas in ``rlpipe/primitives/activations.py``) or does the job off the GPU (the returns: see
``returns.py``); the caller then runs that formula.

- ``returns.py``: n-step returns (``n_step_returns``) and GAE / TD(lambda) (``value_estimate``);
- ``optim.py``: the optimizer steps (``sgd_step``, ``adam_step``, ``rmsprop_step``, ``adagrad_step``);
- ``activations.py``: fused activations and their gradients (``sigmoid``, ``gelu_backward``, ...);
- ``recurrent.py``: the LSTM step's gate math and its backward (``lstm_cell``, ``lstm_cell_backward``).

This layer imports only ``rlpipe.backends`` (the array namespace, kernel plumbing) and the standard library.
"""
from ._registry import KERNELS, cuda_kernels, get
from . import activations, optim, recurrent, returns  # noqa: F401 - each registers its kernels

__all__ = ["KERNELS", "cuda_kernels", "get"]
