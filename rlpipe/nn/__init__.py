# ruff: noqa: F401 - this module re-exports the public API
"""Layer 3: ``Module`` and everything built on it (layers, losses, init, functional, utils)."""
from .parameter import Parameter, Buffer, UninitializedParameter, UninitializedBuffer
from .modules import Module, Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .modules import (Identity, Linear, Bilinear, Threshold, ReLU, RReLU, Hardtanh, ReLU6, Sigmoid, Hardsigmoid, Tanh,
                      SiLU, Mish, Hardswish, ELU, CELU, SELU, GLU, GELU, Hardshrink, LeakyReLU, LogSigmoid, Softplus,
                      Softshrink, PReLU, Softsign, Tanhshrink, Softmin, Softmax, Softmax2d, LogSoftmax, Flatten,
                      Unflatten, Dropout, LayerNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, Embedding, Conv2d,
                      MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, L1Loss, MSELoss, SmoothL1Loss, HuberLoss, NLLLoss,
                      CrossEntropyLoss,
                      BCELoss, BCEWithLogitsLoss, RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell)
from .modules import LazyModuleMixin, LazyLinear, LazyConv2d
from .modules import (MultiheadAttention, Transformer, TransformerEncoder, TransformerDecoder,
                      TransformerEncoderLayer, TransformerDecoderLayer)
from .modules import (Conv1d, ConvTranspose1d, ConvTranspose2d, GroupNorm, RMSNorm, InstanceNorm1d, InstanceNorm2d,
                      ZeroPad1d, ZeroPad2d, ConstantPad1d, ConstantPad2d, ReflectionPad1d, ReflectionPad2d,
                      ReplicationPad1d, ReplicationPad2d, CircularPad1d, CircularPad2d, MaxPool1d, AvgPool1d,
                      AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, Upsample, UpsamplingNearest2d,
                      UpsamplingBilinear2d, PixelShuffle, PixelUnshuffle, Unfold, Fold, CosineSimilarity,
                      PairwiseDistance, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout, KLDivLoss,
                      GaussianNLLLoss, PoissonNLLLoss, MarginRankingLoss, SoftMarginLoss, HingeEmbeddingLoss,
                      CosineEmbeddingLoss, TripletMarginLoss, MultiLabelSoftMarginLoss)
from .modules import LazyConv1d, LazyConvTranspose1d, LazyConvTranspose2d
from .modules import (LPPool1d, LPPool2d, MaxUnpool1d, MaxUnpool2d, ChannelShuffle, LocalResponseNorm,
                      TripletMarginWithDistanceLoss, MultiMarginLoss, MultiLabelMarginLoss)
from .modules import Conv3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d
from . import functional, init, utils
from . import attention
