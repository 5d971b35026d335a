"""LogProcessor: turn the MessageHub's scalars into MMEngine's log lines and JSON tags.

LoggerHook decides *when* to log; this class decides *what the line says*. It reads every scalar
whose key starts with the mode (``train/``, ``val/``, ``test/``), takes the mean over the last
``window_size`` updates for keys matching ``mean_pattern`` (losses, timings) and the latest value
for the rest (``lr``, metrics), then formats them as MMEngine 0.10 does::

    Epoch(train)  [1][ 10/100]  lr: 1.0000e-02  eta: 0:00:12  time: 0.0123  data_time: 0.0012  ...
    Iter(train) [  10/1000]  lr: 1.0000e-02  eta: ...
    Epoch(val) [1][10/10]    accuracy/top1: 90.0000  data_time: 0.0012  time: 0.0034

Numbers are padded so that successive lines align; ``memory`` (peak MB) appears only on CUDA.
Each call also returns ``tag``, the dict that LoggerHook sends to the visualizer (JSON lines).

``custom_cfg`` adds or overrides statistics, e.g.
``[dict(data_src='loss', method_name='mean', window_size='global', log_name='loss_global')]``;
``window_size`` may be an int, ``'epoch'`` (since the epoch started) or ``'global'`` (whole run).

Left out compared with MMEngine: MUSA/NPU memory queries.
"""
import datetime
import re
from collections import OrderedDict
from itertools import chain
from typing import List, Optional, Tuple

import numpy as np
import torch

from ..registry import LOG_PROCESSORS


