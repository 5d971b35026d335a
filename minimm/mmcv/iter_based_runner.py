"""IterBasedRunner and IterLoader, as MMCV 1.7's: the iteration loop, over endless loaders.

``[('train', n), ('val', m)]`` alternates ``n`` train and ``m`` val *iterations* until
``max_iters``; no epoch stages run, only the generic ``before_epoch``/``after_epoch`` around the
loop. MMCV 1.7's quirks are kept: ``epoch`` lags a loader wrap by one iteration; ``val_step`` gets
no optimizer and its ``log_vars`` join the next train average; ``iter_N.pth`` records ``iter =
N - 1``; ``resume`` sets ``inner_iter = iter`` and keeps ``meta``. Left out: MMCV's sleeps (2 s at
each loader wrap, 1 s before ``after_epoch``).
"""
import os.path as osp
import platform
import shutil
import warnings
from typing import Callable, Dict, List, Optional, Tuple, Union

import torch
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from .base_runner import BaseRunner
from .builder import RUNNERS
from .checkpoint import save_checkpoint
from .hooks import IterTimerHook
from .utils import get_host_info, symlink


class IterLoader:
    """A data loader without end: a new pass starts (``epoch + 1``, and the sampler's
    ``set_epoch``) when one runs out."""

    def __init__(self, dataloader: DataLoader):
        self._dataloader = dataloader
        self.iter_loader = iter(self._dataloader)
        self._epoch = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def __next__(self):
        try:
            data = next(self.iter_loader)
        except StopIteration:
            self._epoch += 1
            if hasattr(self._dataloader.sampler, 'set_epoch'):
                self._dataloader.sampler.set_epoch(self._epoch)
            self.iter_loader = iter(self._dataloader)
            data = next(self.iter_loader)

        return data

    def __len__(self):
        return len(self._dataloader)


