# ruff: noqa: F401 - this module re-exports the public API
"""tensordict.nn: modules that read and write TensorDicts, probabilistic modules and their helpers."""
from .common import TensorDictModule, TensorDictModuleBase, TensorDictSequential, WrapModule, is_tensor_collection
from ..keys import unravel_key, unravel_key_list
from .probabilistic import (InteractionType, set_interaction_type, interaction_type, ProbabilisticTensorDictModule,
                            ProbabilisticTensorDictSequential)
from .distributions import NormalParamExtractor, AddStateIndependentNormalScale
from .cudagraphs import CudaGraphModule
from .ensemble import EnsembleModule
from .params import TensorDictParams
from .utils import mappings, biased_softplus, inv_softplus, add_custom_mapping
from . import cudagraphs, distributions, params, probabilistic, utils

__all__ = ["TensorDictModule", "TensorDictModuleBase", "TensorDictSequential", "WrapModule", "unravel_key",
           "unravel_key_list", "InteractionType", "set_interaction_type", "interaction_type",
           "ProbabilisticTensorDictModule", "ProbabilisticTensorDictSequential",
           "NormalParamExtractor", "TensorDictParams", "mappings",
           "biased_softplus", "inv_softplus", "add_custom_mapping", "EnsembleModule",
           "AddStateIndependentNormalScale", "CudaGraphModule"]
