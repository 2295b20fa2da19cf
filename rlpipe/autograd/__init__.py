# ruff: noqa: F401 - this module re-exports the public API
"""Reverse-mode automatic differentiation: Function, backward, grad, grad modes, gradcheck."""
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
                        is_inference_mode_enabled)
from .function import Function, once_differentiable
from .engine import backward, grad
from .gradcheck import gradcheck, gradgradcheck, GradcheckError
from . import profiler

__all__ = ["Function", "backward", "grad", "gradcheck", "gradgradcheck", "GradcheckError", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "is_grad_enabled", "is_inference_mode_enabled",
           "once_differentiable"]
