"""ProfilerHook, MMCV 1.7's: run ``torch.profiler`` over the first ``profile_iters`` epochs (or
iterations) on rank 0, then stop it and optionally write a Chrome trace.

``on_trace_ready`` says what to do with each finished trace: a callable taking the profiler,
``dict(type='log_trace', **table_args)`` to print ``key_averages().table(...)``, or
``dict(type='tb_trace', dir_name=...)`` for TensorBoard files.

Different from MMCV, on purpose: a relative ``json_trace_path`` goes into the work dir; the CUDA
activity is dropped when there is no GPU (torch refuses it); ``tb_trace`` does not require the
``torch_tb_profiler`` package (only TensorBoard's viewer needs it).
"""
import os.path as osp
import warnings
from typing import Callable, List, Optional, Union

import torch
from torch import profiler

from ..dist_utils import master_only
from .hook import HOOKS, Hook

_ACTIVITIES = {'cpu': profiler.ProfilerActivity.CPU, 'cuda': profiler.ProfilerActivity.CUDA}


@HOOKS.register_module()
class ProfilerHook(Hook):
    """MMCV 1.7's arguments: ``activities`` a list of ``'cpu'``/``'cuda'``, ``schedule`` the
    keyword arguments of ``torch.profiler.schedule``, the rest ``torch.profiler.profile``'s."""

    # What each stage reads -> writes (minimm's addition; minimm/dataflow.py checks the order).
    dataflow = {'*': '', 'after_train_epoch after_train_iter': '-> file:{json_trace_path}(rank0)'}

    def __init__(self, by_epoch: bool = True, profile_iters: int = 1,
                 activities: List[str] = ['cpu', 'cuda'], schedule: Optional[dict] = None,
                 on_trace_ready: Union[Callable, dict, None] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, json_trace_path: Optional[str] = None) -> None:
        assert isinstance(by_epoch, bool), '``by_epoch`` should be a boolean.'
        if profile_iters < 1:
            raise ValueError(f'profile_iters should be greater than 0, but got {profile_iters}')
        if not isinstance(activities, list):
            raise ValueError(f'activities should be list, but got {type(activities)}')
        self.by_epoch = by_epoch
        self.profile_iters = profile_iters
        self.activities = []
        for name in activities:
            kind = name.lower()
            if kind not in _ACTIVITIES:
                raise ValueError(f'activity should be "cpu" or "cuda", but got {kind}')
            if kind == 'cpu' or torch.cuda.is_available():
                self.activities.append(_ACTIVITIES[kind])
        self.schedule = None if schedule is None else profiler.schedule(**schedule)
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.json_trace_path = json_trace_path

    def _trace_handler(self, runner) -> Optional[Callable]:
        """The callable ``torch.profiler`` gets as ``on_trace_ready``, from the hook's setting."""
        setting = self.on_trace_ready
        if setting is None or callable(setting):
            return setting
        if not isinstance(setting, dict):
            raise ValueError('on_trace_ready should be handler, dict or None, '
                             f'but got {type(setting)}')
        table_args = dict(setting)
        kind = table_args.pop('type')
        if kind == 'log_trace':
            return lambda prof: print(prof.key_averages().table(**table_args))
        if kind == 'tb_trace':
            # osp.join keeps an absolute dir_name as it is; a relative one lands in the work dir.
            dir_name = osp.join(runner.work_dir, table_args.pop('dir_name', 'tf_tracing_logs'))
            runner.logger.info(f'tracing files of ProfilerHook will be saved to {dir_name}.')
            return profiler.tensorboard_trace_handler(dir_name, **table_args)
        raise ValueError(f'trace_type should be "log_trace" or "tb_trace", but got {kind}')

    @master_only
    def before_run(self, runner):
        planned = runner.max_epochs if self.by_epoch else runner.max_iters
        if self.profile_iters > planned:
            raise ValueError(f'self.profile_iters should not be greater than {planned}')
        handler = self._trace_handler(runner)
        if self.by_epoch and runner.max_epochs > 1:
            warnings.warn(f'profiler will profile {runner.max_epochs} epochs instead of 1 epoch. '
                          'Since profiler will slow down the training, it is recommended to '
                          'train 1 epoch with ProfilerHook and adjust your setting according to '
                          'the profiler summary. During normal training (epoch > 1), you may '
                          'disable the ProfilerHook.')
        self.profiler = profiler.profile(
            activities=self.activities, schedule=self.schedule, on_trace_ready=handler,
            record_shapes=self.record_shapes, profile_memory=self.profile_memory,
            with_stack=self.with_stack, with_flops=self.with_flops)
        self.profiler.__enter__()
        runner.logger.info('profiler is profiling...')

    @master_only
    def after_train_epoch(self, runner):
        if self.by_epoch and runner.epoch + 1 == self.profile_iters:
            self._stop(runner)

    @master_only
    def after_train_iter(self, runner):
        self.profiler.step()
        if not self.by_epoch and runner.iter + 1 == self.profile_iters:
            self._stop(runner)

    def _stop(self, runner):
        runner.logger.info('profiler may take a few minutes...')
        self.profiler.__exit__(None, None, None)
        if self.json_trace_path is not None:
            self.profiler.export_chrome_trace(osp.join(runner.work_dir, self.json_trace_path))
