"""LoggerHook: decide when to log, print the line, and send the scalars to the visualizer.

What the line says is the LogProcessor's job (``runner.log_processor``); where scalars end up is
the Visualizer's (``runner.visualizer``). This hook owns the *when*:

- training: every ``interval`` iterations of the epoch (``every_n_inner_iters``), plus the last
  iteration of the epoch when ``ignore_last=False`` or when the epoch is not longer than
  ``interval`` (otherwise a short epoch would never log: mmengine#935); every
  ``interval_exp_name`` iterations and at each epoch end it also prints ``Exp name: ...``.
  Scalars go to ``{log_dir}/vis_data/scalars.json`` and ``{timestamp}.json`` with
  ``step = iter + 1``.
- validation/test iterations: a progress line every ``interval`` iterations.
- end of validation: the metrics line; scalars logged with ``step = epoch`` when
  ``log_metric_by_epoch`` else ``iter`` (0 in a val-only run).
- end of test: the metrics line, and the tags dumped as JSON to ``{log_dir}/{timestamp}.json``.
- after the run: close the visualizer; with ``out_dir``, copy the files ending in ``out_suffix``
  from the log folder to ``out_dir/basename(work_dir)`` (and delete the local ones unless
  ``keep_local``).

The text ``{timestamp}.log`` file is written by the runner's MMLogger file handler, not here.
Left out compared with MMEngine: remote storage (``file_client_args``/``backend_args`` must stay
None; ``out_dir`` is a local folder).
"""
import json
import math
import os
import os.path as osp
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ..console_details import DETAIL
from ..dist import is_main_process
from ..plain_data import to_plain_data
from ..registry import HOOKS
from .hook import DATA_BATCH, Hook