@LOG_PROCESSORS.register_module()
class LogProcessor:
    """Format training/validation/test logs from the runner's MessageHub.

    Args:
        window_size: how many recent updates the windowed mean covers.
        by_epoch: ``Epoch(...)`` headers with per-epoch counters, or ``Iter(...)`` headers.
        custom_cfg: extra statistics, a list of dicts with ``data_src`` (key without the mode
            prefix), ``method_name`` (a HistoryBuffer statistic: ``'mean'``, ``'max'``, ``'min'``,
            ``'current'``) and optionally ``window_size`` and ``log_name``.
        num_digits: digits after the point for floats (and in ``lr``'s ``e`` format).
        log_with_hierarchy: keep the ``train/``... prefix in the returned tags.
        mean_pattern: regex of keys that are averaged over ``window_size``.
    """

    def __init__(self, window_size: int = 10, by_epoch: bool = True,
                 custom_cfg: Optional[List[dict]] = None, num_digits: int = 4,
                 log_with_hierarchy: bool = False,
                 mean_pattern: str = r'.*(loss|time|data_time|grad_norm).*'):
        self.window_size = window_size
        self.by_epoch = by_epoch
        self.custom_cfg = custom_cfg if custom_cfg else []
        self.num_digits = num_digits
        self.log_with_hierarchy = log_with_hierarchy
        self.mean_pattern = re.compile(mean_pattern)
        self._check_custom_cfg()

    def _check_custom_cfg(self) -> None:
        seen = set()
        for log_cfg in self.custom_cfg:
            for required in ('data_src', 'method_name'):
                if required not in log_cfg:
                    raise KeyError(f'each custom_cfg entry needs a {required}, got {log_cfg}')
            log_name = log_cfg.get('log_name', log_cfg['data_src'])
            # Two entries writing the same name would silently overwrite each other.
            if log_name in seen:
                raise ValueError(f'Found duplicate {log_name} for {log_cfg["data_src"]}. Please '
                                 'check your `custom_cfg` for `log_processor`: give each entry its '
                                 'own `log_name`.')
            seen.add(log_name)
            if not self.by_epoch and log_cfg.get('window_size') == 'epoch':
                raise ValueError('window_size cannot be epoch if LogProcessor.by_epoch is False.')

    def get_log_after_iter(self, runner, batch_idx: int, mode: str) -> Tuple[dict, str]:
        """The tag dict and log line after iteration ``batch_idx`` of ``mode``."""
        if mode not in ('train', 'val', 'test'):
            raise ValueError(f"mode must be 'train', 'val' or 'test', got {mode!r}")
        parsed_cfg = self._parse_windows_size(runner, batch_idx, self.custom_cfg)
        # log_tag feeds the text line (no prefixes); tag goes to the vis backends.
        log_tag = self._collect_scalars(parsed_cfg, runner, mode)
        if self.log_with_hierarchy:
            tag = self._collect_scalars(parsed_cfg, runner, mode, reserve_prefix=True)
        else:
            tag = OrderedDict(log_tag)  # the values are numbers: a shallow copy is a copy

        lr_str_list = []
        for key, value in tag.items():
            if key.endswith('lr'):
                key = self._remove_prefix(key, f'{mode}/')
                log_tag.pop(key)
                lr_str_list.append(f'{key}: {value:.{self.num_digits}e}')
        lr_str = ' '.join(lr_str_list)

        if not self.by_epoch and mode == 'train':
            cur_iter = self._get_iter(runner, batch_idx)
            log_str = self._header(runner, mode, cur_iter, runner.max_iters, align=True)
        else:
            log_str = self._header(runner, mode, batch_idx + 1,
                                   self._get_dataloader_size(runner, mode), align=True)
        if self.by_epoch and mode in ('train', 'val'):
            tag['epoch'] = self._get_epoch(runner, mode)
        tag['iter'] = runner.iter + 1 if runner.train_loop_built else 0
        log_str += f'{lr_str}  '

        # eta/time/data_time come as a group from IterTimerHook.
        if all(k in log_tag for k in ('time', 'data_time')) \
                and 'eta' in runner.message_hub.runtime_info:
            eta = runner.message_hub.get_info('eta')
            log_str += f'eta: {datetime.timedelta(seconds=int(eta))}  '
            log_str += (f'time: {log_tag.pop("time"):.{self.num_digits}f}  '
                        f'data_time: {log_tag.pop("data_time"):.{self.num_digits}f}  ')

        if torch.cuda.is_available():
            max_memory = self._get_max_memory(runner)
            log_str += f'memory: {max_memory}  '
            tag['memory'] = max_memory

        if mode in ('train', 'val'):
            log_items = []
            for name, val in log_tag.items():
                # Validation metrics are only meaningful at the end of the epoch; losses are not.
                if mode == 'val' and not name.startswith('val/loss'):
                    continue
                if isinstance(val, float):
                    val = f'{val:.{self.num_digits}f}'
                log_items.append(f'{name}: {val}')
            log_str += '  '.join(log_items)
        return tag, log_str

    def get_log_after_epoch(self, runner, batch_idx: int, mode: str,
                            with_non_scalar: bool = False) -> Tuple[dict, str]:
        """The tag dict and log line at the end of a val/test epoch (the metrics line)."""
        if mode not in ('val', 'test'):
            raise ValueError(f"get_log_after_epoch only accepts 'val' or 'test', got {mode!r}")
        dataloader_len = self._get_dataloader_size(runner, mode)
        log_str = self._header(runner, mode, dataloader_len, dataloader_len, align=False)

        custom_cfg = [dict(cfg) for cfg in self.custom_cfg]
        custom_keys = [self._remove_prefix(cfg['data_src'], f'{mode}/') for cfg in custom_cfg]
        # Timings at epoch end are averaged over the whole epoch, not the last window.
        for key in ('time', 'data_time'):
            if key not in custom_keys:
                custom_cfg.append(dict(data_src=key, window_size='epoch', method_name='mean'))
        parsed_cfg = self._parse_windows_size(runner, batch_idx, custom_cfg)
        ori_tag = self._collect_scalars(parsed_cfg, runner, mode, self.log_with_hierarchy)
        non_scalar_tag = self._collect_non_scalars(runner, mode)

        # Metrics first, timings last.
        time_keys = (f'{mode}/time', f'{mode}/data_time', 'time', 'data_time')
        tag = OrderedDict((k, v) for k, v in ori_tag.items() if k not in time_keys)
        time_tag = OrderedDict((k, v) for k, v in ori_tag.items() if k in time_keys)

        log_items = []
        log_str += '  '
        for name, val in chain(tag.items(), non_scalar_tag.items(), time_tag.items()):
            if isinstance(val, float):
                val = f'{val:.{self.num_digits}f}'
            if isinstance(val, (torch.Tensor, np.ndarray)):
                val = f'\n{val}\n'
            log_items.append(f'{name}: {val}')
        log_str += '  '.join(log_items)

        if with_non_scalar:
            tag.update(non_scalar_tag)
        tag.update(time_tag)
        return tag, log_str

    def _collect_scalars(self, custom_cfg: List[dict], runner, mode: str,
                         reserve_prefix: bool = False) -> OrderedDict:
        """Statistics of the ``mode`` scalars: windowed mean or latest value, then custom_cfg."""
        mode_scalars = self._of_mode(runner.message_hub.log_scalars, mode, reserve_prefix)
        tag = OrderedDict()
        for key, buffer in mode_scalars.items():
            if self.mean_pattern.search(key) is not None:
                tag[key] = buffer.mean(self.window_size)
            else:
                tag[key] = buffer.current()
        for log_cfg in custom_cfg:
            log_cfg = dict(log_cfg)
            data_src = log_cfg.pop('data_src')
            log_name = log_cfg.pop('log_name', data_src)
            if reserve_prefix:
                data_src, log_name = f'{mode}/{data_src}', f'{mode}/{log_name}'
            if data_src in mode_scalars:
                tag[log_name] = mode_scalars[data_src].statistics(**log_cfg)
        return tag

    def _collect_non_scalars(self, runner, mode: str) -> OrderedDict:
        """Runtime info of ``mode`` (e.g. a confusion matrix a metric returned)."""
        return self._of_mode(runner.message_hub.runtime_info, mode, self.log_with_hierarchy)

    def _of_mode(self, entries: dict, mode: str, reserve_prefix: bool) -> OrderedDict:
        """The entries whose key starts with ``mode``, without the ``mode/`` prefix unless
        ``reserve_prefix``."""
        return OrderedDict(
            (key if reserve_prefix else self._remove_prefix(key, f'{mode}/'), value)
            for key, value in entries.items() if key.startswith(mode))

    def _parse_windows_size(self, runner, batch_idx: int, custom_cfg: List[dict]) -> List[dict]:
        """custom_cfg with ``'epoch'``/``'global'`` window sizes replaced by iteration counts."""
        parsed = [dict(cfg) for cfg in custom_cfg]
        for log_cfg in parsed:
            window_size = log_cfg.get('window_size')
            if window_size is None or isinstance(window_size, int):
                continue
            if window_size == 'epoch':
                log_cfg['window_size'] = batch_idx + 1
            elif window_size == 'global':
                log_cfg['window_size'] = runner.iter + 1
            else:
                raise TypeError(f'window_size should be int, epoch or global, but got invalid '
                                f'{window_size}')
        return parsed

    @staticmethod
    def _remove_prefix(string: str, prefix: str) -> str:
        return string[len(prefix):] if string.startswith(prefix) else string

    def _header(self, runner, mode: str, cur_iter: int, total: int, align: bool) -> str:
        """The start of each line: ``Epoch(train)  [1][ 10/100]  `` or ``Iter(val) [10/10]  ``.

        ``align`` is for the per-iteration lines. As in MMEngine 0.10, the iteration is then
        right-aligned (``[  9/270]`` under ``[100/270]``) and so is the epoch, on the width of
        ``max_epochs`` (3 counts "[", "]" and a space), when a train loop exists; a val-only run
        gets no space before its epoch. The end-of-epoch line has one space and no padding.
        """
        epoch_str = ' '
        if self.by_epoch and mode in ('train', 'val'):
            epoch_str = f'[{self._get_epoch(runner, mode)}]'
            if not align:
                epoch_str = f' {epoch_str}'
            elif runner.train_loop_built:
                epoch_str = epoch_str.rjust(len(str(runner.max_epochs)) + 3)
        kind = 'Epoch' if self.by_epoch else 'Iter'
        return f'{kind}({mode}){epoch_str}[{str(cur_iter).rjust(len(str(total)))}/{total}]  '

    def _get_epoch(self, runner, mode: str) -> int:
        """1-based epoch shown in the header.

        Validation runs after the train loop has already incremented ``runner.epoch``, so it shows
        ``runner.epoch`` as is; a val-only run shows 0.
        """
        if mode == 'train':
            return runner.epoch + 1
        if mode == 'val':
            return runner.epoch if runner.train_loop_built else 0
        raise ValueError(f"_get_epoch only accepts 'train' or 'val', got {mode!r}")

    def _get_iter(self, runner, batch_idx: int) -> int:
        """1-based iteration shown for training: within the epoch when ``by_epoch``, else the
        global one."""
        return batch_idx + 1 if self.by_epoch else runner.iter + 1

    def _get_cur_loop(self, runner, mode: str):
        """The runner's loop of ``mode`` (``'train'``, ``'val'`` or ``'test'``)."""
        if mode == 'train':
            return runner.train_loop
        if mode == 'val':
            return runner.val_loop
        return runner.test_loop

    def _get_dataloader_size(self, runner, mode: str) -> int:
        return len(self._get_cur_loop(runner, mode).dataloader)

    @staticmethod
    def _get_max_memory(runner) -> int:
        """Peak CUDA memory in MB since the previous call (the peak counter is reset)."""
        device = getattr(runner.model, 'output_device', None)
        mem_mb = int(torch.cuda.max_memory_allocated(device=device)) // (1024 * 1024)
        torch.cuda.reset_peak_memory_stats()
        return mem_mb
