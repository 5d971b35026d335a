"""TextLoggerHook: MMCV 1.x's console lines and its ``{timestamp}.log.json`` file.

Each record is printed with ``runner.logger.info``::

    Epoch [1][2/3]	lr: 5.500e-02, eta: 0:00:00, time: 0.004, data_time: 0.002, loss: -0.2166
    Epoch(val) [1][2]	loss: -0.2081

and appended to the JSON file as one line (``mode``, ``epoch``, ``iter``, ``lr``, ``memory`` on
CUDA, then the buffer's values; floats rounded to 5 decimals). The file starts with
``runner.meta``. MMCV's ``tools/analyze_logs.py`` reads exactly this. Left out compared with
MMCV 1.7: ``out_dir`` on a backend other than the local disk (minimm has no ``FileClient``).
"""
import datetime
import glob
import json
import os
import os.path as osp
import shutil
from collections import OrderedDict
from typing import Dict, Optional, Union

import torch
import torch.distributed as dist

from ...utils import json_set_default
from ..hook import HOOKS
from .base import LoggerHook

# Keys the head of a console line already shows; the tail lists every other key.
_IN_THE_HEAD = ('mode', 'Epoch', 'iter', 'lr', 'time', 'data_time', 'memory', 'epoch')


def _peak_memory_mib(device, world_size: int) -> int:
    """This process's peak CUDA memory in MiB; with several ranks the largest of them, reduced to
    rank 0 (the one that writes the log). One process reads no tensor back: no device sync."""
    mib = torch.cuda.max_memory_allocated(device=device) // 2**20
    if world_size == 1:
        return mib
    peak = torch.tensor([mib], dtype=torch.int, device=device)
    dist.reduce(peak, 0, op=dist.ReduceOp.MAX)
    return peak.item()

