"""EpochBasedRunner: train (and validate) epoch by epoch.

``runner.run([train_loader, val_loader], [('train', 1), ('val', 1)])`` runs one train epoch, then
one val epoch, again and again until ``max_epochs`` train epochs are done. The model's
``train_step`` returns ``dict(loss=..., log_vars=..., num_samples=...)``; everything else, even
``loss.backward()`` and the optimizer step, is done by hooks at the stages below.

MMCV 1.7's quirks are kept, since hooks written for it count on them: a val phase still runs
after the last train epoch; ``val`` does not pass ``**kwargs`` on to ``val_step``;
``before_train_epoch`` sees the ``inner_iter`` the previous phase left. Left out: MMCV's sleeps
(2 s before each epoch, 1 s before ``after_run``), which only changed timings.
"""
import warnings

import torch

from .base_runner import BaseRunner
from .builder import RUNNERS


@RUNNERS.register_module()
class EpochBasedRunner(BaseRunner):

    def run_iter(self, data_batch, train_mode, **kwargs):
        """One step of the model (or of the old ``batch_processor``) on one batch; its
        ``log_vars`` go into the log buffer, its whole result into ``self.outputs``."""
        if self.batch_processor is not None:
            outputs = self.batch_processor(self.model, data_batch, train_mode=train_mode,
                                           **kwargs)
        else:
            step = self.model.train_step if train_mode else self.model.val_step
            outputs = step(data_batch, self.optimizer, **kwargs)
        self._record_outputs(
            outputs, '"batch_processor()" or "model.train_step()" and "model.val_step()"')

    def train(self, data_loader, **kwargs):
        self._enter_phase('train', data_loader)
        self._max_iters = self._max_epochs * len(data_loader)
        self.call_hook('before_train_epoch')
        # The loop sets inner_iter, the batch index hooks read, as it goes.
        for self._inner_iter, data_batch in enumerate(data_loader):
            with self._holding(data_batch):
                self.call_hook('before_train_iter')
                self.run_iter(data_batch, train_mode=True, **kwargs)
                self.call_hook('after_train_iter')
            self._iter += 1
        self.call_hook('after_train_epoch')
        self._epoch += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs):
        """One pass over ``data_loader``; ``epoch`` and ``iter`` stay (it is not training)."""
        self._enter_phase('val', data_loader)
        self.call_hook('before_val_epoch')
        for self._inner_iter, data_batch in enumerate(data_loader):
            with self._holding(data_batch):
                self.call_hook('before_val_iter')
                self.run_iter(data_batch, train_mode=False)  # no **kwargs: MMCV 1.7 drops them
                self.call_hook('after_val_iter')
        self.call_hook('after_val_epoch')

    def _all_epochs_done(self):
        return self.epoch >= self._max_epochs

    def _phase(self, mode):
        """The method that runs one epoch of workflow phase ``mode`` (``'train'``, ``'val'``)."""
        if not isinstance(mode, str):
            raise TypeError(f'mode in workflow must be a str, but got {type(mode)}')
        if not hasattr(self, mode):
            raise ValueError(f'runner has no method named "{mode}" to run an epoch')
        return getattr(self, mode)

    def run(self, data_loaders, workflow, max_epochs=None, **kwargs):
        """Run ``workflow``, a list of ``(phase, epochs)`` with one loader per phase, in a loop
        until ``max_epochs`` train epochs are done. A workflow without ``'train'`` never ends."""
        self._check_workflow(data_loaders, workflow)
        if max_epochs is not None:
            self._warn_length_given_to_run('max_epochs')
            self._max_epochs = max_epochs
        assert self._max_epochs is not None, 'max_epochs must be specified during instantiation'
        # max_iters from the first train loader, so that before_run hooks can see it
        train_loaders = [loader for loader, (mode, _) in zip(data_loaders, workflow)
                         if mode == 'train']
        if train_loaders:
            self._max_iters = self._max_epochs * len(train_loaders[0])

        self._log_start(workflow, self._max_epochs, 'epochs')
        self.call_hook('before_run')

        while not self._all_epochs_done():
            for loader, (mode, epochs) in zip(data_loaders, workflow):
                run_epoch = self._phase(mode)
                for _ in range(epochs):
                    # only train epochs stop at max_epochs; a val phase always runs
                    if mode == 'train' and self._all_epochs_done():
                        break
                    run_epoch(loader, **kwargs)

        self.call_hook('after_run')

    def save_checkpoint(self, out_dir, filename_tmpl='epoch_{}.pth', save_optimizer=True,
                        meta=None, create_symlink=True):
        """Save ``out_dir/epoch_{epoch + 1}.pth`` and point ``latest.pth`` at it."""
        self._write_checkpoint(out_dir, filename_tmpl.format(self.epoch + 1), save_optimizer,
                               meta, create_symlink)


@RUNNERS.register_module()
class Runner(EpochBasedRunner):
    """The old name of EpochBasedRunner; warns when used."""

    def __init__(self, *args, **kwargs):
        warnings.warn('Runner was deprecated, please use EpochBasedRunner instead',
                      DeprecationWarning)
        super().__init__(*args, **kwargs)
