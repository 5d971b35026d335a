"""Checks of a run's settings, made before the first iteration.

MMEngine runs what it is given. minimm keeps that wherever the outcome is well defined, and says
so in a warning: ``max_epochs=0`` (or ``max_iters=0``) trains nothing, and a built-in hook listed
twice (``EMAHook`` twice in ``custom_hooks``, ``CheckpointHook`` in ``default_hooks`` and again in
``custom_hooks``) runs twice. A value that cannot work is an error naming the key, the value and
what is allowed, instead of a crash later: ``val_interval=0`` (MMEngine divides by it after the
first epoch), ``max_epochs='two'``, a ``param_scheduler`` of the wrong shape.
"""
import numbers
from typing import Dict, List, Optional

from ..optim.scheduler import _ParamScheduler
from ..registry import HOOKS
from .hook_dispatch import DEFAULT_HOOKS

# The numbers a built-in train loop reads from train_cfg, and the smallest each may be.
TRAIN_CFG_MINIMUMS = dict(max_epochs=0, max_iters=0, val_interval=1, val_begin=None)


def _is_whole(value) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())


def whole_number(name: str, value, minimum: Optional[int] = None) -> int:
    """``value`` as an int; a ValueError naming ``name`` and ``value`` unless it is a whole number
    (>= ``minimum`` when given). ``check_train_cfg`` checks the config with it, and the train
    loops their counters: a loop may be built without the Runner."""
    if not _is_whole(value) or (minimum is not None and value < minimum):
        allowed = 'an integer' if minimum is None else f'an integer >= {minimum}'
        raise ValueError(f'{name}={value!r}: must be {allowed}')
    return int(value)


def check_train_cfg(cfg: dict, logger) -> None:
    """Raise for a ``train_cfg`` number that cannot work; warn when it trains nothing."""
    for key, minimum in TRAIN_CFG_MINIMUMS.items():
        if key in cfg:
            whole_number(f'train_cfg.{key}', cfg[key], minimum)
    for milestone, interval in cfg.get('dynamic_intervals') or []:
        if not (_is_whole(milestone) and _is_whole(interval) and interval >= 1):
            raise ValueError(f'train_cfg.dynamic_intervals has ({milestone!r}, {interval!r}): '
                             'each must be (an integer milestone, an integer interval >= 1)')
    for key in ('max_epochs', 'max_iters'):
        if cfg.get(key) == 0:
            logger.warning(f'train_cfg.{key}=0: train() will run no iteration (as in MMEngine); '
                           f'set {key} >= 1 to train')


def class_of(entry, registry) -> Optional[type]:
    """The class a config entry of ``registry`` builds (a built object's own class), looked up
    as the build does: in the registry that the default scope (or the entry's ``_scope_``)
    selects, which may be a package's child. None for a name nobody registered."""
    if not isinstance(entry, dict):
        return type(entry)
    if not isinstance(entry['type'], str):
        return entry['type']
    with registry.switch_scope_and_registry(entry.get('_scope_')) as registry:
        return registry.get(entry['type'])


def warn_duplicate_hooks(default_hooks: Optional[dict], custom_hooks: Optional[list],
                         logger) -> None:
    """Warn once per built-in hook class that ``default_hooks`` (over ``DEFAULT_HOOKS``) and
    ``custom_hooks`` register more than once, naming where each comes from. Only minimm's own
    hooks: a user's hook class may well be listed several times with different arguments."""
    places: Dict[type, List[str]] = {}
    for key, hook in {**DEFAULT_HOOKS, **(default_hooks or {})}.items():
        if hook is not None:
            places.setdefault(class_of(hook, HOOKS), []).append(f'default_hooks.{key}')
    for index, hook in enumerate(custom_hooks or []):
        places.setdefault(class_of(hook, HOOKS), []).append(f'custom_hooks[{index}]')
    for cls, where in places.items():
        if len(where) > 1 and cls.__module__.startswith('minimm.'):
            logger.warning(f'{cls.__name__} is registered {len(where)} times ({", ".join(where)}): '
                           'each of them runs at every stage it implements, as in MMEngine; '
                           'remove the extra entry unless that is what you want')


def check_scheduler_cfg(param_scheduler, optim_wrapper) -> None:
    """Fail early on a ``param_scheduler`` of the wrong shape: a scheduler or a config dict, a
    list of them, or (MMEngine's form for several optimizers) a dict of either; or one given
    without an ``optim_wrapper`` to schedule."""
    def is_one(entry):
        return isinstance(entry, _ParamScheduler) or (isinstance(entry, dict) and 'type' in entry)

    if param_scheduler is None:
        return
    if optim_wrapper is None:
        raise ValueError('param_scheduler should be None when optim_wrapper is None, '
                         f'but got {param_scheduler}')
    if is_one(param_scheduler):
        return
    if isinstance(param_scheduler, (list, tuple)):
        bad = [entry for entry in param_scheduler if not is_one(entry)]
        if bad:
            raise TypeError('each entry of `param_scheduler` should be a scheduler or a config '
                            f'dict with a `type`, but got {bad[0]!r}')
    elif isinstance(param_scheduler, dict):
        bad = [value for value in param_scheduler.values() if not is_one(value) and not (
            isinstance(value, (list, tuple)) and all(map(is_one, value)))]
        if bad:
            raise AssertionError('Each value of `param_scheduler` should be a scheduler, a config '
                                 f'dict with a `type`, or a list of them, but got {bad[0]!r}')
    else:
        raise TypeError('`param_scheduler` should be a `_ParamScheduler`, a dict, a list or a '
                        f'tuple, but got {type(param_scheduler)}')
