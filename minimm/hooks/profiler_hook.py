"""ProfilerHook: profile the first epochs or iterations of training with ``torch.profiler``.

As MMEngine 0.10's ``ProfilerHook``: the profiler is entered in ``before_run``, stepped after every
training iteration, and closed after ``profile_times`` epochs (``by_epoch=True``) or iterations.
On closing it writes a Chrome trace to ``json_trace_path`` (open it at chrome://tracing or
https://ui.perfetto.dev). ``on_trace_ready`` is a callable,
``dict(type='log_trace', **table_kwargs)`` (print the ``key_averages()`` table) or
``dict(type='tb_trace', dir_name=...)`` (TensorBoard's profiler plugin), and ``schedule`` is
the keyword arguments of ``torch.profiler.schedule``.

This hook profiles the *model* (operators, memory, FLOPs). To see what the hooks themselves cost,
use ``Runner(profile_hooks=True)`` instead.

With both ``activity_with_cpu=False`` and ``activity_with_cuda=False`` the profiler records every
activity torch supports, as MMEngine's empty activity list did with the torch of its time (torch
2.14 refuses an empty list, so minimm passes ``None``, which means the same).
:func:`check_kineto` says whether this torch has the Kineto profiler backend.

Different from MMEngine: ``activity_with_cuda=True`` without CUDA fails in the constructor, an
``on_trace_ready`` that is neither a callable, a dict nor None fails there too (MMEngine: at
``before_run``), ``tb_trace`` does not need ``torch-tb-profiler`` (it writes plain files; the
plugin only views them), and a run that stops before ``profile_times`` is reached (early stopping,
an exception) still closes the profiler in ``after_run``. Every rank profiles, and rank 0
alone writes ``json_trace_path``. Left out: the NPU
profiler.
"""
import os.path as osp
import warnings
from typing import Callable, Optional, Union

import torch
from torch import profiler

from ..dist import is_main_process
from ..registry import HOOKS
from .hook import DATA_BATCH, Hook


def check_kineto() -> bool:
    """Whether torch was built with Kineto, the backend ``torch.profiler`` records with."""
    try:
        return bool(torch.autograd.kineto_available())
    except AttributeError:
        warnings.warn('NO KINETO')
        return False


