"""Checks of a run's settings, made before the first iteration.

MMEngine runs what it is given. minimm keeps that wherever the outcome is well defined, and says
so in a warning: ``max_epochs=0`` (or ``max_iters=0``) trains nothing, and a built-in hook listed
twice (``EMAHook`` twice in ``custom_hooks``, ``CheckpointHook`` in ``default_hooks`` and again in
``custom_hooks``) runs twice. A value that cannot work is an error naming the key, the value and
what is allowed, instead of a crash later: ``val_interval=0`` (MMEngine divides by it after the
first epoch), ``max_epochs='two'``, a ``param_scheduler`` of the wrong shape.
"""
import os
from typing import Dict, List, Optional

from torch.utils.data import DataLoader

from ..dataflow import check_hook_order, check_hooks_mode
from ..hooks import Hook
from ..optim.scheduler import _ParamScheduler
from ..registry import (DATA_SAMPLERS, DATASETS, HOOKS, LOOPS, OPTIM_WRAPPERS, OPTIMIZERS,
                        PARAM_SCHEDULERS)
from ..values import check_arguments, is_whole, problem, whole_number
from .hook_dispatch import DEFAULT_HOOKS
from .loops import EpochBasedTrainLoop, IterBasedTrainLoop

# The numbers a built-in train loop reads from train_cfg, and the smallest each may be.
TRAIN_CFG_MINIMUMS = dict(max_epochs=0, max_iters=0, val_interval=1, val_begin=None)


def check_train_cfg(cfg: dict, logger=None) -> None:
    """Raise for a ``train_cfg`` number that cannot work (when the Runner is made, and again
    as its train loop is built, in case ``train_cfg`` was replaced since); with ``logger``, warn
    when it trains nothing."""
    for key, minimum in TRAIN_CFG_MINIMUMS.items():
        if key in cfg:
            whole_number(f'train_cfg.{key}', cfg[key], minimum)
    for milestone, interval in cfg.get('dynamic_intervals') or []:
        if not (is_whole(milestone) and is_whole(interval) and interval >= 1):
            raise ValueError(f'train_cfg.dynamic_intervals has ({milestone!r}, {interval!r}): '
                             'each must be (an integer milestone, an integer interval >= 1)')
    for key in ('max_epochs', 'max_iters'):
        if logger is not None and cfg.get(key) == 0:
            logger.warning(f'train_cfg.{key}=0: train() will run no iteration (as in MMEngine); '
                           f'set {key} >= 1 to train')


def train_loop_kind(train_cfg) -> Optional[str]:
    """'epoch' or 'iter' for a built-in train loop (or a subclass of one), given as a config or
    built; None for a loop of one's own (or an unknown ``type``), which may read ``train_cfg``
    its own way (MMEngine builds it with whatever keys it has)."""
    if isinstance(train_cfg, dict) and 'type' not in train_cfg:
        return 'epoch' if train_cfg.get('by_epoch', True) else 'iter'
    cls = class_of(train_cfg, LOOPS) if isinstance(train_cfg, dict) else type(train_cfg)
    for kind, loop in (('iter', IterBasedTrainLoop), ('epoch', EpochBasedTrainLoop)):
        if isinstance(cls, type) and issubclass(cls, loop):
            return kind
    return None


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


def check_registered_hooks(hooks: list, train_cfg, param_scheduler,
                           default_hooks: Optional[dict], custom_hooks: Optional[list], val_cfg,
                           check_hooks: str, logger) -> None:
    """Once the hooks are registered and the logger exists: hooks listed twice, ``by_epoch``
    settings that cannot fire in an iteration-based loop, and the order against what each hook
    declares it reads and writes (``minimm/dataflow.py``; ``check_hooks`` ``'warn'``,
    ``'error'`` or ``'off'``)."""
    warn_duplicate_hooks(default_hooks, custom_hooks, logger)
    warn_by_epoch(train_cfg, param_scheduler, default_hooks, custom_hooks, val_cfg is not None,
                  logger)
    check_hook_order(hooks, Hook.stages, check_hooks, logger)


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


def _check_entry(entry, registry, where: str, default_type=None) -> None:
    """``check_arguments`` on a config dict built through ``registry`` (minimm's and torch's
    classes only: a user's own class checks its own arguments)."""
    if not isinstance(entry, dict):
        return
    if 'type' not in entry and default_type is not None:
        entry = dict(entry, type=default_type)
    cls = class_of(entry, registry) if 'type' in entry else None
    if isinstance(cls, type) and cls.__module__.startswith(('minimm.', 'torch.')):
        options = {key: value for key, value in entry.items() if key not in ('type', '_scope_')}
        check_arguments(cls, options, where)


