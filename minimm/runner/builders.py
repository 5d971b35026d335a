"""Building from config: how the Runner turns config dicts into its parts.

Every ``Runner`` argument may be a built object or a config dict. The methods here are MMEngine
0.10's ``Runner.build_*`` with MMEngine's signatures: each passes a built object through and
builds a dict through a root registry (``MODELS``, ``MODEL_WRAPPERS``, ``LOOPS``, ``EVALUATOR``,
``VISUALIZERS``, ``LOG_PROCESSORS``...) or the builders of the ``dataset`` and ``optim``
packages. The Runner builds its logger, MessageHub, visualizer, log processor and model in
``__init__``, and the loops, optim wrapper and schedulers lazily, in ``train()``/``val()``/
``test()``, so a runner for testing never builds an optimizer.

``scale_lr`` (``auto_scale_lr``) sits here too, beside the builder whose result it adjusts.
Left out compared with MMEngine: ``OptimWrapperDict`` (several optimizers). Different:
``build_logger``/``build_message_hub``/``build_visualizer`` make a new instance under the name
(MMEngine's ``get_instance`` returns an older one of the same name), and no config dict passed in
is changed (MMEngine fills in ``name``, ``type``... in place).
"""
import copy
import os.path as osp
from typing import Dict, List, Optional, Union

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from ..dataset import build_dataloader
from ..evaluator import Evaluator
from ..logging import LogProcessor, MessageHub, MMLogger, Visualizer
from ..model import (MMDistributedDataParallel, convert_sync_batchnorm, is_model_wrapper,
                     revert_sync_batchnorm)
from ..optim import OptimWrapper, build_optim_wrapper
from ..optim.scheduler import build_param_scheduler
from ..checkpoint import unwrap_model
from ..registry import EVALUATOR, LOG_PROCESSORS, LOOPS, MODEL_WRAPPERS, MODELS, VISUALIZERS
from .base_loop import BaseLoop
from .checks import check_train_cfg, train_loop_kind
from .loops import EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop


