"""Two extras of minimm's EMAHook that MMEngine 0.10's EMAHook does not have (both off by default).

* ``save_ema_checkpoint=True`` (``EMAOnlyCheckpoints``): beside every checkpoint the runner saves,
  also write ``<name>_ema.pth`` holding ``meta`` and only the EMA weights as ``state_dict``, a
  small file to deploy (mmengine#1678). The path comes from ``runner.checkpoint_path_being_saved``,
  which the runner sets while ``before_save_checkpoint`` hooks run. EMA-only files whose regular
  checkpoint is gone (deleted by ``max_keep_ckpts`` or replaced as the best) are deleted after the
  next EMA-only file is written, and at the end of training.
* ``eval_raw_and_ema=True`` (``evaluate_raw_weights``): after each validation epoch (on the EMA
  weights), evaluate the raw weights too, with the validation loop's dataloader and evaluator (no
  per-iteration hooks for the second pass), and add ``raw/<name>`` to the epoch's metrics and to
  the MessageHub (``val/raw/<name>``), so the LoggerHook line shows both. EMAHook must then run
  before the LoggerHook, i.e. keep a priority above BELOW_NORMAL.

Both use only the runner's public attributes and the checkpoint file helpers.
"""
import glob
import os
import os.path as osp
from typing import Dict, Set

import torch

from ..checkpoint import save_checkpoint

EMA_SUFFIX = '_ema.pth'


class EMAOnlyCheckpoints:
    """Writes the EMA-only twin of each checkpoint; deletes twins whose checkpoint is gone."""

    def __init__(self):
        self._folders: Set[str] = set()

    def save(self, checkpoint: dict, path: str) -> None:
        """Write ``<path without .pth>_ema.pth`` from ``checkpoint`` after EMAHook's swap (its
        ``state_dict`` holds the EMA weights), then delete orphaned twins."""
        ema_path = osp.splitext(path)[0] + EMA_SUFFIX
        save_checkpoint(dict(meta=checkpoint['meta'], state_dict=checkpoint['state_dict']),
                        ema_path)
        self._folders.add(osp.dirname(ema_path))
        self.prune(keep=ema_path)  # its own checkpoint is written after the hooks

    def prune(self, keep: str = '') -> None:
        for folder in self._folders:
            for ema_path in glob.glob(osp.join(glob.escape(folder), '*' + EMA_SUFFIX)):
                if ema_path != keep and not osp.exists(ema_path[:-len(EMA_SUFFIX)] + '.pth'):
                    os.remove(ema_path)


def evaluate_raw_weights(runner, metrics: Dict[str, float]) -> None:
    """Evaluate the model's (raw, swapped-back) weights on the val set; add ``raw/`` metrics."""
    loop = runner.val_loop
    with torch.no_grad():
        for data_batch in loop.dataloader:
            outputs = runner.model.val_step(data_batch)
            loop.evaluator.process(data_samples=outputs, data_batch=data_batch)
    raw_metrics = loop.evaluator.evaluate(len(loop.dataloader.dataset))
    for name, value in raw_metrics.items():
        metrics[f'raw/{name}'] = value
        # RuntimeInfoHook (VERY_HIGH) has already recorded this epoch's metrics.
        runner.message_hub.update_scalar(f'val/raw/{name}', value)
