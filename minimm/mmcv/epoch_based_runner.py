"""EpochBasedRunner, as MMCV 1.7's: ``run(data_loaders, [('train', 1), ('val', 1)])``.

Train and val epochs alternate until ``max_epochs`` train epochs are done; ``train_step`` returns
``dict(loss, log_vars, num_samples)`` and hooks do the rest. MMCV 1.7's quirks are kept: a val phase
runs after the last train epoch, ``val`` drops ``**kwargs``, ``before_train_epoch`` sees the
previous phase's ``inner_iter``. Left out: MMCV's sleeps (2 s before each epoch, 1 s before
``after_run``: they only changed timings).
"""
import os.path as osp
import platform
import shutil
import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils.data import DataLoader

from .base_runner import BaseRunner
from .builder import RUNNERS
from .checkpoint import save_checkpoint
from .utils import get_host_info, symlink


@RUNNERS.register_module()
class EpochBasedRunner(BaseRunner):
    """Trains the model epoch by epoch."""

    def run_iter(self, data_batch: Any, train_mode: bool, **kwargs) -> None:
        if self.batch_processor is not None:
            outputs = self.batch_processor(self.model, data_batch, train_mode=train_mode, **kwargs)
        elif train_mode:
            outputs = self.model.train_step(data_batch, self.optimizer, **kwargs)
        else:
            outputs = self.model.val_step(data_batch, self.optimizer, **kwargs)
        if not isinstance(outputs, dict):
            raise TypeError('"batch_processor()" or "model.train_step()"'
                            'and "model.val_step()" must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs

    def train(self, data_loader, **kwargs):
        self.model.train()
        self.mode = 'train'
        self.data_loader = data_loader
        self._max_iters = self._max_epochs * len(self.data_loader)
        self.call_hook('before_train_epoch')
        for i, data_batch in enumerate(self.data_loader):
            self.data_batch = data_batch
            self._inner_iter = i
            self.call_hook('before_train_iter')
            self.run_iter(data_batch, train_mode=True, **kwargs)
            self.call_hook('after_train_iter')
            del self.data_batch
            self._iter += 1

        self.call_hook('after_train_epoch')
        self._epoch += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs):
        self.model.eval()
        self.mode = 'val'
        self.data_loader = data_loader
        self.call_hook('before_val_epoch')
        for i, data_batch in enumerate(self.data_loader):
            self.data_batch = data_batch
            self._inner_iter = i
            self.call_hook('before_val_iter')
            self.run_iter(data_batch, train_mode=False)
            self.call_hook('after_val_iter')
            del self.data_batch
        self.call_hook('after_val_epoch')

    def run(self, data_loaders: List[DataLoader], workflow: List[Tuple[str, int]],
            max_epochs: Optional[int] = None, **kwargs) -> None:
        """Run the workflow: ``[('train', 2), ('val', 1)]`` is 2 train epochs, then 1 val epoch,
        again and again until ``max_epochs`` train epochs are done."""
        assert isinstance(data_loaders, list)
        assert isinstance(workflow, list) and all(isinstance(flow, tuple) for flow in workflow)
        assert len(data_loaders) == len(workflow)
        if max_epochs is not None:
            warnings.warn('setting max_epochs in run is deprecated, '
                          'please set max_epochs in runner_config', DeprecationWarning)
            self._max_epochs = max_epochs

        assert self._max_epochs is not None, 'max_epochs must be specified during instantiation'

        for i, flow in enumerate(workflow):
            mode, epochs = flow
            if mode == 'train':
                self._max_iters = self._max_epochs * len(data_loaders[i])
                break

        work_dir = self.work_dir if self.work_dir is not None else 'NONE'
        self.logger.info('Start running, host: %s, work_dir: %s', get_host_info(), work_dir)
        self.logger.info('Hooks will be executed in the following order:\n%s',
                         self.get_hook_info())
        self.logger.info('workflow: %s, max: %d epochs', workflow, self._max_epochs)
        self.call_hook('before_run')

        while self.epoch < self._max_epochs:
            for i, flow in enumerate(workflow):
                mode, epochs = flow
                if isinstance(mode, str):  # self.train()
                    if not hasattr(self, mode):
                        raise ValueError(f'runner has no method named "{mode}" to run an epoch')
                    epoch_runner = getattr(self, mode)
                else:
                    raise TypeError(f'mode in workflow must be a str, but got {type(mode)}')

                for _ in range(epochs):
                    if mode == 'train' and self.epoch >= self._max_epochs:
                        break
                    epoch_runner(data_loaders[i], **kwargs)

        self.call_hook('after_run')

    def save_checkpoint(self, out_dir: str, filename_tmpl: str = 'epoch_{}.pth',
                        save_optimizer: bool = True, meta: Optional[Dict] = None,
                        create_symlink: bool = True) -> None:
        """Write ``out_dir/epoch_{epoch+1}.pth`` (``meta`` gets the runner's meta, ``epoch + 1``
        and ``iter``) and point ``latest.pth`` at it."""
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
        if self.meta is not None:
            # Before epoch/iter, or a resumed run's meta would overwrite them.
            meta.update(self.meta)
        meta.update(epoch=self.epoch + 1, iter=self.iter)

        filename = filename_tmpl.format(self.epoch + 1)
        filepath = osp.join(out_dir, filename)
        optimizer = self.optimizer if save_optimizer else None
        save_checkpoint(self.model, filepath, optimizer=optimizer, meta=meta)
        if create_symlink:
            dst_file = osp.join(out_dir, 'latest.pth')
            if platform.system() != 'Windows':
                symlink(filename, dst_file)
            else:
                shutil.copy(filepath, dst_file)


@RUNNERS.register_module()
class Runner(EpochBasedRunner):
    """Deprecated name of EpochBasedRunner."""

    def __init__(self, *args, **kwargs):
        warnings.warn('Runner was deprecated, please use EpochBasedRunner instead',
                      DeprecationWarning)
        super().__init__(*args, **kwargs)