class BuildMixin:
    """The Runner's ``build_*`` methods."""

    @property
    def train_loop_built(self) -> bool:
        """Whether the train loop is built. Unlike reading ``train_loop``, asking never builds
        it, so hooks can ask during a val-only or test-only run (MMEngine reads ``_train_loop``)."""
        return isinstance(self._train_loop, BaseLoop)

    def build_logger(self, log_level: Union[int, str] = 'INFO', log_file: Optional[str] = None,
                     **kwargs) -> MMLogger:
        """The run's MMLogger, named after the experiment, writing ``{log_dir}/{timestamp}.log``."""
        if log_file is None:
            log_file = osp.join(self._log_dir, f'{self.timestamp}.log')
        log_cfg = dict(log_level=log_level, log_file=log_file, **kwargs)
        log_cfg.setdefault('name', self._experiment_name)
        log_cfg.setdefault('file_mode', 'a')
        return MMLogger.create_instance(**log_cfg)

    def build_message_hub(self, message_hub: Optional[Dict] = None) -> MessageHub:
        """The run's MessageHub, named after the experiment unless ``message_hub`` names it."""
        if message_hub is None:
            message_hub = dict()
        elif not isinstance(message_hub, dict):
            raise TypeError(f'message_hub should be dict or None, but got {message_hub}')
        message_hub = dict(message_hub)
        message_hub.setdefault('name', self._experiment_name)
        return MessageHub.create_instance(**message_hub)

    def build_visualizer(self, visualizer: Union[Visualizer, Dict, None] = None) -> Visualizer:
        """The run's Visualizer: ``visualizer`` itself, built from VISUALIZERS (``type``
        defaults to ``'Visualizer'``), or by default one writing to a LocalVisBackend."""
        if isinstance(visualizer, Visualizer):
            return visualizer
        if visualizer is None:
            visualizer = dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend')])
        elif not isinstance(visualizer, dict):
            raise TypeError('visualizer should be Visualizer object, a dict or None, '
                            f'but got {visualizer}')
        visualizer = dict(visualizer)
        visualizer.setdefault('type', 'Visualizer')
        visualizer.setdefault('name', self._experiment_name)
        visualizer.setdefault('save_dir', self._log_dir)
        return VISUALIZERS.build(visualizer)

    def build_log_processor(self, log_processor: Union[LogProcessor, Dict]) -> LogProcessor:
        """A LogProcessor from LOG_PROCESSORS (``type`` defaults to ``'LogProcessor'``)."""
        if isinstance(log_processor, LogProcessor):
            return log_processor
        if not isinstance(log_processor, dict):
            raise TypeError('log_processor should be a LogProcessor object or dict, but got '
                            f'{log_processor}')
        cfg = dict(log_processor)
        cfg.setdefault('type', 'LogProcessor')
        return LOG_PROCESSORS.build(cfg)

    def build_model(self, model: Union[nn.Module, Dict]) -> nn.Module:
        if isinstance(model, nn.Module):
            return model
        if not isinstance(model, dict):
            raise TypeError(f'model should be a nn.Module object or dict, but got {model}')
        return MODELS.build(model)

    def wrap_model(self, model_wrapper_cfg: Optional[Dict], model: nn.Module) -> nn.Module:
        """Move the model to the device. Not distributed: turn SyncBatchNorm layers back into
        BatchNorm. Distributed: apply ``cfg.sync_bn``, then wrap the model in
        ``MMDistributedDataParallel``, or in the MODEL_WRAPPERS type ``model_wrapper_cfg`` names."""
        if is_model_wrapper(model):
            if model_wrapper_cfg is not None:
                raise TypeError('model has been wrapped and "model_wrapper_cfg" should be None, '
                                f'but got {model_wrapper_cfg}')
            return model
        device = torch.device('cuda', torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device('cpu')
        model = model.to(device)
        if not self.distributed:
            self.logger.info('Distributed training is not used, all SyncBatchNorm (SyncBN) '
                             'layers in the model will be automatically reverted to BatchNormXd '
                             'layers if they are used.', extra=self._details)
            return revert_sync_batchnorm(model)
        if self.cfg.get('sync_bn') is not None:
            model = convert_sync_batchnorm(model, self.cfg.get('sync_bn'))
        device_ids = [device.index] if device.type == 'cuda' else None
        if model_wrapper_cfg is None:
            return MMDistributedDataParallel(
                module=model, device_ids=device_ids, broadcast_buffers=False,
                find_unused_parameters=self.cfg.get('find_unused_parameters', False))
        cfg = dict(model_wrapper_cfg)
        cfg.setdefault('type', 'MMDistributedDataParallel')
        wrapper_cls = MODEL_WRAPPERS.get(cfg['type'])
        default_args = dict(module=model)
        if isinstance(wrapper_cls, type) and \
                issubclass(wrapper_cls, torch.nn.parallel.DistributedDataParallel):
            default_args['device_ids'] = device_ids
        return MODEL_WRAPPERS.build(cfg, default_args=default_args)

    def build_dataloader(self, dataloader, seed: Optional[int] = None,
                         diff_rank_seed: Optional[bool] = None) -> DataLoader:
        """``seed`` and ``diff_rank_seed`` default to the runner's ``randomness`` settings, which
        the builder reads itself (MMEngine's loops read them from the runner and pass them in)."""
        if seed is None:
            seed = self.seed
        if diff_rank_seed is None:
            diff_rank_seed = self._randomness_cfg.get('diff_rank_seed', False)
        return build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)

    def build_evaluator(self, evaluator: Union[Dict, List, Evaluator]) -> Evaluator:
        """An Evaluator; a dict with ``metrics`` builds a custom one from EVALUATOR (``type``
        defaults to ``'Evaluator'``), any other dict or list is the metrics of an Evaluator."""
        if isinstance(evaluator, Evaluator):
            return evaluator
        if isinstance(evaluator, dict) and 'metrics' in evaluator:
            cfg = dict(evaluator)
            cfg.setdefault('type', 'Evaluator')
            return EVALUATOR.build(cfg)
        if isinstance(evaluator, (dict, list)):
            return Evaluator(evaluator)
        raise TypeError('evaluator should be one of dict, list of dict, and Evaluator, but got '
                        f'{evaluator}')

    def build_optim_wrapper(self, optim_wrapper) -> OptimWrapper:
        return build_optim_wrapper(unwrap_model(self.model), optim_wrapper)

    def scale_lr(self, optim_wrapper: OptimWrapper, auto_scale_lr: Optional[dict] = None) -> None:
        """Multiply every group's lr by (world size x batch size) / ``base_batch_size`` when
        ``auto_scale_lr`` is enabled: the linear scaling rule, so a config tuned for 8 GPUs x 2
        images keeps its effective lr on another number of GPUs."""
        if not auto_scale_lr or not auto_scale_lr.get('enable', False):
            return
        base = auto_scale_lr.get('base_batch_size')
        if not isinstance(base, (int, float)) or isinstance(base, bool) or base <= 0:
            raise AssertionError('auto_scale_lr needs a positive `base_batch_size` when enabled, '
                                 f'but got {auto_scale_lr}')
        real = self.world_size * self.train_dataloader.batch_size
        for group in optim_wrapper.param_groups:
            group['lr'] *= real / base
        self.logger.info(f'auto_scale_lr: the lr is scaled by {real}/{base}: the batch size is '
                         f'{real} ({self.world_size} processes), base_batch_size is {base}')

    def build_param_scheduler(self, scheduler) -> list:
        """Schedulers (a built one, a config, or a list of either) for ``self.optim_wrapper``.

        As MMEngine, a scheduler without ``end`` runs to the end of training (``max_epochs`` or
        ``max_iters`` by its ``by_epoch``), and ``convert_to_iter_based`` uses the train
        dataloader's length as the epoch length. Built schedulers are passed through, so
        calling this twice (``resume`` before ``train``) builds each scheduler once.
        """
        if not isinstance(self.optim_wrapper, OptimWrapper):
            raise RuntimeError('`build_optim_wrapper` should be called before '
                               '`build_param_scheduler` because the latter depends on the former')
        built = []
        for item in scheduler if isinstance(scheduler, (list, tuple)) else [scheduler]:
            if not isinstance(item, dict):
                built.append(item)
                continue
            item = copy.deepcopy(item)
            if self.train_loop_built:
                item.setdefault('end', self.max_epochs if item.get('by_epoch', True)
                                else self.max_iters)
            built.append(build_param_scheduler(item, self.optim_wrapper,
                                               epoch_length=len(self.train_dataloader)))
        return built

    def build_train_loop(self, loop: Union[BaseLoop, Dict]) -> BaseLoop:
        if isinstance(loop, BaseLoop):
            return loop
        if not isinstance(loop, dict):
            raise TypeError(f'train_loop should be a Loop object or dict, but got {loop}')
        cfg = dict(loop)
        if 'type' in cfg and 'by_epoch' in cfg:
            raise RuntimeError('Only one of `type` or `by_epoch` can exist in `loop_cfg`.')
        if train_loop_kind(cfg) is not None:  # a custom loop may read these keys its own way
            check_train_cfg(cfg, self.logger)
        if 'type' in cfg:
            return LOOPS.build(cfg, default_args=dict(runner=self,
                                                   dataloader=self._train_dataloader))
        if 'by_epoch' not in cfg:
            raise KeyError('train_cfg needs `by_epoch` (True: max_epochs, False: max_iters) '
                           'or a loop `type`')
        by_epoch = cfg.pop('by_epoch')
        wanted, other = ('max_epochs', 'max_iters') if by_epoch else ('max_iters', 'max_epochs')
        if wanted not in cfg or other in cfg:
            raise KeyError(f'train_cfg with by_epoch={by_epoch} needs `{wanted}` and no '
                           f'`{other}` (set exactly one of max_epochs and max_iters, with '
                           f'by_epoch=True for max_epochs), but got keys {sorted(loop)}')
        loop_cls = EpochBasedTrainLoop if by_epoch else IterBasedTrainLoop
        return loop_cls(runner=self, dataloader=self._train_dataloader, **cfg)

    def build_val_loop(self, loop: Union[BaseLoop, Dict]) -> BaseLoop:
        return self._build_eval_loop(loop, 'val', self._val_dataloader, self._val_evaluator)

    def build_test_loop(self, loop: Union[BaseLoop, Dict]) -> BaseLoop:
        return self._build_eval_loop(loop, 'test', self._test_dataloader, self._test_evaluator)

    def _build_eval_loop(self, loop, mode: str, dataloader, evaluator) -> BaseLoop:
        """``build_val_loop``/``build_test_loop``: ``type`` from LOOPS, else ValLoop/TestLoop,
        with the ``mode``'s dataloader and evaluator."""
        if isinstance(loop, BaseLoop):
            return loop
        if not isinstance(loop, dict):
            raise TypeError(f'{mode}_loop should be a Loop object or dict, but got {loop}')
        default_args = dict(runner=self, dataloader=dataloader, evaluator=evaluator)
        cfg = dict(loop)
        if 'type' in cfg:
            return LOOPS.build(cfg, default_args=default_args)
        return (ValLoop if mode == 'val' else TestLoop)(**cfg, **default_args)
