"""CheckpointHook, as MMCV 1.7's: save every ``interval`` epochs/iterations and at the end, keep the
newest ``max_keep_ckpts``, record the path in ``runner.meta['hook_msgs']['last_ckpt']``.

MMCV 1.7's quirks are kept: a file's meta names the *previous* checkpoint; deletion stops at the
first missing file; ``by_epoch=False`` on an EpochBasedRunner writes ``epoch_*.pth`` but records
and deletes ``iter_*.pth``. Left out: ``file_client_args`` (local disk only).
"""
import os
import os.path as osp
from typing import Optional

from ..dist_utils import allreduce_params, master_only
from .hook import HOOKS, Hook


@HOOKS.register_module()
class CheckpointHook(Hook):
    """Args are MMCV 1.7's. ``out_dir``: by default the work dir; another folder gets a subfolder
    named after the work dir (``out_dir/basename(work_dir)``). ``**kwargs``
    (``filename_tmpl``, ``create_symlink``, ``meta``) go to ``runner.save_checkpoint``."""

    def __init__(self,
                 interval: int = -1,
                 by_epoch: bool = True,
                 save_optimizer: bool = True,
                 out_dir: Optional[str] = None,
                 max_keep_ckpts: int = -1,
                 save_last: bool = True,
                 sync_buffer: bool = False,
                 file_client_args: Optional[dict] = None,
                 **kwargs):
        if file_client_args is not None:
            raise ValueError('file_client_args is not supported: minimm saves to local disk')
        self.interval = interval
        self.by_epoch = by_epoch
        self.save_optimizer = save_optimizer
        self.out_dir = out_dir
        self.max_keep_ckpts = max_keep_ckpts
        self.save_last = save_last
        self.args = kwargs
        self.sync_buffer = sync_buffer
        self.file_client_args = file_client_args

    def before_run(self, runner):
        if not self.out_dir:
            self.out_dir = runner.work_dir

        if self.out_dir != runner.work_dir:
            basename = osp.basename(runner.work_dir.rstrip(osp.sep))
            self.out_dir = osp.join(self.out_dir, basename)

        runner.logger.info(f'Checkpoints will be saved to {self.out_dir} by HardDiskBackend.')

        # MMCV turns this off for file backends that have no symlinks; a local disk has them.
        self.args.setdefault('create_symlink', True)

    def after_train_epoch(self, runner):
        if not self.by_epoch:
            return

        # every ``self.interval`` epochs, and at the last epoch
        if self.every_n_epochs(runner, self.interval) or (self.save_last
                                                          and self.is_last_epoch(runner)):
            runner.logger.info(f'Saving checkpoint at {runner.epoch + 1} epochs')
            if self.sync_buffer:
                allreduce_params(runner.model.buffers())
            self._save_checkpoint(runner)

    @master_only
    def _save_checkpoint(self, runner):
        """Save the current checkpoint and delete unwanted checkpoint."""
        runner.save_checkpoint(self.out_dir, save_optimizer=self.save_optimizer, **self.args)
        if runner.meta is not None:
            if self.by_epoch:
                cur_ckpt_filename = self.args.get('filename_tmpl',
                                                  'epoch_{}.pth').format(runner.epoch + 1)
            else:
                cur_ckpt_filename = self.args.get('filename_tmpl',
                                                  'iter_{}.pth').format(runner.iter + 1)
            runner.meta.setdefault('hook_msgs', dict())
            runner.meta['hook_msgs']['last_ckpt'] = osp.join(self.out_dir, cur_ckpt_filename)
        # remove other checkpoints
        if self.max_keep_ckpts > 0:
            if self.by_epoch:
                name = 'epoch_{}.pth'
                current_ckpt = runner.epoch + 1
            else:
                name = 'iter_{}.pth'
                current_ckpt = runner.iter + 1
            redundant_ckpts = range(current_ckpt - self.max_keep_ckpts * self.interval, 0,
                                    -self.interval)
            filename_tmpl = self.args.get('filename_tmpl', name)
            for _step in redundant_ckpts:
                ckpt_path = osp.join(self.out_dir, filename_tmpl.format(_step))
                if osp.isfile(ckpt_path):
                    os.remove(ckpt_path)
                else:
                    break

    def after_train_iter(self, runner):
        if self.by_epoch:
            return

        # every ``self.interval`` iterations, and at the last iteration
        if self.every_n_iters(runner, self.interval) or (self.save_last
                                                         and self.is_last_iter(runner)):
            runner.logger.info(f'Saving checkpoint at {runner.iter + 1} iterations')
            if self.sync_buffer:
                allreduce_params(runner.model.buffers())
            self._save_checkpoint(runner)
