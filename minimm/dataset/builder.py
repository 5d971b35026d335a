"""build_dataloader: turn a ``train_dataloader=dict(...)`` config into a torch DataLoader.

This is MMEngine's ``Runner.build_dataloader``. A dataloader config names its parts::

    train_dataloader = dict(
        batch_size=32, num_workers=2,
        dataset=dict(type='DigitsDataset', split='train'),        # DATASETS (or a Dataset)
        sampler=dict(type='DefaultSampler', shuffle=True),        # DATA_SAMPLERS (or a Sampler)
        collate_fn=dict(type='default_collate'))                   # FUNCTIONS (or a callable)

and every other key (``batch_size``, ``num_workers``, ``persistent_workers``, ``pin_memory``...)
goes to ``torch.utils.data.DataLoader`` unchanged. Two rules carry the reproducibility:

* the sampler gets the run's ``seed`` (so the shuffle order follows the run's seed), unless
  ``diff_rank_seed`` is set: then the run seeds differ per rank but the sampler must still shuffle
  identically on every rank, so it gets ``None`` and agrees on a seed with ``sync_random_seed``;
* when a seed is given, each worker is seeded with :func:`worker_init_fn`.

Without ``collate_fn`` the batch is made by :func:`pseudo_collate` (lists, no stacking), as in
MMEngine — a frequent surprise; name ``default_collate`` to get stacked tensors. A function named
by a config (``collate_fn``, ``worker_init_fn``) is a ``functools.partial`` of it with the
config's other keys, as in MMEngine. ``num_batch_per_epoch=n`` keeps the first
``n * batch_size * world_size`` samples (a quick trial run of a big config).
Left out compared with MMEngine: the ``disable_subprocess_warning`` option.
"""
from functools import partial
from typing import Any, Callable, Optional, Union

from torch.utils.data import DataLoader

from minimm.dist import get_rank, get_world_size
from minimm.registry import DATA_SAMPLERS, DATASETS, FUNCTIONS

from .utils import worker_init_fn as default_worker_init_fn

__all__ = ['build_dataloader']


def build_dataloader(dataloader: Union[DataLoader, dict], seed: Optional[int] = None,
                     diff_rank_seed: bool = False) -> DataLoader:
    """Build a DataLoader from a config dict; a DataLoader is returned as it is.

    Args:
        dataloader: a ``DataLoader``, or a dict with ``dataset`` and ``sampler`` keys (see above).
        seed: the run's seed, used by the sampler and the worker seeding.
        diff_rank_seed: the run seeds each rank differently; the sampler then draws a shared seed.
    """
    if isinstance(dataloader, DataLoader):
        return dataloader
    if not isinstance(dataloader, dict):
        raise TypeError('dataloader must be a DataLoader or a dict, '
                        f'but got {type(dataloader).__name__}')
    for key in ('dataset', 'sampler'):
        if key not in dataloader:
            raise KeyError(f'dataloader config needs a {key!r} key, '
                           f'but got keys {sorted(dataloader)}')
    # A shallow copy keeps the caller's dict as it was; unlike MMEngine's deepcopy it also keeps
    # Dataset or Sampler *objects* passed in the config the very objects the caller holds.
    cfg = dict(dataloader)

    dataset_cfg = cfg.pop('dataset')
    dataset = DATASETS.build(dataset_cfg) if isinstance(dataset_cfg, dict) else dataset_cfg
    if isinstance(dataset_cfg, dict) and hasattr(dataset, 'full_init'):
        dataset.full_init()  # a lazily initialised dataset loads its annotations now
    num_batch_per_epoch = cfg.pop('num_batch_per_epoch', None)
    if num_batch_per_epoch is not None:
        num_samples = num_batch_per_epoch * cfg.get('batch_size', 1) * get_world_size()
        dataset = _SlicedDataset(dataset, num_samples)

    sampler_cfg = cfg.pop('sampler')
    if isinstance(sampler_cfg, dict):
        sampler_seed = None if diff_rank_seed else seed
        sampler = DATA_SAMPLERS.build(sampler_cfg,
                                      default_args=dict(dataset=dataset, seed=sampler_seed))
    else:
        sampler = sampler_cfg

    batch_sampler_cfg = cfg.pop('batch_sampler', None)
    if isinstance(batch_sampler_cfg, dict):
        if 'batch_size' not in cfg:
            raise KeyError('dataloader config with a batch_sampler dict needs a batch_size key')
        batch_sampler = DATA_SAMPLERS.build(
            batch_sampler_cfg, default_args=dict(sampler=sampler, batch_size=cfg.pop('batch_size')))
    else:
        batch_sampler = batch_sampler_cfg

    if 'worker_init_fn' in cfg:
        init_fn = _function_from_cfg(cfg.pop('worker_init_fn'), 'worker_init_fn')
    elif seed is not None:
        init_fn = partial(default_worker_init_fn, num_workers=cfg.get('num_workers', 0),
                          rank=get_rank(), seed=seed)
    else:
        init_fn = None

    collate_cfg = cfg.pop('collate_fn', dict(type='pseudo_collate'))
    collate_fn = _function_from_cfg(collate_cfg, 'collate_fn')

    return DataLoader(
        dataset=dataset,
        # DataLoader rejects a sampler next to a batch_sampler: the batch sampler already holds it.
        sampler=sampler if batch_sampler is None else None,
        batch_sampler=batch_sampler,
        collate_fn=collate_fn,
        worker_init_fn=init_fn,
        **cfg)


class _SlicedDataset:
    """The first ``length`` samples of ``dataset``; other attributes (``metainfo``...) are the
    dataset's."""

    def __init__(self, dataset, length: int):
        self._dataset = dataset
        self._length = min(length, len(dataset))

    def __getattr__(self, name):
        if name == '_dataset':  # not set yet (unpickling in a worker): no recursion
            raise AttributeError(name)
        return getattr(self._dataset, name)

    def __getitem__(self, idx):
        if idx >= self._length:
            raise IndexError(f'index {idx} is out of the first {self._length} samples')
        return self._dataset[idx]

    def __len__(self) -> int:
        return self._length


def _function_from_cfg(fn_cfg: Any, key: str) -> Callable:
    """``dict(type=name or callable, **kwargs)`` -> ``partial(callable, **kwargs)``; a callable
    as is."""
    if callable(fn_cfg):
        return fn_cfg
    if not isinstance(fn_cfg, dict) or 'type' not in fn_cfg:
        raise TypeError(f'{key} should be a dict or callable object, but got {fn_cfg!r}')
    kwargs = dict(fn_cfg)
    fn_type = kwargs.pop('type')
    if isinstance(fn_type, str):
        fn = FUNCTIONS.get(fn_type)
        if fn is None:
            raise KeyError(f'{key}: {FUNCTIONS.not_found_message(fn_type)}')
    elif callable(fn_type):
        fn = fn_type
    else:
        raise TypeError(f'{key} type must be a str or a callable, but got {type(fn_type).__name__}')
    return partial(fn, **kwargs)
