"""EpochBasedRunner: MMCV 1.x's epoch loop, ``run(data_loaders, [('train', 1), ('val', 1)])``.

Train and val epochs alternate until ``max_epochs`` train epochs are done; ``train_step`` returns
``dict(loss, log_vars, num_samples)`` and hooks do the rest. MMCV 1.7's quirks are kept: a val phase
runs after the last train epoch, ``val`` drops ``**kwargs``, ``before_train_epoch`` sees the
previous phase's ``inner_iter``. Left out: MMCV's 2-second sleeps (they only changed timings).
"""
import warnings

import torch

from .base_runner import BaseRunner
from .builder import RUNNERS


@RUNNERS.register_module()
class EpochBasedRunner(BaseRunner):
    _phase_name = 'an epoch'

    def run_iter(self, data_batch, train_mode: bool, **kwargs) -> None:
        if self.batch_processor is not None:
            outputs = self.batch_processor(self.model, data_batch, train_mode=train_mode, **kwargs)
        elif train_mode:
            outputs = self.model.train_step(data_batch, self.optimizer, **kwargs)
        else:
            outputs = self.model.val_step(data_batch, self.optimizer, **kwargs)
        self._set_outputs(outputs, '"batch_processor()" or "model.train_step()" and '
                                   '"model.val_step()"')

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
        self._start_run(data_loaders, workflow, 'epochs', max_epochs)
        train_loaders = [loader for loader, (mode, _) in zip(data_loaders, workflow)
                         if mode == 'train']
        if train_loaders:  # the first train loader's length, known before any hook runs
            self._max_iters = self._max_epochs * len(train_loaders[0])
        self.call_hook('before_run')
        self._run_workflow(data_loaders, workflow, lambda: self.epoch >= self._max_epochs, **kwargs)
        self.call_hook('after_run')

    def save_checkpoint(self, out_dir: str, filename_tmpl: str = 'epoch_{}.pth',
                        save_optimizer: bool = True, meta=None,
                        create_symlink: bool = True) -> None:
        self._save_checkpoint(out_dir, filename_tmpl.format(self.epoch + 1), save_optimizer, meta,
                              create_symlink)


@RUNNERS.register_module()
class Runner(EpochBasedRunner):
    """Deprecated name of :class:`EpochBasedRunner` (as MMCV 1.7)."""

    def __init__(self, *args, **kwargs):
        warnings.warn('Runner was deprecated, please use EpochBasedRunner instead',
                      DeprecationWarning)
        super().__init__(*args, **kwargs)
