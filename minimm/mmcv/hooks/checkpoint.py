"""CheckpointHook: save every ``interval`` epochs/iterations and at the end, keep the newest
``max_keep_ckpts``, record the path in ``runner.meta['hook_msgs']['last_ckpt']``. MMCV 1.7's quirks
are kept: a file's meta names the *previous* checkpoint; deletion stops at the first missing file;
``by_epoch=False`` on an EpochBasedRunner writes ``epoch_*.pth`` but records and deletes
``iter_*.pth``. Left out: ``file_client_args`` (local disk only)."""
import os
import os.path as osp

from minimm.dist import all_reduce_params, master_only

from .hook import HOOKS, Hook


def resolve_out_dir(out_dir, work_dir: str) -> str:
    """MMCV 1.7's rule: no ``out_dir`` means the work dir; another folder gets a subfolder named
    after the work dir (``out_dir/basename(work_dir)``)."""
    if not out_dir:
        return work_dir
    return out_dir if out_dir == work_dir else osp.join(out_dir, osp.basename(work_dir))


@HOOKS.register_module()
class CheckpointHook(Hook):
    """Args are MMCV 1.7's; ``**kwargs`` (``filename_tmpl``, ``create_symlink``, ``meta``) go to
    ``runner.save_checkpoint``."""

    def __init__(self, interval: int = -1, by_epoch: bool = True, save_optimizer: bool = True,
                 out_dir=None, max_keep_ckpts: int = -1, save_last: bool = True,
                 sync_buffer: bool = False, file_client_args=None, **kwargs):
        if file_client_args is not None:
            raise ValueError('file_client_args is not supported: minimm saves to local disk')
        self.interval, self.by_epoch, self.save_optimizer = interval, by_epoch, save_optimizer
        self.out_dir, self.max_keep_ckpts, self.save_last = out_dir, max_keep_ckpts, save_last
        self.sync_buffer, self.args = sync_buffer, kwargs

    def before_run(self, runner) -> None:
        self.out_dir = resolve_out_dir(self.out_dir, runner.work_dir)
        runner.logger.info(f'Checkpoints will be saved to {self.out_dir} by HardDiskBackend.')
        self.args.setdefault('create_symlink', True)

    def after_train_epoch(self, runner) -> None:
        if self.by_epoch and (self.every_n_epochs(runner, self.interval)
                              or (self.save_last and self.is_last_epoch(runner))):
            runner.logger.info(f'Saving checkpoint at {runner.epoch + 1} epochs')
            self._save(runner)

    def after_train_iter(self, runner) -> None:
        if not self.by_epoch and (self.every_n_iters(runner, self.interval)
                                  or (self.save_last and self.is_last_iter(runner))):
            runner.logger.info(f'Saving checkpoint at {runner.iter + 1} iterations')
            self._save(runner)

    def _save(self, runner) -> None:
        if self.sync_buffer:
            all_reduce_params(runner.model.buffers(), op='mean')
        self._save_checkpoint(runner)

    @master_only
    def _save_checkpoint(self, runner) -> None:
        runner.save_checkpoint(self.out_dir, save_optimizer=self.save_optimizer, **self.args)
        tmpl = self.args.get('filename_tmpl', 'epoch_{}.pth' if self.by_epoch else 'iter_{}.pth')
        current = runner.epoch + 1 if self.by_epoch else runner.iter + 1
        if runner.meta is not None:
            runner.meta.setdefault('hook_msgs', dict())['last_ckpt'] = \
                osp.join(self.out_dir, tmpl.format(current))
        if self.max_keep_ckpts > 0:
            for k in range(current - self.max_keep_ckpts * self.interval, 0, -self.interval):
                path = osp.join(self.out_dir, tmpl.format(k))
                if not osp.exists(path):
                    break
                os.remove(path)
