"""``rlpipe.utils.data``: torch.utils.data's datasets, samplers and ``DataLoader``, for the
supervised parts of RL code (pretraining a model, behaviour cloning) and PyTorch tutorials.

Unlike torch, ``num_workers > 0`` starts no worker processes: batches are loaded in the calling
process (the same batches, in the same order)."""
from .dataset import (Dataset, IterableDataset, TensorDataset, ConcatDataset, Subset, random_split)
from .sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler,
                      BatchSampler)
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
           "DataLoader", "default_collate", "default_convert", "get_worker_info"]
