"""ParamSchedulerHook: steps the runner's parameter schedulers at the right moments.

A scheduler with ``by_epoch=False`` is stepped after every training iteration, one with
``by_epoch=True`` after every training epoch. After a validation epoch, by-epoch schedulers that
need the metrics (``need_val_args``, i.e. ReduceOnPlateau) get ``step(metrics)``. The hook's
priority is LOW so that it runs after the optimizer step and after the hooks that log the lr
used in the iteration that just ended.

``runner.param_schedulers`` is a list of schedulers, or a dict of such lists (one per optimizer),
or None (nothing to do). Same as MMEngine 0.10, including skipping ``after_val_epoch`` when the
runner has no built train loop (a ``runner.val()`` on its own must not move the schedules).
"""
from typing import Dict, Optional

from ..optim.scheduler.param_scheduler import _ParamScheduler
from ..registry import HOOKS
from .hook import DATA_BATCH, Hook


def _scheduler_lists(runner) -> list:
    """The runner's schedulers as a list of lists; TypeError on anything else."""
    schedulers = runner.param_schedulers
    if isinstance(schedulers, list):
        return [schedulers]
    if isinstance(schedulers, dict):
        return list(schedulers.values())
    raise TypeError('runner.param_schedulers should be list of ParamScheduler or a dict '
                    f'containing list of ParamScheduler, but got {schedulers}')


@HOOKS.register_module()
class ParamSchedulerHook(Hook):
    """Step learning-rate/momentum schedulers after each train iteration or epoch."""

    priority = 'LOW'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'after_train_iter after_train_epoch': '-> lr',
        'after_val_epoch': 'metrics:* -> lr',  # ReduceOnPlateau-style schedulers
    }

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        self._step(runner, by_epoch=False)

    def after_train_epoch(self, runner) -> None:
        self._step(runner, by_epoch=True)

    def _step(self, runner, by_epoch: bool) -> None:
        if runner.param_schedulers is None:
            return
        for schedulers in _scheduler_lists(runner):
            if not isinstance(schedulers, list):
                raise TypeError(f'expected a list of schedulers, but got {type(schedulers)}')
            for scheduler in schedulers:
                if scheduler.by_epoch == by_epoch:
                    scheduler.step()

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        # Without metrics there is nothing to react to (and the epoch was already counted by
        # after_train_epoch); without a train loop there is no schedule to advance.
        if runner.param_schedulers is None or metrics is None:
            return
        if not runner.train_loop_built:
            return
        for schedulers in _scheduler_lists(runner):
            # Entries that are still config dicts mean the schedulers are not built yet.
            if not (isinstance(schedulers, list)
                    and all(isinstance(s, _ParamScheduler) for s in schedulers)):
                continue
            for scheduler in schedulers:
                if scheduler.by_epoch and getattr(scheduler, 'need_val_args', False):
                    scheduler.step(metrics)