@RUNNERS.register_module()
class IterBasedRunner(BaseRunner):
    """Trains the model iteration by iteration."""

    def train(self, data_loader, **kwargs):
        self.model.train()
        self.mode = 'train'
        self.data_loader = data_loader
        self._epoch = data_loader.epoch
        data_batch = next(data_loader)
        self.data_batch = data_batch
        self.call_hook('before_train_iter')
        outputs = self.model.train_step(data_batch, self.optimizer, **kwargs)
        if not isinstance(outputs, dict):
            raise TypeError('model.train_step() must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs
        self.call_hook('after_train_iter')
        del self.data_batch
        self._inner_iter += 1
        self._iter += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs):
        self.model.eval()
        self.mode = 'val'
        self.data_loader = data_loader
        data_batch = next(data_loader)
        self.data_batch = data_batch
        self.call_hook('before_val_iter')
        outputs = self.model.val_step(data_batch, **kwargs)
        if not isinstance(outputs, dict):
            raise TypeError('model.val_step() must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs
        self.call_hook('after_val_iter')
        del self.data_batch
        self._inner_iter += 1

    def run(self, data_loaders: List[DataLoader], workflow: List[Tuple[str, int]],
            max_iters: Optional[int] = None, **kwargs) -> None:
        """Run the workflow: ``[('train', 1000), ('val', 100)]`` is 1000 train iterations, then
        100 val iterations, again and again until ``max_iters`` train iterations are done."""
        assert isinstance(data_loaders, list)
        assert isinstance(workflow, list) and all(isinstance(flow, tuple) for flow in workflow)
        assert len(data_loaders) == len(workflow)
        if max_iters is not None:
            warnings.warn('setting max_iters in run is deprecated, '
                          'please set max_iters in runner_config', DeprecationWarning)
            self._max_iters = max_iters
        assert self._max_iters is not None, 'max_iters must be specified during instantiation'

        work_dir = self.work_dir if self.work_dir is not None else 'NONE'
        self.logger.info('Start running, host: %s, work_dir: %s', get_host_info(), work_dir)
        self.logger.info('Hooks will be executed in the following order:\n%s',
                         self.get_hook_info())
        self.logger.info('workflow: %s, max: %d iters', workflow, self._max_iters)
        self.call_hook('before_run')

        iter_loaders = [IterLoader(x) for x in data_loaders]

        self.call_hook('before_epoch')

        while self.iter < self._max_iters:
            for i, flow in enumerate(workflow):
                self._inner_iter = 0
                mode, iters = flow
                if not isinstance(mode, str) or not hasattr(self, mode):
                    raise ValueError(f'runner has no method named "{mode}" to run a workflow')
                iter_runner = getattr(self, mode)
                for _ in range(iters):
                    if mode == 'train' and self.iter >= self._max_iters:
                        break
                    iter_runner(iter_loaders[i], **kwargs)

        self.call_hook('after_epoch')
        self.call_hook('after_run')

    def resume(self, checkpoint: str, resume_optimizer: bool = True,
               map_location: Union[str, Callable] = 'default') -> None:
        """Restore weights, optimizer(s), ``epoch``, ``iter`` and ``inner_iter = iter``; the
        runner's ``meta`` is kept. ``'default'`` maps the tensors to the current GPU, as MMCV 1.7
        does (without CUDA, pass ``map_location='cpu'``)."""
        if map_location == 'default':
            if not torch.cuda.is_available():
                raise RuntimeError("IterBasedRunner.resume maps to the current GPU by default (as "
                                   "MMCV 1.7); without CUDA pass map_location='cpu'")
            device_id = torch.cuda.current_device()
            checkpoint = self.load_checkpoint(checkpoint, map_location=f'cuda:{device_id}')
        else:
            checkpoint = self.load_checkpoint(checkpoint, map_location=map_location)

        self._epoch = checkpoint['meta']['epoch']
        self._iter = checkpoint['meta']['iter']
        self._inner_iter = checkpoint['meta']['iter']
        if 'optimizer' in checkpoint and resume_optimizer:
            if isinstance(self.optimizer, Optimizer):
                self.optimizer.load_state_dict(checkpoint['optimizer'])
            elif isinstance(self.optimizer, dict):
                for k in self.optimizer.keys():
                    self.optimizer[k].load_state_dict(checkpoint['optimizer'][k])
            else:
                raise TypeError('Optimizer should be dict or torch.optim.Optimizer '
                                f'but got {type(self.optimizer)}')

        self.logger.info(f'resumed from epoch: {self.epoch}, iter {self.iter}')

    def save_checkpoint(self, out_dir: str, filename_tmpl: str = 'iter_{}.pth',
                        meta: Optional[Dict] = None, save_optimizer: bool = True,
                        create_symlink: bool = True) -> None:
        """Write ``out_dir/iter_{iter+1}.pth`` and point ``latest.pth`` at it (MMCV's argument
        order here: ``meta`` before ``save_optimizer``, unlike EpochBasedRunner's)."""
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
        if self.meta is not None:
            # Before epoch/iter, or a resumed run's meta would overwrite them.
            meta.update(self.meta)
        meta.update(epoch=self.epoch + 1, iter=self.iter)

        filename = filename_tmpl.format(self.iter + 1)
        filepath = osp.join(out_dir, filename)
        optimizer = self.optimizer if save_optimizer else None
        save_checkpoint(self.model, filepath, optimizer=optimizer, meta=meta)
        if create_symlink:
            dst_file = osp.join(out_dir, 'latest.pth')
            if platform.system() != 'Windows':
                symlink(filename, dst_file)
            else:
                shutil.copy(filepath, dst_file)

    def register_training_hooks(self, lr_config, optimizer_config=None, checkpoint_config=None,
                                log_config=None, momentum_config=None,
                                custom_hooks_config=None):
        """As the base method, but the lr, checkpoint and logger hooks default to
        ``by_epoch=False`` (momentum does not, as in MMCV 1.7) and the timer is always an
        ``IterTimerHook``."""
        if checkpoint_config is not None:
            checkpoint_config.setdefault('by_epoch', False)
        if lr_config is not None:
            lr_config.setdefault('by_epoch', False)
        if log_config is not None:
            for info in log_config['hooks']:
                info.setdefault('by_epoch', False)
        super().register_training_hooks(
            lr_config=lr_config,
            momentum_config=momentum_config,
            optimizer_config=optimizer_config,
            checkpoint_config=checkpoint_config,
            log_config=log_config,
            timer_config=IterTimerHook(),
            custom_hooks_config=custom_hooks_config)