@HOOKS.register_module()
class LoggerHook(Hook):
    """Log training/validation/test progress and metrics (see the module docstring).

    Args:
        interval: log every ``interval`` iterations.
        ignore_last: skip the incomplete last interval of an epoch (unless the epoch is shorter
            than ``interval``).
        interval_exp_name: print the experiment name every this many iterations.
        out_dir: local folder to copy the logs to after the run.
        out_suffix: which files in the log folder to copy.
        keep_local: keep the local files after copying.
        file_client_args: must be None (no remote storage in minimm).
        log_metric_by_epoch: validation scalars use the epoch (else the iteration) as step.
        backend_args: must be None (no remote storage in minimm).
    """

    priority = 'BELOW_NORMAL'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run after_val_iter after_test_iter': '',
        'after_train_iter': 'message_hub:train/* -> file:vis_data/*(rank0)',
        'after_val_epoch': 'metrics:* message_hub:val/* -> file:vis_data/*(rank0)',
        'after_test_epoch': 'metrics:* message_hub:test/* -> file:*.json(rank0)',
        'after_run': '-> file:{out_dir}/*',  # every rank uploads, as in MMEngine
    }

    # Checked here, in MMEngine's words; the config check asks this constructor (values.py).
    checked_in_init = ('interval', 'ignore_last', 'interval_exp_name', 'keep_local', 'out_dir',
                       'out_suffix')

    def __init__(self, interval: int = 10, ignore_last: bool = True,
                 interval_exp_name: int = 1000, out_dir: Optional[Union[str, Path]] = None,
                 out_suffix: Union[str, Tuple[str, ...]] = ('.json', '.log', '.py', 'yaml'),
                 keep_local: bool = True, file_client_args: Optional[dict] = None,
                 log_metric_by_epoch: bool = True, backend_args: Optional[dict] = None):
        for name, value in (('interval', interval), ('interval_exp_name', interval_exp_name)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f'{name} must be an integer, got {value!r}')
            if value <= 0:
                raise ValueError(f'{name} must be greater than 0, got {value}')
        for name, value in (('ignore_last', ignore_last), ('keep_local', keep_local)):
            if not isinstance(value, bool):
                raise TypeError(f'{name} must be a boolean, got {value!r}')
        if out_dir is not None and not isinstance(out_dir, (str, Path)):
            raise TypeError(f'out_dir must be a str or Path object, got {type(out_dir)}')
        if not (isinstance(out_suffix, str) or (isinstance(out_suffix, (tuple, list))
                                                and all(isinstance(s, str) for s in out_suffix))):
            raise TypeError('out_suffix should be a string or a tuple of strings')
        if file_client_args is not None or backend_args is not None:
            raise ValueError('minimm writes logs to local folders only: file_client_args and '
                             'backend_args must be None')
        self.interval = interval
        self.ignore_last = ignore_last
        self.interval_exp_name = interval_exp_name
        self.out_dir = None if out_dir is None else str(out_dir)
        self.out_suffix = out_suffix if isinstance(out_suffix, str) else tuple(out_suffix)
        self.keep_local = keep_local
        self.log_metric_by_epoch = log_metric_by_epoch
        self.json_log_path: Optional[str] = None

    def before_run(self, runner) -> None:
        if self.out_dir is not None:
            basename = osp.basename(str(runner.work_dir).rstrip(osp.sep))
            self.out_dir = osp.join(self.out_dir, basename)
            runner.logger.info(f'Text logs will be saved to {self.out_dir} after the training '
                               'process.')
        self.json_log_path = f'{runner.timestamp}.json'
        self._non_finite_seen = False

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        end_of_epoch = self.end_of_epoch(runner.train_dataloader, batch_idx)
        if self.every_n_train_iters(runner, self.interval_exp_name) or end_of_epoch:
            # Once on the terminal; every time in the log file (MMEngine: every time).
            runner.logger.info(f'Exp name: {runner.experiment_name}',
                               extra=DETAIL if getattr(self, '_named', False) else None)
            self._named = True
        if not (self.every_n_inner_iters(batch_idx, self.interval)
                or (end_of_epoch and (not self.ignore_last
                                      or len(runner.train_dataloader) <= self.interval))):
            return
        tag, log_str = runner.log_processor.get_log_after_iter(runner, batch_idx, 'train')
        runner.logger.info(log_str)
        self._warn_at_first_non_finite_loss(runner, tag)
        runner.visualizer.add_scalars(tag, step=runner.iter + 1, file_path=self.json_log_path)

    def _warn_at_first_non_finite_loss(self, runner, tag: dict) -> None:
        """Once per run, warn naming the first iteration whose loss was NaN or infinite (minimm's;
        MMEngine trains on in silence). Judged from the means this log line has just read, so
        the step reads nothing from the device for it; only a mean that is not finite makes it
        look through the logged losses, to find the iteration."""
        if getattr(self, '_non_finite_seen', False):
            return
        bad = [key for key, value in tag.items() if 'loss' in key
               and isinstance(value, (int, float)) and not math.isfinite(value)]
        if not bad:
            return
        self._non_finite_seen = True
        key = bad[0] if bad[0].startswith('train/') else f'train/{bad[0]}'
        values = runner.message_hub.get_scalar(key).data[0]
        first = next(i for i, value in enumerate(values) if not math.isfinite(value))
        iteration = runner.iter + 1 - (len(values) - 1 - first)  # values[-1]: this iteration
        runner.logger.warning(
            f'{key} is {values[first]} at iteration {iteration}: training goes on (as in '
            'MMEngine), but its weights are likely lost. Lower the lr, clip the gradients '
            '(optim_wrapper.clip_grad) or check the data. Said once per run.')

    def after_val_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                       outputs: Optional[Sequence] = None) -> None:
        self._log_eval_iter(runner, batch_idx, 'val')

    def after_test_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                        outputs: Optional[Sequence] = None) -> None:
        self._log_eval_iter(runner, batch_idx, 'test')

    def _log_eval_iter(self, runner, batch_idx: int, mode: str) -> None:
        """Every ``interval`` batches of a val or test epoch, one line for the logger (only the
        epoch's metrics go to the visualizer)."""
        if self.every_n_inner_iters(batch_idx, self.interval):
            line = runner.log_processor.get_log_after_iter(runner, batch_idx, mode)[1]
            runner.logger.info(line)

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        tag, log_str = runner.log_processor.get_log_after_epoch(
            runner, len(runner.val_dataloader), 'val')
        runner.logger.info(log_str)
        runner.visualizer.add_scalars(tag, step=self._metric_step(runner),
                                      file_path=self.json_log_path)

    def _metric_step(self, runner) -> int:
        """Where validation metrics sit on the x axis: the epoch, or the iteration, trained so
        far; 0 in a val-only run (reading runner.epoch there would build the train loop)."""
        if not runner.train_loop_built:
            return 0
        return runner.epoch if self.log_metric_by_epoch else runner.iter

    def after_test_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        tag, log_str = runner.log_processor.get_log_after_epoch(
            runner, len(runner.test_dataloader), 'test', with_non_scalar=True)
        runner.logger.info(log_str)
        if is_main_process():  # the log folder is rank 0's (the others compute the same)
            with open(osp.join(runner.log_dir, self.json_log_path), 'w') as f:
                json.dump(to_plain_data(tag, 'test metrics', for_json=True), f)

    def after_run(self, runner) -> None:
        runner.visualizer.close()
        if self.out_dir is None or not is_main_process():
            return
        copied = copy_logs(runner.log_dir, self.out_dir, self.out_suffix, runner.logger)
        if not self.keep_local:
            runner.logger.info(f'The local log files were removed due to keep_local=False. You '
                               f'can check the running logs in {self.out_dir}')
            for path in copied:
                os.remove(path)


def copy_logs(src_dir: str, out_dir: str, suffix, logger) -> List[str]:
    """Copy the files of ``src_dir`` whose names end with ``suffix`` to the same relative paths
    under ``out_dir`` (MMEngine's and MMCV's "upload" of the logs); return the copied paths."""
    copied = []
    for root, _, files in os.walk(src_dir):
        for filename in sorted(files):
            if not filename.endswith(suffix):
                continue
            local_path = osp.join(root, filename)
            out_path = osp.join(out_dir, osp.relpath(local_path, src_dir))
            os.makedirs(osp.dirname(out_path), exist_ok=True)
            shutil.copyfile(local_path, out_path)
            copied.append(local_path)
            logger.info(f'The file {local_path} has been uploaded to {out_path}.')
    return copied
