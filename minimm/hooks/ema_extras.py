"""Two extras of minimm's EMAHook that MMEngine 0.10's EMAHook does not have (both off by default).

* ``save_ema_checkpoint=True``: beside every checkpoint the runner saves, also write
  ``<name>_ema.pth`` holding ``meta`` and only the EMA weights as ``state_dict``, a small file to
  deploy (mmengine#1678). The path comes from ``runner.checkpoint_path_being_saved``, which the
  runner sets while ``before_save_checkpoint`` hooks run. EMA-only files whose regular checkpoint
  is gone (deleted by ``max_keep_ckpts`` or replaced as the best) are deleted at the next save.
* ``eval_raw_and_ema=True``: after each validation epoch (on the EMA weights), evaluate the raw
  weights too, with the validation loop's own ``evaluate_model`` (no per-iteration hooks for the
  second pass), and add ``raw/<name>`` to the epoch's metrics and to the MessageHub
  (``val/raw/<name>``), so the LoggerHook line shows both. EMAHook must then run before the
  LoggerHook, i.e. keep a priority above BELOW_NORMAL.

Both use only the runner's public attributes and the checkpoint helpers.
"""
import glob
import os
import os.path as osp
from typing import Dict

from ..runner.checkpoint import save_checkpoint

EMA_SUFFIX = '_ema.pth'


def save_ema_only_checkpoint(checkpoint: dict, path: str) -> None:
    """Write ``<path without .pth>_ema.pth`` (``meta`` + the EMA ``state_dict``, which
    ``checkpoint['state_dict']`` holds after EMAHook's swap); delete orphaned EMA files."""
    ema_path = osp.splitext(path)[0] + EMA_SUFFIX
    for old in glob.glob(osp.join(glob.escape(osp.dirname(path)), '*' + EMA_SUFFIX)):
        regular = old[:-len(EMA_SUFFIX)] + '.pth'
        if old != ema_path and not osp.exists(regular):
            os.remove(old)
    save_checkpoint(dict(meta=checkpoint['meta'], state_dict=checkpoint['state_dict']),
                    ema_path)


def evaluate_raw_weights(runner, metrics: Dict[str, float]) -> None:
    """Evaluate the model's (raw, swapped-back) weights on the val set; add ``raw/`` metrics."""
    raw_metrics = runner.val_loop.evaluate_model(iter_hooks=False)
    for name, value in raw_metrics.items():
        metrics[f'raw/{name}'] = value
        # RuntimeInfoHook (VERY_HIGH) has already recorded this epoch's metrics.
        runner.message_hub.update_scalar(f'val/raw/{name}', value)
