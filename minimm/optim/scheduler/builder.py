"""build_param_scheduler: build one entry of the ``param_scheduler`` config.

    param_scheduler = [
        dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=5),
        dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=12, convert_to_iter_based=True),
    ]

The runner calls this once per entry with the optimizer wrapper and the train dataloader's
length. ``convert_to_iter_based=True`` builds through the class's ``build_iter_from_epoch``, so a
schedule written in epochs is stepped every iteration (as MMEngine's ``build_scheduler_from_cfg``).
The caller's dict is never changed. Filling in a missing ``end`` from the train loop's length is
the Runner's job, as in MMEngine (``Runner.build_param_scheduler``).
"""
from typing import Optional

from ...registry import PARAM_SCHEDULERS
from .param_scheduler import OptimizerType, _ParamScheduler


def build_param_scheduler(cfg, optimizer: OptimizerType,
                          epoch_length: Optional[int] = None) -> _ParamScheduler:
    """Build a scheduler for ``optimizer`` from ``cfg`` (a built scheduler is returned as is)."""
    if isinstance(cfg, _ParamScheduler):
        return cfg
    if not isinstance(cfg, dict):
        raise TypeError(f'a param_scheduler entry should be a dict or a built scheduler, but got '
                        f'{type(cfg)}')
    if 'type' not in cfg:
        raise KeyError(f'a param_scheduler entry needs a `type`, but got {cfg}')
    args = dict(cfg)
    if not args.pop('convert_to_iter_based', False):
        return PARAM_SCHEDULERS.build(args, default_args=dict(optimizer=optimizer))
    scheduler_type = args.pop('type')
    scheduler_cls = (PARAM_SCHEDULERS.get(scheduler_type) if isinstance(scheduler_type, str)
                     else scheduler_type)
    if scheduler_cls is None:
        raise KeyError(PARAM_SCHEDULERS.not_found_message(scheduler_type))
    if not hasattr(scheduler_cls, 'build_iter_from_epoch'):
        raise TypeError(f'{scheduler_cls.__name__} does not support convert_to_iter_based')
    return scheduler_cls.build_iter_from_epoch(optimizer=optimizer, epoch_length=epoch_length,
                                               **args)
