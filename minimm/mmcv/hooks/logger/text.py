"""TextLoggerHook: MMCV 1.x's console lines and its ``{timestamp}.log.json`` file.

Console (``runner.logger.info``)::

    Epoch [1][2/3]	lr: 5.500e-02, eta: 0:00:00, time: 0.004, data_time: 0.002, loss: -0.2166
    Epoch(val) [1][2]	loss: -0.2081

JSON: ``runner.meta``, then a line per log call (``mode``, ``epoch``, ``iter``, ``lr``, ``memory``
on CUDA, the log vars; floats to 5 decimals), as MMCV's ``analyze_logs.py`` reads. Left out
compared with MMCV 1.7: ``out_dir`` on file backends other than the local disk.
"""
import datetime
import json
import os
import os.path as osp
from collections import OrderedDict

import torch
import torch.distributed as dist

from ....hooks.logger_hook import copy_logs
from ....logging.vis_backend import json_default
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class TextLoggerHook(LoggerHook):
    """Log to the console and to ``work_dir/{timestamp}.log.json``; ``out_dir``: where to copy
    the log files after the run (``keep_local=False`` then deletes the originals)."""

    def __init__(self, by_epoch: bool = True, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, interval_exp_name: int = 1000, out_dir=None,
                 out_suffix=('.log.json', '.log', '.py'), keep_local: bool = True,
                 file_client_args=None):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        if out_dir is None and file_client_args is not None:
            raise ValueError('file_client_args should be "None" when `out_dir` is not specified.')
        if file_client_args not in (None, dict(backend='disk')):
            raise ValueError(f'minimm copies logs to a local out_dir only, got {file_client_args}')
        self.interval_exp_name, self.out_dir = interval_exp_name, out_dir
        self.out_suffix, self.keep_local = out_suffix, keep_local
        self.time_sec_tot = 0

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if self.out_dir is not None:
            self.out_dir = osp.join(self.out_dir, osp.basename(runner.work_dir.rstrip(osp.sep)))
            runner.logger.info(f'Text logs will be saved to {self.out_dir} after the training '
                               'process.')
        self.start_iter = runner.iter
        self.json_log_path = osp.join(runner.work_dir, f'{runner.timestamp}.log.json')
        if runner.meta is not None:
            self._dump_log(runner.meta, runner)

    def _get_max_memory(self, runner) -> int:
        device = getattr(runner.model, 'output_device', None)
        mem_mb = torch.tensor([torch.cuda.max_memory_allocated(device=device) // 2**20],
                              dtype=torch.int, device=device)
        if runner.world_size > 1:
            dist.reduce(mem_mb, 0, op=dist.ReduceOp.MAX)
        return mem_mb.item()

    def _log_info(self, log_dict: dict, runner) -> None:
        if runner.meta is not None and 'exp_name' in runner.meta and (
                self.every_n_iters(runner, self.interval_exp_name)
                or self.by_epoch and self.end_of_epoch(runner)):
            runner.logger.info(f'Exp name: {runner.meta["exp_name"]}')
        if log_dict['mode'] == 'train':
            lr = log_dict['lr']
            lr_str = ' '.join(f'lr_{k}: {v:.3e}' for k, v in lr.items()) \
                if isinstance(lr, dict) else f'lr: {lr:.3e}'
            if self.by_epoch:
                log_str = f'Epoch [{log_dict["epoch"]}][{log_dict["iter"]}/' \
                          f'{len(runner.data_loader)}]\t'
            else:
                log_str = f'Iter [{log_dict["iter"]}/{runner.max_iters}]\t'
            log_str += f'{lr_str}, '
            if 'time' in log_dict:
                # ETA from the mean time per iteration since this run started.
                self.time_sec_tot += log_dict['time'] * self.interval
                time_sec_avg = self.time_sec_tot / (runner.iter - self.start_iter + 1)
                eta_sec = time_sec_avg * (runner.max_iters - runner.iter - 1)
                log_str += f'eta: {datetime.timedelta(seconds=int(eta_sec))}, '
                log_str += f'time: {log_dict["time"]:.3f}, ' \
                           f'data_time: {log_dict["data_time"]:.3f}, '
                if torch.cuda.is_available():
                    log_str += f'memory: {log_dict["memory"]}, '
        elif self.by_epoch:
            log_str = f'Epoch({log_dict["mode"]}) [{log_dict["epoch"]}][{log_dict["iter"]}]\t'
        else:
            log_str = f'Iter({log_dict["mode"]}) [{log_dict["iter"]}]\t'
        skip = ('mode', 'Epoch', 'iter', 'lr', 'time', 'data_time', 'memory', 'epoch')
        log_str += ', '.join(f'{name}: {val:.4f}' if isinstance(val, float) else f'{name}: {val}'
                             for name, val in log_dict.items() if name not in skip)
        runner.logger.info(log_str)

    def _round_float(self, items):
        if isinstance(items, list):
            return [self._round_float(item) for item in items]
        return round(items, 5) if isinstance(items, float) else items

    def _dump_log(self, log_dict: dict, runner) -> None:
        if runner.rank == 0:
            json_log = OrderedDict((k, self._round_float(v)) for k, v in log_dict.items())
            with open(self.json_log_path, 'a+') as f:
                json.dump(json_log, f, default=json_default)
                f.write('\n')

    def log(self, runner) -> OrderedDict:
        output = runner.log_buffer.output
        # An EvalHook reports how many batches it evaluated; MMCV shows that as the iter.
        cur_iter = output.pop('eval_iter_num') if 'eval_iter_num' in output \
            else self.get_iter(runner, inner_iter=True)
        log_dict = OrderedDict(mode=self.get_mode(runner), epoch=self.get_epoch(runner),
                               iter=cur_iter)
        cur_lr = runner.current_lr()
        log_dict['lr'] = {k: v[0] for k, v in cur_lr.items()} if isinstance(cur_lr, dict) \
            else cur_lr[0]
        if 'time' in output and torch.cuda.is_available():
            log_dict['memory'] = self._get_max_memory(runner)
        log_dict = dict(log_dict, **output)
        self._log_info(log_dict, runner)
        self._dump_log(log_dict, runner)
        return log_dict

    def after_run(self, runner) -> None:
        if self.out_dir is None:
            return
        for path in copy_logs(runner.work_dir, self.out_dir, self.out_suffix, runner.logger):
            if not self.keep_local:
                os.remove(path)
                runner.logger.info(f'{path} was removed due to the `self.keep_local=False`')
