"""LogProcessor: turn the MessageHub's scalars into MMEngine's log lines and JSON tags.

LoggerHook decides *when* to log; this class decides *what the line says*. It reads every scalar
whose key starts with the mode (``train/``, ``val/``, ``test/``): the mean over the last
``window_size`` updates for keys matching ``mean_pattern`` (losses, timings), the latest value for
the rest (``lr``, metrics). The lines look as in MMEngine 0.10::

    Epoch(train)  [1][ 10/100]  lr: 1.0000e-02  eta: 0:00:12  time: 0.0123  data_time: 0.0012  ...
    Iter(train) [  10/1000]  lr: 1.0000e-02  eta: ...
    Epoch(val) [1][10/10]    accuracy/top1: 90.0000  data_time: 0.0012  time: 0.0034

Counters are padded so that successive lines align; ``memory`` (peak MB) appears only on CUDA.
Each call also returns ``tag``, the dict LoggerHook sends to the visualizer (the JSON lines).

``custom_cfg`` adds or overrides statistics, e.g.
``[dict(data_src='loss', method_name='mean', window_size='global', log_name='loss_global')]``;
``window_size`` may be an int, ``'epoch'`` (since the epoch started) or ``'global'`` (whole run).

Left out compared with MMEngine: MUSA/NPU memory queries.
"""
import datetime
import re
from collections import OrderedDict
from typing import List, Optional, Tuple

import numpy as np
import torch

from ..registry import LOG_PROCESSORS