@HOOKS.register_module()
class TextLoggerHook(LoggerHook):
    """Log to the console and to ``work_dir/{timestamp}.log.json``.

    Args:
        interval_exp_name: print ``Exp name: ...`` (from ``runner.meta``) every so many
            iterations, and at each epoch end.
        out_dir: after the run, copy the work dir's files ending with ``out_suffix`` to
            ``out_dir/<last folder of work_dir>``; ``keep_local=False`` then deletes the originals.
        file_client_args: only the local disk (``dict(backend='disk')``) is supported.
    """

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        'before_run': 'meta -> file:*.log.json(rank0)',
        'before_train_epoch before_val_epoch': '-> log_buffer:*',  # cleared
        'after_train_iter after_train_epoch after_val_epoch':
            'log_buffer:* lr -> file:*.log.json(rank0)',
        'after_run': 'file:* -> file:{out_dir}/*',  # every rank uploads, as in MMCV
    }

    def __init__(self, by_epoch: bool = True, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, interval_exp_name: int = 1000,
                 out_dir: Optional[str] = None, out_suffix: Union[str, tuple] = (
                     '.log.json', '.log', '.py'),
                 keep_local: bool = True, file_client_args: Optional[Dict] = None):
        if out_dir is None and file_client_args is not None:
            raise ValueError('file_client_args should be "None" when `out_dir` is not '
                             'specified.')
        if out_dir is not None and not isinstance(out_dir, str):
            raise TypeError(f'out_dir should be "None" or string, but got {out_dir}')
        if file_client_args not in (None, dict(backend='disk')):
            raise ValueError(f'minimm copies logs to a local out_dir only, got {file_client_args}')
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.interval_exp_name = interval_exp_name
        self.out_dir = out_dir
        self.out_suffix = out_suffix
        self.keep_local = keep_local
        self.file_client_args = file_client_args
        self.time_sec_tot = 0  # seconds spent in the iterations logged so far, for the ETA

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if self.out_dir is not None:
            # each run gets its own folder under out_dir, named like its work dir
            run_folder = osp.basename(runner.work_dir.rstrip(osp.sep))
            self.out_dir = osp.join(self.out_dir, run_folder)
            runner.logger.info(f'Text logs will be saved to {self.out_dir} by disk after the '
                               'training process.')
        # A resumed run starts counting iterations here, so the ETA only uses its own timings.
        self.start_iter = runner.iter
        self.json_log_path = osp.join(runner.work_dir, f'{runner.timestamp}.log.json')
        if runner.meta is not None:
            self._dump_log(runner.meta, runner)

    # --- building the record --------------------------------------------------------------------

    def log(self, runner) -> OrderedDict:
        output = runner.log_buffer.output
        # An EvalHook leaves the size of its loader there: the "iter" of its results line.
        if 'eval_iter_num' in output:
            cur_iter = output.pop('eval_iter_num')
        else:
            cur_iter = self.get_iter(runner, inner_iter=True)
        record = OrderedDict(mode=self.get_mode(runner), epoch=self.get_epoch(runner),
                             iter=cur_iter, lr=self._first_group_lr(runner))
        # memory only on train iterations (they have 'time'), and only when there is a GPU
        if 'time' in output and torch.cuda.is_available():
            record['memory'] = self._get_max_memory(runner)
        record.update(output)  # a buffer key wins over a same-named one above
        self._log_info(record, runner)
        self._dump_log(record, runner)
        return record

    @staticmethod
    def _first_group_lr(runner):
        """The learning rate of param group 0, or ``{optimizer name: that lr}``."""
        per_group = runner.current_lr()
        if isinstance(per_group, list):
            return per_group[0]
        return {name: groups[0] for name, groups in per_group.items()}

    def _get_max_memory(self, runner) -> int:
        device = getattr(runner.model, 'output_device', None)
        return _peak_memory_mib(device, runner.world_size)

    # --- the console line -----------------------------------------------------------------------

    def _log_info(self, log_dict: Dict, runner) -> None:
        if self._exp_name_due(runner):
            runner.logger.info(f'Exp name: {runner.meta["exp_name"]}')

        if log_dict['mode'] == 'train':
            head = self._train_head(log_dict, runner)
        elif self.by_epoch:
            head = f'Epoch({log_dict["mode"]}) [{log_dict["epoch"]}][{log_dict["iter"]}]\t'
        else:
            head = f'Iter({log_dict["mode"]}) [{log_dict["iter"]}]\t'
        rest = [f'{key}: {value:.4f}' if isinstance(value, float) else f'{key}: {value}'
                for key, value in log_dict.items() if key not in _IN_THE_HEAD]
        runner.logger.info(head + ', '.join(rest))

    def _exp_name_due(self, runner) -> bool:
        if 'exp_name' not in (runner.meta or {}):
            return False
        # end_of_epoch looks at the loader in use, so the name also comes before a val line
        return self.every_n_iters(runner, self.interval_exp_name) or (
            self.by_epoch and self.end_of_epoch(runner))

    def _train_head(self, log_dict: Dict, runner) -> str:
        """``Epoch [e][i/len]\\t`` or ``Iter [i/max]\\t``, the lr, and with timings the ETA."""
        if self.by_epoch:
            head = f'Epoch [{log_dict["epoch"]}][{log_dict["iter"]}/{len(runner.data_loader)}]\t'
        else:
            head = f'Iter [{log_dict["iter"]}/{runner.max_iters}]\t'
        lr = log_dict['lr']
        if isinstance(lr, dict):
            head += ' '.join(f'lr_{name}: {value:.3e}' for name, value in lr.items()) + ', '
        else:
            head += f'lr: {lr:.3e}, '
        if 'time' not in log_dict:
            return head
        head += (f'eta: {self._eta(runner, log_dict["time"])}, '
                 f'time: {log_dict["time"]:.3f}, data_time: {log_dict["data_time"]:.3f}, ')
        if torch.cuda.is_available():
            head += f'memory: {log_dict["memory"]}, '
        return head

    def _eta(self, runner, mean_time: float) -> datetime.timedelta:
        """The time left: this run's mean time per iteration so far, times the iterations left.
        ``mean_time`` is the mean over the last interval, so it stands for ``interval`` of them."""
        self.time_sec_tot += mean_time * self.interval
        per_iter = self.time_sec_tot / (runner.iter + 1 - self.start_iter)
        left = runner.max_iters - (runner.iter + 1)
        return datetime.timedelta(seconds=int(per_iter * left))

    # --- the JSON file ----------------------------------------------------------------------------

    def _round_float(self, items):
        """Round floats to 5 decimals, inside lists too; dicts and other values stay as they are
        (so a dict of learning rates is written unrounded, as in MMCV)."""
        if isinstance(items, float):
            return round(items, 5)
        if isinstance(items, list):
            return list(map(self._round_float, items))
        return items

    def _dump_log(self, log_dict: Dict, runner) -> None:
        if runner.rank != 0:
            return  # one file per run, written by rank 0
        line = json.dumps({key: self._round_float(value) for key, value in log_dict.items()},
                          default=json_set_default)
        with open(self.json_log_path, 'a') as f:
            f.write(line + '\n')

    def after_run(self, runner) -> None:
        if self.out_dir is None:
            return
        for path in sorted(glob.glob(osp.join(runner.work_dir, '**', '*'), recursive=True)):
            if not osp.isfile(path) or not path.endswith(self.out_suffix):
                continue
            target = osp.join(self.out_dir, osp.relpath(path, runner.work_dir))
            os.makedirs(osp.dirname(target), exist_ok=True)
            shutil.copyfile(path, target)
            runner.logger.info(f'The file {path} has been uploaded to {target}.')
            if not self.keep_local:
                os.remove(path)
                runner.logger.info(f'{path} was removed due to the `self.keep_local=False`')
