"""BaseRunner: what MMCV 1.x's two runners share.

Read this file in three parts:

1. the state a hook reads: ``model``, ``optimizer``, ``work_dir``, ``meta``, ``log_buffer``,
   ``mode`` and the counters ``epoch``, ``iter``, ``inner_iter`` (0-based), ``max_epochs``,
   ``max_iters``;
2. the hooks: ``register_hook`` keeps them sorted by priority, ``call_hook`` runs one stage of all
   of them, ``get_hook_info`` prints who runs where;
3. ``register_training_hooks``: one ``register_*_hook`` per config key of an MMCV config
   (``lr_config``, ``optimizer_config``...), each with its fixed priority.

The loops themselves (``run``, ``train``, ``val``) are in ``epoch_based_runner.py`` and
``iter_based_runner.py``. Unlike MMEngine, even the optimizer step is a hook (``OptimizerHook``):
the model's ``train_step`` only computes the loss. Left out compared with MMCV 1.7: rescaling
``iter`` on resume when the number of GPUs changed.
"""
import copy
import logging
import os.path as osp
import platform
import shutil
import warnings
from abc import ABCMeta, abstractmethod
from contextlib import contextmanager

import torch
from torch.optim import Optimizer

from minimm.dataflow import check_hook_order
from minimm.work_dir import hold_work_dir, make_work_dir

from .checkpoint import load_checkpoint, save_checkpoint
from .dist_utils import get_dist_info
from .hooks import HOOKS, Hook
from .hooks.schedule import for_each_group
from .log_buffer import LogBuffer
from .parallel import is_module_wrapper
from .priority import Priority, get_priority
from .registry import build_from_cfg
from .utils import DETAIL, get_host_info, get_time_str, symlink

# priority value -> its name, for get_hook_info ('VERY_HIGH'); other values print as numbers
_PRIORITY_NAMES = {level.value: level.name for level in Priority}


def _check_step_function(model, batch_processor):
    """A model brings ``train_step``/``val_step``; the old way, a ``batch_processor`` function,
    still works but excludes them (which of the two should run?)."""
    if batch_processor is None:
        assert hasattr(model, 'train_step'), 'the model needs a train_step method'
        return
    if not callable(batch_processor):
        raise TypeError(f'batch_processor must be callable, but got {type(batch_processor)}')
    warnings.warn('batch_processor is deprecated, please implement train_step() and '
                  'val_step() in the model instead.', DeprecationWarning)
    inner = model.module if is_module_wrapper(model) else model
    if hasattr(inner, 'train_step') or hasattr(inner, 'val_step'):
        raise RuntimeError('batch_processor and model.train_step()/model.val_step() '
                           'cannot be both available.')


def _check_optimizer(optimizer):
    """None, one optimizer, or a dict of them (a GAN's generator and discriminator)."""
    if optimizer is None or isinstance(optimizer, Optimizer):
        return
    if not isinstance(optimizer, dict):
        raise TypeError('optimizer must be a torch.optim.Optimizer object or dict or None, '
                        f'but got {type(optimizer)}')
    for name, value in optimizer.items():
        if not isinstance(value, Optimizer):
            raise TypeError('optimizer must be a dict of torch.optim.Optimizers, '
                            f'but optimizer["{name}"] is a {type(value)}')


def _group_momentum(group):
    """SGD keeps ``momentum``; Adam-like optimizers keep it as ``betas[0]``; others have none."""
    return group['momentum'] if 'momentum' in group else group.get('betas', (0,))[0]


def _hook_from_policy(config, suffix):
    """Build an lr or momentum updater from a config with a ``policy`` key (``'step'``,
    ``'CosineAnnealing'``...): the class is the policy's name plus ``suffix``."""
    assert 'policy' in config, f'{suffix} config needs a "policy"'
    policy = config.pop('policy')
    # An all-lower-case policy is title-cased ('step' -> 'Step'), any other kept (MMCV's rule):
    # 'cosineannealing' -> 'Cosineannealing', which no class is named; write 'CosineAnnealing'.
    if policy == policy.lower():
        policy = policy.title()
    config['type'] = policy + suffix
    return build_from_cfg(config, HOOKS)


def _hook_of_type(config, default_type):
    """Build a hook from a config whose ``type`` defaults to ``default_type``."""
    config.setdefault('type', default_type)
    return build_from_cfg(config, HOOKS)


