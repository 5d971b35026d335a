"""EpochBasedRunner: MMCV 1.x's epoch loop, ``run(data_loaders, workflow)``.

A workflow such as ``[('train', 1), ('val', 1)]`` alternates train and val epochs until
``max_epochs`` train epochs are done; ``train_step`` returns ``dict(loss, log_vars, num_samples)``
and hooks do the rest. MMCV 1.7's quirks are kept: a val phase still runs after the last train epoch, ``val`` does not
forward ``**kwargs``, and ``before_train_epoch`` sees the ``inner_iter`` left over from the
previous phase. Left out: MMCV's 2-second sleeps (they only changed timings).
"""
import os
import os.path as osp
import shutil
import warnings

import torch

from .base_runner import BaseRunner
from .builder import RUNNERS
from .checkpoint import save_checkpoint


def _link_latest(out_dir: str, filename: str) -> None:
    """Point ``out_dir/latest.pth`` at ``filename`` (a relative symlink; a copy on Windows)."""
    latest = osp.join(out_dir, 'latest.pth')
    if osp.lexists(latest):
        os.remove(latest)
    if os.name == 'nt':
        shutil.copy(osp.join(out_dir, filename), latest)
    else:
        os.symlink(filename, latest)


def save_runner_checkpoint(runner, out_dir: str, filename: str, save_optimizer: bool, meta,
                           create_symlink: bool) -> None:
    """What both runners' ``save_checkpoint`` do once the file name is known (as MMCV 1.7)."""
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise TypeError(f'meta should be a dict or None, but got {type(meta)}')
    if runner.meta is not None:
        meta.update(runner.meta)
    meta.update(epoch=runner.epoch + 1, iter=runner.iter)
    optimizer = runner.optimizer if save_optimizer else None
    save_checkpoint(runner.model, osp.join(out_dir, filename), optimizer=optimizer, meta=meta)
    if create_symlink:
        _link_latest(out_dir, filename)


def check_workflow(data_loaders, workflow) -> None:
    assert isinstance(data_loaders, list)
    assert isinstance(workflow, list) and all(isinstance(flow, tuple) for flow in workflow)
    assert len(data_loaders) == len(workflow)


def phase_method(runner, mode, what: str):
    """The runner method a workflow ``mode`` names (``'train'`` -> ``runner.train``)."""
    if not isinstance(mode, str):
        raise TypeError(f'mode in workflow must be a str, but got {type(mode)}')
    if not hasattr(runner, mode):
        raise ValueError(f'runner has no method named "{mode}" to run {what}')
    return getattr(runner, mode)


@RUNNERS.register_module()
class EpochBasedRunner(BaseRunner):
    """Train by epochs; see the module docstring. Arguments: :class:`BaseRunner`'s."""

    def run_iter(self, data_batch, train_mode: bool, **kwargs) -> None:
        if self.batch_processor is not None:
            outputs = self.batch_processor(self.model, data_batch, train_mode=train_mode, **kwargs)
        elif train_mode:
            outputs = self.model.train_step(data_batch, self.optimizer, **kwargs)
        else:
            outputs = self.model.val_step(data_batch, self.optimizer, **kwargs)
        if not isinstance(outputs, dict):
            raise TypeError('"batch_processor()" or "model.train_step()" and "model.val_step()" '
                            'must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs

    def _run_epoch(self, data_loader, mode: str, **kwargs) -> None:
        """One train or val epoch: the stages around each iteration, as MMCV 1.7."""
        self.mode, self.data_loader = mode, data_loader
        self.call_hook(f'before_{mode}_epoch')
        for i, data_batch in enumerate(data_loader):
            self.data_batch, self._inner_iter = data_batch, i
            self.call_hook(f'before_{mode}_iter')
            self.run_iter(data_batch, train_mode=mode == 'train', **kwargs)
            self.call_hook(f'after_{mode}_iter')
            del self.data_batch
            if mode == 'train':
                self._iter += 1
        self.call_hook(f'after_{mode}_epoch')

    def train(self, data_loader, **kwargs) -> None:
        self.model.train()
        self._max_iters = self._max_epochs * len(data_loader)
        self._run_epoch(data_loader, 'train', **kwargs)
        self._epoch += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs) -> None:
        self.model.eval()
        self._run_epoch(data_loader, 'val')  # MMCV does not forward kwargs here

    def run(self, data_loaders, workflow, max_epochs=None, **kwargs) -> None:
        """Run ``workflow`` (e.g. ``[('train', 2), ('val', 1)]``) until ``max_epochs`` train epochs."""
        check_workflow(data_loaders, workflow)
        if max_epochs is not None:
            warnings.warn('setting max_epochs in run is deprecated, please set max_epochs in '
                          'runner_config', DeprecationWarning)
            self._max_epochs = max_epochs
        assert self._max_epochs is not None, 'max_epochs must be specified during instantiation'
        for i, (mode, _) in enumerate(workflow):
            if mode == 'train':
                self._max_iters = self._max_epochs * len(data_loaders[i])
                break
        self._log_start('epochs', workflow, self._max_epochs)
        self.call_hook('before_run')
        while self.epoch < self._max_epochs:
            for i, (mode, epochs) in enumerate(workflow):
                epoch_runner = phase_method(self, mode, 'an epoch')
                for _ in range(epochs):
                    if mode == 'train' and self.epoch >= self._max_epochs:
                        break
                    epoch_runner(data_loaders[i], **kwargs)
        self.call_hook('after_run')

    def save_checkpoint(self, out_dir: str, filename_tmpl: str = 'epoch_{}.pth',
                        save_optimizer: bool = True, meta=None, create_symlink: bool = True) -> None:
        """Write ``out_dir/epoch_{epoch+1}.pth`` with ``meta`` (epoch, iter and the runner's
        meta), ``state_dict`` and optimizer, and point ``latest.pth`` at it."""
        save_runner_checkpoint(self, out_dir, filename_tmpl.format(self.epoch + 1), save_optimizer,
                               meta, create_symlink)


@RUNNERS.register_module()
class Runner(EpochBasedRunner):
    """Deprecated name of :class:`EpochBasedRunner` (as MMCV 1.7)."""

    def __init__(self, *args, **kwargs):
        warnings.warn('Runner was deprecated, please use EpochBasedRunner instead',
                      DeprecationWarning)
        super().__init__(*args, **kwargs)
