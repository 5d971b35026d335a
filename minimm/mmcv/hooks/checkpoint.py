"""CheckpointHook, MMCV 1.7's: save every ``interval`` epochs (or iterations) and at the end, keep
only the newest ``max_keep_ckpts`` files, and record the last path in
``runner.meta['hook_msgs']['last_ckpt']`` (what a later resume or an evaluation script reads).

MMCV's quirks are kept, because checkpoints written by MMCV look so:

- ``last_ckpt`` is recorded after the file is written, so each file's meta names the one before;
- deleting old files walks back from the oldest one to drop and stops at the first missing file;
- ``by_epoch=False`` on an EpochBasedRunner writes the runner's ``epoch_*.pth`` but records and
  deletes ``iter_*.pth`` names.

Different from MMCV: checkpoints go to the local disk only (no ``file_client_args``), and the log
line says where, without naming a file backend.
"""
import os
import os.path as osp
from typing import Optional

from ..dist_utils import allreduce_params, master_only
from .hook import HOOKS, Hook


def out_dir_for(out_dir: Optional[str], work_dir: str) -> str:
    """The folder a hook writes checkpoints to: the work dir by default; a folder given
    elsewhere gets a subfolder named after the work dir, so two runs do not mix their files.
    EvalHook uses the same rule for its best checkpoint."""
    if not out_dir or out_dir == work_dir:
        return work_dir
    return osp.join(out_dir, osp.basename(work_dir.rstrip(osp.sep)))


@HOOKS.register_module()
class CheckpointHook(Hook):
    """MMCV 1.7's arguments; ``**kwargs`` (``filename_tmpl``, ``create_symlink``, ``meta``) are
    passed on to ``runner.save_checkpoint``. ``sync_buffer`` averages the model's buffers over
    the ranks before saving (rank 0 saves)."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    # It saves runner.meta too, before EvalHook (LOW) records a new best score there: MMCV's
    # order, kept, so the score reaches the file one save later (not declared as a read).
    dataflow = {'before_run': '', 'after_train_epoch after_train_iter':
                'model optimizer -> file:*.pth(rank0) meta:last_ckpt'}

    checked_in_init = ('interval',)  # 0: the config check asks this constructor (values.py)

    def __init__(self, interval: int = -1, by_epoch: bool = True, save_optimizer: bool = True,
                 out_dir: Optional[str] = None, max_keep_ckpts: int = -1, save_last: bool = True,
                 sync_buffer: bool = False, file_client_args: Optional[dict] = None, **kwargs):
        if file_client_args is not None:
            raise ValueError('file_client_args is not supported: minimm saves to local disk')
        if interval == 0:  # MMCV takes it and never saves a periodic checkpoint
            raise ValueError('interval=0: must not be 0 (an interval of 0 would mean never; -1 '
                             'saves no periodic checkpoint)')
        self.interval = interval
        self.by_epoch = by_epoch
        self.save_optimizer = save_optimizer
        self.out_dir = out_dir
        self.max_keep_ckpts = max_keep_ckpts
        self.save_last = save_last
        self.sync_buffer = sync_buffer
        self.file_client_args = file_client_args
        self.args = kwargs

    def before_run(self, runner):
        self.out_dir = out_dir_for(self.out_dir, runner.work_dir)
        runner.logger.info(f'Checkpoints will be saved to {self.out_dir}.')
        # A local disk has symlinks, so ``latest.pth`` is made unless asked otherwise.
        self.args.setdefault('create_symlink', True)

    def after_train_epoch(self, runner):
        if not self.by_epoch:
            return
        last = self.save_last and self.is_last_epoch(runner)
        if last or self.every_n_epochs(runner, self.interval):
            runner.logger.info(f'Saving checkpoint at {runner.epoch + 1} epochs')
            self._sync_and_save(runner)

    def after_train_iter(self, runner):
        if self.by_epoch:
            return
        last = self.save_last and self.is_last_iter(runner)
        if last or self.every_n_iters(runner, self.interval):
            runner.logger.info(f'Saving checkpoint at {runner.iter + 1} iterations')
            self._sync_and_save(runner)

    def _sync_and_save(self, runner):
        if self.sync_buffer:
            allreduce_params(runner.model.buffers())
        self._save_checkpoint(runner)

    @master_only
    def _save_checkpoint(self, runner):
        """Write the checkpoint, record its path, drop the ones beyond ``max_keep_ckpts``."""
        runner.save_checkpoint(self.out_dir, save_optimizer=self.save_optimizer, **self.args)
        unit = 'epoch' if self.by_epoch else 'iter'
        number = (runner.epoch if self.by_epoch else runner.iter) + 1
        template = self.args.get('filename_tmpl', unit + '_{}.pth')
        if runner.meta is not None:
            hook_msgs = runner.meta.setdefault('hook_msgs', {})
            hook_msgs['last_ckpt'] = osp.join(self.out_dir, template.format(number))
        if self.max_keep_ckpts <= 0:
            return
        # Checkpoints ``interval`` apart, from the newest one not kept back to the first.
        for old in range(number - self.max_keep_ckpts * self.interval, 0, -self.interval):
            path = osp.join(self.out_dir, template.format(old))
            if not osp.isfile(path):
                break
            os.remove(path)
