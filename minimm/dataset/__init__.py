"""Datasets, samplers, collate functions and the dataloader builder (importing registers them)."""
from .builder import build_dataloader
from .digits import DigitsDataset
from .sampler import DefaultSampler, InfiniteSampler
from .utils import default_collate, pseudo_collate, sync_random_seed, worker_init_fn

__all__ = ['build_dataloader', 'DigitsDataset', 'DefaultSampler', 'InfiniteSampler',
           'default_collate', 'pseudo_collate', 'sync_random_seed', 'worker_init_fn']