def _check_hook(hook, where: str, default_type: Optional[str] = None) -> None:
    """A hook config must name its class: ``default_hooks`` entries replace the defaults whole
    (as in MMEngine), so ``default_hooks.checkpoint.interval=x`` on a config without a
    ``checkpoint`` entry gives a dict with no ``type``, which would fail late in the registry."""
    if isinstance(hook, dict) and 'type' not in hook:
        note = ' (an entry of default_hooks replaces the default whole)' if default_type else ''
        raise KeyError(f'{where}={hook!r}: a hook config must contain the key "type", as in '
                       f"dict(type='{default_type or 'MyHook'}', ...){note}")
    _check_entry(hook, HOOKS, where)


def _check_dataloader(loader, where: str) -> None:
    if not isinstance(loader, dict):
        return
    skip = ('dataset', 'sampler', 'batch_sampler', 'collate_fn', 'worker_init_fn')
    check_arguments(DataLoader, {k: v for k, v in loader.items() if k not in skip}, where)
    _check_entry(loader.get('sampler'), DATA_SAMPLERS, f'{where}.sampler')
    _check_entry(loader.get('dataset'), DATASETS, f'{where}.dataset')


def check_config(cfg) -> None:
    """The values ``check_options`` checks, of a whole config, for a command that reads one
    without building a Runner (``minimm plot-lr``): refused in the same words as by train."""
    _check_values(**{key: cfg.get(key) for key in CHECKED_OPTIONS})


CHECKED_OPTIONS = ('train_dataloader', 'val_dataloader', 'test_dataloader', 'train_cfg',
                   'val_cfg', 'test_cfg', 'optim_wrapper', 'param_scheduler', 'default_hooks',
                   'custom_hooks', 'load_from')


def _all_or_none(names: str, values: list) -> None:
    if not (all(v is None for v in values) or all(v is not None for v in values)):
        given = ', '.join(f'{n}={"set" if v is not None else None}'
                          for n, v in zip(names.split(', '), values))
        raise ValueError(f'{names} should be either all None or not None, but got {given}')


def check_options(train_dataloader, val_dataloader, test_dataloader, train_cfg, val_cfg,
                  test_cfg, optim_wrapper, param_scheduler, val_evaluator, test_evaluator,
                  default_hooks, custom_hooks, load_from, check_hooks: str) -> None:
    """Check a Runner's options (its constructor's arguments of these names, in its order)
    before anything is built: each phase given whole or not at all, ``check_hooks``, and the
    values (``_check_values``)."""
    _all_or_none('train_dataloader, train_cfg, optim_wrapper',
                 [train_dataloader, train_cfg, optim_wrapper])
    _all_or_none('val_dataloader, val_cfg, val_evaluator', [val_dataloader, val_cfg, val_evaluator])
    _all_or_none('test_dataloader, test_cfg, test_evaluator',
                 [test_dataloader, test_cfg, test_evaluator])
    check_hooks_mode(check_hooks)
    _check_values(train_dataloader, val_dataloader, test_dataloader, train_cfg, val_cfg, test_cfg,
                  optim_wrapper, param_scheduler, default_hooks, custom_hooks, load_from)