def _strip(key: str, prefix: str) -> str:
    return key[len(prefix):] if key.startswith(prefix) else key


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
        self.window_size, self.by_epoch = window_size, by_epoch
        self.custom_cfg = list(custom_cfg or [])
        self.num_digits = num_digits
        self.log_with_hierarchy = log_with_hierarchy
        self.mean_pattern = re.compile(mean_pattern)
        self._check_custom_cfg()

    def _check_custom_cfg(self) -> None:
        names = set()
        for entry in self.custom_cfg:
            missing = [key for key in ('data_src', 'method_name') if key not in entry]
            if missing:
                raise KeyError(f'each custom_cfg entry needs a {missing[0]}, got {entry}')
            name = entry.get('log_name', entry['data_src'])
            # two entries writing one name would silently overwrite each other
            if name in names:
                raise ValueError(f'Found duplicate {name} for {entry["data_src"]}. Please check '
                                 'your `custom_cfg` for `log_processor`: give each entry its own '
                                 '`log_name`.')
            names.add(name)
            if entry.get('window_size') == 'epoch' and not self.by_epoch:
                raise ValueError('window_size cannot be epoch if LogProcessor.by_epoch is False.')

    def _fmt(self, value) -> str:
        return f'{value:.{self.num_digits}f}' if isinstance(value, float) else f'{value}'

    # --- the two lines LoggerHook asks for --------------------------------------------------------

    def get_log_after_iter(self, runner, batch_idx: int, mode: str) -> Tuple[dict, str]:
        """The tag dict and log line after iteration ``batch_idx`` of ``mode``."""
        if mode not in ('train', 'val', 'test'):
            raise ValueError(f"mode must be 'train', 'val' or 'test', got {mode!r}")
        windows = self._parse_windows_size(runner, batch_idx, self.custom_cfg)
        # `shown` feeds the text line (short keys); `tag` goes to the vis backends.
        shown = self._collect_scalars(windows, runner, mode)
        tag = (self._collect_scalars(windows, runner, mode, reserve_prefix=True)
               if self.log_with_hierarchy else OrderedDict(shown))

        if mode == 'train' and not self.by_epoch:
            line = self._header(runner, mode, self._get_iter(runner, batch_idx),
                                runner.max_iters, align=True)
        else:
            line = self._header(runner, mode, batch_idx + 1,
                                len(self._get_cur_loop(runner, mode).dataloader), align=True)
        # Learning rates ('lr', 'base.lr'...) come first, in the e format; the line has them
        # even when empty, as two spaces.
        lrs = []
        for key in [k for k in tag if k.endswith('lr')]:
            short = _strip(key, f'{mode}/')
            shown.pop(short)
            lrs.append(f'{short}: {tag[key]:.{self.num_digits}e}')
        line += ' '.join(lrs) + '  '

        if self.by_epoch and mode != 'test':
            tag['epoch'] = self._get_epoch(runner, mode)
        tag['iter'] = runner.iter + 1 if runner.train_loop_built else 0

        # IterTimerHook writes the eta with time and data_time: all three, or none.
        has_timing = 'time' in shown and 'data_time' in shown
        if has_timing and 'eta' in runner.message_hub.runtime_info:
            eta = datetime.timedelta(seconds=int(runner.message_hub.get_info('eta')))
            line += f'eta: {eta}  '
            for key in ('time', 'data_time'):
                line += f'{key}: {shown.pop(key):.{self.num_digits}f}  '
        if torch.cuda.is_available():
            tag['memory'] = self._get_max_memory(runner)
            line += f'memory: {tag["memory"]}  '

        # The rest of the scalars, on train lines. A val line would keep only losses (metrics
        # mean something once the epoch is over), but MMEngine looks for a 'val/loss' prefix
        # the short keys never have: a val line ends here. A test line always does.
        line += '  '.join(f'{k}: {self._fmt(v)}' for k, v in shown.items()
                          if mode == 'train' or (mode == 'val' and k.startswith('val/loss')))
        return tag, line

    def get_log_after_epoch(self, runner, batch_idx: int, mode: str,
                            with_non_scalar: bool = False) -> Tuple[dict, str]:
        """The tag dict and log line at the end of a val/test epoch (the metrics line)."""
        if mode not in ('val', 'test'):
            raise ValueError(f"get_log_after_epoch only accepts 'val' or 'test', got {mode!r}")
        # Over a whole epoch the timings are means since the epoch began, unless custom_cfg
        # says otherwise.
        cfg = [dict(entry) for entry in self.custom_cfg]
        covered = {_strip(entry['data_src'], f'{mode}/') for entry in cfg}
        cfg += [dict(data_src=key, window_size='epoch', method_name='mean')
                for key in ('time', 'data_time') if key not in covered]
        scalars = self._collect_scalars(self._parse_windows_size(runner, batch_idx, cfg),
                                        runner, mode, self.log_with_hierarchy)
        others = self._collect_non_scalars(runner, mode)

        # metrics first, then non-scalar results, the timings last
        timing_keys = {'time', 'data_time', f'{mode}/time', f'{mode}/data_time'}
        metrics = OrderedDict((k, v) for k, v in scalars.items() if k not in timing_keys)
        timings = OrderedDict((k, v) for k, v in scalars.items() if k in timing_keys)
        items = []
        for name, value in [*metrics.items(), *others.items(), *timings.items()]:
            if isinstance(value, (torch.Tensor, np.ndarray)):
                items.append(f'{name}: \n{value}\n')  # an array reads better on lines of its own
            else:
                items.append(f'{name}: {self._fmt(value)}')
        total = len(self._get_cur_loop(runner, mode).dataloader)
        line = self._header(runner, mode, total, total, align=False) + '  ' + '  '.join(items)

        tag = metrics
        if with_non_scalar:
            tag.update(others)
        tag.update(timings)
        return tag, line

    # --- reading the MessageHub -------------------------------------------------------------------

    def _collect_scalars(self, custom_cfg: List[dict], runner, mode: str,
                         reserve_prefix: bool = False) -> OrderedDict:
        """The ``mode`` scalars (windowed mean or latest value), then the custom_cfg
        statistics."""
        prefix = f'{mode}/'
        buffers = OrderedDict()
        for key, buffer in runner.message_hub.log_scalars.items():
            if key.startswith(mode):
                buffers[key if reserve_prefix else _strip(key, prefix)] = buffer
        stats = OrderedDict()
        for key, buffer in buffers.items():
            averaged = self.mean_pattern.search(key) is not None
            stats[key] = buffer.mean(self.window_size) if averaged else buffer.current()
        for entry in custom_cfg:
            kwargs = {k: v for k, v in entry.items() if k not in ('data_src', 'log_name')}
            src, name = entry['data_src'], entry.get('log_name', entry['data_src'])
            if reserve_prefix:
                src, name = prefix + src, prefix + name
            if src in buffers:
                stats[name] = buffers[src].statistics(**kwargs)
        return stats

    def _collect_non_scalars(self, runner, mode: str) -> OrderedDict:
        """Runtime info of ``mode`` (e.g. a confusion matrix a metric returned)."""
        keep = self.log_with_hierarchy
        return OrderedDict((key if keep else _strip(key, f'{mode}/'), value)
                           for key, value in runner.message_hub.runtime_info.items()
                           if key.startswith(mode))

    def _parse_windows_size(self, runner, batch_idx: int, custom_cfg: List[dict]) -> List[dict]:
        """A copy of custom_cfg whose ``'epoch'``/``'global'`` window sizes are iteration
        counts."""
        parsed = [dict(entry) for entry in custom_cfg]
        for entry in parsed:
            size = entry.get('window_size')
            if size == 'epoch':
                entry['window_size'] = batch_idx + 1
            elif size == 'global':
                # read only when asked: reading runner.iter builds the train loop
                entry['window_size'] = runner.iter + 1
            elif size is not None and not isinstance(size, int):
                raise TypeError(f'window_size should be int, epoch or global, but got invalid '
                                f'{size}')
        return parsed

    # --- counters -------------------------------------------------------------------------------

    def _header(self, runner, mode: str, cur_iter: int, total: int, align: bool) -> str:
        """The start of each line: ``Epoch(train)  [1][ 10/100]  `` or ``Iter(val) [10/10]  ``.

        ``align`` is for the per-iteration lines. As in MMEngine 0.10, the iteration is then
        right-aligned (``[  9/270]`` under ``[100/270]``) and so is the epoch, on the width of
        ``max_epochs`` (3 counts "[", "]" and a space), when a train loop exists; a val-only run
        gets no space before its epoch. The end-of-epoch line has one space and no padding.
        """
        kind = 'Epoch' if self.by_epoch else 'Iter'
        counter = f'[{str(cur_iter).rjust(len(str(total)))}/{total}]  '
        if not self.by_epoch or mode == 'test':
            return f'{kind}({mode}) {counter}'
        epoch = f'[{self._get_epoch(runner, mode)}]'
        if not align:
            epoch = ' ' + epoch
        elif runner.train_loop_built:
            epoch = epoch.rjust(len(str(runner.max_epochs)) + 3)
        return f'{kind}({mode}){epoch}{counter}'

    def _get_epoch(self, runner, mode: str) -> int:
        """The epoch shown, from 1. Validation comes after the train loop has moved
        ``runner.epoch`` on, so it shows it as is; a val-only run shows 0."""
        if mode == 'train':
            return runner.epoch + 1
        if mode == 'val':
            return runner.epoch if runner.train_loop_built else 0
        raise ValueError(f"_get_epoch only accepts 'train' or 'val', got {mode!r}")

    def _get_iter(self, runner, batch_idx: int) -> int:
        """The training iteration shown, from 1: within the epoch when ``by_epoch``."""
        return (batch_idx if self.by_epoch else runner.iter) + 1

    def _get_cur_loop(self, runner, mode: str):
        """The runner's ``train_loop``, ``val_loop`` or ``test_loop``."""
        return getattr(runner, f'{mode}_loop')

    @staticmethod
    def _get_max_memory(runner) -> int:
        """Peak CUDA memory in MB since the previous call (the peak counter is reset)."""
        device = getattr(runner.model, 'output_device', None)
        peak = torch.cuda.max_memory_allocated(device=device)
        torch.cuda.reset_peak_memory_stats()
        return int(peak) // 2**20
