"""IterBasedRunner: train (and validate) iteration by iteration, over loaders that never end.

``runner.run([train_loader, val_loader], [('train', 1000), ('val', 100)])`` alternates 1000 train
and 100 val *iterations* until ``max_iters`` train iterations are done. ``IterLoader`` starts a
new pass over its loader whenever one runs out. No epoch stages are called: only the generic
``before_epoch`` and ``after_epoch`` of every hook, once, around the whole loop.

MMCV 1.7's quirks are kept: ``epoch`` changes one iteration after the loader wraps; ``val_step``
gets no optimizer, and its ``log_vars`` are averaged into the next train log line; ``iter_N.pth``
records ``iter = N - 1``; ``resume`` sets ``inner_iter = iter`` and keeps the runner's ``meta``;
``register_training_hooks`` does not switch a momentum config to ``by_epoch=False``. Left out:
MMCV's sleeps (2 s at each loader wrap, 1 s before ``after_epoch``).
"""
import torch

from .base_runner import BaseRunner
from .builder import RUNNERS
from .hooks import IterTimerHook


class IterLoader:
    """``next(loader)`` forever: at the end of a pass, ``epoch`` goes up by one, the sampler is
    told (``set_epoch``, so a distributed sampler reshuffles) and a new pass begins."""

    def __init__(self, dataloader):
        self._dataloader = dataloader
        self.iter_loader = iter(dataloader)
        self._epoch = 0

    @property
    def epoch(self):
        """Completed passes over the loader."""
        return self._epoch

    def _next_pass(self):
        self._epoch += 1
        loader = self._dataloader
        if hasattr(loader.sampler, 'set_epoch'):  # a DistributedSampler reshuffles per epoch
            loader.sampler.set_epoch(self._epoch)
        self.iter_loader = iter(loader)

    def __next__(self):
        try:
            return next(self.iter_loader)
        except StopIteration:
            self._next_pass()
            return next(self.iter_loader)

    def __len__(self):
        return len(self._dataloader)


@RUNNERS.register_module()
class IterBasedRunner(BaseRunner):

    def _all_iters_done(self):
        return self.iter >= self._max_iters

    def train(self, data_loader, **kwargs):
        """One train iteration on the next batch of ``data_loader`` (an ``IterLoader``)."""
        self._enter_phase('train', data_loader)
        # read before fetching: at a wrap, this iteration still counts in the old epoch
        self._epoch = data_loader.epoch
        with self._holding(next(data_loader)) as data_batch:
            self.call_hook('before_train_iter')
            outputs = self.model.train_step(data_batch, self.optimizer, **kwargs)
            self._record_outputs(outputs, 'model.train_step()')
            self.call_hook('after_train_iter')
        self._inner_iter += 1
        self._iter += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs):
        """One val iteration; ``iter`` does not move."""
        self._enter_phase('val', data_loader)
        with self._holding(next(data_loader)) as data_batch:
            self.call_hook('before_val_iter')
            # no optimizer passed, unlike EpochBasedRunner; the log_vars share the train buffer,
            # so they join the next train log line's averages (both as in MMCV 1.7)
            self._record_outputs(self.model.val_step(data_batch, **kwargs), 'model.val_step()')
            self.call_hook('after_val_iter')
        self._inner_iter += 1

    def run(self, data_loaders, workflow, max_iters=None, **kwargs):
        """Run ``workflow``, a list of ``(phase, iterations)`` with one loader per phase, in a
        loop until ``max_iters`` train iterations are done."""
        self._check_workflow(data_loaders, workflow)
        if max_iters is not None:
            self._warn_length_given_to_run('max_iters')
            self._max_iters = max_iters
        assert self._max_iters is not None, 'max_iters must be specified during instantiation'

        self._log_start(workflow, self._max_iters, 'iters')
        self.call_hook('before_run')

        loaders = [IterLoader(loader) for loader in data_loaders]
        self.call_hook('before_epoch')
        while not self._all_iters_done():
            for loader, (mode, iters) in zip(loaders, workflow):
                self._inner_iter = 0  # counts the iterations of this phase
                if not isinstance(mode, str) or not hasattr(self, mode):
                    raise ValueError(f'runner has no method named "{mode}" to run a workflow')
                run_iteration = getattr(self, mode)
                for _ in range(iters):
                    if mode == 'train' and self._all_iters_done():
                        break
                    run_iteration(loader, **kwargs)
        self.call_hook('after_epoch')
        self.call_hook('after_run')

    def resume(self, checkpoint, resume_optimizer=True, map_location='default'):
        """Continue from a checkpoint: weights, ``epoch``, ``iter`` (and ``inner_iter``, set to
        ``iter`` as in MMCV) and the optimizer state; the runner's ``meta`` is kept.
        ``'default'`` means the current GPU, as in MMCV: without CUDA pass ``'cpu'``."""
        if map_location == 'default':
            if not torch.cuda.is_available():
                raise RuntimeError("IterBasedRunner.resume maps to the current GPU by default (as "
                                   "MMCV 1.7); without CUDA pass map_location='cpu'")
            map_location = f'cuda:{torch.cuda.current_device()}'
        checkpoint = self.load_checkpoint(checkpoint, map_location=map_location)
        meta = checkpoint['meta']
        self._epoch, self._iter, self._inner_iter = meta['epoch'], meta['iter'], meta['iter']
        if resume_optimizer and 'optimizer' in checkpoint:
            self._load_optimizer_state(checkpoint)
        self.logger.info(f'resumed from epoch: {self.epoch}, iter {self.iter}')

    def save_checkpoint(self, out_dir, filename_tmpl='iter_{}.pth', meta=None,
                        save_optimizer=True, create_symlink=True):
        """Save ``out_dir/iter_{iter + 1}.pth`` and point ``latest.pth`` at it. Note MMCV's
        argument order here: ``meta`` before ``save_optimizer``."""
        self._write_checkpoint(out_dir, filename_tmpl.format(self.iter + 1), save_optimizer,
                               meta, create_symlink)

    def register_training_hooks(self, lr_config, optimizer_config=None, checkpoint_config=None,
                                log_config=None, momentum_config=None, custom_hooks_config=None):
        """As ``BaseRunner``'s, with iteration-based defaults: the lr, checkpoint and logger
        configs get ``by_epoch=False`` unless they say otherwise (momentum does not, as in
        MMCV 1.7), and the timer is always an ``IterTimerHook``."""
        for config in (lr_config, checkpoint_config):
            if config is not None:
                config.setdefault('by_epoch', False)
        for hook_cfg in (log_config or {}).get('hooks', []):
            hook_cfg.setdefault('by_epoch', False)
        super().register_training_hooks(
            lr_config, optimizer_config=optimizer_config, checkpoint_config=checkpoint_config,
            log_config=log_config, momentum_config=momentum_config,
            timer_config=IterTimerHook(), custom_hooks_config=custom_hooks_config)
