"""CheckInvalidLossHook: stop training when the loss becomes NaN or infinite.

This is the custom hook of the classic MMEngine hook article. MMEngine has no such hook;
MMDetection keeps its own in ``mmdet/engine/hooks/`` and registers it in *its* ``HOOKS``, a child
of MMEngine's, so this package does the same (``minidet/registry.py``). The article's line:

    assert torch.isfinite(outputs['loss']), runner.logger.info('loss become infinite or NaN!')

That line has three problems, and this hook fixes them:

* ``python -O`` removes every ``assert``, so the check silently disappears in optimised runs.
* The assert's message is the *return value* of ``logger.info``, which is ``None``: the log gets
  a line, but the ``AssertionError`` itself says nothing about where or what.
* It reads like a guard, but ``after_train_iter`` runs after ``train_step``, so the optimizer has
  already applied the bad step. The hook stops training on garbage; it cannot undo the step.

Here the error is a real exception (``FloatingPointError``) naming the iteration and the value.
Like the article's hook it looks only every ``interval`` iterations, so a NaN can go unnoticed
for up to ``interval - 1`` steps; ``interval=1`` checks every step.
"""
import math
from typing import Optional

import torch

from minimm.hooks import Hook
from minimm.hooks.hook import DATA_BATCH

from minidet.registry import HOOKS


@HOOKS.register_module()
class CheckInvalidLossHook(Hook):
    """Raise ``FloatingPointError`` when ``outputs['loss']`` is NaN or infinite.

    Args:
        interval: check every ``interval`` training iterations (counted from 1, as
            ``every_n_train_iters``).
    """

    priority = 'NORMAL'

    def __init__(self, interval: int = 50) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f'interval must be a positive int, but got {interval!r}')
        self.interval = interval

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        if not self.every_n_train_iters(runner, self.interval):
            return
        if not isinstance(outputs, dict) or 'loss' not in outputs:
            raise KeyError(f"CheckInvalidLossHook needs outputs['loss'] from train_step, but got "
                           f'{sorted(outputs) if isinstance(outputs, dict) else outputs!r}')
        loss = outputs['loss']
        value = loss.item() if isinstance(loss, torch.Tensor) else float(loss)
        if not math.isfinite(value):
            raise FloatingPointError(
                f'the loss is {value} at iteration {runner.iter + 1} (epoch {runner.epoch + 1}, '
                f'batch {batch_idx}); this step has already been applied to the weights')
