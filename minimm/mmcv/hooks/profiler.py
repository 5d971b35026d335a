"""ProfilerHook, as MMCV 1.7's: ``torch.profiler`` around the first ``profile_iters`` epochs (or
iterations), on rank 0; ``on_trace_ready`` is a callable, ``dict(type='log_trace', ...)`` (print a
table) or ``dict(type='tb_trace', ...)`` (TensorBoard files). Different from MMCV 1.7, on purpose: a
relative ``json_trace_path`` goes into the work dir, the CUDA activity is dropped when there is no
GPU, and ``tb_trace`` does not require the ``torch_tb_profiler`` package (only TensorBoard's viewer
needs it).
"""
import os.path as osp
import warnings
from typing import Callable, List, Optional, Union

import torch
from torch import profiler

from ..dist_utils import master_only
from .hook import HOOKS, Hook


@HOOKS.register_module()
class ProfilerHook(Hook):
    """Arguments are MMCV 1.7's: ``activities`` a list of 'cpu'/'cuda', ``schedule`` a dict of
    ``torch.profiler.schedule`` arguments, the rest ``torch.profiler.profile``'s."""

    def __init__(self,
                 by_epoch: bool = True,
                 profile_iters: int = 1,
                 activities: List[str] = ['cpu', 'cuda'],
                 schedule: Optional[dict] = None,
                 on_trace_ready: Optional[Union[Callable, dict]] = None,
                 record_shapes: bool = False,
                 profile_memory: bool = False,
                 with_stack: bool = False,
                 with_flops: bool = False,
                 json_trace_path: Optional[str] = None) -> None:
        assert isinstance(by_epoch, bool), '``by_epoch`` should be a boolean.'
        self.by_epoch = by_epoch

        if profile_iters < 1:
            raise ValueError(f'profile_iters should be greater than 0, but got {profile_iters}')
        self.profile_iters = profile_iters

        if not isinstance(activities, list):
            raise ValueError(f'activities should be list, but got {type(activities)}')
        self.activities = []
        for activity in activities:
            activity = activity.lower()
            if activity == 'cpu':
                self.activities.append(profiler.ProfilerActivity.CPU)
            elif activity == 'cuda':
                if torch.cuda.is_available():  # torch refuses CUDA activity without a GPU
                    self.activities.append(profiler.ProfilerActivity.CUDA)
            else:
                raise ValueError(f'activity should be "cpu" or "cuda", but got {activity}')

        if schedule is not None:
            self.schedule = profiler.schedule(**schedule)
        else:
            self.schedule = None

        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.json_trace_path = json_trace_path

    @master_only
    def before_run(self, runner):
        if self.by_epoch and runner.max_epochs < self.profile_iters:
            raise ValueError(f'self.profile_iters should not be greater than {runner.max_epochs}')

        if not self.by_epoch and runner.max_iters < self.profile_iters:
            raise ValueError(f'self.profile_iters should not be greater than {runner.max_iters}')

        if callable(self.on_trace_ready):  # handler
            _on_trace_ready = self.on_trace_ready
        elif isinstance(self.on_trace_ready, dict):  # config of handler
            trace_cfg = self.on_trace_ready.copy()
            trace_type = trace_cfg.pop('type')  # log_trace handler
            if trace_type == 'log_trace':

                def _log_handler(prof):
                    print(prof.key_averages().table(**trace_cfg))

                _on_trace_ready = _log_handler
            elif trace_type == 'tb_trace':  # tensorboard_trace handler
                if 'dir_name' not in trace_cfg:
                    trace_cfg['dir_name'] = osp.join(runner.work_dir, 'tf_tracing_logs')
                elif not osp.isabs(trace_cfg['dir_name']):
                    trace_cfg['dir_name'] = osp.join(runner.work_dir, trace_cfg['dir_name'])
                runner.logger.info('tracing files of ProfilerHook will be saved to '
                                   f"{trace_cfg['dir_name']}.")
                _on_trace_ready = torch.profiler.tensorboard_trace_handler(**trace_cfg)
            else:
                raise ValueError('trace_type should be "log_trace" or '
                                 f'"tb_trace", but got {trace_type}')
        elif self.on_trace_ready is None:
            _on_trace_ready = None
        else:
            raise ValueError('on_trace_ready should be handler, dict or None, '
                             f'but got {type(self.on_trace_ready)}')

        if self.by_epoch and runner.max_epochs > 1:
            warnings.warn(f'profiler will profile {runner.max_epochs} epochs instead of 1 epoch. '
                          'Since profiler will slow down the training, it is recommended to '
                          'train 1 epoch with ProfilerHook and adjust your setting according to '
                          'the profiler summary. During normal training (epoch > 1), you may '
                          'disable the ProfilerHook.')

        self.profiler = torch.profiler.profile(
            activities=self.activities,
            schedule=self.schedule,
            on_trace_ready=_on_trace_ready,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            with_flops=self.with_flops)

        self.profiler.__enter__()
        runner.logger.info('profiler is profiling...')

    @master_only
    def after_train_epoch(self, runner):
        if self.by_epoch and runner.epoch == self.profile_iters - 1:
            self._stop(runner)

    @master_only
    def after_train_iter(self, runner):
        self.profiler.step()
        if not self.by_epoch and runner.iter == self.profile_iters - 1:
            self._stop(runner)

    def _stop(self, runner):
        """End profiling (MMCV writes this out in both stages above)."""
        runner.logger.info('profiler may take a few minutes...')
        self.profiler.__exit__(None, None, None)
        if self.json_trace_path is not None:
            self.profiler.export_chrome_trace(osp.join(runner.work_dir, self.json_trace_path))
