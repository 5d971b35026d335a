"""build_param_scheduler: build one entry of the ``param_scheduler`` config.

    param_scheduler = [
        dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=5),
        dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=12, convert_to_iter_based=True),
    ]

The runner calls this once per entry with the optimizer wrapper and the train dataloader's
length. ``convert_to_iter_based=True`` builds through the class's ``build_iter_from_epoch``, so a
schedule written in epochs is stepped every iteration (``PARAM_SCHEDULERS``' build function,
MMEngine's ``build_scheduler_from_cfg``).
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
    # PARAM_SCHEDULERS builds with build_scheduler_from_cfg (minimm/registry/build_functions.py),
    # which does the conversion.
    return PARAM_SCHEDULERS.build(cfg, default_args=dict(optimizer=optimizer,
                                                         epoch_length=epoch_length))
