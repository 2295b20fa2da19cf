"""Layer 3: ``Module`` and everything built on it (layers, losses, init, functional, utils)."""
from .parameter import Parameter, Buffer
from .modules import *  # noqa: F401,F403
from .modules import Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