class BaseRunner(metaclass=ABCMeta):
    """The base of ``EpochBasedRunner`` and ``IterBasedRunner``, which add ``run``, ``train``,
    ``val`` and ``save_checkpoint``. ``model`` has ``train_step(data_batch, optimizer)`` and
    ``val_step`` returning ``dict(loss=..., log_vars=..., num_samples=...)``."""

    check_hooks = 'warn'  # minimm's: on an ordering bug in the hooks' dataflow, 'error' or 'off'

    def __init__(self, model, batch_processor=None, optimizer=None, work_dir=None, logger=None,
                 meta=None, max_iters=None, max_epochs=None):
        _check_step_function(model, batch_processor)
        _check_optimizer(optimizer)
        if not isinstance(logger, logging.Logger):  # None too is refused, despite the default
            raise TypeError(f'logger must be a logging.Logger object, but got {type(logger)}')
        if not (meta is None or isinstance(meta, dict)):
            raise TypeError(f'meta must be a dict or None, but got {type(meta)}')
        if not (work_dir is None or isinstance(work_dir, str)):
            raise TypeError('"work_dir" must be a str or None')
        if max_epochs is not None and max_iters is not None:
            raise ValueError('Only one of `max_epochs` or `max_iters` can be set.')

        self.model = model
        self.batch_processor = batch_processor
        self.optimizer = optimizer
        self.logger = logger
        self.meta = meta  # the caller's dict itself: hooks keep their notes in meta['hook_msgs']
        self._rank, self._world_size = get_dist_info()
        self.work_dir = None if work_dir is None else make_work_dir(work_dir, self._rank == 0)
        self._model_name = type(getattr(model, 'module', model)).__name__
        if self.work_dir is not None and self._rank == 0:  # one run per work dir (minimm's)
            self._work_dir_lock = hold_work_dir(self, self.work_dir)
        self.timestamp = get_time_str()
        self.mode = None  # 'train' or 'val' while one of them runs
        self._hooks = []
        self._epoch = self._iter = self._inner_iter = 0
        self._max_epochs, self._max_iters = max_epochs, max_iters
        self.log_buffer = LogBuffer()

    # -- read-only views of the state (the API: hooks read each over its private attribute) ---
    @property
    def model_name(self):
        return self._model_name

    @property
    def rank(self):
        return self._rank

    @property
    def world_size(self):
        return self._world_size

    @property
    def hooks(self):  # in calling order
        return self._hooks

    @property
    def epoch(self):
        return self._epoch

    @property
    def iter(self):  # train iterations done, over all epochs
        return self._iter

    @property
    def inner_iter(self):  # the batch index within the loader being run
        return self._inner_iter

    @property
    def max_epochs(self):
        return self._max_epochs

    @property
    def max_iters(self):
        return self._max_iters

    # -- what each runner implements ---------------------------------------------------------
    @abstractmethod
    def train(self):
        """Train on a data loader: one epoch (EpochBasedRunner) or one iteration."""

    @abstractmethod
    def val(self):
        """Validate on a data loader, in the same steps as ``train``, without moving ``iter``."""

    @abstractmethod
    def run(self, data_loaders, workflow, **kwargs):
        """Run the ``(phase, count)`` entries of ``workflow`` in turn until training is done."""

    @abstractmethod
    def save_checkpoint(self, out_dir, filename_tmpl, save_optimizer=True, meta=None,
                        create_symlink=True):
        """Write the model (and optimizer) state under ``out_dir``."""

    # -- what train() and val() share ---------------------------------------------------------
    def _enter_phase(self, mode, data_loader):
        """Say which phase runs, on which loader (hooks read ``runner.mode`` and
        ``runner.data_loader``), with the model in the matching train or eval mode."""
        self.model.train(mode == 'train')  # train(False) is what eval() does
        self.mode = mode
        self.data_loader = data_loader

    @contextmanager
    def _holding(self, data_batch):
        """``runner.data_batch`` for the hooks of one iteration; gone once it ends, as in MMCV."""
        self.data_batch = data_batch
        yield data_batch
        del self.data_batch

    # -- what both run() methods do first ----------------------------------------------------
    def _check_workflow(self, data_loaders, workflow):
        """``workflow``: a list of ``(phase, count)``, with one data loader for each entry."""
        assert isinstance(data_loaders, list) and isinstance(workflow, list)
        assert all(isinstance(phase, tuple) for phase in workflow)
        assert len(workflow) == len(data_loaders), 'one data loader per workflow phase'

    def _warn_length_given_to_run(self, name):
        """``run(..., max_epochs=n)``: the old place for the length; it still works."""
        warnings.warn(f'setting {name} in run is deprecated, please set {name} in runner_config',
                      DeprecationWarning)

    def _log_start(self, workflow, max_count, unit):
        """The three lines every run starts its log with: where, the hook table, how long."""
        self.logger.info('Start running, host: %s, work_dir: %s', get_host_info(),
                         self.work_dir or 'NONE')
        self.logger.info('Hooks will be executed in the following order:\n%s',
                         self.get_hook_info(), extra=DETAIL)  # the console: on request
        check_hook_order(self._hooks, Hook.stages, self.check_hooks, self.logger)  # dataflow.py
        self.logger.info(f'workflow: %s, max: %d {unit}', workflow, max_count)

    def _record_outputs(self, outputs, step_name):
        """Keep what a step returned: ``outputs`` for the hooks, its ``log_vars`` (weighted by
        ``num_samples``) in the log buffer for the logger hooks."""
        if not isinstance(outputs, dict):
            raise TypeError(f'{step_name} must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs

    # -- lr and momentum, as logger hooks print them -----------------------------------------
    def _for_each_group(self, read, what):
        """``read(group)`` of every param group (``for_each_group``): a list, or a dict of lists
        for a dict of optimizers; MMCV's error without an optimizer."""
        if not isinstance(self.optimizer, (Optimizer, dict)):
            raise RuntimeError(f'{what} is not applicable because optimizer does not exist.')
        return for_each_group(self.optimizer, read)

    def current_lr(self):
        return self._for_each_group(lambda group: group['lr'], 'lr')

    def current_momentum(self):
        return self._for_each_group(_group_momentum, 'momentum')

    # -- hooks -------------------------------------------------------------------------------
    def register_hook(self, hook, priority='NORMAL'):
        """Add ``hook`` behind every hook whose priority value is lower or equal (so hooks of
        one priority run in the order they were registered). The hook keeps its priority as
        ``hook.priority``, which is why one instance cannot be registered twice."""
        assert isinstance(hook, Hook)
        if hasattr(hook, 'priority'):
            raise ValueError('"priority" is a reserved attribute for hooks')
        hook.priority = get_priority(priority)
        position = len(self._hooks)
        while position > 0 and self._hooks[position - 1].priority > hook.priority:
            position -= 1
        self._hooks.insert(position, hook)

    def register_hook_from_cfg(self, hook_cfg):
        """Build a hook from its config (``priority`` defaults to ``'NORMAL'``) and register it.
        The caller's dict is not changed."""
        hook = build_from_cfg({k: v for k, v in hook_cfg.items() if k != 'priority'}, HOOKS)
        self.register_hook(hook, priority=hook_cfg.get('priority', 'NORMAL'))

    def call_hook(self, fn_name):
        """Run stage ``fn_name`` (``'before_train_iter'``...) of every hook, in priority order."""
        for hook in self._hooks:
            getattr(hook, fn_name)(self)

    def get_hook_info(self):
        """A table of who runs where: for each stage that has hooks, one line per hook,
        ``(PRIORITY    ) ClassName``, in calling order (the runner logs it at the start)."""
        per_stage = {stage: [] for stage in Hook.stages}
        for hook in self._hooks:
            level = _PRIORITY_NAMES.get(hook.priority, hook.priority)
            line = f'({level:<12}) {type(hook).__name__:<35}'
            for stage in hook.get_triggered_stages():
                per_stage[stage].append(line)
        blocks = [f'{stage}:\n' + '\n'.join(lines) + '\n -------------------- '
                  for stage, lines in per_stage.items() if lines]
        return '\n'.join(blocks)

    # -- checkpoints -------------------------------------------------------------------------
    def load_checkpoint(self, filename, map_location='cpu', strict=False,
                        revise_keys=[(r'^module.', '')]):
        return load_checkpoint(self.model, filename, map_location, strict, self.logger,
                               revise_keys=revise_keys)

    def _load_optimizer_state(self, checkpoint):
        saved = checkpoint['optimizer']
        if isinstance(self.optimizer, dict):  # one state per optimizer, under the same names
            for name, optim in self.optimizer.items():
                optim.load_state_dict(saved[name])
        elif isinstance(self.optimizer, Optimizer):
            self.optimizer.load_state_dict(saved)
        else:
            raise TypeError('Optimizer should be dict or torch.optim.Optimizer '
                            f'but got {type(self.optimizer)}')

    def resume(self, checkpoint, resume_optimizer=True, map_location='default'):
        """Continue from a checkpoint: weights, ``epoch`` and ``iter``, the optimizer state, and
        ``meta``. The runner's ``meta`` is **replaced** by the checkpoint's, as in MMCV (so what
        the hooks noted in ``meta['hook_msgs']``, the best score say, comes back). ``'default'``
        puts the tensors on the current GPU, or on the CPU without one."""
        if map_location == 'default':
            on_gpu = torch.cuda.is_available()
            map_location = f'cuda:{torch.cuda.current_device()}' if on_gpu else 'cpu'
        checkpoint = self.load_checkpoint(checkpoint, map_location=map_location)
        meta = checkpoint['meta']
        self._epoch, self._iter = meta['epoch'], meta['iter']
        self.meta = meta
        if resume_optimizer and 'optimizer' in checkpoint:
            self._load_optimizer_state(checkpoint)
        self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)

    def _write_checkpoint(self, out_dir, filename, save_optimizer, meta, create_symlink):
        """What both runners' ``save_checkpoint`` do once they know the file name: the runner's
        ``meta``, then the counters, go into the file's meta; ``latest.pth`` is pointed at it."""
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
        meta.update(self.meta or {})
        # Counted as if the current epoch were done: resuming starts the next one.
        meta.update(epoch=self.epoch + 1, iter=self.iter)
        path = osp.join(out_dir, filename)
        save_checkpoint(self.model, path, optimizer=self.optimizer if save_optimizer else None,
                        meta=meta)
        if not create_symlink:
            return
        latest = osp.join(out_dir, 'latest.pth')
        if platform.system() == 'Windows':  # links need extra rights there: copy instead
            shutil.copy(path, latest)
        else:
            symlink(filename, latest)  # relative, so the folder can be moved

    # -- building the standard hooks from an MMCV config -------------------------------------
    # Each config key may be None (no such hook), a ready hook, or a dict to build one from. As
    # in MMCV, a dict is changed in place (``policy`` popped, ``type`` set), so reusing one fails.
    def _register_standard_hook(self, config, priority, build):
        if config is None:
            return
        self.register_hook(build(config) if isinstance(config, dict) else config, priority)

    def register_lr_hook(self, lr_config):
        self._register_standard_hook(lr_config, 'VERY_HIGH',
                                     lambda cfg: _hook_from_policy(cfg, 'LrUpdaterHook'))

    def register_momentum_hook(self, momentum_config):
        self._register_standard_hook(momentum_config, 'HIGH',
                                     lambda cfg: _hook_from_policy(cfg, 'MomentumUpdaterHook'))

    def register_optimizer_hook(self, optimizer_config):
        self._register_standard_hook(optimizer_config, 'ABOVE_NORMAL',
                                     lambda cfg: _hook_of_type(cfg, 'OptimizerHook'))

    def register_checkpoint_hook(self, checkpoint_config):
        self._register_standard_hook(checkpoint_config, 'NORMAL',
                                     lambda cfg: _hook_of_type(cfg, 'CheckpointHook'))

    def register_timer_hook(self, timer_config):
        # built from a copy: the default of register_training_hooks is one dict, shared by all
        self._register_standard_hook(timer_config, 'LOW',
                                     lambda cfg: build_from_cfg(copy.deepcopy(cfg), HOOKS))

    def register_logger_hooks(self, log_config):
        """``log_config = dict(interval=50, hooks=[dict(type='TextLoggerHook'), ...])``: the
        interval is each logger's default; all of them run last (VERY_LOW), in list order."""
        if log_config is None:
            return
        for hook_cfg in log_config['hooks']:
            hook = build_from_cfg(hook_cfg, HOOKS,
                                  default_args=dict(interval=log_config['interval']))
            self.register_hook(hook, priority='VERY_LOW')

    def register_custom_hooks(self, custom_config):
        """``custom_hooks``: a list of configs (each may carry its ``priority``) or hooks
        (NORMAL), or just one of them."""
        if custom_config is None:
            return
        items = custom_config if isinstance(custom_config, list) else [custom_config]
        for item in items:
            if isinstance(item, dict):
                self.register_hook_from_cfg(item)
            else:
                self.register_hook(item, priority='NORMAL')

    def register_profiler_hook(self, profiler_config):
        self._register_standard_hook(profiler_config, 'NORMAL',
                                     lambda cfg: _hook_of_type(cfg, 'ProfilerHook'))

    def register_training_hooks(self, lr_config, optimizer_config=None, checkpoint_config=None,
                                log_config=None, momentum_config=None,
                                timer_config=dict(type='IterTimerHook'),
                                custom_hooks_config=None):
        """Register the hooks an MMCV config describes, in this order: lr (VERY_HIGH), momentum
        (HIGH), optimizer (ABOVE_NORMAL), checkpoint (NORMAL), timer (LOW), loggers (VERY_LOW),
        then the custom hooks. A custom hook of the same priority as a standard one runs after
        it. As in MMCV, dict configs are changed in place."""
        self.register_lr_hook(lr_config)
        self.register_momentum_hook(momentum_config)
        self.register_optimizer_hook(optimizer_config)
        self.register_checkpoint_hook(checkpoint_config)
        self.register_timer_hook(timer_config)
        self.register_logger_hooks(log_config)
        self.register_custom_hooks(custom_hooks_config)
