"""IterBasedRunner: MMCV 1.x's iteration loop, over endless ``IterLoader`` s.

``[('train', n), ('val', m)]`` alternates ``n`` train and ``m`` val *iterations* until
``max_iters``; no epoch stages run, only the generic ``before_epoch``/``after_epoch`` around the
loop. MMCV 1.7's quirks are kept: ``epoch`` lags a loader wrap by one iteration; ``val_step`` gets
no optimizer and its ``log_vars`` join the next train average; ``iter_N.pth`` records ``iter =
N - 1``; ``resume`` sets ``inner_iter = iter`` and keeps ``meta``. Left out: the 2-second sleeps.
"""
import torch

from minimm.runner.loops import _InfiniteDataloaderIterator

from .base_runner import BaseRunner
from .builder import RUNNERS
from .hooks.iter_timer import IterTimerHook


class IterLoader(_InfiniteDataloaderIterator):
    """MMCV's endless loader: the MMEngine-style loop's, plus ``epoch`` (the wraps) and ``len``."""

    epoch = property(lambda self: self._epoch)

    def __len__(self) -> int:
        return len(self._dataloader)


@RUNNERS.register_module()
class IterBasedRunner(BaseRunner):

    def _step(self, iter_loader, mode: str, step, **kwargs) -> None:
        """One train or val iteration: fetch, ``before_*_iter``, ``step``, ``after_*_iter``."""
        self.mode, self.data_loader = mode, iter_loader
        if mode == 'train':
            self._epoch = iter_loader.epoch  # read before fetching: lags a wrap by one iteration
        self.data_batch = next(iter_loader)
        self.call_hook(f'before_{mode}_iter')
        outputs = step(self.data_batch, **kwargs)
        self._set_outputs(outputs, 'model.train_step() and model.val_step()')
        self.call_hook(f'after_{mode}_iter')
        del self.data_batch
        self._inner_iter += 1

    def train(self, data_loader, **kwargs) -> None:
        self.model.train()
        self._step(data_loader, 'train', lambda batch, **kw: self.model.train_step(
            batch, self.optimizer, **kw), **kwargs)
        self._iter += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs) -> None:
        self.model.eval()
        self._step(data_loader, 'val', self.model.val_step, **kwargs)  # no optimizer, as MMCV

    def run(self, data_loaders, workflow, max_iters=None, **kwargs) -> None:
        self._start_run(data_loaders, workflow, 'iters', max_iters)
        self.call_hook('before_run')
        iter_loaders = [IterLoader(loader) for loader in data_loaders]
        self.call_hook('before_epoch')
        self._run_workflow(iter_loaders, workflow, lambda: self.iter >= self._max_iters, **kwargs)
        self.call_hook('after_epoch')
        self.call_hook('after_run')

    def _start_phase(self) -> None:
        self._inner_iter = 0  # inner_iter counts the iterations of the current workflow phase

    def resume(self, checkpoint: str, resume_optimizer: bool = True,
               map_location='default') -> None:
        """Restore weights, optimizer(s), ``epoch``, ``iter`` and ``inner_iter = iter``; the
        runner's ``meta`` is kept. As MMCV 1.7, ``map_location='default'`` means the current GPU."""
        if map_location == 'default' and not torch.cuda.is_available():
            raise RuntimeError("IterBasedRunner.resume maps to the current GPU by default (as "
                               "MMCV 1.7); without CUDA pass map_location='cpu'")
        self._load_for_resume(checkpoint, map_location, resume_optimizer)
        self._inner_iter = self._iter
        self.logger.info(f'resumed from epoch: {self.epoch}, iter {self.iter}')

    def save_checkpoint(self, out_dir: str, filename_tmpl: str = 'iter_{}.pth', meta=None,
                        save_optimizer: bool = True, create_symlink: bool = True) -> None:
        """Write ``iter_{iter+1}.pth`` and ``latest.pth`` (MMCV's argument order: not Epoch's)."""
        self._save_checkpoint(out_dir, filename_tmpl.format(self.iter + 1), save_optimizer, meta,
                              create_symlink)

    def register_training_hooks(self, lr_config, optimizer_config=None, checkpoint_config=None,
                                log_config=None, momentum_config=None,
                                custom_hooks_config=None) -> None:
        """As the base method, but lr, checkpoint and logger hooks default to ``by_epoch=False``
        (momentum does not, as in MMCV 1.7) and the timer is always an ``IterTimerHook``."""
        if checkpoint_config is not None:
            checkpoint_config.setdefault('by_epoch', False)
        if lr_config is not None:
            lr_config.setdefault('by_epoch', False)
        if log_config is not None:
            for info in log_config['hooks']:
                info.setdefault('by_epoch', False)
        super().register_training_hooks(
            lr_config=lr_config, optimizer_config=optimizer_config,
            checkpoint_config=checkpoint_config, log_config=log_config,
            momentum_config=momentum_config, timer_config=IterTimerHook(),
            custom_hooks_config=custom_hooks_config)
