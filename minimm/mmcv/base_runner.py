"""BaseRunner: what MMCV 1.x's two runners share: state, the workflow loop, hooks, checkpoints.

Hooks read and change the runner (``outputs``, ``log_buffer``...); even the optimizer step is a
hook, unlike MMEngine. As MMCV 1.7.2, quirks included. Left out: rescaling ``iter`` on resume when
the number of GPUs changed, and file backends.
"""
import copy
import getpass
import logging
import os
import os.path as osp
import shutil
import socket
import time
import warnings
from typing import Callable, Dict, List, Optional, Union

import torch

from minimm.dist import get_dist_info
from minimm.runner.priority import get_priority, priority_name

from .builder import build_from_cfg
from .checkpoint import load_checkpoint, save_checkpoint
from .hooks.hook import HOOKS, Hook
from .log_buffer import LogBuffer


class BaseRunner:
    """The base of ``EpochBasedRunner`` and ``IterBasedRunner`` (as MMCV 1.7's): ``model`` has
    ``train_step(data_batch, optimizer)``/``val_step``; ``optimizer`` may be a dict (GANs)."""

    _phase_name = 'a workflow'  # how the error for an unknown workflow mode names a phase

    def __init__(self, model, batch_processor=None, optimizer=None, work_dir=None, logger=None,
                 meta=None, max_iters=None, max_epochs=None):
        module = model.module if hasattr(model, 'module') else model
        if batch_processor is not None:
            if not callable(batch_processor):
                raise TypeError('batch_processor must be callable, but got '
                                f'{type(batch_processor)}')
            warnings.warn('batch_processor is deprecated; implement train_step() in the model',
                          DeprecationWarning)
            if hasattr(module, 'train_step') or hasattr(module, 'val_step'):
                raise RuntimeError('batch_processor and model.train_step()/model.val_step() '
                                   'cannot be both available.')
        else:
            assert hasattr(model, 'train_step')
        optimizers = optimizer.values() if isinstance(optimizer, dict) else [optimizer]
        if optimizer is not None and \
                not all(isinstance(o, torch.optim.Optimizer) for o in optimizers):
            raise TypeError('optimizer must be an Optimizer, a dict of them or None, '
                            f'but got {type(optimizer)}')
        if not isinstance(logger, logging.Logger):
            raise TypeError(f'logger must be a logging.Logger object, but got {type(logger)}')
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f'meta must be a dict or None, but got {type(meta)}')
        if isinstance(work_dir, str):
            work_dir = osp.abspath(work_dir)
            os.makedirs(work_dir, exist_ok=True)
        elif work_dir is not None:
            raise TypeError('"work_dir" must be a str or None')
        if max_epochs is not None and max_iters is not None:
            raise ValueError('Only one of `max_epochs` or `max_iters` can be set.')
        self.model, self.batch_processor, self.optimizer = model, batch_processor, optimizer
        self.logger, self.meta, self.work_dir = logger, meta, work_dir
        self._model_name = type(module).__name__
        self._rank, self._world_size = get_dist_info()
        self.timestamp = time.strftime('%Y%m%d_%H%M%S', time.localtime())
        self.mode = None
        self._hooks: List[Hook] = []
        self._epoch = self._iter = self._inner_iter = 0
        self._max_epochs, self._max_iters = max_epochs, max_iters
        self.log_buffer = LogBuffer()

    model_name = property(lambda self: self._model_name)
    rank = property(lambda self: self._rank)
    world_size = property(lambda self: self._world_size)
    hooks = property(lambda self: self._hooks)
    epoch = property(lambda self: self._epoch)
    iter = property(lambda self: self._iter)
    inner_iter = property(lambda self: self._inner_iter)
    max_epochs = property(lambda self: self._max_epochs)
    max_iters = property(lambda self: self._max_iters)

    def _per_group(self, value_of) -> Union[List, Dict[str, List]]:
        """``value_of(group)`` for every param group: a list, or a dict of lists per optimizer."""
        if isinstance(self.optimizer, torch.optim.Optimizer):
            return [value_of(group) for group in self.optimizer.param_groups]
        if isinstance(self.optimizer, dict):
            return {name: [value_of(group) for group in optim.param_groups]
                    for name, optim in self.optimizer.items()}
        raise RuntimeError('lr is not applicable because optimizer does not exist.')

    def current_lr(self) -> Union[List[float], Dict[str, List[float]]]:
        return self._per_group(lambda group: group['lr'])

    def current_momentum(self) -> Union[List[float], Dict[str, List[float]]]:
        """``momentum``, else ``betas[0]`` (Adam-like), else 0, for every param group."""
        return self._per_group(lambda group: group['momentum'] if 'momentum' in group
                               else group['betas'][0] if 'betas' in group else 0)

    # Running ----------------------------------------------------------------------------------
    def _start_run(self, data_loaders, workflow, unit: str, max_value) -> None:
        """``run``'s checks and first log lines; ``max_value`` is ``run``'s (deprecated)
        ``max_epochs`` or ``max_iters`` argument, as ``unit`` says."""
        assert isinstance(data_loaders, list)
        assert isinstance(workflow, list) and all(isinstance(flow, tuple) for flow in workflow)
        assert len(data_loaders) == len(workflow)
        if max_value is not None:
            warnings.warn(f'setting max_{unit} in run is deprecated, please set max_{unit} in '
                          'runner_config', DeprecationWarning)
            setattr(self, f'_max_{unit}', max_value)
        max_value = getattr(self, f'max_{unit}')
        assert max_value is not None, f'max_{unit} must be specified during instantiation'
        work_dir = self.work_dir if self.work_dir is not None else 'NONE'
        host = f'{getpass.getuser()}@{socket.gethostname()}'
        self.logger.info('Start running, host: %s, work_dir: %s', host, work_dir)
        self.logger.info('Hooks will be executed in the following order:\n%s', self.get_hook_info())
        self.logger.info('workflow: %s, max: %d %s', workflow, max_value, unit)

    def _run_workflow(self, loaders, workflow, done: Callable[[], bool], **kwargs) -> None:
        """Until ``done()``: for each ``(mode, n)`` of the workflow, call ``self.<mode>(loader)``
        ``n`` times; a train phase stops early once done, a val phase never does (as MMCV 1.7)."""
        while not done():
            for loader, (mode, times) in zip(loaders, workflow):
                self._start_phase()
                if not isinstance(mode, str):
                    raise TypeError(f'mode in workflow must be a str, but got {type(mode)}')
                if not hasattr(self, mode):
                    raise ValueError(f'runner has no method named "{mode}" to run '
                                     f'{self._phase_name}')
                for _ in range(times):
                    if mode == 'train' and done():
                        break
                    getattr(self, mode)(loader, **kwargs)

    def _start_phase(self) -> None:
        """Called before each workflow phase (IterBasedRunner restarts ``inner_iter`` there)."""

    def _set_outputs(self, outputs, returned_by: str) -> None:
        """Keep a step's result as ``self.outputs``; its ``log_vars`` go to the log buffer."""
        if not isinstance(outputs, dict):
            raise TypeError(f'{returned_by} must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs

    # Hooks -------------------------------------------------------------------------------------
    def register_hook(self, hook: Hook, priority='NORMAL') -> None:
        """Insert ``hook`` after every registered hook of lower or equal priority value."""
        assert isinstance(hook, Hook)
        if hasattr(hook, 'priority'):
            raise ValueError('"priority" is a reserved attribute for hooks')
        hook.priority = get_priority(priority)
        index = len(self._hooks)
        while index and hook.priority < self._hooks[index - 1].priority:
            index -= 1
        self._hooks.insert(index, hook)

    def register_hook_from_cfg(self, hook_cfg: dict) -> None:
        hook_cfg = hook_cfg.copy()
        priority = hook_cfg.pop('priority', 'NORMAL')
        self.register_hook(build_from_cfg(hook_cfg, HOOKS), priority=priority)

    def call_hook(self, fn_name: str) -> None:
        for hook in self._hooks:
            getattr(hook, fn_name)(self)

    def get_hook_info(self) -> str:
        """Per stage, the hooks it calls in order, one ``(PRIORITY    ) ClassName`` line each."""
        lines = {stage: [] for stage in Hook.stages}
        for hook in self._hooks:
            for stage in hook.get_triggered_stages():
                lines[stage].append(f'({priority_name(hook.priority):<12}) '
                                    f'{type(hook).__name__:<35}')
        return '\n'.join(f'{stage}:\n' + '\n'.join(stage_lines) + '\n -------------------- '
                         for stage, stage_lines in lines.items() if stage_lines)

    # Checkpoints -------------------------------------------------------------------------------
    def load_checkpoint(self, filename: str, map_location='cpu', strict: bool = False,
                        revise_keys=((r'^module.', ''), )) -> dict:
        return load_checkpoint(self.model, filename, map_location, strict, self.logger,
                               revise_keys=revise_keys)

    def _load_for_resume(self, checkpoint, map_location, resume_optimizer: bool) -> dict:
        if map_location == 'default':
            map_location = (f'cuda:{torch.cuda.current_device()}' if torch.cuda.is_available()
                            else 'cpu')
        checkpoint = self.load_checkpoint(checkpoint, map_location=map_location)
        if 'optimizer' in checkpoint and resume_optimizer:
            if isinstance(self.optimizer, torch.optim.Optimizer):
                self.optimizer.load_state_dict(checkpoint['optimizer'])
            elif isinstance(self.optimizer, dict):
                for name, optim in self.optimizer.items():
                    optim.load_state_dict(checkpoint['optimizer'][name])
            else:
                raise TypeError(f'Optimizer should be dict or torch.optim.Optimizer but got '
                                f'{type(self.optimizer)}')
        self._epoch, self._iter = checkpoint['meta']['epoch'], checkpoint['meta']['iter']
        return checkpoint

    def _save_checkpoint(self, out_dir: str, filename: str, save_optimizer: bool, meta,
                         create_symlink: bool) -> None:
        """What both runners' ``save_checkpoint`` do once the file name is known (as MMCV 1.7):
        ``meta`` gets the runner's meta, ``epoch + 1`` and ``iter``; ``latest.pth`` links to it."""
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
        if self.meta is not None:
            meta.update(self.meta)
        meta.update(epoch=self.epoch + 1, iter=self.iter)
        optimizer = self.optimizer if save_optimizer else None
        save_checkpoint(self.model, osp.join(out_dir, filename), optimizer=optimizer, meta=meta)
        if create_symlink:
            latest = osp.join(out_dir, 'latest.pth')
            if osp.lexists(latest):
                os.remove(latest)
            if os.name == 'nt':  # a copy where symlinks need privileges
                shutil.copy(osp.join(out_dir, filename), latest)
            else:
                os.symlink(filename, latest)

    def resume(self, checkpoint: str, resume_optimizer: bool = True,
               map_location='default') -> None:
        """Restore weights, optimizer(s), ``epoch``/``iter`` and ``meta`` (as MMCV 1.7, the
        runner's ``meta`` is **replaced** by the checkpoint's; ``inner_iter`` is untouched)."""
        checkpoint = self._load_for_resume(checkpoint, map_location, resume_optimizer)
        self.meta = checkpoint['meta']
        self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)

    # register_training_hooks and its helpers -------------------------------------------------
    def _register(self, cfg, priority, default_type: Optional[str] = None) -> None:
        """Build ``cfg`` (a dict, mutated as MMCV does) or take it as a hook; register it."""
        if cfg is None:
            return
        if isinstance(cfg, dict):
            if default_type is not None:
                cfg.setdefault('type', default_type)
            cfg = build_from_cfg(cfg, HOOKS)
        self.register_hook(cfg, priority=priority)

    @staticmethod
    def _policy_to_type(cfg, suffix: str):
        """MMCV's naming rule: an all-lowercase policy is title-cased ('step' -> 'Step',
        'cosineannealing' -> 'Cosineannealing'!), any other is kept; then ``suffix`` is added."""
        if isinstance(cfg, dict):
            assert 'policy' in cfg
            policy = cfg.pop('policy')
            cfg['type'] = (policy.title() if policy == policy.lower() else policy) + suffix
        return cfg

    def register_lr_hook(self, lr_config) -> None:
        self._register(self._policy_to_type(lr_config, 'LrUpdaterHook'), 'VERY_HIGH')

    def register_momentum_hook(self, momentum_config) -> None:
        self._register(self._policy_to_type(momentum_config, 'MomentumUpdaterHook'), 'HIGH')

    def register_optimizer_hook(self, optimizer_config) -> None:
        self._register(optimizer_config, 'ABOVE_NORMAL', 'OptimizerHook')

    def register_checkpoint_hook(self, checkpoint_config) -> None:
        self._register(checkpoint_config, 'NORMAL', 'CheckpointHook')

    def register_timer_hook(self, timer_config) -> None:
        if isinstance(timer_config, dict):
            timer_config = copy.deepcopy(timer_config)
        self._register(timer_config, 'LOW')

    def register_logger_hooks(self, log_config) -> None:
        if log_config is None:
            return
        for info in log_config['hooks']:
            hook = build_from_cfg(info, HOOKS, default_args=dict(interval=log_config['interval']))
            self.register_hook(hook, priority='VERY_LOW')

    def register_custom_hooks(self, custom_config) -> None:
        if custom_config is None:
            return
        for item in custom_config if isinstance(custom_config, list) else [custom_config]:
            if isinstance(item, dict):
                self.register_hook_from_cfg(item)
            else:
                self.register_hook(item, priority='NORMAL')

    def register_profiler_hook(self, profiler_config) -> None:
        self._register(profiler_config, 'NORMAL', 'ProfilerHook')

    def register_training_hooks(self, lr_config, optimizer_config=None, checkpoint_config=None,
                                log_config=None, momentum_config=None,
                                timer_config=dict(type='IterTimerHook'),
                                custom_hooks_config=None) -> None:
        """Register the default training hooks, in MMCV's order: lr (VERY_HIGH), momentum
        (HIGH), optimizer (ABOVE_NORMAL), checkpoint (NORMAL), timer (LOW), loggers (VERY_LOW),
        then the custom hooks (NORMAL unless they say otherwise)."""
        self.register_lr_hook(lr_config)
        self.register_momentum_hook(momentum_config)
        self.register_optimizer_hook(optimizer_config)
        self.register_checkpoint_hook(checkpoint_config)
        self.register_timer_hook(timer_config)
        self.register_logger_hooks(log_config)
        self.register_custom_hooks(custom_hooks_config)
