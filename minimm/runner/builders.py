"""Building from config: how the Runner turns config dicts into a model, loops and optimizers.

Every ``Runner`` argument may be a built object or a config dict. The methods here (MMEngine 0.10's
``Runner.build_*``, condensed) pass built objects through and build dicts through the registries
(``MODELS``, ``LOOPS``) or the builders of the ``dataset``, ``evaluator`` and ``optim`` packages.
The Runner calls them lazily, in ``train()``/``val()``/``test()``, so a runner for testing never
builds an optimizer.

Left out compared with MMEngine: model-wrapper configs (DistributedDataParallel is chosen by the
launcher), ``auto_scale_lr``, ``OptimWrapperDict`` and ``build_log_processor``/``build_logger``.
"""
from typing import Optional

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from ..dataset import build_dataloader
from ..evaluator import Evaluator
from ..logging import Visualizer
from ..optim import OptimWrapper, build_optim_wrapper
from ..optim.scheduler import build_param_scheduler
from ..registry import LOOPS, MODELS
from ..checkpoint import unwrap_model
from .loops import BaseLoop, EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop


class BuildMixin:
    """The Runner's ``build_*`` methods."""

    @property
    def train_loop_built(self) -> bool:
        """Whether the train loop is built. Unlike reading ``train_loop``, asking never builds
        it, so hooks can ask during a val-only or test-only run (MMEngine reads ``_train_loop``)."""
        return isinstance(self._train_loop, BaseLoop)

    def _build_visualizer(self, visualizer) -> Visualizer:
        if isinstance(visualizer, Visualizer):
            return visualizer
        cfg = dict(visualizer or dict(vis_backends=[dict(type='LocalVisBackend')]))
        cfg.pop('type', None)
        cfg.setdefault('name', self.experiment_name)
        cfg.setdefault('save_dir', self.log_dir)
        return Visualizer.create_instance(**cfg)

    def _build_model(self, model, data_preprocessor: Optional[dict]) -> nn.Module:
        if isinstance(model, nn.Module):
            return model
        if not isinstance(model, dict):
            raise TypeError(f'model must be an nn.Module or a config dict, but got {type(model)}')
        model = dict(model)
        if data_preprocessor is not None:
            model.setdefault('data_preprocessor', data_preprocessor)
        return MODELS.build(model)

    def _wrap_model(self, model: nn.Module) -> nn.Module:
        """Move the model to the device; wrap it for DistributedDataParallel when distributed."""
        device = torch.device('cuda', torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device('cpu')
        model = model.to(device)
        if not self.distributed:
            return model
        from ..model.wrappers import MMDistributedDataParallel
        device_ids = [device.index] if device.type == 'cuda' else None
        return MMDistributedDataParallel(module=model, device_ids=device_ids,
                                         broadcast_buffers=False)

    def build_dataloader(self, dataloader, seed: Optional[int] = None,
                         diff_rank_seed: Optional[bool] = None) -> DataLoader:
        """``seed`` and ``diff_rank_seed`` default to the runner's ``randomness`` settings, which
        the builder reads itself (MMEngine's loops read them from the runner and pass them in)."""
        if seed is None:
            seed = self.seed
        if diff_rank_seed is None:
            diff_rank_seed = self._randomness_cfg.get('diff_rank_seed', False)
        return build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)

    def build_evaluator(self, evaluator) -> Evaluator:
        return evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)

    def build_optim_wrapper(self, optim_wrapper) -> OptimWrapper:
        return build_optim_wrapper(unwrap_model(self.model), optim_wrapper)

    def build_param_scheduler(self, scheduler) -> list:
        """Build a scheduler config (or a list of them) against ``self.optim_wrapper``.

        As MMEngine, a scheduler without ``end`` runs to the end of training (``max_epochs`` or
        ``max_iters`` by its ``by_epoch``), and ``convert_to_iter_based`` uses the train
        dataloader's length as the epoch length.
        """
        if isinstance(scheduler, dict):
            raise TypeError('param_scheduler must be a list of schedulers or configs here')
        built = []
        for item in scheduler:
            if not isinstance(item, dict):
                built.append(item)
                continue
            item = dict(item)
            if self.train_loop_built:
                item.setdefault('end', self.max_epochs if item.get('by_epoch', True)
                                else self.max_iters)
            built.append(build_param_scheduler(item, self.optim_wrapper,
                                               epoch_length=len(self.train_dataloader)))
        return built

    def build_train_loop(self, loop) -> BaseLoop:
        if isinstance(loop, BaseLoop):
            return loop
        if not isinstance(loop, dict):
            raise TypeError(f'train_cfg must be a dict or a loop, but got {type(loop)}')
        cfg = dict(loop)
        if 'type' in cfg and 'by_epoch' in cfg:
            raise RuntimeError('only one of `type` or `by_epoch` can be set in train_cfg')
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

    def _build_eval_loop(self, loop, mode: str) -> BaseLoop:
        if isinstance(loop, BaseLoop):
            return loop
        if not isinstance(loop, dict):
            raise TypeError(f'{mode}_cfg must be a dict or a loop, but got {type(loop)}')
        default_args = dict(runner=self, dataloader=getattr(self, f'_{mode}_dataloader'),
                            evaluator=getattr(self, f'_{mode}_evaluator'))
        cfg = dict(loop)
        if 'type' in cfg:
            return LOOPS.build(cfg, default_args=default_args)
        return (ValLoop if mode == 'val' else TestLoop)(**cfg, **default_args)
