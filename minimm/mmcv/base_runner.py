"""BaseRunner, as MMCV 1.7's ``mmcv/runner/base_runner.py``: what the two runners share: state
and counters, hook registration and calling, loading and resuming checkpoints,
``register_training_hooks``.

Hooks read and change the runner (``outputs``, ``log_buffer``...); even the optimizer step is a
hook, unlike MMEngine. Left out compared with MMCV 1.7: rescaling ``iter`` on resume when the number
of GPUs changed (it reads the config text stored in ``meta``).
"""
import copy
import logging
import os
import os.path as osp
import warnings
from abc import ABCMeta, abstractmethod
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from .checkpoint import load_checkpoint
from .dist_utils import get_dist_info
from .hooks import HOOKS, Hook
from .log_buffer import LogBuffer
from .parallel import is_module_wrapper
from .priority import Priority, get_priority
from .registry import build_from_cfg
from .utils import get_time_str


class BaseRunner(metaclass=ABCMeta):
    """The base of ``EpochBasedRunner`` and ``IterBasedRunner`` (they implement ``run``, ``train``,
    ``val``, ``save_checkpoint``). ``model`` has ``train_step(data_batch, optimizer)``/``val_step``
    (or give a deprecated ``batch_processor``); ``optimizer`` may be a dict of them (GANs)."""

    def __init__(self,
                 model: torch.nn.Module,
                 batch_processor: Optional[Callable] = None,
                 optimizer: Union[Dict, torch.optim.Optimizer, None] = None,
                 work_dir: Optional[str] = None,
                 logger: Optional[logging.Logger] = None,
                 meta: Optional[Dict] = None,
                 max_iters: Optional[int] = None,
                 max_epochs: Optional[int] = None) -> None:
        if batch_processor is not None:
            if not callable(batch_processor):
                raise TypeError('batch_processor must be callable, '
                                f'but got {type(batch_processor)}')
            warnings.warn('batch_processor is deprecated, please implement train_step() and '
                          'val_step() in the model instead.', DeprecationWarning)
            _model = model.module if is_module_wrapper(model) else model
            if hasattr(_model, 'train_step') or hasattr(_model, 'val_step'):
                raise RuntimeError('batch_processor and model.train_step()/model.val_step() '
                                   'cannot be both available.')
        else:
            assert hasattr(model, 'train_step')

        if isinstance(optimizer, dict):
            for name, optim in optimizer.items():
                if not isinstance(optim, Optimizer):
                    raise TypeError(f'optimizer must be a dict of torch.optim.Optimizers, '
                                    f'but optimizer["{name}"] is a {type(optim)}')
        elif not isinstance(optimizer, Optimizer) and optimizer is not None:
            raise TypeError(f'optimizer must be a torch.optim.Optimizer object or dict or None, '
                            f'but got {type(optimizer)}')

        if not isinstance(logger, logging.Logger):
            raise TypeError(f'logger must be a logging.Logger object, but got {type(logger)}')

        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f'meta must be a dict or None, but got {type(meta)}')

        self.model = model
        self.batch_processor = batch_processor
        self.optimizer = optimizer
        self.logger = logger
        self.meta = meta
        if isinstance(work_dir, str):
            self.work_dir: Optional[str] = osp.abspath(work_dir)
            os.makedirs(self.work_dir, exist_ok=True)
        elif work_dir is None:
            self.work_dir = None
        else:
            raise TypeError('"work_dir" must be a str or None')

        if hasattr(self.model, 'module'):
            self._model_name = self.model.module.__class__.__name__
        else:
            self._model_name = self.model.__class__.__name__

        self._rank, self._world_size = get_dist_info()
        self.timestamp = get_time_str()
        self.mode: Optional[str] = None
        self._hooks: List[Hook] = []
        self._epoch = 0
        self._iter = 0
        self._inner_iter = 0

        if max_epochs is not None and max_iters is not None:
            raise ValueError('Only one of `max_epochs` or `max_iters` can be set.')

        self._max_epochs = max_epochs
        self._max_iters = max_iters
        self.log_buffer = LogBuffer()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    @property
    def hooks(self) -> List[Hook]:
        return self._hooks

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def iter(self) -> int:
        return self._iter

    @property
    def inner_iter(self) -> int:
        return self._inner_iter

    @property
    def max_epochs(self):
        return self._max_epochs

    @property
    def max_iters(self):
        return self._max_iters

    @abstractmethod
    def train(self):
        pass

    @abstractmethod
    def val(self):
        pass

    @abstractmethod
    def run(self, data_loaders: List[DataLoader], workflow: List[Tuple[str, int]],
            **kwargs) -> Any:
        pass

    @abstractmethod
    def save_checkpoint(self, out_dir: str, filename_tmpl: str, save_optimizer: bool = True,
                        meta: Optional[Dict] = None, create_symlink: bool = True) -> None:
        pass

    def current_lr(self) -> Union[List[float], Dict[str, List[float]]]:
        """Every param group's lr: a list, or a dict of lists for a dict of optimizers."""
        lr: Union[List[float], Dict[str, List[float]]]
        if isinstance(self.optimizer, torch.optim.Optimizer):
            lr = [group['lr'] for group in self.optimizer.param_groups]
        elif isinstance(self.optimizer, dict):
            lr = dict()
            for name, optim in self.optimizer.items():
                lr[name] = [group['lr'] for group in optim.param_groups]
        else:
            raise RuntimeError('lr is not applicable because optimizer does not exist.')
        return lr

    def current_momentum(self) -> Union[List[float], Dict[str, List[float]]]:
        """Every param group's ``momentum``, else ``betas[0]`` (Adam-like), else 0."""

        def _get_momentum(optimizer):
            momentums = []
            for group in optimizer.param_groups:
                if 'momentum' in group.keys():
                    momentums.append(group['momentum'])
                elif 'betas' in group.keys():
                    momentums.append(group['betas'][0])
                else:
                    momentums.append(0)
            return momentums

        if self.optimizer is None:
            raise RuntimeError('momentum is not applicable because optimizer does not exist.')
        elif isinstance(self.optimizer, torch.optim.Optimizer):
            momentums = _get_momentum(self.optimizer)
        elif isinstance(self.optimizer, dict):
            momentums = dict()
            for name, optim in self.optimizer.items():
                momentums[name] = _get_momentum(optim)
        return momentums

    def register_hook(self, hook: Hook, priority: Union[int, str, Priority] = 'NORMAL') -> None:
        """Insert ``hook`` after every registered hook of lower or equal priority value (hooks of
        one priority run in registration order). ``priority`` becomes the hook's attribute."""
        assert isinstance(hook, Hook)
        if hasattr(hook, 'priority'):
            raise ValueError('"priority" is a reserved attribute for hooks')
        priority = get_priority(priority)
        hook.priority = priority
        inserted = False
        for i in range(len(self._hooks) - 1, -1, -1):
            if priority >= self._hooks[i].priority:
                self._hooks.insert(i + 1, hook)
                inserted = True
                break
        if not inserted:
            self._hooks.insert(0, hook)

    def register_hook_from_cfg(self, hook_cfg: Dict) -> None:
        """Build a hook from ``hook_cfg`` (``type``, optional ``priority``) and register it."""
        hook_cfg = hook_cfg.copy()
        priority = hook_cfg.pop('priority', 'NORMAL')
        hook = build_from_cfg(hook_cfg, HOOKS)
        self.register_hook(hook, priority=priority)

    def call_hook(self, fn_name: str) -> None:
        """Call ``fn_name`` (a stage, such as ``'before_train_epoch'``) of every hook, in order."""
        for hook in self._hooks:
            getattr(hook, fn_name)(self)

    def get_hook_info(self) -> str:
        """Per stage, the hooks it calls in order, one ``(PRIORITY    ) ClassName`` line each."""
        stage_hook_map: Dict[str, list] = {stage: [] for stage in Hook.stages}
        for hook in self.hooks:
            try:
                priority = Priority(hook.priority).name
            except ValueError:
                priority = hook.priority
            classname = hook.__class__.__name__
            hook_info = f'({priority:<12}) {classname:<35}'
            for trigger_stage in hook.get_triggered_stages():
                stage_hook_map[trigger_stage].append(hook_info)

        stage_hook_infos = []
        for stage in Hook.stages:
            hook_infos = stage_hook_map[stage]
            if len(hook_infos) > 0:
                info = f'{stage}:\n'
                info += '\n'.join(hook_infos)
                info += '\n -------------------- '
                stage_hook_infos.append(info)
        return '\n'.join(stage_hook_infos)

    def load_checkpoint(self, filename: str, map_location: Union[str, Callable] = 'cpu',
                        strict: bool = False,
                        revise_keys: List = [(r'^module.', '')]) -> Union[Dict, OrderedDict]:
        return load_checkpoint(self.model, filename, map_location, strict, self.logger,
                               revise_keys=revise_keys)

    def resume(self, checkpoint: str, resume_optimizer: bool = True,
               map_location: Union[str, Callable] = 'default') -> None:
        """Restore weights, optimizer(s), ``epoch``/``iter`` and ``meta`` (the runner's ``meta``
        is **replaced** by the checkpoint's; ``inner_iter`` is untouched). ``'default'``
        maps the tensors to the current GPU, or keeps them on the CPU without one."""
        if map_location == 'default':
            if torch.cuda.is_available():
                device_id = torch.cuda.current_device()
                checkpoint = self.load_checkpoint(checkpoint, map_location=f'cuda:{device_id}')
            else:
                checkpoint = self.load_checkpoint(checkpoint)
        else:
            checkpoint = self.load_checkpoint(checkpoint, map_location=map_location)

        self._epoch = checkpoint['meta']['epoch']
        self._iter = checkpoint['meta']['iter']
        if self.meta is None:
            self.meta = {}
        self.meta.setdefault('hook_msgs', {})
        # `last_ckpt`, `best_score`, `best_ckpt`... of the hooks
        self.meta['hook_msgs'].update(checkpoint['meta'].get('hook_msgs', {}))
        self.meta = checkpoint['meta']

        if 'optimizer' in checkpoint and resume_optimizer:
            if isinstance(self.optimizer, Optimizer):
                self.optimizer.load_state_dict(checkpoint['optimizer'])
            elif isinstance(self.optimizer, dict):
                for k in self.optimizer.keys():
                    self.optimizer[k].load_state_dict(checkpoint['optimizer'][k])
            else:
                raise TypeError('Optimizer should be dict or torch.optim.Optimizer '
                                f'but got {type(self.optimizer)}')

        self.logger.info('resumed epoch %d, iter %d', self.epoch, self.iter)

    # A dict lr_config/momentum_config names its hook by ``policy``: an all-lowercase policy is
    # title-cased ('step' -> 'StepLrUpdaterHook'), any other is kept ('CosineAnnealing').
    def register_lr_hook(self, lr_config: Union[Dict, Hook, None]) -> None:
        if lr_config is None:
            return
        elif isinstance(lr_config, dict):
            assert 'policy' in lr_config
            policy_type = lr_config.pop('policy')
            if policy_type == policy_type.lower():
                policy_type = policy_type.title()
            hook_type = policy_type + 'LrUpdaterHook'
            lr_config['type'] = hook_type
            hook = build_from_cfg(lr_config, HOOKS)
        else:
            hook = lr_config
        self.register_hook(hook, priority='VERY_HIGH')

    def register_momentum_hook(self, momentum_config: Union[Dict, Hook, None]) -> None:
        if momentum_config is None:
            return
        if isinstance(momentum_config, dict):
            assert 'policy' in momentum_config
            policy_type = momentum_config.pop('policy')
            if policy_type == policy_type.lower():
                policy_type = policy_type.title()
            hook_type = policy_type + 'MomentumUpdaterHook'
            momentum_config['type'] = hook_type
            hook = build_from_cfg(momentum_config, HOOKS)
        else:
            hook = momentum_config
        self.register_hook(hook, priority='HIGH')

    def register_optimizer_hook(self, optimizer_config: Union[Dict, Hook, None]) -> None:
        if optimizer_config is None:
            return
        if isinstance(optimizer_config, dict):
            optimizer_config.setdefault('type', 'OptimizerHook')
            hook = build_from_cfg(optimizer_config, HOOKS)
        else:
            hook = optimizer_config
        self.register_hook(hook, priority='ABOVE_NORMAL')

    def register_checkpoint_hook(self, checkpoint_config: Union[Dict, Hook, None]) -> None:
        if checkpoint_config is None:
            return
        if isinstance(checkpoint_config, dict):
            checkpoint_config.setdefault('type', 'CheckpointHook')
            hook = build_from_cfg(checkpoint_config, HOOKS)
        else:
            hook = checkpoint_config
        self.register_hook(hook, priority='NORMAL')

    def register_logger_hooks(self, log_config: Optional[Dict]) -> None:
        if log_config is None:
            return
        log_interval = log_config['interval']
        for info in log_config['hooks']:
            logger_hook = build_from_cfg(info, HOOKS, default_args=dict(interval=log_interval))
            self.register_hook(logger_hook, priority='VERY_LOW')

    def register_timer_hook(self, timer_config: Union[Dict, Hook, None]) -> None:
        if timer_config is None:
            return
        if isinstance(timer_config, dict):
            timer_config_ = copy.deepcopy(timer_config)
            hook = build_from_cfg(timer_config_, HOOKS)
        else:
            hook = timer_config
        self.register_hook(hook, priority='LOW')

    def register_custom_hooks(self, custom_config: Union[List, Dict, Hook, None]) -> None:
        if custom_config is None:
            return
        if not isinstance(custom_config, list):
            custom_config = [custom_config]
        for item in custom_config:
            if isinstance(item, dict):
                self.register_hook_from_cfg(item)
            else:
                self.register_hook(item, priority='NORMAL')

    def register_profiler_hook(self, profiler_config: Union[Dict, Hook, None]) -> None:
        if profiler_config is None:
            return
        if isinstance(profiler_config, dict):
            profiler_config.setdefault('type', 'ProfilerHook')
            hook = build_from_cfg(profiler_config, HOOKS)
        else:
            hook = profiler_config
        self.register_hook(hook)

    def register_training_hooks(self,
                                lr_config: Union[Dict, Hook, None],
                                optimizer_config: Union[Dict, Hook, None] = None,
                                checkpoint_config: Union[Dict, Hook, None] = None,
                                log_config: Optional[Dict] = None,
                                momentum_config: Union[Dict, Hook, None] = None,
                                timer_config: Union[Dict, Hook] = dict(type='IterTimerHook'),
                                custom_hooks_config: Union[List, Dict, Hook, None] = None
                                ) -> None:
        """Register lr (VERY_HIGH), momentum (HIGH), optimizer (ABOVE_NORMAL), checkpoint
        (NORMAL), timer (LOW), logger (VERY_LOW) hooks, then the custom ones (NORMAL unless they
        say otherwise), as MMCV: dict configs are changed in place."""
        self.register_lr_hook(lr_config)
        self.register_momentum_hook(momentum_config)
        self.register_optimizer_hook(optimizer_config)
        self.register_checkpoint_hook(checkpoint_config)
        self.register_timer_hook(timer_config)
        self.register_logger_hooks(log_config)
        self.register_custom_hooks(custom_hooks_config)