@HOOKS.register_module()
class ProfilerHook(Hook):
    """Profile training with ``torch.profiler``; keyword-only arguments as in MMEngine 0.10.

    Args:
        by_epoch: count ``profile_times`` in epochs (True) or iterations (False).
        profile_times: how many epochs/iterations to profile. With ``by_epoch`` only 1 is allowed,
            as in MMEngine (a profiled epoch is slow; one is enough to read the summary).
        activity_with_cpu / activity_with_cuda: the profiler activities to record.
        schedule: kwargs of ``torch.profiler.schedule`` (``wait``, ``warmup``, ``active``...).
        on_trace_ready: a callable, or a dict with ``type`` 'log_trace' or 'tb_trace'.
        record_shapes, profile_memory, with_stack, with_flops: passed to the profiler.
        json_trace_path: where to write the Chrome trace when profiling ends (None: no file).
    """

    priority = 'VERY_LOW'
    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {
        '*': '',
        'after_train_iter after_train_epoch': '-> file:{json_trace_path}(rank0)',
    }

    def __init__(self, *, by_epoch: bool = True, profile_times: int = 1,
                 activity_with_cpu: bool = True, activity_with_cuda: bool = False,
                 schedule: Optional[dict] = None,
                 on_trace_ready: Union[Callable, dict, None] = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 json_trace_path: Optional[str] = None) -> None:
        if not isinstance(by_epoch, bool):
            raise TypeError(f'by_epoch must be a bool, but got {by_epoch!r}')
        if isinstance(profile_times, bool) or not isinstance(profile_times, int) \
                or profile_times < 1:
            raise ValueError(f'profile_times must be a positive int, but got {profile_times!r}')
        if by_epoch and profile_times > 1:
            raise ValueError(f'by_epoch=True profiles whole epochs; profile_times={profile_times} '
                             'would slow down as many epochs. Profile 1 epoch, or set '
                             'by_epoch=False and count iterations')
        if activity_with_cuda and not torch.cuda.is_available():
            raise ValueError('activity_with_cuda=True, but CUDA is not available')
        self.activities = []
        if activity_with_cpu:
            self.activities.append(profiler.ProfilerActivity.CPU)
        if activity_with_cuda:
            self.activities.append(profiler.ProfilerActivity.CUDA)
        if schedule is not None and not isinstance(schedule, dict):
            raise TypeError(f'schedule must be a dict of torch.profiler.schedule arguments, '
                            f'but got {schedule!r}')
        if not (on_trace_ready is None or callable(on_trace_ready)
                or isinstance(on_trace_ready, dict)):
            raise ValueError('``on_trace_ready`` should be a handler, or dict, or None, '
                             f'but got {on_trace_ready!r}')
        self.by_epoch = by_epoch
        self.profile_times = profile_times
        self.schedule = None if schedule is None else profiler.schedule(**schedule)
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.json_trace_path = json_trace_path
        self.profiler = None
        # As in MMEngine: open until the profiling window closes; before_run sets the profiler.
        self._closed = False

    def before_run(self, runner) -> None:
        max_times = runner.max_epochs if self.by_epoch else runner.max_iters
        if max_times < self.profile_times:
            unit = 'epochs' if self.by_epoch else 'iterations'
            raise ValueError(f'profile_times={self.profile_times} is more than the {max_times} '
                             f'training {unit}')
        self.profiler = profiler.profile(
            activities=self.activities or None, schedule=self.schedule,
            on_trace_ready=self._parse_trace_config(runner), record_shapes=self.record_shapes,
            profile_memory=self.profile_memory, with_stack=self.with_stack,
            with_flops=self.with_flops)
        self.profiler.__enter__()
        runner.logger.info('the profiler is profiling...')

    def _parse_trace_config(self, runner) -> Optional[Callable]:
        """The ``on_trace_ready`` handler the profiler gets, from the hook's ``on_trace_ready``."""
        if self.on_trace_ready is None or callable(self.on_trace_ready):
            return self.on_trace_ready
        if not isinstance(self.on_trace_ready, dict):
            raise ValueError('``on_trace_ready`` should be a handler, or dict, or None, '
                             f'but got {type(self.on_trace_ready)}')
        trace_cfg = dict(self.on_trace_ready)
        trace_type = trace_cfg.pop('type', None)
        if trace_type == 'log_trace':
            def _log_handler(_profile):
                print(_profile.key_averages().table(**trace_cfg))

            return _log_handler
        if trace_type == 'tb_trace':
            dir_name = trace_cfg.pop('dir_name', 'tf_tracing_logs')
            dir_name = osp.join(runner.log_dir, dir_name) if not osp.isabs(dir_name) else dir_name
            runner.logger.info(f'trace_files of ProfilerHook will be saved to {dir_name}.')
            if self.json_trace_path is not None:
                warnings.warn('When using tensorboard_trace, it is recommended to save json '
                              'files by setting ``worker_name`` instead of ``json_trace_path``')
            return profiler.tensorboard_trace_handler(dir_name, **trace_cfg)
        raise ValueError('trace_type should be "log_trace" or "tb_trace", '
                         f'but got {trace_type!r}')

    def after_train_iter(self, runner, batch_idx: int, data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        if self._closed:
            return
        self.profiler.step()
        if not self.by_epoch and runner.iter + 1 == self.profile_times:
            self._export_chrome_trace(runner)

    def after_train_epoch(self, runner) -> None:
        if not self._closed and self.by_epoch and runner.epoch + 1 == self.profile_times:
            self._export_chrome_trace(runner)

    def after_run(self, runner) -> None:
        if not self._closed and self.profiler is not None:
            self._closed = True
            self.profiler.__exit__(None, None, None)

    def _export_chrome_trace(self, runner) -> None:
        self._closed = True
        runner.logger.info('the profiler is writing its results; this may take a while')
        self.profiler.__exit__(None, None, None)
        if self.json_trace_path is not None and is_main_process():  # one file: rank 0 writes it
            self.profiler.export_chrome_trace(self.json_trace_path)
            runner.logger.info(f'chrome trace written to {self.json_trace_path}')
