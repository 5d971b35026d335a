"""EMAOnlyCheckpointHook: beside every checkpoint, a small file with only the EMA weights.

A minimm addition (mmengine#1678 asks for it): with ``EMAHook``, a checkpoint's ``state_dict``
holds the EMA weights, but the file also carries the raw weights, the optimizer state and the
MessageHub. This hook writes ``<name>_ema.pth`` beside each checkpoint ``<name>.pth``, holding only
``meta`` and ``state_dict``: the file to deploy.

It learns which files exist the way any hook can: ``CheckpointHook`` records the newest checkpoint
in the MessageHub as ``last_ckpt`` and the best ones as ``best_ckpt`` (``best_ckpt_<key>`` for
several ``save_best`` keys), as MMEngine's does. At ``LOWEST`` priority this hook runs after
``CheckpointHook`` in every stage where that one saves (``after_train_iter``,
``after_train_epoch``, ``after_val_epoch``), reads each recorded checkpoint that is newer than its
EMA-only twin, and writes the twin. Twins whose checkpoint is gone (deleted by
``max_keep_ckpts``, or replaced as the best) are deleted at the same time.
"""
import glob
import os
import os.path as osp
from typing import Dict, List, Optional

from ..checkpoint import save_checkpoint
from ..dist import is_main_process
from ..registry import HOOKS
from ..sharded_checkpoint import read_checkpoint
from .checkpoint_hook import CheckpointHook
from .ema_hook import EMAHook
from .hook import DATA_BATCH, Hook

EMA_SUFFIX = '_ema.pth'


@HOOKS.register_module()
class EMAOnlyCheckpointHook(Hook):
    """Write ``<name>_ema.pth`` (``meta`` and the EMA ``state_dict``) beside every checkpoint."""

    priority = 'LOWEST'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': '',
        'after_train_iter after_train_epoch after_val_epoch': (
            'message_hub:last_ckpt message_hub:best_ckpt* file:*.pth -> file:*_ema.pth(rank0)'),
    }

    def before_run(self, runner) -> None:
        # Without EMAHook a checkpoint's state_dict holds the raw weights; before CheckpointHook
        # this hook would see each new checkpoint one stage late.
        if not any(isinstance(hook, EMAHook) for hook in runner.hooks):
            raise ValueError('EMAOnlyCheckpointHook needs an EMAHook in custom_hooks')
        later = runner.hooks[runner.hooks.index(self) + 1:]
        if any(isinstance(hook, CheckpointHook) for hook in later):
            raise ValueError('EMAOnlyCheckpointHook must run after CheckpointHook: give it a '
                             "lower priority than CheckpointHook's (the default, LOWEST, is)")

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        self._write_twins(runner)

    def after_train_epoch(self, runner) -> None:
        self._write_twins(runner)

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._write_twins(runner)

    @staticmethod
    def _recorded_checkpoints(runner) -> List[str]:
        """The checkpoints CheckpointHook has recorded in the MessageHub."""
        info = runner.message_hub.runtime_info
        keys = [key for key in info if key == 'last_ckpt' or key.startswith('best_ckpt')]
        return [info[key] for key in keys if info[key] is not None]

    def _write_twins(self, runner) -> None:
        if not is_main_process():  # only rank 0 writes checkpoints
            return
        for path in self._recorded_checkpoints(runner):
            twin = osp.splitext(path)[0] + EMA_SUFFIX
            if not osp.exists(path) or (osp.isfile(twin) and
                                        os.stat(twin).st_mtime_ns >= os.stat(path).st_mtime_ns):
                continue
            # A sharded checkpoint (a folder) is read whole here, its EMA weights gathered into
            # one file: the twin loads anywhere, with torch.load(weights_only=True).
            save_checkpoint(read_checkpoint(path, keys=('meta', 'state_dict')), twin)
            self._remove_orphans(osp.dirname(path))

    @staticmethod
    def _remove_orphans(folder: str) -> None:
        for twin in glob.glob(osp.join(glob.escape(folder), '*' + EMA_SUFFIX)):
            if not osp.exists(twin[:-len(EMA_SUFFIX)] + '.pth'):
                os.remove(twin)
