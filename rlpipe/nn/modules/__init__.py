# ruff: noqa: F401 - this module re-exports the public API
"""The Module classes of rlpipe.nn."""
from .module import Module
from . import utils
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .linear import Identity, Linear, Bilinear
from .activation import (Threshold, ReLU, RReLU, Hardtanh, ReLU6, Sigmoid, Hardsigmoid, Tanh, SiLU, Mish, Hardswish,
                         ELU, CELU, SELU, GLU, GELU, Hardshrink, LeakyReLU, LogSigmoid, Softplus, Softshrink, PReLU,
                         Softsign, Tanhshrink, Softmin, Softmax, Softmax2d, LogSoftmax)
from .flatten import Flatten, Unflatten
from .dropout import Dropout
from .normalization import LayerNorm
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .sparse import Embedding
from .conv import Conv2d
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .lazy import LazyModuleMixin, LazyLinear, LazyConv2d
from .pooling import MaxPool2d, AvgPool2d, AdaptiveAvgPool2d
from .loss import (L1Loss, MSELoss, SmoothL1Loss, HuberLoss, NLLLoss, CrossEntropyLoss, BCELoss,
                   BCEWithLogitsLoss)
from .attention import MultiheadAttention
from .transformer import (Transformer, TransformerEncoder, TransformerDecoder, TransformerEncoderLayer,
                          TransformerDecoderLayer)
from .conv import Conv1d, ConvTranspose1d, ConvTranspose2d
from .normalization import GroupNorm, RMSNorm
from .instancenorm import InstanceNorm1d, InstanceNorm2d
from .padding import (ZeroPad1d, ZeroPad2d, ConstantPad1d, ConstantPad2d, ReflectionPad1d, ReflectionPad2d,
                      ReplicationPad1d, ReplicationPad2d, CircularPad1d, CircularPad2d)
from .pooling import MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d
from .resampling import (Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, PixelShuffle, PixelUnshuffle, Unfold,
                         Fold)
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from .loss import (KLDivLoss, GaussianNLLLoss, PoissonNLLLoss, MarginRankingLoss, SoftMarginLoss, HingeEmbeddingLoss,
                   CosineEmbeddingLoss, TripletMarginLoss, MultiLabelSoftMarginLoss)
from .lazy import LazyConv1d, LazyConvTranspose1d, LazyConvTranspose2d
from .pooling import LPPool1d, LPPool2d, MaxUnpool1d, MaxUnpool2d
from .resampling import ChannelShuffle
from .normalization import LocalResponseNorm
from .loss import TripletMarginWithDistanceLoss, MultiMarginLoss, MultiLabelMarginLoss
from .three_d import Conv3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d
