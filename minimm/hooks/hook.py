"""Hook: the base class of everything that runs "around" training.

A hook is an object with methods named after *stages* of a run (``before_train_epoch``,
``after_train_iter``...). The Runner's loops call ``runner.call_hook(stage, **kwargs)`` at each
stage; every registered hook that implements that stage is called, in priority order.

The 22 stages, their order and their keyword arguments (``batch_idx``, ``data_batch``, ``outputs``,
``metrics``, ``checkpoint``) are MMEngine 0.10's. The train/val/test variants of the epoch and iter
stages funnel into ``_before_epoch``/``_after_epoch``/``_before_iter``/``_after_iter`` with a
``mode`` argument, so a hook that treats all three alike overrides one method.

Different from MMEngine: ``get_triggered_stages`` returns stages in ``Hook.stages`` order (MMEngine
returns them from a set, in no fixed order).
"""
from typing import Dict, List, Optional, Sequence, Union

from ..utils.misc import is_method_overridden

DATA_BATCH = Optional[Union[dict, tuple, list]]


class Hook:
    """Base hook: every stage is a no-op; subclasses override the stages they need."""

    priority = 'NORMAL'
    stages = ('before_run', 'after_load_checkpoint', 'before_train', 'before_train_epoch',
              'before_train_iter', 'after_train_iter', 'after_train_epoch', 'before_val',
              'before_val_epoch', 'before_val_iter', 'after_val_iter', 'after_val_epoch',
              'after_val', 'before_save_checkpoint', 'after_train', 'before_test',
              'before_test_epoch', 'before_test_iter', 'after_test_iter', 'after_test_epoch',
              'after_test', 'after_run')

    def __repr__(self) -> str:
        # `print(runner.hooks)` then reads as a list of hooks with their priorities.
        return f'{type(self).__name__}(priority={self.priority!r})'

    # Whole-run stages.
    def before_run(self, runner) -> None:
        """Called once when ``runner.train()``/``val()``/``test()`` starts."""

    def after_run(self, runner) -> None:
        """Called once when ``runner.train()``/``val()``/``test()`` ends."""

    def before_train(self, runner) -> None:
        """Called before the first training epoch."""

    def after_train(self, runner) -> None:
        """Called after the last training epoch."""

    def before_val(self, runner) -> None:
        """Called at the start of each validation run."""

    def after_val(self, runner) -> None:
        """Called at the end of each validation run."""

    def before_test(self, runner) -> None:
        """Called at the start of testing."""

    def after_test(self, runner) -> None:
        """Called at the end of testing."""

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Called with the checkpoint dict before it is written; hooks may add or change keys."""

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Called with a loaded checkpoint dict before the runner applies it."""

    # Epoch stages: the three modes funnel into _before_epoch / _after_epoch. These funnels, and
    # the stage methods' signatures, are the API hooks override: they keep MMEngine's shape.
    def before_train_epoch(self, runner) -> None:
        self._before_epoch(runner, mode='train')

    def before_val_epoch(self, runner) -> None:
        self._before_epoch(runner, mode='val')

    def before_test_epoch(self, runner) -> None:
        self._before_epoch(runner, mode='test')

    def after_train_epoch(self, runner) -> None:
        self._after_epoch(runner, mode='train')

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._after_epoch(runner, mode='val')

    def after_test_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        self._after_epoch(runner, mode='test')

    # Iteration stages: the three modes funnel into _before_iter / _after_iter.
    def before_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None) -> None:
        self._before_iter(runner, batch_idx=batch_idx, data_batch=data_batch, mode='train')

    def before_val_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None) -> None:
        self._before_iter(runner, batch_idx=batch_idx, data_batch=data_batch, mode='val')

    def before_test_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None) -> None:
        self._before_iter(runner, batch_idx=batch_idx, data_batch=data_batch, mode='test')

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        self._after_iter(runner, batch_idx=batch_idx, data_batch=data_batch, outputs=outputs,
                         mode='train')

    def after_val_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                       outputs: Optional[Sequence] = None) -> None:
        self._after_iter(runner, batch_idx=batch_idx, data_batch=data_batch, outputs=outputs,
                         mode='val')

    def after_test_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                        outputs: Optional[Sequence] = None) -> None:
        self._after_iter(runner, batch_idx=batch_idx, data_batch=data_batch, outputs=outputs,
                         mode='test')

    # The funnels.
    def _before_epoch(self, runner, mode: str = 'train') -> None:
        """Shared body of ``before_{train,val,test}_epoch``."""

    def _after_epoch(self, runner, mode: str = 'train') -> None:
        """Shared body of ``after_{train,val,test}_epoch``."""

    def _before_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                     mode: str = 'train') -> None:
        """Shared body of ``before_{train,val,test}_iter``."""

    def _after_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                    outputs: Optional[Union[Sequence, dict]] = None, mode: str = 'train') -> None:
        """Shared body of ``after_{train,val,test}_iter``."""

    # Helpers that hooks use to decide whether to act.
    def every_n_epochs(self, runner, n: int, start: int = 0) -> bool:
        """True at the end of every ``n``-th epoch counted from ``start``."""
        dividend = runner.epoch + 1 - start
        return dividend % n == 0 if dividend >= 0 and n > 0 else False

    def every_n_inner_iters(self, batch_idx: int, n: int) -> bool:
        """True on every ``n``-th iteration within the current epoch."""
        return (batch_idx + 1) % n == 0 if n > 0 else False

    def every_n_train_iters(self, runner, n: int, start: int = 0) -> bool:
        """True on every ``n``-th training iteration counted from ``start``."""
        dividend = runner.iter + 1 - start
        return dividend % n == 0 if dividend >= 0 and n > 0 else False

    def end_of_epoch(self, dataloader, batch_idx: int) -> bool:
        """True on the last batch of ``dataloader``."""
        return batch_idx + 1 == len(dataloader)

    def is_last_train_epoch(self, runner) -> bool:
        return runner.epoch + 1 == runner.max_epochs

    def is_last_train_iter(self, runner) -> bool:
        return runner.iter + 1 == runner.max_iters

    def get_triggered_stages(self) -> List[str]:
        """The stages this hook's class overrides, in ``Hook.stages`` order.

        Overriding a funnel (``_after_iter``...) triggers its train, val and test stages.
        """
        funnels = {
            '_before_epoch': ('before_train_epoch', 'before_val_epoch', 'before_test_epoch'),
            '_after_epoch': ('after_train_epoch', 'after_val_epoch', 'after_test_epoch'),
            '_before_iter': ('before_train_iter', 'before_val_iter', 'before_test_iter'),
            '_after_iter': ('after_train_iter', 'after_val_iter', 'after_test_iter'),
        }
        triggered = {s for s in Hook.stages if is_method_overridden(s, Hook, self)}
        for funnel, stages in funnels.items():
            if is_method_overridden(funnel, Hook, self):
                triggered.update(stages)
        return [s for s in Hook.stages if s in triggered]
