"""One value per param group: how a schedule's per-group setting is spelt out, in both worlds.

MMCV 1.x's cyclic updater hooks (``format_param`` in ``mmcv.runner.hooks.lr_updater``) and
MMEngine's ``OneCycleParamScheduler`` both take ``max_lr``/``eta_max``-style settings as a number
(every group the same), a list (one per group) or, for several optimizers, a dict keyed by each
optimizer's name. Both read them here; the lowest floor, so the MMCV wing needs no MMEngine room.
"""
import numbers
from typing import List, Sequence, Union


def format_param(name: str, optimizer, param: Union[float, Sequence[float], dict]) -> List[float]:
    """One value per parameter group of ``optimizer``: a number is repeated, a list/tuple must have
    one value per group, and a dict maps an optimizer's ``name`` to its value(s) (MMCV's form for
    a dict of optimizers)."""
    n = len(optimizer.param_groups)
    if isinstance(param, numbers.Number):
        return [param] * n
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(f'expected {n} values for {name}, got {len(param)}')
        return list(param)
    if name not in param:
        raise KeyError(f'{name} is not found in {param.keys()}')
    return format_param(name, optimizer, param[name])
