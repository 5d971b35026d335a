"""RawWeightsEvalHook: with EMAHook, validate the raw weights too, logged as ``raw/<name>``.

A minimm addition. ``EMAHook`` swaps the EMA weights into the model for validation, so the metrics
of a run with EMA are the average's. To compare, this hook evaluates the model once more, on its
raw weights, in ``before_val_epoch`` before ``EMAHook`` swaps the EMA in (its priority,
``ABOVE_NORMAL``, is above EMAHook's ``NORMAL`` and MMDetection's 49). It uses the validation loop's
public parts, ``dataloader`` and ``evaluator``, with ``model.val_step``, and calls no
per-iteration hooks for its pass. The results go to the MessageHub as ``val/raw/<name>``, where
the LoggerHook's line at the end of validation and the visualizer find them beside ``val/<name>``;
the ``metrics`` of the validation epoch (what ``save_best`` ranks) stay the EMA's.
"""
import torch

from ..registry import HOOKS
from .ema_hook import EMAHook
from .hook import Hook


@HOOKS.register_module()
class RawWeightsEvalHook(Hook):
    """Before each validation, evaluate the raw weights and record ``val/raw/<name>``."""

    priority = 'ABOVE_NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': '',
        'before_val_epoch': 'model(old) -> message_hub:val/raw/*',  # before EMAHook's swap
    }

    def before_run(self, runner) -> None:
        mine = runner.hooks.index(self)
        ema = [i for i, hook in enumerate(runner.hooks) if isinstance(hook, EMAHook)]
        if not ema:
            raise ValueError('RawWeightsEvalHook needs an EMAHook in custom_hooks')
        if ema[0] < mine:
            raise ValueError("RawWeightsEvalHook must run before EMAHook: give it a higher "
                             "priority (a lower number) than EMAHook's")

    @torch.no_grad()
    def before_val_epoch(self, runner) -> None:
        loop = runner.val_loop
        runner.model.eval()
        for data_batch in loop.dataloader:
            outputs = runner.model.val_step(data_batch)
            loop.evaluator.process(data_samples=outputs, data_batch=data_batch)
        metrics = loop.evaluator.evaluate(len(loop.dataloader.dataset))
        for name, value in metrics.items():
            runner.message_hub.update_scalar(f'val/raw/{name}', value)