def _check_values(train_dataloader, val_dataloader, test_dataloader, train_cfg, val_cfg,
                  test_cfg, optim_wrapper, param_scheduler, default_hooks, custom_hooks,
                  load_from) -> None:
    """Every option of the built-in hooks, loops, schedulers, optimizer wrapper, optimizer and
    dataloaders must be of its kind (``minimm/values.py``)."""
    check_scheduler_cfg(param_scheduler, optim_wrapper)
    for key, loader in (('train_dataloader', train_dataloader),
                        ('val_dataloader', val_dataloader), ('test_dataloader', test_dataloader)):
        _check_dataloader(loader, key)
    for key, hook in {**DEFAULT_HOOKS, **(default_hooks or {})}.items():
        _check_hook(hook, f'default_hooks.{key}', DEFAULT_HOOKS.get(key, {}).get('type'))
    for index, hook in enumerate(custom_hooks or []):
        _check_hook(hook, f'custom_hooks[{index}]')
    if isinstance(train_cfg, dict) and train_loop_kind(train_cfg) is not None:
        default = 'EpochBasedTrainLoop' if train_cfg.get('by_epoch', True) else \
            'IterBasedTrainLoop'
        wrong = problem('bool', train_cfg.get('by_epoch', True))
        if wrong:
            raise ValueError(f'train_cfg.by_epoch={train_cfg["by_epoch"]!r}: {wrong}')
        _check_entry({k: v for k, v in train_cfg.items() if k != 'by_epoch' and k not in
                      TRAIN_CFG_MINIMUMS}, LOOPS, 'train_cfg', default)
        check_train_cfg(train_cfg)  # the counters
    _check_entry(val_cfg, LOOPS, 'val_cfg', 'ValLoop')
    _check_entry(test_cfg, LOOPS, 'test_cfg', 'TestLoop')
    if isinstance(optim_wrapper, dict):
        options_of_wrapper = {k: v for k, v in optim_wrapper.items()
                              if k not in ('optimizer', 'constructor', 'paramwise_cfg')}
        _check_entry(options_of_wrapper, OPTIM_WRAPPERS, 'optim_wrapper', 'OptimWrapper')
        clip = optim_wrapper.get('clip_grad')
        if isinstance(clip, dict) and problem('number', clip.get('max_norm', 0)):
            raise ValueError(f'optim_wrapper.clip_grad.max_norm={clip["max_norm"]!r}: '
                             f'{problem("number", clip["max_norm"])}')
        _check_entry(optim_wrapper.get('optimizer'), OPTIMIZERS, 'optim_wrapper.optimizer')
    for index, entry in enumerate(param_scheduler if isinstance(param_scheduler, (list, tuple))
                                  else [param_scheduler]):
        _check_entry(entry, PARAM_SCHEDULERS, f'param_scheduler[{index}]')
    if not isinstance(load_from, (str, os.PathLike, dict, type(None))):
        raise TypeError(f'load_from={load_from!r}: must be a checkpoint path (a str), '
                        "dict(path=..., trusted=True) or None")


def _warn_schedulers_step(schedulers, logger) -> None:
    """In an iteration-based loop the only epoch ends after the last iteration, so a scheduler
    with ``by_epoch=True`` never changes the lr during training. MMEngine runs it so, with no
    word, and its own tests build such runners: a warning naming it, not an error."""
    if isinstance(schedulers, dict) and 'type' not in schedulers:  # one list per optimizer
        named = [(f'param_scheduler.{key}', value) for key, value in schedulers.items()]
    else:
        named = [('param_scheduler', schedulers)]
    for where, entries in named:
        single = not isinstance(entries, (list, tuple))
        for index, entry in enumerate([entries] if single else entries):
            if isinstance(entry, dict):
                by_epoch = entry.get('by_epoch', True) and not entry.get('convert_to_iter_based')
            else:
                by_epoch = getattr(entry, 'by_epoch', False)
            if by_epoch:
                logger.warning(
                    f'{where}{"" if single else f"[{index}]"}.by_epoch=True in an iteration-based '
                    'train loop: it steps only after the last iteration, never during training; '
                    'set by_epoch=False (begin/end in iterations), or convert_to_iter_based=True '
                    '(begin/end in epochs of the train dataloader)')


def _option(hook, key: str):
    """A hook's option, from its config or the built hook; True (the default) when not given."""
    return hook.get(key, True) if isinstance(hook, dict) else getattr(hook, key, True)


def warn_by_epoch(train_loop, param_scheduler, default_hooks: Optional[dict],
                  custom_hooks: Optional[list], has_val: bool, logger) -> None:
    """Warn, at start, about the ``by_epoch`` settings that an iteration-based loop cannot
    honour (MMEngine says nothing): the schedulers' (``_warn_schedulers_step``), and those of the
    hooks a config names: CheckpointHook(by_epoch=True) saves once, at the end;
    LoggerHook(log_metric_by_epoch=True) logs every validation at epoch 0."""
    if train_loop_kind(train_loop) != 'iter':
        return
    _warn_schedulers_step(param_scheduler, logger)
    # Only the hooks a config names: the untouched defaults would warn in every short demo.
    hooks = [(f'default_hooks.{key}', hook) for key, hook in (default_hooks or {}).items()
             if hook is not None]
    hooks += [(f'custom_hooks[{index}]', hook) for index, hook in enumerate(custom_hooks or [])]
    for where, hook in hooks:
        cls = class_of(hook, HOOKS)
        names = [klass.__name__ for klass in getattr(cls, '__mro__', ())]
        if 'CheckpointHook' in names and _option(hook, 'by_epoch') is True:
            logger.warning(f'{where}.by_epoch=True in an iteration-based train loop: no epoch '
                           'ends before training does, so it saves only at the end; set '
                           f'{where}.by_epoch=False to save every `interval` iterations')
        if 'LoggerHook' in names and has_val and _option(hook, 'log_metric_by_epoch') is True:
            logger.warning(f'{where}.log_metric_by_epoch=True in an iteration-based train loop: '
                           'every validation is logged at epoch 0; set '
                           f'{where}.log_metric_by_epoch=False to log it at its iteration')
