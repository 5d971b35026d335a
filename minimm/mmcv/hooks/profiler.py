"""ProfilerHook, MMCV 1.x's: ``torch.profiler`` around the first ``profile_iters`` epochs (or
iterations), on rank 0; ``on_trace_ready`` is a callable, ``dict(type='log_trace', ...)`` (a table)
or ``dict(type='tb_trace', ...)`` (TensorBoard files). Different from MMCV 1.7: a relative
``json_trace_path`` goes into the work dir, and CUDA activity is dropped without CUDA."""
import os.path as osp

import torch
from torch import profiler

from minimm.dist import master_only

from .hook import HOOKS, Hook


@HOOKS.register_module()
class ProfilerHook(Hook):
    """Arguments are MMCV 1.7's (``schedule`` is a dict of ``torch.profiler.schedule`` args)."""

    def __init__(self, by_epoch: bool = True, profile_iters: int = 1, activities=('cpu', 'cuda'),
                 schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 json_trace_path=None):
        assert isinstance(by_epoch, bool), '``by_epoch`` should be a boolean.'
        if profile_iters < 1:
            raise ValueError(f'profile_iters should be greater than 0, but got {profile_iters}')
        kinds = {'cpu': profiler.ProfilerActivity.CPU, 'cuda': profiler.ProfilerActivity.CUDA}
        if not all(isinstance(a, str) and a.lower() in kinds for a in activities):
            raise ValueError(f'activities should be a list of "cpu"/"cuda", but got {activities}')
        self.activities = [kinds[a.lower()] for a in activities
                           if a.lower() == 'cpu' or torch.cuda.is_available()]
        self.by_epoch, self.profile_iters = by_epoch, profile_iters
        self.schedule = profiler.schedule(**schedule) if schedule is not None else None
        self.on_trace_ready, self.json_trace_path = on_trace_ready, json_trace_path
        self.options = dict(record_shapes=record_shapes, profile_memory=profile_memory,
                            with_stack=with_stack, with_flops=with_flops)

    def _trace_handler(self, runner):
        if callable(self.on_trace_ready) or self.on_trace_ready is None:
            return self.on_trace_ready
        if not isinstance(self.on_trace_ready, dict):
            raise ValueError('on_trace_ready should be a callable or a dict, but got '
                             f'{type(self.on_trace_ready)}')
        cfg = dict(self.on_trace_ready)
        kind = cfg.pop('type')
        if kind == 'log_trace':
            return lambda prof: print(prof.key_averages().table(**cfg))
        if kind == 'tb_trace':
            cfg.setdefault('dir_name', osp.join(runner.work_dir, 'tf_tracing_logs'))
            return profiler.tensorboard_trace_handler(**cfg)
        raise ValueError(f'trace_type should be "log_trace" or "tb_trace", but got {kind}')

    @master_only
    def before_run(self, runner) -> None:
        limit = runner.max_epochs if self.by_epoch else runner.max_iters
        if limit < self.profile_iters:
            raise ValueError(f'self.profile_iters should not be greater than {limit}')
        self.profiler = profiler.profile(activities=self.activities, schedule=self.schedule,
                                         on_trace_ready=self._trace_handler(runner), **self.options)
        self.profiler.__enter__()
        runner.logger.info('profiler is profiling...')

    def _stop(self, runner) -> None:
        runner.logger.info('profiler may take a few minutes...')
        self.profiler.__exit__(None, None, None)
        if self.json_trace_path is not None:
            self.profiler.export_chrome_trace(osp.join(runner.work_dir, self.json_trace_path))

    @master_only
    def after_train_epoch(self, runner) -> None:
        if self.by_epoch and runner.epoch == self.profile_iters - 1:
            self._stop(runner)

    @master_only
    def after_train_iter(self, runner) -> None:
        self.profiler.step()
        if not self.by_epoch and runner.iter == self.profile_iters - 1:
            self._stop(runner)
