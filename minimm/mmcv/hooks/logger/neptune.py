"""NeptuneLoggerHook: MMCV 1.x's logger for Neptune.

``neptune.new`` is imported when the hook is built, into ``self.neptune``; the run that
``neptune.init(**init_kwargs)`` starts before training is ``self.run``, and each tag is appended
to its own series with ``run[tag].log`` at the global iteration counted from 1. As in MMCV,
``reset_flag`` defaults to True and ``before_run`` does not look for the last logger hook.
"""
from typing import Dict, Optional

from ...dist_utils import master_only
from ..hook import HOOKS
from .base import LoggerHook


@HOOKS.register_module()
class NeptuneLoggerHook(LoggerHook):
    """Log to Neptune; ``init_kwargs`` go to ``neptune.init`` (``project``, ``api_token`` (the
    ``NEPTUNE_API_TOKEN`` variable is the safer place), ``name``, ``mode``...)."""

    def __init__(self, init_kwargs: Optional[Dict] = None, interval: int = 10,
                 ignore_last: bool = True, reset_flag: bool = True, with_step: bool = True,
                 by_epoch: bool = True):
        super().__init__(interval=interval, ignore_last=ignore_last, reset_flag=reset_flag,
                         by_epoch=by_epoch)
        self.import_neptune()
        self.init_kwargs = init_kwargs
        self.with_step = with_step

    def import_neptune(self) -> None:
        try:
            import neptune.new as neptune
        except ImportError:
            raise ImportError('Please run "pip install neptune-client" to install neptune')
        self.neptune = neptune
        self.run = None  # started in before_run

    @master_only
    def before_run(self, runner) -> None:
        # MMCV does not call LoggerHook.before_run here (see the module docstring)
        self.run = self.neptune.init(**(self.init_kwargs or {}))

    @master_only
    def log(self, runner) -> None:
        step = self.get_iter(runner)
        tags = self.get_loggable_tags(runner)
        if self.with_step:
            step_kwargs = {'step': step}
        else:
            # Neptune numbers each series' points itself; the iteration gets a series of its
            # own. (MMCV added it to the dict it was iterating over, which raised.)
            step_kwargs = {}
            tags['global_step'] = step
        for name, value in tags.items():
            self.run[name].log(value, **step_kwargs)

    @master_only
    def after_run(self, runner) -> None:
        self.run.stop()
