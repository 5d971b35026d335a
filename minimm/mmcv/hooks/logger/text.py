"""TextLoggerHook: MMCV 1.x's console lines and its ``{timestamp}.log.json`` file.

Console (``runner.logger.info``)::

    Epoch [1][2/3]	lr: 5.500e-02, eta: 0:00:00, time: 0.004, data_time: 0.002, loss: -0.2166
    Epoch(val) [1][2]	loss: -0.2081

JSON: ``runner.meta``, then a line per log call (``mode``, ``epoch``, ``iter``, ``lr``, ``memory``
on CUDA, the log vars; floats to 5 decimals), as MMCV's ``analyze_logs.py`` reads. Left out
compared with MMCV 1.7: ``out_dir`` on file backends other than the local disk (minimm has no
``FileClient``; ``file_client_args`` may only name the disk).
"""
import datetime
import glob
import json
import os
import os.path as osp
from collections import OrderedDict
from typing import Dict, Optional, Union

import torch
import torch.distributed as dist

from ...utils import json_set_default
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class TextLoggerHook(LoggerHook):
    """Log to the console and to ``work_dir/{timestamp}.log.json``.

    Args:
        interval_exp_name: print ``runner.meta['exp_name']`` every so many iterations (and at
            each epoch end).
        out_dir: after the run, copy the files of the work dir ending with ``out_suffix`` to
            ``out_dir/<last folder of work_dir>``; ``keep_local=False`` then deletes them.
    """

    def __init__(self, by_epoch: bool = True, interval: int = 10, ignore_last: bool = True,
                 reset_flag: bool = False, interval_exp_name: int = 1000,
                 out_dir: Optional[str] = None,
                 out_suffix: Union[str, tuple] = ('.log.json', '.log', '.py'),
                 keep_local: bool = True, file_client_args: Optional[Dict] = None):
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        self.by_epoch = by_epoch
        self.time_sec_tot = 0
        self.interval_exp_name = interval_exp_name

        if out_dir is None and file_client_args is not None:
            raise ValueError('file_client_args should be "None" when `out_dir` is not '
                             'specified.')
        self.out_dir = out_dir

        if not (out_dir is None or isinstance(out_dir, str)):
            raise TypeError(f'out_dir should be "None" or string, but got {out_dir}')
        self.out_suffix = out_suffix

        self.keep_local = keep_local
        if file_client_args not in (None, dict(backend='disk')):
            raise ValueError(f'minimm copies logs to a local out_dir only, got {file_client_args}')
        self.file_client_args = file_client_args

    def before_run(self, runner) -> None:
        super().before_run(runner)

        if self.out_dir is not None:
            # the final out_dir is out_dir joined with the last folder of the work dir
            basename = osp.basename(runner.work_dir.rstrip(osp.sep))
            self.out_dir = osp.join(self.out_dir, basename)
            runner.logger.info(f'Text logs will be saved to {self.out_dir} by disk after the '
                               'training process.')

        self.start_iter = runner.iter
        self.json_log_path = osp.join(runner.work_dir, f'{runner.timestamp}.log.json')
        if runner.meta is not None:
            self._dump_log(runner.meta, runner)

    def _get_max_memory(self, runner) -> int:
        device = getattr(runner.model, 'output_device', None)
        mem = torch.cuda.max_memory_allocated(device=device)
        mem_mb = torch.tensor([int(mem) // (1024 * 1024)], dtype=torch.int, device=device)
        if runner.world_size > 1:
            dist.reduce(mem_mb, 0, op=dist.ReduceOp.MAX)
        return mem_mb.item()

    def _log_info(self, log_dict: Dict, runner) -> None:
        # the exp name, every `interval_exp_name` iterations and at the end of each epoch
        if runner.meta is not None and 'exp_name' in runner.meta:
            if (self.every_n_iters(runner, self.interval_exp_name)) or (
                    self.by_epoch and self.end_of_epoch(runner)):
                exp_info = f'Exp name: {runner.meta["exp_name"]}'
                runner.logger.info(exp_info)

        if log_dict['mode'] == 'train':
            if isinstance(log_dict['lr'], dict):
                lr_str = []
                for k, val in log_dict['lr'].items():
                    lr_str.append(f'lr_{k}: {val:.3e}')
                lr_str = ' '.join(lr_str)
            else:
                lr_str = f'lr: {log_dict["lr"]:.3e}'

            # by epoch: Epoch [4][100/1000]; by iter: Iter [100/100000]
            if self.by_epoch:
                log_str = f'Epoch [{log_dict["epoch"]}]' \
                          f'[{log_dict["iter"]}/{len(runner.data_loader)}]\t'
            else:
                log_str = f'Iter [{log_dict["iter"]}/{runner.max_iters}]\t'
            log_str += f'{lr_str}, '

            if 'time' in log_dict.keys():
                # the ETA from the mean time per iteration since this run started
                self.time_sec_tot += (log_dict['time'] * self.interval)
                time_sec_avg = self.time_sec_tot / (runner.iter - self.start_iter + 1)
                eta_sec = time_sec_avg * (runner.max_iters - runner.iter - 1)
                eta_str = str(datetime.timedelta(seconds=int(eta_sec)))
                log_str += f'eta: {eta_str}, '
                log_str += f'time: {log_dict["time"]:.3f}, ' \
                           f'data_time: {log_dict["data_time"]:.3f}, '
                if torch.cuda.is_available():
                    log_str += f'memory: {log_dict["memory"]}, '
        else:
            # val: by epoch "Epoch(val) [4][1000]", by iter "Iter(val) [1000]" (1000: the
            # length of the val loader)
            if self.by_epoch:
                log_str = f'Epoch({log_dict["mode"]}) ' \
                    f'[{log_dict["epoch"]}][{log_dict["iter"]}]\t'
            else:
                log_str = f'Iter({log_dict["mode"]}) [{log_dict["iter"]}]\t'

        log_items = []
        for name, val in log_dict.items():
            # these are in log_str already
            if name in ['mode', 'Epoch', 'iter', 'lr', 'time', 'data_time', 'memory', 'epoch']:
                continue
            if isinstance(val, float):
                val = f'{val:.4f}'
            log_items.append(f'{name}: {val}')
        log_str += ', '.join(log_items)

        runner.logger.info(log_str)

    def _dump_log(self, log_dict: Dict, runner) -> None:
        json_log = OrderedDict()
        for k, v in log_dict.items():
            json_log[k] = self._round_float(v)
        # only rank 0 appends, one line per record
        if runner.rank == 0:
            with open(self.json_log_path, 'a+') as f:
                json.dump(json_log, f, default=json_set_default)
                f.write('\n')

    def _round_float(self, items):
        if isinstance(items, list):
            return [self._round_float(item) for item in items]
        elif isinstance(items, float):
            return round(items, 5)
        else:
            return items

    def log(self, runner) -> OrderedDict:
        if 'eval_iter_num' in runner.log_buffer.output:
            # an EvalHook's number of batches; it does not touch runner.iter, whatever by_epoch
            cur_iter = runner.log_buffer.output.pop('eval_iter_num')
        else:
            cur_iter = self.get_iter(runner, inner_iter=True)

        log_dict = OrderedDict(mode=self.get_mode(runner), epoch=self.get_epoch(runner),
                               iter=cur_iter)

        # only the lr of the first param group
        cur_lr = runner.current_lr()
        if isinstance(cur_lr, list):
            log_dict['lr'] = cur_lr[0]
        else:
            assert isinstance(cur_lr, dict)
            log_dict['lr'] = {}
            for k, lr_ in cur_lr.items():
                assert isinstance(lr_, list)
                log_dict['lr'].update({k: lr_[0]})

        if 'time' in runner.log_buffer.output:
            if torch.cuda.is_available():
                log_dict['memory'] = self._get_max_memory(runner)

        log_dict = dict(log_dict, **runner.log_buffer.output)

        self._log_info(log_dict, runner)
        self._dump_log(log_dict, runner)
        return log_dict

    def after_run(self, runner) -> None:
        # copy ("upload") the logs to self.out_dir
        if self.out_dir is not None:
            pattern = osp.join(runner.work_dir, '**', '*')
            for local_filepath in sorted(glob.glob(pattern, recursive=True)):
                if not (osp.isfile(local_filepath) and local_filepath.endswith(self.out_suffix)):
                    continue
                filename = osp.relpath(local_filepath, runner.work_dir)
                out_filepath = osp.join(self.out_dir, filename)
                os.makedirs(osp.dirname(out_filepath), exist_ok=True)
                with open(local_filepath) as f, open(out_filepath, 'w') as out:
                    out.write(f.read())

                runner.logger.info(
                    f'The file {local_filepath} has been uploaded to {out_filepath}.')

                if not self.keep_local:
                    os.remove(local_filepath)
                    runner.logger.info(
                        f'{local_filepath} was removed due to the `self.keep_local=False`')
