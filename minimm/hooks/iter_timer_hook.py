"""IterTimerHook: measure data-loading and iteration time, and estimate the time left (eta).

Per iteration it records two scalars in the MessageHub, ``{mode}/data_time`` (from the end of the
previous iteration to the start of this one: waiting for the dataloader) and ``{mode}/time`` (the
whole iteration including data), and the info ``eta`` in seconds:

- train: ``eta = avg * (max_iters - iter - 1)`` with ``avg`` the total measured time divided by the
  iterations run *in this process* (``iter - start_iter + 1``), so a resumed run's estimate is not
  diluted by iterations it never timed;
- val/test: the same over the current dataloader, restarting every epoch.

The LogProcessor averages ``time``/``data_time`` over its window and prints ``eta`` as H:MM:SS.
Same behaviour as MMEngine 0.10.
"""
import time
from typing import Optional, Sequence, Union

from ..registry import HOOKS
from .hook import DATA_BATCH, Hook


@HOOKS.register_module()
class IterTimerHook(Hook):
    """Record ``{mode}/data_time``, ``{mode}/time`` and ``eta`` in the MessageHub."""

    priority = 'NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        '*': '',  # the clock is the hook's own
        'before_train_iter before_val_iter before_test_iter': '-> message_hub:*/data_time',
        'after_train_iter after_val_iter after_test_iter': '-> message_hub:*/time message_hub:eta',
    }

    def __init__(self):
        self.time_sec_tot = 0.0
        self.time_sec_test_val = 0.0
        self.start_iter = 0

    def before_train(self, runner) -> None:
        self.start_iter = runner.iter

    def _before_epoch(self, runner, mode: str = 'train') -> None:
        self.t = time.time()

    def _before_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                     mode: str = 'train') -> None:
        runner.message_hub.update_scalar(f'{mode}/data_time', time.time() - self.t)

    def _after_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                    outputs: Optional[Union[Sequence, dict]] = None, mode: str = 'train') -> None:
        message_hub = runner.message_hub
        iter_time = time.time() - self.t
        message_hub.update_scalar(f'{mode}/time', iter_time)
        self.t = time.time()
        if mode == 'train':
            self.time_sec_tot += iter_time
            done = runner.iter  # read once: a runner counter is a property chain
            time_sec_avg = self.time_sec_tot / (done - self.start_iter + 1)
            eta_sec = time_sec_avg * (runner.max_iters - done - 1)
        else:
            dataloader = runner.val_dataloader if mode == 'val' else runner.test_dataloader
            self.time_sec_test_val += iter_time
            time_sec_avg = self.time_sec_test_val / (batch_idx + 1)
            eta_sec = time_sec_avg * (len(dataloader) - batch_idx - 1)
        message_hub.update_info('eta', eta_sec)

    def _after_epoch(self, runner, mode: str = 'train') -> None:
        if mode != 'train':
            self.time_sec_test_val = 0.0
